"""The one keyword table of the JSON Schema front end.

Contract: every module that walks or classifies schema keywords (the reader, the regular and
grammar compilers, the combiner, :func:`structgen.constraints._closed`, engine selection) takes its sets
from here, so that "which keywords hold sub-schemas" cannot drift between copies again.

- where sub-schemas live: :data:`SCHEMA_MAPS` (a map of names to sub-schemas: the map itself is
  not a schema), :data:`SCHEMA_VALUES` (one sub-schema, or a list of them), :data:`SCHEMA_LISTS`
  (those whose value may be a list of sub-schemas);
- what a keyword does: :data:`ANNOTATIONS` (no constraint of its own, or handled through its
  parent), :data:`UNSUPPORTED`, :data:`TYPE_KEYWORDS` (constrain values of one type) split into
  :data:`OBJECT_KEYWORDS`, :data:`ARRAY_KEYWORDS`, :data:`STRING_KEYWORDS`,
  :data:`NUMBER_KEYWORDS`; :data:`APPLICATORS`;
- per draft: :data:`LATER_KEYWORDS`, the keywords a declared draft does not know yet (its
  validators ignore them); :func:`known_keywords`.
"""
from __future__ import annotations

#: the JSON types ("integer" is a subset of "number")
TYPES = ("null", "boolean", "object", "array", "number", "string")
ALL_TYPES = frozenset(TYPES) | {"integer"}

#: keywords that only annotate (or that we handle through their parents)
ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly",
    "$schema", "$id", "id", "$anchor", "$defs", "definitions", "$vocabulary", "contentMediaType",
    "contentEncoding", "contentSchema", "then", "else", "minContains", "maxContains",
    "additionalItems", "$dynamicAnchor", "$recursiveAnchor",
})
#: annotations that never constrain (the content keywords do in draft-07)
TRIVIAL_KEYWORDS = ANNOTATIONS - {"contentMediaType", "contentEncoding", "contentSchema"}
UNSUPPORTED = frozenset({"unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef"})

NUMBER_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
STRING_KEYWORDS = frozenset({"minLength", "maxLength", "pattern", "format"})
OBJECT_KEYWORDS = frozenset({"properties", "required", "additionalProperties", "patternProperties",
                             "propertyNames", "minProperties", "maxProperties", "dependentRequired",
                             "dependentSchemas", "dependencies"})
ARRAY_KEYWORDS = frozenset({"items", "prefixItems", "additionalItems", "minItems", "maxItems", "contains",
                            "minContains", "maxContains", "uniqueItems"})
#: keywords that constrain values of one type (besides ``type`` itself)
TYPE_KEYWORDS = (NUMBER_KEYWORDS | STRING_KEYWORDS | OBJECT_KEYWORDS | ARRAY_KEYWORDS) - {"minContains",
                                                                                         "maxContains"}
#: keywords that make a schema constrain values beyond its type-directed part
APPLICATORS = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "enum", "const", "type"})

#: keywords whose value maps names to sub-schemas (draft-07 ``dependencies`` maps to a schema or
#: to a list of names)
SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
                         "dependencies"})
#: keywords whose value is a sub-schema or a list of sub-schemas
SCHEMA_VALUES = frozenset({"items", "prefixItems", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
                           "additionalProperties", "additionalItems", "contains", "propertyNames",
                           "unevaluatedProperties", "unevaluatedItems", "contentSchema"})
#: the keywords of SCHEMA_VALUES whose value may be a list of sub-schemas
SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "items", "prefixItems")
#: keywords whose values are data, never schemas (not walked for sub-schemas)
DATA_KEYWORDS = ("enum", "const", "examples", "default")

#: keywords a declared draft does not have yet: its validators ignore them
LATER_KEYWORDS = {"draft-03": ("const", "contains", "propertyNames", "if", "then", "else"),
                  "draft-04": ("const", "contains", "propertyNames", "if", "then", "else"),
                  "draft-06": ("if", "then", "else")}

KNOWN = ANNOTATIONS | UNSUPPORTED | TYPE_KEYWORDS | APPLICATORS | SCHEMA_VALUES | {"$ref", "required"}


def known_keywords(declared: str | None = None) -> frozenset:
    """The keywords the compilers give a meaning to under ``declared`` (``"draft-03"``,
    ``"draft-04"``, ``"draft-06"`` or None for later drafts); any other keyword is ignored."""
    return KNOWN - frozenset(LATER_KEYWORDS.get(declared, ()))
