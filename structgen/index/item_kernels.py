"""Numba kernels of :class:`~structgen.index.items.ItemIndex` (the node layout is described
there): flattening and checking the items, sorting them (packed keys, LSD radix sort), the
breadth-first node arrays, and the per-step gathers.  Every kernel is one pass (or a fixed
number of passes) over its arrays: no Python loop over items or nodes.

May import: nothing of structgen.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["flatten_padded", "first_bad_token", "pack_keys", "radix_sort_keys", "unpack_distinct",
           "lcp_and_depths", "build_nodes", "spell", "item_ranges", "max_branch", "child", "walk", "dense_rows", "child_dense", "walk_dense", "head_words", "gather", "gather_ragged", "paths"]


@njit(cache=True, nogil=True)
def flatten_padded(arr, vocab_size, eos_id):
    """A padded 2-D item array (negative entries trail as padding) as flat int32 tokens and
    int64 offsets, checked in the same pass.  Returns ``(data, off, code, row, value)``:
    ``code`` 0 = fine; 1 = row ``row`` has a non-negative entry after padding; 2 = row
    ``row`` has token ``value`` outside ``[0, vocab_size)``; 3 = row ``row`` contains
    ``eos_id`` (``eos_id < 0``: no check)."""
    n, L = arr.shape
    off = np.zeros(n + 1, np.int64)
    for i in range(n):
        k = 0
        while k < L and arr[i, k] >= 0:
            t = arr[i, k]
            if t >= vocab_size:
                return np.zeros(0, np.int32), off, 2, i, np.int64(t)
            if t == eos_id:
                return np.zeros(0, np.int32), off, 3, i, np.int64(t)
            k += 1
        for j in range(k, L):
            if arr[i, j] >= 0:
                return np.zeros(0, np.int32), off, 1, i, np.int64(arr[i, j])
        off[i + 1] = off[i] + k
    data = np.empty(off[n], np.int32)
    for i in range(n):
        a = off[i]
        for j in range(off[i + 1] - a):
            data[a + j] = arr[i, j]
    return data, off, 0, -1, np.int64(0)


@njit(cache=True, nogil=True)
def first_bad_token(data, vocab_size, eos_id):
    """The first position of ``data`` holding a token outside ``[0, vocab_size)`` or equal
    to ``eos_id`` (``eos_id < 0``: no EOS check), or -1."""
    for i in range(data.size):
        t = data[i]
        if t < 0 or t >= vocab_size or t == eos_id:
            return i
    return -1


@njit(cache=True, nogil=True)
def radix_sort_keys(keys):
    """The rows of ``keys`` (uint64 ``[n, words]``) sorted lexicographically: LSD radix sort
    on 16-bit digits, least significant word first, whole rows moved so that every pass reads
    sequentially; a digit equal in every row is skipped.  ``keys`` is used as scratch."""
    n, words = keys.shape
    cur = keys
    nxt = np.empty_like(cur)
    count = np.empty(65537, np.int64)
    for w in range(words - 1, -1, -1):
        for dgt in range(4):
            shift = np.uint64(16 * dgt)
            count[:] = 0
            for i in range(n):
                count[((cur[i, w] >> shift) & np.uint64(0xFFFF)) + 1] += 1
            if count.max() == n:
                continue
            for k in range(65536):
                count[k + 1] += count[k]
            for i in range(n):
                d = (cur[i, w] >> shift) & np.uint64(0xFFFF)
                j = count[d]
                count[d] = j + 1
                for x in range(words):
                    nxt[j, x] = cur[i, x]
            cur, nxt = nxt, cur
    return cur


@njit(cache=True, nogil=True)
def unpack_distinct(keys, bits, per_word, total, max_len):
    """Sorted packed keys (see :func:`pack_keys`) back to distinct items, in one sequential
    pass: flat int32 tokens, int64 offsets, each item's longest common prefix with the previous
    one, the number of new trie nodes per depth (``count[d]``, d = 1..max_len) and the longest
    length.  ``total`` / ``max_len`` bound the tokens and the length (the input's)."""
    n, words = keys.shape
    data = np.empty(total, np.int32)
    off = np.zeros(n + 1, np.int64)
    lcp = np.zeros(n, np.int64)
    count = np.zeros(max_len + 2, np.int64)
    mask = np.uint64((1 << bits) - 1)
    m = 0
    pos = 0
    longest = 0
    for i in range(n):
        if i > 0:
            same = True
            for w in range(words):
                if keys[i, w] != keys[i - 1, w]:
                    same = False
                    break
            if same:
                continue
        a0 = pos
        for w in range(words):
            kw = keys[i, w]
            if kw == 0:
                break
            for s in range(per_word):
                t = (kw >> np.uint64(bits * (per_word - 1 - s))) & mask
                if t == 0:
                    break
                data[pos] = np.int32(t - 1)
                pos += 1
        ln = pos - a0
        k = 0
        if m > 0:
            b0 = off[m - 1]
            mm = min(ln, a0 - b0)
            while k < mm and data[a0 + k] == data[b0 + k]:
                k += 1
        lcp[m] = k
        for d in range(k + 1, ln + 1):
            count[d] += 1
        if ln > longest:
            longest = ln
        m += 1
        off[m] = pos
    return data[:pos], off[:m + 1], lcp[:m], count, longest


@njit(cache=True, nogil=True)
def build_nodes(data, off, lcp, depth_start, n_nodes, max_len, ptr_dtype):
    """Breadth-first node arrays ``(token, indptr, terminal)`` from sorted, distinct items.

    The children of the nodes of one depth are created in their parents' order, so the CSR
    row pointers are the prefix sums of the per-node child counts (counted in the same pass;
    no parent array)."""
    n = off.size - 1
    token = np.empty(n_nodes, np.int32)
    token[0] = -1
    terminal = np.zeros(n_nodes, np.bool_)
    indptr = np.zeros(n_nodes + 1, ptr_dtype)
    nxt = depth_start[:-1].copy()          # next free id per depth
    cur = np.zeros(max_len + 1, np.int64)  # the current path's node per depth (cur[0] = root)
    for i in range(n):
        a0 = off[i]
        ln = off[i + 1] - a0
        for d in range(lcp[i] + 1, ln + 1):
            v = nxt[d]
            nxt[d] += 1
            token[v] = data[a0 + d - 1]
            indptr[cur[d - 1] + 1] += 1
            cur[d] = v
        terminal[cur[ln]] = True
    indptr[0] = 1
    for p in range(1, n_nodes + 1):
        indptr[p] += indptr[p - 1]
    return token, indptr, terminal


@njit(cache=True, nogil=True)
def lcp_and_depths(data, off):
    """Per sorted item: the longest common prefix with the previous item, and the number of
    new nodes per depth (``count[d]``, d = 1..max_len)."""
    n = off.size - 1
    lcp = np.zeros(n, np.int64)
    max_len = 0
    for i in range(n):
        ln = off[i + 1] - off[i]
        if ln > max_len:
            max_len = ln
    count = np.zeros(max_len + 2, np.int64)
    for i in range(n):
        a0, a1 = off[i], off[i + 1]
        k = 0
        if i > 0:
            b0, b1 = off[i - 1], off[i]
            m = min(a1 - a0, b1 - b0)
            while k < m and data[a0 + k] == data[b0 + k]:
                k += 1
        lcp[i] = k
        for d in range(k + 1, a1 - a0 + 1):
            count[d] += 1
    return lcp, count, max_len


@njit(cache=True, nogil=True)
def item_ranges(indptr, terminal):
    """``item_lo``/``item_hi`` of every node: terminal counts summed over subtrees (children
    have larger ids than their parent), then offsets in child order."""
    n = terminal.size
    cnt = np.zeros(n, np.int64)
    for v in range(n - 1, -1, -1):
        c = np.int64(terminal[v])
        for e in range(indptr[v], indptr[v + 1]):
            c += cnt[e]
        cnt[v] = c
    lo = np.zeros(n, np.int64)
    for v in range(n):
        at = lo[v] + np.int64(terminal[v])
        for e in range(indptr[v], indptr[v + 1]):
            lo[e] = at
            at += cnt[e]
    return lo, lo + cnt


@njit(cache=True, nogil=True)
def max_branch(indptr, depth_start):
    D = depth_start.size - 1
    out = np.zeros(D, np.int64)
    for d in range(D):
        m = 0
        for v in range(depth_start[d], depth_start[d + 1]):
            k = indptr[v + 1] - indptr[v]
            if k > m:
                m = k
        out[d] = m
    return out


@njit(cache=True, nogil=True)
def child(token, indptr, node, t):
    """The child of ``node`` along token ``t`` (binary search in its row), or -1."""
    lo, hi = indptr[node], indptr[node + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        if token[mid] < t:
            lo = mid + 1
        else:
            hi = mid
    if lo < indptr[node + 1] and token[lo] == t:
        return lo
    return -1


@njit(cache=True, nogil=True)
def walk(token, indptr, prefix):
    node = 0
    for t in prefix:
        node = child(token, indptr, node, t)
        if node < 0:
            return -1
    return node


@njit(cache=True, nogil=True)
def head_words(token, indptr, terminal):
    """Per node one int64 *head word* for :func:`gather`: the first child id ``indptr[v]``
    (bits 0-31), the token on that child's edge (bits 32-62; 0 when there is none) and the
    terminal flag (bit 63); entry ``n_nodes`` holds ``indptr[n_nodes]``, so a node's child count
    is the difference of two neighbouring words' low halves.  The caller checks that the ids fit
    in 32 bits."""
    n = terminal.size
    head = np.empty(n + 1, np.int64)
    for v in range(n):
        s = np.int64(indptr[v])
        t0 = np.int64(token[s]) if indptr[v + 1] > s else np.int64(0)
        head[v] = s | (t0 << 32) | (np.int64(terminal[v]) << 63)
    head[n] = np.int64(indptr[n])
    return head


@njit(cache=True, nogil=True)
def gather(head, token, nodes, eos_id, out_tok, out_child):
    """Rows of allowed (token, child) pairs for each node, padded with -1 to the width of
    ``out_tok``; a terminal node gets ``(eos_id, -1)`` after its children when ``eos_id >= 0``.

    One random read per node in the common case: its head word and the next one (see
    :func:`head_words`) give the row, the first child's token and the terminal flag, and
    ``token`` is read only for the second child on."""
    width = out_tok.shape[1]
    for b in range(nodes.size):
        v = nodes[b]
        k = 0
        if v >= 0:
            x = head[v]
            s = x & 0xFFFFFFFF
            c = (head[v + 1] & 0xFFFFFFFF) - s
            if c > 0 and width > 0:
                out_tok[b, 0] = (x >> 32) & 0x7FFFFFFF
                out_child[b, 0] = s
                k = 1
                while k < c and k < width:
                    out_tok[b, k] = token[s + k]
                    out_child[b, k] = s + k
                    k += 1
            if x < 0 and eos_id >= 0 and k < width:
                out_tok[b, k] = eos_id
                out_child[b, k] = -1
                k += 1
        while k < width:
            out_tok[b, k] = -1
            out_child[b, k] = -1
            k += 1


@njit(cache=True, nogil=True)
def gather_ragged(head, token, nodes, eos_id, offsets, out_tok, out_child):
    """:func:`gather` without padding: node ``b``'s allowed (token, child) pairs are
    ``out_tok[offsets[b]:offsets[b + 1]]`` / ``out_child[...]`` (EOS last, child -1; a node of -1
    gets an empty row).  Returns the number of pairs; when it exceeds the buffers' length only
    ``offsets`` is complete (call again with buffers that long)."""
    cap = out_tok.shape[0]
    pos = 0
    offsets[0] = 0
    for b in range(nodes.size):
        v = nodes[b]
        if v >= 0:
            x = head[v]
            s = x & 0xFFFFFFFF
            c = (head[v + 1] & 0xFFFFFFFF) - s
            if pos + c <= cap:
                if c > 0:
                    out_tok[pos] = (x >> 32) & 0x7FFFFFFF
                    out_child[pos] = s
                for k in range(1, c):
                    out_tok[pos + k] = token[s + k]
                    out_child[pos + k] = s + k
            pos += c
            if x < 0 and eos_id >= 0:
                if pos < cap:
                    out_tok[pos] = eos_id
                    out_child[pos] = -1
                pos += 1
        offsets[b + 1] = pos
    return pos


@njit(cache=True, nogil=True)
def paths(token, indptr, n_nodes, depth_start, terminal):
    """Every item back as (flat tokens, offsets), in sorted order (a DFS over the rows)."""
    n_items = 0
    total = 0
    for v in range(n_nodes):
        if terminal[v]:
            n_items += 1
    depth = np.zeros(n_nodes, np.int64)
    for d in range(depth_start.size - 1):
        for v in range(depth_start[d], depth_start[d + 1]):
            depth[v] = d
            if terminal[v]:
                total += d
    data = np.empty(total, np.int32)
    off = np.zeros(n_items + 1, np.int64)
    stack = np.empty(n_nodes, np.int64)
    path = np.empty(depth_start.size, np.int32)
    sp = 0
    stack[sp] = 0
    sp += 1
    k = 0
    pos = 0
    while sp > 0:
        sp -= 1
        v = stack[sp]
        d = depth[v]
        if d > 0:
            path[d - 1] = token[v]
        if terminal[v]:
            for j in range(d):
                data[pos + j] = path[j]
            pos += d
            k += 1
            off[k] = pos
        for e in range(indptr[v + 1] - 1, indptr[v] - 1, -1):
            stack[sp] = e
            sp += 1
    return data, off


@njit(cache=True, nogil=True)
def pack_keys(data, off, bits, per_word, words):
    """Each item as ``words`` uint64 keys, ``per_word`` tokens of ``bits`` bits each, token
    ``t`` stored as ``t + 1`` (0 = past the end, so a prefix sorts before its extensions)."""
    n = off.size - 1
    keys = np.zeros((n, words), np.uint64)
    for i in range(n):
        a0 = off[i]
        for j in range(off[i + 1] - a0):
            w = j // per_word
            shift = np.uint64(bits * (per_word - 1 - j % per_word))
            keys[i, w] |= np.uint64(data[a0 + j] + 1) << shift
    return keys


@njit(cache=True, nogil=True)
def spell(data, off, token_data, token_offsets):
    """The bytes of every item (flat uint8, int64 offsets): each token's bytes
    ``token_data[token_offsets[t]:token_offsets[t + 1]]`` in order."""
    n = off.size - 1
    boff = np.zeros(n + 1, np.int64)
    for i in range(n):
        k = 0
        for j in range(off[i], off[i + 1]):
            t = data[j]
            k += token_offsets[t + 1] - token_offsets[t]
        boff[i + 1] = boff[i] + k
    out = np.empty(boff[n], np.uint8)
    pos = 0
    for j in range(data.size):
        t = data[j]
        for x in range(token_offsets[t], token_offsets[t + 1]):
            out[pos] = token_data[x]
            pos += 1
    return out, boff


@njit(cache=True, nogil=True)
def dense_rows(token, indptr, rows, width):
    """The direct table of nodes ``0 .. rows-1``: ``table[v, t]`` = the child of ``v`` along
    token ``t``, or -1 (int32 ``[rows, width]``)."""
    table = np.full((rows, width), -1, np.int32)
    for v in range(rows):
        for e in range(indptr[v], indptr[v + 1]):
            table[v, token[e]] = e
    return table


@njit(cache=True, nogil=True)
def child_dense(token, indptr, dense, node, t):
    """:func:`child`, looked up in ``dense`` (see :func:`dense_rows`) for nodes it covers."""
    if node < dense.shape[0]:
        if t < 0 or t >= dense.shape[1]:
            return -1
        return np.int64(dense[node, t])
    return child(token, indptr, node, t)


@njit(cache=True, nogil=True)
def walk_dense(token, indptr, dense, prefix):
    node = 0
    for t in prefix:
        node = child_dense(token, indptr, dense, node, t)
        if node < 0:
            return -1
    return node
