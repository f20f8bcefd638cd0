"""The JSON structure tracker: open containers, string modes and per-object decoded keys of a
byte stream, as a Numba kernel over flat arrays (:func:`feed`) and a growable holder
(:class:`Tracker`).

It trusts its input to be well-formed JSON (a wrapper feeds it only bytes a JSON grammar
accepts) and reports a key completed twice in one object (``DUPLICATE``).  State: a header
(``hdr``, fields ``DEPTH`` ... ``NDATA``), one frame per open container (kind ``OBJ``/``ARR``,
object state 0 expect key / 1 after key / 2 in value, head of the object's key list), the key in
progress (``kbuf``) and an append-only pool of recorded keys (``kp_*``, a linked list per
object).  Positions ``>= hdr[NKEYS]`` / ``hdr[NDATA]`` of the pool are free: a feed may write
there, so a saved state is restored exactly only together with the pool below its own counts.

Used by the key guard (:mod:`.key_guard`) and its liveness check (:mod:`.key_liveness`).
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["Tracker", "feed", "OK", "DUPLICATE", "OVERFLOW"]

# header fields
DEPTH, MODE, ESC, UACC, HIGH, KLEN, NKEYS, NDATA = range(8)
HDR = 8
# modes
STRUCT, VALUE_STR, KEY_STR = 0, 1, 2
# frame columns: kind (1 object, 2 array), object state (0 expect key, 1 after key, 2 in value),
# head of the object's key list (-1: none)
OBJ, ARR = 1, 2

OK, DUPLICATE, OVERFLOW = 0, 1, 2


@njit(cache=True, nogil=True)
def hex_digit(b):
    """The value of hex digit byte ``b`` (0 for any other byte)."""
    if 48 <= b <= 57:
        return b - 48
    if 97 <= b <= 102:
        return b - 87
    if 65 <= b <= 70:
        return b - 55
    return 0


@njit(cache=True, nogil=True)
def _put_cp(cp, hdr, kbuf):
    """Append the UTF-8 bytes of code point ``cp`` to the key in progress (False: kbuf full)."""
    k = hdr[KLEN]
    if k + 4 > kbuf.shape[0]:
        return False
    if cp < 0x80:
        kbuf[k] = cp
        k += 1
    elif cp < 0x800:
        kbuf[k] = 0xC0 | (cp >> 6)
        kbuf[k + 1] = 0x80 | (cp & 0x3F)
        k += 2
    elif cp < 0x10000:
        kbuf[k] = 0xE0 | (cp >> 12)
        kbuf[k + 1] = 0x80 | ((cp >> 6) & 0x3F)
        kbuf[k + 2] = 0x80 | (cp & 0x3F)
        k += 3
    else:
        kbuf[k] = 0xF0 | (cp >> 18)
        kbuf[k + 1] = 0x80 | ((cp >> 12) & 0x3F)
        kbuf[k + 2] = 0x80 | ((cp >> 6) & 0x3F)
        kbuf[k + 3] = 0x80 | (cp & 0x3F)
        k += 4
    hdr[KLEN] = k
    return True


@njit(cache=True, nogil=True, inline="always")
def has_key(e, h, key, o, n, kp_off, kp_len, kp_prev, kp_hash, kp_data):
    """Whether the key ``key[o:o + n]`` (hash ``h``, see :func:`_close_key`) is among the keys
    from ``e`` down their ``kp_prev`` chain."""
    while e >= 0:
        if kp_hash[e] == h and kp_len[e] == n:
            q = kp_off[e]
            same = True
            for j in range(n):
                if kp_data[q + j] != key[o + j]:
                    same = False
                    break
            if same:
                return True
        e = kp_prev[e]
    return False


@njit(cache=True, nogil=True)
def probe_buffers():
    """Tracker arrays for feeding single tokens from :func:`start_in_object` (room for one
    object, a few keys and 4 KiB of key bytes)."""
    return (np.zeros(HDR, np.int64), np.zeros((2, 3), np.int64), np.zeros(4096, np.uint8), np.zeros(4, np.int64),
            np.zeros(4, np.int64), np.zeros(4, np.int64), np.zeros(4, np.int64), np.zeros(4096, np.uint8))


@njit(cache=True, nogil=True, inline="always")
def start_in_object(hdr, frames, mode, fstate) -> None:
    """Set the tracker state to ``mode`` in one object without keys whose frame is in ``fstate``."""
    for j in range(HDR):
        hdr[j] = 0
    hdr[DEPTH] = 1
    hdr[MODE] = mode
    frames[0, 0] = OBJ
    frames[0, 1] = fstate
    frames[0, 2] = -1


@njit(cache=True, nogil=True)
def _close_key(hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data):
    """The key in progress is complete: DUPLICATE if its object has it, else record it."""
    d = hdr[DEPTH] - 1
    n = hdr[KLEN]
    h = np.int64(2166136261)
    for i in range(n):
        h = ((h ^ np.int64(kbuf[i])) * np.int64(16777619)) & np.int64(0xFFFFFFFF)
    if has_key(frames[d, 2], h, kbuf, 0, n, kp_off, kp_len, kp_prev, kp_hash, kp_data):
        return DUPLICATE
    idx = hdr[NKEYS]
    o = hdr[NDATA]
    if idx >= kp_off.shape[0] or o + n > kp_data.shape[0]:
        return OVERFLOW
    for i in range(n):
        kp_data[o + i] = kbuf[i]
    kp_off[idx] = o
    kp_len[idx] = n
    kp_hash[idx] = h
    kp_prev[idx] = frames[d, 2]
    frames[d, 2] = idx
    hdr[NKEYS] = idx + 1
    hdr[NDATA] = o + n
    return OK


@njit(cache=True, nogil=True)
def feed(data, lo, hi, hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data):
    """Run the tracker over ``data[lo:hi]`` in place: OK, DUPLICATE (a key of the same object
    completed again) or OVERFLOW (a buffer is full: grow it and replay from a saved state)."""
    for p in range(lo, hi):
        b = np.int64(data[p])
        mode = hdr[MODE]
        if mode == STRUCT:
            d = hdr[DEPTH]
            if b == 0x7B or b == 0x5B:  # { [
                if d >= frames.shape[0]:
                    return OVERFLOW
                frames[d, 0] = OBJ if b == 0x7B else ARR
                frames[d, 1] = 0
                frames[d, 2] = -1
                hdr[DEPTH] = d + 1
            elif b == 0x7D or b == 0x5D:  # } ]
                if d > 0:
                    hdr[DEPTH] = d - 1
            elif b == 0x22:  # "
                hdr[ESC] = 0
                if d > 0 and frames[d - 1, 0] == OBJ and frames[d - 1, 1] == 0:
                    hdr[MODE] = KEY_STR
                    hdr[KLEN] = 0
                    hdr[HIGH] = 0
                else:
                    hdr[MODE] = VALUE_STR
            elif b == 0x3A:  # :
                if d > 0 and frames[d - 1, 0] == OBJ:
                    frames[d - 1, 1] = 2
            elif b == 0x2C:  # ,
                if d > 0 and frames[d - 1, 0] == OBJ:
                    frames[d - 1, 1] = 0
            continue
        esc = hdr[ESC]
        if mode == VALUE_STR:
            if esc == 0:
                if b == 0x5C:
                    hdr[ESC] = 1
                elif b == 0x22:
                    hdr[MODE] = STRUCT
            elif esc == 1:
                hdr[ESC] = 2 if b == 0x75 else 0
            else:
                hdr[ESC] = 0 if esc == 5 else esc + 1
            continue
        # in a key: decode it into kbuf
        if esc == 0:
            if b == 0x5C:
                hdr[ESC] = 1
            elif b == 0x22:
                st = _close_key(hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data)
                if st != OK:
                    return st
                hdr[MODE] = STRUCT
                frames[hdr[DEPTH] - 1, 1] = 1
            else:
                k = hdr[KLEN]
                if k >= kbuf.shape[0]:
                    return OVERFLOW
                kbuf[k] = b
                hdr[KLEN] = k + 1
        elif esc == 1:
            if b == 0x75:
                hdr[ESC] = 2
                hdr[UACC] = 0
            else:
                hdr[ESC] = 0
                c = b  # \" \\ \/
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
                if not _put_cp(c, hdr, kbuf):
                    return OVERFLOW
        else:
            u = hdr[UACC] * 16 + hex_digit(b)
            hdr[UACC] = u
            if esc < 5:
                hdr[ESC] = esc + 1
                continue
            hdr[ESC] = 0
            if 0xD800 <= u < 0xDC00:
                hdr[HIGH] = u
                continue
            cp = u
            if 0xDC00 <= u < 0xE000 and hdr[HIGH] != 0:
                cp = 0x10000 + ((hdr[HIGH] - 0xD800) << 10) + (u - 0xDC00)
            hdr[HIGH] = 0
            if not _put_cp(cp, hdr, kbuf):
                return OVERFLOW
    return OK


class Tracker:
    """The JSON structure and per-object keys of the bytes accepted so far (growable arrays)."""

    __slots__ = ("hdr", "frames", "kbuf", "kp_off", "kp_len", "kp_prev", "kp_hash", "kp_data",
                 "shdr", "sframes", "skbuf")

    def __init__(self, depth=32, key_bytes=256, keys=256, data=4096):
        self.hdr = np.zeros(HDR, np.int64)
        self.frames = np.zeros((depth, 3), np.int64)
        self.kbuf = np.zeros(key_bytes, np.uint8)
        self.kp_off = np.zeros(keys, np.int64)
        self.kp_len = np.zeros(keys, np.int64)
        self.kp_prev = np.zeros(keys, np.int64)
        self.kp_hash = np.zeros(keys, np.int64)
        self.kp_data = np.zeros(data, np.uint8)
        self.shdr = np.zeros(HDR, np.int64)
        self.sframes = np.zeros_like(self.frames)
        self.skbuf = np.zeros_like(self.kbuf)

    def copy(self) -> "Tracker":
        t = Tracker.__new__(Tracker)
        for name in self.__slots__:
            setattr(t, name, getattr(self, name).copy())
        return t

    def grow(self) -> None:
        """Double every buffer (contents kept)."""
        def bigger(a):
            out = np.zeros((a.shape[0] * 2,) + a.shape[1:], a.dtype)
            out[:a.shape[0]] = a
            return out

        for name in ("frames", "kbuf", "kp_off", "kp_len", "kp_prev", "kp_hash", "kp_data"):
            setattr(self, name, bigger(getattr(self, name)))
        self.sframes = np.zeros_like(self.frames)
        self.skbuf = np.zeros_like(self.kbuf)

    def save(self):
        h = self.hdr
        return (h.copy(), self.frames[:h[DEPTH]].copy(), self.kbuf[:h[KLEN]].copy())

    def restore(self, snap) -> None:
        h, f, k = snap
        while f.shape[0] > self.frames.shape[0] or k.shape[0] > self.kbuf.shape[0]:
            self.grow()
        self.hdr[:] = h
        self.frames[:f.shape[0]] = f
        self.kbuf[:k.shape[0]] = k

    def feed(self, data, lo, hi, snap) -> bool:
        """Advance over ``data[lo:hi]``; False (state back to ``snap``, the current state saved)
        when a duplicate key completes."""
        while True:
            st = feed(data, lo, hi, self.hdr, self.frames, self.kbuf, self.kp_off, self.kp_len, self.kp_prev,
                      self.kp_hash, self.kp_data)
            if st == OK:
                return True
            self.restore(snap)
            if st == DUPLICATE:
                return False
            self.grow()
