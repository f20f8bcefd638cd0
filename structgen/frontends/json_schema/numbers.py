"""JSON numbers as regular languages: the number grammar, exact value intervals, exact ``multipleOf``.

Bounded numbers are compiled to exact digit automata over the *exponent-free* forms
``-?(0|[1-9][0-9]*)(\\.[0-9]+)?``: comparing ``m * 10^e`` with a constant is not a regular property
once the exponent is free (``10...0e-n`` needs the count of zeros to equal ``n``), so numbers that are
bounded (or constrained by ``multipleOf``) are written without an exponent.  Within that form every
language here is exact, ``-0`` and trailing fraction zeros included (``1.50 == 1.5``).

Bounds that are all zero (``minimum: 0``...) only ask for a sign, which the mantissa carries: those
are compiled over every numeral, exponents included (:func:`sign_interval`).

Integers (``type: integer``) are the numerals with an integral value: ``-?(0|[1-9][0-9]*)(\\.0+)?``
(JSON Schema counts ``1.0`` as an integer).
"""
from __future__ import annotations

from decimal import Decimal

import numpy as np

from structgen.automaton import ir
from structgen.automaton.build import LRUCache, build_dfa, embedded, recording, replay
from structgen.automaton.dfa import ByteDFA
from structgen.automaton.minimize import canonical_acyclic_dfa
from structgen.errors import LimitExceeded, SchemaError

DIGIT = ir.CharSet(((0x30, 0x39),))
NONZERO = ir.CharSet(((0x31, 0x39),))
ZERO = ir.literal("0")
MINUS = ir.literal("-")
DOT = ir.literal(".")
DIGITS = ir.Repeat(DIGIT, 0, None)
INT = ir.alt(ZERO, ir.seq(NONZERO, DIGITS))
FRAC = ir.seq(DOT, ir.Repeat(DIGIT, 1, None))
ZERO_FRAC = ir.seq(DOT, ir.Repeat(ZERO, 1, None))
EXP = ir.seq(ir.CharSet.of([(ord("e"), ord("e")), (ord("E"), ord("E"))]),
             ir.optional(ir.CharSet.of([(ord("+"), ord("+")), (ord("-"), ord("-"))])), ir.Repeat(DIGIT, 1, None))

#: Every JSON number (RFC 8259 grammar), exponents included.
NUMBER = ir.seq(ir.optional(MINUS), INT, ir.optional(FRAC), ir.optional(EXP))
#: Every exponent-free JSON number.
PLAIN_NUMBER = ir.seq(ir.optional(MINUS), INT, ir.optional(FRAC))
#: Every integral JSON numeral in exponent-free form.
INTEGER = ir.seq(ir.optional(MINUS), INT, ir.optional(ZERO_FRAC))
#: The numerals without fraction or exponent (draft-04's integers).
PLAIN_INTEGER = ir.seq(ir.optional(MINUS), INT)


def to_decimal(value, pointer: str = "") -> Decimal:
    """A schema number as an exact Decimal (floats through their shortest repr)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise SchemaError(f"expected a number, got {value!r}", pointer)
    d = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if not d.is_finite():
        raise SchemaError(f"non-finite number {value!r}", pointer)
    return d


def _split(c: Decimal) -> tuple:
    """``c >= 0`` -> (integer digits, fraction digits without trailing zeros)."""
    s = format(c, "f")
    if "." in s:
        i, f = s.split(".")
        f = f.rstrip("0")
    else:
        i, f = s, ""
    i = i.lstrip("0") or "0"
    return i, f


def _lit(s: str) -> ir.Node:
    return ir.literal(s) if s else ir.EMPTY


def _dset(lo: int, hi: int) -> ir.Node:
    return ir.CharSet(((0x30 + lo, 0x30 + hi),)) if lo <= hi else ir.NOTHING


def _int_lt(i: str) -> ir.Node:
    if i == "0":
        return ir.NOTHING
    parts = [ZERO]
    n = len(i)
    for length in range(1, n):
        parts.append(ir.seq(NONZERO, ir.repeat(DIGIT, length - 1, length - 1)))
    for k in range(n):
        lo = 1 if (k == 0 and n > 1) else 0
        if k == 0 and n == 1:
            lo = 1  # "0" is listed already
        d = int(i[k])
        if d - 1 >= lo:
            parts.append(ir.seq(_lit(i[:k]), _dset(lo, d - 1), ir.repeat(DIGIT, n - k - 1, n - k - 1)))
    return ir.alt(*parts)


def _int_gt(i: str) -> ir.Node:
    if i == "0":
        return ir.seq(NONZERO, DIGITS)
    n = len(i)
    parts = [ir.seq(NONZERO, ir.repeat(DIGIT, n, None))]
    for k in range(n):
        d = int(i[k])
        if d < 9:
            parts.append(ir.seq(_lit(i[:k]), _dset(d + 1, 9), ir.repeat(DIGIT, n - k - 1, n - k - 1)))
    return ir.alt(*parts)


def _frac_parts(f: str, integer: bool) -> tuple:
    """(LT, EQ, GT): optional fraction suffixes comparing below / equal / above ``0.f``."""
    if integer:
        assert f == ""
        return ir.NOTHING, ir.optional(ZERO_FRAC), ir.NOTHING
    if f == "":
        eq = ir.optional(ZERO_FRAC)
        gt = ir.seq(DOT, ir.Repeat(ZERO, 0, None), NONZERO, DIGITS)
        return ir.NOTHING, eq, gt
    lt_bodies = [ir.Repeat(ZERO, 1, None)]
    gt_bodies = [ir.seq(_lit(f), ir.Repeat(ZERO, 0, None), NONZERO, DIGITS)]
    for k in range(len(f)):
        d = int(f[k])
        if k > 0:
            lt_bodies.append(ir.seq(_lit(f[:k]), ir.Repeat(ZERO, 0, None)))
        if d > 0:
            lt_bodies.append(ir.seq(_lit(f[:k]), _dset(0, d - 1), DIGITS))
        if d < 9:
            gt_bodies.append(ir.seq(_lit(f[:k]), _dset(d + 1, 9), DIGITS))
    lt = ir.alt(ir.EMPTY, ir.seq(DOT, ir.alt(*lt_bodies)))
    eq = ir.seq(DOT, _lit(f), ir.Repeat(ZERO, 0, None))
    gt = ir.seq(DOT, ir.alt(*gt_bodies))
    return lt, eq, gt


def _compare(c: Decimal, integer: bool) -> tuple:
    """(LT, EQ, GT) languages of non-negative magnitudes compared with ``c >= 0``."""
    i, f = _split(c)
    frac_any = ir.optional(ZERO_FRAC if integer else FRAC)
    flt, feq, fgt = _frac_parts(f, integer)
    lt = ir.alt(ir.seq(_int_lt(i), frac_any), ir.seq(_lit(i), flt))
    eq = ir.seq(_lit(i), feq)
    gt = ir.alt(ir.seq(_int_gt(i), frac_any), ir.seq(_lit(i), fgt))
    return lt, eq, gt


def _magnitude(lo, lo_strict, hi, hi_strict, integer: bool) -> ir.Node:
    """Magnitudes ``m >= 0`` (no sign) with ``lo <(=) m <(=) hi``; ``None`` = unbounded."""
    frac_any = ir.optional(ZERO_FRAC if integer else FRAC)
    base = ir.seq(INT, frac_any)
    if hi is not None and (hi < 0 or (hi == 0 and hi_strict)):
        return ir.NOTHING
    if lo is not None and lo < 0:
        lo, lo_strict = None, False
    conds = []
    if lo is not None and not (lo == 0 and not lo_strict):
        lt, eq, gt = _compare(lo, integer)
        conds.append(gt if lo_strict else ir.alt(eq, gt))
    if hi is not None:
        lt, eq, gt = _compare(hi, integer)
        conds.append(lt if hi_strict else ir.alt(lt, eq))
    if not conds:
        return base
    if len(conds) == 1:
        return conds[0]
    return ir.And(tuple(conds))


def number_interval(lo=None, lo_strict=False, hi=None, hi_strict=False, integer=False) -> ir.Node:
    """Exponent-free JSON numerals whose value lies in the interval (Decimals or None).

    ``integer=True`` restricts to integral values (bounds are rounded inward first).
    """
    if integer:
        if lo is not None:
            n = int(lo.to_integral_value(rounding="ROUND_CEILING"))
            lo, lo_strict = Decimal(n + 1 if (lo_strict and n == lo) else n), False
        if hi is not None:
            n = int(hi.to_integral_value(rounding="ROUND_FLOOR"))
            hi, hi_strict = Decimal(n - 1 if (hi_strict and n == hi) else n), False
    if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_strict or hi_strict))):
        return ir.NOTHING
    pos = _magnitude(lo, lo_strict, hi, hi_strict, integer)
    neg = _magnitude(None if hi is None else -hi, hi_strict, None if lo is None else -lo, lo_strict, integer)
    return ir.alt(pos, ir.seq(MINUS, neg))


#: Mantissas (no sign) of value zero and of a value other than zero
_ZERO_MANTISSA = ir.seq(ZERO, ir.optional(ZERO_FRAC))
_NONZERO_MANTISSA = ir.alt(ir.seq(NONZERO, DIGITS, ir.optional(FRAC)),
                           ir.seq(ZERO, DOT, ir.Repeat(ZERO, 0, None), NONZERO, DIGITS))


def sign_interval(lo=None, lo_strict=False, hi=None, hi_strict=False) -> ir.Node | None:
    """Every JSON numeral, exponents included, in an interval whose finite bounds are all zero
    (``minimum: 0``, ``exclusiveMaximum: 0``...), or None for other bounds.  The sign of a numeral
    is the sign of its mantissa, so these are regular with the exponent free (``1e-06`` is
    positive, ``-0e5`` is zero), unlike bounds that need the exponent's value."""
    if any(b is not None and b != 0 for b in (lo, hi)):
        return None
    zero = ir.seq(ir.optional(MINUS), _ZERO_MANTISSA, ir.optional(EXP))
    pos = ir.seq(_NONZERO_MANTISSA, ir.optional(EXP))
    neg = ir.seq(MINUS, pos)
    parts = []
    if lo is None or (not lo_strict):   # zero is above the lower bound...
        if hi is None or not hi_strict:  # ... and below the upper one
            parts.append(zero)
    if hi is None:
        parts.append(pos)
    if lo is None:
        parts.append(neg)
    return ir.alt(*parts) if parts else ir.NOTHING


def number_constant(value: Decimal, integer_only: bool = False) -> ir.Node:
    """Every exponent-free numeral equal to ``value`` (``1``, ``1.0``, ``1.00``, ``-0``...)."""
    return number_constants([value], integer_only)


_BIG = 10 ** 18  # str() of far larger ints is limited (sys.set_int_max_str_digits)


def number_constants(values, integer_only: bool = False) -> ir.Node:
    """Every exponent-free numeral equal to one of ``values``, in time linear in their
    digits (``values``: Decimals or ints): each value's shortest numeral (``-1.5``; ``0`` also as ``-0``) goes into one trie
    automaton, followed by the zeros that keep its value (``(\\.0+)?`` after an integer, ``0*``
    after a fraction).  ``integer_only``: values with a fraction part are left out."""
    whole, frac = set(), set()
    for v in values:
        if isinstance(v, int) and -_BIG < v < _BIG:  # (the common case, without a Decimal)
            whole.add(str(v))
            if v == 0:
                whole.add("-0")
            continue
        i, f = _split(abs(Decimal(v)))
        if f and integer_only:
            continue
        core = i + (f".{f}" if f else "")
        words = frac if f else whole
        if v < 0 or core == "0":
            words.add("-" + core)
        if v >= 0:
            words.add(core)
    parts = []
    if whole:
        parts.append(ir.seq(ascii_words_node(whole), ir.optional(ZERO_FRAC)))
    if frac:
        parts.append(ir.seq(ascii_words_node(frac), ir.Repeat(ZERO, 0, None)))
    return ir.alt(*parts) if parts else ir.NOTHING


def ascii_words_node(words) -> ir.Node:
    """An embedded minimal DFA of the finite set of ASCII ``words`` (built as a trie, linear in
    their total length)."""
    words = sorted(words)
    if len(words) == 1:
        return ir.literal(words[0]) if words[0] else ir.EMPTY
    src, byt, dst, acc = [], [], [], [False]
    path: list = [0]  # the trie nodes along the previous word
    prev = ""
    for w in words:
        lcp = 0
        for a, b in zip(prev, w):
            if a != b:
                break
            lcp += 1
        del path[lcp + 1:]
        for ch in w[lcp:]:
            src.append(path[-1])
            byt.append(ord(ch))
            path.append(len(acc))
            dst.append(len(acc))
            acc.append(False)
        acc[path[-1]] = True
        prev = w
    src_a, byt_a, dst_a = (np.array(x, np.int64) for x in (src, byt, dst))
    used = np.unique(byt_a)
    byte_class = np.zeros(256, np.int32)
    byte_class[used] = np.arange(1, used.shape[0] + 1, dtype=np.int32)
    table = np.full((len(acc), used.shape[0] + 1), -1, np.int32)
    table[src_a, byte_class[byt_a]] = dst_a
    return embedded(canonical_acyclic_dfa(table, np.array(acc, np.bool_), byte_class))


_MULTIPLE_OF = LRUCache(1024, 64 << 20, name="json_schema.multiple_of")  # (normalised step, max_states) -> (embedded minimal DFA, build work)


def multiple_of_node(step: Decimal, max_states: int = 100_000, pointer: str = "") -> ir.Node:
    """:func:`multiple_of_dfa` minimised and embedded, one node per step (cached): every schema
    part with the same ``multipleOf`` then shares its automata (an Embed compares by identity)."""

    key = (step.normalize() if step > 0 else step, int(max_states))
    hit = _MULTIPLE_OF.get(key)
    if hit is not None:
        replay(hit[1])  # a work budget is charged as if it were built now (see automaton.build)
        return hit[0]
    with recording() as rec:
        node = embedded(build_dfa(ir.Embed(multiple_of_dfa(step, max_states, pointer)), max_states=max(max_states, 1)))
    _MULTIPLE_OF.put(key, (node, rec.tree))
    return node


def multiple_of_dfa(step: Decimal, max_states: int = 100_000, pointer: str = "") -> ByteDFA:
    """ByteDFA of the exponent-free numerals that are integer multiples of ``step > 0``.

    ``step = m * 10^-p``; a numeral is a multiple iff it has at most ``p`` significant fraction
    digits and its digits (read as an integer scaled by ``10^p``) are divisible by ``m``: a
    remainder automaton with ``m * (p + 2)`` states.
    """
    if step <= 0:
        raise SchemaError("multipleOf must be strictly positive", pointer)
    sign, digits, exp = step.normalize().as_tuple()
    m = int("".join(map(str, digits)))
    p = 0
    if exp < 0:
        p = -exp
    else:
        m *= 10 ** exp
    n_states = 3 + m * (2 + p)
    if n_states > max_states:
        raise LimitExceeded(f"multipleOf {step} needs a {n_states}-state remainder automaton (at {pointer or '#'})",
                            "max_states", max_states)
    # classes: 0-9 digits, 10 '-', 11 '.', 12 other
    bc = np.full(256, 12, dtype=np.int32)
    for d in range(10):
        bc[0x30 + d] = d
    bc[ord("-")] = 10
    bc[ord(".")] = 11
    START, NEG, ZSTATE = 0, 1, 2

    def R(r):  # integer digits read, remainder r
        return 3 + r

    def D(r):  # '.' read after an integer with remainder r
        return 3 + m + r

    def F(j, r):  # j >= 1 fraction digits read
        return 3 + 2 * m + (j - 1) * m + r

    total = 3 + 2 * m + p * m
    tr = np.full((total, 13), -1, dtype=np.int32)
    acc = np.zeros(total, dtype=bool)
    for s in (START, NEG):
        tr[s, 0] = ZSTATE
        for d in range(1, 10):
            tr[s, d] = R(d % m)
    tr[START, 10] = NEG
    acc[ZSTATE] = True
    tr[ZSTATE, 11] = D(0)
    for r in range(m):
        for d in range(10):
            tr[R(r), d] = R((10 * r + d) % m)
        tr[R(r), 11] = D(r)
        acc[R(r)] = (r * 10 ** p) % m == 0
        if p >= 1:
            for d in range(10):
                tr[D(r), d] = F(1, (10 * r + d) % m)
        for j in range(1, p + 1):
            acc[F(j, r)] = (r * 10 ** (p - j)) % m == 0
            for d in range(10):
                if j < p:
                    tr[F(j, r), d] = F(j + 1, (10 * r + d) % m)
                elif d == 0:
                    tr[F(j, r), d] = F(j, r)
    if p == 0:
        # an integral step: fraction digits must all be zero ("zeros read" states, one per remainder)
        extra = np.full((m, 13), -1, dtype=np.int32)
        tr = np.vstack([tr, extra])
        acc = np.concatenate([acc, np.zeros(m, dtype=bool)])
        for r in range(m):
            z = total + r
            tr[D(r), 0] = z
            tr[z, 0] = z
            acc[z] = r == 0
    return trim(ByteDFA(bc, tr, acc, 0))


def trim(dfa: ByteDFA) -> ByteDFA:
    """Restrict ``dfa`` to states reachable from the start and co-reachable to acceptance."""
    tr, acc = dfa.transitions, dfa.accepting
    n = tr.shape[0]
    reach = np.zeros(n, dtype=bool)
    stack = [dfa.start]
    reach[dfa.start] = True
    while stack:
        s = stack.pop()
        for t in tr[s]:
            if t >= 0 and not reach[t]:
                reach[t] = True
                stack.append(int(t))
    live = acc & reach
    changed = True
    while changed:
        nxt = live | (reach & ((tr >= 0) & live[np.maximum(tr, 0)]).any(axis=1))
        changed = bool((nxt != live).any())
        live = nxt
    keep = np.flatnonzero(live)
    if dfa.start not in keep:
        keep = np.array([dfa.start], dtype=np.int64)
        return ByteDFA(dfa.byte_class.copy(), np.full((1, tr.shape[1]), -1, np.int32), np.zeros(1, bool), 0)
    order = [dfa.start] + [int(k) for k in keep if k != dfa.start]
    remap = np.full(n, -1, dtype=np.int32)
    remap[order] = np.arange(len(order), dtype=np.int32)
    new_tr = tr[order]
    new_tr = np.where(new_tr >= 0, remap[np.maximum(new_tr, 0)], -1).astype(np.int32)
    return ByteDFA(dfa.byte_class.copy(), new_tr, acc[order].copy(), 0)
