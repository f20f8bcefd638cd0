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
  ``fill_bitmask`` into an int32 CPU bitmask (numpy or torch) has the inner matcher fill the row,
  then clears the duplicates in a numpy view of it (no temporary array, no torch copy).

Mask bit <=> ``advance`` holds by construction (the same kernel decides both).  ``rollback``,
``fork``, ``reset``, ``snapshot`` and ``restore`` are exact: the tracker state (a small header,
one row per open container, the key in progress; :mod:`.json_tracker`) is saved per step in a
history tree (:mod:`.history`); recorded keys live in an append-only pool (a linked list per
object), truncated on rollback and replayed when a restore crosses to another branch.

The guard is itself a :class:`~structgen.runtime.protocol.Matcher` and uses its inner matcher
only through that protocol (plus :class:`~structgen.runtime.protocol.ByteStateView` for the
liveness check), so it wraps either engine's matcher or any other implementation.  The tracker
trusts the inner matcher for well-formedness: it only ever sees byte strings the inner grammar
(a JSON grammar) accepts.  A constraint that lives on the accelerator
(``cg.token_dfa.to("cuda")``) bypasses this wrapper.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import history as hist
from .batch import host_row, write_row
from .checks import check_token
from .json_tracker import DEPTH, DUPLICATE, ESC, HDR, HIGH, KEY_STR, KLEN, MODE, NKEYS, OBJ, OK, OVERFLOW, STRUCT, \
    VALUE_STR, Tracker, feed, has_key, probe_buffers, start_in_object
from .key_liveness import LiveKeys
from .protocol import ByteStateView, Matcher, Snapshot, accepted_prefix


@njit(cache=True, nogil=True)
def _replay(words, w, bit, t, tdata, toff, hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data, shdr,
            sframes, skbuf):
    """Replay token ``t`` on a scratch copy of the state; clear its bit on a duplicate."""
    depth = hdr[DEPTH]
    for j in range(HDR):
        shdr[j] = hdr[j]
    for d in range(depth):
        sframes[d, 0] = frames[d, 0]
        sframes[d, 1] = frames[d, 1]
        sframes[d, 2] = frames[d, 2]
    for j in range(hdr[KLEN]):
        skbuf[j] = kbuf[j]
    st = feed(tdata, toff[t], toff[t + 1], shdr, sframes, skbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data)
    if st == DUPLICATE:
        words[w] = words[w] & ~bit
        return OK
    return st


#: The (mode, frame state) of an object that :func:`one_key_table` describes, in ``kone`` row order:
#: between values after ``{`` or ``,``, after a key, after a ``:`` or a value; inside a value string.
_ONE_KEY_STARTS = ((STRUCT, 0), (STRUCT, 1), (STRUCT, 2), (VALUE_STR, 2))


@njit(cache=True, nogil=True)
def one_key_table(tdata, toff, cand, mode, fstate, kone, kstart, key_len, khash, pool, npool):
    """Row ``kone[i]`` etc. of :func:`clear_duplicates` for the start ``(mode, fstate)``: each of
    ``cand`` fed from there in an object without keys; a token with ``\\ { } [ ]`` is -1 (its
    depth or escapes vary).  Appends key bytes to ``pool`` from ``npool``; returns its new length."""
    hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data = probe_buffers()
    for i in range(cand.shape[0]):
        t = cand[i]
        kone[i] = -1
        simple = True
        for p in range(toff[t], toff[t + 1]):
            b = tdata[p]
            if b == 0x5C or b == 0x7B or b == 0x7D or b == 0x5B or b == 0x5D:
                simple = False
                break
        if not simple:
            continue
        start_in_object(hdr, frames, mode, fstate)
        if feed(tdata, toff[t], toff[t + 1], hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data) != OK:
            continue
        if hdr[NKEYS] == 0:
            kone[i] = 0
        elif hdr[NKEYS] == 1:
            n = kp_len[0]
            for j in range(n):
                pool[npool + j] = kp_data[kp_off[0] + j]
            kone[i] = 1
            kstart[i] = npool
            key_len[i] = n
            khash[i] = kp_hash[0]
            npool += n
    return npool


@njit(cache=True, nogil=True)
def clear_duplicates(words, cand, qcount, slow, slow_q, fq_ptr, fq_tok, kone, kstart, key_len, khash, kpool, tdata,
                     toff, hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data, shdr, sframes, skbuf):
    """Clear from ``words`` every allowed token that would complete a duplicate key from the
    state ``hdr/frames/kbuf``.  OK or OVERFLOW.

    Only tokens with a ``"`` byte can complete a key.  ``cand``/``qcount``: those tokens by
    decreasing quote count.  Inside a key (no escape pending), a token with one or two quotes and
    no backslash before the first completes exactly one key, ``key so far + its bytes before the
    quote`` (a second quote can only open a string); ``fq_tok[fq_ptr[k]:fq_ptr[k + 1]]`` are those
    tokens with their first quote at offset ``k``, so for each key of the object only the tokens
    of the matching length are compared.  ``slow``: the other tokens that can end a key (an
    unescaped quote), by decreasing quote count ``slow_q``, replayed in full; while the object
    has no key yet only those with three quotes or more can (one ends this key, which has nothing
    to repeat, two complete another).  Between values and in a value string of an object,
    ``kone[s, i]`` (``s``: :data:`_ONE_KEY_STARTS`) says what ``cand[i]`` does from there: 0
    completes no key, 1 completes the one key ``kpool[kstart[s, i]:][:key_len[s, i]]`` (hash
    ``khash``) of this object, -1 anything else (replayed)."""
    depth = hdr[DEPTH]
    used = False
    for d in range(depth):
        if frames[d, 0] == OBJ and frames[d, 2] >= 0:
            used = True
            break
    klen = hdr[KLEN]
    mode = hdr[MODE]
    one = np.uint32(1)
    if mode == KEY_STR and hdr[ESC] == 0 and hdr[HIGH] == 0:
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
        fresh = frames[depth - 1, 2] < 0
        for i in range(slow.shape[0]):
            if fresh and slow_q[i] < 3:
                break
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
    need = 1 if mode == KEY_STR else (2 if mode == STRUCT else 3)
    if not used:
        need += 2
    s = -1
    if depth > 0 and frames[depth - 1, 0] == OBJ:
        if mode == STRUCT:
            s = frames[depth - 1, 1]
        elif mode == VALUE_STR and hdr[ESC] == 0 and frames[depth - 1, 1] == 2:
            s = 3
    for i in range(cand.shape[0]):
        if qcount[i] < need:
            break
        t = cand[i]
        w = t >> 5
        bit = one << np.uint32(t & 31)
        if words[w] & bit != 0:
            k = kone[s, i] if s >= 0 else -1
            if k == 0:
                continue
            if k == 1:
                if has_key(frames[depth - 1, 2], khash[s, i], kpool, kstart[s, i], key_len[s, i], kp_off, kp_len,
                            kp_prev, kp_hash, kp_data):
                    words[w] = words[w] & ~bit
                continue
            if _replay(words, w, bit, t, tdata, toff, hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash,
                       kp_data, shdr, sframes, skbuf) == OVERFLOW:
                return OVERFLOW
    return OK


_TABLES: dict = {}


def _vocab_tables(vocab):
    """The candidate tables of :func:`clear_duplicates` for a vocabulary (cached): tokens with a
    ``"`` byte by decreasing quote count and their counts; the in-key fast tokens (one or two
    quotes, no backslash before the first) bucketed by first-quote offset (CSR); the others that
    can end a key (:func:`_ends_string`), by decreasing quote count, and their counts; what each
    candidate does between the values of an object (:func:`one_key_table`)."""
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
    slow = np.array([t for t in cand[~fast].tolist() if _ends_string(data[off[t]:off[t + 1]].tobytes())], np.int64)
    ns, nc = len(_ONE_KEY_STARTS), cand.shape[0]
    kone, kstart, klen, khash = (np.zeros((ns, nc), np.int64) for _ in range(4))
    pool = np.zeros(int((off[cand + 1] - off[cand]).sum()) * ns + 1, np.uint8)  # keys are bytes of the candidates
    npool = 0
    for s, (mode, fstate) in enumerate(_ONE_KEY_STARTS):
        npool = one_key_table(data, off, cand, mode, fstate, kone[s], kstart[s], klen[s], khash[s], pool, npool)
    tables = (cand, counts[cand].astype(np.int64), slow, counts[slow].astype(np.int64), fq_ptr, fq_tok, kone, kstart,
              klen, khash, pool[:max(npool, 1)].copy())
    if len(_TABLES) > 16:
        _TABLES.clear()
    _TABLES[key] = (vocab, tables)
    return tables


def _ends_string(b: bytes) -> bool:
    """Whether ``b``, fed inside a string with no escape pending, reaches an unescaped quote
    (the tracker's escapes: ``\\`` and one byte, or ``\\u`` and four)."""
    esc = 0
    for c in b:
        if esc == 0:
            if c == 0x22:
                return True
            esc = 1 if c == 0x5C else 0
        elif esc == 1:
            esc = 2 if c == 0x75 else 0
        else:
            esc = 0 if esc == 5 else esc + 1
    return False


def _clear(tr: Tracker, words, tables, tdata, toff) -> None:
    """Clear the duplicate-completing tokens from ``words`` (``tables``: :func:`_vocab_tables`)."""
    while clear_duplicates(words, *tables, tdata, toff, tr.hdr, tr.frames, tr.kbuf,
                           tr.kp_off, tr.kp_len, tr.kp_prev, tr.kp_hash, tr.kp_data, tr.shdr, tr.sframes,
                           tr.skbuf) == OVERFLOW:
        tr.grow()


class KeyGuardMatcher(Matcher):
    """``inner`` (any :class:`~structgen.Matcher` over a JSON grammar) with duplicate object keys
    rejected; see the module docstring.  With ``live_keys`` it also refuses tokens after which
    only used keys could follow (:mod:`.key_liveness`; ``inner`` must then implement
    :class:`~structgen.runtime.protocol.ByteStateView`).  It talks to ``inner`` only through
    those protocols.

    History: one :class:`~structgen.runtime.history.Step` per step, holding the tracker state
    after it and the bytes fed (``None`` for EOS); the inner matcher keeps its own, step for
    step.  Snapshots pair the guard's node with the inner matcher's snapshot; restoring one on
    another branch replays the tracker over the bytes from the shared node (the key pool
    above it may have been reused).
    """

    def __init__(self, inner: Matcher, vocab, live_keys: bool = False, *, _fork_of=None):
        self.inner = inner
        self._vocab = vocab
        # per-mask constants, looked up once
        self._tab = _vocab_tables(vocab)
        self._tdata = vocab.token_data
        self._toff = vocab.token_offsets
        # live_keys may be switched off later on a matcher built with it (tests compare both)
        self.live_keys = bool(live_keys)
        if _fork_of is not None:
            self._tr = _fork_of._tr.copy()
            self._node = _fork_of._node
            self._lineage = _fork_of._lineage
            self._live = None if _fork_of._live is None else _fork_of._live.fork(inner)
            return
        if self.live_keys and not isinstance(inner, ByteStateView):
            raise TypeError(f"live_keys needs an inner matcher that implements ByteStateView, "
                            f"not {type(inner).__name__}")
        self._tr = Tracker()
        self._node = hist.root(self._tr.save())
        self._lineage = object()
        self._live = LiveKeys(inner, vocab) if self.live_keys else None

    @property
    def vocab(self):
        return self._vocab

    def _checks_liveness(self) -> bool:
        return self.live_keys and self._live is not None

    # ------------------------------------------------------------------ history
    def reset(self) -> None:
        self.inner.reset()
        self._tr = Tracker()
        self._node = hist.root(self._tr.save())
        if self._live is not None:
            self._live.clear()

    def fork(self) -> "KeyGuardMatcher":
        return KeyGuardMatcher(self.inner.fork(), self._vocab, self.live_keys, _fork_of=self)

    def rollback(self, n: int = 1) -> None:
        if n < 0 or n > self._node.depth:
            raise ValueError(f"cannot roll back {n} tokens; {self._node.depth} were accepted")
        if n:
            self.inner.rollback(n)
            self._node = hist.ancestor(self._node, n)
            self._tr.restore(self._node.state)
            if self._live is not None:
                self._live.rolled_back(int(self._tr.hdr[NKEYS]), self._node.depth)

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
        for step in path:  # rewrite the key pool along the target's branch
            if step.data is not None and not tr.feed(step.data, 0, step.data.shape[0], step.parent.state):
                raise AssertionError("internal error: the key tracker refused bytes it accepted before")
        tr.restore(target.state)
        self._node = target
        if self._live is not None:
            self._live.rolled_back(int(shared.state[0][NKEYS]), shared.depth)

    # ------------------------------------------------------------------ steps
    def advance(self, token: int) -> bool:
        token = check_token(token)
        v = self._vocab
        node = self._node
        if not (0 <= token < v.logits_width) or not v.is_normal[token]:
            if not self.inner.advance(token):  # EOS (or a token no grammar accepts)
                return False
            self._node = node.child(node.state)
            return True
        if self.inner.is_terminated():
            return False
        off = v.token_offsets
        data = v.token_data[off[token]:off[token + 1]]
        fed = self._tr.feed(data, 0, data.shape[0], node.state)
        return self._commit(data, self.inner.advance(token) if fed else None)

    def advance_bytes(self, data: bytes) -> bool:
        if self.inner.is_terminated():
            return False
        data = bytes(data)
        arr = np.frombuffer(data, np.uint8)
        fed = self._tr.feed(arr, 0, arr.shape[0], self._node.state)
        return self._commit(arr, self.inner.advance_bytes(data) if fed else None)

    def _commit(self, data, inner_ok) -> bool:
        """After the tracker fed ``data`` (``inner_ok`` None: it refused) and the inner matcher
        advanced (``inner_ok``): keep the step, or undo both and return False."""
        pre = self._node.state
        if inner_ok is None:
            return False  # the tracker is back at ``pre`` already
        if inner_ok and self._checks_liveness() and self._live.refuses(self._tr, pre, data):
            self.inner.rollback(1)
            inner_ok = False
        if not inner_ok:
            self._tr.restore(pre)
            return False
        self._node = self._node.child(self._tr.save(), data)
        return True

    # ------------------------------------------------------------------ masks
    def _source(self):
        """``(words, fresh, live)``: the inner matcher's allowed tokens as uint32 words,
        whether that array is ours to modify, whether the guard applies (not terminated)."""
        words = self.inner.mask_words()
        return words, bool(words.flags.writeable), not self.inner.is_terminated()

    def mask_words(self) -> np.ndarray:
        """The allowed tokens as uint32 words (a fresh array)."""
        words, fresh, live = self._source()
        if not fresh:
            words = words.copy()
        if live:
            _clear(self._tr, words, self._tab, self._tdata, self._toff)
            if self._checks_liveness():
                self._live.prune(self._tr, self._node.depth, words)
        return words

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        row, dst = host_row(bitmask, row, self._vocab.logits_width)
        if dst is not None:
            # the inner mask written into the row, then guarded there (no temporary, no copy)
            self.inner.fill_bitmask(bitmask, row)
            if not self.inner.is_terminated():
                _clear(self._tr, dst, self._tab, self._tdata, self._toff)
                if self._checks_liveness():
                    self._live.prune(self._tr, self._node.depth, dst)
            return
        words, fresh, live = self._source()
        if live:
            if not fresh:
                words = words.copy()
            _clear(self._tr, words, self._tab, self._tdata, self._toff)
            if self._checks_liveness():
                self._live.prune(self._tr, self._node.depth, words)
        write_row(bitmask, row, words.view(np.int32))

    # ------------------------------------------------------------------ queries
    def is_accepting(self) -> bool:
        return self.inner.is_accepting()

    def is_terminated(self) -> bool:
        return self.inner.is_terminated()

    def forced_bytes(self) -> bytes:
        """The inner matcher's forced bytes, cut to the longest prefix the guard accepts (the
        guard only removes continuations, so what the grammar forces stays forced)."""
        return accepted_prefix(self, self.inner.forced_bytes())

    def forced_tokens(self, max_back_off: int = 4) -> list:
        """The inner matcher's forced tokens, cut before the first one the guard refuses."""
        toks = [int(t) for t in self.inner.forced_tokens(max_back_off)]
        return toks[:self.validate(toks)]

    def __repr__(self) -> str:
        return f"KeyGuardMatcher({self.inner!r}, tokens={self._node.depth})"
