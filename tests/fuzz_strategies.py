"""Hypothesis strategies for hostile inputs: regexes, JSON Schemas, Lark and GBNF grammars and API
calls, each drawn as a fuzz *case* (the format of tests/fuzz_worker.py).  ``scale`` grows the
numbers (counted repeats, nesting, sizes): the CI suite uses a small one, the campaign
(benchmarks/fuzz_campaign.py) a larger one."""
from __future__ import annotations

import math

from hypothesis import strategies as st

CHARS = st.sampled_from(list("ab09xyz -_.,:;\"'\\/") + ["é", "世", "\U0001F600", "\n", "\t", "\x00"])
REGEX_JUNK = st.sampled_from(list("()[]{}|*+?^$\\.-,") + ["(?", "(?:", "(?=", "(?<", "\\1", "\\p{L}", "[^", "{,",
                                                          "{99999999}", "\\u12", "\\x", "\\"])
FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 1e-300, 1e300]))
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-10 ** 20, 10 ** 20), FLOATS, st.text(max_size=5))


def _f(x):
    """A JSON-safe float (NaN and the infinities as ``{"$float": ...}``)."""
    if isinstance(x, float) and not math.isfinite(x):
        return {"$float": repr(x)}
    return x


def regexes(scale: int = 1):
    big = 20 * scale
    atom = st.one_of(CHARS.map(lambda c: "\\" + c if c in "\\.^$|?*+()[]{}" else c),
                     st.sampled_from([".", "\\d", "\\w", "\\s", "\\D", "[a-c]", "[^x]", "[\\x00-\\xff]", "\\u00e9",
                                      "[\\d\\s]", "(?i:ab)", "\\b", "^", "$", "a|", "()"]))

    def quantify(r):
        return st.tuples(r, st.one_of(st.sampled_from(["", "*", "+", "?", "*?", "+?", "??"]),
                                      st.tuples(st.integers(0, big), st.integers(0, big), st.booleans()).map(
                                          lambda t: f"{{{min(t[:2])},{max(t[:2])}}}" if t[2] else f"{{{t[0]}}}"))
                         ).map("".join)

    def extend(inner):
        return st.one_of(st.lists(inner, min_size=1, max_size=4).map("".join),
                         st.lists(inner, min_size=2, max_size=4).map("|".join),
                         st.tuples(st.sampled_from(["(", "(?:", "(?P<g>"]), inner).map(lambda t: t[0] + t[1] + ")"),
                         quantify(inner))

    tree = st.recursive(quantify(atom), extend, max_leaves=12)
    junk = st.lists(st.one_of(atom, REGEX_JUNK), min_size=1, max_size=10).map("".join)
    deep = st.tuples(st.integers(1, 100 * scale), st.sampled_from(["(", "(?:", "["]), tree).map(
        lambda t: t[1] * t[0] + t[2] + (")" if t[1] != "[" else "]") * t[0])
    pattern = st.one_of(tree, tree, junk, deep)
    return st.tuples(pattern, st.sampled_from(["python", "ecma"])).map(
        lambda t: {"kind": "regex", "input": t[0], "options": {"syntax": t[1], "time_limit": 1.0 * scale}})


def schemas(scale: int = 1):
    n = st.integers(-3, 10 * scale)
    leaf = st.one_of(
        st.fixed_dictionaries({"type": st.sampled_from(["string", "integer", "number", "boolean", "null", "array",
                                                        "object", "strin", 5])},
                              optional={"minLength": n, "maxLength": n, "minimum": st.one_of(n, FLOATS.map(_f)),
                                        "maximum": n, "exclusiveMinimum": n, "multipleOf": st.sampled_from([0, 2, 0.5, -1]),
                                        "pattern": regexes(1).map(lambda c: c["input"]),
                                        "format": st.sampled_from(["date", "email", "uuid", "bogus"]),
                                        "minItems": n, "maxItems": n, "uniqueItems": st.booleans()}),
        st.fixed_dictionaries({"enum": st.lists(VALUES.map(_f), max_size=5)}),
        st.fixed_dictionaries({"const": VALUES.map(_f)}),
        st.sampled_from([True, False, {}, {"$ref": "#"}, {"$ref": "#/nope"}, {"not": {}}, {"type": []}]))

    def extend(inner):
        return st.one_of(
            st.fixed_dictionaries({"type": st.just("object"),
                                   "properties": st.dictionaries(st.text(max_size=4), inner, max_size=3)},
                                  optional={"required": st.lists(st.one_of(st.text(max_size=4), st.integers()), max_size=3),
                                            "additionalProperties": st.one_of(st.booleans(), inner),
                                            "minProperties": n, "maxProperties": n}),
            st.fixed_dictionaries({"type": st.just("array"), "items": inner},
                                  optional={"minItems": n, "maxItems": n, "prefixItems": st.lists(inner, max_size=2)}),
            st.tuples(st.sampled_from(["anyOf", "allOf", "oneOf"]), st.lists(inner, max_size=3)).map(lambda t: {t[0]: t[1]}),
            st.fixed_dictionaries({"$defs": st.fixed_dictionaries({"d": inner}), "$ref": st.just("#/$defs/d")}))

    tree = st.recursive(leaf, extend, max_leaves=8)
    gen = st.one_of(st.builds(lambda d: {"$gen": "nested_schema", "depth": d}, st.integers(1, 300 * scale)),
                    st.builds(lambda d: {"$gen": "ref_chain", "n": d}, st.integers(1, 100 * scale)),
                    st.builds(lambda d: {"$gen": "enum_range", "n": d}, st.integers(0, 300 * scale)),
                    st.text(max_size=12))  # schema text, mostly not JSON
    return st.tuples(st.one_of(tree, tree, tree, gen), st.sampled_from(["auto", "dfa", "cfg"]),
                     st.sampled_from(["declared", "any"])).map(
        lambda t: {"kind": "json_schema", "input": t[0],
                   "options": {"engine": t[1], "property_order": t[2], "time_limit": 2.0 * scale}})


def _grammar_body(lit, name, scale):
    item = st.one_of(lit, name, st.sampled_from(["/[a-z]+/", "/[0-9]{1,3}/", "/(a|b)*/", "/[/", "?", "*", "+", "|",
                                                 "(", ")", '""', '"\\uD800"', '"\\x"']))

    def extend(inner):
        return st.one_of(st.lists(inner, min_size=1, max_size=4).map(" ".join),
                         st.lists(inner, min_size=2, max_size=3).map(" | ".join),
                         inner.map(lambda s: f"({s})"), st.tuples(inner, st.sampled_from("?*+")).map("".join))

    return st.recursive(item, extend, max_leaves=10 * scale)


def larks(scale: int = 1):
    lit = CHARS.map(lambda c: '"' + c.replace("\\", "\\\\").replace('"', '\\"') + '"')
    names = st.sampled_from(["start", "a", "b", "c", "WORD", "_x"])
    rule = st.tuples(names, _grammar_body(lit, names, scale)).map(lambda t: f"{t[0]}: {t[1]}")
    text = st.lists(rule, min_size=1, max_size=5).map(lambda rs: "start: a\n" + "\n".join(rs) + "\n")
    deep = st.integers(1, 100 * scale).map(lambda d: {"$gen": "lark_parens", "depth": d})
    junk = st.text(max_size=30)
    return st.one_of(text, text, deep, junk).map(lambda t: {"kind": "lark", "input": t,
                                                             "options": {"time_limit": 2.0 * scale}})


def gbnfs(scale: int = 1):
    lit = CHARS.map(lambda c: '"' + c.replace("\\", "\\\\").replace('"', '\\"') + '"')
    names = st.sampled_from(["root", "a", "b", "c-d"])
    body = _grammar_body(lit.map(lambda s: s), names.map(lambda s: s), scale).map(
        lambda s: s.replace("/[a-z]+/", "[a-z]+").replace("/[0-9]{1,3}/", "[0-9]{1,3}"))
    rule = st.tuples(names, body).map(lambda t: f"{t[0]} ::= {t[1]}")
    text = st.lists(rule, min_size=1, max_size=5).map(lambda rs: "root ::= a\n" + "\n".join(rs) + "\n")
    deep = st.one_of(st.integers(1, 100 * scale).map(lambda d: {"$gen": "gbnf_parens", "depth": d}),
                     st.integers(1, 100 * scale).map(lambda n: {"$gen": "gbnf_chain", "n": n}))
    return st.one_of(text, text, deep, st.text(max_size=30)).map(
        lambda t: {"kind": "gbnf", "input": t, "options": {"time_limit": 2.0 * scale}})


GRAMMARS = [{"kind": "regex", "input": "[ab]{1,4}[0-9]*"},
            {"kind": "lark", "input": 'start: "[" [start ("," start)*] "]" | /[ab]+/\n'},
            {"kind": "json_schema", "input": {"type": "object", "properties": {"a": {"type": "boolean"}},
                                              "additionalProperties": False}, "options": {"property_order": "any"}}]
TOKENS = st.one_of(st.integers(-5, 300), st.integers(), FLOATS, st.booleans(), st.none(), st.text(max_size=2))


def api_calls(scale: int = 1):
    gen_kw = st.fixed_dictionaries({}, optional={
        "temperature": st.one_of(FLOATS, st.integers(-2, 3), st.none(), st.text(max_size=2)),
        "top_p": st.one_of(FLOATS, st.integers(-1, 2), st.none()),
        "top_k": st.one_of(st.integers(-3, 10 ** 6), FLOATS, st.none()),
        "max_new_tokens": st.one_of(st.integers(-2, 3), FLOATS, st.none(), st.text(max_size=2)),
        "seed": st.one_of(st.integers(-2 ** 64, 2 ** 65), st.none(), st.text(max_size=3), FLOATS),
        "fast_forward": VALUES, "token_healing": st.booleans()}).map(lambda d: {k: _f(v) for k, v in d.items()})
    generate = gen_kw.map(lambda kw: {"call": "generate", "prompt": "x", "kwargs": {"regex": "[ab]{1,3}", **kw}})
    token_calls = st.tuples(st.sampled_from(GRAMMARS), st.sampled_from(["advance", "validate", "advance_many"]),
                            st.lists(TOKENS, max_size=4), st.booleans()).map(
        lambda t: {"call": "matcher", "grammar": t[0], "method": t[1],
                   "args": [_f(t[2][0]) if t[2] else 0] if t[1] == "advance" else
                   [{"$array": [x if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                                else 0 for x in t[2]], "dtype": "float64" if t[3] else "int64"}]
                   if t[3] or not t[2] else [[_f(x) for x in t[2]]]})
    dims = st.one_of(st.integers(0, 3), st.sampled_from(["W", "W+1", "W-1", "2*W"]))
    bitmask = st.builds(lambda shape, dtype, lib: {"$bitmask": {"shape": shape, "dtype": dtype, "lib": lib}},
                        st.lists(dims, min_size=0, max_size=3), st.sampled_from(["int32", "uint8", "int64", "float32",
                                                                                 "uint32", "int16"]),
                        st.sampled_from(["numpy", "torch"]))
    fill = st.tuples(st.sampled_from(GRAMMARS), bitmask, st.one_of(st.integers(-2, 3), st.none(), FLOATS)).map(
        lambda t: {"call": "matcher", "grammar": t[0], "method": "fill_bitmask", "args": [t[1], _f(t[2])]})
    tensor = st.builds(lambda shape, dtype: {"$tensor": {"shape": shape, "dtype": dtype}},
                       st.lists(st.integers(0, 130), min_size=1, max_size=3),
                       st.sampled_from(["int32", "float32", "float16", "int64", "uint8", "bool"]))
    apply = st.tuples(tensor, tensor).map(lambda t: {"call": "apply_bitmask_", "args": list(t)})
    load = st.one_of(st.text(max_size=8), st.sampled_from(["json", "sql", "../json", "", "JSON"])).map(
        lambda n: {"call": "grammars.load", "args": [n]})
    return st.one_of(generate, token_calls, token_calls, fill, fill, apply, load).map(
        lambda spec: {"kind": "api", "input": spec, "options": {"limit": 10.0}})


def any_case(scale: int = 1):
    return st.one_of(regexes(scale), schemas(scale), larks(scale), gbnfs(scale), api_calls(scale))
