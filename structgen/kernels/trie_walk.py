"""Walks of the DFS-flattened token trie driven by a byte DFA.

The trie (see :class:`structgen.vocab.TokenTrie`) is stored in preorder: node ``i``
has byte ``node_byte[i]`` at depth ``node_depth[i]`` and its subtree ends before
``node_end[i]``.  A walk keeps the DFA state reached at every depth on a small
stack; a dead byte skips the node's whole subtree, so a state that allows few
bytes costs about one step per child of the root, and a state that allows
everything costs one step per trie node.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def walk_state(trans, node_class, start, node_depth, node_end, tok_ptr, tok_ids,
               stack, mask_words, out_tok, out_next):
    """Allowed tokens from DFA state ``start``.

    Sets bit ``t`` of ``mask_words`` (uint32, zeroed by the caller) for every
    token ``t`` whose bytes keep the DFA alive, and, when ``out_tok`` is not
    empty, writes the tokens and the states they lead to into ``out_tok`` /
    ``out_next``.  Returns the number of allowed tokens.  ``node_class`` is
    ``byte_class[node_byte]``, precomputed once per DFA.
    """
    n = node_depth.shape[0]
    record = out_tok.shape[0] > 0
    stack[0] = start
    count = 0
    i = 1
    while i < n:
        d = node_depth[i]
        ns = trans[stack[d - 1], node_class[i]]
        if ns < 0:
            i = node_end[i]
            continue
        stack[d] = ns
        for k in range(tok_ptr[i], tok_ptr[i + 1]):
            t = tok_ids[k]
            mask_words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
            if record:
                out_tok[count] = t
                out_next[count] = ns
            count += 1
        i += 1
    return count


@njit(cache=True, nogil=True)
def walk_bytes(trans, byte_class, state, data, lo, hi):
    """The DFA state after ``data[lo:hi]`` from ``state``; -1 once dead."""
    s = state
    for k in range(lo, hi):
        if s < 0:
            return -1
        s = trans[s, byte_class[data[k]]]
    return s


@njit(cache=True, nogil=True)
def walk_tokens(trans, byte_class, state, token_data, token_offsets, tokens, usable):
    """Advance through ``tokens`` one by one.

    Returns ``(n, s)``: the number of leading tokens that keep the DFA alive
    (stopping at the first token that is not ``usable`` or kills it) and the
    state after those ``n`` tokens.
    """
    s = state
    n = 0
    for j in range(tokens.shape[0]):
        t = tokens[j]
        if t < 0 or t >= usable.shape[0] or not usable[t]:
            break
        s2 = s
        for k in range(token_offsets[t], token_offsets[t + 1]):
            s2 = trans[s2, byte_class[token_data[k]]]
            if s2 < 0:
                break
        if s2 < 0:
            break
        s = s2
        n += 1
    return n, s


@njit(cache=True, nogil=True)
def token_crosses(trans, byte_class, state, rest, node_byte, node_depth, node_end,
                  tok_ptr, stack):
    """True when some token that the DFA allows from ``state`` starts with ``rest``
    and is strictly longer than it (it would straddle the end of ``rest``)."""
    n = node_depth.shape[0]
    # Follow `rest` down the trie: children of a node are the following nodes
    # of depth + 1, found by hopping over sibling subtrees.
    node = 0
    s = state
    for k in range(rest.shape[0]):
        b = rest[k]
        child = node + 1
        end = node_end[node]
        found = -1
        while child < end:
            if node_byte[child] == b:
                found = child
                break
            child = node_end[child]
        if found < 0:
            return False
        s = trans[s, byte_class[b]]
        if s < 0:
            return False
        node = found
    # Any token strictly below `node` that stays alive?
    base = node_depth[node]
    stack[base] = s
    i = node + 1
    end = node_end[node]
    while i < end:
        d = node_depth[i]
        ns = trans[stack[d - 1], byte_class[node_byte[i]]]
        if ns < 0:
            i = node_end[i]
            continue
        stack[d] = ns
        if tok_ptr[i + 1] > tok_ptr[i]:
            return True
        i += 1
    return False


@njit(cache=True, nogil=True)
def walk_states(trans, node_class, starts, node_depth, node_end, tok_ptr, tok_ids,
                stack, out_tok, out_next, counts):
    """:func:`walk_state` for several start states in one pass over the trie.

    Row ``k`` of ``out_tok`` / ``out_next`` receives the allowed tokens of
    ``starts[k]`` and their next states; ``counts[k]`` how many.  A subtree is
    skipped once every state is dead in it, so states with similar rows share
    the cost of the walk.  ``stack`` is int32 ``[max_depth + 2, K]``.
    """
    n = node_depth.shape[0]
    K = starts.shape[0]
    for k in range(K):
        stack[0, k] = starts[k]
        counts[k] = 0
    i = 1
    while i < n:
        d = node_depth[i]
        c = node_class[i]
        alive = False
        for k in range(K):
            s = stack[d - 1, k]
            ns = trans[s, c] if s >= 0 else -1
            stack[d, k] = ns
            if ns >= 0:
                alive = True
        if not alive:
            i = node_end[i]
            continue
        lo = tok_ptr[i]
        hi = tok_ptr[i + 1]
        if hi > lo:
            for k in range(K):
                ns = stack[d, k]
                if ns >= 0:
                    m = counts[k]
                    for j in range(lo, hi):
                        out_tok[k, m] = tok_ids[j]
                        out_next[k, m] = ns
                        m += 1
                    counts[k] = m
        i += 1
