"""Typed records of what one schema object says, keyword group by keyword group, each knowing its
JSON pointer (``ptr``, without the leading ``#``) for errors.

Read where a compiler needs them (``ObjectFacets.read(s, ptr)`` ...), so a malformed keyword
raises :class:`SchemaError` naming its pointer exactly when the compilers used to, and never for
a part of the document no compiler reaches.  Values that are sub-schemas stay raw (dicts or
booleans): the compilers memoise by their identity.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from structgen.errors import SchemaError

from . import numbers as json_numbers
from .reader import as_list, escape_pointer
from .values import canon, dedupe, is_count, json_type


@dataclass(frozen=True)
class ObjectFacets:
    """``properties`` (declared order), ``required`` (deduplicated, in order), ``patternProperties``,
    ``additionalProperties`` (default ``True``), ``propertyNames`` (None when absent), property
    counts, and ``dependentRequired`` / ``dependentSchemas`` with draft-07 ``dependencies`` split
    between them."""

    ptr: str
    properties: dict
    required: list
    pattern_properties: dict
    additional: Any = True
    property_names: Any = None
    min_properties: int = 0
    max_properties: int | None = None

    @classmethod
    def read(cls, s: dict, ptr: str, lax: bool = False) -> "ObjectFacets":
        """``lax``: a falsy ``properties`` (``null``, ``[]``) reads as ``{}`` (the grammar compiler's
        reading) instead of raising."""
        props = s.get("properties", {})
        if lax:
            props = props or {}
        if not isinstance(props, dict):
            raise SchemaError("properties must be an object", f"{ptr}/properties")
        required = s.get("required", [])
        if not isinstance(required, list):
            # draft-03 style boolean required inside properties is not supported
            raise SchemaError("required must be an array", f"{ptr}/required")
        max_p = s.get("maxProperties")
        return cls(ptr, props, list(dict.fromkeys(required)), s.get("patternProperties", {}) or {},
                   s.get("additionalProperties", True), s.get("propertyNames"), int(s.get("minProperties", 0)),
                   None if max_p is None else int(max_p))

    def declared(self) -> list:
        """The declared keys: ``properties`` in order, then required keys it does not list."""
        return list(self.properties) + [k for k in self.required if k not in self.properties]

    def property_ptr(self, k: str) -> str:
        return f"{self.ptr}/properties/{escape_pointer(k)}"

    def pattern_ptr(self, p: str) -> str:
        return f"{self.ptr}/patternProperties/{escape_pointer(p)}"


@dataclass(frozen=True)
class Dependencies:
    """``dependentRequired`` and ``dependentSchemas``, draft-07 ``dependencies`` split between them
    (a list of names: required; a schema: a dependent schema)."""

    ptr: str
    required: dict = field(default_factory=dict)
    schemas: dict = field(default_factory=dict)

    @classmethod
    def read(cls, s: dict, ptr: str) -> "Dependencies":
        dep_req = dict(s.get("dependentRequired", {}) or {})
        dep_sch = dict(s.get("dependentSchemas", {}) or {})
        for k, v in (s.get("dependencies", {}) or {}).items():
            (dep_req if isinstance(v, list) else dep_sch)[k] = v
        return cls(ptr, dep_req, dep_sch)

    def schema_ptr(self, k: str) -> str:
        return f"{self.ptr}/dependentSchemas/{escape_pointer(k)}"


@dataclass(frozen=True)
class ArrayFacets:
    """The element schemas (``prefix``: ``prefixItems`` or draft-07 array ``items``; ``rest``: the
    schema of the elements after them, ``items`` or ``additionalItems``, at ``rest_ptr``), item
    counts, ``contains`` with its counts and ``uniqueItems``."""

    ptr: str
    prefix: list
    rest: Any
    rest_ptr: str
    min_items: int
    max_items: int | None
    has_contains: bool = False
    contains: Any = None
    min_contains: int = 1
    max_contains: Any = None
    unique: bool = False

    @classmethod
    def read(cls, s: dict, ptr: str) -> "ArrayFacets":
        items = s.get("items")
        prefix = s.get("prefixItems")
        rest, rest_ptr = True, f"{ptr}/items"
        if isinstance(items, list):  # draft-07 spelling
            prefix, rest, rest_ptr = items, s.get("additionalItems", True), f"{ptr}/additionalItems"
        elif items is not None:
            rest = items
        hi = s.get("maxItems")
        has_c = "contains" in s
        return cls(ptr, prefix or [], rest, rest_ptr, int(s.get("minItems", 0)), None if hi is None else int(hi),
                   has_c, s.get("contains"), int(s.get("minContains", 1)) if has_c else 1, s.get("maxContains"),
                   s.get("uniqueItems") is True)

    def prefix_ptr(self, i: int) -> str:
        return f"{self.ptr}/prefixItems/{i}"


@dataclass(frozen=True)
class StringFacets:
    """``minLength`` / ``maxLength`` (validated: non-negative integers), ``pattern``, ``format``."""

    ptr: str
    min_length: Any = 0
    max_length: Any = None
    pattern: Any = None
    has_pattern: bool = False
    format: Any = None

    @classmethod
    def read(cls, s: dict, ptr: str) -> "StringFacets":
        lo, hi = s.get("minLength", 0), s.get("maxLength")
        for kw, v in (("minLength", lo), ("maxLength", hi)):
            if v is not None and (not is_count(v)):
                raise SchemaError(f"{kw} must be a non-negative integer", f"{ptr}/{kw}")
        return cls(ptr, lo, hi, s.get("pattern"), "pattern" in s, s.get("format"))


@dataclass(frozen=True)
class NumberFacets:
    """The bounds (``lo``/``hi`` as :class:`Decimal`, ``*_x`` exclusive; draft-04 boolean
    ``exclusiveMinimum`` / ``exclusiveMaximum`` folded in, the tighter of a bound and its exclusive
    form kept) and ``multipleOf`` (None when absent)."""

    ptr: str
    lo: Decimal | None = None
    lo_x: bool = False
    hi: Decimal | None = None
    hi_x: bool = False
    multiple_of: Decimal | None = None

    @classmethod
    def read(cls, s: dict, ptr: str) -> "NumberFacets":
        lo = hi = None
        lo_x = hi_x = False
        if "minimum" in s:
            lo = json_numbers.to_decimal(s["minimum"], f"{ptr}/minimum")
            if s.get("exclusiveMinimum") is True:
                lo_x = True
        if "maximum" in s:
            hi = json_numbers.to_decimal(s["maximum"], f"{ptr}/maximum")
            if s.get("exclusiveMaximum") is True:
                hi_x = True
        for kw, is_lo in (("exclusiveMinimum", True), ("exclusiveMaximum", False)):
            v = s.get(kw)
            if v is None or isinstance(v, bool):
                continue
            d = json_numbers.to_decimal(v, f"{ptr}/{kw}")
            if is_lo and (lo is None or d >= lo):
                lo, lo_x = d, True
            elif not is_lo and (hi is None or d <= hi):
                hi, hi_x = d, True
        mult = s.get("multipleOf")
        step = None if mult is None else json_numbers.to_decimal(mult, f"{ptr}/multipleOf")
        return cls(ptr, lo, lo_x, hi, hi_x, step)

    @property
    def unbounded(self) -> bool:
        return self.lo is None and self.hi is None and self.multiple_of is None


@dataclass(frozen=True)
class EnumConst:
    """The values ``enum`` / ``const`` allow (``const`` kept only when ``enum`` has it too), filtered
    by ``type`` and deduplicated under JSON Schema equality."""

    ptr: str
    values: list

    @classmethod
    def read(cls, s: dict, ptr: str) -> "EnumConst":
        if "const" in s:
            values, where = [s["const"]], f"{ptr}/const"
        else:
            values, where = s["enum"], f"{ptr}/enum"
            if not isinstance(values, list):
                raise SchemaError("enum must be an array", where)
        if "const" in s and "enum" in s:
            values = [v for v in values if any(canon(v) == canon(e) for e in s["enum"])]
        t = s.get("type")
        if t is not None:
            tl = set(t if isinstance(t, list) else [t])
            values = [v for v in values if json_type(v) in tl or (json_type(v) == "integer" and "number" in tl)]
        return cls(where, dedupe(values))


@dataclass(frozen=True)
class Combinators:
    """``allOf`` / ``anyOf`` / ``oneOf`` (validated lists; None when absent), ``not`` and
    ``if``/``then``/``else`` (``has_if``: an ``if`` with a ``then`` or an ``else``, the only form that
    constrains)."""

    ptr: str
    all_of: list
    any_of: list | None = None
    one_of: list | None = None
    has_not: bool = False
    not_: Any = None
    has_if: bool = False
    if_: Any = None
    then: Any = True
    else_: Any = True

    @classmethod
    def read(cls, s: dict, ptr: str) -> "Combinators":
        all_of = as_list(s.get("allOf"), "allOf", ptr)
        any_of = as_list(s["anyOf"], "anyOf", ptr) if "anyOf" in s else None
        one_of = as_list(s["oneOf"], "oneOf", ptr) if "oneOf" in s else None
        has_if = "if" in s and ("then" in s or "else" in s)
        return cls(ptr, all_of, any_of, one_of, "not" in s, s.get("not"), has_if, s.get("if"),
                   s.get("then", True), s.get("else", True))
