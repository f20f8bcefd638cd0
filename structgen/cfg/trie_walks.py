"""Walks of the DFS-flattened token trie for the grammar engine's masks (see :mod:`.mask`).

- :func:`walk_kids` / :func:`walk_split`: a lexeme in lexer state ``g0`` starting at a boundary
  node, over the children grouped by byte (``kids``, ``kb``); they set the bits of the tokens it
  keeps alive and collect the new boundary nodes (where the lexeme can end with the subtree going
  on).  With ``skip`` (per byte for :func:`walk_split`) subtrees without an ``impure`` token are
  left out: their bits come from the run table (:mod:`.run_budgets`).
- :func:`union_walk`: the same from many boundary nodes at once, walking the union of their
  subtrees once (nested boundaries after every byte of an identifier); :func:`free_walk` the
  same for the free lexer, which needs one state per node.
- :func:`build_kids` / :func:`sort_marked`: a boundary list's children by byte, its nodes sorted.
- :func:`full_walk`: the slow reference, the parser stepped at every trie node.

All are Numba kernels on flat arrays; buffers that can be too small make them return -1.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .earley import step_byte


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
                        trans, gacc, gout, gterm, tstart, mark, stampbox, None)
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


@njit(cache=True, nogil=True, inline="always")
def _walk_kid(c, g, gacc, gout, trans, node_byte, node_depth, node_end, tok_ptr, tok_ids, stack, words,
              out_nodes, nb, nmark, nstamp, impure, skip):
    """A lexeme in lexer state ``g`` after the byte of trie node ``c``: set the bits of the
    tokens it keeps alive below (and at) ``c``, append the boundary nodes (the lexeme accepts
    there and the subtree goes on; each once per ``nstamp``) to ``out_nodes[nb:]``.  With
    ``skip``, subtrees without an ``impure`` token are left out (the caller has their bits).
    Returns the new ``nb``, or -1 when ``out_nodes`` is full."""
    if skip and impure[c] == 0:
        return nb
    i = c
    hi = node_end[c]
    d = node_depth[c]
    while True:
        for k in range(tok_ptr[i], tok_ptr[i + 1]):
            t = tok_ids[k]
            words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
        if gacc[g] and node_end[i] > i + 1 and nmark[i] != nstamp:
            if nb >= out_nodes.shape[0]:
                return -1
            nmark[i] = nstamp
            out_nodes[nb] = i
            nb += 1
        if gout[g]:
            stack[d] = g
            i += 1
        else:
            i = node_end[i]
        while i < hi:
            d = node_depth[i]
            g = trans[stack[d - 1], node_byte[i]]
            if g >= 0 and not (skip and impure[i] == 0):
                break
            i = node_end[i]
        if i >= hi:
            return nb


@njit(cache=True, nogil=True)
def walk_kids(kids, kb, g0, trans, gacc, gout, node_byte, node_depth, node_end, tok_ptr, tok_ids,
              stack, words, out_nodes, nmark, nstamp, impure, skip):
    """Case 1 by byte buckets: a lexeme in lexer state ``g0`` starting at a boundary node
    whose children are ``kids`` (grouped by byte: bucket ``x`` is ``kids[kb[x]:kb[x + 1]]``).
    Only the buckets of bytes ``g0`` can take are visited.  Writes the tokens kept alive to
    ``words`` and the new boundary nodes (unique, unsorted) to ``out_nodes``; returns their
    number, or -1 when ``out_nodes`` is too small.  ``impure``/``skip``: see :func:`_walk_kid`."""
    return _walk_buckets(kids, kb, g0, trans, gacc, gout, node_byte, node_depth, node_end, tok_ptr, tok_ids,
                         stack, words, out_nodes, nmark, nstamp, impure, np.full(256, skip, np.uint8))


@njit(cache=True, nogil=True)
def _walk_buckets(kids, kb, g0, trans, gacc, gout, node_byte, node_depth, node_end, tok_ptr, tok_ids,
                  stack, words, out_nodes, nmark, nstamp, impure, skip):
    """:func:`walk_kids` with ``skip`` per first byte (``skip[x]`` for bucket ``x``)."""
    nb = 0
    for x in range(256):
        lo = kb[x]
        hi = kb[x + 1]
        if lo == hi:
            continue
        g = trans[g0, x]
        if g < 0:
            continue
        for q in range(lo, hi):
            nb = _walk_kid(kids[q], g, gacc, gout, trans, node_byte, node_depth, node_end, tok_ptr, tok_ids,
                           stack, words, out_nodes, nb, nmark, nstamp, impure, skip[x] != 0)
            if nb < 0:
                return -1
    return nb


@njit(cache=True, nogil=True, inline="always")
def _add_state(act, d, n, t):
    """Add lexer state ``t`` (-1: none) to the set ``act[d, :n]`` unless there; the new size.
    The set never outgrows its row: at depth d at most d + 1 lexemes are in progress."""
    if t < 0:
        return n
    for z in range(n):
        if act[d, z] == t:
            return n
    act[d, n] = t
    return n + 1


@njit(cache=True, nogil=True, inline="always")
def _next_boundary(i, d, k, u, node_end, node_depth, per_depth, none, isb):
    """Where a walk of the union of subtrees below the boundary list ``u`` goes on when nothing
    walks through node ``i`` (depth ``d``): the next boundary ``u[k]`` inside its subtree, the
    depths in between cleared (``per_depth`` to ``none``, not boundaries), else past the subtree."""
    e = node_end[i]
    if k < u.shape[0] and u[k] < e:
        j = u[k]
        for dd in range(d, node_depth[j]):
            per_depth[dd] = none
            isb[dd] = 0
        return j
    return e


@njit(cache=True, nogil=True)
def union_walk(u, fb, g0, trans, gacc, gout, node_byte, node_depth, node_end, tok_ptr, tok_ids,
               nmark, bstamp, act, actn, isb, words, out_nodes):
    """Case 1 from every node of the sorted boundary list ``u`` at once (``nmark[n] ==
    bstamp`` marks its nodes): one pass over the union of their subtrees carrying, per
    node, the set of lexer states of the lexemes started at boundary ancestors, so nested
    boundaries (every prefix of an identifier) do not walk the same subtree again.  Lexemes
    start only at children whose byte ``x`` has ``fb[x]``.
    Writes the tokens kept alive to ``words`` and the new boundary nodes (sorted, unique)
    to ``out_nodes``; returns their number, or -1 when ``out_nodes`` is too small.
    ``act[d]`` / ``actn[d]`` / ``isb[d]``: the state set at depth ``d`` of the current path
    and whether that node is a boundary."""
    nu = u.shape[0]
    nb = 0
    k = 0
    while k < nu:
        r = u[k]
        k += 1
        hi = node_end[r]
        d0 = node_depth[r]
        actn[d0] = 0
        isb[d0] = 1
        i = r + 1
        while i < hi:
            d = node_depth[i]
            x = node_byte[i]
            pd = d - 1
            n = 0
            for q in range(actn[pd]):
                n = _add_state(act, d, n, trans[act[pd, q], x])
            if isb[pd] and fb[x]:
                n = _add_state(act, d, n, trans[g0, x])
            bnd = nmark[i] == bstamp
            if bnd:
                k += 1
            if n > 0:
                for p in range(tok_ptr[i], tok_ptr[i + 1]):
                    t = tok_ids[p]
                    words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
                if node_end[i] > i + 1:
                    for z in range(n):
                        if gacc[act[d, z]]:
                            if nb >= out_nodes.shape[0]:
                                return -1
                            out_nodes[nb] = i
                            nb += 1
                            break
                m = 0
                for z in range(n):
                    s = act[d, z]
                    if gout[s]:
                        act[d, m] = s
                        m += 1
                n = m
            actn[d] = n
            isb[d] = bnd
            if n == 0 and not bnd:
                i = _next_boundary(i, d, k, u, node_end, node_depth, actn, 0, isb)
                continue
            i += 1
    return nb


@njit(cache=True, nogil=True)
def free_walk(u, fb, ftrans, node_byte, node_depth, node_end, tok_ptr, tok_ids, nmark, bstamp, lstate, isb, words):
    """The tokens below the sorted boundary list ``u`` (``nmark[n] == bstamp`` marks its nodes)
    whose rest, from some boundary on (a lexeme starting at a child whose byte ``x`` has
    ``fb[x]``), the free lexer ``ftrans`` (start 0) steps through, into ``words``: one pass over
    the union of the subtrees, as :func:`union_walk`, but with one state per depth.  That is
    exact for a free lexer whose language is closed under taking factors (the byte-pair DFA
    of :func:`structgen.cfg.engine.byte_pair_lexer`, or one state accepting everything): a
    rest accepted from an outer boundary is accepted from the innermost one, so the run
    started there stands for all.  ``lstate`` / ``isb``: the state at each depth of the current
    path (-1: none) and whether that node is a boundary."""
    nu = u.shape[0]
    k = 0
    while k < nu:
        r = u[k]
        k += 1
        hi = node_end[r]
        d0 = node_depth[r]
        lstate[d0] = -1
        isb[d0] = 1
        i = r + 1
        while i < hi:
            d = node_depth[i]
            x = node_byte[i]
            pd = d - 1
            if isb[pd] and fb[x]:
                s = ftrans[0, x]
            elif lstate[pd] >= 0:
                s = ftrans[lstate[pd], x]
            else:
                s = -1
            bnd = nmark[i] == bstamp
            if bnd:
                k += 1
            if s >= 0:
                for p in range(tok_ptr[i], tok_ptr[i + 1]):
                    t = tok_ids[p]
                    words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
            lstate[d] = s
            isb[d] = bnd
            if s < 0 and not bnd:
                i = _next_boundary(i, d, k, u, node_end, node_depth, lstate, -1, isb)
                continue
            i += 1


@njit(cache=True, nogil=True)
def build_kids(u, fb, node_byte, node_end, kids, kb):
    """The children of the nodes ``u`` whose byte ``x`` has ``fb[x]`` (the bytes a next lexeme
    can start with), grouped by byte: ``kids[kb[x]:kb[x + 1]]`` (``kb`` relative to ``kids[0]``,
    257 entries).  ``u`` is compacted in place to the nodes that keep a child.  Returns
    ``(nodes kept, children)``; ``(-1, -1)`` when ``kids`` is too small."""
    cnt = np.zeros(257, np.int64)
    w = 0
    for q in range(u.shape[0]):
        n = u[q]
        c = n + 1
        e = node_end[n]
        kept = False
        while c < e:
            x = np.int64(node_byte[c])
            if fb[x]:
                cnt[x + 1] += 1
                kept = True
            c = node_end[c]
        if kept:
            u[w] = n
            w += 1
    for x in range(256):
        cnt[x + 1] += cnt[x]
    if cnt[256] > kids.shape[0]:
        return -1, -1
    for x in range(257):
        kb[x] = cnt[x]
    for q in range(w):
        n = u[q]
        c = n + 1
        e = node_end[n]
        while c < e:
            x = np.int64(node_byte[c])
            if fb[x]:
                kids[cnt[x]] = c
                cnt[x] += 1
            c = node_end[c]
    return w, kb[256]


@njit(cache=True, nogil=True)
def sort_marked(nodes, nb, nmark, stamp, out):
    """``nodes[:nb]`` (distinct, all with ``nmark == stamp``) sorted into ``out``: by a scan of
    the marks between their minimum and maximum when they are many, else by sorting."""
    if nb < 4096:
        out[:nb] = np.sort(nodes[:nb])
        return
    lo = nodes[0]
    hi = nodes[0]
    for q in range(nb):
        if nodes[q] < lo:
            lo = nodes[q]
        if nodes[q] > hi:
            hi = nodes[q]
    p = 0
    for n in range(lo, hi + 1):
        if nmark[n] == stamp:
            out[p] = n
            p += 1


@njit(cache=True, nogil=True)
def walk_split(kids, kb, g0, trans, gacc, gout, node_byte, node_depth, node_end, tok_ptr, tok_ids,
               stack, words, out_nodes, nmark, nstamp, impure, full):
    """:func:`walk_kids` with ``skip`` for the buckets of bytes ``x`` without ``full[x]``; the
    buckets with ``full[x]`` are first cleared in ``words`` (every token below their
    children), then walked in full."""
    for x in range(256):
        if full[x]:
            for q in range(kb[x], kb[x + 1]):
                c = kids[q]
                for k in range(tok_ptr[c], tok_ptr[node_end[c]]):
                    t = tok_ids[k]
                    words[t >> 5] &= ~(np.uint32(1) << np.uint32(t & 31))
    return _walk_buckets(kids, kb, g0, trans, gacc, gout, node_byte, node_depth, node_end, tok_ptr, tok_ids,
                         stack, words, out_nodes, nmark, nstamp, impure, 1 - full)
