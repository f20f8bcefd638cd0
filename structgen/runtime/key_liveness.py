"""LiveKeys: the key guard's liveness check for objects whose members repeat over a closed key set.

Under ``property_order="any"`` an object too large for the subset form repeats its members (see
:mod:`structgen.spec.property_order`), and the key guard drops tokens that complete a used key.
That alone could let a model start a key that only used keys complete -- ``{"name": 1, "na``
when no unused key starts with ``na`` -- or write a comma when every key is used.  With
``SchemaReport.live_keys`` the guard also refuses such tokens.

The check, for a key prefix ``P`` in the innermost object with used keys ``U``: ``P`` is *dead*
when every key the grammar allows after ``P`` is in ``U``.  The grammar is seen as a set of byte
automaton states at ``P`` -- the grammar engine's lexer states inside key lexemes, or the state
of a regular DFA -- and :func:`prefix_dead` searches the trie of the used keys below ``P``: a state
that steps on a byte leaving the trie (other than the quote closing a used key), that may end a
lexeme, or that reaches a cycle without a quote (infinitely many keys) makes ``P`` live.  Sound by
construction: a refused token has no valid continuation; a byte the search cannot judge (an
escape) counts as live.

Which tokens are checked (the same rule in the mask and in ``advance``, so a mask bit still says
whether ``advance`` takes the token): tokens without any of ``\\ { } [ ]`` that, from the current
state, end inside a key or after a comma of the innermost object, having completed no key of it
on the way (or one, when they started outside a key), where the object then holds a key.
Inside a key, those are the tokens that extend it along a used key (found by walking the token
trie along the used keys, :func:`prune_in_key`); elsewhere, the tokens with a ``"`` or ``,``
replayed by :func:`prune_landings`.  The automaton states at the start of a key (after its
opening quote) are found once per object and key set with a byte probe of the grammar.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .key_guard import (_DEPTH, _ESC, _HDR, _HIGH, _KEY_STR, _KLEN, _MODE, _NKEYS, _OBJ, _STRUCT, OK, OVERFLOW,
                        feed)

_QUOTE = 0x22
_UNCHECKED = frozenset(b"\\{}[]")  # a token with one of these bytes is never checked


# ----------------------------------------------------------------------------- kernels
@njit(cache=True, nogil=True)
def reaches_cycle(trans, bc, memo, s0, stack_s, stack_b):
    """1 when from state ``s0`` a path of non-quote bytes reaches a cycle (infinitely many key
    continuations), else 0.  ``memo`` (int8 per state: -1 unknown, -2 on the DFS stack, 0 / 1)
    keeps every answer the DFS finds; ``stack_*``: scratch of at least the number of states."""
    if memo[s0] >= 0:
        return memo[s0]
    top = 0
    stack_s[0] = s0
    stack_b[0] = 0
    memo[s0] = -2
    found = 0
    while top >= 0:
        s = stack_s[top]
        b = stack_b[top]
        pushed = False
        while b < 256 and found == 0:
            if b != _QUOTE:
                t = trans[s, bc[b]]
                if t >= 0:
                    m = memo[t]
                    if m == 1 or m == -2:  # known infinite, or a cycle back into the stack
                        found = 1
                    elif m == -1:
                        stack_b[top] = b + 1
                        top += 1
                        stack_s[top] = t
                        stack_b[top] = 0
                        memo[t] = -2
                        pushed = True
                        break
            b += 1
        if pushed:
            continue
        memo[s] = found  # found stays 1 on the way up: every node below reaches the cycle
        top -= 1
    return memo[s0]


@njit(cache=True, nogil=True)
def _live_state(trans, bc, acc, memo, s, stack_s, stack_b):
    return acc[s] != 0 or reaches_cycle(trans, bc, memo, s, stack_s, stack_b) == 1


@njit(cache=True, nogil=True)
def _byte_mask(trans, bc, bmask, s):
    """The bytes state ``s`` steps on, as 8 uint32 words (``bmask[s]``, computed once; word 8 of
    a row says it is done)."""
    if bmask[s, 8] == 0:
        for b in range(256):
            if trans[s, bc[b]] >= 0:
                bmask[s, b >> 5] |= np.uint32(1) << np.uint32(b & 31)
        bmask[s, 8] = 1
    return bmask[s]


@njit(cache=True, nogil=True)
def prefix_dead(trans, bc, acc, memo, bmask, states, n_states, pref, plen, kdata, koff, stack_s, stack_b):
    """True when every key the automaton allows after the key prefix ``pref[:plen]`` (its
    states: ``states[:n_states]``) is one of the used keys (``kdata[koff[i]:koff[i + 1]]``).
    Keys that do not extend the prefix play no part; a prefix of no used key is live."""
    for j in range(n_states):  # the common case first: a state with infinitely many keys
        if _live_state(trans, bc, acc, memo, states[j], stack_s, stack_b):
            return False
    nk = koff.shape[0] - 1
    cand = np.empty(nk, np.int64)
    nc = 0
    longest = 0
    for i in range(nk):
        lo, hi = koff[i], koff[i + 1]
        if hi - lo < plen:
            continue
        ok = True
        for j in range(plen):
            if kdata[lo + j] != pref[j]:
                ok = False
                break
        if ok:
            cand[nc] = i
            nc += 1
            longest = max(longest, hi - lo)
    if nc == 0 or n_states == 0:
        return False
    depth_max = longest - plen + 1
    width = n_states
    lvl_states = np.empty((depth_max, width), np.int64)
    lvl_cnt = np.zeros(depth_max, np.int64)
    lvl_along = np.zeros((depth_max, 256), np.uint8)
    lvl_next = np.zeros(depth_max, np.int64)
    path = np.empty(depth_max, np.uint8)
    union = np.zeros(8, np.uint32)
    for j in range(n_states):
        lvl_states[0, j] = states[j]
    lvl_cnt[0] = n_states
    lvl = 0
    entering = True
    while lvl >= 0:
        if entering:
            entering = False
            length = plen + lvl
            here = False
            for j in range(256):
                lvl_along[lvl, j] = 0
            for c in range(nc):
                lo, hi = koff[cand[c]], koff[cand[c] + 1]
                if hi - lo < length:
                    continue
                ok = True
                for j in range(lvl):
                    if kdata[lo + plen + j] != path[j]:
                        ok = False
                        break
                if not ok:
                    continue
                if hi - lo == length:
                    here = True
                else:
                    lvl_along[lvl, kdata[lo + length]] = 1
            for w in range(8):
                union[w] = 0
            for j in range(lvl_cnt[lvl]):
                s = lvl_states[lvl, j]
                if _live_state(trans, bc, acc, memo, s, stack_s, stack_b):
                    return False
                row = _byte_mask(trans, bc, bmask, s)
                for w in range(8):
                    union[w] |= row[w]
            if here:  # the quote that closes a used key
                union[_QUOTE >> 5] &= ~(np.uint32(1) << np.uint32(_QUOTE & 31))
            for b in range(256):
                if lvl_along[lvl, b]:
                    union[b >> 5] &= ~(np.uint32(1) << np.uint32(b & 31))
            for w in range(8):
                if union[w] != 0:
                    return False  # a byte that leaves the used keys
            lvl_next[lvl] = 0
        # the next child along a used key
        b = lvl_next[lvl]
        while b < 256 and lvl_along[lvl, b] == 0:
            b += 1
        if b >= 256:
            lvl -= 1
            continue
        lvl_next[lvl] = b + 1
        n2 = 0
        for j in range(lvl_cnt[lvl]):
            t = trans[lvl_states[lvl, j], bc[b]]
            if t >= 0:
                dup = False
                for k in range(n2):
                    if lvl_states[lvl + 1, k] == t:
                        dup = True
                        break
                if not dup:
                    lvl_states[lvl + 1, n2] = t
                    n2 += 1
        if n2 == 0:
            continue
        path[lvl] = b
        lvl_cnt[lvl + 1] = n2
        lvl += 1
        entering = True
    return True


@njit(cache=True, nogil=True)
def _step_states(trans, bc, src, n, b, dst):
    m = 0
    for j in range(n):
        t = trans[src[j], bc[b]]
        if t >= 0:
            dup = False
            for k in range(m):
                if dst[k] == t:
                    dup = True
                    break
            if not dup:
                dst[m] = t
                m += 1
    return m


@njit(cache=True, nogil=True)
def prune_in_key(words, states, n_states, q, qlen, kdata, koff, node_byte, node_end, tok_ptr, tok_ids, unchecked,
                 trans, bc, acc, memo, bmask, stack_s, stack_b):
    """Inside a key whose bytes so far are ``q[:qlen]`` (automaton states ``states``): clear
    from ``words`` the allowed tokens that extend it to a dead prefix along a used key (walking
    the token trie -- ``node_*``, ``tok_*`` -- along each used key that extends ``q``).  The
    number of bits cleared."""
    nk = koff.shape[0] - 1
    one = np.uint32(1)
    longest = 0
    for i in range(nk):
        longest = max(longest, koff[i + 1] - koff[i])
    if longest <= qlen:
        return 0  # no used key extends the key in progress
    pref = np.empty(longest + 1, np.uint8)
    for j in range(qlen):
        pref[j] = q[j]
    cur = np.empty((longest + 2, max(n_states, 1)), np.int64)
    cleared = 0
    prev = -1
    for i in range(nk):
        lo, hi = koff[i], koff[i + 1]
        if hi - lo <= qlen:
            continue
        ok = True
        for j in range(qlen):
            if kdata[lo + j] != q[j]:
                ok = False
                break
        if not ok:
            continue
        # bytes shared with the previous such key were checked with it (keys are sorted)
        shared = qlen
        if prev >= 0:
            plo, phi = koff[prev], koff[prev + 1]
            while shared < hi - lo and shared < phi - plo and kdata[lo + shared] == kdata[plo + shared]:
                shared += 1
        prev = i
        for j in range(n_states):
            cur[0, j] = states[j]
        ncur = n_states
        node = 0
        for j in range(qlen, hi - lo):
            b = kdata[lo + j]
            if b == _QUOTE or b == 0x5C:
                break  # written escaped: no raw token goes on along it
            c = node + 1
            found = -1
            while c < node_end[node]:
                if node_byte[c] == b:
                    found = c
                    break
                c = node_end[c]
            if found < 0:
                break
            node = found
            k = j - qlen
            ncur = _step_states(trans, bc, cur[k], ncur, b, cur[k + 1])
            if ncur == 0:
                break
            pref[j] = b
            if j < shared:
                continue
            live_toks = False
            for p in range(tok_ptr[node], tok_ptr[node + 1]):
                t = tok_ids[p]
                if unchecked[t] == 0 and words[t >> 5] & (one << np.uint32(t & 31)) != 0:
                    live_toks = True
                    break
            if not live_toks:
                continue
            if prefix_dead(trans, bc, acc, memo, bmask, cur[k + 1], ncur, pref, j + 1, kdata, koff, stack_s, stack_b):
                for p in range(tok_ptr[node], tok_ptr[node + 1]):
                    t = tok_ids[p]
                    w = t >> 5
                    bit = one << np.uint32(t & 31)
                    if unchecked[t] == 0 and words[w] & bit != 0:
                        words[w] = words[w] & ~bit
                        cleared += 1
    return cleared


@njit(cache=True, nogil=True)
def _with_key(kdata, koff, kp_data, lo, n):
    """The keys ``kdata``/``koff`` plus ``kp_data[lo:lo + n]``."""
    nk = koff.shape[0] - 1
    kd = np.empty(kdata.shape[0] + n, np.uint8)
    kd[:kdata.shape[0]] = kdata
    kd[kdata.shape[0]:] = kp_data[lo:lo + n]
    ko = np.empty(nk + 2, np.int64)
    ko[:nk + 1] = koff
    ko[nk + 1] = koff[nk] + n
    return kd, ko


@njit(cache=True, nogil=True)
def prune_landings(words, toks, tdata, toff, hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data, shdr,
                   sframes, skbuf, root, n_root, kdata, koff, trans, bc, acc, memo, bmask, stack_s, stack_b):
    """Replay the allowed tokens of ``toks`` (a bitmask of tokens with ``"`` or ``,``) and clear the ones
    that end after the innermost object's comma with every allowed key used, or inside a key
    at a dead prefix (``root``: the automaton states after a key's opening quote; a token that
    completes a key on the way is judged with that key added).  OK, or OVERFLOW (grow the
    tracker and call again)."""
    depth = hdr[_DEPTH]
    if depth == 0 or frames[depth - 1, 0] != _OBJ or n_root == 0:
        return OK
    head = frames[depth - 1, 2]
    one = np.uint32(1)
    empty_dead = -1  # dead("") for the object's own keys, once computed
    pref = np.empty(256, np.uint8)
    cur = np.empty(n_root, np.int64)
    nxt = np.empty(n_root, np.int64)
    for w in range(toks.shape[0]):  # the allowed tokens of the list, word by word
        x = words[w] & toks[w]
        while x != 0:
            low = x & (~x + one)  # the lowest set bit
            x = x & ~low
            k = 0
            while (low >> np.uint32(k)) != one:
                k += 1
            t = w * 32 + k
            bit = low
            for j in range(_HDR):
                shdr[j] = hdr[j]
            for d in range(depth):
                for c in range(frames.shape[1]):
                    sframes[d, c] = frames[d, c]
            for j in range(hdr[_KLEN]):
                skbuf[j] = kbuf[j]
            st = feed(tdata, toff[t], toff[t + 1], shdr, sframes, skbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data)
            if st == OVERFLOW:
                return OVERFLOW
            if st != OK or shdr[_DEPTH] != depth:
                continue
            in_key = shdr[_MODE] == _KEY_STR
            if not in_key and not (shdr[_MODE] == _STRUCT and sframes[depth - 1, 1] == 0):
                continue
            new = shdr[_NKEYS] - hdr[_NKEYS]
            kd, ko = kdata, koff
            if new == 1 and sframes[depth - 1, 2] == hdr[_NKEYS]:
                e = hdr[_NKEYS]  # the key this token completed, still in the pool
                kd, ko = _with_key(kdata, koff, kp_data, kp_off[e], kp_len[e])
            elif new != 0 or head < 0:
                continue
            if not in_key:
                if new == 0 and empty_dead >= 0:
                    dead = empty_dead == 1
                else:
                    dead = prefix_dead(trans, bc, acc, memo, bmask, root, n_root, pref, 0, kd, ko, stack_s, stack_b)
                    if new == 0:
                        empty_dead = 1 if dead else 0
            else:
                # the key opened in this token: its bytes after the last quote
                hi = toff[t + 1]
                q = hi - 1
                while tdata[q] != _QUOTE:
                    q -= 1
                plen = hi - q - 1
                if plen > 255:
                    continue
                for j in range(n_root):
                    cur[j] = root[j]
                nc = n_root
                for j in range(plen):
                    b = tdata[q + 1 + j]
                    pref[j] = b
                    nc = _step_states(trans, bc, cur, nc, b, nxt)
                    for k in range(nc):
                        cur[k] = nxt[k]
                dead = nc > 0 and prefix_dead(trans, bc, acc, memo, bmask, cur, nc, pref, plen, kd, ko, stack_s,
                                              stack_b)
            if dead:
                words[w] = words[w] & ~bit
    return OK


@njit(cache=True, nogil=True)
def allowed_ids(words, bits, out):
    """The ids of the tokens set in both ``words`` and ``bits`` (ascending) into ``out``; the count."""
    n = 0
    one = np.uint32(1)
    for w in range(bits.shape[0]):
        x = words[w] & bits[w]
        k = 0
        while x != 0:
            if x & one:
                out[n] = w * 32 + k
                n += 1
            x = x >> one
            k += 1
    return n


# ----------------------------------------------------------------------------- tables
_VOCAB: dict = {}


def vocab_tables(vocab):
    """Per vocabulary (cached): the normal tokens without any of ``\\ { } [ ]`` that contain
    ``,`` / ``"`` and ``,`` / ``"``, each as (int64 ids, uint32 bitmask words), and ``unchecked``
    (uint8 per token: 1 for tokens the check leaves alone)."""
    key = (id(vocab), vocab.fingerprint)
    hit = _VOCAB.get(key)
    if hit is not None and hit[0] is vocab:
        return hit[1]
    off = np.asarray(vocab.token_offsets, np.int64)
    data = np.asarray(vocab.token_data)
    width = int(vocab.logits_width)
    n = min(width, off.shape[0] - 1)
    normal = np.zeros(width, bool)
    normal[:n] = np.asarray(vocab.is_normal, bool)[:n]

    def has(byte):
        cs = np.concatenate([[0], np.cumsum(data == byte, dtype=np.int64)])
        out = np.zeros(width, bool)
        out[:n] = (cs[off[1:n + 1]] - cs[off[:n]]) > 0
        return out

    bad = np.zeros(width, bool)
    for b in _UNCHECKED:
        bad |= has(b)
    ok = normal & ~bad
    quote, comma = has(_QUOTE), has(0x2C)
    words = (width + 31) // 32
    lists = []
    for sel in (ok & comma, ok & quote & comma, ok & quote):
        ids = np.flatnonzero(sel).astype(np.int64)
        bits = np.zeros(words, np.uint32)
        np.bitwise_or.at(bits, ids >> 5, (np.uint32(1) << (ids & 31).astype(np.uint32)).astype(np.uint32))
        lists.append((ids, bits))
    tables = (*lists, (~ok).astype(np.uint8))
    if len(_VOCAB) > 16:
        _VOCAB.clear()
    _VOCAB[key] = (vocab, tables)
    return tables


_CYCLES: dict = {}


def _cycle_memo(trans):
    """The :func:`reaches_cycle` memo and :func:`_byte_mask` rows of a transition table (with
    DFS scratch), shared by every matcher over it."""
    hit = _CYCLES.get(id(trans))
    if hit is None or hit[0] is not trans:
        n = trans.shape[0]
        hit = (trans, np.full(n, -1, np.int8), np.zeros((n, 9), np.uint32), np.empty(n + 1, np.int64),
               np.empty(n + 1, np.int64))
        if len(_CYCLES) > 64:
            _CYCLES.clear()
        _CYCLES[id(trans)] = hit
    return hit[1:]


_IDENTITY = np.arange(256, dtype=np.int64)
_DFAS: dict = {}


def automaton(inner):
    """``(trans, bc, acc, states)``: the byte automaton behind ``inner`` and its states now."""
    tdfa = getattr(inner, "_tdfa", None)
    if tdfa is not None:  # a TokenDFAMatcher: its trimmed byte DFA (-1 = no way to accept)
        d = tdfa.dfa
        hit = _DFAS.get(id(d))
        if hit is None or hit[0] is not d:
            hit = (d, np.ascontiguousarray(d.transitions), np.asarray(d.byte_class, np.int64),
                   np.zeros(d.transitions.shape[0], np.uint8))  # no lexeme ends in a DFA
            if len(_DFAS) > 64:
                _DFAS.clear()
            _DFAS[id(d)] = hit
        s = int(inner.state)
        return hit[1], hit[2], hit[3], np.array([s] if s >= 0 else [], np.int64)
    tb = inner.engine.tables
    front = inner._front
    hit = getattr(inner, "_lex_states", None)
    if hit is None or hit[0] is not front:  # the frontier's lexer states, once per position
        hit = inner._lex_states = (front, np.unique(front[:, 0]).astype(np.int64))
    return tb.trans, _IDENTITY, tb.gacc, hit[1]


def states_after(inner, data: bytes):
    """The automaton states of ``inner`` after the raw bytes ``data`` (its own state is left as
    it is), or None when the grammar refuses them."""
    tdfa = getattr(inner, "_tdfa", None)
    if tdfa is not None:
        s = tdfa.dfa.walk(data, int(inner.state)) if data else int(inner.state)
        return np.array([s], np.int64) if s >= 0 else None
    if not data:
        return automaton(inner)[3]
    st, _, front, _ = inner._step(np.frombuffer(data, np.uint8))
    return np.unique(front[:, 0]).astype(np.int64) if st == 1 else None


_LAYOUTS = (b'"', b' "', b'\n"', b'\r\n"', b'\t"')


def key_start_states(inner, data: bytes):
    """The automaton states after ``data`` (a comma, with what came before it in its token),
    the whitespace the layout asks for and a key's opening quote; None when none is found."""
    for ws in _LAYOUTS:
        st = states_after(inner, data + ws)
        if st is not None:
            return st
    for n in range(1, 65):  # a pretty-printed layout: a newline and n spaces or tabs
        for pad in (b"\n" + b" " * n + b'"', b"\n" + b"\t" * n + b'"'):
            st = states_after(inner, data + pad)
            if st is not None:
                return st
    return None


class LiveKeys:
    """The liveness check of one :class:`~structgen.runtime.key_guard.KeyGuardMatcher`
    (its state: per-object key lists and key-start automaton states, dropped on rollback)."""

    def __init__(self, guard, memo=None):
        self.g = guard
        self.tables = vocab_tables(guard.vocab)
        self.memo: dict = {} if memo is None else memo

    def fork(self, guard) -> "LiveKeys":
        return LiveKeys(guard, dict(self.memo))

    def clear(self) -> None:
        self.memo.clear()

    def rolled_back(self) -> None:
        """Drop what named keys or positions past the guard's restored state (pool indices and
        positions are reused from there on)."""
        nkeys = int(self.g._tr.hdr[_NKEYS])
        pos = len(self.g._history)

        def valid(k):
            if k[0] == "R0":
                return k[2] < pos
            head = k[1] if k[0] == "K" else k[2]
            if head <= -2:
                head = -2 - head
            return head < nkeys

        for k in [k for k in self.memo if not valid(k)]:
            del self.memo[k]

    # ------------------------------------------------------------------ used keys
    def _keys(self, head: int, extra=None):
        """``(kdata, koff)``: the keys of the object whose newest key is ``head`` (pool index;
        -1: none) plus ``extra``, sorted."""
        k = ("K", head, extra)
        hit = self.memo.get(k)
        if hit is None:
            tr = self.g._tr
            keys, e = [], head
            while e >= 0:
                o = int(tr.kp_off[e])
                keys.append(tr.kp_data[o:o + int(tr.kp_len[e])].tobytes())
                e = int(tr.kp_prev[e])
            if extra is not None:
                keys.append(extra)
            keys.sort()
            koff = np.zeros(len(keys) + 1, np.int64)
            np.cumsum([len(x) for x in keys], out=koff[1:])
            kdata = np.frombuffer(b"".join(keys), np.uint8) if keys else np.zeros(0, np.uint8)
            hit = self.memo[k] = (kdata, koff)
        return hit

    def _root(self, k, make):
        """The automaton states after the opening quote of the object's next key (memoised under
        ``k`` once found; ``make()`` finds them, or None)."""
        hit = self.memo.get(k)
        if hit is None:
            hit = make()
            if hit is not None:
                self.memo[k] = hit
        return hit

    def _dead(self, inner_states, prefix: bytes, kdata, koff) -> bool:
        trans, bc, acc, _ = automaton(self.g.inner)
        memo, bmask, ss, sb = _cycle_memo(trans)
        pref = np.frombuffer(prefix, np.uint8) if prefix else np.zeros(1, np.uint8)
        return bool(prefix_dead(trans, bc, acc, memo, bmask, inner_states, inner_states.shape[0], pref, len(prefix),
                                kdata, koff, ss, sb))

    # ------------------------------------------------------------------ advance
    def refuses(self, pre, data) -> bool:
        """Whether the token (or bytes) ``data`` just accepted from tracker snapshot ``pre``
        must be refused (the inner matcher and the tracker are already past it)."""
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
        g = self.g
        tr = g._tr
        head = int(f[d - 1, 2])
        if tr.hdr[_DEPTH] != d:
            return False
        new = int(tr.hdr[_NKEYS] - h[_NKEYS])
        extra = None
        if new == 0:
            if head < 0:
                return False
        elif new == 1 and tr.frames[d - 1, 2] == h[_NKEYS]:
            e = int(h[_NKEYS])
            o = int(tr.kp_off[e])
            extra = tr.kp_data[o:o + int(tr.kp_len[e])].tobytes()
            if mode == _KEY_STR:
                # as the mask does: only with the key-start states found before this key began
                root = self.memo.get(("R", d, head, None)) if head >= 0 else None
                if root is None or root.shape[0] == 0:
                    return False
        else:
            return False
        kdata, koff = self._keys(head, extra)
        if tr.hdr[_MODE] == _KEY_STR:
            prefix = tr.kbuf[:tr.hdr[_KLEN]].tobytes()
            return self._dead(automaton(g.inner)[3], prefix, kdata, koff)
        if tr.hdr[_MODE] == _STRUCT and tr.frames[d - 1, 1] == 0:
            k = ("R", d, head if head >= 0 else -2 - int(h[_NKEYS]), extra)
            root = self._root(k, lambda: key_start_states(g.inner, b""))
            return root is not None and root.shape[0] > 0 and self._dead(root, b"", kdata, koff)
        return False

    # ------------------------------------------------------------------ mask
    def prune(self, words) -> None:
        """Clear from ``words`` (the guarded mask, uint32) the tokens :meth:`refuses` refuses."""
        g = self.g
        tr = g._tr
        h = tr.hdr
        d = int(h[_DEPTH])
        if d == 0 or tr.frames[d - 1, 0] != _OBJ:
            return
        head = int(tr.frames[d - 1, 2])
        mode = int(h[_MODE])
        with_comma, quote_comma, with_quote, unchecked = self.tables
        trans, bc, acc, states = automaton(g.inner)
        memo, bmask, ss, sb = _cycle_memo(trans)
        kdata, koff = self._keys(head)
        root = None
        if mode == _KEY_STR:
            if h[_ESC] or h[_HIGH]:
                return
            if head >= 0:
                trie = g.vocab.trie
                q = tr.kbuf[:max(int(h[_KLEN]), 1)].copy()
                prune_in_key(words, states, states.shape[0], q, int(h[_KLEN]), kdata, koff, trie.node_byte,
                             trie.node_end, trie.tok_ptr, trie.tok_ids, unchecked, trans, bc, acc, memo, bmask, ss, sb)
            toks = with_quote  # only tokens that complete this key can reach the next one
            root = self.memo.get(("R", d, head, None)) if head >= 0 else None  # found before the key began
        else:
            # tokens that can reach the object's next key from here: a quote after its comma,
            # else a comma (and, from inside a string, the quote that ends it)
            if mode == _STRUCT:
                toks = with_quote if tr.frames[d - 1, 1] == 0 else with_comma
            else:
                toks = quote_comma
            # memoised per key set; an object without keys yet, per position
            k = ("R", d, head, None) if head >= 0 else ("R0", d, len(g._history))
            root = self._root(k, lambda: self._root_states(words, toks))
        if root is None or root.shape[0] == 0:
            return  # no token of the object reaches a key from here, or none was found: all live
        while prune_landings(words, toks[1], g._tdata, g._toff, h, tr.frames, tr.kbuf, tr.kp_off, tr.kp_len,
                             tr.kp_prev, tr.kp_hash, tr.kp_data, tr.shdr, tr.sframes, tr.skbuf, root, root.shape[0],
                             kdata, koff, trans, bc, acc, memo, bmask, ss, sb) == OVERFLOW:
            tr.grow()

    def _root_states(self, words, toks):
        """The automaton states after the opening quote of the next key, reached through an
        allowed token of ``toks`` that opens a key (else one that ends after a comma); None
        when no allowed token does either."""
        g = self.g
        tr = g._tr
        h = tr.hdr
        d = int(h[_DEPTH])
        off, data = g._toff, g._tdata
        ids, bits = toks
        out = np.empty(ids.shape[0], np.int64)
        n = allowed_ids(words, bits, out)
        comma = None
        for t in out[:n].tolist():
            tr.shdr[:] = h
            tr.sframes[:d] = tr.frames[:d]
            tr.skbuf[:h[_KLEN]] = tr.kbuf[:h[_KLEN]]
            st = feed(data, off[t], off[t + 1], tr.shdr, tr.sframes, tr.skbuf, tr.kp_off, tr.kp_len, tr.kp_prev,
                      tr.kp_hash, tr.kp_data)
            if st != OK or tr.shdr[_DEPTH] != d or tr.shdr[_NKEYS] != h[_NKEYS]:
                continue
            raw = data[off[t]:off[t + 1]].tobytes()
            if tr.shdr[_MODE] == _KEY_STR:
                found = states_after(g.inner, raw[:raw.rindex(b'"') + 1])
                if found is not None:
                    return found
            elif comma is None and tr.shdr[_MODE] == _STRUCT and tr.sframes[d - 1, 1] == 0:
                comma = raw
        return key_start_states(g.inner, comma) if comma is not None else None
