"""JSON Schema (draft 2020-12, draft-07 spellings) -> regular-language IR.

:func:`schema_to_ir` returns the IR of every JSON text that is valid under the schema, laid out as
``whitespace`` says; :func:`compile_json_schema` returns it with a :class:`SchemaReport`.

Exactness.  Every language built here is *sound* (it only holds valid instances).  Most are also
*exact* within the universe ``U`` of texts we model -- JSON texts in the chosen layout, numbers
written without an exponent, object keys written as ``json.dumps`` writes them, free-form values
nested at most ``any_depth`` deep.  Languages that are exact within ``U`` can be complemented, which
is how ``not``, ``oneOf`` (when the branches are not provably disjoint) and ``if``/``then``/``else``
are compiled exactly, by intersection and complement.  Sound-but-not-exact languages: objects
whose declared properties are fixed in declared order (>= 2 of them), enum/const objects with >= 2
keys, formats outside :data:`json_formats.EXACT`, recursion cut at ``max_recursion_depth``.
Negating one of those raises :class:`Unsupported` (``lenient=True`` ignores the keyword instead and
reports it).

What is enforced, keyword by keyword (all exact unless said):
- ``type`` (lists, ``integer`` = integral value, ``1.0`` included), ``enum``/``const`` (value
  equality: ``1 == 1.0``, any string escaping; object keys in the given order).
- numbers: the RFC 8259 grammar; bounds and ``multipleOf`` on exponent-free numerals (see
  :mod:`.json_numbers`); draft-04 boolean ``exclusiveMinimum``/``exclusiveMaximum`` too.
- strings: ``minLength``/``maxLength`` in code points (an escape is one code point), ``pattern``
  (ECMA syntax, search semantics) and ``format`` on the *decoded* string (see :mod:`.json_strings`).
- objects: ``properties`` in declared order (optional ones optional), ``required``,
  ``additionalProperties``, ``patternProperties`` (up to 4 patterns), ``propertyNames``,
  ``min/maxProperties``, ``dependentRequired``, ``dependentSchemas``, draft-07 ``dependencies``.
  Additional properties may appear anywhere between the declared ones.  Duplicate keys are
  treated occurrence by occurrence (RFC 8259 leaves their meaning open).
- arrays: ``items``, ``prefixItems`` (and draft-07 array ``items``/``additionalItems``),
  ``min/maxItems``, ``contains`` with ``minContains``/``maxContains``; ``uniqueItems`` exactly when
  the items range over at most ``unique_items_limit`` distinct values (enum/const/boolean/null),
  else :class:`Unsupported` (lenient: ignored and reported).
- ``anyOf``, ``allOf`` (intersection), ``oneOf``, ``not``, ``if``/``then``/``else``, ``$ref`` (local:
  JSON pointers, ``$anchor``, ``$id``-relative), ``$defs``/``definitions``, boolean schemas.
- recursion: a ``$ref`` cycle is unrolled ``max_recursion_depth`` times, then cut (instances
  nesting deeper are rejected; ``SchemaReport.truncated`` lists the refs); with
  ``recursion="error"`` the cut raises :class:`LimitExceeded` instead.
- free-form values (``{}``, ``true``, ``additionalProperties`` absent...) nest at most
  ``any_depth`` levels: the set of all JSON values is not regular.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any
from urllib.parse import urldefrag, urljoin

from structgen.automaton import ir
from structgen.automaton.build import on_clear
from structgen.errors import LimitExceeded, SchemaError, Unsupported

from . import formats as json_formats
from . import numbers as json_numbers
from .strings import encode, encode_charset, literal_set_node
from .property_order import check_order

# keywords that only annotate (or that we handle through their parents)
ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly",
    "$schema", "$id", "id", "$anchor", "$defs", "definitions", "$vocabulary", "contentMediaType",
    "contentEncoding", "contentSchema", "then", "else", "minContains", "maxContains",
    "additionalItems", "$dynamicAnchor", "$recursiveAnchor",
})
UNSUPPORTED = frozenset({"unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef"})
#: keywords that constrain values of one type (besides ``type`` itself)
_TYPE_KEYWORDS = frozenset({
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
    "pattern", "format", "properties", "required", "additionalProperties", "patternProperties",
    "propertyNames", "minProperties", "maxProperties", "dependentRequired", "dependentSchemas",
    "dependencies", "items", "prefixItems", "additionalItems", "minItems", "maxItems", "contains",
    "uniqueItems"})
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
                          "dependencies"})
_SCHEMA_VALUES = frozenset({"items", "prefixItems", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
                            "additionalProperties", "additionalItems", "contains", "propertyNames",
                            "unevaluatedProperties", "unevaluatedItems", "contentSchema"})
_APPLICATORS = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "enum", "const", "type"})
TYPES = ("null", "boolean", "object", "array", "number", "string")
_WS_CHARS = ir.CharSet.of([(0x20, 0x20), (0x09, 0x0A), (0x0D, 0x0D)])


@dataclass
class SchemaReport:
    """What a compilation did besides succeeding: keywords ignored (lenient mode), refs cut."""

    grammar: Any = None
    ignored: list = field(default_factory=list)     # [(keyword, pointer, why)]
    truncated: list = field(default_factory=list)   # [pointer of a $ref cut at the recursion bound]
    exact: bool = True                               # False: sound, but narrower than the schema
    notes: list = field(default_factory=list)       # [str]: remarks on sound fallbacks
    unique_keys: bool = False                        # property_order="any": matchers must reject duplicate keys
    live_keys: bool = False                          # ... and keys only used ones complete (closed objects repeated)


@dataclass(frozen=True)
class _L:
    """A compiled sub-schema: its IR and whether it is exact within the universe (see module doc)."""

    node: ir.Node
    exact: bool = True


_NOTHING = _L(ir.NOTHING)
_ANY_CACHE: dict = {}  # (depth, exponent-free numbers, whitespace node, dumps, dfa blocks) -> (IR, work)
on_clear(_ANY_CACHE.clear)


def _lit(s: str) -> ir.Node:
    return ir.literal(s)


class _Compiler:
    def __init__(self, root, *, whitespace="compact", max_whitespace=16, lenient=False, max_recursion_depth=3,
                 recursion="unroll", any_depth=3, unique_items_limit=6, draft=None, max_multiple_of_states=100_000,
                 max_properties_unroll=64, max_states=100_000, time_limit=10.0, dfa_blocks=True,
                 extra_properties="end", property_order="declared", any_order_limit=1024,
                 any_order_max_states=50_000):
        if whitespace not in ("compact", "flexible", "dumps"):
            raise ValueError("whitespace must be 'compact', 'flexible' or 'dumps'")
        if recursion not in ("unroll", "error"):
            raise ValueError("recursion must be 'unroll' or 'error'")
        self.root = root
        # "dumps": exactly json.dumps' default separators ", " and ": ", no other whitespace.
        self.ws = ir.Repeat(_WS_CHARS, 0, int(max_whitespace)) if whitespace == "flexible" else ir.EMPTY
        self.dumps = whitespace == "dumps"
        self.lenient = lenient
        self.max_rec = int(max_recursion_depth)
        self.recursion = recursion
        self.any_depth = int(any_depth)
        self.unique_limit = int(unique_items_limit)
        self.max_mult_states = max_multiple_of_states
        self.max_props_unroll = max_properties_unroll
        self.report = SchemaReport()
        self.max_states = int(max_states)
        self.deadline = None if time_limit is None else time.monotonic() + float(time_limit)
        self.time_limit = time_limit
        self.dfa_blocks = dfa_blocks
        if extra_properties not in ("end", "anywhere"):
            raise ValueError("extra_properties must be 'end' or 'anywhere'")
        self.extra_anywhere = extra_properties == "anywhere"
        # property_order="any": members in any order, each key at most once (see .property_order)
        self.any_order = check_order(property_order) == "any"
        self.any_order_limit = int(any_order_limit)
        self.any_order_max_states = int(any_order_max_states)
        self.report.unique_keys = self.any_order
        self.draft = draft or _detect_draft(root)
        # draft-03/04: an integer has no fraction part (1.0 is a number only); later drafts count
        # any numeral with an integral value
        sch = root.get("$schema", "") if isinstance(root, dict) else ""
        self.plain_integers = draft is None and isinstance(sch, str) and bool(re.search(r"draft-0[34]/", sch))
        self._ref_stack: list = []
        self._memo: dict = {}
        self._any: dict = {}
        self._index_ids()
        self._sep = ir.seq(self.ws, _lit(", " if self.dumps else ","), self.ws)
        self._colon = ir.seq(self.ws, _lit(": " if self.dumps else ":"), self.ws)

    # ---------------------------------------------------------------- errors and lenient mode
    def unsupported(self, keyword: str, ptr: str, why: str) -> None:
        """Raise Unsupported, or record the keyword as ignored in lenient mode."""
        if not self.lenient:
            raise Unsupported(f"JSON Schema keyword '{keyword}': {why}", f"#{ptr}/{keyword}")
        self.report.ignored.append((keyword, f"#{ptr}", why))
        self.report.exact = False

    # ---------------------------------------------------------------- $id / $anchor index
    def _index_ids(self):
        self.by_uri: dict = {}
        base0 = ""
        if isinstance(self.root, dict):
            rid = self.root.get("$id", self.root.get("id")) if self.draft == "draft7" else self.root.get("$id")
            if isinstance(rid, str):
                base0 = urldefrag(rid)[0]
        self.root_base = base0
        self.base_of: dict = {}

        def walk(node, base, ptr):
            if isinstance(node, list):
                for i, x in enumerate(node):
                    walk(x, base, f"{ptr}/{i}")
                return
            if not isinstance(node, dict):
                return
            nid = node.get("$id")
            if isinstance(nid, str) and not (self.draft == "draft7" and "$ref" in node):  # draft-07: $ref wins
                full = urljoin(base, nid)
                uri, frag = urldefrag(full)
                if frag and not uri:
                    uri = base
                if frag:  # draft-07 plain-name fragment ids
                    self.by_uri[f"{urldefrag(base)[0]}#{frag}"] = node
                else:
                    self.by_uri[uri] = node
                    base = uri
            anc = node.get("$anchor")
            if isinstance(anc, str):
                self.by_uri[f"{urldefrag(base)[0]}#{anc}"] = node
            self.base_of[id(node)] = base
            for k, v in node.items():
                # only real subschemas carry identifiers (an $id inside an unknown keyword does not)
                if k in _SCHEMA_MAPS and isinstance(v, dict):
                    for kk, vv in v.items():
                        walk(vv, base, f"{ptr}/{_esc_ptr(k)}/{_esc_ptr(kk)}")
                elif k in _SCHEMA_VALUES:
                    walk(v, base, f"{ptr}/{_esc_ptr(k)}")

        walk(self.root, base0, "")
        self.by_uri.setdefault(base0, self.root)

    def resolve(self, ref: str, base: str, ptr: str):
        full = urljoin(base, ref) if base else ref
        uri, frag = urldefrag(full)
        if frag and not frag.startswith("/"):
            target = self.by_uri.get(f"{uri}#{frag}")
            if target is None:
                raise SchemaError(f"unresolvable $ref {ref!r}", ptr)
            return target, self.base_of.get(id(target), uri)
        doc = self.by_uri.get(uri)
        if doc is None:
            if uri and not uri.startswith(("#",)) and (":" in uri or "/" in uri or "." in uri):
                raise Unsupported(f"remote $ref {ref!r} (only references inside the schema are resolved)",
                                  f"#{ptr}/$ref")
            raise SchemaError(f"unresolvable $ref {ref!r}", ptr)
        node = doc
        if frag:
            for part in frag.split("/")[1:]:
                part = re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), part)
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                    node = node[int(part)]
                elif isinstance(node, dict) and part in node:
                    node = node[part]
                else:
                    raise SchemaError(f"unresolvable $ref {ref!r}", ptr)
        return node, self.base_of.get(id(node), uri)

    # ---------------------------------------------------------------- building blocks
    def check_time(self) -> float | None:
        """The seconds left before ``time_limit`` (None: no limit); raises :class:`LimitExceeded`
        past it."""
        if self.deadline is None:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise LimitExceeded("JSON Schema compilation ran out of time", "time_limit", self.time_limit)
        return left

    def block(self, node: ir.Node) -> ir.Node:
        """``node`` built into a minimal DFA now and embedded.

        Containers repeat their member languages (``m (, m)*``), so a tree-shaped IR doubles per
        nesting level before minimisation; building each container level on its own keeps every
        subset construction within a small factor of the minimal automaton.
        """
        if not self.dfa_blocks or isinstance(node, ir.Embed) or node == ir.NOTHING:
            return node
        from structgen.automaton.build import build_dfa, embedded

        left = self.check_time()
        dfa = build_dfa(node, max_states=self.max_states, time_limit=left)
        if dfa.is_empty():
            return ir.NOTHING
        return embedded(dfa)  # one node per language: the IR around it stays a cache key

    def any_value(self, depth: int | None = None) -> ir.Node:
        """Every JSON value nested at most ``depth`` levels (numbers with exponents included)."""
        return self._any_value(self.any_depth if depth is None else depth, False)

    def universe(self) -> ir.Node:
        """The universe complements are taken in: as :meth:`any_value`, numbers exponent-free."""
        return self._any_value(self.any_depth, True)

    def _any_value(self, depth: int, plain: bool) -> ir.Node:
        from structgen.automaton.build import recording, replay

        key = (depth, plain, self.ws, self.dumps, self.dfa_blocks)
        hit = _ANY_CACHE.get(key)
        if hit is not None:
            replay(hit[1])  # charge a work budget as building it would (deterministic engine choice)
            return hit[0]
        with recording() as rec:
            scalars = [_lit("null"), _lit("true"), _lit("false"),
                       json_numbers.PLAIN_NUMBER if plain else json_numbers.NUMBER, self.string_node()]
            if depth > 0:
                inner = self._any_value(depth - 1, plain)
                member = ir.seq(self.key_node(), self._colon, inner)
                scalars.append(self.container("{", "}", ir.seq(member, ir.Repeat(ir.seq(self._sep, member), 0, None)),
                                              True))
                scalars.append(self.container("[", "]", ir.seq(inner, ir.Repeat(ir.seq(self._sep, inner), 0, None)),
                                              True))
            node = self.block(ir.alt(*scalars))
        _ANY_CACHE[key] = (node, rec.tree)
        return node

    def string_node(self) -> ir.Node:
        return _any_string("value")

    def key_node(self) -> ir.Node:
        return _any_string("key")

    def container(self, open_: str, close: str, nonempty: ir.Node, allow_empty: bool) -> ir.Node:
        """``open ws close`` and/or ``open ws nonempty ws close``, with no doubled whitespace run."""
        parts = []
        if allow_empty:
            parts.append(ir.seq(_lit(open_), self.ws, _lit(close)))
        if nonempty != ir.NOTHING:
            parts.append(ir.seq(_lit(open_), self.ws, nonempty, self.ws, _lit(close)))
        return ir.alt(*parts)

    def compile_exact(self, schema, ptr: str, base: str) -> _L:
        """Compile a sub-schema that will be complemented: extra properties allowed anywhere, so
        that objects with one declared property stay exact."""
        saved = self.extra_anywhere
        self.extra_anywhere = True
        try:
            return self.compile(schema, ptr, base)
        finally:
            self.extra_anywhere = saved

    def negate(self, lang: _L, keyword: str, ptr: str):
        """The complement of ``lang`` within the universe, or None (lenient) when it is not exact."""
        if not lang.exact:
            self.unsupported(keyword, ptr, "needs the complement of a sub-schema that can only be matched "
                                           "approximately (properties in declared order, a format, a cut recursion)")
            return None
        return _L(ir.And((self.universe(), ir.Not(lang.node))))

    # ---------------------------------------------------------------- main entry
    def compile(self, schema, ptr: str = "", base: str | None = None) -> _L:
        if base is None:
            base = self.base_of.get(id(schema), self.root_base) if isinstance(schema, dict) else self.root_base
        if schema is True or schema == {}:
            return _L(self.any_value())
        if schema is False:
            return _NOTHING
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(schema).__name__}", ptr)
        key = (id(schema), self.extra_anywhere)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is schema:
            return hit[1]
        n_trunc = len(self.report.truncated)
        base = self.base_of.get(id(schema), base)
        result = self._compile_dict(schema, ptr, base)
        if len(self.report.truncated) == n_trunc:
            self._memo[key] = (schema, result)
        return result

    def _compile_dict(self, s: dict, ptr: str, base: str) -> _L:
        if always_false(s, self.draft):
            return _NOTHING
        # Object languages that get intersected must not fix where extra properties go (each
        # would force its own keys first): under a conjunction, extras may appear anywhere.
        conj = ("allOf" in s or "if" in s or "dependentSchemas" in s or "dependencies" in s
                or ("$ref" in s and self.draft != "draft7" and any(k in _TYPE_KEYWORDS or k in _APPLICATORS
                                                                   for k in s)))
        if conj and not self.extra_anywhere:
            return self.compile_exact(s, ptr, base)
        if self.draft == "draft7":  # draft-07 may assert content: we cannot decode it
            for k in ("contentMediaType", "contentEncoding"):
                if k in s:
                    self.unsupported(k, ptr, "content decoding is not a regular constraint")
        for k in s:
            if k in UNSUPPORTED:
                if k == "unevaluatedProperties" and s[k] is True or k == "unevaluatedItems" and s[k] is True:
                    continue
                self.unsupported(k, ptr, "not supported")
        parts: list[_L] = []
        if "$ref" in s:
            parts.append(self.ref(s["$ref"], ptr, base))
            if self.draft == "draft7":  # draft-07: $ref overrides its siblings
                return parts[0]
        if "enum" in s or "const" in s:
            # the values are concrete: filter them by ``type`` and only intersect with the
            # type-directed language when other type-specific keywords are present
            parts.append(self.enum_const(s, ptr))
            if any(k in _TYPE_KEYWORDS for k in s):
                parts.append(self.typed(s, ptr, base))
        elif "type" in s or any(k in _TYPE_KEYWORDS for k in s) or not _has_applicator(s):
            parts.append(self.typed(s, ptr, base))
        # else: no type keyword, so the type-directed part is every value: an intersection with it
        # costs a product and only cut the other parts' nesting at the free-form depth
        for i, sub in enumerate(_as_list(s.get("allOf"), "allOf", ptr)):
            parts.append(self.compile(sub, f"{ptr}/allOf/{i}", base))
        if "anyOf" in s:
            subs = [self.compile(x, f"{ptr}/anyOf/{i}", base) for i, x in enumerate(_as_list(s["anyOf"], "anyOf", ptr))]
            parts.append(_L(ir.alt(*[x.node for x in subs]), all(x.exact for x in subs)))
        if "oneOf" in s:
            parts.append(self.one_of(_as_list(s["oneOf"], "oneOf", ptr), ptr, base))
        if "not" in s:
            inner = self.compile_exact(s["not"], f"{ptr}/not", base)
            neg = self.negate(inner, "not", ptr)
            if neg is not None:
                parts.append(neg)
        if "if" in s and ("then" in s or "else" in s):
            parts.append(self.if_then_else(s, ptr, base))
        if not parts:  # only a `not` ignored (lenient): every value
            parts.append(self.typed(s, ptr, base))
        return _and(parts)

    def ref(self, ref, ptr: str, base: str) -> _L:
        if not isinstance(ref, str):
            raise SchemaError("$ref must be a string", ptr)
        target, tbase = self.resolve(ref, base, ptr)
        depth = sum(1 for t in self._ref_stack if t is target)
        if depth >= self.max_rec:
            if self.recursion == "error":
                raise LimitExceeded(f"recursive $ref {ref!r} at {ptr or '#'} nests deeper than the bound",
                                    "max_recursion_depth", self.max_rec)
            self.report.truncated.append(ptr or "#")
            self.report.exact = False
            return _L(ir.NOTHING, False)
        self._ref_stack.append(target)
        try:
            if isinstance(target, dict) and any(t is target for t in self._ref_stack[:-1]):
                # inside a cycle: results depend on the unrolling depth, so bypass the memo
                mk = (id(target), self.extra_anywhere)
                saved = self._memo.pop(mk, None)
                out = self.compile(target, f"{ptr}/$ref", tbase)
                self._memo.pop(mk, None)
                if saved is not None:
                    self._memo[mk] = saved
                return out
            return self.compile(target, f"{ptr}/$ref", tbase)
        finally:
            self._ref_stack.pop()

    # ---------------------------------------------------------------- type-directed part
    def typed(self, s: dict, ptr: str, base: str) -> _L:
        t = s.get("type")
        if t is None:
            types = set(TYPES)
            types.add("integer")
        else:
            tl = t if isinstance(t, list) else [t]
            for x in tl:
                if x not in TYPES and x != "integer":
                    if x == "any":
                        return _L(self.any_value())
                    raise SchemaError(f"unknown type {x!r}", f"{ptr}/type")
            types = set(tl)
        parts = []
        if "null" in types:
            parts.append(_L(_lit("null")))
        if "boolean" in types:
            parts.append(_L(ir.alt(_lit("true"), _lit("false"))))
        if "number" in types or "integer" in types:
            parts.append(self.number(s, ptr, integer="number" not in types))
        if "string" in types:
            parts.append(self.string(s, ptr, base))
        if "object" in types:
            parts.append(self.object(s, ptr, base))
        if "array" in types:
            parts.append(self.array(s, ptr, base))
        return _L(ir.alt(*[p.node for p in parts]), all(p.exact for p in parts))

    def number(self, s: dict, ptr: str, integer: bool) -> _L:
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
        if lo is None and hi is None and mult is None:
            if integer and self.plain_integers:
                return _L(json_numbers.PLAIN_INTEGER)
            return _L(json_numbers.INTEGER if integer else json_numbers.NUMBER)
        node = json_numbers.number_interval(lo, lo_x, hi, hi_x, integer=integer)
        if integer and self.plain_integers:
            node = ir.And((node, json_numbers.PLAIN_INTEGER))
        if mult is not None:
            step = json_numbers.to_decimal(mult, f"{ptr}/multipleOf")
            node = ir.And((node, json_numbers.multiple_of_node(step, self.max_mult_states, f"{ptr}/multipleOf")))
        return _L(node)

    def string(self, s: dict, ptr: str, base: str) -> _L:
        conds = []
        exact = True
        lo, hi = s.get("minLength", 0), s.get("maxLength")
        for kw, v in (("minLength", lo), ("maxLength", hi)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v)):
                raise SchemaError(f"{kw} must be a non-negative integer", f"{ptr}/{kw}")
        if lo or hi is not None:
            conds.append(ir.Repeat(ir.ANY_CHAR, int(lo), None if hi is None else int(hi)))
        if "pattern" in s:
            conds.append(self.pattern(s["pattern"], f"{ptr}/pattern"))
        fmt = s.get("format")
        if isinstance(fmt, str):
            if fmt in json_formats.NOT_REGULAR:
                self.unsupported("format", ptr, f"format {fmt!r} is not a regular language")
            else:
                f = json_formats.format_ir(fmt)
                if f is not None:
                    conds.append(f)
                    exact = fmt in json_formats.EXACT
        if not conds:
            return _L(self.string_node())
        body = conds[0] if len(conds) == 1 else ir.And(tuple(conds))
        return _L(ir.seq(_lit('"'), encode(body, "value"), _lit('"')), exact)

    def pattern(self, pattern, ptr: str) -> ir.Node:
        """Decoded-text IR of the strings in which ECMA regex ``pattern`` finds a match."""
        if not isinstance(pattern, str):
            raise SchemaError("pattern must be a string", ptr)
        return pattern_search_ir(pattern, ptr)

    # ---------------------------------------------------------------- enum / const
    def enum_const(self, s: dict, ptr: str) -> _L:
        if "const" in s:
            values, where = [s["const"]], f"{ptr}/const"
        else:
            values, where = s["enum"], f"{ptr}/enum"
            if not isinstance(values, list):
                raise SchemaError("enum must be an array", where)
        if "const" in s and "enum" in s:
            values = [v for v in values if any(_canon(v) == _canon(e) for e in s["enum"])]
        t = s.get("type")
        if t is not None:
            tl = set(t if isinstance(t, list) else [t])
            values = [v for v in values if _json_type(v) in tl or (_json_type(v) == "integer" and "number" in tl)]
        values = _dedupe(values)
        strings = [v for v in values if isinstance(v, str)]
        langs = [self.value_literal(v) for v in values if not isinstance(v, str)]
        nodes = [x.node for x in langs]
        if strings:
            # one trie automaton for all the strings (exact, and far cheaper than an NFA
            # alternative per escaped character for long enums)
            nodes.insert(0, literal_set_node(strings, "value"))
        return _L(ir.alt(*nodes), all(x.exact for x in langs))

    def value_literal(self, v) -> _L:
        """Every serialisation (within the universe) of the JSON value ``v``."""
        if v is None:
            return _L(_lit("null"))
        if v is True:
            return _L(_lit("true"))
        if v is False:
            return _L(_lit("false"))
        if isinstance(v, (int, float)):
            d = json_numbers.to_decimal(v)
            return _L(json_numbers.number_constant(d))
        if isinstance(v, str):
            return _L(ir.seq(_lit('"'), encode(ir.literal(v) if v else ir.EMPTY, "value"), _lit('"')))
        if isinstance(v, list):
            items = [self.value_literal(x) for x in v]
            if not items:
                return _L(self.container("[", "]", ir.NOTHING, True))
            body = [items[0].node]
            for x in items[1:]:
                body += [self._sep, x.node]
            return _L(self.container("[", "]", ir.seq(*body), False), all(x.exact for x in items))
        if isinstance(v, dict):
            if not v:
                return _L(self.container("{", "}", ir.NOTHING, True))
            members = []
            exact = len(v) <= 1
            for k, x in v.items():
                xl = self.value_literal(x)
                exact = exact and xl.exact
                if members:
                    members.append(self._sep)
                members += [self.key_literal(k), self._colon, xl.node]
            return _L(self.container("{", "}", ir.seq(*members), False), exact)
        raise SchemaError(f"not a JSON value: {v!r}")

    def key_literal(self, k: str) -> ir.Node:
        if _PLAIN_KEY.fullmatch(k):  # printable ASCII: written only raw in "key" mode
            return ir.literal(f'"{k}"')
        return ir.seq(_lit('"'), encode(ir.literal(k) if k else ir.EMPTY, "key"), _lit('"'))

    # ---------------------------------------------------------------- applicators
    def one_of(self, subs: list, ptr: str, base: str) -> _L:
        langs = [self.compile(x, f"{ptr}/oneOf/{i}", base) for i, x in enumerate(subs)]
        if len(langs) == 1:
            return langs[0]
        shapes = [self.shape(x, base) for x in subs]
        disjoint = all(_disjoint(shapes[i], shapes[j]) for i in range(len(subs)) for j in range(i + 1, len(subs)))
        if disjoint:
            return _L(ir.alt(*[x.node for x in langs]), all(x.exact for x in langs))
        negs = []
        for i, x in enumerate(langs):
            x = self.compile_exact(subs[i], f"{ptr}/oneOf/{i}", base)
            neg = self.negate(x, "oneOf", ptr)
            if neg is None:  # lenient: oneOf treated as anyOf
                return _L(ir.alt(*[x.node for x in langs]), False)
            negs.append(neg)
        branches = []
        for i, x in enumerate(langs):
            others = [negs[j].node for j in range(len(langs)) if j != i and not _disjoint(shapes[i], shapes[j])]
            branches.append(ir.And((x.node, *others)) if others else x.node)
        return _L(ir.alt(*branches), True)

    def if_then_else(self, s: dict, ptr: str, base: str) -> _L:
        cond = self.compile_exact(s["if"], f"{ptr}/if", base)
        then = self.compile_exact(s.get("then", True), f"{ptr}/then", base)
        els = self.compile_exact(s.get("else", True), f"{ptr}/else", base)
        neg = self.negate(cond, "if", ptr)
        if neg is None:
            return _L(self.any_value(), False)
        node = ir.alt(ir.And((cond.node, then.node)), ir.And((neg.node, els.node)))
        return _L(node, then.exact and els.exact)

    def shape(self, s, base: str, depth: int = 0):
        """A cheap semantic summary for disjointness: (possible types, {required key: const values})."""
        if s is True or s == {}:
            return (frozenset(TYPES) | {"integer"}, {})
        if always_false(s, self.draft):
            return (frozenset(), {})
        if not isinstance(s, dict):
            return (frozenset(TYPES) | {"integer"}, {})
        if "$ref" in s and depth < 8:
            try:
                target, tbase = self.resolve(s["$ref"], self.base_of.get(id(s), base), "")
                inner = self.shape(target, tbase, depth + 1)
            except Exception:
                inner = (frozenset(TYPES) | {"integer"}, {})
        else:
            inner = (frozenset(TYPES) | {"integer"}, {})
        types = set(inner[0])
        t = s.get("type")
        if t is not None:
            tl = set(t if isinstance(t, list) else [t])
            if "number" in tl:
                tl.add("integer")
            types &= tl
        if "const" in s or "enum" in s:
            vals = [s["const"]] if "const" in s else (s["enum"] if isinstance(s["enum"], list) else [])
            types &= {_json_type(v) for v in vals} | ({"number"} if any(_json_type(v) == "integer" for v in vals) else set())
        discr = dict(inner[1])
        props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
        req = s.get("required") if isinstance(s.get("required"), list) else []
        for k in req:
            p = props.get(k)
            if isinstance(p, dict) and ("const" in p or "enum" in p):
                vals = [p["const"]] if "const" in p else (p["enum"] if isinstance(p["enum"], list) else None)
                if vals is not None:
                    discr[k] = [_canon(v) for v in vals]
        return (frozenset(types), discr)

    # ---------------------------------------------------------------- objects
    def object(self, s: dict, ptr: str, base: str) -> _L:
        props = s.get("properties", {})
        if not isinstance(props, dict):
            raise SchemaError("properties must be an object", f"{ptr}/properties")
        required = s.get("required", [])
        if not isinstance(required, list):
            # draft-03 style boolean required inside properties is not supported
            raise SchemaError("required must be an array", f"{ptr}/required")
        required = list(dict.fromkeys(required))
        patterns = s.get("patternProperties", {}) or {}
        addl = s.get("additionalProperties", True)
        names = s.get("propertyNames")
        min_p, max_p = int(s.get("minProperties", 0)), s.get("maxProperties")
        max_p = None if max_p is None else int(max_p)
        exact = True

        names_lang = None
        if names is not None and names is not True:
            nl = self.compile(names, f"{ptr}/propertyNames", base)
            names_lang, exact = nl.node, exact and nl.exact

        pat_items = list(patterns.items())
        pat_ir = [self.pattern(p, f"{ptr}/patternProperties/{_esc_ptr(p)}") for p, _ in pat_items]
        pat_langs = [self.compile(v, f"{ptr}/patternProperties/{_esc_ptr(p)}", base) for p, v in pat_items]
        addl_lang = self.compile(addl, f"{ptr}/additionalProperties", base)
        exact = exact and all(x.exact for x in pat_langs) and addl_lang.exact

        declared = list(props) + [k for k in required if k not in props]
        members = []   # (key, member IR, required)
        keys = []      # property_order="any": the quoted key languages of the members that can occur
        for k in declared:
            where = f"{ptr}/properties/{_esc_ptr(k)}"
            vals = []
            if k in props:
                vals.append(self.compile(props[k], where, base))
            matched = [i for i, (p, _) in enumerate(pat_items) if _search(p, k, pat_ir[i])]
            vals += [pat_langs[i] for i in matched]
            if k not in props and not matched:
                vals.append(addl_lang)
            val = _and(vals)
            exact = exact and val.exact
            key_ir = self.key_literal(k)
            if names_lang is not None:
                key_ir = ir.And((key_ir, names_lang))
            members.append((k, ir.seq(key_ir, self._colon, val.node), k in required))
            if val.node != ir.NOTHING:
                keys.append(key_ir)

        # additional members: keys that are not declared, split by the patterns they match
        extra = []
        not_declared = ir.Not(ir.alt(*[ir.literal(k) if k else ir.EMPTY for k in declared])) if declared else None
        if pat_items or addl is not False:
            if len(pat_items) > 4:
                # exact only per subset of matched patterns: 2^n alternatives
                self.unsupported("patternProperties", ptr, "more than 4 patterns")
            else:
                for mask in range(1 << len(pat_items)):
                    conds = [pat_ir[i] if mask >> i & 1 else ir.Not(pat_ir[i]) for i in range(len(pat_items))]
                    if not_declared is not None:
                        conds.append(not_declared)
                    chosen = [pat_langs[i] for i in range(len(pat_items)) if mask >> i & 1]
                    val = _and(chosen) if chosen else addl_lang
                    if val.node == ir.NOTHING:
                        continue
                    body = (ir.And(tuple(conds)) if len(conds) > 1 else conds[0]) if conds else \
                        ir.Repeat(ir.ANY_CHAR, 0, None)
                    key_ir = ir.seq(_lit('"'), encode(body, "key"), _lit('"'))
                    if names_lang is not None:
                        key_ir = ir.And((key_ir, names_lang))
                    extra.append(ir.seq(key_ir, self._colon, val.node))
                    keys.append(key_ir)
        x_member = ir.alt(*extra) if extra else ir.NOTHING

        content = None
        if self.any_order and (len(members) >= 2 or extra):
            # any order: exact modulo duplicate keys, which the key guard rejects at run time
            extra_open = not pat_items and names_lang is None and len(extra) == 1
            content = self._members(members, x_member, min_p, max_p, keys=keys, ptr=ptr, extra_open=extra_open)
        if content is None:
            if len(members) >= 2 or (members and extra and not self.extra_anywhere and not self.any_order):
                exact = False  # declared properties are fixed in declared order
            saved = self.extra_anywhere
            self.extra_anywhere = saved or self.any_order
            try:
                content = self._members(members, x_member, min_p, max_p)
            finally:
                self.extra_anywhere = saved
        allow_empty = min_p == 0 and not any(r for _, _, r in members)
        node = self.container("{", "}", content, allow_empty)
        dep = self._dependencies(s, ptr, base)
        if dep:
            node = ir.And((node, *[d.node for d in dep]))
            exact = exact and all(d.exact for d in dep)
        return _L(self.block(node), exact)

    def _members(self, members, x_member, min_p, max_p, keys=None, ptr: str = "", extra_open=False):
        """The non-empty member lists: declared members in order, extra ones anywhere.

        With ``keys`` (``property_order="any"``; the quoted key languages of the members that can
        occur; ``extra_open``: the additional members take every undeclared key): members in any
        order, in the form :func:`.property_order.choose_form` picks ("closed" objects repeat
        their members and set ``report.live_keys``)."""
        sep = self._sep
        if keys is not None:
            from . import property_order as po

            if any(r and m == ir.NOTHING for _, m, r in members):
                return ir.NOTHING  # a required key that can have no value
            live = [(k, m, r) for k, m, r in members if m != ir.NOTHING]
            # every key allowed / only declared keys: known without building the key automaton
            open_keys = None
            if x_member == ir.NOTHING:
                open_keys = len(keys) == 0
            elif len(keys) == len(live) + 1 and extra_open:
                open_keys = True
            form = po.choose_form(keys, len(live), self.any_order_limit, open_keys)
            if form == "subset":
                size = po.ir_size(ir.alt(*[m for _, m, _ in live], x_member), self.any_order_max_states)
                if (1 << len(live)) * size > self.any_order_max_states:
                    form = "closed"
            if form == "closed":  # repeated members; the key guard keeps an unused key reachable
                self.report.live_keys = True
                form = "repeat"
            lo = max(min_p, 1) - 1
            hi = None if max_p is None else max_p - 1
            if hi is not None and hi < 0:
                return ir.NOTHING
            if hi is not None and hi > self.max_props_unroll and x_member != ir.NOTHING:
                raise LimitExceeded(f"maxProperties {max_p} would unroll too far", "max_properties_unroll",
                                    self.max_props_unroll)
            return po.members_ir(live, x_member, sep, lo, hi, form)
        n_req = sum(1 for _, _, r in members if r)
        has_x = x_member != ir.NOTHING
        need_count = min_p > max(n_req, 1) or (max_p is not None and (has_x or max_p < len(members)))
        if not has_x and not need_count and members and members[0][2]:
            # first member required: a plain sequence, no intersection needed
            body = [members[0][1]]
            for _, m, req in members[1:]:
                body.append(ir.seq(sep, m) if req else ir.optional(ir.seq(sep, m)))
            return ir.seq(*body)
        if not members and not has_x:
            return ir.NOTHING
        # A: members in order, each preceded by an optional separator (extra members anywhere);
        # B: a well-formed separated list of any member (with the count bounds).  A ∩ B is exact
        # because members are self-delimiting JSON texts, so both split a text at the same commas.
        opt_sep = ir.optional(sep)
        xs = ir.Repeat(ir.seq(opt_sep, x_member), 0, None) if has_x else ir.EMPTY
        a = [xs] if self.extra_anywhere else []
        for _, m, req in members:
            item = ir.seq(opt_sep, m)
            a.append(item if req else ir.optional(item))
            if self.extra_anywhere:
                a.append(xs)
        if not self.extra_anywhere:
            a.append(xs)
        any_member = ir.alt(*[m for _, m, _ in members], x_member)
        lo = max(min_p, 1) - 1
        hi = None if max_p is None else max_p - 1
        if hi is not None and hi < 0:
            return ir.NOTHING
        if hi is not None and hi > self.max_props_unroll and has_x:
            raise LimitExceeded(f"maxProperties {max_p} would unroll too far", "max_properties_unroll",
                                self.max_props_unroll)
        b = ir.seq(any_member, ir.Repeat(ir.seq(sep, any_member), lo, hi))
        return ir.And((ir.seq(*a), b))

    def _dependencies(self, s: dict, ptr: str, base: str) -> list:
        out = []
        dep_req = dict(s.get("dependentRequired", {}) or {})
        dep_sch = dict(s.get("dependentSchemas", {}) or {})
        for k, v in (s.get("dependencies", {}) or {}).items():
            (dep_req if isinstance(v, list) else dep_sch)[k] = v
        for k, need in dep_req.items():
            need = [x for x in need if x != k]
            if not need:
                continue
            # objects without k, or with k and every needed key
            with_all = ir.And(tuple(self._has_key(x) for x in [k, *need]))
            out.append(_L(ir.alt(self._lacks_key(k), with_all)))
        for k, sub in dep_sch.items():
            sl = self.compile(sub, f"{ptr}/dependentSchemas/{_esc_ptr(k)}", base)
            out.append(_L(ir.alt(self._lacks_key(k), ir.And((self._has_key(k), sl.node))), sl.exact))
        return out

    def _any_object(self, key_ir: ir.Node) -> ir.Node:
        member = ir.seq(key_ir, self._colon, self._any_value(self.any_depth - 1, False))
        return self.container("{", "}", ir.seq(member, ir.Repeat(ir.seq(self._sep, member), 0, None)), True)

    def _has_key(self, k: str) -> ir.Node:
        other = ir.seq(self.key_node(), self._colon, self._any_value(self.any_depth - 1, False))
        mine = ir.seq(self.key_literal(k), self._colon, self._any_value(self.any_depth - 1, False))
        rest = ir.Repeat(ir.seq(self._sep, other), 0, None)
        body = ir.seq(ir.Repeat(ir.seq(other, self._sep), 0, None), mine, rest)
        return self.container("{", "}", body, False)

    def _lacks_key(self, k: str) -> ir.Node:
        key = ir.seq(_lit('"'), encode(ir.Not(ir.literal(k) if k else ir.EMPTY), "key"), _lit('"'))
        return self._any_object(key)

    # ---------------------------------------------------------------- arrays
    def array(self, s: dict, ptr: str, base: str) -> _L:
        items = s.get("items")
        prefix = s.get("prefixItems")
        rest_schema, rest_ptr = True, f"{ptr}/items"
        if isinstance(items, list):  # draft-07 spelling
            prefix, rest_schema, rest_ptr = items, s.get("additionalItems", True), f"{ptr}/additionalItems"
        elif items is not None:
            rest_schema = items
        prefix = prefix or []
        plangs = [self.compile(x, f"{ptr}/prefixItems/{i}", base) for i, x in enumerate(prefix)]
        rest = self.compile(rest_schema, rest_ptr, base)
        exact = all(x.exact for x in plangs) and rest.exact
        lo = int(s.get("minItems", 0))
        hi = s.get("maxItems")
        hi = None if hi is None else int(hi)
        k = len(plangs)
        if rest.node == ir.NOTHING:
            hi = k if hi is None else min(hi, k)
        # cut the prefix where an element can't exist
        for i, p in enumerate(plangs):
            if p.node == ir.NOTHING:
                hi = i if hi is None else min(hi, i)
                break
        if hi is not None and lo > hi:
            return _L(ir.NOTHING, exact)
        elems = [p.node for p in plangs]
        sep = self._sep

        def suffix(i):  # elements i.. (1-based), each preceded by a separator
            if hi is not None and i > hi:
                return ir.EMPTY
            if i > k:
                a = max(lo - i + 1, 0)
                b = None if hi is None else hi - i + 1
                return ir.Repeat(ir.seq(sep, rest.node), a, b)
            node = ir.seq(sep, elems[i - 1], suffix(i + 1))
            return node if i <= lo else ir.optional(node)

        first = elems[0] if k else rest.node
        content = ir.seq(first, suffix(2)) if (hi is None or hi >= 1) else ir.NOTHING
        conds = []
        if "contains" in s:
            c = self._contains(s, ptr, base)
            if c is not None:
                conds.append(c.node)
                exact = exact and c.exact
        if s.get("uniqueItems") is True and (hi is None or hi > 1):
            u = self._unique(s, prefix, rest_schema, ptr, base)
            if u is not None:
                conds.append(u)
        if conds:
            content = ir.And((content, *conds))
        allow_empty = lo == 0 and not ("contains" in s and _min_contains(s) > 0)
        return _L(self.block(self.container("[", "]", content, allow_empty)), exact)

    def _contains(self, s, ptr, base):
        c = (self.compile_exact if "maxContains" in s else self.compile)(s["contains"], f"{ptr}/contains", base)
        mn, mx = _min_contains(s), s.get("maxContains")
        opt_sep = ir.optional(self._sep)
        anyv = self.any_value()
        if mx is None:
            if mn == 0:
                return None
            others = ir.Repeat(ir.seq(opt_sep, anyv), 0, None)
            return _L(ir.seq(others, ir.Repeat(ir.seq(opt_sep, c.node, others), mn, None)), True)
        neg = self.negate(c, "maxContains", ptr)
        if neg is None:
            return None
        others = ir.Repeat(ir.seq(opt_sep, neg.node), 0, None)
        return _L(ir.seq(others, ir.Repeat(ir.seq(opt_sep, c.node, others), mn, int(mx))), True)

    def _unique(self, s, prefix, rest_schema, ptr, base):
        schemas = list(prefix) + [rest_schema]
        values = []
        for sub in schemas:
            vs = self.finite_values(sub, base)
            if vs is None:
                self.unsupported("uniqueItems", ptr, "exact only when items range over a small finite set of values")
                return None
            values += vs
        values = _dedupe(values)
        if len(values) > self.unique_limit:
            self.unsupported("uniqueItems", ptr, f"items range over {len(values)} values "
                                                 f"(> unique_items_limit={self.unique_limit})")
            return None
        opt_sep = ir.optional(self._sep)
        lits = [self.value_literal(v).node for v in values]
        conds = []
        for i, lv in enumerate(lits):
            others = [x for j, x in enumerate(lits) if j != i]
            other = ir.Repeat(ir.seq(opt_sep, ir.alt(*others)), 0, None) if others else ir.EMPTY
            conds.append(ir.seq(other, ir.optional(ir.seq(opt_sep, lv, other))))
        return ir.And(tuple(conds))

    def finite_values(self, s, base, depth=0):
        """The values a schema allows when it is a small finite set (enum/const/boolean/null), else None."""
        if s is False:
            return []
        if not isinstance(s, dict) or depth > 8:
            return None
        if "$ref" in s:
            target, tbase = self.resolve(s["$ref"], self.base_of.get(id(s), base), "")
            return self.finite_values(target, tbase, depth + 1)
        if "const" in s:
            vals = [s["const"]]
        elif "enum" in s:
            vals = list(s["enum"])
        elif s.get("type") in ("boolean", "null") or s.get("type") in (["boolean"], ["null"], ["boolean", "null"],
                                                                         ["null", "boolean"]):
            t = s["type"] if isinstance(s["type"], list) else [s["type"]]
            vals = ([True, False] if "boolean" in t else []) + ([None] if "null" in t else [])
        else:
            return None
        # keep only the values the rest of the schema allows (checked by the language itself)
        return vals


# ---------------------------------------------------------------- helpers
def _any_string(mode: str) -> ir.Node:
    return ir.seq(_lit('"'), ir.Repeat(encode_charset(ir.ANY_CHAR, mode), 0, None), _lit('"'))


def _and(parts: list) -> _L:
    parts = [p for p in parts if p is not None]
    nodes = []
    for p in parts:
        if p.node == ir.NOTHING:
            return _L(ir.NOTHING, all(x.exact for x in parts))
        nodes.append(p.node)
    exact = all(p.exact for p in parts)
    if not nodes:
        raise AssertionError("empty conjunction")
    if len(nodes) == 1:
        return _L(nodes[0], exact)
    return _L(ir.And(tuple(nodes)), exact)


def _as_list(v, kw, ptr):
    if v is None:
        return []
    if not isinstance(v, list) or not v:
        raise SchemaError(f"{kw} must be a non-empty array", f"{ptr}/{kw}")
    return v


def _esc_ptr(k: str) -> str:
    return str(k).replace("~", "~0").replace("/", "~1")


def _json_type(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer()):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _canon(v):
    """A hashable key with JSON Schema equality (1 == 1.0, true != 1, key order irrelevant)."""
    if isinstance(v, bool) or v is None:
        return ("lit", v)
    if isinstance(v, (int, float)):
        return ("num", json_numbers.to_decimal(v).normalize())
    if isinstance(v, str):
        return ("str", v)
    if isinstance(v, list):
        return ("arr", tuple(_canon(x) for x in v))
    return ("obj", tuple(sorted((k, _canon(x)) for k, x in v.items())))


def _dedupe(values: list) -> list:
    seen, out = set(), []
    for v in values:
        c = _canon(v)
        if c not in seen:
            seen.add(c)
            out.append(v)
    return out


def _disjoint(a, b) -> bool:
    ta, da = a
    tb, db = b
    ta = set(ta) | ({"integer"} if "number" in ta else set())
    tb = set(tb) | ({"integer"} if "number" in tb else set())
    if not (ta & tb):
        return True
    if ta & tb <= {"object"} or not (ta & tb - {"object"}):
        for k in set(da) & set(db):
            if not set(da[k]) & set(db[k]):
                return True
    return False


_PLAIN_KEY = re.compile(r'[\x20\x21\x23-\x5b\x5d-\x7e]*')


def _has_applicator(s: dict) -> bool:
    """Does ``s`` constrain values through another schema (``$ref``, ``allOf``, ``anyOf``,
    ``oneOf``, ``not``, ``if`` with ``then``/``else``)?"""
    return ("$ref" in s or "allOf" in s or "anyOf" in s or "oneOf" in s or "not" in s
            or ("if" in s and ("then" in s or "else" in s)))


_TRIVIAL_KEYS = ANNOTATIONS - {"contentMediaType", "contentEncoding", "contentSchema"}


def always_false(s, draft: str = "2020-12") -> bool:
    """Does no value satisfy ``s`` for a reason seen without compiling it: ``false``, or ``not`` of a
    schema every value satisfies (``not: {}``, ``not: true``: a common way to forbid a property)?
    Compiling those the general way costs a complement of the whole universe."""
    if s is False:
        return True
    if not isinstance(s, dict) or "not" not in s or (draft == "draft7" and "$ref" in s):
        return False
    n = s["not"]
    return n is True or (isinstance(n, dict) and all(k in _TRIVIAL_KEYS for k in n))


def _min_contains(s) -> int:
    v = s.get("minContains", 1)
    return int(v)


#: keywords a declared draft does not have yet: its validators ignore them
_LATER_KEYWORDS = {"draft-03": ("const", "contains", "propertyNames", "if", "then", "else"),
                   "draft-04": ("const", "contains", "propertyNames", "if", "then", "else"),
                   "draft-06": ("if", "then", "else")}
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "items", "prefixItems")


def for_declared_draft(root):
    """``root`` without the keywords its declared ``$schema`` (draft-03, -04 or -06) does not know
    (``if``/``then``/``else``, and before draft-06 ``const``, ``contains``, ``propertyNames``): a
    validator of that draft ignores them, so they must not constrain.  ``root`` itself when
    nothing is dropped; otherwise copies along the changed paths."""
    if not isinstance(root, dict) or not isinstance(root.get("$schema"), str):
        return root
    m = re.search(r"draft-0[346]", root["$schema"])
    if m is None:
        return root
    later = _LATER_KEYWORDS[m.group(0)]

    def walk(s):
        if not isinstance(s, dict):
            return s
        out = None
        for k, v in s.items():
            if k in later:
                new = _DROP
            elif k in _SCHEMA_MAPS and isinstance(v, dict):
                vals = {n: walk(x) for n, x in v.items()}
                new = vals if any(vals[n] is not v[n] for n in v) else v
            elif k in _SUBSCHEMA_LISTS and isinstance(v, list):
                vals = [walk(x) for x in v]
                new = vals if any(a is not b for a, b in zip(vals, v)) else v
            elif k in _SCHEMA_VALUES:
                new = walk(v)
            else:
                new = v
            if new is not v and out is None:
                out = dict(s)
            if out is not None:
                if new is _DROP:
                    out.pop(k, None)
                else:
                    out[k] = new
        return s if out is None else out

    return walk(root)


_DROP = object()


def _detect_draft(root) -> str:
    if isinstance(root, dict):
        sch = root.get("$schema", "")
        if isinstance(sch, str) and re.search(r"draft-0[3-7]", sch):
            return "draft7"
    return "2020-12"


# ---------------------------------------------------------------- regex patterns (search semantics)
_ANY_STAR = ir.Repeat(ir.ANY_CHAR, 0, None)


@lru_cache(maxsize=4096)
def pattern_search_ir(pattern: str, ptr: str = "") -> ir.Node:
    """Decoded-text IR of the strings in which ``pattern`` (ECMA-262 syntax) finds a match."""
    from structgen.errors import RegexError
    from ..regex import parse_regex

    try:
        return parse_regex(pattern, syntax="ecma", anchored=False)
    except (Unsupported, RegexError) as e:
        raise Unsupported(f"pattern {pattern!r}: {e}", f"#{ptr}") from e


def _search(pattern: str, key: str, node: ir.Node) -> bool:
    """Does ``pattern`` find a match in the literal ``key``?  Decided on the automaton itself."""
    from structgen.automaton.build import build_dfa

    return build_dfa(node).fullmatch(key.encode("utf-8"))


# ---------------------------------------------------------------- public API
def compile_json_schema(schema, **options) -> SchemaReport:
    """Compile ``schema`` (dict, bool or JSON text); the IR is ``report.grammar``.

    Options: ``whitespace="compact"|"flexible"|"dumps"`` (dumps: exactly ``json.dumps``' ", " and ": "), ``max_whitespace=16`` (longest whitespace run in
    flexible mode), ``lenient=False``, ``max_recursion_depth=3``, ``recursion="unroll"|"error"``,
    ``any_depth=3`` (nesting bound of free-form values), ``unique_items_limit=6``,
    ``draft=None|"2020-12"|"draft7"`` (default: from ``$schema``).
    """
    if isinstance(schema, (str, bytes)):
        try:
            schema = json.loads(schema)
        except ValueError as e:
            raise SchemaError(f"schema is not valid JSON: {e}") from e
    c = _Compiler(schema, **options)
    lang = c.compile(schema, "")
    c.report.grammar = lang.node
    c.report.exact = c.report.exact and lang.exact
    return c.report


def schema_to_ir(schema, **options) -> ir.Node:
    """The IR of the JSON texts valid under ``schema``; see :func:`compile_json_schema` for options."""
    return compile_json_schema(schema, **options).grammar
