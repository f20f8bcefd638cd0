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
    "digit": "Nd",   # UTS #18 Annex C (also the regex module's \p{digit}); the suite's ECMA patterns use it
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


@lru_cache(maxsize=1)
def _scalar_text() -> str:
    """Every Unicode scalar value once, in order (surrogates left out)."""
    return "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, ir.MAX_CODE_POINT + 1)))


@lru_cache(maxsize=256)
def property_class(body: str) -> ir.CharSet | None:
    """The code points of the ``regex``-module class body ``body`` (for example
    ``\\p{Greek}``, ``\\p{White_Space}``), or None when the module does not know it.  The
    ``regex`` module (installed with transformers) knows scripts and binary properties, which
    :mod:`unicodedata` does not; its Unicode version is the one these classes follow."""
    import regex as regex_module

    try:
        rx = regex_module.compile(f"[{body}]+")
    except regex_module.error:
        return None
    out = []
    for m in rx.finditer(_scalar_text()):
        a, b = m.start(), m.end() - 1
        a += 0x800 if a >= 0xD800 else 0
        b += 0x800 if b >= 0xD800 else 0
        if a < 0xD800 <= b:  # the run spans the surrogate gap
            out += [(a, 0xD7FF), (0xE000, b)]
        else:
            out.append((a, b))
    return ir.CharSet.of(out)


#: Rust's Unicode ``\d \w \s`` (regex crate, UNICODE.md of rust-lang/regex: UTS#18 Annex C)
RUST_CLASS_BODIES = {"d": r"\p{Nd}", "s": r"\p{White_Space}",
                     "w": r"\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}"}

#: Rust's ASCII classes ``[[:alpha:]]`` (and POSIX's)
POSIX_CLASSES = {
    "alnum": ((0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)), "alpha": ((0x41, 0x5A), (0x61, 0x7A)),
    "ascii": ((0x00, 0x7F),), "blank": ((0x09, 0x09), (0x20, 0x20)), "cntrl": ((0x00, 0x1F), (0x7F, 0x7F)),
    "digit": ((0x30, 0x39),), "graph": ((0x21, 0x7E),), "lower": ((0x61, 0x7A),), "print": ((0x20, 0x7E),),
    "punct": ((0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)),
    "space": ((0x09, 0x0D), (0x20, 0x20)), "upper": ((0x41, 0x5A),),
    "word": ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)), "xdigit": ((0x30, 0x39), (0x41, 0x46), (0x61, 0x66)),
}


GC_SHORT = {"L", "LC", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "N", "Nd", "Nl", "No",
             "P", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk", "So", "Z", "Zs",
             "Zl", "Zp", "C", "Cc", "Cf", "Cs", "Co", "Cn"}


for _fn in (py_class, all_categories, general_category, fold_groups, property_class, _scalar_text):
    caching.register_function(f"regex.{_fn.__name__}", _fn)
