"""$dynamicRef made static where the dynamic scope cannot change its target
(structgen.frontends.json_schema.dynamic_refs), checked against jsonschema on random instances
with the mask against brute force at prefixes; a scope-dependent one is refused by pointer."""
from __future__ import annotations

import json
import random

import jsonschema
import pytest

import structgen as sg
from structgen.frontends.json_schema.dynamic_refs import resolve_dynamic_refs
from structgen.vocab import Vocabulary
from tests.test_json_schema_combine import _PIECES, accepts, rand_leaf, rand_value


@pytest.fixture(scope="module")
def tiny_vocab():
    return Vocabulary.from_bytes(_PIECES + [b""], eos_ids=[len(_PIECES)])


def tree(leaf):
    """A recursive list schema whose elements go through one $dynamicAnchor."""
    return {"$id": "http://ex.test/tree", "$dynamicAnchor": "node",
            "anyOf": [leaf, {"type": "array", "items": {"$dynamicRef": "#node"}, "maxItems": 2}]}


def test_single_anchor_is_a_static_ref(tiny_vocab):
    r = random.Random(77)
    checked = 0
    for _ in range(25):
        schema = tree(rand_leaf(r))
        try:
            cg = sg.compile(sg.Grammar.from_json_schema(schema), tiny_vocab, cache=False)
        except (sg.Unsupported, sg.LimitExceeded):
            continue
        val = jsonschema.Draft202012Validator(schema)
        for _ in range(25):
            v = rand_value(r, 3)
            text = json.dumps(v, separators=(",", ":"))
            assert accepts(cg, tiny_vocab, text, r, brute=checked % 50 == 0) == val.is_valid(v), (schema, text)
            checked += 1
    assert checked > 400


def test_pointer_and_plain_anchor_targets_behave_as_ref():
    s = {"$defs": {"a": {"$anchor": "x", "type": "integer"}}, "properties": {"p": {"$dynamicRef": "#x"},
                                                                             "q": {"$dynamicRef": "#/$defs/a"}}}
    out = resolve_dynamic_refs(s)
    assert out["properties"] == {"p": {"$ref": "#x"}, "q": {"$ref": "#/$defs/a"}}
    assert s["properties"]["p"] == {"$dynamicRef": "#x"}  # the input is not changed


def test_scope_dependent_target_is_refused_by_pointer():
    s = {"$id": "http://ex.test/root", "$dynamicAnchor": "m", "items": {"$dynamicRef": "#m"},
         "$defs": {"ext": {"$id": "ext", "$dynamicAnchor": "m", "type": "string"}}}
    with pytest.raises(sg.Unsupported) as e:
        sg.Grammar.from_json_schema(s)
    assert "#/items/$dynamicRef" in str(e.value)
