"""Boolean combinations of sub-schemas in the grammar engine (structgen.frontends.json_schema.combine):
random schemas with not / oneOf / anyOf / allOf / if / dependencies / propertyNames / contains /
counted properties and items, checked against jsonschema on random instances that nest deeper than
the regular compiler's free-form depth, and by sampling under the mask."""
from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest

import structgen as sg
from structgen.errors import EmptyLanguage
from structgen.frontends.json_schema import combine as jc
from structgen.frontends.json_schema.cfg import compile_json_schema_cfg
from structgen.vocab import Vocabulary
from tests.helpers import brute_mask_check, sample, segment, structure_bias

KEYS = ["a", "b", "c"]
_PIECES = [bytes([b]) for b in range(256)] + [
    b'{"', b'"}', b'":', b'","', b'"a"', b'"a":1,"a"', b'":1,"', b'1,"', b'"b', b'"c":', b'true', b'null',
    b'\\u0061', b'"x', b'}]', b'[{', b']}', b'{"d":[[', b'"kind":"n"', b'":{"', b'"]']


@pytest.fixture(scope="module")
def tiny_vocab():
    return Vocabulary.from_bytes(_PIECES + [b""], eos_ids=[len(_PIECES)])


def tokens(text: str, rng) -> list:
    """A random segmentation of ``text`` into tokens of the tiny vocabulary."""
    return segment(text.encode("utf-8"), _PIECES, rng)


def rand_leaf(r: random.Random):
    k = r.randrange(9)
    if k == 0:
        return {"type": r.choice(["string", "integer", "number", "null", "boolean", "object", "array"])}
    if k == 1:
        return {"type": "integer", "minimum": r.randrange(-1, 3)}
    if k == 2:
        return {"type": "string", "maxLength": r.randrange(0, 3)}
    if k == 3:
        return {"const": r.choice([1, "x", None, True, {"a": 1}, [1]])}
    if k == 4:
        return {"enum": r.sample([0, 1, "x", "y", None, False, {}, []], 2)}
    if k == 5:
        return {"type": "string", "pattern": r.choice(["^x", "y$", "^.$"])}
    if k == 6:
        return {}
    if k == 7:
        return {"not": {"type": r.choice(["string", "object", "array"])}}
    return {"type": ["integer", "string"]}


def rand_schema(r: random.Random, depth: int):
    if depth <= 0:
        return rand_leaf(r)
    k = r.randrange(12)
    sub = lambda: rand_schema(r, depth - 1)  # noqa: E731
    if k == 0:
        return {"not": sub()}
    if k == 1:
        return {"oneOf": [sub() for _ in range(r.randrange(2, 4))]}
    if k == 2:
        return {"anyOf": [sub(), sub()]}
    if k == 3:
        return {"allOf": [sub(), sub()]}
    if k == 4:
        return {"if": sub(), "then": sub(), "else": sub()}
    if k in (5, 6, 7):
        s = {"type": "object"} if r.random() < 0.5 else {}
        props = {x: sub() for x in r.sample(KEYS, r.randrange(0, 3))}
        if props:
            s["properties"] = props
        if r.random() < 0.5:
            s["required"] = r.sample(KEYS, r.randrange(1, 3))
        if r.random() < 0.3:
            s["additionalProperties"] = r.choice([False, sub()])
        if r.random() < 0.2:
            s["patternProperties"] = {"^b": sub()}
        if r.random() < 0.2:
            s["propertyNames"] = r.choice([{"enum": ["a", "b", "z"]}, {"maxLength": 1}, {"pattern": "^[ab]"}])
        if r.random() < 0.2:
            s["minProperties"] = r.randrange(0, 3)
        if r.random() < 0.2:
            s["maxProperties"] = r.randrange(0, 3)
        if r.random() < 0.2:
            s["dependentRequired"] = {r.choice(KEYS): [r.choice(KEYS)]}
        if r.random() < 0.2:
            s["dependentSchemas"] = {r.choice(KEYS): sub()}
        return s
    if k in (8, 9):
        s = {"type": "array"} if r.random() < 0.5 else {}
        if r.random() < 0.6:
            s["items"] = sub()
        if r.random() < 0.3:
            s["prefixItems"] = [sub() for _ in range(r.randrange(1, 3))]
        if r.random() < 0.3:
            s["contains"] = sub()
            if r.random() < 0.5:
                s["maxContains"] = r.randrange(1, 3)
        if r.random() < 0.3:
            s["minItems"] = r.randrange(0, 3)
        if r.random() < 0.3:
            s["maxItems"] = r.randrange(0, 4)
        return s
    return rand_leaf(r)


def rand_value(r: random.Random, depth: int):
    k = r.randrange(8 if depth > 0 else 5)
    if k == 0:
        return r.choice([0, 1, 2, -1, 1.5])
    if k == 1:
        return r.choice(["", "x", "y", "xy", "abc"])
    if k == 2:
        return None
    if k == 3:
        return r.choice([True, False])
    if k == 4:
        return r.choice([{}, [], {"a": 1}, [1]])
    if k in (5, 6):
        return {x: rand_value(r, depth - 1) for x in r.sample(KEYS + ["bz", "d"], r.randrange(0, 4))}
    return [rand_value(r, depth - 1) for _ in range(r.randrange(0, 4))]


def deep(v, depth: int):
    """``v`` wrapped ``depth`` levels deep in free-form containers."""
    for i in range(depth):
        v = [v] if i % 2 else {"d": v}
    return v


def accepts(cg, vocab, text: str, rng=None, brute: bool = False) -> bool:
    """Is ``text`` accepted token by token?  ``brute``: also check at every prefix that the mask
    equals the set of tokens ``advance`` takes."""
    m = cg.matcher()
    for t in tokens(text, rng or random.Random(0)):
        if brute:
            brute_mask_check(m, vocab)
        if not m.advance(t):
            return False
    return m.is_accepting()


def test_random_combinations_match_jsonschema(tiny_vocab):
    vocab = tiny_vocab
    r = random.Random(20261130)
    used = checked = 0
    for trial in range(150):
        schema = rand_schema(r, r.randrange(1, 4))
        try:
            g = sg.Grammar.from_json_schema(schema, engine="cfg", property_order="any")
        except (sg.Unsupported, sg.LimitExceeded):
            continue
        except EmptyLanguage:  # named at its sub-schema: no value may validate
            val = jsonschema.Draft202012Validator(schema)
            side = random.Random(trial)  # (its own stream: r goes on as before)
            assert not any(val.is_valid(rand_value(side, 3)) for _ in range(25)), schema
            continue
        cg = sg.compile(g, vocab, cache=False)
        val = jsonschema.Draft202012Validator(schema)
        values = [rand_value(r, 3) for _ in range(25)]
        values += [deep(v, 5) for v in values[:5]]
        for v in values:
            text = json.dumps(v, separators=(",", ":"))
            if len(set(map(str, v))) != len(v) if isinstance(v, dict) else False:
                continue
            assert accepts(cg, vocab, text, r, brute=checked % 50 == 0) == val.is_valid(v), (schema, text)
            checked += 1
        used += 1
    assert used > 100 and checked > 2500


@pytest.mark.parametrize("schema, values", [
    # a complement of a closed object over free-form values nested past any depth
    ({"not": {"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": False}},
     [{"t": [{"c": {"d": [[[{}]]]}}]}, {"x": 1}, {"x": "s"}, {}, [[[[[1]]]]]]),
    # oneOf of objects told apart by required keys, a free-form value deep inside
    ({"type": "object", "oneOf": [{"required": ["a"], "not": {"required": ["b"]}}, {"required": ["b"]}],
      "properties": {"c": {}}},
     [{"a": 1, "c": [[[{"k": [[1]]}]]]}, {"a": 1, "b": 2}, {"b": {"x": [[[[]]]]}}, {}]),
    # if / then / else on a discriminator, any member order
    ({"type": "object", "if": {"properties": {"kind": {"const": "n"}}, "required": ["kind"]},
      "then": {"properties": {"v": {"type": "number"}}, "required": ["v"]},
      "else": {"properties": {"v": {"type": "string"}}}},
     [{"kind": "n", "v": 1}, {"v": 1, "kind": "n"}, {"kind": "s", "v": "x"}, {"kind": "n", "v": "x"}, {"v": 2}]),
    # counted properties with a pattern, recursive through a $ref under not
    ({"$defs": {"t": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
                      "additionalProperties": False}},
      "not": {"$ref": "#/$defs/t"}, "type": "object", "maxProperties": 2},
     [{"kids": [{"kids": [{"kids": [{"x": 1}]}]}]}, {"kids": [{"kids": []}]}, {"a": 1, "b": 2, "c": 3}, {}]),
])
def test_examples(tiny_vocab, schema, values):
    g = sg.Grammar.from_json_schema(schema, engine="cfg", property_order="any")
    cg = sg.compile(g, tiny_vocab, cache=False)
    val = jsonschema.Draft202012Validator(schema)
    outcomes = set()
    for v in values:
        ok = val.is_valid(v)
        outcomes.add(ok)
        assert accepts(cg, tiny_vocab, json.dumps(v, separators=(",", ":"))) == ok, v
    assert outcomes == {True, False}


def test_combination_goes_through_member_automata(monkeypatch):
    calls = []
    orig = jc.Combiner.schema_value

    def spy(self, s, ptr, base):
        calls.append(ptr)
        return orig(self, s, ptr, base)

    monkeypatch.setattr(jc.Combiner, "schema_value", spy)
    schema = {"not": {"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": False}}
    report = compile_json_schema_cfg(schema)
    assert calls == [""] and report.unique_keys and report.exact


def test_fallback_leaves_a_valid_grammar(tiny_vocab):
    # uniqueItems is not taken by member automata: the regular path compiles it, as before
    schema = {"type": "object", "properties": {"l": {"type": "array", "items": {"enum": [1, 2]},
                                                     "uniqueItems": True}},
              "not": {"required": ["z"], "properties": {"z": {"type": "integer"}}}}
    g = sg.Grammar.from_json_schema(schema, engine="cfg")
    cg = sg.compile(g, tiny_vocab, cache=False)
    val = jsonschema.Draft202012Validator(schema)
    for v in [{"l": [1, 2]}, {"l": [1, 1]}, {"z": 1, "l": [2]}, {"z": "s", "l": [2]}, {"z": 1}, {}]:
        assert accepts(cg, tiny_vocab, json.dumps(v, separators=(",", ":"))) == val.is_valid(v), v


def test_sampling_under_the_mask_gives_valid_instances(tiny_vocab):
    vocab = tiny_vocab
    schema = {"type": "object", "oneOf": [
        {"properties": {"k": {"const": "a"}, "n": {"type": "integer"}}, "required": ["k", "n"]},
        {"properties": {"k": {"const": "b"}}, "required": ["k"], "not": {"required": ["n"]}},
    ], "maxProperties": 3}
    g = sg.Grammar.from_json_schema(schema, engine="cfg", property_order="any")
    cg = sg.compile(g, vocab, cache=False)
    val = jsonschema.Draft202012Validator(schema)
    rng = np.random.default_rng(7)
    bias = structure_bias(vocab, 3.0)
    texts = [sample(cg, vocab, rng, bias) for _ in range(40)]
    done = [t for t in texts if t is not None]
    for t in done:
        assert val.is_valid(json.loads(t)), t
    assert len(done) >= 20


def test_discriminator_splits_value_classes(tiny_vocab, monkeypatch):
    # three open objects told apart by "k" (not required), with three different schemas for "o":
    # 2^3 value classes for "o" while all may hold; with the limit at 4 the discriminator path runs
    monkeypatch.setattr(jc, "MAX_VALUE_CLASSES", 4)
    branch = lambda tag, o: {"type": "object", "properties": {"k": {"const": tag}, "o": o}}  # noqa: E731
    schema = {"oneOf": [
        {"type": "object", "required": ["k"], "properties": {"k": {"type": "string", "not": {"enum": ["a", "b"]}},
                                                            "o": {"type": "object"}}},
        branch("a", {"type": "object", "properties": {"x": {"type": "integer"}}}),
        branch("b", {"type": "object", "required": ["y"]}),
    ]}
    spy = []
    orig = jc.Combiner.sequence

    def seq(self, *a, **kw):
        spy.append(a[2])
        return orig(self, *a, **kw)

    monkeypatch.setattr(jc.Combiner, "sequence", seq)
    g = sg.Grammar.from_json_schema(schema, engine="cfg", property_order="any")
    assert len(spy) >= 3  # one automaton per class of "k", plus objects without it
    cg = sg.compile(g, tiny_vocab, cache=False)
    val = jsonschema.Draft202012Validator(schema)
    r = random.Random(5)
    with_k = [{"k": "a", "o": {"x": 1}}, {"o": {"x": "s"}, "k": "a"}, {"k": "b", "o": {"y": [[[[1]]]]}},
              {"k": "b", "o": {}}, {"k": "z", "o": {"q": 1}}, {"k": "z", "o": 1}, {"k": 1, "o": {}},
              {"o": {"y": 1, "x": "s"}, "k": "b", "d": [[[[{}]]]]}]
    assert {val.is_valid(v) for v in with_k} == {True, False}
    for v in with_k:
        assert accepts(cg, tiny_vocab, json.dumps(v, separators=(",", ":")), r) == val.is_valid(v), v
    for v in [{"o": {"x": "s"}}, {"o": {"x": 1, "y": 1}}, {}, {"o": {}}]:  # without "k": sound
        if accepts(cg, tiny_vocab, json.dumps(v, separators=(",", ":")), r):
            assert val.is_valid(v), v


@pytest.mark.parametrize("engine", ["auto", "dfa", "cfg"])
def test_required_in_another_order_than_the_properties(tiny_vocab, engine):
    """A ``required`` list beside ``allOf`` / ``$ref`` in another order than the parts' ``properties``
    (JSONSchemaBench o91096): declared order follows the properties, not an empty intersection."""
    from structgen.frontends.json_schema.reader import required_in_property_order

    props = {"p": {"type": "string"}, "r": {"type": "integer"}, "z": {"type": "boolean"}}
    schemas = [
        {"$ref": "#/$defs/o", "$defs": {"o": {"type": "object", "properties": props}}, "required": ["z", "r", "p"]},
        {"allOf": [{"type": "object", "properties": props}], "required": ["r", "p"]},
        {"allOf": [{"type": "object", "properties": props}, {"required": ["z", "p"]}]},
    ]
    for schema in schemas:
        cg = sg.compile(sg.Grammar.from_json_schema(schema, engine=engine), tiny_vocab, cache=False)
        val = jsonschema.Draft202012Validator(schema)
        outcomes = set()
        for v in [{"p": "a", "r": 1, "z": True}, {"p": "a", "r": 1}, {"r": 1, "z": False}, {"p": "x", "z": True},
                  {"p": 1, "r": 1, "z": True}]:
            ok = val.is_valid(v)
            outcomes.add(ok)
            assert accepts(cg, tiny_vocab, json.dumps(v, separators=(",", ":"))) == ok, (schema, v)
        assert outcomes == {True, False}
    plain = {"type": "object", "properties": props, "required": ["r", "p"]}  # nothing combined: unchanged
    assert required_in_property_order(plain) is plain
    assert required_in_property_order(schemas[1])["required"] == ["p", "r"]


_INT = {"type": "integer"}
_PATTERN_SCHEMAS = [
    # seven disjoint anchored patterns, nothing else allowed
    {"type": "object", "additionalProperties": False, "patternProperties": {
        "^a$": {"type": "integer", "minimum": 0}, "^b$": {"type": "integer", "maximum": 5}, "^ab$": {"multipleOf": 2},
        "^x": {"type": "string"}, "y$": {"type": "boolean"}, "^z$": {"type": "null"}, "^c[0-9]$": {}}},
    # overlapping unanchored patterns beside a declared property and an additionalProperties schema
    {"type": "object", "properties": {"q": _INT}, "additionalProperties": {"type": "string"}, "patternProperties": {
        "a": {"type": "integer", "minimum": 0}, "b": {"type": "integer", "maximum": 5}, "ab": {"multipleOf": 2},
        "^x": {"type": ["string", "integer"]}, "y$": {"not": {"type": "string"}}, "z": {"type": "null"}}},
    # recursive: the grammar compiler's object rules
    {"$ref": "#/$defs/n", "$defs": {"n": {"type": "object", "additionalProperties": False, "patternProperties": {
        "^a": _INT, "^b": {"type": "string"}, "^x": {"type": "boolean"}, "y$": {"type": "null"}, "^z": _INT,
        "^c": {"$ref": "#/$defs/n"}}}}},
    # a combination: the member automata
    {"allOf": [{"type": "object", "patternProperties": {"^a": _INT, "^b": {"type": "string"}, "^x": {}}},
               {"type": "object", "patternProperties": {"b$": {"maxLength": 1}, "^z": {"type": "null"}, "y": _INT}}],
     "anyOf": [{"required": ["a"]}, {"not": {"required": ["ab"]}}]},
]


@pytest.mark.parametrize("engine", ["auto", "dfa", "cfg"])
@pytest.mark.parametrize("which", range(len(_PATTERN_SCHEMAS)))
def test_more_than_four_pattern_properties(tiny_vocab, engine, which):
    """More than four ``patternProperties``: the undeclared keys are split into the non-empty cells
    of the patterns they match (not 2^n alternatives, which used to be refused past 4), exactly."""
    schema = _PATTERN_SCHEMAS[which]
    cg = sg.compile(sg.Grammar.from_json_schema(schema, engine=engine), tiny_vocab, cache=False)
    val = jsonschema.Draft202012Validator(schema)
    r = random.Random(which)
    keys = ["a", "b", "ab", "ba", "xa", "ay", "xy", "z", "q", "abz", "c", "c1", "c12", ""]
    values = [0, 3, 4, 7, -1, "s", "st", True, None, {}, {"a": 1}, {"c": {"b": "s"}}, {"a": "s"}]
    outcomes = set()
    for n in range(60):
        v = {k: r.choice(values) for k in r.sample(keys, r.randint(0, 3))}
        ok = val.is_valid(v)
        outcomes.add(ok)
        assert accepts(cg, tiny_vocab, json.dumps(v, separators=(",", ":")), r) == ok, (schema, v)
    assert outcomes == {True, False}


def test_key_cells_are_the_non_empty_ones():
    from structgen.frontends.json_schema.keys import MAX_KEY_CELLS, key_cells
    from structgen.frontends.json_schema.language import pattern_search_ir

    disjoint = tuple(pattern_search_ir(f"^k{i}$") for i in range(20))
    cells = key_cells(disjoint, ["k3", "other"])
    assert [m for m, _ in cells] == [()] + [(i,) for i in range(20) if i != 3]  # k3 is declared
    nested = tuple(pattern_search_ir(p) for p in ["a", "ab", "abc"])  # abc ⊂ ab ⊂ a (as search languages)
    assert [m for m, _ in key_cells(nested, [])] == [(), (0,), (0, 1), (0, 1, 2)]
    independent = tuple(pattern_search_ir(c) for c in "abcdefg")  # every subset occurs: 128 cells
    assert 1 << 7 > MAX_KEY_CELLS and key_cells(independent, []) is None
    schema = {"type": "object", "patternProperties": {c: _INT for c in "abcdefg"}}
    with pytest.raises(sg.errors.Unsupported, match="#/patternProperties"):
        sg.Grammar.from_json_schema(schema, engine="dfa")



def test_key_cells_are_embedded_automata_charged_alike_cold_and_warm():
    """Each cell is one embedded DFA (a cached IR tree would be hundreds of objects for the garbage
    collector), its language is exactly its undeclared keys (checked with ``re``), and a cache hit
    charges a work budget what the cold build did (deterministic engine choice)."""
    import json
    import re

    from structgen.automaton import ir
    from structgen.automaton.build import build_dfa
    from structgen.automaton.limits import work_budget
    from structgen.frontends.json_schema.keys import key_cells
    from structgen.frontends.json_schema.language import pattern_search_ir

    pats = ["^x-", "[0-9]$", "é"]
    declared = ["x-1", "name", "é"]
    sg.clear_caches()
    with work_budget(10 ** 9) as cold:
        cells = key_cells(tuple(pattern_search_ir(p) for p in pats), declared)
    with work_budget(10 ** 9) as warm:
        again = key_cells(tuple(pattern_search_ir(p) for p in pats), declared)
    assert again is cells and warm.used == cold.used > 0
    assert all(isinstance(node, ir.Embed) for _, node in cells)
    dfas = [(set(m), build_dfa(node)) for m, node in cells]
    keys = declared + ["x-", "x-a9", "a9", "ab", "", "é9", "x-é", "y", "9", 'q"', "\\", "x-\n"]
    for k in keys:
        text = json.dumps(k).encode()  # the key as json.dumps writes it
        owners = [m for m, d in dfas if d.fullmatch(text)]
        if k in declared:
            assert owners == [], k
        else:
            assert owners == [{i for i, p in enumerate(pats) if re.search(p, k)}], k


def _discriminated(n: int) -> dict:
    """``oneOf`` branches over a ``kind`` the parent requires (its ``enum`` beside each branch's),
    with other properties, some closed (shaped after JSONSchemaBench o69635)."""
    names = [f"k{i}" for i in range(n)]
    branches = []
    for i in range(n):
        b = {"properties": {"kind": {"enum": [names[i]]} if i % 2 else {"const": names[i]},
                            "arg": {"type": "string", **({"maxLength": 0} if i % 2 else {"minLength": 1})},
                            f"f{i}": _INT}}
        if i % 3 == 0:
            b["required"] = [f"f{i}"]
        if i % 4 == 1:
            b["additionalProperties"] = False
        branches.append(b)
    return {"type": "object", "required": ["kind", "arg"], "oneOf": branches,
            "properties": {"kind": {"type": "string", "enum": names[:n - 2]}, "arg": {"type": "string"}}}


@pytest.mark.parametrize("engine", ["auto", "cfg"])
def test_one_of_discriminated_by_a_required_key_of_the_parent(tiny_vocab, engine):
    """Branches told apart by a key the parent requires, whose value each branch narrows beside
    the parent's ``enum``: disjoint, so no complement is needed (before: refused, "needs the
    complement of a sub-schema that can only be matched approximately")."""
    schema = _discriminated(6)
    cg = sg.compile(sg.Grammar.from_json_schema(schema, engine=engine), tiny_vocab, cache=False)
    val = jsonschema.Draft202012Validator(schema)
    r = random.Random(2)
    outcomes = set()
    for _ in range(80):
        v = {"kind": f"k{r.randrange(7)}", "arg": r.choice(["", "s"])}
        for k in r.sample(["f0", "f1", "f3", "zz"], r.randint(0, 2)):
            v[k] = r.choice([1, "s"])
        ok = val.is_valid(v)
        outcomes.add(ok)
        assert accepts(cg, tiny_vocab, json.dumps(v, separators=(",", ":"))) == ok, v
    assert outcomes == {True, False}


@pytest.mark.parametrize("engine", ["auto", "dfa", "cfg"])
def test_draft4_plain_name_ids(tiny_vocab, engine):
    schema = {"$schema": "http://json-schema.org/draft-04/schema#",
              "definitions": {"n": {"id": "#nat", "type": "integer", "minimum": 0},
                              "l": {"id": "#list", "type": "array", "items": {"$ref": "#nat"}}},
              "type": "object", "properties": {"a": {"$ref": "#nat"}, "b": {"$ref": "#/definitions/l"}}}
    cg = sg.compile(sg.Grammar.from_json_schema(schema, engine=engine), tiny_vocab, cache=False)
    val = jsonschema.Draft4Validator(schema)
    outcomes = set()
    for v in [{"a": 1}, {"a": -1}, {"b": [0, 3]}, {"b": [1, -2]}, {"a": "x"}, {}]:
        ok = val.is_valid(v)
        outcomes.add(ok)
        assert accepts(cg, tiny_vocab, json.dumps(v, separators=(",", ":"))) == ok, v
    assert outcomes == {True, False}
