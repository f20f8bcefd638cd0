"""KeyGuardMatcher: a matcher that never lets an object key occur twice in the same object.

``property_order="any"`` (see :mod:`structgen.spec.property_order`) compiles objects to grammars
that are exact *modulo duplicate keys*; this wrapper removes the duplicates.  It follows the JSON
structure of the accepted bytes -- open containers, whether a ``"`` starts a key or a value,
string escapes -- and keeps, per open object, the *decoded* keys it holds (``"\\u0061"`` and
``"a"`` are the same key).  A token that completes a key already present in its object is
rejected:

- ``advance`` runs the tracker over the token's bytes (a Numba kernel) before asking the inner
  matcher, and refuses the token when a key it completes is a duplicate;
- ``fill_bitmask`` / ``mask_words`` take the inner matcher's mask and clear exactly those
  tokens: only a token that contains a ``"`` byte can complete a key, so the kernel replays the
  tracker over the allowed tokens among those (about 1 % of a byte-level vocabulary) from the
  current state, skipping those with too few quotes to complete a key from where the tracker
  is (one inside a key, two between values, three inside a value string; two more when no open
  object holds a key yet, since then one token must complete two keys of one object).
  ``fill_bitmask`` into an int32 CPU bitmask (numpy or torch) does it in one kernel call that
  copies the inner mask into a numpy view of the row and clears the duplicates there
  (:func:`guard_into`; no temporary array, no torch copy).

Mask bit <=> ``advance`` holds by construction (the same kernel decides both).  ``rollback``,
``fork`` and ``reset`` are exact: the tracker state (a small header, one row per open container,
the key in progress) is saved per accepted token; recorded keys live in an append-only pool
(a linked list per object), truncated on rollback.

The tracker trusts the inner matcher for well-formedness: it only ever sees byte strings the
inner grammar (a JSON grammar) accepts.  A constraint that lives on the accelerator
(``cg.token_dfa.to("cuda")``) bypasses this wrapper.
"""
from __future__ import annotations

import numpy as np
import torch
from numba import njit

from .matcher import Matcher, cpu_view, write_row

# header fields
_DEPTH, _MODE, _ESC, _UACC, _HIGH, _KLEN, _NKEYS, _NDATA = range(8)
_HDR = 8
# modes
_STRUCT, _VALUE_STR, _KEY_STR = 0, 1, 2
# frame columns: kind (1 object, 2 array), object state (0 expect key, 1 after key, 2 in value),
# head of the object's key list (-1: none)
_OBJ, _ARR = 1, 2

OK, DUPLICATE, OVERFLOW = 0, 1, 2


@njit(cache=True, nogil=True)
def _hex(b):
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
    k = hdr[_KLEN]
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
    hdr[_KLEN] = k
    return True


@njit(cache=True, nogil=True)
def _close_key(hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data):
    """The key in progress is complete: DUPLICATE if its object has it, else record it."""
    d = hdr[_DEPTH] - 1
    n = hdr[_KLEN]
    h = np.int64(2166136261)
    for i in range(n):
        h = ((h ^ np.int64(kbuf[i])) * np.int64(16777619)) & np.int64(0xFFFFFFFF)
    e = frames[d, 2]
    while e >= 0:
        if kp_hash[e] == h and kp_len[e] == n:
            o = kp_off[e]
            same = True
            for i in range(n):
                if kp_data[o + i] != kbuf[i]:
                    same = False
                    break
            if same:
                return DUPLICATE
        e = kp_prev[e]
    idx = hdr[_NKEYS]
    o = hdr[_NDATA]
    if idx >= kp_off.shape[0] or o + n > kp_data.shape[0]:
        return OVERFLOW
    for i in range(n):
        kp_data[o + i] = kbuf[i]
    kp_off[idx] = o
    kp_len[idx] = n
    kp_hash[idx] = h
    kp_prev[idx] = frames[d, 2]
    frames[d, 2] = idx
    hdr[_NKEYS] = idx + 1
    hdr[_NDATA] = o + n
    return OK


@njit(cache=True, nogil=True)
def feed(data, lo, hi, hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data):
    """Run the tracker over ``data[lo:hi]`` in place: OK, DUPLICATE (a key of the same object
    completed again) or OVERFLOW (a buffer is full: grow it and replay from a saved state)."""
    for p in range(lo, hi):
        b = np.int64(data[p])
        mode = hdr[_MODE]
        if mode == _STRUCT:
            d = hdr[_DEPTH]
            if b == 0x7B or b == 0x5B:  # { [
                if d >= frames.shape[0]:
                    return OVERFLOW
                frames[d, 0] = _OBJ if b == 0x7B else _ARR
                frames[d, 1] = 0
                frames[d, 2] = -1
                hdr[_DEPTH] = d + 1
            elif b == 0x7D or b == 0x5D:  # } ]
                if d > 0:
                    hdr[_DEPTH] = d - 1
            elif b == 0x22:  # "
                hdr[_ESC] = 0
                if d > 0 and frames[d - 1, 0] == _OBJ and frames[d - 1, 1] == 0:
                    hdr[_MODE] = _KEY_STR
                    hdr[_KLEN] = 0
                    hdr[_HIGH] = 0
                else:
                    hdr[_MODE] = _VALUE_STR
            elif b == 0x3A:  # :
                if d > 0 and frames[d - 1, 0] == _OBJ:
                    frames[d - 1, 1] = 2
            elif b == 0x2C:  # ,
                if d > 0 and frames[d - 1, 0] == _OBJ:
                    frames[d - 1, 1] = 0
            continue
        esc = hdr[_ESC]
        if mode == _VALUE_STR:
            if esc == 0:
                if b == 0x5C:
                    hdr[_ESC] = 1
                elif b == 0x22:
                    hdr[_MODE] = _STRUCT
            elif esc == 1:
                hdr[_ESC] = 2 if b == 0x75 else 0
            else:
                hdr[_ESC] = 0 if esc == 5 else esc + 1
            continue
        # in a key: decode it into kbuf
        if esc == 0:
            if b == 0x5C:
                hdr[_ESC] = 1
            elif b == 0x22:
                st = _close_key(hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data)
                if st != OK:
                    return st
                hdr[_MODE] = _STRUCT
                frames[hdr[_DEPTH] - 1, 1] = 1
            else:
                k = hdr[_KLEN]
                if k >= kbuf.shape[0]:
                    return OVERFLOW
                kbuf[k] = b
                hdr[_KLEN] = k + 1
        elif esc == 1:
            if b == 0x75:
                hdr[_ESC] = 2
                hdr[_UACC] = 0
            else:
                hdr[_ESC] = 0
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
            u = hdr[_UACC] * 16 + _hex(b)
            hdr[_UACC] = u
            if esc < 5:
                hdr[_ESC] = esc + 1
                continue
            hdr[_ESC] = 0
            if 0xD800 <= u < 0xDC00:
                hdr[_HIGH] = u
                continue
            cp = u
            if 0xDC00 <= u < 0xE000 and hdr[_HIGH] != 0:
                cp = 0x10000 + ((hdr[_HIGH] - 0xD800) << 10) + (u - 0xDC00)
            hdr[_HIGH] = 0
            if not _put_cp(cp, hdr, kbuf):
                return OVERFLOW
    return OK


@njit(cache=True, nogil=True)
def _replay(words, w, bit, t, tdata, toff, hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data, shdr,
            sframes, skbuf):
    """Replay token ``t`` on a scratch copy of the state; clear its bit on a duplicate."""
    depth = hdr[_DEPTH]
    for j in range(_HDR):
        shdr[j] = hdr[j]
    for d in range(depth):
        sframes[d, 0] = frames[d, 0]
        sframes[d, 1] = frames[d, 1]
        sframes[d, 2] = frames[d, 2]
    for j in range(hdr[_KLEN]):
        skbuf[j] = kbuf[j]
    st = feed(tdata, toff[t], toff[t + 1], shdr, sframes, skbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data)
    if st == DUPLICATE:
        words[w] = words[w] & ~bit
        return OK
    return st


@njit(cache=True, nogil=True)
def clear_duplicates(words, cand, qcount, slow, fq_ptr, fq_tok, tdata, toff, hdr, frames, kbuf, kp_off, kp_len,
                     kp_prev, kp_hash, kp_data, shdr, sframes, skbuf):
    """Clear from ``words`` every allowed token that would complete a duplicate key from the
    state ``hdr/frames/kbuf``.  OK or OVERFLOW.

    Only tokens with a ``"`` byte can complete a key.  ``cand``/``qcount``: those tokens by
    decreasing quote count.  Inside a key (no escape pending), a token with one or two quotes and
    no backslash before the first completes exactly one key, ``key so far + its bytes before the
    quote`` (a second quote can only open a string); ``fq_tok[fq_ptr[k]:fq_ptr[k + 1]]`` are those
    tokens with their first quote at offset ``k``, so for each key of the object only the tokens
    of the matching length are compared.  ``slow``: the other tokens, replayed in full."""
    depth = hdr[_DEPTH]
    used = False
    for d in range(depth):
        if frames[d, 0] == _OBJ and frames[d, 2] >= 0:
            used = True
            break
    klen = hdr[_KLEN]
    mode = hdr[_MODE]
    one = np.uint32(1)
    if mode == _KEY_STR and hdr[_ESC] == 0 and hdr[_HIGH] == 0:
        e = frames[depth - 1, 2]
        while e >= 0:  # the keys of this object, by length
            k = kp_len[e] - klen
            if 0 <= k < fq_ptr.shape[0] - 1:
                o = kp_off[e]
                same = True
                for q in range(klen):
                    if kp_data[o + q] != kbuf[q]:
                        same = False
                        break
                if same:
                    for p in range(fq_ptr[k], fq_ptr[k + 1]):
                        t = fq_tok[p]
                        w = t >> 5
                        bit = one << np.uint32(t & 31)
                        if words[w] & bit == 0:
                            continue
                        t0 = toff[t]
                        match = True
                        for q in range(k):
                            if kp_data[o + klen + q] != tdata[t0 + q]:
                                match = False
                                break
                        if match:
                            words[w] = words[w] & ~bit
            e = kp_prev[e]
        for i in range(slow.shape[0]):
            t = slow[i]
            w = t >> 5
            bit = one << np.uint32(t & 31)
            if words[w] & bit != 0:
                if _replay(words, w, bit, t, tdata, toff, hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash,
                           kp_data, shdr, sframes, skbuf) == OVERFLOW:
                    return OVERFLOW
        return OK
    # quotes a token needs to complete a key: 1 inside a key, 2 between values (open and close
    # one), 3 inside a value string; two more when no open object holds a key yet (then the
    # token itself must complete two keys of one object)
    need = 1 if mode == _KEY_STR else (2 if mode == _STRUCT else 3)
    if not used:
        need += 2
    for i in range(cand.shape[0]):
        if qcount[i] < need:
            break
        t = cand[i]
        w = t >> 5
        bit = one << np.uint32(t & 31)
        if words[w] & bit != 0:
            if _replay(words, w, bit, t, tdata, toff, hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash,
                       kp_data, shdr, sframes, skbuf) == OVERFLOW:
                return OVERFLOW
    return OK


@njit(cache=True, nogil=True)
def guard_into(dst, src, cand, qcount, slow, fq_ptr, fq_tok, tdata, toff, hdr, frames, kbuf, kp_off, kp_len, kp_prev,
               kp_hash, kp_data, shdr, sframes, skbuf):
    """``dst[:] = src``, then :func:`clear_duplicates` on ``dst`` (a row of the caller's
    bitmask: one pass writes the guarded mask where it goes).  OK or OVERFLOW."""
    for i in range(src.shape[0]):
        dst[i] = src[i]
    return clear_duplicates(dst, cand, qcount, slow, fq_ptr, fq_tok, tdata, toff, hdr, frames, kbuf, kp_off, kp_len,
                            kp_prev, kp_hash, kp_data, shdr, sframes, skbuf)


@njit(cache=True, nogil=True)
def key_landings(words, toks, tdata, toff, hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data, shdr,
                 sframes, skbuf, out_tok, out_kind, out_new):
    """The allowed tokens of ``toks`` that leave the innermost object (holding a key, or
    completing its first) where its next key is read: ``out_kind`` 1 inside a key, 0 after its comma;
    ``out_new`` 1 when the token completed one key of the object on the way (tokens that complete
    more, or that complete none from inside a key, are left out: see
    :meth:`KeyGuardMatcher._lands_dead`).  The count, or -1 on OVERFLOW."""
    depth = hdr[_DEPTH]
    if depth == 0 or frames[depth - 1, 0] != _OBJ:
        return 0
    head = frames[depth - 1, 2]
    in_key = hdr[_MODE] == _KEY_STR
    one = np.uint32(1)
    n = 0
    for i in range(toks.shape[0]):
        t = toks[i]
        if words[t >> 5] & (one << np.uint32(t & 31)) == 0:
            continue
        for j in range(_HDR):
            shdr[j] = hdr[j]
        for d in range(depth):
            sframes[d, 0] = frames[d, 0]
            sframes[d, 1] = frames[d, 1]
            sframes[d, 2] = frames[d, 2]
        for j in range(hdr[_KLEN]):
            skbuf[j] = kbuf[j]
        st = feed(tdata, toff[t], toff[t + 1], shdr, sframes, skbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data)
        if st == OVERFLOW:
            return -1
        if st != OK or shdr[_DEPTH] != depth:
            continue
        new = shdr[_NKEYS] - hdr[_NKEYS]
        if new == 0:
            if in_key or head < 0 or sframes[depth - 1, 2] != head:
                continue
        elif new != 1 or sframes[depth - 1, 2] != hdr[_NKEYS]:
            continue
        if shdr[_MODE] == _KEY_STR:
            out_kind[n] = 1
        elif shdr[_MODE] == _STRUCT and sframes[depth - 1, 1] == 0:
            out_kind[n] = 0
        else:
            continue
        out_tok[n] = t
        out_new[n] = new
        n += 1
    return n


_TABLES: dict = {}


def _vocab_tables(vocab):
    """The candidate tables of :func:`clear_duplicates` for a vocabulary (cached): tokens with a
    ``"`` byte by decreasing quote count and their counts; the in-key fast tokens (one or two
    quotes, no backslash before the first) bucketed by first-quote offset (CSR); the others."""
    key = (id(vocab), vocab.fingerprint)
    hit = _TABLES.get(key)
    if hit is not None and hit[0] is vocab:
        return hit[1]
    off = np.asarray(vocab.token_offsets, np.int64)
    data = np.asarray(vocab.token_data)
    cs = np.concatenate([[0], np.cumsum(data == 0x22, dtype=np.int64)])
    counts = cs[off[1:]] - cs[off[:-1]]
    normal = np.asarray(vocab.is_normal, bool)[:counts.shape[0]]
    cand = np.flatnonzero((counts > 0) & normal).astype(np.int64)
    cand = cand[np.argsort(-counts[cand], kind="stable")]
    first_q = np.empty(cand.shape[0], np.int64)
    for i, t in enumerate(cand.tolist()):
        b = data[off[t]:off[t + 1]].tobytes()
        q = b.index(b'"')
        first_q[i] = -1 if b"\\" in b[:q] else q
    fast = (counts[cand] <= 2) & (first_q >= 0)
    order = np.argsort(first_q[fast], kind="stable")
    fq_tok = cand[fast][order]
    fq_ptr = np.zeros(int(first_q.max(initial=0)) + 2, np.int64)
    np.cumsum(np.bincount(first_q[fast], minlength=fq_ptr.shape[0] - 1), out=fq_ptr[1:])
    tables = (cand, counts[cand].astype(np.int64), cand[~fast], fq_ptr, fq_tok)
    if len(_TABLES) > 16:
        _TABLES.clear()
    _TABLES[key] = (vocab, tables)
    return tables


_LIVE_TABLES: dict = {}
_UNCHECKED = frozenset(b"\\{}[]")  # bytes that exclude a token from the liveness check


def _liveness_tables(vocab):
    """Tables of the liveness check (cached per vocabulary), over the normal tokens without any
    of ``\\ { } [ ]``: those that contain ``"`` or ``,`` (int64), both, ``"``; and a dict from the
    bytes of every such token without ``"`` to its ids (the key pieces)."""
    key = (id(vocab), vocab.fingerprint)
    hit = _LIVE_TABLES.get(key)
    if hit is not None and hit[0] is vocab:
        return hit[1]
    off = np.asarray(vocab.token_offsets, np.int64)
    data = np.asarray(vocab.token_data)
    n = int(np.asarray(vocab.is_normal).shape[0])
    normal = np.asarray(vocab.is_normal, bool)[:n]

    def count(byte):
        cs = np.concatenate([[0], np.cumsum(data == byte, dtype=np.int64)])
        return (cs[off[1:n + 1]] - cs[off[:n]]) > 0

    bad = np.zeros(n, bool)
    for b in _UNCHECKED:
        bad |= count(b)
    ok = normal & ~bad
    quote, comma = count(0x22), count(0x2C)
    qc = np.flatnonzero(ok & (quote | comma)).astype(np.int64)
    qc2 = np.flatnonzero(ok & quote & comma).astype(np.int64)
    qk = np.flatnonzero(ok & quote).astype(np.int64)
    pieces: dict = {}
    for t in np.flatnonzero(ok & ~quote).tolist():
        pieces.setdefault(data[off[t]:off[t + 1]].tobytes(), []).append(t)
    tables = (qc, qc2, qk, pieces)
    if len(_LIVE_TABLES) > 16:
        _LIVE_TABLES.clear()
    _LIVE_TABLES[key] = (vocab, tables)
    return tables


class _Probe:
    """Byte-level cursor over a copy of an inner matcher, for the liveness search: ``next_bytes``
    (a superset of the bytes the grammar accepts next), ``accepts`` (exact), ``push``/``pop``."""

    def __init__(self, inner):
        tdfa = getattr(inner, "_tdfa", None)
        if tdfa is not None:  # a TokenDFAMatcher: walk its byte DFA (trimmed: -1 = dead)
            d = tdfa.dfa
            self._tr, self._bc = d.transitions, np.asarray(d.byte_class)
            self._states = [int(inner.state)]
            self._m = None
        else:
            self._m = inner.fork()
            self._one = np.zeros(1, np.uint8)

    def next_bytes(self):
        m = self._m
        if m is None:
            s = self._states[-1]
            return np.flatnonzero(self._tr[s][self._bc] >= 0).tolist()
        tb = m.engine.tables
        lex = m._front[:, 0]
        if lex.shape[0] == 0:
            return []
        if tb.gacc[lex].any():  # a lexeme may end here and any other start
            return list(range(256))
        return np.flatnonzero((tb.trans[lex] >= 0).any(axis=0)).tolist()

    def accepts(self, b: int) -> bool:
        m = self._m
        if m is None:
            return int(self._tr[self._states[-1], self._bc[b]]) >= 0
        self._one[0] = b
        return m._step(self._one)[0] == 1

    def push(self, b: int) -> bool:
        m = self._m
        if m is None:
            s2 = int(self._tr[self._states[-1], self._bc[b]])
            if s2 < 0:
                return False
            self._states.append(s2)
            return True
        return m.advance_bytes(bytes((b,)))

    def feed(self, data: bytes) -> bool:
        """Advance over ``data`` for good (no ``pop``); False when the grammar refuses it."""
        m = self._m
        if m is None:
            s = self._states[-1]
            for b in data:
                s = int(self._tr[s, self._bc[b]])
                if s < 0:
                    return False
            self._states = [s]
            return True
        return m.advance_bytes(data)

    def pop(self) -> None:
        if self._m is None:
            self._states.pop()
        else:
            self._m.rollback(1)


class _Tracker:
    """The JSON structure and per-object keys of the bytes accepted so far (growable arrays)."""

    __slots__ = ("hdr", "frames", "kbuf", "kp_off", "kp_len", "kp_prev", "kp_hash", "kp_data",
                 "shdr", "sframes", "skbuf")

    def __init__(self, depth=32, key_bytes=256, keys=256, data=4096):
        self.hdr = np.zeros(_HDR, np.int64)
        self.frames = np.zeros((depth, 3), np.int64)
        self.kbuf = np.zeros(key_bytes, np.uint8)
        self.kp_off = np.zeros(keys, np.int64)
        self.kp_len = np.zeros(keys, np.int64)
        self.kp_prev = np.zeros(keys, np.int64)
        self.kp_hash = np.zeros(keys, np.int64)
        self.kp_data = np.zeros(data, np.uint8)
        self.shdr = np.zeros(_HDR, np.int64)
        self.sframes = np.zeros_like(self.frames)
        self.skbuf = np.zeros_like(self.kbuf)

    def copy(self) -> "_Tracker":
        t = _Tracker.__new__(_Tracker)
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
        return (h.copy(), self.frames[:h[_DEPTH]].copy(), self.kbuf[:h[_KLEN]].copy())

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

    def clear(self, words, tables, tdata, toff) -> None:
        """Clear the duplicate-completing tokens from ``words`` (``tables``: :func:`_vocab_tables`)."""
        cand, qcount, slow, fq_ptr, fq_tok = tables
        while clear_duplicates(words, cand, qcount, slow, fq_ptr, fq_tok, tdata, toff,
                               self.hdr, self.frames, self.kbuf, self.kp_off, self.kp_len, self.kp_prev, self.kp_hash,
                               self.kp_data, self.shdr, self.sframes, self.skbuf) == OVERFLOW:
            self.grow()

    def clear_into(self, dst, src, tables, tdata, toff) -> None:
        """``dst[:] = src`` less the duplicate-completing tokens."""
        cand, qcount, slow, fq_ptr, fq_tok = tables
        while guard_into(dst, src, cand, qcount, slow, fq_ptr, fq_tok, tdata, toff,
                         self.hdr, self.frames, self.kbuf, self.kp_off, self.kp_len, self.kp_prev, self.kp_hash,
                         self.kp_data, self.shdr, self.sframes, self.skbuf) == OVERFLOW:
            self.grow()


class KeyGuardMatcher(Matcher):
    """``inner`` (any matcher over a JSON grammar) with duplicate object keys rejected; see the
    module docstring.  The Matcher contract, plus ``mask_words``, ``allowed_tokens`` and
    ``advance_bytes``."""

    def __init__(self, inner, vocab, _tracker=None, _history=None, live_keys: bool = False, _memo=None):
        self.inner = inner
        self.vocab = vocab
        self._tr = _tracker if _tracker is not None else _Tracker()
        self._history: list = [] if _history is None else _history
        # live_keys: also refuse tokens after which only used keys can follow (see _prune)
        self.live_keys = bool(live_keys)
        self._memo: dict = {} if _memo is None else _memo
        self._live_tab = _liveness_tables(vocab) if self.live_keys else None
        # per-mask constants, looked up once
        self._tab = _vocab_tables(vocab)
        self._tdata = vocab.token_data
        self._toff = vocab.token_offsets
        self._tdfa = getattr(inner, "_tdfa", None)          # a TokenDFAMatcher: its cached rows
        self._fresh = getattr(type(inner), "MASK_WORDS_FRESH", False)  # mask_words() returns a new array

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        self.inner.reset()
        self._tr = _Tracker()
        self._history = []
        self._memo.clear()

    def fork(self) -> "KeyGuardMatcher":
        return KeyGuardMatcher(self.inner.fork(), self.vocab, self._tr.copy(), list(self._history),
                               self.live_keys, dict(self._memo))

    def rollback(self, n: int = 1) -> None:
        if n < 0 or n > len(self._history):
            raise ValueError(f"cannot roll back {n} tokens; {len(self._history)} were accepted")
        if n:
            self.inner.rollback(n)
            self._tr.restore(self._history[-n])
            del self._history[-n:]
            self._memo.clear()  # its keys name objects by key-pool index, reused from here on

    def accepted_tokens(self) -> int:
        return len(self._history)

    # ------------------------------------------------------------------ contract
    def advance(self, token: int) -> bool:
        token = int(token)
        v = self.vocab
        if not (0 <= token < v.logits_width) or not v.is_normal[token]:
            snap = self._tr.save()
            if not self.inner.advance(token):  # EOS (or a token no grammar accepts)
                return False
            self._history.append(snap)
            return True
        if self.inner.is_terminated():
            return False
        snap = self._tr.save()
        off = v.token_offsets
        if not self._tr.feed(v.token_data, off[token], off[token + 1], snap):
            return False
        if not self.inner.advance(token):
            self._tr.restore(snap)
            return False
        if self.live_keys and self._lands_dead(snap, v.token_data[off[token]:off[token + 1]]):
            self.inner.rollback(1)
            self._tr.restore(snap)
            return False
        self._history.append(snap)
        return True

    def advance_bytes(self, data: bytes) -> bool:
        """Consume raw bytes (token healing); False leaves the state unchanged."""
        data = bytes(data)
        if self.inner.is_terminated():
            return False
        snap = self._tr.save()
        if not self._tr.feed(np.frombuffer(data, np.uint8), 0, len(data), snap):
            return False
        inner = self.inner
        if hasattr(inner, "advance_bytes"):
            ok = inner.advance_bytes(data)
        else:  # a TokenDFAMatcher: walk its byte DFA
            tdfa = inner._tdfa
            s = int(inner.state)
            s2 = tdfa.dfa.walk(data, s) if s >= 0 else -1
            ok = s2 >= 0 and bool(tdfa.state_is_live(s2))
            if ok:
                inner._history.append(s)
                inner._state = s2
        if ok and self.live_keys and self._lands_dead(snap, np.frombuffer(data, np.uint8)):
            inner.rollback(1)
            ok = False
        if not ok:
            self._tr.restore(snap)
            return False
        self._history.append(snap)
        return True

    def _source(self):
        """``(words, fresh, live)``: the inner matcher's allowed tokens as uint32 words,
        whether that array is ours to modify, whether the guard applies (not terminated)."""
        inner = self.inner
        done = inner.is_terminated()
        if self._tdfa is not None and not done:  # a TokenDFAMatcher: its cached row
            return self._tdfa.mask_row(inner.state).view(np.uint32), False, True
        if self._fresh:
            return inner.mask_words(), True, not done
        if hasattr(inner, "mask_words"):
            return np.asarray(inner.mask_words(), dtype=np.uint32), False, not done
        row = np.zeros((1, (self.vocab.logits_width + 31) // 32), np.int32)
        inner.fill_bitmask(row, 0)
        return row[0].view(np.uint32), True, not done

    def mask_words(self) -> np.ndarray:
        """The allowed tokens as uint32 words (a fresh array)."""
        words, fresh, live = self._source()
        if not fresh:
            words = words.copy()
        if live:
            self._tr.clear(words, self._tab, self._tdata, self._toff)
            if self.live_keys:
                self._prune(words)
        return words

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        words, fresh, live = self._source()
        if live:
            dst = self._row_view(bitmask, row)
            if dst is not None and dst.shape[0] == words.shape[0]:
                # the guarded mask written straight into the row (no temporary, no torch copy)
                self._tr.clear_into(dst, words, self._tab, self._tdata, self._toff)
                if self.live_keys:
                    self._prune(dst)
                return
            if not fresh:
                words = words.copy()
            self._tr.clear(words, self._tab, self._tdata, self._toff)
            if self.live_keys:
                self._prune(words)
        write_row(bitmask, row, words.view(np.int32))

    @staticmethod
    def _row_view(bitmask, row):
        """Row ``row`` of an int32 CPU bitmask (numpy array or torch tensor) as a writable
        uint32 numpy view, or None (another device, dtype or layout: :func:`write_row`)."""
        if isinstance(bitmask, torch.Tensor):
            bitmask = cpu_view(bitmask)
        if not isinstance(bitmask, np.ndarray) or bitmask.dtype != np.int32 or bitmask.ndim != 2 \
                or not bitmask.flags.writeable:
            return None
        return bitmask[row].view(np.uint32)

    # ------------------------------------------------------------------ live keys
    # In an object whose key language is closed (property_order="any" past the subset limit),
    # the grammar repeats its members and the duplicate check alone could let a model start a
    # key that only used keys complete: ``{"name": 1, "na`` when no unused key starts with "na".
    # With ``live_keys`` the guard also refuses a token that leaves the innermost object (with at
    # least one key) at the start of a key or inside one, where every key the grammar allows
    # from there is used: ``_dead(P)``, searched over the used keys' trie with a byte probe of the
    # inner grammar and memoised per (depth, key-list head, P).  Checked tokens are those
    # without any of ``\\ { } [ ]`` that contain ``"`` or ``,`` (or any, inside a key), that complete
    # no key and end inside a key or after the object's comma; the mask and ``advance`` apply the
    # same rule, so a token's bit still says whether ``advance`` takes it.  Sound: a refused token
    # had no valid continuation (bytes the search is unsure of -- escapes -- count as live).

    def _used(self, d: int, head: int, extra):
        """``(keys, kids)`` of the object at depth ``d`` whose key list starts at ``head``, plus
        the key ``extra`` (bytes or None): its decoded keys, and every prefix of them mapped to
        the bytes that extend it."""
        k = ("U", d, head, extra)
        hit = self._memo.get(k)
        if hit is None:
            tr, keys, e = self._tr, set(), head
            while e >= 0:
                o = int(tr.kp_off[e])
                keys.add(tr.kp_data[o:o + int(tr.kp_len[e])].tobytes())
                e = int(tr.kp_prev[e])
            if extra is not None:
                keys.add(extra)
            kids: dict = {}
            for key in keys:
                for i in range(len(key)):
                    kids.setdefault(key[:i], set()).add(key[i])
                kids.setdefault(key, set())
            hit = self._memo[k] = (keys, kids)
        return hit

    def _dead(self, d: int, head: int, extra, prefix: bytes, probe) -> bool:
        """Whether every key the grammar allows after ``prefix`` is a used one (memoised);
        ``probe`` makes a :class:`_Probe` positioned after ``prefix`` (None: unknown, live)."""
        hit = self._memo.get((d, head, extra, prefix))
        if hit is not None:
            return hit
        p = probe()
        if p is None:
            return False
        keys, kids = self._used(d, head, extra)
        return self._search(p, (d, head, extra), prefix, keys, kids)

    def _search(self, p, obj, prefix, keys, kids) -> bool:
        k = obj + (prefix,)
        hit = self._memo.get(k)
        if hit is not None:
            return hit
        along = kids.get(prefix, ())
        dead = True
        for b in p.next_bytes():
            if b in along or (b == 0x22 and prefix in keys):
                continue  # along a used key / closing a used key
            if p.accepts(b):
                dead = False
                break
        if dead:
            for b in along:
                if p.push(b):
                    sub = self._search(p, obj, prefix + bytes((b,)), keys, kids)
                    p.pop()
                    if not sub:
                        dead = False
                        break
        self._memo[k] = dead
        return dead

    def _probe_after(self, data, quote: bool):
        """A probe after ``data`` (and, when ``quote``, the whitespace the layout asks for and
        an opening quote), or None."""
        p = _Probe(self.inner)
        if len(data) and not p.feed(bytes(data)):
            return None
        if not quote:
            return p
        for _ in range(256):  # the layout may require whitespace first (", " or a pretty indent)
            if p.accepts(0x22):
                p.push(0x22)
                return p
            for ws in (0x20, 0x0A, 0x09, 0x0D):
                if p.accepts(ws):
                    p.push(ws)
                    break
            else:
                return None
        return None

    def _lands_dead(self, pre, data) -> bool:
        """The liveness rule for ``data`` just accepted from state ``pre`` (a tracker snapshot):
        True when it leaves the innermost object (holding a key) after its comma or inside a key,
        having completed at most one key of it on the way (none, when it started inside a key),
        and every key the grammar allows from there is used.  Tokens with any of ``\\ { } [ ]``
        and tokens without ``"`` or ``,`` (outside a key) are not checked."""
        h, f, _ = pre
        d = int(h[_DEPTH])
        if d == 0 or f[d - 1, 0] != _OBJ:
            return False
        mode = int(h[_MODE])
        if mode == _KEY_STR and (h[_ESC] or h[_HIGH]):
            return False
        raw = bytes(data)
        if not _UNCHECKED.isdisjoint(raw) or (mode != _KEY_STR and b'"' not in raw and b"," not in raw):
            return False
        tr = self._tr
        head = int(f[d - 1, 2])
        if tr.hdr[_DEPTH] != d:
            return False
        new = int(tr.hdr[_NKEYS] - h[_NKEYS])
        extra = None
        if new == 0:
            if head < 0 or tr.frames[d - 1, 2] != head:
                return False
        elif new == 1 and tr.frames[d - 1, 2] == h[_NKEYS]:
            e = int(h[_NKEYS])
            o = int(tr.kp_off[e])
            extra = tr.kp_data[o:o + int(tr.kp_len[e])].tobytes()
            if head < 0:
                head = -2 - e  # names this object: no other gets key e first
        else:
            return False
        if tr.hdr[_MODE] == _KEY_STR:
            prefix = tr.kbuf[:tr.hdr[_KLEN]].tobytes()
            if prefix not in self._used(d, head, extra)[1]:
                return False
            return self._dead(d, head, extra, prefix, lambda: _Probe(self.inner))
        if tr.hdr[_MODE] == _STRUCT and tr.frames[d - 1, 1] == 0:
            return self._dead(d, head, extra, b"", lambda: self._probe_after(b"", True))
        return False

    def _new_key(self, t: int) -> bytes:
        """The key token ``t`` completes from the current state (replayed on scratch rows)."""
        tr = self._tr
        h = tr.hdr
        tr.shdr[:] = h
        dep = int(h[_DEPTH])
        tr.sframes[:dep] = tr.frames[:dep]
        tr.skbuf[:h[_KLEN]] = tr.kbuf[:h[_KLEN]]
        feed(self._tdata, self._toff[t], self._toff[t + 1], tr.shdr, tr.sframes, tr.skbuf, tr.kp_off, tr.kp_len,
             tr.kp_prev, tr.kp_hash, tr.kp_data)
        e = int(h[_NKEYS])
        o = int(tr.kp_off[e])
        return tr.kp_data[o:o + int(tr.kp_len[e])].tobytes()

    def _prune(self, words) -> None:
        """Clear from ``words`` the allowed tokens :meth:`_lands_dead` would refuse."""
        tr = self._tr
        h = tr.hdr
        d = int(h[_DEPTH])
        if d == 0 or tr.frames[d - 1, 0] != _OBJ:
            return
        head = int(tr.frames[d - 1, 2])
        mode = int(h[_MODE])
        qc, qc2, qk, pieces = self._live_tab
        off, data = self._toff, self._tdata
        found: list = []  # (extra key, prefix or None for "after the comma", token ids)
        if mode == _KEY_STR:
            if h[_ESC] or h[_HIGH]:
                return
            keys, kids = self._used(d, head, None)
            q = tr.kbuf[:h[_KLEN]].tobytes()
            if head >= 0 and q in kids:  # key pieces that keep the key on a used key's path
                by_prefix: dict = {}
                for key in keys:
                    if key.startswith(q):
                        for end in range(len(q) + 1, len(key) + 1):
                            ids = pieces.get(key[len(q):end])
                            if ids:
                                by_prefix[key[:end]] = ids
                found = [(head, None, prefix, ids) for prefix, ids in by_prefix.items()]
        toks = qk if mode == _KEY_STR else (qc if mode == _STRUCT else qc2)
        out_tok = np.empty(toks.shape[0], np.int64)
        out_kind = np.empty(toks.shape[0], np.int64)
        out_new = np.empty(toks.shape[0], np.int64)
        while True:
            n = key_landings(words, toks, data, off, h, tr.frames, tr.kbuf, tr.kp_off, tr.kp_len, tr.kp_prev,
                             tr.kp_hash, tr.kp_data, tr.shdr, tr.sframes, tr.skbuf, out_tok, out_kind, out_new)
            if n >= 0:
                break
            tr.grow()
        # the object as _lands_dead names it after a token that completes its first key
        first = -2 - int(h[_NKEYS]) if head < 0 else head
        for t, kind, new in zip(out_tok[:n].tolist(), out_kind[:n].tolist(), out_new[:n].tolist()):
            extra = self._new_key(t) if new else None
            obj = first if new else head
            if kind == 0:
                found.append((obj, extra, None, [t]))
            else:
                raw = data[off[t]:off[t + 1]].tobytes()
                prefix = raw[raw.rindex(b'"') + 1:]
                if prefix in self._used(d, obj, extra)[1]:
                    found.append((obj, extra, prefix, [t]))
        one = np.uint32(1)
        for obj, extra, prefix, ids in found:
            live_ids = [t for t in ids if words[t >> 5] & (one << np.uint32(t & 31))]
            if not live_ids:
                continue
            raw = data[off[live_ids[0]]:off[live_ids[0] + 1]]
            if prefix is None:
                dead = self._dead(d, obj, extra, b"", lambda: self._probe_after(raw, True))
            else:
                dead = self._dead(d, obj, extra, prefix, lambda: self._probe_after(raw, False))
            if dead:
                for t in live_ids:
                    words[t >> 5] &= ~(one << np.uint32(t & 31))

    def allowed_tokens(self) -> np.ndarray:
        w = self.mask_words()
        bits = np.unpackbits(w.view(np.uint8), bitorder="little")
        return np.flatnonzero(bits[:self.vocab.logits_width])

    def is_accepting(self) -> bool:
        return self.inner.is_accepting()

    def is_terminated(self) -> bool:
        return self.inner.is_terminated()

    def forced_tokens(self, max_back_off: int = 4) -> list:
        """The inner matcher's forced tokens, cut before the first one the guard refuses."""
        toks = [int(t) for t in self.inner.forced_tokens()]
        n = 0
        for t in toks:
            if not self.advance(t):
                break
            n += 1
        self.rollback(n)
        return toks[:n]

    def __getattr__(self, name):
        # anything else (``state``, ``engine``...) is the inner matcher's
        if name in ("inner", "vocab", "_tr", "_history", "_tab", "_tdata", "_toff", "_tdfa", "_fresh", "live_keys",
                    "_memo", "_live_tab"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"KeyGuardMatcher({self.inner!r}, tokens={len(self._history)})"
