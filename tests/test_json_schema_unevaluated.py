"""unevaluatedProperties / unevaluatedItems (structgen.frontends.json_schema.unevaluated): random
schemas that close composed objects and arrays (allOf / anyOf / oneOf / if-then-else /
dependentSchemas / $ref / contains), checked against jsonschema on random instances, with the
mask checked against brute force at prefixes, and by sampling under the mask."""
from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest

import structgen as sg
from structgen.frontends.json_schema.unevaluated import rewrite_unevaluated
from structgen.vocab import Vocabulary
from tests.helpers import sample, structure_bias
from tests.test_json_schema_combine import _PIECES, KEYS, accepts, rand_leaf, rand_value


@pytest.fixture(scope="module")
def tiny_vocab():
    return Vocabulary.from_bytes(_PIECES + [b""], eos_ids=[len(_PIECES)])


def obj_part(r: random.Random, depth: int):
    """An object schema whose properties / patternProperties the keyword sees (maybe nested)."""
    k = r.randrange(10 if depth > 0 else 4)
    if k <= 2:
        s = {}
        if r.random() < 0.8:
            s["properties"] = {x: rand_leaf(r) for x in r.sample(KEYS, r.randrange(1, 3))}
        if r.random() < 0.25:
            s["patternProperties"] = {"^b": rand_leaf(r)}
        if r.random() < 0.3:
            s["required"] = r.sample(KEYS, 1)
        if r.random() < 0.1:
            s["additionalProperties"] = rand_leaf(r)
        return s
    if k == 3:
        return {"unevaluatedProperties": r.choice([True, False, rand_leaf(r)]),
                "properties": {r.choice(KEYS): rand_leaf(r)}}
    sub = lambda: obj_part(r, depth - 1)  # noqa: E731
    if k == 4:
        return {"allOf": [sub(), sub()]}
    if k == 5:
        return {"anyOf": [sub(), sub()]}
    if k == 6:
        return {"oneOf": [sub(), sub()]}
    if k == 7:
        s = {"if": sub()}
        if r.random() < 0.7:
            s["then"] = sub()
        if r.random() < 0.7:
            s["else"] = sub()
        return s
    if k == 8:
        return {"dependentSchemas": {r.choice(KEYS): sub()}}
    return {"not": sub()}


def arr_part(r: random.Random, depth: int):
    k = r.randrange(9 if depth > 0 else 4)
    if k <= 1:
        s = {"prefixItems": [rand_leaf(r) for _ in range(r.randrange(1, 3))]}
        if r.random() < 0.2:
            s["items"] = rand_leaf(r)
        return s
    if k == 2:
        s = {"contains": rand_leaf(r)}
        if r.random() < 0.3:
            s["minContains"] = 0
        return s
    if k == 3:
        return {"unevaluatedItems": r.choice([True, False, rand_leaf(r)]), "prefixItems": [rand_leaf(r)]}
    sub = lambda: arr_part(r, depth - 1)  # noqa: E731
    if k == 4:
        return {"allOf": [sub(), sub()]}
    if k == 5:
        return {"anyOf": [sub(), sub()]}
    if k == 6:
        return {"oneOf": [sub(), sub()]}
    if k == 7:
        return {"if": sub(), "then": sub(), "else": sub()}
    return {"not": sub()}


def rand_closed(r: random.Random):
    """A schema using unevaluatedProperties or unevaluatedItems over composed parts (some behind
    a ``$ref``)."""
    items = r.random() < 0.35
    part = arr_part if items else obj_part
    s = part(r, r.randrange(0, 3))
    if r.random() < 0.5:
        s = {"allOf": [s]} if "allOf" in s else dict(s)
        s.setdefault("allOf", []).append({"$ref": "#/$defs/d"})
        s["$defs"] = {"d": part(r, 1)}
    if items:
        s["unevaluatedItems"] = r.choice([False, False, rand_leaf(r)])
    else:
        s["unevaluatedProperties"] = r.choice([False, False, rand_leaf(r)])
        if r.random() < 0.3:
            s["type"] = "object"
    return s


def values_for(r: random.Random, n: int) -> list:
    out = [rand_value(r, 2) for _ in range(n)]
    out += [{x: rand_value(r, 1) for x in r.sample(KEYS + ["bz", "d"], r.randrange(0, 4))} for _ in range(n)]
    out += [[rand_value(r, 1) for _ in range(r.randrange(0, 4))] for _ in range(n)]
    return out


def test_random_unevaluated_match_jsonschema(tiny_vocab):
    vocab = tiny_vocab
    r = random.Random(20261202)
    used = checked = 0
    outcomes = set()
    for trial in range(120):
        schema = rand_closed(r)
        val = jsonschema.Draft202012Validator(schema)
        try:
            g = sg.Grammar.from_json_schema(schema, property_order="any")
            cg = sg.compile(g, vocab, cache=False)
        except (sg.Unsupported, sg.LimitExceeded):
            continue
        except sg.StructgenError:  # an empty language: no instance may be valid
            assert not any(val.is_valid(v) for v in values_for(r, 8)), schema
            continue
        for v in values_for(r, 8):
            text = json.dumps(v, separators=(",", ":"))
            ok = val.is_valid(v)
            outcomes.add(ok)
            assert accepts(cg, vocab, text, r, brute=checked % 40 == 0) == ok, (schema, text)
            checked += 1
        used += 1
    assert used > 100 and checked > 2000 and outcomes == {True, False}


def test_rewrite_has_no_unevaluated_keyword_left():
    r = random.Random(3)
    for _ in range(200):
        s = rand_closed(r)
        try:
            out = rewrite_unevaluated(s)
        except sg.Unsupported:
            continue
        assert "unevaluated" not in json.dumps(out)


@pytest.mark.parametrize("schema, values", [
    # OpenAPI 3.1 style: a base object closed over an allOf of $refs
    ({"$defs": {"base": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
                "named": {"properties": {"name": {"type": "string"}}}},
      "allOf": [{"$ref": "#/$defs/base"}, {"$ref": "#/$defs/named"}], "unevaluatedProperties": False},
     [{"id": 1}, {"id": 1, "name": "x"}, {"name": "x", "id": 2}, {"id": 1, "x": 1}, {"name": "x"}, {}]),
    # the branch that holds decides: "b" is evaluated only with kind "b"
    ({"type": "object", "properties": {"kind": {"enum": ["a", "b"]}}, "required": ["kind"],
      "oneOf": [{"properties": {"kind": {"const": "a"}, "a": {"type": "integer"}}},
                {"properties": {"kind": {"const": "b"}, "b": {"type": "string"}}}],
      "unevaluatedProperties": False},
     [{"kind": "a", "a": 1}, {"kind": "b", "b": "x"}, {"kind": "a", "b": "x"}, {"kind": "b", "a": 1},
      {"kind": "a"}, {"a": 1, "kind": "a"}]),
    # anyOf: every branch that holds counts
    ({"anyOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {"type": "integer"}}}],
      "unevaluatedProperties": False},
     [{"a": 1, "b": 2}, {"a": "s"}, {"a": "s", "b": 1}, {"c": 1}, {}, 3]),
    # items: prefixItems in one branch, contains in another
    ({"anyOf": [{"prefixItems": [{"type": "integer"}]}, {"contains": {"type": "string"}}],
      "unevaluatedItems": False},
     [[1], [1, "x", "y"], ["x", 1], [1, 2], [], [None], "s"]),
])
def test_examples(tiny_vocab, schema, values):
    g = sg.Grammar.from_json_schema(schema, property_order="any")
    cg = sg.compile(g, tiny_vocab, cache=False)
    val = jsonschema.Draft202012Validator(schema)
    outcomes = set()
    for v in values:
        ok = val.is_valid(v)
        outcomes.add(ok)
        assert accepts(cg, tiny_vocab, json.dumps(v, separators=(",", ":")), brute=True) == ok, v
    assert outcomes == {True, False}


def test_declared_order_follows_the_document(tiny_vocab):
    # the closure lists names in document order, so declared order is the schema's own
    schema = {"type": "object", "properties": {"foo": {"type": "string"}},
              "allOf": [{"properties": {"bar": {"type": "string"}}}], "unevaluatedProperties": False}
    # (the grammar engine's allOf merge puts allOf members first, with or without the keyword)
    cg = sg.compile(sg.Grammar.from_json_schema(schema, engine="dfa"), tiny_vocab, cache=False)
    assert accepts(cg, tiny_vocab, '{"foo":"a","bar":"b"}')
    assert not accepts(cg, tiny_vocab, '{"foo":"a","bar":"b","z":1}')


def test_sampling_under_the_mask_gives_valid_instances(tiny_vocab):
    schema = {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}}, "required": ["kind"],
              "if": {"properties": {"kind": {"const": "a"}}},
              "then": {"properties": {"a": {"type": "integer"}}},
              "else": {"properties": {"b": {"type": "array", "prefixItems": [{"type": "integer"}],
                                            "unevaluatedItems": False}}},
              "unevaluatedProperties": False}
    # the regular engine: the grammar engine's member automata of closed objects under
    # if/then/else lack the key guard's liveness (a dead end after a used key, with the keyword
    # or with its rewritten form written by hand)
    g = sg.Grammar.from_json_schema(schema, engine="dfa")
    cg = sg.compile(g, tiny_vocab, cache=False)
    val = jsonschema.Draft202012Validator(schema)
    rng = np.random.default_rng(11)
    bias = structure_bias(tiny_vocab, 3.0)
    done = [t for t in (sample(cg, tiny_vocab, rng, bias) for _ in range(40)) if t is not None]
    for t in done:
        assert val.is_valid(json.loads(t)), t
    assert len(done) >= 20


def test_refusal_names_the_pointer():
    schema = {"anyOf": [{"properties": {k: True}} for k in "abcdefgh"], "unevaluatedProperties": False}
    with pytest.raises(sg.Unsupported) as e:
        sg.Grammar.from_json_schema(schema)
    assert "#/unevaluatedProperties" in str(e.value)


def test_older_drafts_are_left_alone():
    s = {"$schema": "http://json-schema.org/draft-07/schema#", "unevaluatedProperties": False}
    assert rewrite_unevaluated(s) is s
