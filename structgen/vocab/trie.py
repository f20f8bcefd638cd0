"""The token trie: the bytes of every normal token, as a DFS-flattened (preorder) prefix tree.

Layout (llguidance's "toktrie" shape, built without a Python dict trie):

* node 0 is the root (depth 0, byte 0); every other node is one distinct non-empty prefix
  of some normal token's bytes, ``node_byte[i]`` its last byte, ``node_depth[i]`` its length;
* nodes are in preorder with children in ascending byte order, so a node's subtree is the
  contiguous range ``[i, node_end[i])`` -- a walk that rejects byte ``node_byte[i]`` jumps to
  ``node_end[i]`` and skips every token that extends that prefix;
* ``tok_ids[tok_ptr[i]:tok_ptr[i+1]]`` (CSR, ascending ids) are the tokens whose bytes are
  exactly the prefix of node i -- several ids may share bytes (SentencePiece ``<0x20>`` and
  ``▁`` are both b" ");
* ``token_node[t]`` is the node where token t ends (-1 for tokens that are not in the trie).

Build: sort the token byte strings (stable merge sort in Numba), then each string in sorted
order opens one new node per byte past its longest common prefix with its predecessor.
Emitting those nodes in sorted order *is* the preorder, and a string's end node is the last
node it opened (or its predecessor's, when the two are equal).
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["TokenTrie"]


@njit(cache=True, nogil=True)
def _less_equal(data, offsets, a, b):
    """True when the bytes of token a sort before or equal to those of token b."""
    pa, ea = offsets[a], offsets[a + 1]
    pb, eb = offsets[b], offsets[b + 1]
    while pa < ea and pb < eb:
        x = data[pa]
        y = data[pb]
        if x != y:
            return x < y
        pa += 1
        pb += 1
    return (ea - pa) <= (eb - pb)


@njit(cache=True, nogil=True)
def _sort_by_bytes(data, offsets, ids):
    """Stable bottom-up merge sort of ``ids`` by their byte strings (ties keep input order)."""
    n = ids.shape[0]
    src = ids.copy()
    dst = np.empty_like(src)
    width = 1
    while width < n:
        lo = 0
        while lo < n:
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                # take from the left run on ties: that is what keeps the sort stable
                if _less_equal(data, offsets, src[i], src[j]):
                    dst[k] = src[i]
                    i += 1
                else:
                    dst[k] = src[j]
                    j += 1
                k += 1
            while i < mid:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < hi:
                dst[k] = src[j]
                j += 1
                k += 1
            lo = hi
        src, dst = dst, src
        width *= 2
    return src


@njit(cache=True, nogil=True)
def _build(data, offsets, order):
    """Preorder node arrays from token ids sorted by bytes (see the module docstring)."""
    m = order.shape[0]
    lcp = np.zeros(m, dtype=np.int64)
    n_nodes = 1
    for k in range(m):
        t = order[k]
        length = offsets[t + 1] - offsets[t]
        if k > 0:
            p = order[k - 1]
            a, b = offsets[t], offsets[p]
            lp = offsets[p + 1] - b
            limit = min(length, lp)
            c = 0
            while c < limit and data[a + c] == data[b + c]:
                c += 1
            lcp[k] = c
        n_nodes += length - lcp[k]

    node_byte = np.zeros(n_nodes, dtype=np.uint8)
    node_depth = np.zeros(n_nodes, dtype=np.int32)
    end_node = np.empty(m, dtype=np.int32)
    nxt = 1
    for k in range(m):
        t = order[k]
        a = offsets[t]
        length = offsets[t + 1] - a
        for d in range(lcp[k] + 1, length + 1):
            node_byte[nxt] = data[a + d - 1]
            node_depth[nxt] = d
            nxt += 1
        # a duplicate of its predecessor opens no node and ends where the predecessor ends
        end_node[k] = nxt - 1 if length > lcp[k] else end_node[k - 1]

    # skip pointers: a node's subtree ends at the first later node that is not deeper
    node_end = np.empty(n_nodes, dtype=np.int32)
    stack = np.empty(n_nodes, dtype=np.int32)
    top = 0
    for i in range(n_nodes):
        while top > 0 and node_depth[stack[top - 1]] >= node_depth[i]:
            top -= 1
            node_end[stack[top]] = i
        stack[top] = i
        top += 1
    while top > 0:
        top -= 1
        node_end[stack[top]] = n_nodes
    return node_byte, node_depth, node_end, end_node


class TokenTrie:
    """DFS-flattened trie of the normal tokens of a vocabulary (see the module docstring).

    Attributes: ``node_byte`` uint8[n], ``node_depth`` int32[n], ``node_end`` int32[n],
    ``tok_ptr`` int32[n+1], ``tok_ids`` int32[k], ``token_node`` int32[width], ``max_depth`` int.
    """

    __slots__ = ("node_byte", "node_depth", "node_end", "tok_ptr", "tok_ids", "token_node", "max_depth")

    def __init__(self, node_byte, node_depth, node_end, tok_ptr, tok_ids, token_node, max_depth):
        self.node_byte = node_byte
        self.node_depth = node_depth
        self.node_end = node_end
        self.tok_ptr = tok_ptr
        self.tok_ids = tok_ids
        self.token_node = token_node
        self.max_depth = int(max_depth)

    @classmethod
    def build(cls, token_data: np.ndarray, token_offsets: np.ndarray, include: np.ndarray) -> "TokenTrie":
        """Trie of the tokens i with ``include[i]`` (and non-empty bytes).

        ``token_data``/``token_offsets`` are the vocabulary's flat byte arrays (token i is
        ``token_data[token_offsets[i]:token_offsets[i+1]]``).
        """
        data = np.ascontiguousarray(token_data, dtype=np.uint8)
        offsets = np.ascontiguousarray(token_offsets, dtype=np.int64)
        lengths = np.diff(offsets)
        ids = np.flatnonzero(np.asarray(include, dtype=bool) & (lengths > 0)).astype(np.int32)
        order = _sort_by_bytes(data, offsets, ids)
        node_byte, node_depth, node_end, end_node = _build(data, offsets, order)
        n = node_byte.shape[0]
        # end nodes are non-decreasing in sorted order, so `order` is already grouped by node
        counts = np.bincount(end_node, minlength=n)
        tok_ptr = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(counts, out=tok_ptr[1:])
        token_node = np.full(lengths.shape[0], -1, dtype=np.int32)
        token_node[order] = end_node
        max_depth = int(lengths[ids].max()) if ids.size else 0
        return cls(node_byte, node_depth, node_end, tok_ptr, order.astype(np.int32), token_node, max_depth)

    @property
    def n_nodes(self) -> int:
        """Number of nodes, root included."""
        return int(self.node_byte.shape[0])

    def child(self, node: int, byte: int) -> int:
        """The child of ``node`` reached by ``byte``, or -1 (hops over sibling subtrees)."""
        c, end = node + 1, self.node_end[node]
        while c < end:
            if self.node_byte[c] == byte:
                return int(c)
            c = self.node_end[c]
        return -1

    def tokens_at(self, node: int) -> np.ndarray:
        """Ids of the tokens whose bytes end exactly at ``node``."""
        return self.tok_ids[self.tok_ptr[node]:self.tok_ptr[node + 1]]

    def __repr__(self) -> str:
        return f"TokenTrie(nodes={self.n_nodes}, tokens={self.tok_ids.shape[0]}, max_depth={self.max_depth})"
