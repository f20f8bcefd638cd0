"""Hostile JSON Schemas end in a result or a named structgen error (issue 14, JSON Schema part):
deep nesting and long ``$ref`` chains (no ``RecursionError``), malformed schema text, keyword
values of the wrong type, ``Decimal`` numbers, empty languages named at the sub-schema that
empties them, and large enums / consts in time linear in their size.  End to end through
``sg.compile(Grammar.from_json_schema(s), vocab)`` with a real vocabulary."""
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

import structgen as sg
from structgen import Grammar
from structgen.automaton.build import build_dfa
from structgen.errors import EmptyLanguage, LimitExceeded, SchemaError
from structgen.frontends.json_schema.numbers import number_constants
from tests.helpers import cyclic_garbage, load_vocab

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gpt2():
    return load_vocab("gpt2")


def accepts(cg, vocab, text: str) -> bool:
    m = cg.matcher()
    return all(m.advance(int(t)) for t in vocab.encode(text)) and m.is_accepting()


# ----------------------------------------------------------------- deep nesting, long $ref chains
def nested_arrays(n):
    s = {"type": "integer"}
    for _ in range(n):
        s = {"type": "array", "items": s}
    return s, "[" * n + "1" + "]" * n


def nested_properties(n):
    s = {"type": "integer"}
    for _ in range(n):
        s = {"type": "object", "properties": {"a": s}, "required": ["a"]}
    return s, '{"a":' * n + "1" + "}" * n


def nested_any_of(n):
    s = {"type": "integer"}
    for _ in range(n):
        s = {"anyOf": [s, {"type": "null"}]}
    return s, "1"


def ref_chain(n):
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
    defs[f"d{n}"] = {"type": "integer"}
    return {"$ref": "#/$defs/d0", "$defs": defs}, "7"


def nested_ref_chain(n):
    """Each definition wraps the next in an array: nesting through ``$ref`` only."""
    defs = {f"d{i}": {"type": "array", "items": {"$ref": f"#/$defs/d{i + 1}"}} for i in range(n)}
    defs[f"d{n}"] = {"type": "integer"}
    return {"$ref": "#/$defs/d0", "$defs": defs}, "[" * n + "1" + "]" * n


@pytest.mark.parametrize("make,n", [(nested_arrays, 2000), (nested_arrays, 5000), (nested_properties, 2000),
                                    (nested_properties, 5000), (nested_any_of, 2000), (nested_any_of, 5000),
                                    (ref_chain, 500), (ref_chain, 5000), (nested_ref_chain, 2000)],
                         ids=lambda x: getattr(x, "__name__", str(x)))
def test_deep_schemas_compile_end_to_end(gpt2, make, n):
    schema, instance = make(n)
    cg = sg.compile(Grammar.from_json_schema(schema), gpt2)
    assert accepts(cg, gpt2, instance)
    assert not accepts(cg, gpt2, instance[1:] if instance.startswith(("[", "{")) else '"x"')


def test_schema_text_nested_deep_compiles(gpt2):
    n = 3000  # 6,000 levels of JSON text: json.dumps / json.loads alone pass the default recursion limit
    text = '{"type": "array", "items": ' * n + '{"type": "integer"}' + "}" * n
    instance = "[" * n + "1" + "]" * n
    cg = sg.compile(Grammar.from_json_schema(text), gpt2)
    assert accepts(cg, gpt2, instance)


@pytest.mark.parametrize("make", [nested_arrays, nested_properties, ref_chain, nested_ref_chain])
def test_depth_limit_is_a_named_error_with_the_pointer(make):
    schema, _ = make(60)
    with pytest.raises(LimitExceeded) as e:
        Grammar.from_json_schema(schema, max_schema_depth=50)
    assert e.value.limit == "max_schema_depth" and e.value.pointer in str(e.value)
    if make is nested_arrays:
        assert e.value.pointer == "/items" * 51
    Grammar.from_json_schema(schema, max_schema_depth=200)  # configurable


@pytest.mark.parametrize("engine", ["dfa", "cfg"])
def test_each_engine_takes_deep_schemas(engine):
    schema, _ = nested_arrays(3000)
    try:
        Grammar.from_json_schema(schema, engine=engine, time_limit=5)
    except LimitExceeded as e:  # the DFA engine builds a block per level: it may run out of time
        assert engine == "dfa" and e.limit == "time_limit"


def test_recursion_limit_restored():
    before = sys.getrecursionlimit()
    Grammar.from_json_schema(nested_arrays(2000)[0])
    assert sys.getrecursionlimit() == before


# ----------------------------------------------------------------- malformed schema text
@pytest.mark.parametrize("text,line,column", [("{", 1, 2), ("", 1, 1), ('{"type": "string"} x', 1, 20),
                                              (b"\xff\xfe", 1, 1), ('{"type":\n  tru}', 2, 3),
                                              ("[1,", 1, 4), (b'{"a": "\xff"}', None, None)])
def test_malformed_schema_text_is_a_schema_error_with_its_position(text, line, column):
    with pytest.raises(SchemaError) as e:
        Grammar.from_json_schema(text)
    assert not isinstance(e.value, json.JSONDecodeError)
    assert e.value.line == line and e.value.column == column
    assert e.value.position is not None and str(e.value.position) in str(e.value)
    if line is not None:
        assert f"line {line}, column {column}" in str(e.value)


# ----------------------------------------------------------------- keyword values of the wrong type
BAD_KEYWORDS = [
    ({"type": "object", "required": ["a", 5]}, "/required/1"),
    ({"type": "object", "required": "a"}, "/required"),
    ({"type": "string", "minLength": "x"}, "/minLength"),
    ({"type": "string", "maxLength": -1}, "/maxLength"),
    ({"type": "string", "maxLength": 2.5}, "/maxLength"),
    ({"type": "object", "properties": []}, "/properties"),
    ({"type": "object", "properties": {"a": 5}}, "/properties/a"),
    ({"enum": {}}, "/enum"),
    ({"type": "string", "pattern": 5}, "/pattern"),
    ({"type": "string", "format": 5}, "/format"),
    ({"type": "array", "minItems": "x"}, "/minItems"),
    ({"type": "array", "maxItems": -1}, "/maxItems"),
    ({"type": "array", "minItems": 1.5}, "/minItems"),
    ({"type": "array", "minItems": True}, "/minItems"),
    ({"type": "array", "prefixItems": {}}, "/prefixItems"),
    ({"type": "array", "items": 5}, "/items"),
    ({"type": "array", "contains": {}, "minContains": "x"}, "/minContains"),
    ({"type": "array", "uniqueItems": "yes"}, "/uniqueItems"),
    ({"type": "object", "maxProperties": "x"}, "/maxProperties"),
    ({"type": "object", "patternProperties": []}, "/patternProperties"),
    ({"type": "object", "dependentRequired": {"a": "b"}}, "/dependentRequired/a"),
    ({"type": "object", "dependentRequired": {"a": [5]}}, "/dependentRequired/a"),
    ({"type": "object", "additionalProperties": 5}, "/additionalProperties"),
    ({"type": "number", "minimum": "1"}, "/minimum"),
    ({"type": "number", "maximum": float("nan")}, "/maximum"),
    ({"type": "number", "multipleOf": 0}, "/multipleOf"),
    ({"type": 5}, "/type"),
    ({"type": ["string", 5]}, "/type"),
    ({"anyOf": {}}, "/anyOf"),
    ({"allOf": []}, "/allOf"),
    ({"$ref": 5}, "/$ref"),
    ({"not": 5}, "/not"),
    ({"properties": {"x": {"properties": {"y": {"minLength": []}}}}}, "/properties/x/properties/y/minLength"),
    ({"$defs": {"a": {"maxItems": "3"}}, "$ref": "#/$defs/a"}, "/$defs/a/maxItems"),
]


@pytest.mark.parametrize("engine", ["auto", "dfa", "cfg"])
@pytest.mark.parametrize("schema,pointer", BAD_KEYWORDS, ids=[p for _, p in BAD_KEYWORDS])
def test_keyword_of_the_wrong_type_is_a_schema_error_at_its_pointer(schema, pointer, engine):
    with pytest.raises(SchemaError) as e:
        Grammar.from_json_schema(schema, engine=engine)
    assert e.value.pointer == pointer, str(e.value)


def test_unreachable_definitions_are_not_checked():
    Grammar.from_json_schema({"$defs": {"unused": {"minLength": "x"}}, "type": "integer"})


# ----------------------------------------------------------------- Decimal numbers
def dfa_of(g):
    return build_dfa(g.node)


@pytest.mark.parametrize("schema,yes,no", [
    ({"const": Decimal("1.5")}, ["1.5", "1.50"], ["1.4", "15", "1"]),
    ({"enum": [Decimal("1.5"), Decimal("-2"), Decimal("2.0"), "x", 3]}, ["1.5", "-2", "-2.0", "2", "3", '"x"'],
     ["2.5", "-1.5", "x", "-3"]),
    ({"type": "integer", "enum": [Decimal("2.0"), Decimal("2.5")]}, ["2", "2.00"], ["2.5"]),
    ({"type": "object", "properties": {"k": {"const": Decimal("0.1")}}, "required": ["k"]},
     ['{"k":0.1}', '{"k":0.10}'], ['{"k":0.2}', "{}"]),
])
def test_decimal_numbers_in_const_and_enum(schema, yes, no):
    g = Grammar.from_json_schema(schema, engine="dfa")
    as_float = json.loads(json.dumps(schema, default=float))
    d, ref = dfa_of(g), dfa_of(Grammar.from_json_schema(as_float, engine="dfa"))
    for t in yes + no:
        assert d.fullmatch(t.encode()) == (t in yes) == ref.fullmatch(t.encode()), t


def test_schema_loaded_with_decimal_floats_compiles(gpt2):
    text = '{"type": "object", "properties": {"p": {"enum": [0.5, 1.25]}, "q": {"const": 2.0, "minimum": 1.5}}}'
    schema = json.loads(text, parse_float=Decimal)
    cg = sg.compile(Grammar.from_json_schema(schema), gpt2)
    assert accepts(cg, gpt2, '{"p":1.25,"q":2}') and not accepts(cg, gpt2, '{"p":1.5}')


# ----------------------------------------------------------------- empty languages, named
EMPTY = [
    ({"type": "string", "minLength": 5, "maxLength": 2}, "", "minLength 5 > maxLength 2"),
    ({"type": "number", "minimum": 5, "maximum": 2}, "", "lower bound"),
    ({"type": "integer", "exclusiveMinimum": 3, "exclusiveMaximum": 3}, "", "lower bound"),
    ({"enum": []}, "", "enum is empty"),
    ({"type": "string", "enum": [1, 2]}, "", "type"),
    ({"$ref": "#"}, "", "refers back"),
    (False, "", "false"),
    ({"not": {}}, "", "not"),
    ({"type": "object", "properties": {"a": False}, "required": ["a"]}, "/properties/a", "false"),
    ({"type": "object", "properties": {"x": {"type": "object", "properties": {"a": {"enum": []}},
                                             "required": ["a"]}}, "required": ["x"]},
     "/properties/x/properties/a", "enum is empty"),
    ({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}, "/properties/a", "refers back"),
    ({"type": "array", "items": {"type": "string", "maxLength": 1, "minLength": 3}, "minItems": 1}, "/items",
     "minLength"),
    ({"allOf": [{"type": "string"}, {"type": "array", "minItems": 3, "maxItems": 1}]}, "/allOf/1", "minItems"),
    ({"$defs": {"bad": {"type": "number", "minimum": 1, "maximum": 0}}, "$ref": "#/$defs/bad"}, "/$defs/bad",
     "lower bound"),
    ({"anyOf": [{"enum": []}, False]}, "/anyOf", "every anyOf branch"),
    ({"type": "object", "required": ["a", "b"], "maxProperties": 1}, "", "maxProperties"),
]


@pytest.mark.parametrize("engine", ["auto", "dfa", "cfg"])
@pytest.mark.parametrize("schema,pointer,why", EMPTY, ids=[f"{i}" for i in range(len(EMPTY))])
def test_empty_language_is_named_at_the_sub_schema(schema, pointer, why, engine):
    with pytest.raises(EmptyLanguage) as e:
        Grammar.from_json_schema(schema, engine=engine)
    assert isinstance(e.value, SchemaError)
    assert e.value.pointer == pointer and why in str(e.value), str(e.value)


@pytest.mark.parametrize("schema,good,bad", [
    ({"anyOf": [{"type": "string", "minLength": 5, "maxLength": 2}, {"type": "null"}]}, "null", '"abc"'),
    ({"type": "object", "properties": {"a": False, "b": {"enum": []}, "c": {"type": "integer"}}},
     '{"c":1}', '{"a":1}'),
    ({"type": "array", "items": False}, "[]", "[1]"),
    ({"oneOf": [{"$ref": "#/$defs/e"}, {"type": "boolean"}], "$defs": {"e": {"enum": []}}}, "true", "null"),
])
def test_empty_part_that_is_not_necessary_only_drops_it(gpt2, schema, good, bad):
    cg = sg.compile(Grammar.from_json_schema(schema), gpt2)
    assert accepts(cg, gpt2, good) and not accepts(cg, gpt2, bad)


# ----------------------------------------------------------------- large enums and consts
def test_number_constants_trie_is_exact():
    vals = [0, 5, -3, 10 ** 30, Decimal("1.50"), Decimal("-0.25"), Decimal("2.0"), Decimal("-0")]
    d = build_dfa(number_constants(vals))
    yes = ["0", "-0", "0.0", "-0.00", "5", "5.00", "-3", "-3.0", "1.5", "1.500", "-0.25", "-0.250", "2",
           "2.0", str(10 ** 30), str(10 ** 30) + ".00"]
    no = ["-2", "3", "1", "01", "1.05", "-5", "0.25", "1e1", ".5", "-", "", "5.", "00"]
    for t in yes + no:
        assert d.fullmatch(t.encode()) == (t in yes), t
    assert build_dfa(number_constants([Decimal("1.5"), 2], integer_only=True)).fullmatch(b"2.0")


def _measure(code: str) -> dict:
    """Run ``code`` (which sets ``result``) in a fresh interpreter: seconds and peak-RSS growth."""
    prog = ("import json, resource, sys, time\nsys.path.insert(0, %r)\nimport structgen as sg\n"
            "from structgen import Grammar\nfrom structgen.errors import StructgenError\n"
            "Grammar.from_json_schema({'enum': [1, 2.5, 'x']})\n"
            # VmHWM, not ru_maxrss: Linux keeps the forking parent's peak in ru_maxrss across exec
            "hwm = lambda: int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM:')).split()[1])\n"
            "rss0 = hwm()\nt = time.perf_counter()\n"
            "%s\n"
            "print(json.dumps({'s': time.perf_counter() - t, 'rss_mb': (hwm() - rss0) / 1024, "
            "'result': result}))\n") % (str(ROOT), code)
    out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_large_integer_enum_is_fast():
    # an interval automaton per integer took about 3 ms each: 100,000 of them, minutes
    r = _measure("g = Grammar.from_json_schema({'enum': list(range(100000))})\nresult = g.kind")
    assert r["s"] < 40, r
    r2 = _measure("g = Grammar.from_json_schema({'enum': [i / 4 for i in range(-20000, 20000)]})\nresult = g.kind")
    assert r2["s"] < 40, r2


def test_large_enum_means_its_values(gpt2):
    g = Grammar.from_json_schema({"enum": list(range(0, 20000, 3)) + [-7, 1.25]})
    cg = sg.compile(g, gpt2)
    for t, want in [("0", True), ("19998", True), ("19999", False), ("3.0", True), ("4", False), ("-7", True),
                    ("1.250", True), ("-0", True), ("20001", False)]:
        assert accepts(cg, gpt2, t) == want, t


def test_megabyte_string_const_is_refused_quickly_and_small():
    r = _measure("try:\n    Grammar.from_json_schema({'const': 'ab' * 500000})\n    result = 'ok'\n"
                 "except StructgenError as e:\n    result = type(e).__name__")
    assert r["result"] in ("ok", "LimitExceeded") and r["s"] < 10 and r["rss_mb"] < 1024, r


def test_reading_a_schema_leaves_no_reference_cycles():
    """What the JSON Schema reader builds is freed by reference counting when the grammar is
    done, refused or failed: no recursive closure (reader walks, code point moves, the combiner's
    class splits), no compiler <-> combiner back-reference, no exception whose traceback holds the
    frame that re-raised it -- each left ~10,000 objects per schema to a full garbage collection,
    which then paused a later mask.  (A cycle added anywhere on these paths fails this test.)"""
    import types

    schemas = [
        {"type": "object", "properties": {"a": {"allOf": [{"type": "string", "pattern": "^[a-zé]+$"},
                                                          {"maxLength": 8}]},
                                          "b": {"anyOf": [{"type": "integer"}, {"type": "object"}]},
                                          "c": {"oneOf": [{"const": 1}, {"type": "string"}]}},
         "required": ["a"], "allOf": [{"required": ["b"]}], "additionalProperties": False},
        {"$defs": {"n": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}},
         "$ref": "#/$defs/n"},
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "array", "items": [{"type": "string"}],
         "additionalItems": {"type": "number"}},
        {"allOf": [{"$ref": "#"}], "not": {"$ref": "#"}},          # refused
    ]

    def read_all():
        for s in schemas:
            for order in ("declared", "any"):
                try:
                    Grammar.from_json_schema(s, property_order=order)
                except sg.StructgenError:
                    pass

    read_all()  # first use: caches, lazily built tables
    left = cyclic_garbage(read_all)
    kinds = (types.FrameType, types.FunctionType, types.TracebackType, types.CellType, dict, list)
    ours = [type(o).__qualname__ for o in left
            if isinstance(o, kinds) or type(o).__module__.startswith("structgen")]
    assert not ours, sorted(set(ours))
