"""Object rules of the grammar compiler (a mixin of :class:`.cfg.CfgSchemaCompiler`).

Declared properties in declared order (optional ones optional, required ones enforced), up to
``max_floating_permutations`` required keys that ``properties`` does not place in any order,
extra members (``additionalProperties`` / ``patternProperties``, key terminals excluding the
declared names) in any gap (after the declared ones under generation hygiene), or, under
``property_order="any"``, members in any order (forms of :mod:`.property_order`).  Property counts that the rules cannot count go to the combiner or
the regular way.  The rules are those of the :mod:`.cfg` module docstring.
"""
from __future__ import annotations

import itertools

from structgen.automaton import ir

from . import property_order as po
from .keys import MAX_KEY_CELLS, key_cells, other_keys_node
from .language import ANY_STAR, pattern_finds
from .records import ObjectFacets
from .strings import encode


class ObjectRules:
    """The object part of the grammar compiler; the host class provides ``rc`` (its leaf
    compiler), ``value``, ``conjunction``, ``term``, ``lit``, ``rule``, ``fresh``, ``rules``, ``kept``,
    ``recursive``, ``regular_terminal``, ``combined``, ``unsupported`` and its options
    (``extras_last``: generation hygiene puts extra members after the declared ones)."""

    def object(self, s: dict, ptr: str, base) -> list:
        rc = self.rc
        f = ObjectFacets.read(s, ptr, lax=True)
        props, required, patterns = f.properties, f.required, f.pattern_properties
        addl, min_p, max_p = f.additional, f.min_properties, f.max_properties

        pat_items = list(patterns.items())
        pat_ir = [rc.pattern(p, f.pattern_ptr(p)) for p, _ in pat_items]
        declared = f.declared()
        colon = self.lit(":")
        members = []  # (symbols of the member, required)
        keys = []     # property_order="any": the quoted key languages of the members that can occur
        for k in declared:
            where = f.property_ptr(k)
            subs = [props[k]] if k in props else []
            matched = [i for i, (p, _) in enumerate(pat_items) if pattern_finds(k, pat_ir[i])]
            subs += [pat_items[i][1] for i in matched]
            if not subs:
                subs = [addl]
            if len(subs) == 1:
                val = self.value(subs[0], where, base)
            else:
                val = self.value(self.conjunction(subs), where, base)
            if val is None and k in required:
                return []  # a required property that can have no value: no object
            key_ir = rc.key_literal(k)
            key = self.term(key_ir, "key")
            members.append(((key, colon, val) if val is not None else None, k in required))
            if val is not None:
                keys.append(key_ir)

        # extra members: keys not declared, split by the patterns they match
        extra = []
        if pat_items or addl is not False:
            cells = key_cells(tuple(pat_ir), declared) if pat_items else [((), None)]
            if cells is None:
                if not self.recursive(s, base):
                    return self.regular_terminal(s, ptr, base, "patternProperties")
                self.unsupported("patternProperties", ptr, f"keys split into more than {MAX_KEY_CELLS} cells")
                cells = [((), None)]
            for matched, key_ir in cells:
                chosen = [pat_items[i][1] for i in matched]
                if not chosen:
                    val = self.value(addl, f"{ptr}/additionalProperties", base)
                elif len(chosen) == 1:
                    val = self.value(chosen[0], f"{ptr}/patternProperties", base)
                else:
                    combo = {"allOf": chosen}
                    self.kept.append(combo)
                    val = self.value(combo, f"{ptr}/patternProperties", base)
                if val is None:
                    continue
                if key_ir is None:  # no patterns: every undeclared key
                    key_ir = other_keys_node(declared) if declared else None
                    if key_ir is None:
                        body = ir.Not(ir.alt(*[ir.literal(k) if k else ir.EMPTY for k in declared])) \
                            if declared else ANY_STAR
                        key_ir = ir.seq(ir.literal('"'), encode(body, "key"), ir.literal('"'))
                key = self.term(key_ir, "xkey")
                if key is not None:
                    extra.append((key, colon, val))
                    keys.append(key_ir)
        n_req = sum(1 for m, r in members if r)
        n_opt = sum(1 for m, r in members if not r and m is not None)
        if max_p is not None and (extra or max_p < n_req + n_opt) or min_p > n_req:
            if not self.recursive(s, base):
                return self.combined(s, ptr, base, "maxProperties" if max_p is not None else "minProperties")
            if max_p is not None and max_p < n_req or (not extra and min_p > n_req + n_opt):
                return []
            self.unsupported("minProperties" if min_p > n_req else "maxProperties", ptr,
                             "property counts over a recursive sub-schema")
        x = self.rule("X", extra) if extra else None
        if self.any_order and (len(members) >= 2 or extra):
            if any(m is None and r for m, r in members):
                return []  # a required key that can have no value
            live = [(m, r) for m, r in members if m is not None]
            # every key allowed / only declared keys: known without building the key automaton
            open_keys = (len(keys) == 0) if not extra else \
                (True if not pat_items and len(extra) == 1 and len(keys) == len(live) + 1 else None)
            form = po.choose_form(keys, len(live), self.any_order_limit, open_keys)
            if form == "closed":  # repeated members; the key guard keeps an unused key reachable
                self.report.live_keys = True
                form = "repeat"
            return self._chain(live, x, form)
        floating = members[len(props):]  # required keys without a declared place: any order
        if 2 <= len(floating) <= self.max_floating_permutations:
            start = []
            for perm in itertools.permutations(floating):
                start += self._chain(members[:len(props)] + list(perm), x)
            return start
        return self._chain(members, x)

    def _chain(self, members: list, x, order: str = "declared") -> list:
        """The object rules for members in this order (see the module docstring).

        ``order="repeat"`` / ``"subset"`` (``property_order="any"``, see
        :mod:`structgen.frontends.json_schema.property_order`): members in any order, exact modulo duplicate keys.
        "repeat": ``F_c -> O G_c | R G_{c+1}``, ``G_c -> "," F_c | ε (c = r)`` with ``c`` the
        number of required members so far (O: optional and extra members, R: required ones);
        "subset": ``F_U -> m_i G_{U+i} (i not in U) | X G_U``, ``G_U -> "," F_U | ε (U holds
        every required member)`` over the sets U of declared members used."""
        comma, lb, rb = self.lit(","), self.lit("{"), self.lit("}")
        if order == "repeat":
            r = sum(1 for _, req in members if req)
            opt = [m for m, req in members if not req] + ([(x,)] if x else [])
            o = self.rule("O", opt) if opt else None
            rq = self.rule("Rq", [m for m, req in members if req]) if r else None
            f = [self.fresh("F") for _ in range(r + 1)]
            g = [self.fresh("G") for _ in range(r + 1)]
            for c in range(r + 1):
                self.rules[f[c]] = ([(o, g[c])] if o else []) + ([(rq, g[c + 1])] if c < r else [])
            for c in range(r + 1):
                self.rules[g[c]] = ([(comma, f[c])] if self.rules[f[c]] else []) + ([()] if c == r else [])
            return [(lb, f[0], rb)] + ([(lb, rb)] if r == 0 else [])
        if order == "subset":
            n = len(members)
            need = sum(1 << i for i, (_, req) in enumerate(members) if req)
            mem = [self.rule("M", [m]) for m, _ in members]  # shared: 2 symbols per alternative below
            f = [self.fresh("F") for _ in range(1 << n)]
            g = [self.fresh("G") for _ in range(1 << n)]
            for u in range(1 << n):
                alts = [(mem[i], g[u | 1 << i]) for i in range(n) if not u >> i & 1]
                self.rules[f[u]] = alts + ([(x, g[u])] if x else [])
            for u in range(1 << n):
                self.rules[g[u]] = ([(comma, f[u])] if self.rules[f[u]] else []) + ([()] if u & need == need else [])
            return [(lb, f[0], rb)] + ([(lb, rb)] if need == 0 else [])
        if x and self.extras_last:
            return self._chain_extras_last(members, x)
        n = len(members)
        # Q_i / R_i: next declared member from i (R: after a comma); T_i: extras, then R_i
        q = [None] * (n + 2)
        r = [None] * (n + 2)
        t = [None] * (n + 2)
        q[n + 1] = self.rule("Q", [()])
        r[n + 1] = self.rule("R", [()])
        t[n + 1] = self.rule("T", [(comma, x, "$self"), (r[n + 1],)] if x else [(r[n + 1],)])
        for i in range(n, 0, -1):
            m, req = members[i - 1]
            qa, ra = [], []
            if m is not None:
                qa.append((*m, t[i + 1]))
                ra.append((comma, *m, t[i + 1]))
            if not req:
                qa.append((q[i + 1],))
                ra.append((r[i + 1],))
            q[i] = self.rule("Q", qa)
            r[i] = self.rule("R", ra)
            t[i] = self.rule("T", [(comma, x, "$self"), (r[i],)] if x else [(r[i],)])
        for i in range(1, n + 2):  # "$self" placeholders: T_i -> "," X T_i
            self.rules[t[i]] = [tuple(t[i] if y == "$self" else y for y in a) for a in self.rules[t[i]]]
        start = [(lb, q[1], rb)]
        if x:
            start.append((lb, x, t[1], rb))
        return start

    def _chain_extras_last(self, members: list, x) -> list:
        """Declared members in order, then the extra members (generation hygiene,
        ``extra_properties="end"``)::

            OBJ -> "{" Q_1 "}"     Q_i -> m_i R_{i+1} | Q_{i+1} (m_i optional)    Q_{n+1} -> X T | ε
            R_i -> "," m_i R_{i+1} | R_{i+1} (m_i optional)    R_{n+1} -> "," X T | ε    T -> "," X T | ε

        (Q: nothing written yet; R: after a member.)  A subset of the exact object language,
        unambiguous: extra keys exclude the declared names."""
        comma, lb, rb = self.lit(","), self.lit("{"), self.lit("}")
        n = len(members)
        t = self.fresh("T")
        self.rules[t] = [(comma, x, t), ()]
        q = [None] * (n + 2)
        r = [None] * (n + 2)
        q[n + 1] = self.rule("Q", [(x, t), ()])
        r[n + 1] = self.rule("R", [(comma, x, t), ()])
        for i in range(n, 0, -1):
            m, req = members[i - 1]
            qa, ra = [], []
            if m is not None:
                qa.append((*m, r[i + 1]))
                ra.append((comma, *m, r[i + 1]))
            if not req:
                qa.append((q[i + 1],))
                ra.append((r[i + 1],))
            q[i] = self.rule("Q", qa)
            r[i] = self.rule("R", ra)
        return [(lb, q[1], rb)]
