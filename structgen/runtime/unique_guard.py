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

Liveness: in arrays whose items are *bounded* (the plan says which: a ``maxLength`` string, a
closed integer range...; with open item sets every started item has other completions), a token
after which the item so far spells the start of an earlier item (:func:`~.value_tracker.open_item_echoes`)
is refused when :meth:`UniqueItemsMatcher.item_can_end` proves that every ending of the item is a
duplicate (a depth-first search over single bytes under the inner masks, ``LIVENESS_BUDGET`` units
of work per mask; a search cut short leaves the token allowed).  ``advance`` of a candidate token
asks the mask of its state (cached), so mask and advance agree.

Limits, stated: equality is decided on the 128-bit hashes (two distinct values collide with
probability about 2^-128 per pair); the liveness candidates are found by spelling, so an item
started in another spelling than the earlier one (``"\\u0061`` after ``"a"``) is not searched;
an array whose ``minItems`` asks for more distinct items than exist is not detected.  The inner
matcher is trusted for well-formedness (a JSON grammar).
"""
from __future__ import annotations

import json

import numpy as np
from numba import njit

from . import history as hist
from .batch import write_row
from .checks import check_bitmask_row, check_token
from .dead_keys import cycle_memo, reaches_cycle
from .key_guard import KeyGuardMatcher
from .protocol import ByteStateView, Matcher, Snapshot, accepted_prefix
from .value_tracker import (ARR, BELOW, COUNT, DEPTH, EVT, HDR, HIT, ISTART, KEND, KIND, KSTART, KSTR, LIVE,
                            MODE, NEED, NO, OBJ, OK, OVERFLOW, POS, PST, RB, UNIQ, UNSURE, VSTR, YES, ValueTracker,
                            echo_candidates, echoes_after, extends_echo, feed, open_item_echoes)

__all__ = ["UniqueItemsMatcher"]


# bit index of a power of two by de Bruijn multiplication (one multiply and a lookup, not a shift
# loop: the duplicate check visits every allowed token, a hundred thousand in a string)
_DEBRUIJN = np.array([0, 1, 28, 2, 29, 14, 24, 3, 30, 22, 20, 15, 25, 17, 4, 8,
                      31, 27, 13, 23, 21, 19, 16, 7, 26, 12, 18, 6, 11, 5, 10, 9], np.int64)


@njit(cache=True, nogil=True, inline="always")
def _low_bit(low):
    """The index of the only set bit of the uint32 ``low``."""
    return _DEBRUIJN[((np.uint64(low) * np.uint64(0x077CB531)) & np.uint64(0xFFFFFFFF)) >> np.uint64(27)]


@njit(cache=True, nogil=True, inline="always")
def _replay(t, words, w, low, tdata, toff, hdr, frames, depth, ip_h1, ip_h2, ip_lo, ip_hi, ip_prev, hist, base, shdr,
            sframes, uf, cand_at, cand_end, unsure, echoes, cnt):
    """Feed token ``t`` (bit ``low`` of word ``w``) from the state ``hdr/frames``: clears the bit of
    a duplicate, lists an undecided token in ``unsure`` and a liveness candidate in ``echoes``
    (``cnt``: their counts).  Returns -1 on OVERFLOW, else 0."""
    for j in range(HDR):
        shdr[j] = hdr[j]
    for d in range(depth):
        for c in range(frames.shape[1]):
            sframes[d, c] = frames[d, c]
    st = feed(tdata, toff[t], toff[t + 1], False, shdr, sframes, ip_h1, ip_h2, ip_lo, ip_hi, ip_prev)
    if st == HIT:
        words[w] = np.uint32(words[w]) & ~low
    elif st == UNSURE:
        if cnt[0] < unsure.shape[0]:
            unsure[cnt[0]] = t
        cnt[0] += 1
    elif st == OVERFLOW:
        return -1
    elif echoes_after(shdr, sframes, uf, frames[uf, ISTART] if uf >= 0 else -1, cand_at, cand_end,
                      ip_h1, ip_lo, ip_hi, ip_prev, hist, base, tdata, toff[t]):
        if cnt[1] < echoes.shape[0]:
            echoes[cnt[1]] = t
        cnt[1] += 1
    return 0


@njit(cache=True, nogil=True)
def clear_duplicates(words, normal, qcount, quoted, in_string, tdata, toff, hdr, frames, ip_h1, ip_h2, ip_lo, ip_hi,
                     ip_prev, hist, shdr, sframes, unsure, echoes):
    """Clear from ``words`` every allowed token that completes a duplicate item from the state
    ``hdr/frames`` (stream so far: ``hist[:hdr[POS]]``).  Tokens the kernel cannot decide (UNSURE)
    go to ``unsure``, those after which an item in progress echoes an earlier one
    (:func:`~.value_tracker.open_item_echoes`, the liveness candidates) to ``echoes``.  Returns
    ``(len unsure, len echoes)`` (counts past the buffers' sizes: run again with larger ones), or
    ``(-1, -1)`` on OVERFLOW.  ``quoted``: the ids of the tokens with a ``"`` byte, ascending
    (inside a string that echoes no earlier item only those can complete an item: the others
    are not visited -- a string value allows most of the vocabulary)."""
    depth = hdr[DEPTH]
    base = hdr[POS]
    cnt = np.zeros(2, np.int64)  # tokens listed in unsure, in echoes
    # an item in progress that echoes no earlier item cannot be made to by extending it
    pre_echo = open_item_echoes(hdr, frames, ip_h1, ip_lo, ip_hi, ip_prev, hist, base, tdata, 0)
    uf = depth - 1
    while uf >= 0 and frames[uf, UNIQ] != YES:
        uf -= 1
    # the earlier items whose bytes continue the item so far, found once (not once per token: the
    # item so far can be kilobytes long): where each continues, and where it ends
    cand_at = np.empty(0, np.int64)
    cand_end = np.empty(0, np.int64)
    if pre_echo and uf >= 0:
        cand_at, cand_end = echo_candidates(frames, uf, base, ip_lo, ip_hi, ip_prev, hist)
    if in_string and cand_at.shape[0] == 0:
        for i in range(quoted.shape[0]):
            t = quoted[i]
            w = t >> 5
            low = np.uint32(1) << np.uint32(t & 31)
            if w >= words.shape[0] or np.uint32(words[w]) & low == 0 or t >= normal.shape[0] or not normal[t]:
                continue
            if _replay(t, words, w, low, tdata, toff, hdr, frames, depth, ip_h1, ip_h2, ip_lo, ip_hi, ip_prev, hist,
                       base, shdr, sframes, uf, cand_at, cand_end, unsure, echoes, cnt) < 0:
                return -1, -1
        return cnt[0], cnt[1]
    for w in range(words.shape[0]):
        x = np.uint32(words[w])
        while x:
            low = x & (~x + np.uint32(1))
            x ^= low
            t = w * 32 + _low_bit(low)
            if t >= normal.shape[0] or not normal[t]:
                continue
            if in_string and qcount[t] == 0:
                # inside a string and no quote: the token only extends the item in progress, an echo
                # when its bytes continue an earlier item's
                if cand_at.shape[0] and extends_echo(cand_at, cand_end, hist, tdata, toff[t], toff[t + 1]):
                    if cnt[1] < echoes.shape[0]:
                        echoes[cnt[1]] = t
                    cnt[1] += 1
                continue
            if _replay(t, words, w, low, tdata, toff, hdr, frames, depth, ip_h1, ip_h2, ip_lo, ip_hi, ip_prev, hist,
                       base, shdr, sframes, uf, cand_at, cand_end, unsure, echoes, cnt) < 0:
                return -1, -1
    return cnt[0], cnt[1]


_TABLES: dict = {}


def _tables(vocab):
    """Per vocabulary (cached): each token's number of ``"`` bytes, the ids of the tokens with one,
    for each byte the id of a token spelling exactly that byte (-1: none), and for each byte
    without one the tokens that start with it (a packed mask, by byte)."""
    key = (id(vocab), vocab.fingerprint)
    hit = _TABLES.get(key)
    if hit is not None and hit[0] is vocab:
        return hit[1]
    off = np.asarray(vocab.token_offsets, np.int64)
    data = np.asarray(vocab.token_data)
    cs = np.concatenate([[0], np.cumsum(data == 0x22, dtype=np.int64)])
    counts = (cs[off[1:]] - cs[off[:-1]]).astype(np.int32)
    single = np.full(256, -1, np.int64)
    normal = np.asarray(vocab.is_normal, bool)
    ones = np.flatnonzero((off[1:] - off[:-1] == 1) & normal[:off.shape[0] - 1])
    for t in ones[::-1].tolist():
        single[data[off[t]]] = t
    lead = {}
    n = off.shape[0] - 1
    starts = np.flatnonzero((off[1:] > off[:-1]) & normal[:n])
    first = data[off[starts]]
    for b in np.flatnonzero(single < 0).tolist():
        ids = starts[first == b]
        if ids.size:
            bits = np.zeros((n + 31) // 32, np.uint32)
            np.bitwise_or.at(bits, ids >> 5, (np.uint32(1) << (ids & 31).astype(np.uint32)))
            lead[b] = bits
    if len(_TABLES) > 16:
        _TABLES.clear()
    quoted = np.flatnonzero(counts > 0).astype(np.int64)
    _TABLES[key] = (vocab, (counts, quoted, single, lead))
    return counts, quoted, single, lead


#: the order the liveness search tries bytes in: what ends a value first, whitespace last
_BYTE_ORDER = np.array(sorted(range(256), key=lambda b: (0 if b in b'"]},' else 2 if b in b' \t\n\r' else 1, b)),
                       np.int64)
_ENDERS = tuple(b'"],} ')
#: work the liveness searches of one mask may do in all, in steps (a one-byte advance) and inner
#: mask queries (``MASK_COST`` steps each); the candidates left when it is spent stay allowed
LIVENESS_BUDGET = 400
MASK_COST = 4
CYCLE_STATES = 64   # automaton states an endless-string search explores per budget unit


class UniqueItemsMatcher(Matcher):
    """``inner`` (any :class:`~structgen.Matcher` over a JSON grammar) with duplicate items of the
    arrays ``plan`` calls unique rejected; see the module docstring.  ``plan``: an object with
    ``root``, ``step(state, key_or_index)``, ``unique(state)``, ``below(state)`` and ``hot(state)``
    (:class:`structgen.frontends.json_schema.unique_items.UniquePlan`).

    History: one :class:`~structgen.runtime.history.Step` per step, holding the tracker state
    after it and the bytes fed (``None`` for EOS); the inner matcher keeps its own, step for
    step.
    """

    def __init__(self, inner: Matcher, vocab, plan, *, live: bool = True, _fork_of=None):
        self.inner = inner
        self.live = bool(live)  # the liveness check (off in the forks its own search uses)
        self._vocab = vocab
        self.plan = plan
        self._qcount, self._quoted, self._single, self._lead = _tables(vocab)
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
        self._last_mask = None

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
        f[d, LIVE] = 1 if f[d, UNIQ] == YES and plan.bounded(state) else 0

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
        return UniqueItemsMatcher(self.inner.fork(), self._vocab, self.plan, live=self.live, _fork_of=self)

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
        return self._commit(v.token_data[v.token_offsets[token]:v.token_offsets[token + 1]], token)

    def advance_bytes(self, data: bytes) -> bool:
        if self.inner.is_terminated():
            return False
        data = bytes(data)
        if not self.inner.advance_bytes(data):
            return False
        return self._commit(np.frombuffer(data, np.uint8))

    def _commit(self, data, token=None) -> bool:
        """The inner matcher took ``data`` (so the tracker sees well-formed JSON only): keep the
        step if no item it completes is a duplicate and, for a liveness candidate, if the mask
        allows ``token`` (its search budget is per mask, so the mask decides; ``advance_bytes``
        searches on its own), else undo the inner step."""
        base = int(self._tr.hdr[POS])
        ok = self._try(data)
        if ok and self.live and self._echoes(data, base):
            if token is None:
                ok = self._probe_after(data).item_can_end([LIVENESS_BUDGET])
            else:
                self._tr.restore(self._node.state)
                self.inner.rollback(1)
                words = self._mask_here()
                if not (int(words[token >> 5]) >> (token & 31)) & 1:
                    return False
                self.inner.advance(token)
                ok = self._try(data)
        if not ok:
            self._tr.restore(self._node.state)
            self.inner.rollback(1)
            return False
        self._bytes += data.tobytes()
        self._node = self._node.child(self._tr.save(), data)
        return True

    # ------------------------------------------------------------------ liveness
    def _hist(self) -> np.ndarray:
        return np.frombuffer(bytes(self._bytes), np.uint8)

    def _echoes(self, data: np.ndarray, base: int) -> bool:
        """After ``data`` was fed: is an item in progress that may be doomed to repeat an earlier one
        (:func:`~.value_tracker.open_item_echoes`)?"""
        tr = self._tr
        return bool(open_item_echoes(tr.hdr, tr.frames, tr.ip_h1, tr.ip_lo, tr.ip_hi, tr.ip_prev, self._hist(), base,
                                     data, 0))

    def _probe_after(self, data: np.ndarray) -> "UniqueItemsMatcher":
        """A fork without the liveness check, standing after ``data`` (fed to the tracker, and to
        the inner matcher, whose fork it takes)."""
        probe = UniqueItemsMatcher(self.inner.fork(), self._vocab, self.plan, live=False, _fork_of=self)
        probe._bytes += data.tobytes()
        probe._node = self._node.child(self._tr.save(), data)
        return probe

    def _mask_here(self) -> np.ndarray:
        hit = self._last_mask
        if hit is not None and hit[0] is self._node:
            return hit[1]
        return self.mask_words()

    def _endless_string(self, budget: list) -> bool | None:
        """Is a string value in progress whose text can grow without end: an automaton state of
        the inner matcher (:class:`~.protocol.ByteStateView`) on a path of non-quote bytes to a
        cycle?  Each turn of the cycle adds characters, so the decoded values differ.  The
        search charges ``budget[0]`` one unit per ``CYCLE_STATES`` states it explores (the first
        question on a long bounded string walks its whole acyclic region); None when that cuts it."""
        inner = self.inner
        while isinstance(inner, KeyGuardMatcher):  # it refuses keys only: a string value's bytes pass
            inner = inner.inner
        if int(self._tr.hdr[MODE]) != VSTR or not isinstance(inner, ByteStateView):
            return False
        trans, bc, _ = inner.byte_automaton()
        memo, _, ss, sb = cycle_memo(trans)
        for s in inner.byte_states().tolist():
            r, n = reaches_cycle(trans, bc, memo, s, ss, sb, max(0, budget[0]) * CYCLE_STATES)
            budget[0] -= (n + CYCLE_STATES - 1) // CYCLE_STATES
            if r != 0:
                return None if r < 0 else True
        return False

    def item_can_end(self, budget: list) -> bool:
        """Can the item in progress of the innermost unique array end without being a duplicate?
        A depth-first search over single bytes under the inner matcher's masks (the bytes that end
        a value first; a byte without a one-byte token is tried with ``advance_bytes``, when an
        allowed token starts with it); True when it finds such an ending and also when the search
        is cut (``budget[0]`` work units, spent in place -- one budget serves a whole mask -- see
        ``LIVENESS_BUDGET``): only a proven dead item is refused.  The search also stops, with
        True, where it stands inside a string value that can grow without end
        (:meth:`_endless_string`): the item then has infinitely many distinct completions, and
        there are finitely many earlier items."""
        tr = self._tr
        d = int(tr.hdr[DEPTH])
        f = d - 1
        while f >= 0 and tr.frames[f, UNIQ] != YES:
            f -= 1
        if f < 0 or self._endless_string(budget) is not False:
            return True
        count = int(tr.frames[f, COUNT])
        left = budget

        def ended() -> bool:
            return int(self._tr.hdr[DEPTH]) <= f or int(self._tr.frames[f, COUNT]) > count

        def search() -> bool | None:
            for b in _ENDERS:  # the quick way out: end the value now
                t = int(self._single[b])
                left[0] -= 1
                if self.advance(t) if t >= 0 else self.advance_bytes(bytes([b])):
                    done = ended()
                    self.rollback(1)
                    if done:
                        return True
            if left[0] <= 0:
                return None
            left[0] -= MASK_COST
            words = self.inner.mask_words()
            for b in _BYTE_ORDER.tolist():
                t = int(self._single[b])
                if t >= 0:
                    if not (int(words[t >> 5]) >> (t & 31)) & 1:
                        continue
                    left[0] -= 1
                    if not self.advance(t):
                        continue
                else:  # no one-byte token: ask with the byte, if an allowed token starts with it
                    lead = self._lead.get(b)
                    if lead is None:
                        continue
                    n = min(lead.shape[0], words.shape[0])
                    if not (words[:n] & lead[:n]).any():
                        continue
                    left[0] -= 1
                    if not self.advance_bytes(bytes([b])):
                        continue
                r = True if ended() else self._endless_string(left)
                if r is False:
                    r = search()
                self.rollback(1)
                if r is None:
                    return None
                if r:
                    return True
            return False

        try:
            return search() is not False
        finally:
            search = None  # a recursive closure holding this matcher: without this every call left a cycle


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
            self._scratch = (np.zeros(HDR, np.int64), np.zeros_like(tr.frames), np.zeros(64, np.int64),
                             np.zeros(256, np.int64))
        in_string = int(tr.hdr[MODE]) in (VSTR, KSTR)
        hist = self._hist()
        before = words.copy()
        while True:
            shdr, sframes, unsure, echoes = self._scratch
            nu, ne = clear_duplicates(words, self._normal, self._qcount, self._quoted, in_string, self._tdata, self._toff,
                                      *tr.args(), hist, shdr, sframes, unsure, echoes)
            if nu < 0:  # a buffer of the tracker is full
                tr.grow()
            elif nu > unsure.shape[0] or ne > echoes.shape[0]:
                pass
            else:
                break
            words[:] = before
            self._scratch = (shdr, np.zeros_like(tr.frames), np.zeros(max(2 * nu, 64), np.int64),
                             np.zeros(max(2 * ne, 256), np.int64))
        for t in unsure[:nu].tolist():  # replayed with the plan (their liveness is not searched)
            probe = self.fork()
            probe.live = False
            if not probe.advance(t):
                words[t >> 5] = np.uint32(words[t >> 5]) & ~np.uint32(1 << (t & 31))
        if self.live and ne:
            probe = UniqueItemsMatcher(self.inner.fork(), self._vocab, self.plan, live=False, _fork_of=self)
            budget = [LIVENESS_BUDGET]  # for the whole mask: candidates after it stay allowed
            for t in echoes[:ne].tolist():
                if budget[0] <= 0:
                    break
                if probe.advance(t):
                    ok = probe.item_can_end(budget)
                    probe.rollback(1)
                else:
                    ok = True  # left to the duplicate check above
                if not ok:
                    words[t >> 5] = np.uint32(words[t >> 5]) & ~np.uint32(1 << (t & 31))

    def mask_words(self) -> np.ndarray:
        """The allowed tokens as uint32 words (a fresh array)."""
        words = self.inner.mask_words()
        if not words.flags.writeable:
            words = words.copy()
        if not self.inner.is_terminated() and self._guarded():
            self._clear(words)
            self._last_mask = (self._node, words.copy())  # advance of a liveness candidate asks it
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
