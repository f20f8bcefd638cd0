"""Object languages of the regular compiler (a mixin of :class:`.regular.RegularCompiler`).

``properties`` in declared order (optional ones optional), ``required``, ``additionalProperties``
and ``patternProperties`` (keys split by the patterns they match, the non-empty cells only),
``propertyNames``, ``min/maxProperties`` (by intersecting the ordered members with a counted
list of any member: exact, since members are self-delimiting), ``dependentRequired`` /
``dependentSchemas`` / draft-07 ``dependencies`` (objects without the key, or with it and the
dependency).  Under ``property_order="any"`` the members come in any order, in the form
:mod:`.property_order` chooses.  Reads its keywords through :class:`.records.ObjectFacets`.
"""
from __future__ import annotations

from structgen.automaton import ir
from structgen.errors import LimitExceeded

from . import property_order as po
from .keys import MAX_KEY_CELLS, key_cells
from .language import Lang, and_langs, lit, pattern_finds
from .records import Dependencies, ObjectFacets
from .strings import encode


class ObjectLanguages:
    """The object part of the regular compiler; the host class provides ``compile``, ``pattern``,
    ``key_literal``, ``key_node``, ``container``, ``block``, ``any_value_at``, ``sep``/``colon``
    and the options it reads (``extra_anywhere``, ``any_order``...)."""

    def object(self, s: dict, ptr: str, base: str) -> Lang:
        f = ObjectFacets.read(s, ptr)
        props, required, patterns = f.properties, f.required, f.pattern_properties
        addl, names = f.additional, f.property_names
        min_p, max_p = f.min_properties, f.max_properties
        exact = True

        names_lang = None
        if names is not None and names is not True:
            nl = self.compile(names, f"{ptr}/propertyNames", base)
            names_lang, exact = nl.node, exact and nl.exact

        pat_items = list(patterns.items())
        pat_ir = [self.pattern(p, f.pattern_ptr(p)) for p, _ in pat_items]
        pat_langs = [self.compile(v, f.pattern_ptr(p), base) for p, v in pat_items]
        addl_lang = self.compile(addl, f"{ptr}/additionalProperties", base)
        exact = exact and all(x.exact for x in pat_langs) and addl_lang.exact

        declared = f.declared()
        members = []   # (key, member IR, required)
        keys = []      # property_order="any": the quoted key languages of the members that can occur
        for k in declared:
            where = f.property_ptr(k)
            vals = []
            if k in props:
                vals.append(self.compile(props[k], where, base))
            matched = [i for i, (p, _) in enumerate(pat_items) if pattern_finds(k, pat_ir[i])]
            vals += [pat_langs[i] for i in matched]
            if k not in props and not matched:
                vals.append(addl_lang)
            val = and_langs(vals)
            exact = exact and val.exact
            key_ir = self.key_literal(k)
            if names_lang is not None:
                key_ir = ir.And((key_ir, names_lang))
            members.append((k, ir.seq(key_ir, self.colon, val.node), k in required))
            if val.node != ir.NOTHING:
                keys.append(key_ir)

        # additional members: keys that are not declared, split by the patterns they match
        extra = []
        if pat_items or addl is not False:
            cells = key_cells(tuple(pat_ir), declared)
            if cells is None:
                self.unsupported("patternProperties", ptr, f"keys split into more than {MAX_KEY_CELLS} cells")
            for matched, key_ir in cells:
                val = and_langs([pat_langs[i] for i in matched]) if matched else addl_lang
                if val.node == ir.NOTHING:
                    continue
                if names_lang is not None:
                    key_ir = ir.And((key_ir, names_lang))
                extra.append(ir.seq(key_ir, self.colon, val.node))
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
        return Lang(self.block(node), exact)

    def _members(self, members, x_member, min_p, max_p, keys=None, ptr: str = "", extra_open=False):
        """The non-empty member lists: declared members in order, extra ones anywhere.

        With ``keys`` (``property_order="any"``; the quoted key languages of the members that can
        occur; ``extra_open``: the additional members take every undeclared key): members in any
        order, in the form :func:`.property_order.choose_form` picks ("closed" objects repeat
        their members and set ``report.live_keys``)."""
        sep = self.sep
        if keys is not None:
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
        deps = Dependencies.read(s, ptr)
        for k, need in deps.required.items():
            need = [x for x in need if x != k]
            if not need:
                continue
            # objects without k, or with k and every needed key
            with_all = ir.And(tuple(self._has_key(x) for x in [k, *need]))
            out.append(Lang(ir.alt(self._lacks_key(k), with_all)))
        for k, sub in deps.schemas.items():
            sl = self.compile(sub, deps.schema_ptr(k), base)
            out.append(Lang(ir.alt(self._lacks_key(k), ir.And((self._has_key(k), sl.node))), sl.exact))
        return out

    def _any_object(self, key_ir: ir.Node) -> ir.Node:
        member = ir.seq(key_ir, self.colon, self.any_value_at(self.any_depth - 1, False))
        return self.container("{", "}", ir.seq(member, ir.Repeat(ir.seq(self.sep, member), 0, None)), True)

    def _has_key(self, k: str) -> ir.Node:
        other = ir.seq(self.key_node(), self.colon, self.any_value_at(self.any_depth - 1, False))
        mine = ir.seq(self.key_literal(k), self.colon, self.any_value_at(self.any_depth - 1, False))
        rest = ir.Repeat(ir.seq(self.sep, other), 0, None)
        body = ir.seq(ir.Repeat(ir.seq(other, self.sep), 0, None), mine, rest)
        return self.container("{", "}", body, False)

    def _lacks_key(self, k: str) -> ir.Node:
        key = ir.seq(lit('"'), encode(ir.Not(ir.literal(k) if k else ir.EMPTY), "key"), lit('"'))
        return self._any_object(key)
