"""Character classes of the regex front end: Python's ``\\d \\w \\s`` (Unicode or ASCII), ECMA's
white space and line terminators, Unicode general categories (``\\p{..}``) and simple case
folding (:func:`case_closure`), each an :class:`~structgen.automaton.ir.CharSet` computed once
per process (``lru_cache``) from :mod:`unicodedata` / ``str`` predicates of this Python.
"""
from __future__ import annotations

import bisect
import unicodedata
from functools import lru_cache

from ... import caching
from ...automaton import ir

def ranges_where(pred, top: int = ir.MAX_CODE_POINT) -> tuple:
    out, start = [], None
    for cp in range(top + 2):
        ok = cp <= top and not 0xD800 <= cp <= 0xDFFF and pred(chr(cp))
        if ok and start is None:
            start = cp
        elif not ok and start is not None:
            out.append((start, cp - 1))
            start = None
    return tuple(out)


@lru_cache(maxsize=256)
def py_class(name: str) -> ir.CharSet:
    """Python's Unicode ``\\d \\w \\s`` from the str predicates ``re`` itself uses."""
    pred = {"d": str.isdecimal, "w": lambda c: c.isalnum() or c == "_", "s": str.isspace}[name]
    return ir.CharSet.of(ranges_where(pred))


ASCII_CLASSES = {
    "d": ir.CharSet.of([(0x30, 0x39)]),
    "w": ir.CharSet.of([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]),
    "s": ir.CharSet.of([(0x09, 0x0D), (0x20, 0x20)]),  # \t \n \v \f \r and space
}
ECMA_SPACE = ir.CharSet.of([(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680),
                             (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F),
                             (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)])
ECMA_LINE_TERMINATORS = ir.CharSet.of([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)])

GC_LONG = {
    "letter": "L", "cased_letter": "LC", "uppercase_letter": "Lu", "lowercase_letter": "Ll",
    "titlecase_letter": "Lt", "modifier_letter": "Lm", "other_letter": "Lo", "mark": "M",
    "nonspacing_mark": "Mn", "spacing_mark": "Mc", "enclosing_mark": "Me", "number": "N",
    "decimal_number": "Nd", "letter_number": "Nl", "other_number": "No", "punctuation": "P",
    "connector_punctuation": "Pc", "dash_punctuation": "Pd", "open_punctuation": "Ps",
    "close_punctuation": "Pe", "initial_punctuation": "Pi", "final_punctuation": "Pf",
    "other_punctuation": "Po", "symbol": "S", "math_symbol": "Sm", "currency_symbol": "Sc",
    "modifier_symbol": "Sk", "other_symbol": "So", "separator": "Z", "space_separator": "Zs",
    "line_separator": "Zl", "paragraph_separator": "Zp", "other": "C", "control": "Cc",
    "format": "Cf", "surrogate": "Cs", "private_use": "Co", "unassigned": "Cn",
}


@lru_cache(maxsize=None)
def all_categories() -> dict:
    cats: dict = {}
    prev, start = None, 0
    for cp in range(ir.MAX_CODE_POINT + 2):
        c = unicodedata.category(chr(cp)) if cp <= ir.MAX_CODE_POINT else None
        if c != prev:
            if prev is not None:
                cats.setdefault(prev, []).append((start, cp - 1))
            prev, start = c, cp
    return cats


@lru_cache(maxsize=256)
def general_category(short: str) -> ir.CharSet:
    cats = all_categories()
    if short == "LC":
        names = ["Lu", "Ll", "Lt"]
    elif len(short) == 1:
        names = [c for c in cats if c[0] == short]
    else:
        names = [short]
    return ir.CharSet.of([r for n in names for r in cats.get(n, ())])


@lru_cache(maxsize=None)
def fold_groups():
    """Case-equivalence classes: code points related by Python's simple lower/upper
    mapping (transitively).  Returns ``(sorted members, group id per member, groups)``."""
    try:
        from _sre import unicode_tolower as lower_cp
    except ImportError:  # pragma: no cover - other Python implementations
        def lower_cp(cp):
            s = chr(cp).lower()
            return ord(s) if len(s) == 1 else cp
    parent: dict = {}

    def find(x):
        while parent.get(x, x) != x:
            parent[x] = parent.get(parent[x], parent[x])
            x = parent[x]
        return x

    def join(a, b):
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    for cp in range(0x20000):  # no cased characters above U+1FFFF
        if 0xD800 <= cp <= 0xDFFF:
            continue
        lo = lower_cp(cp)
        if lo != cp:
            join(cp, lo)
        up = chr(cp).upper()
        if len(up) == 1 and ord(up) != cp:
            join(cp, ord(up))
    groups: dict = {}
    for cp in list(parent):
        groups.setdefault(find(cp), {find(cp)}).add(cp)
    members, gid, glist = [], [], []
    for i, g in enumerate(groups.values()):
        glist.append(tuple(sorted(g)))
        for cp in g:
            members.append(cp)
            gid.append(i)
    order = sorted(range(len(members)), key=members.__getitem__)
    return [members[i] for i in order], [gid[i] for i in order], glist


def case_closure(cs: ir.CharSet, ascii_only: bool) -> ir.CharSet:
    if ascii_only:
        extra = []
        for a, b in cs.ranges:
            for lo, hi, delta in ((0x41, 0x5A, 32), (0x61, 0x7A, -32)):
                x, y = max(a, lo), min(b, hi)
                if x <= y:
                    extra.append((x + delta, y + delta))
        return cs.union(ir.CharSet.of(extra)) if extra else cs
    members, gid, groups = fold_groups()
    hit = set()
    for a, b in cs.ranges:
        i = bisect.bisect_left(members, a)
        j = bisect.bisect_right(members, b)
        hit.update(gid[i:j])
    if not hit:
        return cs
    extra = [(cp, cp) for g in hit for cp in groups[g]]
    return cs.union(ir.CharSet.of(extra))


GC_SHORT = {"L", "LC", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "N", "Nd", "Nl", "No",
             "P", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk", "So", "Z", "Zs",
             "Zl", "Zp", "C", "Cc", "Cf", "Cs", "Co", "Cn"}


for _fn in (py_class, all_categories, general_category, fold_groups):
    caching.register_function(f"regex.{_fn.__name__}", _fn)
