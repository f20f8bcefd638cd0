"""Checks of a schema document before any compiler walks it: keyword value types and nesting depth.

:func:`check_document` walks the sub-schemas a compiler can reach (from the root through the
sub-schema keywords and resolvable ``$ref``\\ s; ``$defs`` only where referenced) with an explicit
stack, so it never recurses, and raises

- :class:`SchemaError` at the keyword's JSON pointer for a keyword value of the wrong type
  (``minLength: "x"``, ``required: ["a", 5]``, ``properties: []``, ``maxItems: -1`` ...), where a
  compiler would otherwise fail with a ``TypeError`` / ``ValueError`` deep inside;
- :class:`LimitExceeded` (``max_schema_depth``; the pointer in the message and as ``pointer``)
  for sub-schemas nested deeper than the limit, counting ``$ref`` hops as one level each.

The compilers are recursive; :func:`structgen.frontends.deep.call_deep` gives them the stack
that the default limit (:data:`MAX_SCHEMA_DEPTH`) needs.
"""
from __future__ import annotations

import math
import weakref
from decimal import Decimal

from structgen.errors import LimitExceeded, SchemaError, StructgenError

from .keywords import SCHEMA_LISTS, SCHEMA_VALUES
from .reader import escape_pointer
from .values import is_count, is_number

#: default bound on sub-schema nesting (``$ref`` hops included)
MAX_SCHEMA_DEPTH = 10_000

_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
           "minContains", "maxContains")
_NUMBERS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_STRINGS = ("pattern", "format", "$ref")
_MAPS = ("properties", "patternProperties", "dependentSchemas")


def _finite(v) -> bool:
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, Decimal):
        return v.is_finite()
    return True


def check_keywords(s: dict, ptr: str, declared: str | None = None) -> None:
    """Raise :class:`SchemaError` at the keyword's pointer when a keyword of the schema object ``s``
    (at ``ptr``) has a value of the wrong type (``declared``: the draft ``$schema`` names)."""
    old = declared in ("draft-03",)
    for kw in _COUNTS:
        if kw in s and not is_count(s[kw]):
            raise SchemaError(f"{kw} must be a non-negative integer, got {s[kw]!r}", f"{ptr}/{kw}")
    for kw in _NUMBERS:
        if kw in s:
            v = s[kw]
            if isinstance(v, bool) and kw.startswith("exclusive"):
                continue  # draft-04 spelling
            if not is_number(v) or not _finite(v):
                raise SchemaError(f"{kw} must be a number, got {v!r}", f"{ptr}/{kw}")
            if kw == "multipleOf" and v <= 0:
                raise SchemaError("multipleOf must be strictly positive", f"{ptr}/{kw}")
    for kw in _STRINGS:
        if kw in s and not isinstance(s[kw], str):
            raise SchemaError(f"{kw} must be a string, got {s[kw]!r}", f"{ptr}/{kw}")
    if "required" in s and not (old and isinstance(s["required"], bool)):
        req = s["required"]
        if not isinstance(req, list):
            raise SchemaError("required must be an array of strings", f"{ptr}/required")
        for i, k in enumerate(req):
            if not isinstance(k, str):
                raise SchemaError(f"required names must be strings, got {k!r}", f"{ptr}/required/{i}")
    if "enum" in s and not isinstance(s["enum"], list):
        raise SchemaError("enum must be an array", f"{ptr}/enum")
    if "uniqueItems" in s and not isinstance(s["uniqueItems"], bool):
        raise SchemaError("uniqueItems must be a boolean", f"{ptr}/uniqueItems")
    if "type" in s and not old:
        t = s["type"]
        if not isinstance(t, (str, list)) or (isinstance(t, list) and not all(isinstance(x, str) for x in t)):
            raise SchemaError(f"type must be a string or an array of strings, got {t!r}", f"{ptr}/type")
    for kw in ("allOf", "anyOf", "oneOf"):
        if kw in s and (not isinstance(s[kw], list) or not s[kw]):
            raise SchemaError(f"{kw} must be a non-empty array", f"{ptr}/{kw}")
    for kw in _MAPS:
        if kw in s and not isinstance(s[kw], dict):
            raise SchemaError(f"{kw} must be an object", f"{ptr}/{kw}")
    if "prefixItems" in s and not isinstance(s["prefixItems"], list):
        raise SchemaError("prefixItems must be an array of schemas", f"{ptr}/prefixItems")
    for kw in ("dependentRequired", "dependencies"):
        if kw not in s:
            continue
        m = s[kw]
        if not isinstance(m, dict):
            raise SchemaError(f"{kw} must be an object", f"{ptr}/{kw}")
        for name, v in m.items():
            where = f"{ptr}/{kw}/{escape_pointer(name)}"
            if kw == "dependencies" and (isinstance(v, (dict, bool)) or (old and isinstance(v, str))):
                continue
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise SchemaError(f"{kw} entries must be arrays of property names"
                                  f"{' or schemas' if kw == 'dependencies' else ''}", where)


def _doc_pointer(ref: str):
    """The document pointer of a local ``#/...`` reference (None for anything else)."""
    if ref == "#":
        return ""
    if ref.startswith("#/"):
        return ref[1:]
    return None


def check_document(doc, max_depth: int | None = MAX_SCHEMA_DEPTH) -> None:
    """Check the reachable sub-schemas of ``doc`` (a :class:`.reader.SchemaDocument`) as the
    module docstring says; ``max_depth=None`` checks no depth."""
    declared = doc.declared
    seen: set = set()
    stack = [(doc.root, "", None, 0)]
    while stack:
        node, ptr, base, depth = stack.pop()
        if isinstance(node, bool):
            continue
        if not isinstance(node, dict):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(node).__name__}", ptr)
        if id(node) in seen:
            continue
        seen.add(id(node))
        if max_depth is not None and depth > max_depth:
            err = LimitExceeded(f"sub-schemas nest deeper than {max_depth} levels at JSON pointer "
                                f"'{ptr or '#'}'", "max_schema_depth", max_depth)
            err.pointer = ptr
            raise err
        check_keywords(node, ptr, declared)
        base = doc.base(node, base)
        kids = []
        for k, v in node.items():
            if k in _MAPS:
                kids.extend((x, f"{ptr}/{k}/{escape_pointer(n)}") for n, x in v.items())
            elif k == "dependencies":
                kids.extend((x, f"{ptr}/{k}/{escape_pointer(n)}") for n, x in v.items() if isinstance(x, (dict, bool)))
            elif k in SCHEMA_VALUES:
                if isinstance(v, list) and k in SCHEMA_LISTS:
                    kids.extend((x, f"{ptr}/{k}/{i}") for i, x in enumerate(v))
                elif isinstance(v, list):
                    raise SchemaError(f"{k} must be a schema", f"{ptr}/{k}")
                else:
                    kids.append((v, f"{ptr}/{k}"))
        for x, p in reversed(kids):
            stack.append((x, p, base, depth + 1))
        ref = node.get("$ref")
        if isinstance(ref, str):
            try:
                target, tbase = doc.resolve(ref, base or "", ptr)
            except StructgenError:
                continue  # the compilers report it where they meet it
            here = _doc_pointer(ref)
            stack.append((target, f"{ptr}/$ref" if here is None else here, tbase, depth + 1))


_CHECKED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # document -> depth checked


def check_once(doc, max_depth: int | None = MAX_SCHEMA_DEPTH) -> None:
    """:func:`check_document`, once per document and depth (engine selection compiles a document
    with both compilers)."""
    if doc in _CHECKED and _CHECKED[doc] == max_depth:
        return
    check_document(doc, max_depth)
    _CHECKED[doc] = max_depth
