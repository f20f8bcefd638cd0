"""Dead key prefixes: whether every key a byte automaton allows after a key prefix is a used key.

The searches of :mod:`.key_liveness` (the module docstring there says what is checked and why),
as Numba kernels over a transition table ``trans[state, byte_class[b]]`` (-1: no edge), the
states' lexeme-end flags ``acc`` and the used keys of one object, sorted, as bytes end to end
(``kdata``, offsets ``koff``).  Answers that depend on the table alone (which states reach a
cycle, which bytes a state steps on) are kept in arrays shared by every matcher over the table
(:func:`cycle_memo`).
"""
from __future__ import annotations

import numpy as np
from numba import njit

QUOTE = 0x22


@njit(cache=True, nogil=True)
def reaches_cycle(trans, bc, memo, s0, stack_s, stack_b, limit):
    """``(answer, states explored)``: answer 1 when from state ``s0`` a path of non-quote bytes
    reaches a cycle (infinitely many key continuations), 0 when none does, -1 when the search
    would explore more than ``limit`` new states (a long acyclic region: a bounded string of
    99,000 states took 46 ms).  ``memo`` (int8 per state: -1 unknown, -2 on the DFS stack,
    0 / 1) keeps every answer the DFS finds, a cut search's too (its stack goes back to unknown);
    ``stack_*``: scratch of at least the number of states."""
    if memo[s0] >= 0:
        return memo[s0], 0
    if limit < 1:
        return -1, 0
    top = 0
    stack_s[0] = s0
    stack_b[0] = 0
    memo[s0] = -2
    found = 0
    explored = 1
    while top >= 0:
        s = stack_s[top]
        b = stack_b[top]
        pushed = False
        while b < 256 and found == 0:
            if b != QUOTE:
                t = trans[s, bc[b]]
                if t >= 0:
                    m = memo[t]
                    if m == 1 or m == -2:  # known infinite, or a cycle back into the stack
                        found = 1
                    elif m == -1:
                        if explored >= limit:
                            for i in range(top + 1):
                                memo[stack_s[i]] = -1
                            return -1, explored
                        explored += 1
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
    return memo[s0], explored


@njit(cache=True, nogil=True)
def _live_state(trans, bc, acc, memo, s, stack_s, stack_b):
    return acc[s] != 0 or reaches_cycle(trans, bc, memo, s, stack_s, stack_b, trans.shape[0] + 1)[0] == 1


@njit(cache=True, nogil=True)
def byte_mask(trans, bc, bmask, s):
    """The bytes state ``s`` steps on, as 8 uint32 words (``bmask[s]``, computed once; word 8 of
    a row says it is done)."""
    if bmask[s, 8] == 0:
        for b in range(256):
            if trans[s, bc[b]] >= 0:
                bmask[s, b >> 5] |= np.uint32(1) << np.uint32(b & 31)
        bmask[s, 8] = 1
    return bmask[s]


@njit(cache=True, nogil=True)
def key_has(kdata, koff, i, at, src, src_lo, n):
    """Whether used key ``i`` has the ``n`` bytes ``src[src_lo:src_lo + n]`` at offset ``at``."""
    lo = koff[i]
    if koff[i + 1] - lo < at + n:
        return False
    for j in range(n):
        if kdata[lo + at + j] != src[src_lo + j]:
            return False
    return True


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
        if key_has(kdata, koff, i, 0, pref, 0, plen):
            cand[nc] = i
            nc += 1
            longest = max(longest, koff[i + 1] - koff[i])
    if nc == 0 or n_states == 0:
        return False
    depth_max = longest - plen + 1
    width = n_states
    lvl_states = np.empty((depth_max, width), np.int64)
    lvl_cnt = np.zeros(depth_max, np.int64)
    # the used keys along the path at each level (those of the level above with the byte taken):
    # a node costs its own keys, not every key times the path's length
    lvl_keys = np.empty((depth_max, nc), np.int64)
    lvl_nk = np.zeros(depth_max, np.int64)
    for c in range(nc):
        lvl_keys[0, c] = cand[c]
    lvl_nk[0] = nc
    lvl_along = np.zeros((depth_max, 8), np.uint32)  # the bytes along used keys, as bits
    lvl_next = np.zeros(depth_max, np.int64)
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
            for w in range(8):
                lvl_along[lvl, w] = 0
            for c in range(lvl_nk[lvl]):
                lo, hi = koff[lvl_keys[lvl, c]], koff[lvl_keys[lvl, c] + 1]
                if hi - lo == length:
                    here = True
                else:
                    x = kdata[lo + length]
                    lvl_along[lvl, x >> 5] |= np.uint32(1) << np.uint32(x & 31)
            for w in range(8):
                union[w] = 0
            for j in range(lvl_cnt[lvl]):
                s = lvl_states[lvl, j]
                if _live_state(trans, bc, acc, memo, s, stack_s, stack_b):
                    return False
                row = byte_mask(trans, bc, bmask, s)
                for w in range(8):
                    union[w] |= row[w]
            if here:  # the quote that closes a used key
                union[QUOTE >> 5] &= ~(np.uint32(1) << np.uint32(QUOTE & 31))
            for w in range(8):
                union[w] &= ~lvl_along[lvl, w]
                if union[w] != 0:
                    return False  # a byte that leaves the used keys
            lvl_next[lvl] = 0
        # the next child along a used key
        b = lvl_next[lvl]
        while b < 256:
            x = lvl_along[lvl, b >> 5] >> np.uint32(b & 31)
            if x == 0:
                b = (b | 31) + 1   # nothing more in this word
            elif x & 1:
                break
            else:
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
        lvl_cnt[lvl + 1] = n2
        at = plen + lvl
        m = 0
        for c in range(lvl_nk[lvl]):
            i = lvl_keys[lvl, c]
            if koff[i + 1] - koff[i] > at and kdata[koff[i] + at] == b:
                lvl_keys[lvl + 1, m] = i
                m += 1
        lvl_nk[lvl + 1] = m
        lvl += 1
        entering = True
    return True


@njit(cache=True, nogil=True)
def step_states(trans, bc, src, n, b, dst):
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
        if hi - lo <= qlen or not key_has(kdata, koff, i, 0, q, 0, qlen):
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
            if b == QUOTE or b == 0x5C:
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
            ncur = step_states(trans, bc, cur[k], ncur, b, cur[k + 1])
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


_CYCLES: dict = {}


def cycle_memo(trans):
    """The :func:`reaches_cycle` memo and :func:`byte_mask` rows of a transition table (with
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
