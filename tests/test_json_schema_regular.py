"""JSON Schema -> IR: checked against jsonschema (the oracle) on both the byte DFA and an
independent derivative matcher, plus sampled instances from generated schemas."""
from __future__ import annotations

import decimal
import json
import random
from decimal import Decimal

import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck
from hypothesis import strategies as st

from structgen.automaton.build import build_dfa
from structgen.errors import LimitExceeded, SchemaError, Unsupported
from structgen.frontends.json_schema.regular import compile_json_schema, schema_to_ir
from structgen.frontends.json_schema import numbers as json_numbers
from tests.test_json_schema_irmatch import IRMatcher

FC = jsonschema.Draft202012Validator.FORMAT_CHECKER


def oracle(schema, inst) -> bool:
    return jsonschema.Draft202012Validator(schema, format_checker=FC).is_valid(inst)


def texts(inst):
    return {json.dumps(inst, separators=(",", ":")), json.dumps(inst, separators=(",", ":"), ensure_ascii=False)}


CASES = [
    ({"type": "object", "properties": {"a": {"type": "integer", "minimum": -5, "exclusiveMaximum": 120},
                                       "b": {"type": "string", "maxLength": 3}, "c": {"enum": [1, "x", None]}},
      "required": ["b"]},
     [{"b": "xy"}, {"a": 3, "b": "é"}, {"a": -6, "b": ""}, {"a": 120, "b": ""}, {"a": 119.0, "b": "abc"},
      {"b": "abcd"}, {"a": 5, "b": "", "c": 1.0}, {"a": 5, "b": "", "c": "x", "z": [1, {"q": 2}]}, {}, [], "b"]),
    ({"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "null"}], "items": {"type": "number"},
      "minItems": 1, "maxItems": 4},
     [[], [True], [True, None], [True, None, 1.5, -2], [True, None, 1, 2, 3], [1], [False, None, "x"]]),
    ({"type": "string", "pattern": "^[a-c]+\\d?$", "minLength": 2},
     # not "ab\n": Python re's "$" matches before a final newline, ECMA's does not
     ["ab", "a", "abc1", "abc12", "\u0061\u0062", "xab"]),
    ({"type": "string", "format": "date"}, ["2024-02-29", "2023-02-29", "1900-02-29", "2000-02-29", "2020-13-01"]),
    ({"oneOf": [{"type": "integer"}, {"minimum": 2}]}, [1, 2, 3, 2.5, 1.5, "x", None]),
    ({"not": {"type": ["string", "array"]}}, [1, "x", None, [1], {"a": 1}, True]),
    ({"anyOf": [{"type": "string", "maxLength": 1}, {"type": "number", "multipleOf": 0.5}]},
     ["a", "ab", 1.5, 1.25, 3, -0.5, None]),
    ({"type": "object", "dependentRequired": {"a": ["b"]}, "properties": {"a": {}, "b": {}}},
     [{}, {"a": 1}, {"a": 1, "b": 2}, {"b": 2}]),
    ({"type": "object", "propertyNames": {"maxLength": 2}, "minProperties": 1, "maxProperties": 2},
     [{}, {"ab": 1}, {"abc": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}]),
    ({"if": {"properties": {"k": {"const": "n"}}, "required": ["k"]},
      "then": {"properties": {"v": {"type": "number"}}}, "else": {"properties": {"v": {"type": "string"}}}},
     [{"k": "n", "v": 1}, {"k": "n", "v": "1"}, {"k": "s", "v": "1"}, {"k": "s", "v": 1}, {"v": "x"}, 3]),
    ({"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}},
                         "additionalProperties": False}}, "$ref": "#/$defs/node"},
     [{}, {"v": 1}, {"next": {"v": 2}}, {"next": {"next": {}}}, {"next": {"v": "x"}}, {"w": 1}]),
    ({"type": "array", "items": {"enum": ["a", "b", 1]}, "uniqueItems": True},
     [[], ["a", "b", 1], ["a", "a"], [1, 1.0], ["b", 1, "a"]]),
    ({"type": "array", "contains": {"type": "integer"}, "minContains": 2, "maxContains": 3},
     [[1], [1, 2], [1, "a", 2, 3], [1, 2, 3, 4], ["a"]]),
    ({"const": {"a": [1, {"b": None}]}}, [{"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]}, {"a": [1]}]),
]


@pytest.mark.parametrize("schema,instances", CASES)
@pytest.mark.parametrize("mode", ["compact", "flexible"])
def test_against_jsonschema(schema, instances, mode):
    node = schema_to_ir(schema, whitespace=mode, time_limit=None)
    dfa = build_dfa(node)
    matcher = IRMatcher(schema_to_ir(schema, whitespace=mode, dfa_blocks=False)) if mode == "compact" else None
    for inst in instances:
        expected = oracle(schema, inst)
        tx = texts(inst) if mode == "compact" else {json.dumps(inst), json.dumps(inst, indent=2)}
        for t in tx:
            got = dfa.fullmatch(t.encode())
            if expected is False:
                assert not got, (t, "invalid instance accepted")
            else:
                # the only documented narrowing here: recursion cut at depth 3
                assert got, (t, "valid instance rejected")
            if matcher is not None:
                assert matcher.fullmatch(t) == got, t


def test_escapes_and_unicode():
    dfa = build_dfa(schema_to_ir({"type": "string", "pattern": "^é+$", "maxLength": 2}))
    for t, ok in [('"é"', True), ('"\\u00e9\\u00E9"', True), ('"ééé"', False), ('"e"', False),
                  ('"\\ud800"', False), ('"\x01"', False)]:
        assert dfa.fullmatch(t.encode()) == ok, t
    astral = build_dfa(schema_to_ir({"type": "string", "maxLength": 1}))
    assert astral.fullmatch(b'"\\ud83d\\ude00"') and astral.fullmatch('"😀"'.encode())
    assert not astral.fullmatch(b'"\\ud83d\\ude00x"')


def test_number_intervals_brute_force():
    rng = random.Random(0)
    samples = ["0", "-0", "1", "1.0", "1.50", "-0.0", "10", "9.99", "100", "-3", "-3.000", "0.05", "0.049"]
    samples += [("-" if rng.random() < .5 else "") + str(rng.randint(0, 300)) +
                ("." + str(rng.randint(0, 999)) if rng.random() < .5 else "") for _ in range(150)]
    bounds = [None, Decimal("0"), Decimal("1.5"), Decimal("-3"), Decimal("0.05"), Decimal("100")]
    for lo in bounds:
        for hi in bounds:
            for lx in (False, True):
                for hx in (False, True):
                    for integer in (False, True):
                        m = build_dfa(json_numbers.number_interval(lo, lx, hi, hx, integer))
                        for s in samples:
                            v = Decimal(s)
                            ok = (lo is None or (v > lo if lx else v >= lo)) and (hi is None or (v < hi if hx else v <= hi))
                            ok = ok and (not integer or v == v.to_integral_value())
                            assert m.fullmatch(s.encode()) == ok, (lo, lx, hi, hx, integer, s)
    for step in ["1", "3", "0.5", "0.25", "0.01", "1.5", "20"]:
        d = json_numbers.multiple_of_dfa(Decimal(step))
        for s in samples:
            q = Decimal(s) / Decimal(step)
            assert d.fullmatch(s.encode()) == (q == q.to_integral_value()), (step, s)


def test_sign_intervals_take_exponents():
    """Bounds that are all zero keep every numeral, exponents included (``1e-06`` under
    ``minimum: 0``: json.dumps writes small floats so); other bounds stay exponent-free."""
    rng = random.Random(3)
    samples = ["0", "-0", "0e5", "-0.0E-2", "1e-06", "-1e-06", "0.000e9", "0.01e1", "-0.01E+1", "5", "-5.5e3"]
    for _ in range(300):
        mant = rng.choice(["0", "1", "10", "0.0", "0.05", "3.25", "00", "1."])
        exp = rng.choice(["", "e5", "E-3", "e+0", "e", "e-"])
        samples.append(rng.choice(["", "-"]) + mant + exp)
    for lo in (None, Decimal(0)):
        for hi in (None, Decimal(0)):
            for lx in (False, True):
                for hx in (False, True):
                    m = build_dfa(json_numbers.sign_interval(lo, lx, hi, hx))
                    for s in samples:
                        try:
                            v = Decimal(json.dumps(json.loads(s))) if s.strip() else None
                            ok = isinstance(json.loads(s), (int, float))
                        except ValueError:
                            ok = False
                        if ok:
                            ok = (lo is None or (v > lo if lx else v >= lo)) and (hi is None or (v < hi if hx else v <= hi))
                        assert m.fullmatch(s.encode()) == ok, (lo, lx, hi, hx, s)
    assert json_numbers.sign_interval(Decimal(1)) is None
    dfa = build_dfa(schema_to_ir({"type": "number", "minimum": 0}))
    assert dfa.fullmatch(b"1e-06") and not dfa.fullmatch(b"-1e-06")
    assert not build_dfa(schema_to_ir({"type": "number", "minimum": 1})).fullmatch(b"1e2")  # the stated gap


def test_errors_name_keyword_and_pointer():
    with pytest.raises(Unsupported) as e:
        schema_to_ir({"properties": {"a": {"type": "object", "unevaluatedProperties": False}}})
    assert "unevaluatedProperties" in str(e.value) and "#/properties/a" in str(e.value)
    rep = compile_json_schema({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, lenient=True)
    assert rep.ignored and rep.ignored[0][0] == "uniqueItems"
    with pytest.raises(SchemaError):
        schema_to_ir({"$ref": "#/$defs/missing"})
    rec = {"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}}, "$ref": "#/$defs/t"}
    assert compile_json_schema(rec).truncated
    with pytest.raises(LimitExceeded):
        schema_to_ir(rec, recursion="error")
    with pytest.raises(LimitExceeded):
        schema_to_ir({"type": "integer", "multipleOf": 1234567}, max_multiple_of_states=1000)


def test_flexible_bounds_whitespace_runs():
    dfa = build_dfa(schema_to_ir({"type": "array"}, whitespace="flexible", max_whitespace=3))
    assert dfa.fullmatch(b"[ 1,   2 ]") and not dfa.fullmatch(b"[ 1,    2]")
    assert not dfa.fullmatch(b" [1]")


# --------------------------------------------------------------------------- generated schemas
def sample(dfa, rng, stop=0.35, max_len=300) -> bytes | None:
    """A random accepted string: a walk over live transitions, biased to stop when accepting."""
    s, out = dfa.start, bytearray()
    inv = {}
    for b in range(256):
        inv.setdefault(int(dfa.byte_class[b]), []).append(b)
    while True:
        if dfa.accepting[s] and (rng.random() < stop or len(out) > max_len):
            return bytes(out)
        cls = np.flatnonzero(dfa.transitions[s] >= 0)
        if len(cls) == 0:
            return bytes(out) if dfa.accepting[s] else None
        if len(out) > 4 * max_len:
            return None
        c = int(rng.choice(list(cls)))
        out.append(rng.choice(inv[c]))
        s = int(dfa.transitions[s, c])


_leaf = st.one_of(
    st.just({"type": "integer"}), st.just({"type": "boolean"}), st.just({"type": "null"}),
    st.builds(lambda a, b: {"type": "integer", "minimum": min(a, b), "maximum": max(a, b)},
              st.integers(-50, 50), st.integers(-50, 50)),
    st.builds(lambda a, x: {"type": "number", "exclusiveMinimum": a / 4, "multipleOf": x},
              st.integers(-8, 8), st.sampled_from([0.5, 0.25, 2, 3])),
    st.builds(lambda a, b: {"type": "string", "minLength": min(a, b), "maxLength": max(a, b)},
              st.integers(0, 4), st.integers(0, 4)),
    st.builds(lambda p: {"type": "string", "pattern": p}, st.sampled_from(["^a+b?$", "[0-9]{2}", "^x|y$", "é"])),
    st.builds(lambda f: {"type": "string", "format": f},
              st.sampled_from(["date", "date-time", "time", "ipv4", "ipv6", "email", "uuid", "duration"])),
    st.builds(lambda v: {"enum": v}, st.lists(st.one_of(st.integers(-3, 3), st.text(max_size=3), st.none()),
                                              min_size=1, max_size=4)),
)


def _extend(children):
    names = st.sampled_from(["a", "b", "c", "d"])
    return st.one_of(
        st.builds(lambda props, req, addl: {"type": "object", "properties": props,
                                            "required": [k for k in props if k in req],
                                            "additionalProperties": addl},
                  st.dictionaries(names, children, max_size=3), st.lists(names, max_size=2),
                  st.sampled_from([False, True, {"type": "integer"}])),
        st.builds(lambda it, lo, n: {"type": "array", "items": it, "minItems": lo, "maxItems": lo + n},
                  children, st.integers(0, 2), st.integers(0, 3)),
        st.builds(lambda xs: {"anyOf": xs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda xs: {"oneOf": xs}, st.lists(children, min_size=1, max_size=2)),
        st.builds(lambda x: {"not": x}, children),
        st.builds(lambda a, b: {"allOf": [a, b]}, children, children),
    )


schemas = st.recursive(_leaf, _extend, max_leaves=5)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=schemas, seed=st.integers(0, 2 ** 16), mode=st.sampled_from(["compact", "flexible"]))
def test_sampled_instances_validate(schema, seed, mode):
    try:
        dfa = build_dfa(schema_to_ir(schema, whitespace=mode, max_whitespace=2, time_limit=None, max_states=50_000),
                        max_states=50_000)
    except (Unsupported, LimitExceeded):
        return
    rng = random.Random(seed)
    for _ in range(8):
        data = sample(dfa, rng)
        if data is None:
            continue
        text = data.decode("utf-8")
        try:
            exact = _floats_exact(json.loads(text, parse_float=Decimal))
        except decimal.InvalidOperation:  # an exponent beyond Decimal's default context
            exact = False
        if not exact:
            continue  # the oracle would judge a rounded float, not the number written
        inst = json.loads(text)
        assert oracle(schema, inst), (schema, data)


def _floats_exact(v) -> bool:
    if isinstance(v, Decimal):
        return Decimal(float(v)) == v
    if isinstance(v, list):
        return all(_floats_exact(x) for x in v)
    if isinstance(v, dict):
        return all(_floats_exact(x) for x in v.values())
    return True


def test_draft04_integers_have_no_fraction(vocab):
    """draft-03/04 count ``1.0`` out of ``"type": "integer"`` (a number only), later drafts in."""
    import structgen as sg

    llama3 = vocab("llama3")

    for draft, validator in (("http://json-schema.org/draft-04/schema#", jsonschema.Draft4Validator),
                             ("https://json-schema.org/draft/2020-12/schema", jsonschema.Draft202012Validator),
                             ("http://json-schema.org/draft-07/schema#", jsonschema.Draft7Validator)):
        for extra in ({}, {"minimum": 1, "maximum": 20000}, {"multipleOf": 5}):
            schema = {"$schema": draft, "type": "object", "properties": {"id": {"type": "integer", **extra}}}
            cg = sg.compile(sg.Grammar.from_json_schema(schema, whitespace="flexible"), llama3, cache=False)
            for text in ['{"id": 12345}', '{"id": 12345.0}', '{"id": 12345.00}', '{"id": 12345.5}', '{"id": -0}']:
                m = cg.matcher()
                ok = all(m.advance(t) for t in llama3.encode(text)) and m.is_accepting()
                assert ok == validator(schema).is_valid(json.loads(text)), (draft, extra, text)
