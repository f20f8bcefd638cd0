"""Meta-schema references, resources of other drafts and draft-07's content keywords.

- ``$ref`` to an official meta-schema resolves without a registry (the copies ``jsonschema``
  ships); the compiled meta-schema never accepts a schema ``jsonschema`` calls invalid (the suite's
  own schemas and mutations of them) and accepts nearly all valid ones (what it rejects comes from
  the sound subset of ``format: regex`` and exponent-free numbers).
- A narrowed ``propertyNames`` language is taken where its atom is positive only, and falls back
  under a negation.
- A resource declaring 2019-09 inside a 2020-12 document is read as 2019-09 (``prefixItems``
  ignored, ``items`` arrays as tuples).
- ``contentEncoding: base64`` and ``contentMediaType: application/json`` against Python's own
  decoders, on random strings and at every prefix against brute force on a tiny vocabulary.
"""
from __future__ import annotations

import base64
import binascii
import copy
import json
import random
from pathlib import Path

import jsonschema
import pytest

import structgen as sg
from structgen.frontends.json_schema.formulas import f_negative_atoms
from tests.test_json_schema_combine import accepts, tiny_vocab  # noqa: F401 -- a fixture

SUITE = Path(__file__).parent / "data" / "json-schema-test-suite"
_BYTES = sg.Vocabulary.from_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])


class Text:
    """A grammar compiled on the byte vocabulary: ``Text(g)(text)`` is the whole-text verdict."""

    def __init__(self, g):
        self.g, self.cg = g, sg.compile(g, _BYTES, cache=False)

    def __call__(self, text: str) -> bool:
        m = self.cg.matcher()
        return m.advance_bytes(text.encode("utf-8")) and m.is_accepting()


def schema_text(schema, **options) -> Text:
    """``schema`` compiled with flexible whitespace (``json.dumps`` spacing), on bytes."""
    return Text(sg.Grammar.from_json_schema(schema, whitespace="flexible", **options))


def _suite_schemas(draft: str) -> list:
    out = []
    for f in sorted((SUITE / draft).rglob("*.json")):
        out += [case["schema"] for case in json.loads(f.read_text())]
    return out


def _mutations(schema, r: random.Random) -> list:
    """Schemas made invalid (mostly) by one wrong keyword value somewhere in ``schema``."""
    bad = [("type", 1), ("type", "strin"), ("minLength", -1), ("maxItems", 1.5), ("required", "x"),
           ("properties", []), ("enum", 3), ("items", 7), ("pattern", 5), ("multipleOf", 0),
           ("uniqueItems", "yes"), ("allOf", []), ("minProperties", "2"), ("required", ["a", "a"])]
    out = []
    for _ in range(3):
        s = copy.deepcopy(schema) if isinstance(schema, dict) else {}
        spots = [s]
        todo = [s]
        while todo:  # every schema object reached through properties / items / allOf / anyOf
            x = todo.pop()
            for k in ("properties", "$defs", "definitions"):
                if isinstance(x.get(k), dict):
                    subs = [v for v in x[k].values() if isinstance(v, dict)]
                    spots += subs
                    todo += subs
            for k in ("allOf", "anyOf", "oneOf"):
                if isinstance(x.get(k), list):
                    subs = [v for v in x[k] if isinstance(v, dict)]
                    spots += subs
                    todo += subs
        k, v = r.choice(bad)
        r.choice(spots)[k] = v
        out.append(s)
    return out


@pytest.mark.parametrize("draft,ref,option,validator", [
    ("draft7", "http://json-schema.org/draft-07/schema#", "draft7", jsonschema.Draft7Validator),
    ("draft2020-12", "https://json-schema.org/draft/2020-12/schema", "2020-12", jsonschema.Draft202012Validator),
])
def test_meta_schema_ref_against_jsonschema(draft, ref, option, validator):
    g = schema_text({"$ref": ref}, draft=option, property_order="any")  # no registry
    checker = validator(validator.META_SCHEMA)
    schemas = _suite_schemas(draft)
    r = random.Random(7)
    valid = accepted = 0
    for s in schemas:
        for inst in [s] + _mutations(s, r):
            ok = checker.is_valid(inst)
            got = g(json.dumps(inst))
            assert not got or ok, inst              # never an invalid schema
            valid += ok
            accepted += got
    assert accepted >= 0.95 * valid, (accepted, valid)


def test_meta_schema_registry_wins():
    mine = {"type": "integer"}
    g = schema_text({"$ref": "http://json-schema.org/draft-07/schema#"}, draft="draft7",
                    registry={"http://json-schema.org/draft-07/schema": mine})
    assert g("3") and not g("{}")


def test_negative_atoms():
    a, b = ("A", 0), ("A", 1)
    assert f_negative_atoms(("&", a, ("N", b))) == {1}
    assert f_negative_atoms(("N", ("N", a))) == set()
    assert f_negative_atoms(("1", a, b)) == {0, 1}
    assert f_negative_atoms(("|", a, ("N", ("&", a, b)))) == {0, 1}


def test_narrowed_property_names_only_positive():
    # a recursive object whose keys must be regexes: format "regex" compiles as a sound subset
    pos = {"type": "object", "propertyNames": {"format": "regex"}, "additionalProperties": {"$ref": "#"}}
    g = schema_text(pos)
    assert g.g.report.exact is False
    v = jsonschema.Draft202012Validator(pos, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    for inst in [{}, {"a+": {}}, {"(": {}}, {"a": {"[": {}}}, {"^x$": {"y*": {}}}]:
        if g(json.dumps(inst)):
            assert v.is_valid(inst), inst
    assert g('{"a+": {"b": {}}}') and not g('{"(": {}}')
    # under "not" the narrowed keys would widen the complement ("(a)\\1" is a regex outside the
    # subset): refused, never unsound
    neg = {"type": "object", "additionalProperties": {"anyOf": [{"type": "integer"}, {"$ref": "#"}]},
           "not": {"type": "object", "propertyNames": {"format": "regex"}}}
    try:
        g = schema_text(neg)
    except sg.Unsupported:
        return
    v = jsonschema.Draft202012Validator(neg, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    for inst in [{"(a)\\1": 1}, {"(": 1}, {"a": 1}, {"(": {"(": 1}}]:
        if g(json.dumps(inst)):
            assert v.is_valid(inst), inst


def test_unique_under_anyof_of_enum_branch():
    # the draft-07 meta-schema's "type": a $ref to a string enum beside a unique array of it
    s = {"$defs": {"t": {"enum": ["a", "b", "c", "d", "e", "f", "g", "h"]}},
         "anyOf": [{"$ref": "#/$defs/t"}, {"type": "array", "items": {"$ref": "#/$defs/t"}, "uniqueItems": True}]}
    g = schema_text(s)
    v = jsonschema.Draft202012Validator(s)
    for inst in ["a", "z", ["a", "b"], ["a", "a"], ["h", "g", "f", "e", "d", "c", "b", "a"], ["a", "b", "a"], []]:
        assert g(json.dumps(inst)) == v.is_valid(inst), inst


def test_resource_of_2019_09_inside_2020_12():
    res = {"$id": "http://example.com/old.json", "$schema": "https://json-schema.org/draft/2019-09/schema",
           "prefixItems": [{"type": "string"}], "items": [{"type": "integer"}], "additionalItems": False}
    s = {"$ref": "http://example.com/old.json"}
    g = schema_text(s, registry={"http://example.com/old.json": res})
    # 2019-09: prefixItems is no keyword, items [..] is the tuple and additionalItems its rest
    assert g("[1]") and g("[]")
    assert not g('["a"]') and not g("[1, 2]")
    # declared at the root, and a 2020-12 resource inside it read as 2020-12 again
    root = {"$schema": "https://json-schema.org/draft/2019-09/schema", "items": [{"type": "integer"}],
            "additionalItems": {"$schema": "https://json-schema.org/draft/2020-12/schema",
                                "prefixItems": [{"type": "string"}]}}
    g = schema_text(root)
    assert g("[1]") and g('[1, ["a"]]') and not g('["a"]') and not g("[1, [1]]")
    # the same resource read as 2020-12 would take strings first
    new = dict(res, **{"$schema": "https://json-schema.org/draft/2020-12/schema"})
    del new["items"], new["additionalItems"]
    g = schema_text(s, registry={"http://example.com/old.json": new})
    assert g('["a", 1]') and not g("[1]")


# ---------------------------------------------------------------- draft-07 content
def _is_base64(x: str) -> bool:
    if len(x) % 4:
        return False
    try:
        base64.b64decode(x.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return False
    return True


def _is_json_text(x: str) -> bool:
    def no_constant(c):
        raise ValueError(c)
    try:
        json.loads(x, parse_constant=no_constant)
    except (ValueError, RecursionError):
        return False
    # Python's json takes lone surrogates in raw text; a JSON text is Unicode (structgen never spells them)
    return not any(0xD800 <= ord(c) <= 0xDFFF for c in x)


def _random_texts(r: random.Random, alphabet: str, n: int) -> list:
    return ["".join(r.choice(alphabet) for _ in range(r.randrange(0, 10))) for _ in range(n)]


def _json_pieces(r: random.Random) -> str:
    v = r.choice([1, -2.5e3, "a\"b", "\\", "é", "😀", None, True, [1, "x"], {"k": [None, {}]}, {}, []])
    text = json.dumps(v, ensure_ascii=r.random() < 0.5, indent=r.choice([None, 1]))
    if r.random() < 0.3:  # broken: drop or double a character
        i = r.randrange(len(text))
        text = text[:i] + text[i + 1:] if r.random() < 0.5 else text[:i] + text[i] + text[i:]
    return r.choice(["", " ", "\n"]) + text + r.choice(["", " ", "\t"])


def test_content_base64():
    s = {"contentEncoding": "base64"}
    g = schema_text(s, draft="draft7")
    r = random.Random(1)
    for x in _random_texts(r, "AB+/=9%\n", 400) + ["eyJmb28iOiAiYmFyIn0K", "ezp9Cg==", "YQ==", "YWI=", "YQ="]:
        assert g(json.dumps(x)) == _is_base64(x), x
    assert g("100") and g("null")
    # beside a pattern both hold
    g = schema_text({"type": "string", "contentEncoding": "base64", "pattern": "^Y"}, draft="draft7")
    assert g('"YQ=="') and not g('"ezp9Cg=="') and not g("1")


def test_content_json_text(tiny_vocab):
    s = {"contentMediaType": "application/json"}
    g = schema_text(s, draft="draft7")
    assert g.g.kind == "cfg"
    r = random.Random(2)
    texts = [_json_pieces(r) for _ in range(300)] + _random_texts(r, '{}[]":,1a ', 300)
    texts += ["{:}", '{"foo": "bar"}', "", " ", "nul", "01", "1.", '"\\u12"', '"\\ud800"', "[1,]"]
    for x in texts:
        for dump in (json.dumps(x), json.dumps(x, ensure_ascii=False)):
            assert g(dump) == _is_json_text(x), (x, dump)
    for v in (100, None, [1], {"a": "{"}):
        assert g(json.dumps(v))
    # every prefix: the mask is what advance takes (tiny vocabulary)
    cg = sg.compile(g.g, tiny_vocab, cache=False)
    for x in ['{"a": [1, "b"]}', '[{}', "tru", ' "\\\\u0041" ']:
        accepts(cg, tiny_vocab, json.dumps(x), brute=True)
    # a string type alone, and beside other types
    g = schema_text({"type": ["string", "integer"], "contentMediaType": "application/json"}, draft="draft7")
    assert g('"[1]"') and g("3") and not g('"[1"') and not g("null")


def test_content_samples_decode(tiny_vocab):
    """Random outputs under the mask: every finished one decodes (base64) or parses (JSON text)."""
    import numpy as np

    from tests.helpers import sample, structure_bias

    bias = structure_bias(tiny_vocab, 2.0)
    rng = np.random.default_rng(5)
    for schema, check in [({"type": "string", "contentMediaType": "application/json"}, _is_json_text),
                          ({"type": "string", "contentEncoding": "base64"}, _is_base64)]:
        cg = sg.compile(sg.Grammar.from_json_schema(schema, draft="draft7"), tiny_vocab, cache=False)
        done = 0
        for _ in range(60):
            text = sample(cg, tiny_vocab, rng, bias)
            if text is not None:
                done += 1
                assert check(json.loads(text)), text
        assert done >= 20


@pytest.mark.parametrize("schema", [
    {"contentMediaType": "application/json", "contentEncoding": "base64"},
    {"contentMediaType": "text/html"},
    {"contentEncoding": "quoted-printable"},
    {"type": "string", "contentMediaType": "application/json", "maxLength": 5},
])
def test_content_refused_with_pointer(schema):
    with pytest.raises(sg.Unsupported) as e:
        sg.Grammar.from_json_schema({"properties": {"p": schema}}, draft="draft7")
    assert "#/properties/p" in str(e.value)
    # 2020-12: annotations, nothing asserted
    g = schema_text({"properties": {"p": schema}})
    assert g('{"p": "%%"}')
