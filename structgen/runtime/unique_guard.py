"""UniqueItemsMatcher: a matcher that never lets an item occur twice in a unique array.

A JSON Schema whose ``uniqueItems: true`` arrays range over open item sets is compiled without
the keyword (:mod:`structgen.frontends.json_schema.unique_items`); this wrapper adds it back.  It
follows the values of the accepted bytes with :mod:`.value_tracker` -- canonical 128-bit hashes, so
``1`` equals ``1.0`` and objects are equal whatever their key order -- and, for each open
array the schema's *plan* calls unique (a function of the instance path), the hashes of the
items it holds.  A token that completes an item equal to an earlier one of its array is
rejected; ``true`` / ``false`` / ``null`` count as complete at their first byte, so a duplicate
literal is never started.

- ``advance`` asks the inner matcher, then feeds the token's bytes to the tracker; at each
  container that may be unique the tracker stops and the plan names the frame's state from the
  key or index that leads to it (decoded from the accepted bytes).
- ``fill_bitmask`` / ``mask_words`` take the inner matcher's mask and replay the tracker over
  the allowed tokens (one Numba kernel), clearing those that complete a duplicate.  Inside a
  string only tokens with a ``"`` byte can complete a value, so only those are replayed there.
  A token that opens an array the plan has not placed yet and completes two of its items is
  replayed again with the plan (rare: ``[1,1`` as one token).  Without an open unique array,
  or one that may open, the inner mask is returned as it is.

Mask bit <=> ``advance`` holds: both run the same kernel from the same state.  ``rollback``,
``fork``, ``reset``, ``snapshot`` and ``restore`` are exact (the tracker state per step in a
history tree, the accepted bytes kept for key decoding, the item pool replayed when a restore
crosses to another branch).

Limits, stated: equality is decided on the 128-bit hashes (two distinct values collide with
probability about 2^-128 per pair); an item whose every completion is a duplicate is refused
only when it is complete (or, for literals, started) -- with open item sets (strings, numbers,
objects without bounds) every started item has other completions, but a bounded one (a
one-character string, a closed integer range) can be started and then only close as a
duplicate, and an array whose ``minItems`` asks for more distinct items than exist is not
detected.  The inner matcher is trusted for well-formedness (a JSON grammar).
"""
from __future__ import annotations

import json

import numpy as np
from numba import njit

from . import history as hist
from .batch import write_row
from .checks import check_bitmask_row, check_token
from .protocol import Matcher, Snapshot, accepted_prefix
from .value_tracker import (ARR, BELOW, COUNT, DEPTH, EVT, HDR, HIT, KEND, KIND, KSTART, MODE, NEED, NO, OBJ,
                            OK, OVERFLOW, POS, PST, RB, UNIQ, UNKNOWN, UNSURE, VSTR, KSTR, YES, ValueTracker,
                            feed)

__all__ = ["UniqueItemsMatcher"]


@njit(cache=True, nogil=True)
def clear_duplicates(words, normal, qcount, in_string, tdata, toff, hdr, frames, ip_h1, ip_h2, ip_lo, ip_hi,
                     ip_prev, shdr, sframes, unsure):
    """Clear from ``words`` every allowed token that completes a duplicate item from the state
    ``hdr/frames``; tokens the kernel cannot decide (UNSURE) go to ``unsure``.  Returns how many
    went there, or -1 on OVERFLOW."""
    depth = hdr[DEPTH]
    nu = 0
    for w in range(words.shape[0]):
        x = np.uint32(words[w])
        while x:
            low = x & (~x + np.uint32(1))
            x ^= low
            t = w * 32
            v = low
            while v > np.uint32(1):
                v >>= np.uint32(1)
                t += 1
            if t >= normal.shape[0] or not normal[t] or (in_string and qcount[t] == 0):
                continue
            for j in range(HDR):
                shdr[j] = hdr[j]
            for d in range(depth):
                for c in range(frames.shape[1]):
                    sframes[d, c] = frames[d, c]
            st = feed(tdata, toff[t], toff[t + 1], False, shdr, sframes, ip_h1, ip_h2, ip_lo, ip_hi, ip_prev)
            if st == HIT:
                words[w] = np.uint32(words[w]) & ~low
            elif st == UNSURE:
                if nu < unsure.shape[0]:
                    unsure[nu] = t
                nu += 1
            elif st == OVERFLOW:
                return -1
    return nu


_TABLES: dict = {}


def _quote_counts(vocab):
    """Per token id, its number of ``"`` bytes (cached per vocabulary)."""
    key = (id(vocab), vocab.fingerprint)
    hit = _TABLES.get(key)
    if hit is not None and hit[0] is vocab:
        return hit[1]
    off = np.asarray(vocab.token_offsets, np.int64)
    data = np.asarray(vocab.token_data)
    cs = np.concatenate([[0], np.cumsum(data == 0x22, dtype=np.int64)])
    counts = (cs[off[1:]] - cs[off[:-1]]).astype(np.int32)
    if len(_TABLES) > 16:
        _TABLES.clear()
    _TABLES[key] = (vocab, counts)
    return counts


class UniqueItemsMatcher(Matcher):
    """``inner`` (any :class:`~structgen.Matcher` over a JSON grammar) with duplicate items of the
    arrays ``plan`` calls unique rejected; see the module docstring.  ``plan``: an object with
    ``root``, ``step(state, key_or_index)``, ``unique(state)``, ``below(state)`` and ``hot(state)``
    (:class:`structgen.frontends.json_schema.unique_items.UniquePlan`).

    History: one :class:`~structgen.runtime.history.Step` per step, holding the tracker state
    after it and the bytes fed (``None`` for EOS); the inner matcher keeps its own, step for
    step.
    """

    def __init__(self, inner: Matcher, vocab, plan, *, _fork_of=None):
        self.inner = inner
        self._vocab = vocab
        self.plan = plan
        self._qcount = _quote_counts(vocab)
        self._normal = np.asarray(vocab.is_normal, np.bool_)
        self._tdata = vocab.token_data
        self._toff = vocab.token_offsets
        if _fork_of is not None:
            self._tr = _fork_of._tr.copy()
            self._bytes = bytearray(_fork_of._bytes)
            self._node = _fork_of._node
            self._lineage = _fork_of._lineage
        else:
            self._start()
            self._lineage = object()
        self._scratch = None

    def _start(self) -> None:
        self._tr = ValueTracker()
        self._tr.hdr[RB] = 1 if self.plan.hot(self.plan.root) else 0
        self._bytes = bytearray()
        self._node = hist.root(self._tr.save())

    @property
    def vocab(self):
        return self._vocab

    # ------------------------------------------------------------------ the tracker with the plan
    def _feed(self, tr: ValueTracker, data: np.ndarray, prefix: bytes) -> bool:
        """Feed ``data`` to ``tr`` (whose stream so far is ``prefix``), placing each container the
        plan may care about: False on a duplicate item (``tr`` is then partly updated)."""
        lo, n = 0, data.shape[0]
        base = int(tr.hdr[POS])
        while True:
            st = feed(data, lo, n, True, *tr.args())
            if st == OK:
                return True
            if st == HIT:
                return False
            if st == OVERFLOW:
                raise _Overflow
            if st != NEED:
                raise AssertionError(f"internal error: value tracker status {st} with the plan")
            lo = int(tr.hdr[EVT])
            self._place(tr, prefix, data, base)

    def _place(self, tr: ValueTracker, prefix: bytes, data: np.ndarray, base: int) -> None:
        """Set the plan state of the container just opened (the top frame)."""
        plan, f, d = self.plan, tr.frames, int(tr.hdr[DEPTH]) - 1
        if d == 0:
            state = plan.root
        else:
            parent = int(f[d - 1, PST])
            if f[d - 1, KIND] == OBJ:
                lo, hi = int(f[d - 1, KSTART]), int(f[d - 1, KEND])
                raw = _span(prefix, data, base, lo, hi)
                step = json.loads(raw.decode("utf-8", "surrogatepass"))
            else:
                step = int(f[d - 1, COUNT])
            state = plan.step(parent, step)
        f[d, PST] = state
        f[d, UNIQ] = YES if f[d, KIND] == ARR and plan.unique(state) else NO
        f[d, BELOW] = 1 if plan.below(state) else 0

    def _try(self, data: np.ndarray) -> bool:
        """Feed ``data`` from the current step's state: True (tracker advanced) or False (a
        duplicate; the tracker is back at the current state)."""
        pre = self._node.state
        while True:
            try:
                ok = self._feed(self._tr, data, self._bytes)
                break
            except _Overflow:
                self._tr.restore(pre)
                self._tr.grow()
        if not ok:
            self._tr.restore(pre)
        return ok

    # ------------------------------------------------------------------ history
    def reset(self) -> None:
        self.inner.reset()
        self._start()

    def fork(self) -> "UniqueItemsMatcher":
        return UniqueItemsMatcher(self.inner.fork(), self._vocab, self.plan, _fork_of=self)

    def rollback(self, n: int = 1) -> None:
        if n < 0 or n > self._node.depth:
            raise ValueError(f"cannot roll back {n} tokens; {self._node.depth} were accepted")
        if n:
            self.inner.rollback(n)
            self._node = hist.ancestor(self._node, n)
            self._tr.restore(self._node.state)
            del self._bytes[int(self._tr.hdr[POS]):]

    def accepted_tokens(self) -> int:
        return self._node.depth

    def snapshot(self) -> Snapshot:
        return Snapshot(self._lineage, (self._node, self.inner.snapshot()))

    def restore(self, snapshot: Snapshot) -> None:
        if not isinstance(snapshot, Snapshot) or snapshot.lineage is not self._lineage:
            raise ValueError("restore() takes a snapshot of this matcher or of one forked from the same start")
        target, inner_snap = snapshot.point
        self.inner.restore(inner_snap)
        shared, path = hist.path_from_shared(self._node, target)
        tr = self._tr
        tr.restore(shared.state)
        del self._bytes[int(tr.hdr[POS]):]
        for step in path:  # rewrite the item pool and the bytes along the target's branch
            if step.data is not None:
                if not self._feed(tr, step.data, self._bytes):
                    raise AssertionError("internal error: the value tracker refused bytes it accepted before")
                self._bytes += step.data.tobytes()
        tr.restore(target.state)
        self._node = target

    # ------------------------------------------------------------------ steps
    def advance(self, token: int) -> bool:
        token = check_token(token)
        v = self._vocab
        if not (0 <= token < v.logits_width) or not v.is_normal[token]:
            if not self.inner.advance(token):  # EOS (or a token no grammar accepts)
                return False
            self._node = self._node.child(self._node.state)
            return True
        if self.inner.is_terminated():
            return False
        if not self.inner.advance(token):
            return False
        return self._commit(v.token_data[v.token_offsets[token]:v.token_offsets[token + 1]])

    def advance_bytes(self, data: bytes) -> bool:
        if self.inner.is_terminated():
            return False
        data = bytes(data)
        if not self.inner.advance_bytes(data):
            return False
        return self._commit(np.frombuffer(data, np.uint8))

    def _commit(self, data) -> bool:
        """The inner matcher took ``data`` (so the tracker sees well-formed JSON only): keep the
        step if no item it completes is a duplicate, else undo the inner step."""
        if not self._try(data):
            self.inner.rollback(1)
            return False
        self._bytes += data.tobytes()
        self._node = self._node.child(self._tr.save(), data)
        return True

    # ------------------------------------------------------------------ masks
    def _guarded(self) -> bool:
        """Can a token complete an item of a unique array from here (one open, or one may open)?"""
        tr = self._tr
        d = int(tr.hdr[DEPTH])
        if d == 0:
            return bool(tr.hdr[RB])
        f = tr.frames[:d]
        return bool(np.any(f[:, UNIQ] == YES) or np.any(f[:, BELOW] != 0))

    def _clear(self, words) -> None:
        tr = self._tr
        if self._scratch is None or self._scratch[1].shape[0] < tr.frames.shape[0]:
            self._scratch = (np.zeros(HDR, np.int64), np.zeros_like(tr.frames), np.zeros(64, np.int64))
        shdr, sframes, unsure = self._scratch
        in_string = int(tr.hdr[MODE]) in (VSTR, KSTR)
        while True:
            nu = clear_duplicates(words, self._normal, self._qcount, in_string, self._tdata, self._toff,
                                  *tr.args(), shdr, sframes, unsure)
            if nu >= 0:
                break
            tr.grow()
            self._scratch = (shdr, np.zeros_like(tr.frames), unsure)
            shdr, sframes, unsure = self._scratch
        if nu > unsure.shape[0]:  # more undecided tokens than the buffer held: run again, larger
            self._scratch = (shdr, sframes, np.zeros(2 * nu, np.int64))
            return self._clear(words)
        for t in unsure[:nu].tolist():
            scratch = tr.copy()
            data = self._tdata[self._toff[t]:self._toff[t + 1]]
            try:
                ok = self._feed(scratch, data, self._bytes)
            except _Overflow:
                ok = True  # decided below by advance, which grows the tracker
                probe = self.fork()
                ok = probe.advance(t)
            if not ok:
                words[t >> 5] = np.uint32(words[t >> 5]) & ~np.uint32(1 << (t & 31))

    def mask_words(self) -> np.ndarray:
        """The allowed tokens as uint32 words (a fresh array)."""
        words = self.inner.mask_words()
        if not words.flags.writeable:
            words = words.copy()
        if not self.inner.is_terminated() and self._guarded():
            self._clear(words)
        return words

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        row = check_bitmask_row(bitmask, row, self._vocab.logits_width)
        if self.inner.is_terminated() or not self._guarded():
            self.inner.fill_bitmask(bitmask, row)
            return
        write_row(bitmask, row, self.mask_words().view(np.int32))

    # ------------------------------------------------------------------ queries
    def is_accepting(self) -> bool:
        return self.inner.is_accepting()

    def is_terminated(self) -> bool:
        return self.inner.is_terminated()

    def forced_bytes(self) -> bytes:
        """The inner matcher's forced bytes, cut to the longest prefix the guard accepts."""
        return accepted_prefix(self, self.inner.forced_bytes())

    def forced_tokens(self, max_back_off: int = 4) -> list:
        """The inner matcher's forced tokens, cut before the first one the guard refuses."""
        toks = [int(t) for t in self.inner.forced_tokens(max_back_off)]
        return toks[:self.validate(toks)]

    def __repr__(self) -> str:
        return f"UniqueItemsMatcher({self.inner!r}, tokens={self._node.depth})"


class _Overflow(Exception):
    """A tracker buffer is full (grow it and feed again)."""


def _span(prefix: bytes, data: np.ndarray, base: int, lo: int, hi: int) -> bytes:
    """Bytes ``[lo, hi)`` of the stream ``prefix + data`` (``data`` starts at position ``base``)."""
    if hi <= base:
        return bytes(prefix[lo:hi])
    head = bytes(prefix[lo:base]) if lo < base else b""
    return head + data[max(lo - base, 0):hi - base].tobytes()
