"""Naming the sub-schema that empties a schema: :func:`empty_error`.

Only called once a schema is known to allow no value.  From the root it follows, iteratively,
one sub-schema whose own emptiness forces its parent's (a ``$ref`` target, an ``allOf`` entry,
the schema of a required property, of an element ``minItems`` demands, ``contains``), each
tested by compiling it with the regular compiler; it stops at the first schema whose keywords
contradict each other (``minLength > maxLength``, ``minimum > maximum``, an empty ``enum``, a
``false`` schema, ``not: {}``, a ``$ref`` back to an enclosing schema) or where no single part is
empty (every ``anyOf`` / ``oneOf`` branch empty, or keywords that only together admit nothing).
A sub-schema that is empty where its parent survives without it (an ``anyOf`` branch, an optional
property) is never reached: the walk only enters parts that are necessary.
"""
from __future__ import annotations

from structgen.automaton import ir
from structgen.automaton.build import build_dfa
from structgen.errors import EmptyLanguage, StructgenError

from .keywords import TYPES
from .reader import always_false, escape_pointer
from .records import EnumConst, NumberFacets
from .regular import RegularCompiler
from .values import is_count

_PROBES = 200  # sub-schema compilations at most (the error path only)


class _Probe:
    def __init__(self, doc, options: dict):
        self.rc = RegularCompiler(doc, **options)
        self.left = _PROBES

    def empty(self, s, ptr: str, base) -> bool:
        """Is ``s`` known to allow no value?  (False when unknown.)"""
        if s is False:
            return True
        if not isinstance(s, dict) or self.left <= 0:
            return False
        self.left -= 1
        try:
            node = self.rc.compile(s, ptr, base).node
            return node == ir.NOTHING or build_dfa(node, max_states=self.rc.max_states).is_empty()
        except StructgenError:
            return False


def _types(s: dict):
    t = s.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list) and all(isinstance(x, str) for x in t):
        return set(t)
    return set(TYPES) | {"integer"}


def _reasons(s: dict, ptr: str) -> list:
    """The contradictions seen in the keywords of ``s`` alone."""
    out = []
    if always_false(s):
        out.append("'not' excludes every value")
    for lo_kw, hi_kw in (("minLength", "maxLength"), ("minItems", "maxItems"),
                         ("minProperties", "maxProperties"), ("minContains", "maxContains")):
        lo, hi = s.get(lo_kw), s.get(hi_kw)
        if is_count(lo) and is_count(hi) and lo > hi:
            out.append(f"{lo_kw} {lo} > {hi_kw} {hi}")
    req, hi = s.get("required"), s.get("maxProperties")
    if isinstance(req, list) and is_count(hi) and len(set(map(str, req))) > hi:
        out.append(f"{len(set(map(str, req)))} required properties > maxProperties {hi}")
    try:
        f = NumberFacets.read(s, ptr)
        if f.lo is not None and f.hi is not None and (f.lo > f.hi or (f.lo == f.hi and (f.lo_x or f.hi_x))):
            out.append(f"the lower bound {f.lo} is not below the upper bound {f.hi}")
    except StructgenError:
        pass
    if "enum" in s or "const" in s:
        try:
            vals = EnumConst.read(s, ptr).values
        except StructgenError:
            vals = None
        if vals == []:
            if "const" not in s and s.get("enum") == []:
                out.append("enum is empty")
            else:
                out.append("no enum/const value has an allowed type" if "type" in s
                           else "const and enum have no value in common")
    return out


def _parts(s: dict, ptr: str):
    """``(sub-schema or ("ref", value), its pointer)`` for the parts whose emptiness empties ``s``."""
    if isinstance(s.get("$ref"), str):
        yield ("ref", s["$ref"]), ptr
    allof = s.get("allOf")
    if isinstance(allof, list):
        for i, x in enumerate(allof):
            yield x, f"{ptr}/allOf/{i}"
    types = _types(s)
    if types == {"object"}:
        props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
        req = s.get("required") if isinstance(s.get("required"), list) else []
        for k in dict.fromkeys(x for x in req if isinstance(x, str)):
            if k in props:
                yield props[k], f"{ptr}/properties/{escape_pointer(k)}"
            elif "additionalProperties" in s and not s.get("patternProperties"):
                yield s["additionalProperties"], f"{ptr}/additionalProperties"
    if types == {"array"}:
        n = s.get("minItems", 0)
        n = int(n) if is_count(n) else 0
        items = s.get("items")
        if isinstance(items, list):
            prefix, rest, rest_kw = items, s.get("additionalItems", True), "additionalItems"
            prefix_kw = "items"
        else:
            prefix = s.get("prefixItems") if isinstance(s.get("prefixItems"), list) else []
            rest, rest_kw, prefix_kw = (True if items is None else items), "items", "prefixItems"
        for i, x in enumerate(prefix[:n]):
            yield x, f"{ptr}/{prefix_kw}/{i}"
        if n > len(prefix):
            yield rest, f"{ptr}/{rest_kw}"
        if "contains" in s and s.get("minContains", 1) != 0:
            yield s["contains"], f"{ptr}/contains"


def _doc_pointer(ref: str, here: str) -> str:
    return ref[1:] if ref.startswith("#/") or ref == "#" else f"{here}/$ref"


def explain_empty(doc, options: dict) -> tuple:
    """``(pointer, reason)`` of the sub-schema that empties the document ``doc`` (see the module
    docstring); ``options``: the regular compiler's."""
    probe = _Probe(doc, options)
    s, ptr, base = doc.root, "", doc.root_base
    path: list = []
    while True:
        if s is False:
            return ptr, "the schema is false"
        if not isinstance(s, dict):
            return ptr, "no value satisfies it"
        path.append(s)
        reasons = _reasons(s, ptr)
        if reasons:
            return ptr, "; ".join(reasons)
        base = doc.base(s, base)
        nxt = None
        for sub, sptr in _parts(s, ptr):
            if isinstance(sub, tuple):  # a $ref
                try:
                    sub, sbase = doc.resolve(sub[1], base, ptr)
                except StructgenError:
                    continue
                if any(x is sub for x in path):
                    return ptr, f"its $ref {s['$ref']!r} refers back to an enclosing schema: no finite value satisfies it"
                sptr = _doc_pointer(s["$ref"], ptr)
            else:
                sbase = doc.base(sub, base) if isinstance(sub, dict) else base
            if probe.empty(sub, sptr, sbase):
                nxt = (sub, sptr, sbase)
                break
        if nxt is None:
            for kw in ("anyOf", "oneOf"):
                subs = s.get(kw)
                if isinstance(subs, list) and subs and all(
                        probe.empty(x, f"{ptr}/{kw}/{i}", base) for i, x in enumerate(subs)):
                    return f"{ptr}/{kw}", f"every {kw} branch allows no value"
            return ptr, "its keywords admit no common value"
        s, ptr, base = nxt


def empty_error(doc, options: dict, truncated=()) -> EmptyLanguage:
    """The :class:`EmptyLanguage` error for the document ``doc`` known to allow no value
    (``truncated``: the ``$ref``\\ s the regular compiler cut, when that may be why)."""
    try:
        ptr, why = explain_empty(doc, options)
    except StructgenError:
        ptr, why = "", "no value satisfies it"
    note = ""
    if truncated:
        note = (f" (recursive $ref cut at {', '.join(list(truncated)[:3])}: values nested deeper than "
                f"max_recursion_depth are not counted)")
    return EmptyLanguage(f"the schema allows no value: {why}{note}", ptr)
