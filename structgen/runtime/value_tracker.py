"""The JSON value tracker: canonical hashes of the values of a byte stream and the items of its
*unique* arrays (``uniqueItems``), as a Numba kernel over flat arrays (:func:`feed`) and a
growable holder (:class:`ValueTracker`).

It trusts its input to be well-formed JSON (the unique-items guard feeds it only bytes a JSON
grammar accepts).  Every value gets a 128-bit hash (two 64-bit lanes) of its *canonical* form,
so that values JSON Schema calls equal hash equal: numbers by their exact decimal value
(``1``, ``1.0``, ``10e-1`` and ``-0``/``0`` alike: sign, significant digits, decimal exponent),
strings by their decoded code points (escapes resolved), objects independently of key order (a
sum of member hashes), arrays in order.  ``true`` / ``false`` / ``null`` are known from their
first byte, so a duplicate literal is refused before it is spelled out.

State: a header (``hdr``, fields ``DEPTH`` ... ``EVT``), one frame per open container (columns
``KIND`` ... ``BELOW``) and an append-only pool of the items of unique arrays (``ip_*``, a linked
list per array, with each item's byte span in the stream so that a hash match can be verified
exactly).  An item completed in a unique array whose pool holds its hash returns ``HIT``
(``hdr[EVT]`` = the pool entry); the caller verifies it (hashes only filter).  Which arrays are
unique is the caller's to say: with ``ask=True`` the kernel stops at every container it opens
that may hold a unique array (``NEED``, ``hdr[EVT]`` = the position after the bracket; the
root's ``BELOW`` is ``hdr[RB]``) so the caller can set the frame's
``UNIQ`` / ``PST`` / ``BELOW`` from the instance path; without, a new container is marked
``UNIQ = UNKNOWN`` when its parent has unique arrays below it, and a second item completed in an
unknown array returns ``UNSURE``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .json_tracker import hex_digit as _hex

__all__ = ["ValueTracker", "feed", "open_item_echoes", "echo_candidates", "extends_echo", "echoes_after", "OK", "HIT",
           "NEED", "UNSURE", "OVERFLOW"]

# header fields
(DEPTH, MODE, ESC, UACC, HIGH, POS, NITEMS, SH1, SH2, SLEN, NPH, NEG, DH1, DH2, NSIG, PENDZ, PT, EXPNEG,
 EXPV, LITREM, EVT, RB) = range(22)
HDR = 22
# modes
STRUCT, VSTR, KSTR, NUM, LIT = 0, 1, 2, 3, 4
# number phases: integer part, fraction, exponent sign, exponent digits
NINT, NFRAC, NESIGN, NEXP = 0, 1, 2, 3
# frame columns
KIND, OST, UNIQ, HEAD, COUNT, A1, A2, K1, K2, KSTART, KEND, ISTART, PST, BELOW, LIVE = range(15)
NCOL = 15
OBJ, ARR = 1, 2
NO, YES, UNKNOWN = 0, 1, 2

OK, HIT, NEED, UNSURE, OVERFLOW = 0, 1, 2, 3, 4

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xC2B2AE3D27D4EB4F)
_EXP_CAP = 10 ** 15  # exponents saturate here (a hash match is verified exactly anyway)


@njit(cache=True, nogil=True)
def _mix(x):
    x = np.uint64(x)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


@njit(cache=True, nogil=True)
def _step(h, x, m):
    return _mix(np.uint64(h) * m + np.uint64(x) + np.uint64(1))


@njit(cache=True, nogil=True)
def _h(v, lane):
    """The int64 stored form of a uint64 hash ``v`` mixed with lane ``lane``."""
    return np.int64(_mix(np.uint64(v) ^ (np.uint64(lane) * _M2)))


@njit(cache=True, nogil=True)
def _put_cp(cp, hdr):
    hdr[SH1] = np.int64(_step(hdr[SH1], cp, _M1))
    hdr[SH2] = np.int64(_step(hdr[SH2], cp, _M2))
    hdr[SLEN] += 1


@njit(cache=True, nogil=True)
def _number_start(b, hdr):
    hdr[MODE] = NUM
    hdr[NPH] = NINT
    hdr[NEG] = 1 if b == 0x2D else 0
    hdr[DH1] = 0
    hdr[DH2] = 0
    hdr[NSIG] = 0
    hdr[PENDZ] = 0
    hdr[PT] = 0
    hdr[EXPNEG] = 0
    hdr[EXPV] = 0
    if b != 0x2D:
        _digit(b - 48, hdr)


@njit(cache=True, nogil=True)
def _digit(v, hdr):
    """A mantissa digit: significant digits hashed, trailing zeros pending, the decimal point's
    place counted from the first significant digit."""
    frac = hdr[NPH] == NFRAC
    if hdr[NSIG] == 0 and hdr[PENDZ] == 0 and v == 0:
        if frac:
            hdr[PT] -= 1  # a leading zero of the fraction
        return
    if v == 0:
        hdr[PENDZ] += 1
    else:
        for _ in range(hdr[PENDZ]):
            hdr[DH1] = np.int64(_step(hdr[DH1], 0, _M1))
            hdr[DH2] = np.int64(_step(hdr[DH2], 0, _M2))
        hdr[NSIG] += hdr[PENDZ] + 1
        hdr[PENDZ] = 0
        hdr[DH1] = np.int64(_step(hdr[DH1], v, _M1))
        hdr[DH2] = np.int64(_step(hdr[DH2], v, _M2))
    if not frac:
        hdr[PT] += 1


@njit(cache=True, nogil=True)
def _number_hash(hdr):
    if hdr[NSIG] == 0:
        return _h(0x5A, 1), _h(0x5A, 2)  # zero, whatever its sign or spelling
    e = hdr[EXPV]
    if hdr[EXPNEG]:
        e = -e
    e += hdr[PT]
    h1 = _step(_step(_step(0x4E, hdr[NEG], _M1), hdr[DH1], _M1), e, _M1)
    h2 = _step(_step(_step(0x4E, hdr[NEG], _M2), hdr[DH2], _M2), e, _M2)
    return np.int64(h1), np.int64(h2)


@njit(cache=True, nogil=True)
def _item_start(hdr, frames):
    """A value starts at ``hdr[POS]``: remember it as the current item of an enclosing array."""
    d = hdr[DEPTH]
    if d > 0 and frames[d - 1, KIND] == ARR:
        frames[d - 1, ISTART] = hdr[POS]


@njit(cache=True, nogil=True)
def _value_done(h1, h2, end, hdr, frames, ip_h1, ip_h2, ip_lo, ip_hi, ip_prev):
    """A value with hash ``(h1, h2)`` is complete (its last byte before ``end``): fold it into
    its container; in a unique array, HIT on a pool match, else record it."""
    d = hdr[DEPTH]
    if d == 0:
        return OK
    f = d - 1
    if frames[f, KIND] == OBJ:
        m = _mix(np.uint64(frames[f, K1]) * _M1 ^ _mix(np.uint64(h1)))
        frames[f, A1] = np.int64(np.uint64(frames[f, A1]) + m)
        m = _mix(np.uint64(frames[f, K2]) * _M2 ^ _mix(np.uint64(h2)))
        frames[f, A2] = np.int64(np.uint64(frames[f, A2]) + m)
        frames[f, COUNT] += 1
        frames[f, OST] = 3  # after a member: , or }
        return OK
    u = frames[f, UNIQ]
    if u == YES:
        e = frames[f, HEAD]
        while e >= 0:
            if ip_h1[e] == h1 and ip_h2[e] == h2:
                hdr[EVT] = e
                return HIT
            e = ip_prev[e]
        i = hdr[NITEMS]
        if i >= ip_h1.shape[0]:
            return OVERFLOW
        ip_h1[i] = h1
        ip_h2[i] = h2
        ip_lo[i] = frames[f, ISTART]
        ip_hi[i] = end
        ip_prev[i] = frames[f, HEAD]
        frames[f, HEAD] = i
        hdr[NITEMS] = i + 1
    elif u == UNKNOWN and frames[f, COUNT] >= 1:
        return UNSURE
    frames[f, A1] = np.int64(_step(frames[f, A1], h1, _M1))
    frames[f, A2] = np.int64(_step(frames[f, A2], h2, _M2))
    frames[f, COUNT] += 1
    return OK


@njit(cache=True, nogil=True)
def feed(data, lo, hi, ask, hdr, frames, ip_h1, ip_h2, ip_lo, ip_hi, ip_prev):
    """Run the tracker over ``data[lo:hi]`` in place (``hdr[POS]`` counts the stream's bytes):
    OK, HIT, NEED (``ask``: a container opened; resume at ``hdr[EVT]``), UNSURE or OVERFLOW (a
    buffer is full: grow it and replay from a saved state).  On anything but OK and NEED the
    state is partly updated: restore a saved one."""
    p = lo
    while p < hi:
        b = np.int64(data[p])
        mode = hdr[MODE]
        if mode == NUM:
            ph = hdr[NPH]
            if 48 <= b <= 57:
                if ph == NINT or ph == NFRAC:
                    _digit(b - 48, hdr)
                else:
                    hdr[NPH] = NEXP
                    if hdr[EXPV] < _EXP_CAP:
                        hdr[EXPV] = hdr[EXPV] * 10 + (b - 48)
                hdr[POS] += 1
                p += 1
                continue
            if b == 0x2E:  # .
                hdr[NPH] = NFRAC
                hdr[POS] += 1
                p += 1
                continue
            if b == 0x65 or b == 0x45:  # e E
                hdr[NPH] = NESIGN
                hdr[POS] += 1
                p += 1
                continue
            if (b == 0x2B or b == 0x2D) and ph == NESIGN:
                hdr[EXPNEG] = 1 if b == 0x2D else 0
                hdr[POS] += 1
                p += 1
                continue
            # the number ended before this byte
            hdr[MODE] = STRUCT
            h1, h2 = _number_hash(hdr)
            st = _value_done(h1, h2, hdr[POS], hdr, frames, ip_h1, ip_h2, ip_lo, ip_hi, ip_prev)
            if st != OK:
                return st
            continue  # the byte again, in STRUCT mode
        if mode == LIT:
            hdr[LITREM] -= 1
            if hdr[LITREM] == 0:
                hdr[MODE] = STRUCT
            hdr[POS] += 1
            p += 1
            continue
        if mode == VSTR or mode == KSTR:
            esc = hdr[ESC]
            if esc == 1:
                hdr[ESC] = 0
                if b == 0x75:  # \u
                    hdr[ESC] = 2
                    hdr[UACC] = 0
                else:
                    c = b
                    if b == 0x62:
                        c = 8
                    elif b == 0x66:
                        c = 12
                    elif b == 0x6E:
                        c = 10
                    elif b == 0x72:
                        c = 13
                    elif b == 0x74:
                        c = 9
                    _put_cp(c, hdr)
            elif esc >= 2:
                hdr[UACC] = hdr[UACC] * 16 + _hex(b)
                if esc < 5:
                    hdr[ESC] = esc + 1
                else:
                    hdr[ESC] = 0
                    cp = hdr[UACC]
                    if 0xD800 <= cp <= 0xDBFF:
                        if hdr[HIGH] >= 0:
                            _put_cp(hdr[HIGH], hdr)
                        hdr[HIGH] = cp
                    else:
                        if 0xDC00 <= cp <= 0xDFFF and hdr[HIGH] >= 0:
                            cp = 0x10000 + ((hdr[HIGH] - 0xD800) << 10) + (cp - 0xDC00)
                            hdr[HIGH] = -1
                        elif hdr[HIGH] >= 0:
                            _put_cp(hdr[HIGH], hdr)
                            hdr[HIGH] = -1
                        _put_cp(cp, hdr)
            elif b == 0x5C:  # backslash
                hdr[ESC] = 1
            elif b == 0x22:  # the closing quote
                if hdr[HIGH] >= 0:
                    _put_cp(hdr[HIGH], hdr)
                    hdr[HIGH] = -1
                hdr[MODE] = STRUCT
                h1 = np.int64(_step(hdr[SH1], hdr[SLEN], _M1))
                h2 = np.int64(_step(hdr[SH2], hdr[SLEN], _M2))
                hdr[POS] += 1
                p += 1
                if mode == KSTR:
                    f = hdr[DEPTH] - 1
                    frames[f, K1] = h1
                    frames[f, K2] = h2
                    frames[f, KEND] = hdr[POS]
                    frames[f, OST] = 1
                else:
                    st = _value_done(h1, h2, hdr[POS], hdr, frames, ip_h1, ip_h2, ip_lo, ip_hi, ip_prev)
                    if st != OK:
                        return st
                continue
            else:
                # a raw byte: decode UTF-8 into code points (the JSON grammar checked it)
                if hdr[HIGH] >= 0:
                    _put_cp(hdr[HIGH], hdr)
                    hdr[HIGH] = -1
                if b < 0x80:
                    _put_cp(b, hdr)
                elif b >= 0xC0:
                    n = 1 if b < 0xE0 else (2 if b < 0xF0 else 3)
                    cp = b & (0x1F if n == 1 else (0x0F if n == 2 else 0x07))
                    hdr[UACC] = cp
                    hdr[ESC] = -n  # continuation bytes pending
                else:
                    hdr[UACC] = (hdr[UACC] << 6) | (b & 0x3F)
                    hdr[ESC] += 1
                    if hdr[ESC] == 0:
                        _put_cp(hdr[UACC], hdr)
            hdr[POS] += 1
            p += 1
            continue
        # STRUCT
        d = hdr[DEPTH]
        if b == 0x7B or b == 0x5B:  # { [
            if d >= frames.shape[0]:
                return OVERFLOW
            _item_start(hdr, frames)
            frames[d, KIND] = OBJ if b == 0x7B else ARR
            frames[d, OST] = 0
            frames[d, HEAD] = -1
            frames[d, COUNT] = 0
            frames[d, A1] = 0
            frames[d, A2] = 0
            frames[d, PST] = -1
            frames[d, LIVE] = 0
            below = frames[d - 1, BELOW] != 0 if d > 0 else hdr[RB] != 0
            frames[d, BELOW] = 1 if below else 0
            frames[d, UNIQ] = UNKNOWN if below and b == 0x5B else NO
            hdr[DEPTH] = d + 1
            hdr[POS] += 1
            p += 1
            if ask and below:
                hdr[EVT] = p
                return NEED
            continue
        if b == 0x7D or b == 0x5D:  # } ]
            f = d - 1
            n = frames[f, COUNT]
            if frames[f, KIND] == OBJ:
                h1 = np.int64(_step(frames[f, A1] ^ 0x0B, n, _M1))
                h2 = np.int64(_step(frames[f, A2] ^ 0x0B, n, _M2))
            else:
                h1 = np.int64(_step(frames[f, A1] ^ 0x0A, n, _M1))
                h2 = np.int64(_step(frames[f, A2] ^ 0x0A, n, _M2))
            hdr[DEPTH] = f
            hdr[POS] += 1
            p += 1
            st = _value_done(h1, h2, hdr[POS], hdr, frames, ip_h1, ip_h2, ip_lo, ip_hi, ip_prev)
            if st != OK:
                return st
            continue
        if b == 0x22:  # "
            hdr[ESC] = 0
            hdr[HIGH] = -1
            hdr[SH1] = 0x53
            hdr[SH2] = 0x53
            hdr[SLEN] = 0
            if d > 0 and frames[d - 1, KIND] == OBJ and frames[d - 1, OST] != 1 and frames[d - 1, OST] != 2:
                hdr[MODE] = KSTR
                frames[d - 1, KSTART] = hdr[POS]
            else:
                hdr[MODE] = VSTR
                _item_start(hdr, frames)
        elif b == 0x3A:  # :
            frames[d - 1, OST] = 2
        elif b == 0x74 or b == 0x66 or b == 0x6E:  # t f n: the literal is known now
            _item_start(hdr, frames)
            hdr[MODE] = LIT
            hdr[LITREM] = 4 if b == 0x66 else 3
            hdr[POS] += 1
            p += 1
            st = _value_done(_h(b, 1), _h(b, 2), hdr[POS], hdr, frames, ip_h1, ip_h2, ip_lo, ip_hi, ip_prev)
            if st != OK:
                return st
            continue
        elif b == 0x2D or 48 <= b <= 57:
            _item_start(hdr, frames)
            _number_start(b, hdr)
        hdr[POS] += 1
        p += 1
    return OK


@njit(cache=True, nogil=True)
def _at(q, hist, base, data, lo):
    return hist[q] if q < base else data[lo + q - base]


@njit(cache=True, nogil=True)
def open_item_echoes(hdr, frames, ip_h1, ip_lo, ip_hi, ip_prev, hist, base, data, lo):
    """Is an item of the innermost unique array in progress (an array whose frame has ``LIVE`` set),
    its bytes so far a prefix of an earlier item's bytes (or, for a number that is a sign and zeros
    so far, an earlier item 0)?  (The candidates of the liveness check: an item can only be doomed to
    end as a duplicate when some earlier item continues it.)  The stream is ``hist[:base]``
    followed by ``data[lo:]``."""
    d = hdr[DEPTH]
    f = d - 1
    while f >= 0 and frames[f, UNIQ] != YES:
        f -= 1
    if f < 0 or frames[f, LIVE] == 0:
        return False  # no unique array, or its items cannot be doomed (the plan's ``bounded``)
    if d == f + 1 and hdr[MODE] != VSTR and hdr[MODE] != NUM:
        return False  # between items (a literal is complete at its first byte)
    start = frames[f, ISTART]
    n = hdr[POS] - start
    zero = d == f + 1 and hdr[MODE] == NUM and hdr[NSIG] == 0  # so far a sign and zeros: maybe 0 again
    z1 = _h(0x5A, 1)
    e = frames[f, HEAD]
    while e >= 0:
        if zero and ip_h1[e] == z1:
            return True
        if ip_hi[e] - ip_lo[e] >= n:  # a number in progress may be spelled out already
            same = True
            for i in range(n):
                if _at(start + i, hist, base, data, lo) != _at(ip_lo[e] + i, hist, base, data, lo):
                    same = False
                    break
            if same:
                return True
        e = ip_prev[e]
    return False


@njit(cache=True, nogil=True)
def echo_candidates(frames, f, base, ip_lo, ip_hi, ip_prev, hist):
    """The earlier items of unique array ``f`` whose bytes start with the item so far
    (``hist[ISTART:base]``): ``(continue at, end)`` -- positions in ``hist``, one per candidate."""
    start = frames[f, ISTART]
    n0 = base - start
    count = 0
    e = frames[f, HEAD]
    while e >= 0:
        count += 1
        e = ip_prev[e]
    at = np.empty(count, np.int64)
    end = np.empty(count, np.int64)
    k = 0
    e = frames[f, HEAD]
    while e >= 0:
        a = ip_lo[e]
        if ip_hi[e] - a >= n0:
            same = True
            for i in range(n0):
                if hist[a + i] != hist[start + i]:
                    same = False
                    break
            if same:
                at[k] = a + n0
                end[k] = ip_hi[e]
                k += 1
        e = ip_prev[e]
    return at[:k], end[:k]


@njit(cache=True, nogil=True)
def extends_echo(cand_at, cand_end, hist, tdata, lo, hi):
    """Do the bytes ``tdata[lo:hi]`` continue one of the candidates of :func:`echo_candidates`
    (so that the item so far and then the token spell a prefix of an earlier item)?"""
    for k in range(cand_at.shape[0]):
        a = cand_at[k]
        if cand_end[k] - a >= hi - lo:
            same = True
            for i in range(hi - lo):
                if hist[a + i] != tdata[lo + i]:
                    same = False
                    break
            if same:
                return True
    return False


@njit(cache=True, nogil=True)
def echoes_after(hdr, frames, f0, istart0, cand_at, cand_end, ip_h1, ip_lo, ip_hi, ip_prev, hist, base, data, lo):
    """:func:`open_item_echoes` after a token fed from the state in which :func:`echo_candidates`
    gave ``cand_*`` for unique array ``f0`` (its item in progress starting at ``istart0``): when the
    token only extended that item, the candidates are compared with the token's bytes alone."""
    d = hdr[DEPTH]
    f = d - 1
    while f >= 0 and frames[f, UNIQ] != YES:
        f -= 1
    if f < 0 or f != f0 or frames[f, ISTART] != istart0 or istart0 > base:
        return open_item_echoes(hdr, frames, ip_h1, ip_lo, ip_hi, ip_prev, hist, base, data, lo)
    if frames[f, LIVE] == 0:
        return False
    if d == f + 1 and hdr[MODE] != VSTR and hdr[MODE] != NUM:
        return False
    if d == f + 1 and hdr[MODE] == NUM and hdr[NSIG] == 0:  # a sign and zeros: maybe 0 again
        z1 = _h(0x5A, 1)
        e = frames[f, HEAD]
        while e >= 0:
            if ip_h1[e] == z1:
                return True
            e = ip_prev[e]
    return extends_echo(cand_at, cand_end, hist, data, lo, lo + hdr[POS] - base)


class ValueTracker:
    """The tracker's arrays (see the module docstring), growable; ``save``/``restore`` copy the
    header and frames (the pool is append-only: entries at or above a saved ``NITEMS`` may be
    overwritten by later feeds)."""

    def __init__(self, depth=32, items=256):
        self.hdr = np.zeros(HDR, np.int64)
        self.hdr[HIGH] = -1
        self.frames = np.zeros((depth, NCOL), np.int64)
        self.ip_h1 = np.zeros(items, np.int64)
        self.ip_h2 = np.zeros(items, np.int64)
        self.ip_lo = np.zeros(items, np.int64)
        self.ip_hi = np.zeros(items, np.int64)
        self.ip_prev = np.zeros(items, np.int64)

    def copy(self) -> "ValueTracker":
        t = ValueTracker.__new__(ValueTracker)
        for k, v in self.__dict__.items():
            setattr(t, k, v.copy())
        return t

    def grow(self) -> None:
        self.frames = np.concatenate([self.frames, np.zeros_like(self.frames)])
        for k in ("ip_h1", "ip_h2", "ip_lo", "ip_hi", "ip_prev"):
            a = getattr(self, k)
            setattr(self, k, np.concatenate([a, np.zeros_like(a)]))

    def save(self):
        d = int(self.hdr[DEPTH])
        return self.hdr.copy(), self.frames[:d].copy()

    def restore(self, snap) -> None:
        hdr, frames = snap
        self.hdr[:] = hdr
        d = frames.shape[0]
        while d > self.frames.shape[0]:
            self.grow()
        self.frames[:d] = frames

    def args(self):
        return self.hdr, self.frames, self.ip_h1, self.ip_h2, self.ip_lo, self.ip_hi, self.ip_prev
