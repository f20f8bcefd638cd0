"""Boolean formulas over schema atoms, as the combiner (:mod:`.combine`) builds them.

A formula is a tuple: ``T``, ``F``, ``("A", n)`` atom n, ``("N", f)`` not, ``("&", f, ...)`` and,
``("|", f, ...)`` or, ``("1", f, ...)`` exactly one.  The constructors simplify constants and
flatten nesting, so equal formulas are usually equal tuples (the combiner's memo key).
"""
from __future__ import annotations

T = ("T",)
F = ("F",)


# A formula is a tuple: T, F, ("A", n) atom n, ("N", f) not, ("&", f, ...) and, ("|", f, ...) or,
# ("1", f, ...) exactly one.  The constructors below simplify constants and flatten nesting, so
# equal formulas are usually equal tuples (the memo's key).
def f_not(a):
    if a == T:
        return F
    if a == F:
        return T
    if a[0] == "N":
        return a[1]
    return ("N", a)


def _flat(op: str, parts, unit, zero):
    """``op`` ("&" or "|") of ``parts``: ``unit`` dropped, ``zero`` absorbing, nested ``op``
    flattened, duplicates dropped, operands sorted."""
    out = []
    for p in parts:
        if p == zero:
            return zero
        if p == unit:
            continue
        for q in (p[1:] if p[0] == op else (p,)):
            if q not in out:
                out.append(q)
    if not out:
        return unit
    if len(out) == 1:
        return out[0]
    return (op, *sorted(out))


def f_and(parts):
    return _flat("&", parts, T, F)


def f_or(parts):
    return _flat("|", parts, F, T)


def f_one(parts):
    """Exactly one of ``parts``."""
    parts = [p for p in parts if p != F]
    n_true = sum(1 for p in parts if p == T)
    if n_true > 1:
        return F
    if n_true == 1:
        return f_and([f_not(p) for p in parts if p != T])
    if not parts:
        return F
    if len(parts) == 1:
        return parts[0]
    return ("1", *parts)


def f_eval(f, sat) -> bool:
    """The truth of ``f`` when the atoms in ``sat`` (a set of atom numbers) hold."""
    op = f[0]
    if op == "T":
        return True
    if op == "F":
        return False
    if op == "A":
        return f[1] in sat
    if op == "N":
        return not f_eval(f[1], sat)
    if op == "&":
        return all(f_eval(x, sat) for x in f[1:])
    if op == "|":
        return any(f_eval(x, sat) for x in f[1:])
    return sum(1 for x in f[1:] if f_eval(x, sat)) == 1


def f_atoms(f, out=None) -> list:
    out = [] if out is None else out
    if f[0] == "A":
        if f[1] not in out:
            out.append(f[1])
    elif f[0] not in ("T", "F"):
        for x in f[1:]:
            f_atoms(x, out)
    return out


def f_negative_atoms(f, negated: bool = False, out=None) -> set:
    """The atoms of ``f`` that occur under a negation (an odd number of ``N``, or inside an
    exactly-one, where a part counts both ways).  Narrowing an atom's language narrows ``f`` only
    when the atom is not among these."""
    out = set() if out is None else out
    op = f[0]
    if op == "A":
        if negated:
            out.add(f[1])
    elif op == "N":
        f_negative_atoms(f[1], not negated, out)
    elif op == "1":
        for x in f[1:]:
            f_negative_atoms(x, True, out)
            f_negative_atoms(x, False, out)
    elif op in ("&", "|"):
        for x in f[1:]:
            f_negative_atoms(x, negated, out)
    return out
