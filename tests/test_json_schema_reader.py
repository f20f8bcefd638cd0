"""The JSON Schema reader (structgen.frontends.json_schema.reader, .records, .keywords): the
document read once -- draft, $id / $anchor index, $ref resolution, engine-selection facts --, the
typed keyword records with their JSON pointers, and the one keyword table the compilers use."""
import ast
import pathlib
from decimal import Decimal

import pytest

from structgen.errors import SchemaError, Unsupported
from structgen.frontends.json_schema import keywords as kw
from structgen.errors import OptionError
from structgen.frontends.json_schema.reader import (SchemaDocument, always_false, as_list, escape_pointer,
                                                    for_declared_draft, read_schema)
from structgen.frontends.json_schema.records import (ArrayFacets, Combinators, Dependencies, EnumConst,
                                                     NumberFacets, ObjectFacets, StringFacets)

PKG = pathlib.Path(__file__).resolve().parents[1] / "structgen" / "frontends" / "json_schema"


def test_draft_detection():
    d7 = read_schema({"$schema": "http://json-schema.org/draft-07/schema#"})
    assert d7.draft == "draft7" and d7.declared == "draft-07" and not d7.plain_integers
    d4 = read_schema({"$schema": "http://json-schema.org/draft-04/schema#"})
    assert d4.draft == "draft7" and d4.plain_integers
    assert read_schema({"type": "string"}).draft == "2020-12"
    assert read_schema(True).draft == "2020-12"
    # an explicit draft wins, and then integers are not plain
    forced = read_schema({"$schema": "http://json-schema.org/draft-04/schema#"}, draft="2020-12")
    assert forced.draft == "2020-12" and not forced.plain_integers


def test_for_declared_draft_drops_later_keywords():
    s = {"$schema": "http://json-schema.org/draft-06/schema#", "properties": {"a": {"if": {}, "then": False,
                                                                                   "const": 1}}}
    out = for_declared_draft(s)
    assert out["properties"]["a"] == {"const": 1} and s["properties"]["a"]["if"] == {}
    same = {"$schema": "http://json-schema.org/draft-07/schema#", "if": {}}
    assert for_declared_draft(same) is same
    d4 = {"$schema": "http://json-schema.org/draft-04/schema#", "items": [{"contains": {}}], "const": 2}
    assert for_declared_draft(d4) == {"$schema": d4["$schema"], "items": [{}]}


def test_ref_resolution_pointers_anchors_ids():
    s = {"$id": "https://x.test/root.json",
         "$defs": {"a/b": {"type": "integer"}, "t~": {"type": "null"},
                   "anc": {"$anchor": "here", "type": "string"},
                   "sub": {"$id": "sub.json", "$defs": {"leaf": {"type": "boolean"}}}},
         "properties": {"p": {"$ref": "#/$defs/a~1b"}},
         "x-unknown": {"$id": "ignored.json"}}
    doc = read_schema(s)
    base = doc.root_base
    assert base == "https://x.test/root.json"
    assert doc.resolve("#/$defs/a~1b", base, "")[0] == {"type": "integer"}
    assert doc.resolve("#/$defs/t~0", base, "")[0] == {"type": "null"}
    assert doc.resolve("#here", base, "")[0]["type"] == "string"
    leaf, leaf_base = doc.resolve("sub.json#/$defs/leaf", base, "")
    assert leaf == {"type": "boolean"} and leaf_base == "https://x.test/sub.json"
    assert doc.base(s["$defs"]["sub"]["$defs"]["leaf"]) == "https://x.test/sub.json"
    assert "https://x.test/ignored.json" not in doc.by_uri  # an $id inside an unknown keyword
    with pytest.raises(SchemaError) as e:
        doc.resolve("#/$defs/missing", base, "/properties/p")
    assert e.value.args and "missing" in str(e.value)
    with pytest.raises(Unsupported):
        doc.resolve("https://elsewhere.test/s.json", base, "/properties/p")


def test_draft7_plain_name_ids_and_ref_overrides_id():
    s = {"$schema": "http://json-schema.org/draft-07/schema#",
         "definitions": {"a": {"$id": "#item", "type": "string"},
                         "b": {"$id": "#no", "$ref": "#/definitions/a"}}}
    doc = read_schema(s)
    assert doc.resolve("#item", doc.root_base, "")[0]["type"] == "string"
    with pytest.raises(SchemaError):
        doc.resolve("#no", doc.root_base, "")  # draft-07: $ref beside $id wins, the id does not count


def test_draft4_id_is_the_identifier():
    """Draft-04 spells ``$id`` as ``id`` (JSONSchemaBench o35906: ``"id": "#solarSystemId"``); in a
    later draft ``id`` is just an unknown keyword."""
    defs = {"n": {"id": "#nat", "type": "integer", "minimum": 0},
            "r": {"id": "http://example.com/other.json", "definitions": {"s": {"type": "string"}}}}
    s4 = {"$schema": "http://json-schema.org/draft-04/schema#", "definitions": defs}
    doc = read_schema(s4)
    assert doc.resolve("#nat", doc.root_base, "")[0]["minimum"] == 0
    assert doc.resolve("http://example.com/other.json#/definitions/s", doc.root_base, "")[0]["type"] == "string"
    with pytest.raises(SchemaError):
        later = read_schema({"$schema": "http://json-schema.org/draft-07/schema#", "definitions": defs})
        later.resolve("#nat", later.root_base, "")
    # and draft-04 knows no "$id" (JsonSchemaStore cryproj: "$id" paths beside "$ref": "#/definitions/...")
    s4 = {"$schema": "http://json-schema.org/draft-04/schema#",
          "definitions": {"v": {"$id": "/definitions/v", "type": "string"}},
          "properties": {"p": {"$id": "/properties/p", "$ref": "#/definitions/v"}}}
    doc = read_schema(s4)
    assert doc.resolve("#/definitions/v", doc.base(s4["properties"]["p"]), "")[0]["type"] == "string"


def test_recursion_and_facts():
    rec = {"$defs": {"n": {"properties": {"next": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"}
    doc = read_schema(rec)
    assert doc.recursive() and doc.recursive(rec["$defs"]["n"], None)
    unused = {"$defs": {"n": {"properties": {"next": {"$ref": "#/$defs/n"}}}}, "type": "string"}
    assert not read_schema(unused).recursive()  # $defs alone is not walked for recursion
    small = read_schema({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False})
    assert small.facts.size == 3 and not small.facts.free_form and not small.facts.intersects_objects
    # open to extra members of any value: free-form
    assert read_schema({"type": "object", "properties": {"a": {"type": "string"}}}).facts.free_form
    assert read_schema({"properties": {"a": {}}}).facts.free_form
    assert read_schema({"type": "array", "uniqueItems": True}).facts.free_form  # as measured: any `true`
    assert not read_schema({"enum": [{}], "default": {}}).facts.free_form       # data is not a schema
    # intersecting: two or more conjuncts constrain members (one alone merges into its own order)
    assert not read_schema({"allOf": [{"type": "string"}]}).facts.intersects_objects
    assert read_schema({"allOf": [{"type": "string"}, {"required": ["a"]}, {"maxItems": 2}]}).facts.intersects_objects
    assert not read_schema({"$ref": "#/$defs/a", "type": "object", "$defs": {"a": {}}}).facts.intersects_objects
    assert read_schema({"$ref": "#/$defs/a", "required": ["b"], "$defs": {"a": {}}}).facts.intersects_objects
    assert read_schema({"dependentRequired": {"a": ["b"]}}).facts.intersects_objects
    assert read_schema({"properties": {"allOf": {"type": "string"}}}).facts.intersects_objects is False


def test_object_records():
    s = {"properties": {"a/b": {}, "c": True}, "required": ["c", "d", "c"], "patternProperties": {"^x": {}},
         "additionalProperties": False, "minProperties": 1, "maxProperties": 3, "propertyNames": {"maxLength": 4}}
    f = ObjectFacets.read(s, "/defs/o")
    assert f.required == ["c", "d"] and f.declared() == ["a/b", "c", "d"]
    assert f.additional is False and f.min_properties == 1 and f.max_properties == 3
    assert f.property_ptr("a/b") == "/defs/o/properties/a~1b"
    assert f.pattern_ptr("^x") == "/defs/o/patternProperties/^x"
    with pytest.raises(SchemaError) as e:
        ObjectFacets.read({"properties": []}, "/p")
    assert "/p/properties" in str(e.value) or getattr(e.value, "pointer", None) in (None, "/p/properties")
    assert ObjectFacets.read({"properties": None}, "", lax=True).properties == {}
    with pytest.raises(SchemaError):
        ObjectFacets.read({"required": "a"}, "")
    d = Dependencies.read({"dependencies": {"a": ["b"], "c": {"type": "object"}}, "dependentRequired": {"e": []}},
                          "/o")
    assert d.required == {"e": [], "a": ["b"]} and d.schemas == {"c": {"type": "object"}}
    assert d.schema_ptr("c") == "/o/dependentSchemas/c"


def test_array_string_number_enum_records():
    a = ArrayFacets.read({"items": [{}, True], "additionalItems": False, "minItems": 1, "contains": {},
                          "maxContains": 2}, "/a")
    assert a.prefix == [{}, True] and a.rest is False and a.rest_ptr == "/a/additionalItems"
    assert a.has_contains and a.min_contains == 1 and a.max_contains == 2 and a.prefix_ptr(1) == "/a/prefixItems/1"
    b = ArrayFacets.read({"prefixItems": [{}], "items": {"type": "string"}, "uniqueItems": True}, "")
    assert b.rest == {"type": "string"} and b.rest_ptr == "/items" and b.unique and b.max_items is None
    assert StringFacets.read({"minLength": 2, "pattern": "a"}, "").has_pattern
    with pytest.raises(SchemaError):
        StringFacets.read({"maxLength": -1}, "/s")
    n = NumberFacets.read({"minimum": 1, "exclusiveMinimum": 2, "maximum": 5, "exclusiveMaximum": True}, "")
    assert (n.lo, n.lo_x, n.hi, n.hi_x) == (Decimal(2), True, Decimal(5), True) and not n.unbounded
    assert NumberFacets.read({}, "").unbounded
    e = EnumConst.read({"enum": [1, 1.0, "a", None], "type": ["number", "string"]}, "/e")
    assert e.values == [1, "a"] and e.ptr == "/e/enum"
    assert EnumConst.read({"const": 2, "enum": [1, 2.0]}, "").values == [2]
    with pytest.raises(SchemaError):
        EnumConst.read({"enum": 3}, "")


def test_combinator_records():
    c = Combinators.read({"allOf": [{}], "oneOf": [True, False], "if": {}, "else": False}, "/c")
    assert c.all_of == [{}] and c.one_of == [True, False] and c.any_of is None
    assert c.has_if and c.then is True and c.else_ is False and not c.has_not
    assert not Combinators.read({"if": {}}, "").has_if  # if alone constrains nothing
    with pytest.raises(SchemaError):
        Combinators.read({"anyOf": []}, "")
    assert as_list(None, "allOf", "") == [] and escape_pointer("a~/b") == "a~0~1b"
    assert always_false({"not": {"description": "x"}}) and not always_false({"not": {"type": "string"}})


def test_keyword_table_agrees_with_the_compilers():
    # the sets the compilers were built with (before the table was shared)
    assert kw.TYPE_KEYWORDS == frozenset({
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
        "pattern", "format", "properties", "required", "additionalProperties", "patternProperties",
        "propertyNames", "minProperties", "maxProperties", "dependentRequired", "dependentSchemas",
        "dependencies", "items", "prefixItems", "additionalItems", "minItems", "maxItems", "contains",
        "uniqueItems"})
    assert {"dependencies", "dependentSchemas", "$defs", "definitions"} <= kw.SCHEMA_MAPS
    assert not kw.SCHEMA_MAPS & kw.SCHEMA_VALUES
    assert set(kw.SCHEMA_LISTS) <= kw.SCHEMA_VALUES
    assert "if" not in kw.known_keywords("draft-06") and "const" not in kw.known_keywords("draft-04")
    assert "if" in kw.known_keywords(None)
    # no module of the package keeps its own copy of the table
    for p in PKG.glob("*.py"):
        tree = ast.parse(p.read_text())
        names = {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets
                 if isinstance(t, ast.Name)}
        if p.name != "keywords.py":
            assert not names & {"_SCHEMA_MAPS", "SCHEMA_MAPS", "_SCHEMA_VALUES", "SCHEMA_VALUES",
                                "ANNOTATIONS", "UNSUPPORTED", "_TYPE_KEYWORDS", "TYPE_KEYWORDS"}, p.name
    import structgen.frontends.pydantic as pydantic_frontend  # closes objects through sub-schema maps
    assert pydantic_frontend.SCHEMA_MAPS is kw.SCHEMA_MAPS


def test_compilers_share_one_document():
    from structgen.frontends.json_schema.cfg import CfgSchemaCompiler
    from structgen.frontends.json_schema.regular import RegularCompiler, compile_json_schema

    s = {"$defs": {"a": {"type": "integer"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}
    doc = SchemaDocument(s)
    assert RegularCompiler(doc).doc is doc and CfgSchemaCompiler(doc).doc is doc
    assert compile_json_schema(doc).grammar == compile_json_schema(s).grammar


def test_unknown_options_are_named():
    from structgen.frontends.json_schema.cfg import compile_json_schema_cfg
    from structgen.frontends.json_schema.regular import compile_json_schema
    from structgen.frontends.json_schema.select import compile_with

    for f in (compile_json_schema, compile_json_schema_cfg, lambda s, **o: compile_with("auto", s, **o)):
        with pytest.raises(OptionError, match="'whitspace'"):
            f({"type": "string"}, whitspace="flexible")
    with pytest.raises(OptionError, match="max_array_unroll"):
        compile_json_schema({"type": "string"}, max_array_unroll=4)  # a grammar compiler option
