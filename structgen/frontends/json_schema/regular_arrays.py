"""Array languages of the regular compiler (a mixin of :class:`.regular.RegularCompiler`).

``prefixItems`` / ``items`` (and draft-07 array ``items`` / ``additionalItems``), ``min/maxItems``
as a chain of optional separated elements, ``contains`` with ``minContains`` / ``maxContains``
(counted occurrences; ``maxContains`` needs the complement of the contained language), and
``uniqueItems`` exactly when the items range over at most ``unique_items_limit`` values (else
:meth:`unsupported`).  Reads its keywords through :class:`.records.ArrayFacets`.
"""
from __future__ import annotations

from structgen.automaton import ir

from .language import Lang
from .records import ArrayFacets
from .values import dedupe


class ArrayLanguages:
    """The array part of the regular compiler; the host class provides ``compile``,
    ``compile_exact``, ``negate``, ``any_value``, ``value_literal``, ``resolve``, ``container``,
    ``block``, ``sep``, ``unsupported`` and ``unique_limit``."""

    def array(self, s: dict, ptr: str, base: str) -> Lang:
        f = ArrayFacets.read(s, ptr)
        prefix, rest_schema = f.prefix, f.rest
        plangs = [self.compile(x, f.prefix_ptr(i), base) for i, x in enumerate(prefix)]
        rest = self.compile(rest_schema, f.rest_ptr, base)
        exact = all(x.exact for x in plangs) and rest.exact
        lo, hi = f.min_items, f.max_items
        k = len(plangs)
        if rest.node == ir.NOTHING:
            hi = k if hi is None else min(hi, k)
        # cut the prefix where an element can't exist
        for i, p in enumerate(plangs):
            if p.node == ir.NOTHING:
                hi = i if hi is None else min(hi, i)
                break
        if hi is not None and lo > hi:
            return Lang(ir.NOTHING, exact)
        elems = [p.node for p in plangs]
        sep = self.sep

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
        suffix = None  # a recursive closure is a reference cycle: break it (refcounting frees the rest)
        conds = []
        if f.has_contains:
            c = self._contains(f, "maxContains" in s, base)
            if c is not None:
                conds.append(c.node)
                exact = exact and c.exact
        if f.unique and (hi is None or hi > 1):
            u = self._unique(s, prefix, rest_schema, ptr, base)
            if u is not None:
                conds.append(u)
        if conds:
            content = ir.And((content, *conds))
        allow_empty = lo == 0 and not (f.has_contains and f.min_contains > 0)
        return Lang(self.block(self.container("[", "]", content, allow_empty)), exact)

    def _contains(self, f: ArrayFacets, counted: bool, base):
        """``contains`` with ``minContains``/``maxContains`` (``counted``: ``maxContains`` is given,
        so the contained language gets complemented)."""
        ptr = f.ptr
        c = (self.compile_exact if counted else self.compile)(f.contains, f"{ptr}/contains", base)
        mn, mx = f.min_contains, f.max_contains
        opt_sep = ir.optional(self.sep)
        anyv = self.any_value()
        if mx is None:
            if mn == 0:
                return None
            others = ir.Repeat(ir.seq(opt_sep, anyv), 0, None)
            return Lang(ir.seq(others, ir.Repeat(ir.seq(opt_sep, c.node, others), mn, None)), True)
        neg = self.negate(c, "maxContains", ptr)
        if neg is None:
            return None
        others = ir.Repeat(ir.seq(opt_sep, neg.node), 0, None)
        return Lang(ir.seq(others, ir.Repeat(ir.seq(opt_sep, c.node, others), mn, int(mx))), True)

    def _unique(self, s, prefix, rest_schema, ptr, base):
        schemas = list(prefix) + [rest_schema]
        values = []
        for sub in schemas:
            vs = self.finite_values(sub, base)
            if vs is None:
                self.unsupported("uniqueItems", ptr, "exact only when items range over a small finite set of values")
                return None
            values += vs
        values = dedupe(values)
        if len(values) > self.unique_limit:
            self.unsupported("uniqueItems", ptr, f"items range over {len(values)} values "
                                                 f"(> unique_items_limit={self.unique_limit})")
            return None
        opt_sep = ir.optional(self.sep)
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
