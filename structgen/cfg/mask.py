"""Token masks for the grammar engine: Numba walks of the DFS-flattened token trie.

A token is allowed iff stepping its bytes through :func:`earley.step_byte` from
the current parse state leaves a lexeme in progress or a complete sentence.
Split the tokens by the first place where a lexeme of the current frontier
*ends with bytes left over* (a lexeme boundary inside the token):

1. tokens with no such boundary only depend on the frontier's lexer-DFA states,
   not on the parse stack.  :func:`lex_walk` computes, per lexer state ``g``,
   the bitmask of tokens that keep ``g`` alive, and the list of trie nodes where
   ``g`` accepts and the subtree continues ("boundary nodes").  Cached per ``g``.
2. for each boundary node, :func:`boundary_walk` re-derives the exact parse state
   at that node (stepping the node's bytes with the parser), keeps only the
   lexemes that *start* there and walks the node's subtree with the parser
   (:func:`full_walk`), further boundaries included.

The union is exact: every lexing path of a token either never leaves its first
lexeme (case 1) or leaves it first at some boundary node (case 2).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .earley import step_byte


@njit(cache=True, nogil=True)
def trie_parents(node_depth):
    """parent[i] of every trie node (root: -1)."""
    n = node_depth.shape[0]
    parent = np.full(n, -1, dtype=np.int32)
    stack = np.zeros(int(node_depth.max()) + 2, dtype=np.int32)
    for i in range(1, n):
        d = node_depth[i]
        parent[i] = stack[d - 1]
        stack[d] = i
    return parent


@njit(cache=True, nogil=True)
def lex_walk(g0, trans, gacc, gout, node_byte, node_depth, node_end, tok_ptr, tok_ids, stack, words, bnodes):
    """Case 1 for lexer state ``g0``: sets bits in ``words``; boundary nodes into ``bnodes``.

    Returns the number of boundary nodes, or -1 when ``bnodes`` is too small.
    """
    n = node_depth.shape[0]
    stack[0] = g0
    nb = 0
    i = 1
    while i < n:
        d = node_depth[i]
        g = trans[stack[d - 1], node_byte[i]]
        if g < 0:
            i = node_end[i]
            continue
        for k in range(tok_ptr[i], tok_ptr[i + 1]):
            t = tok_ids[k]
            words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
        if gacc[g] and node_end[i] > i + 1:
            if nb >= bnodes.shape[0]:
                return -1
            bnodes[nb] = i
            nb += 1
        if not gout[g]:
            i = node_end[i]
            continue
        stack[d] = g
        i += 1
    return nb


@njit(cache=True, nogil=True)
def _walk_range(lo, hi, items, set_off, fstack, comp, lvl_sets, lvl_fs, lvl_fn,
                node_byte, node_depth, node_end, tok_ptr, tok_ids, words,
                NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, final_dr,
                trans, gacc, gout, gterm, tstart, mark, stampbox):
    """Walk trie nodes ``lo..hi`` (a union of subtrees) from the level of their parents.

    Level ``d`` (absolute trie depth) holds the state after the first d bytes:
    ``lvl_sets[d]`` sets, frontier ``fstack[lvl_fs[d]:lvl_fs[d]+lvl_fn[d]]``.
    Returns 0, or -1 on overflow.
    """
    i = lo
    while i < hi:
        d = node_depth[i]
        a = lvl_fs[d - 1]
        nin = lvl_fn[d - 1]
        out = a + nin
        res = step_byte(node_byte[i], items, set_off, lvl_sets[d - 1], fstack[a:out], nin, fstack[out:], comp,
                        NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, final_dr,
                        trans, gacc, gout, gterm, tstart, mark, stampbox)
        nf, ns, acc = res
        if nf < 0:
            return -1
        if nf == 0 and not acc:
            i = node_end[i]
            continue
        for k in range(tok_ptr[i], tok_ptr[i + 1]):
            t = tok_ids[k]
            words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
        if nf == 0:
            i = node_end[i]
            continue
        lvl_sets[d] = ns
        lvl_fs[d] = out
        lvl_fn[d] = nf
        i += 1
    return 0


@njit(cache=True, nogil=True)
def full_walk(lo, hi, n_sets, front, nfront, items, set_off, fstack, comp, lvl_sets, lvl_fs, lvl_fn,
              node_byte, node_depth, node_end, tok_ptr, tok_ids, words,
              NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, final_dr,
              trans, gacc, gout, gterm, tstart, mark, stampbox):
    """The exact walk of trie nodes ``lo..hi`` (children of the root) from a parse state."""
    for q in range(nfront):
        fstack[q, 0] = front[q, 0]
        fstack[q, 1] = front[q, 1]
    lvl_sets[0] = n_sets
    lvl_fs[0] = 0
    lvl_fn[0] = nfront
    return _walk_range(lo, hi, items, set_off, fstack, comp, lvl_sets, lvl_fs, lvl_fn,
                       node_byte, node_depth, node_end, tok_ptr, tok_ids, words,
                       NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, final_dr,
                       trans, gacc, gout, gterm, tstart, mark, stampbox)


@njit(cache=True, nogil=True)
def boundary_walk(bnodes, parent, n_sets, front, nfront, items, set_off, fstack, comp, lvl_sets, lvl_fs, lvl_fn,
                  path, node_byte, node_depth, node_end, tok_ptr, tok_ids, words,
                  NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, final_dr,
                  trans, gacc, gout, gterm, tstart, mark, stampbox):
    """Case 2: for each boundary node (ascending ids), the lexemes starting there, walked exactly."""
    for q in range(nfront):
        fstack[q, 0] = front[q, 0]
        fstack[q, 1] = front[q, 1]
    lvl_sets[0] = n_sets
    lvl_fs[0] = 0
    lvl_fn[0] = nfront
    for bi in range(bnodes.shape[0]):
        nd = bnodes[bi]
        depth = node_depth[nd]
        x = nd
        for d in range(depth, 0, -1):
            path[d] = x
            x = parent[x]
        ok = True
        for d in range(1, depth + 1):
            a = lvl_fs[d - 1]
            nin = lvl_fn[d - 1]
            out = a + nin
            res = step_byte(node_byte[path[d]], items, set_off, lvl_sets[d - 1], fstack[a:out], nin, fstack[out:],
                            comp, NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, final_dr,
                            trans, gacc, gout, gterm, tstart, mark, stampbox)
            nf, ns, acc = res
            if nf < 0:
                return -1
            lvl_sets[d] = ns
            lvl_fs[d] = out
            lvl_fn[d] = nf
            if nf == 0:
                ok = False
                break
        if not ok or lvl_sets[depth] == lvl_sets[depth - 1]:
            continue
        # keep only the lexemes that start at the boundary (the set made by the last byte)
        k = lvl_sets[depth] - 1
        a = lvl_fs[depth]
        m = 0
        for q in range(lvl_fn[depth]):
            if fstack[a + q, 1] == k:
                fstack[a + m, 0] = fstack[a + q, 0]
                fstack[a + m, 1] = k
                m += 1
        lvl_fn[depth] = m
        if m == 0:
            continue
        r = _walk_range(nd + 1, node_end[nd], items, set_off, fstack, comp, lvl_sets, lvl_fs, lvl_fn,
                        node_byte, node_depth, node_end, tok_ptr, tok_ids, words,
                        NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, final_dr,
                        trans, gacc, gout, gterm, tstart, mark, stampbox)
        if r < 0:
            return -1
    return 0


@njit(cache=True, nogil=True)
def lex_walk_below(bnodes, g0, trans, gacc, gout, node_byte, node_depth, node_end, tok_ptr, tok_ids,
                   stack, words, out_nodes):
    """Like :func:`lex_walk`, for a lexeme ``g0`` starting at each node of ``bnodes``:
    walks the subtrees below them.  Returns the number of boundary nodes (-1: full)."""
    nb = 0
    for bi in range(bnodes.shape[0]):
        root = bnodes[bi]
        base = node_depth[root]
        stack[base] = g0
        i = root + 1
        hi = node_end[root]
        while i < hi:
            d = node_depth[i]
            g = trans[stack[d - 1], node_byte[i]]
            if g < 0:
                i = node_end[i]
                continue
            for k in range(tok_ptr[i], tok_ptr[i + 1]):
                t = tok_ids[k]
                words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
            if gacc[g] and node_end[i] > i + 1:
                if nb >= out_nodes.shape[0]:
                    return -1
                out_nodes[nb] = i
                nb += 1
            if not gout[g]:
                i = node_end[i]
                continue
            stack[d] = g
            i += 1
    return nb
