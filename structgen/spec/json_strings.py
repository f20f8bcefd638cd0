"""JSON string encoding as a language transform: decoded-text IR -> JSON-escaped-text IR.

Schema constraints on strings (``pattern``, ``format``, ``minLength``...) speak about the *decoded*
string, while the automaton reads the *escaped* JSON text.  :func:`encode` maps a character-level IR
node ``R`` to the IR of every JSON string body whose decoding is in ``R``.  It is a substitution of
each code point by the set of its encodings, and because the JSON escape code is uniquely decodable
(every escaped text decodes to exactly one string) the substitution commutes with union,
concatenation, repetition, *intersection* and *complement* (taken relative to all encoded strings).
So ``encode`` is exact on every IR node, ``And``/``Not`` included.

Encodings of a code point ``c`` (``mode="value"``, RFC 8259 in full):

- itself, unless it is a control character (< U+0020), ``"`` or ``\\``;
- a short escape ``\\" \\\\ \\/ \\b \\f \\n \\r \\t`` where one exists;
- ``\\uXXXX`` with hex digits in either case for c <= U+FFFF (lone surrogates are never produced:
  a lone ``\\uD800`` is legal JSON syntax but is not a Unicode string, so it is outside our language);
- a surrogate pair ``\\uD8xx\\uDCxx`` (either case) for c > U+FFFF.

``mode="key"`` is the narrower form used for object keys, which keeps the key tries of an object's
automaton small: printable ASCII raw (``\\"``, ``\\\\`` escaped), control characters as a short
escape or lowercase ``\\u00xx``, U+007F and above raw or lowercase ``\\uxxxx`` (pairs for the
astral planes).  That is exactly what ``json.dumps`` writes with or without ``ensure_ascii``.
"""
from __future__ import annotations

from functools import lru_cache

from structgen.automaton import ir
from structgen.errors import Unsupported

HEX_LOWER = "0123456789abcdef"
SHORT_ESCAPES = {0x22: '"', 0x5C: "\\", 0x2F: "/", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}
KEY_SHORT = {c: e for c, e in SHORT_ESCAPES.items() if c != 0x2F}
_RAW_FORBIDDEN = ir.CharSet(((0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)))
_RAW_OK = _RAW_FORBIDDEN.negate()
_BACKSLASH = ir.literal("\\")
ANY_STRING_CHARS = ir.Repeat(ir.ANY_CHAR, 0, None)


def _intersect(cs: ir.CharSet, lo: int, hi: int) -> list:
    return [(max(a, lo), min(b, hi)) for a, b in cs.ranges if a <= hi and b >= lo]


def _hex_digit_set(d1: int, d2: int, lower_only: bool) -> ir.Node:
    ranges = []
    for d in range(d1, d2 + 1):
        ch = HEX_LOWER[d]
        ranges.append((ord(ch), ord(ch)))
        if not lower_only and ch.isalpha():
            ranges.append((ord(ch.upper()), ord(ch.upper())))
    return ir.CharSet.of(ranges)


def hex_range(lo: int, hi: int, ndigits: int = 4, lower_only: bool = False) -> ir.Node:
    """IR of the ``ndigits``-digit hex numerals with value in ``lo..hi`` (digits in either case)."""
    if lo > hi:
        return ir.NOTHING
    if ndigits == 0:
        return ir.EMPTY
    unit = 16 ** (ndigits - 1)
    top_lo, top_hi = lo // unit, hi // unit
    rest_lo, rest_hi = lo % unit, hi % unit
    if top_lo == top_hi:
        return ir.seq(_hex_digit_set(top_lo, top_lo, lower_only),
                      hex_range(rest_lo, rest_hi, ndigits - 1, lower_only))
    parts = []
    first, last = top_lo, top_hi
    if rest_lo != 0:
        parts.append(ir.seq(_hex_digit_set(top_lo, top_lo, lower_only),
                            hex_range(rest_lo, unit - 1, ndigits - 1, lower_only)))
        first += 1
    tail = None
    if rest_hi != unit - 1:
        tail = ir.seq(_hex_digit_set(top_hi, top_hi, lower_only), hex_range(0, rest_hi, ndigits - 1, lower_only))
        last -= 1
    if first <= last:
        parts.append(ir.seq(_hex_digit_set(first, last, lower_only), _any_hex(ndigits - 1, lower_only)))
    if tail is not None:
        parts.append(tail)
    return ir.alt(*parts)


@lru_cache(maxsize=None)
def _any_hex(n: int, lower_only: bool) -> ir.Node:
    return ir.repeat(_hex_digit_set(0, 15, lower_only), n, n) if n else ir.EMPTY


def _u_escapes(cs: ir.CharSet, lower_only: bool) -> list:
    """``\\uXXXX`` (and surrogate-pair) encodings of the code points of ``cs``."""
    parts = []
    u = ir.seq(_BACKSLASH, ir.literal("u"))
    bmp = [r for lo, hi in ((0, 0xD7FF), (0xE000, 0xFFFF)) for r in _intersect(cs, lo, hi)]
    if bmp:
        parts.append(ir.seq(u, ir.alt(*[hex_range(a, b, 4, lower_only) for a, b in bmp])))
    for a, b in _intersect(cs, 0x10000, ir.MAX_CODE_POINT):
        a, b = a - 0x10000, b - 0x10000
        ha, hb = 0xD800 + (a >> 10), 0xD800 + (b >> 10)
        la, lb = 0xDC00 + (a & 0x3FF), 0xDC00 + (b & 0x3FF)

        def pair(h1, h2, l1, l2):
            return ir.seq(u, hex_range(h1, h2, 4, lower_only), u, hex_range(l1, l2, 4, lower_only))

        if ha == hb:
            parts.append(pair(ha, ha, la, lb))
            continue
        parts.append(pair(ha, ha, la, 0xDFFF))
        if ha + 1 <= hb - 1:
            parts.append(pair(ha + 1, hb - 1, 0xDC00, 0xDFFF))
        parts.append(pair(hb, hb, 0xDC00, lb))
    return parts


@lru_cache(maxsize=4096)
def encode_charset(cs: ir.CharSet, mode: str = "value") -> ir.Node:
    """The IR of every encoding of one code point of ``cs`` inside a JSON string."""
    parts = []
    if mode == "value":
        raw = _intersect(cs, 0, ir.MAX_CODE_POINT)
        raw_cs = ir.CharSet.of([r for a, b in _RAW_OK.ranges for r in _intersect(ir.CharSet.of(raw), a, b)])
        if raw_cs.ranges:
            parts.append(raw_cs)
        shorts = [e for c, e in SHORT_ESCAPES.items() if cs.contains(c)]
        if shorts:
            parts.append(ir.seq(_BACKSLASH, ir.CharSet.of([(ord(e), ord(e)) for e in shorts])))
        parts.extend(_u_escapes(cs, lower_only=False))
    elif mode == "key":
        raw_ok = ir.CharSet.of([(0x20, 0x21), (0x23, 0x5B), (0x5D, ir.MAX_CODE_POINT)])
        raw = [r for a, b in raw_ok.ranges for r in _intersect(cs, a, b)]
        if raw:
            parts.append(ir.CharSet.of(raw))
        shorts = [e for c, e in KEY_SHORT.items() if cs.contains(c)]
        if shorts:
            parts.append(ir.seq(_BACKSLASH, ir.CharSet.of([(ord(e), ord(e)) for e in shorts])))
        # controls without a short escape, and U+007F and above, also as lowercase \uXXXX
        esc = [r for lo, hi in ((0, 0x1F), (0x7F, ir.MAX_CODE_POINT)) for r in _intersect(cs, lo, hi)
               if not (r[0] == r[1] and r[0] in KEY_SHORT)]
        esc_cs = ir.CharSet.of(esc)
        esc_cs = ir.CharSet.of([r for r in esc_cs.ranges for r in _split_out(r, KEY_SHORT)])
        if esc_cs.ranges:
            parts.extend(_u_escapes(esc_cs, lower_only=True))
    else:
        raise ValueError(f"unknown string encoding mode {mode!r}")
    return ir.alt(*parts)


def _split_out(r, points) -> list:
    out, (a, b) = [], r
    for p in sorted(points):
        if a <= p <= b:
            if a <= p - 1:
                out.append((a, p - 1))
            a = p + 1
    if a <= b:
        out.append((a, b))
    return out


def encode(node: ir.Node, mode: str = "value") -> ir.Node:
    """Map a decoded-text IR node to the IR of its JSON-escaped texts (string body, no quotes)."""
    memo: dict = {}
    universe = ir.Repeat(encode_charset(ir.ANY_CHAR, mode), 0, None)

    def go(n):
        hit = memo.get(id(n))
        if hit is not None and hit[0] is n:
            return hit[1]
        if isinstance(n, ir.CharSet):
            r = encode_charset(n, mode) if n.ranges else ir.NOTHING
        elif isinstance(n, ir.Seq):
            r = ir.seq(*[go(x) for x in n.items]) if n.items else ir.EMPTY
        elif isinstance(n, ir.Alt):
            r = ir.alt(*[go(x) for x in n.items]) if n.items else ir.NOTHING
        elif isinstance(n, ir.Repeat):
            r = ir.Repeat(go(n.item), n.min, n.max)
        elif isinstance(n, ir.And):
            r = ir.And(tuple(go(x) for x in n.items))
        elif isinstance(n, ir.Not):
            r = ir.And((universe, ir.Not(go(n.item))))
        else:
            raise Unsupported(f"cannot apply a string constraint containing {type(n).__name__} nodes")
        memo[id(n)] = (n, r)
        return r

    return go(node)


def string_literal(text: str, mode: str = "value") -> ir.Node:
    """The IR of every JSON string (quotes included) whose decoding is ``text``."""
    return ir.seq(ir.literal('"'), encode(ir.literal(text) if text else ir.EMPTY, mode), ir.literal('"'))
