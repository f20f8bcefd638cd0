"""KeyGuardMatcher: a matcher that never lets an object key occur twice in the same object.

``property_order="any"`` (see :mod:`structgen.frontends.json_schema.property_order`) compiles objects to grammars
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
    module docstring.  With ``live_keys`` it also refuses tokens after which only used keys could
    follow (:mod:`.key_liveness`).  The Matcher contract, plus ``mask_words``, ``allowed_tokens``
    and ``advance_bytes``."""

    def __init__(self, inner, vocab, _tracker=None, _history=None, live_keys: bool = False, _memo=None):
        self.inner = inner
        self.vocab = vocab
        self._tr = _tracker if _tracker is not None else _Tracker()
        self._history: list = [] if _history is None else _history
        # live_keys: also refuse tokens after which only used keys can follow (key_liveness.py)
        self.live_keys = bool(live_keys)
        self._live = None
        if self.live_keys:
            from .key_liveness import LiveKeys

            self._live = LiveKeys(self, _memo)
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
        if self._live is not None:
            self._live.clear()

    def fork(self) -> "KeyGuardMatcher":
        return KeyGuardMatcher(self.inner.fork(), self.vocab, self._tr.copy(), list(self._history),
                               self.live_keys, dict(self._live.memo) if self._live is not None else None)

    def rollback(self, n: int = 1) -> None:
        if n < 0 or n > len(self._history):
            raise ValueError(f"cannot roll back {n} tokens; {len(self._history)} were accepted")
        if n:
            self.inner.rollback(n)
            self._tr.restore(self._history[-n])
            del self._history[-n:]
            if self._live is not None:
                self._live.rolled_back()

    def accepted_tokens(self) -> int:
        return len(self._history)

    def _checks_liveness(self) -> bool:
        # live_keys may be switched off on a matcher built with it (tests compare both)
        return self.live_keys and self._live is not None

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
        if self._checks_liveness() and self._live.refuses(snap, v.token_data[off[token]:off[token + 1]]):
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
        if ok and self._checks_liveness() and self._live.refuses(snap, data):
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
            if self._checks_liveness():
                self._live.prune(words)
        return words

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        words, fresh, live = self._source()
        if live:
            dst = self._row_view(bitmask, row)
            if dst is not None and dst.shape[0] == words.shape[0]:
                # the guarded mask written straight into the row (no temporary, no torch copy)
                self._tr.clear_into(dst, words, self._tab, self._tdata, self._toff)
                if self._checks_liveness():
                    self._live.prune(dst)
                return
            if not fresh:
                words = words.copy()
            self._tr.clear(words, self._tab, self._tdata, self._toff)
            if self._checks_liveness():
                self._live.prune(words)
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
                    "_live"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"KeyGuardMatcher({self.inner!r}, tokens={len(self._history)})"
