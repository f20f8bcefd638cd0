"""UTF-8 expansion: a set of code points -> a list of byte-range sequences.

``utf8_sequences(ranges)`` returns tuples ``((lo1, hi1), ..., (loK, hiK))`` such that
the union over all tuples of ``{bytes([b1..bK]) : lo_i <= b_i <= hi_i}`` is exactly the
set of UTF-8 encodings of the code points in ``ranges``.  Surrogates (U+D800..U+DFFF)
are dropped, because they have no UTF-8 encoding.

The method is the classic one: cut each code point range at the boundaries where the
encoded length changes (U+0080, U+0800, U+10000), then keep splitting a range at
multiples of 64**i until the low and high encodings differ only in a "rectangular"
way, i.e. every byte position independently ranges over an interval.
"""
from __future__ import annotations

_LENGTH_LIMITS = (0x7F, 0x7FF, 0xFFFF, 0x10FFFF)
_SURROGATES = (0xD800, 0xDFFF)


def _without_surrogates(ranges):
    for lo, hi in ranges:
        if hi < _SURROGATES[0] or lo > _SURROGATES[1]:
            yield lo, hi
            continue
        if lo < _SURROGATES[0]:
            yield lo, _SURROGATES[0] - 1
        if hi > _SURROGATES[1]:
            yield _SURROGATES[1] + 1, hi


def _split_rectangular(lo: int, hi: int, n_bytes: int, out: list) -> None:
    # lo and hi encode to the same number of bytes.
    stack = [(lo, hi)]
    pieces = []
    while stack:
        lo, hi = stack.pop()
        for i in range(1, n_bytes):
            m = (1 << (6 * i)) - 1
            if (lo & ~m) != (hi & ~m):
                if lo & m:
                    # Process the lower half first (stack: push upper half below).
                    stack.append(((lo | m) + 1, hi))
                    stack.append((lo, lo | m))
                    break
                if (hi & m) != m:
                    stack.append((hi & ~m, hi))
                    stack.append((lo, (hi & ~m) - 1))
                    break
        else:
            a = chr(lo).encode("utf-8")
            b = chr(hi).encode("utf-8")
            pieces.append(tuple(zip(a, b)))
    out.extend(pieces)


def utf8_sequences(ranges) -> list:
    """Byte-range sequences covering the UTF-8 encodings of the code points in ``ranges``.

    ``ranges`` is an iterable of inclusive ``(lo, hi)`` code point pairs.  The result is
    in increasing code point order; its sequences are pairwise disjoint.
    """
    out: list = []
    for lo, hi in _without_surrogates(ranges):
        start = lo
        for n_bytes, limit in enumerate(_LENGTH_LIMITS, start=1):
            if start > hi:
                break
            if start > limit:
                continue
            end = min(hi, limit)
            _split_rectangular(start, end, n_bytes, out)
            start = end + 1
    return out
