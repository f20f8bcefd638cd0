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


def extensible(leaf, variant: int):
    """Scope-dependent targets: a generic list whose items go through ``$dynamicAnchor`` "item",
    extended by the root (variant 0: items are ``leaf``), used alone (1: its own anchor, nested
    lists), or reached through an intermediate resource without the anchor (2)."""
    generic = {"$id": "generic", "$dynamicAnchor": "item", "type": "array",
               "items": {"$dynamicRef": "#item"}, "maxItems": 2}
    if variant == 0:
        return {"$id": "http://ex.test/root", "$ref": "generic",
                "$defs": {"generic": generic, "item": {"$dynamicAnchor": "item", **leaf}}}
    if variant == 1:
        return {"$id": "http://ex.test/root", "anyOf": [leaf, {"$ref": "generic"}], "$defs": {"generic": generic}}
    middle = {"$id": "middle", "properties": {"xs": {"$ref": "generic"}}}
    return {"$id": "http://ex.test/root", "$ref": "middle",
            "$defs": {"generic": generic, "middle": middle, "item": {"$dynamicAnchor": "item", **leaf}}}


def test_scope_dependent_targets_follow_the_dynamic_scope(tiny_vocab):
    r = random.Random(78)
    checked = 0
    for i in range(36):
        schema = extensible(rand_leaf(r), i % 3)
        try:
            cg = sg.compile(sg.Grammar.from_json_schema(schema), tiny_vocab, cache=False)
        except (sg.Unsupported, sg.LimitExceeded):
            continue
        val = jsonschema.Draft202012Validator(schema)
        for _ in range(25):
            v = rand_value(r, 3)
            if i % 3 == 2 and r.random() < 0.5:
                v = {"xs": [rand_value(r, 2) for _ in range(r.randrange(3))]}
            text = json.dumps(v, separators=(",", ":"))
            assert accepts(cg, tiny_vocab, text, r, brute=checked % 50 == 0) == val.is_valid(v), (schema, text)
            checked += 1
    assert checked > 600


def test_outermost_anchor_wins_and_scope_is_left_on_return():
    s = {"$id": "http://ex.test/root", "$dynamicAnchor": "m", "type": "array", "items": {"$dynamicRef": "#m"},
         "$defs": {"ext": {"$id": "ext", "$dynamicAnchor": "m", "type": "string"}}}
    out = resolve_dynamic_refs(s)
    assert "$dynamicRef" not in json.dumps(out)
    g = sg.Grammar.from_json_schema(s)  # ext is never entered: the root's anchor is the target
    vocab = Vocabulary.from_bytes([bytes([c]) for c in range(32, 127)] + [b""], eos_ids=[95])
    cg = sg.compile(g, vocab, cache=False)
    val = jsonschema.Draft202012Validator(s)
    for text in ('[[],[[1]]]', '[[],[[]]]', '["a"]', '[]', '"a"', '[[["a"]]]'):
        m = cg.matcher()
        assert (m.advance_bytes(text.encode()) and m.is_accepting()) == val.is_valid(json.loads(text)), text


def test_copies_are_bounded(monkeypatch):
    from structgen.frontends.json_schema import dynamic_refs
    monkeypatch.setattr(dynamic_refs, "MAX_COPIES", 2)
    with pytest.raises(sg.LimitExceeded) as e:
        resolve_dynamic_refs(extensible({"type": "integer"}, 2))
    assert "MAX_COPIES" in str(e.value)
