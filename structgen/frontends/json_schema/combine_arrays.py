"""Arrays in the combiner (a mixin of :class:`.combine.Combiner`): the arrays satisfying a
formula, as an automaton over elements (state: position, violated atoms, ``contains`` hits per
atom) turned into grammar rules by the combiner's ``sequence``.  ``uniqueItems`` is not taken
(:class:`.combine.Fallback`).  Reads its atoms' keywords through :class:`.records.ArrayFacets`.
"""
from __future__ import annotations

from .formulas import T, f_atoms, f_eval
from .records import ArrayFacets


class Fallback(Exception):
    """The construction does not apply to this sub-schema (the message says why)."""


class ArrayFormulas:
    """The array part of the combiner; the host class provides ``o`` (the grammar compiler),
    ``atoms``, ``flatten``, ``value``, ``plain``, ``value_classes`` and ``sequence``."""

    def array(self, f, ptr: str) -> list:
        """The alternatives (``[`` ... ``]``) of the arrays satisfying ``f`` (atoms restricted to
        arrays)."""
        o = self.o
        if f == T:
            o.any_value()
            return [(o.lit("["), o.lit("]")), (o.lit("["), "$elements", o.lit("]"))]
        if f[0] == "A" and self.plain(self.atoms[f[1]][0]):
            return [(self.value(f, ptr),)]
        atoms = []
        for n in f_atoms(f):
            d, base = self.atoms[n]
            if d.get("uniqueItems") is True:
                raise Fallback("uniqueItems")
            a = ArrayFacets.read(d, ptr)
            atoms.append((n, base, list(a.prefix), a.rest, a.min_items, a.max_items,
                          self.flatten(a.contains, base, f"{ptr}/contains") if a.has_contains else None,
                          a.min_contains if a.has_contains else 0,
                          None if not a.has_contains or a.max_contains is None else int(a.max_contains)))
        width = max([len(a[2]) for a in atoms] + [0])
        bounds = [b for a in atoms for b in (a[4], a[5]) if b is not None]
        cap = max([width] + bounds) + 1
        c_caps = [(max(a[7], a[8] or 0) + 1) if a[6] is not None else 0 for a in atoms]

        def item_formulas(pos):
            vals = []
            for (n, base, prefix, rest, lo, hi, cf, c_lo, c_hi) in atoms:
                x = prefix[pos] if pos < len(prefix) else rest
                vals.append(self.flatten(x, base, f"{ptr}/items"))
            return vals

        # effects: (position class, violation mask, contains-hit mask)
        effects = {}
        n_atoms = len(atoms)
        for pos in range(width + 1):
            vals = item_formulas(pos)
            cvals = [a[6] if a[6] is not None else T for a in atoms]
            # the element's class over the item schemas and the contains schemas together
            for vf, vm in self.value_classes(vals + cvals, ptr):
                viol = vm & ((1 << n_atoms) - 1)
                hit = 0
                for i in range(n_atoms):
                    if atoms[i][6] is not None and not vm >> (n_atoms + i) & 1:
                        hit |= 1 << i
                effects.setdefault((pos, viol, hit), []).append(((), vf))

        def step(state, eff):
            count, viol, hits = state
            pos, vm, hit = eff
            if pos != min(count, width):
                return None
            hits = tuple(min(h + (hit >> i & 1), c_caps[i]) for i, h in enumerate(hits))
            return (min(count + 1, cap), viol | vm, hits)

        def accepts(state):
            count, viol, hits = state
            sat = set()
            for i, (n, base, prefix, rest, lo, hi, cf, c_lo, c_hi) in enumerate(atoms):
                if viol >> i & 1 or count < lo or (hi is not None and count > hi):
                    continue
                if cf is not None and (hits[i] < c_lo or (c_hi is not None and hits[i] > c_hi)):
                    continue
                sat.add(n)
            return f_eval(f, sat)

        return self.sequence("[", "]", (0, 0, tuple(0 for _ in atoms)), effects, step, accepts, ptr)
