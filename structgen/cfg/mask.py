"""Token masks for the grammar engine: Numba walks of the DFS-flattened token trie.

A token is allowed iff stepping its bytes through :func:`earley.step_byte` from
the current parse state leaves a lexeme in progress or a complete sentence.
Split each lexing path of a token at the places where a lexeme *ends with bytes
left over* (lexeme boundaries inside the token):

1. the part before the first boundary only depends on the lexer-DFA state ``g``
   of a frontier lexeme, not on the parse stack.  :func:`lex_fill` walks the
   subtrees below a *boundary list* ``bl`` (trie nodes; list 0 is the root)
   from state ``g`` and records, once per grammar (:class:`MaskCache`), the
   tokens it keeps alive and the new boundary list of nodes where the lexeme
   can end with the subtree continuing;
2. at a boundary the parser is consulted once per (terminal, origin set):
   :func:`earley.predict_after` builds the would-be Earley set after the
   lexeme and says which lexemes start there; they continue below the new
   boundary list (back to 1).

:func:`expand_mask` runs this as a worklist of ``(boundary list, lexer state,
Earley set)`` triples, each processed once per mask, with temporary Earley sets
appended after the committed chart (never overwritten within a mask, so every
prediction is computed once).  The union is exact: every lexing path of a token
is a chain of lexemes, each starting at the previous one's boundary node.

:func:`expand_mask` runs the worklist, :func:`lex_fill` computes a cache entry (with the trie walks
of :mod:`.trie_walks` and the run budgets of :mod:`.run_budgets`), :func:`fill_entries` /
:func:`or_roots` serve the cache's prefill and root bits;
:func:`structgen.cfg.trie_walks.full_walk` is the slow reference: it steps the parser at every
trie node.

Kernel arguments come in named records (:class:`GrammarArrays`, :class:`TrieArrays`,
:class:`CacheArrays`, :class:`FillScratch`, :class:`LexerAids`), splatted positionally: their
field names are the kernels' parameter names, and :func:`check_kernel_orders` (run at import)
checks that each kernel's parameter list is the concatenation its callers splat.  Per mask the
matcher calls :func:`expand_mask_packed` and :func:`step_bytes_packed` instead: the same arrays
as four address tables (:mod:`structgen.kernels.packed`), since unboxing seventy arrays costs
~4 us, most of a cached mask (a namedtuple argument costs a Python-level ``typeof`` per field,
and a structref's constructor is compiled anew in every process).  The same check names, for
every view of a packed call, the parameter it is passed as.
"""
from __future__ import annotations

import ast
import inspect
from collections import namedtuple

import numpy as np
from numba import njit

from ..kernels.packed import view1, view2, view3
from . import earley
from .earley import predict_after
from .run_budgets import chain_budget, split_budget
from .trie_walks import build_kids, free_walk, sort_marked, union_walk, walk_kids, walk_split

# expand_mask status codes
OK = 0
MISS = 1        # read-only mode met a (boundary list, state) pair not in the cache
CACHE_FULL = 2  # a cache pool or its hash table must grow
CHART_FULL = 3  # the matcher's chart (items / set offsets / prediction buffer) must grow
SCRATCH_FULL = 4  # the matcher's per-mask scratch (worklist, hash sets, entry stamps) must grow
NODES_FULL = 5  # the boundary-node scratch of a lexer walk must grow

# counters of a MaskCache (the ``cnt`` array)
C_ENT, C_BITS, C_BL, C_NODES, C_HT, C_KIDS = 0, 1, 2, 3, 4, 5

_HASH = np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15 as int64 (Fibonacci hashing)


@njit(cache=True, nogil=True, inline="always")
def _slot(keys, key):
    """Slot of ``key`` in the open-addressing table ``keys`` (-1 = empty slot), or the
    empty slot where it would go.  ``keys.shape[0]`` is a power of two."""
    m = keys.shape[0] - 1
    h = key * _HASH
    s = (h ^ (h >> 31)) & m
    while True:
        k = keys[s]
        if k == key or k == -1:
            return s
        s = (s + 1) & m


@njit(cache=True, nogil=True, inline="always")
def _sslot(keys, stamps, cur, key):
    """Like :func:`_slot` for a table whose slots are live only when ``stamps[s] == cur``
    (cleared in O(1) by bumping ``cur``)."""
    m = keys.shape[0] - 1
    h = key * _HASH
    s = (h ^ (h >> 31)) & m
    while True:
        if stamps[s] != cur or keys[s] == key:
            return s
        s = (s + 1) & m


@njit(cache=True, nogil=True)
def rehash(keys, vals, new_keys, new_vals):
    """Insert the live entries of one hash table (see :func:`_slot`) into a larger empty one."""
    for s in range(keys.shape[0]):
        if keys[s] != -1:
            t = _slot(new_keys, keys[s])
            new_keys[t] = keys[s]
            new_vals[t] = vals[s]


@njit(cache=True, nogil=True)
def _append_bits(scr_words, bidx, bval, p):
    """Append the non-zero words of ``scr_words`` to the pool at ``p``; returns the new end (-1: full)."""
    nz = 0
    for w in range(scr_words.shape[0]):
        if scr_words[w] != 0:
            nz += 1
    if p + nz > bidx.shape[0]:
        return -1
    for w in range(scr_words.shape[0]):
        if scr_words[w] != 0:
            bidx[p] = w
            bval[p] = scr_words[w]
            p += 1
    return p


@njit(cache=True, nogil=True)
def _list_key(nodes, n):
    """The hash-table key of a boundary list with (sorted) ``nodes[:n]``: negative (<= -2), so
    it cannot meet an entry's key ``bl * NG + g`` or the empty slot's -1."""
    h = np.uint64(14695981039346656037)
    for q in range(n):
        h = (h ^ np.uint64(nodes[q])) * np.uint64(1099511628211)
    return -np.int64(2) - np.int64(h >> np.uint64(2))


@njit(cache=True, nogil=True)
def _same_list(b, nodes, n, fb, bl_off, bl_nodes, bl_term, follow):
    """List ``b`` has the nodes ``nodes[:n]`` and FOLLOW bytes ``fb``: the same list."""
    if bl_off[b + 1] - bl_off[b] != n:
        return False
    o = bl_off[b]
    for q in range(n):
        if bl_nodes[o + q] != nodes[q]:
            return False
    f = follow[bl_term[b]]
    for x in range(256):
        if f[x] != fb[x]:
            return False
    return True


@njit(cache=True, nogil=True, inline="always")
def _has_room(bl, g, kb, trans, node_end, bl_kids, ent_bl2, bidx, bl_off, bl_nodes, bl_kb, cnt, n_words):
    """Whether the pools hold the largest entry ``(bl, g)`` can make: its bits and a new list's
    u-bits (``n_words`` pairs each), and a new list no larger than the subtrees of the
    children of ``bl`` whose byte state ``g`` takes (or the whole trie)."""
    b = cnt[C_BL]
    if (cnt[C_ENT] >= ent_bl2.shape[0] or cnt[C_BITS] + 2 * n_words > bidx.shape[0]
            or b + 2 > bl_off.shape[0] or 257 * (b + 1) > bl_kb.shape[0]):
        return False
    span = 0
    for x in range(256):
        if trans[g, x] >= 0:
            for q in range(kb[x], kb[x + 1]):
                span += node_end[bl_kids[q]] - bl_kids[q]
    span = min(span, node_end.shape[0])  # (children of a list can be nested: the sum overcounts)
    return cnt[C_NODES] + span <= bl_nodes.shape[0] and cnt[C_KIDS] + span <= bl_kids.shape[0]


@njit(cache=True, nogil=True)
def lex_fill(bl, g, trans, gacc, gout, gterm, follow, node_byte, node_depth, node_end, tok_ptr, tok_ids,
             ht_keys, ht_vals, ent_bl2, ent_boff, ent_bn, bidx, bval, bl_off, bl_nodes, bl_kb, bl_kids, bl_term, bl_uoff, bl_un, cnt,
             scr_words, scr_nodes, lstack, nmark, nst, act, actn, isb, ftrans,
             chain, cum, impure, u_trans, u_acc, u0):
    """Compute the cache entry of ``(bl, g)`` and append it to the pools.

    Boundary list ``b`` (a lexeme of terminal ``bl_term[b]`` ends at each of its nodes; -1
    for list 0, the root) is stored twice: its nodes sorted
    (``bl_nodes[bl_off[b]:bl_off[b + 1]]``) and those of their children a next lexeme can
    start at (first byte in ``follow[bl_term[b]]``, the first bytes of the terminals that
    can follow in the grammar), grouped by byte: bucket ``x`` is ``bl_kids[kb[x]:kb[x + 1]]``
    with ``kb = bl_kb[257 * b:]``.  Nodes without such a child are not kept.  A lexer state
    that can take few of those children walks the buckets of its bytes; one that takes many
    walks the union of the subtrees once (:func:`union_walk`), so nested boundaries (after
    every byte of an identifier) cost the size of that union, not more.

    A new boundary list also records (bits ``bl_uoff/bl_un`` in the bit pool) the
    tokens below its nodes whose rest the free lexer ``ftrans`` takes (parser ignored; a
    language closed under factors, see :func:`free_walk`): a superset of what lexemes
    starting there can allow, so :func:`expand_mask` computes no entry of a list below which
    they are all allowed already.

    Root walks (list 0) from states inside a run (a quoted string: the run character set) take
    the tokens made only of run characters ("run tokens") from the per-vocabulary table ``cum`` by length and
    skip the subtrees that hold nothing else: for every first byte when the state counts
    characters alike (:func:`chain_budget`), else for the first bytes that share one budget
    (:func:`split_budget`: a key other than the declared ones after a prefix of some of
    them, where only the bytes that continue a declared key are walked in full).
    Returns the entry id, -1 when a pool is full (nothing is published: the
    counters only move at the end), -2 when ``scr_nodes`` is too small.
    """
    kb = bl_kb[257 * bl:257 * bl + 257]
    nodes = bl_nodes[bl_off[bl]:bl_off[bl + 1]]
    many = 0
    if bl > 0:
        for x in range(256):
            if trans[g, x] >= 0:
                many += kb[x + 1] - kb[x]
        if many == 0:  # no child starts this lexeme: an empty entry (most of a prefill's)
            e = cnt[C_ENT]
            if e >= ent_bl2.shape[0]:
                return -1
            ent_boff[e] = cnt[C_BITS]
            ent_bn[e] = 0
            ent_bl2[e] = -1
            cnt[C_ENT] = e + 1
            return e
    if not _has_room(bl, g, kb, trans, node_end, bl_kids, ent_bl2, bidx, bl_off, bl_nodes, bl_kb, cnt,
                     scr_words.shape[0]):
        return -1  # before the walk, not after it: a fill that grows the pools then loses no work
    scr_words[:] = 0
    nst[0] += 1
    st = nst[0]
    # nested boundaries are only costly in long lists whose children this state mostly takes
    if nodes.shape[0] > 256 and 2 * many > kb[256] - kb[0]:
        for q in range(nodes.shape[0]):
            nmark[nodes[q]] = st
        nb = union_walk(nodes, follow[bl_term[bl]], g, trans, gacc, gout, node_byte, node_depth, node_end,
                        tok_ptr, tok_ids, nmark, st, act, actn, isb, scr_words, scr_nodes)
        if nb < 0:
            return -2
    else:
        # a root walk from a state counting run characters (inside a quoted string): the run
        # tokens' bits come from the per-vocabulary table, the walk skips their subtrees
        skip = False
        split = False
        full = np.zeros(256, np.uint8)
        if bl == 0 and cum.shape[0] > 1:
            r = chain_budget(g, trans, gacc, u_trans, u_acc, u0, cum.shape[0] - 1, chain)
            if r < 0:
                # by first byte: most first characters lead alike (a key "other than these"
                # after a prefix of some of them), the others' subtrees are walked in full
                r = split_budget(g, trans, gacc, u_trans, u_acc, u0, cum.shape[0] - 1, chain, kb, bl_kids,
                                 node_end, tok_ptr, full)
                split = r >= 0
            if r >= 0:
                skip = True
                for w in range(scr_words.shape[0]):
                    scr_words[w] |= cum[r, w]
        if split:
            nb = walk_split(bl_kids, kb, g, trans, gacc, gout, node_byte, node_depth, node_end, tok_ptr, tok_ids,
                            lstack, scr_words, scr_nodes, nmark, st, impure, full)
        else:
            nb = walk_kids(bl_kids, kb, g, trans, gacc, gout, node_byte, node_depth, node_end, tok_ptr, tok_ids,
                           lstack, scr_words, scr_nodes, nmark, st, impure, skip)
        if nb < 0:
            return -2
        sort_marked(scr_nodes, nb, nmark, st, scr_nodes)
    e = cnt[C_ENT]
    if e >= ent_bl2.shape[0]:
        return -1
    p0 = cnt[C_BITS]
    p = _append_bits(scr_words, bidx, bval, p0)
    if p < 0:
        return -1
    pe = p  # the entry's bits end here (a new list's u-bits follow)
    bl2 = -1
    b = cnt[C_BL]
    o = cnt[C_NODES]
    ko = cnt[C_KIDS]
    nk = 0
    te = gterm[g]
    fb = follow[te]
    if nb > 0:
        if b + 2 > bl_off.shape[0] or o + nb > bl_nodes.shape[0] or 257 * (b + 1) > bl_kb.shape[0]:
            return -1
        nb, nk = build_kids(scr_nodes[:nb], fb, node_byte, node_end, bl_kids[ko:], bl_kb[257 * b:257 * b + 257])
        if nb < 0:
            return -1
    slot = -1
    key = np.int64(-1)
    if nb > 0:
        # the same list may have been made by another entry (a lexeme ending at the same nodes,
        # with the same FOLLOW bytes): share it, so its entries are computed once
        key = _list_key(scr_nodes, nb)
        slot = _slot(ht_keys, key)
        if ht_keys[slot] == key:
            b1 = ht_vals[slot]
            slot = -1  # (a different list under the same key: made anew, not registered)
            if _same_list(b1, scr_nodes, nb, fb, bl_off, bl_nodes, bl_term, follow):
                bl2 = b1
                nb = 0
    if nb > 0:
        kb2 = bl_kb[257 * b:257 * b + 257]
        for x in range(257):
            kb2[x] += ko
        u = scr_nodes[:nb]
        scr_words[:] = 0
        nst[0] += 1
        st = nst[0]
        for q in range(nb):
            nmark[u[q]] = st
        if ftrans.shape[0] > 1:
            free_walk(u, fb, ftrans, node_byte, node_depth, node_end, tok_ptr, tok_ids, nmark, st, lstack, isb,
                      scr_words)
        else:  # the free lexer takes everything: every token below the children, in a tighter loop
            for q in range(ko, ko + nk):
                c = bl_kids[q]
                for k in range(tok_ptr[c], tok_ptr[node_end[c]]):
                    t = tok_ids[k]
                    scr_words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
        p2 = _append_bits(scr_words, bidx, bval, p)
        if p2 < 0:
            return -1
        bl_uoff[b] = p
        bl_un[b] = p2 - p
        p = p2
        bl_nodes[o:o + nb] = u
        bl_off[b + 1] = o + nb
        bl_term[b] = te
        cnt[C_BL] = b + 1
        cnt[C_NODES] = o + nb
        cnt[C_KIDS] = ko + nk
        bl2 = b
        if slot >= 0:  # registered once complete (a full pool above leaves no trace)
            ht_keys[slot] = key
            ht_vals[slot] = b
            cnt[C_HT] += 1
    ent_boff[e] = p0
    ent_bn[e] = pe - p0
    ent_bl2[e] = bl2
    cnt[C_BITS] = p
    cnt[C_ENT] = e + 1
    return e


@njit(cache=True, nogil=True)
def expand_mask(front, nfront, n_sets, items, set_off,
                NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, final_dr, trans, gacc, gout, gterm, tstart,
                mark, stampbox, node_byte, node_depth, node_end, tok_ptr, tok_ids,
                ht_keys, ht_vals, ent_bl2, ent_boff, ent_bn, bidx, bval, bl_off, bl_nodes, bl_kb, bl_kids,
                bl_term, bl_uoff, bl_un, cnt, follow, fill, root_done,
                scr_words, scr_nodes, lstack, nmark, nst, act, actn, isb, ftrans,
                chain, cum, impure, u_trans, u_acc, u0, gfirst, words, estamp, bstamp, work, ptask, vkeys, vstamp, pkeys,
                pstamp, pval, predbuf, wkeys, wstamp, wval, wpool):
    """OR into ``words`` every token allowed from the parse state (chart ``items`` /
    ``set_off`` with ``n_sets`` committed sets, frontier ``front[:nfront]``), EOS aside.

    Cache: the open-addressing table ``ht_keys`` (key ``bl * n_lexer_states + g``,
    -1 empty) -> entry id ``ht_vals``; entry ``e`` has token bits
    ``(bidx, bval)[ent_boff[e]:ent_boff[e] + ent_bn[e]]`` (word index, word) and
    boundary list ``ent_bl2[e]`` (-1: none), the nodes
    ``bl_nodes[bl_off[b]:bl_off[b + 1]]`` below which lie the tokens
    ``(bidx, bval)[bl_uoff[b]:bl_uoff[b] + bl_un[b]]``.  With ``fill`` false a
    missing entry returns MISS; with ``fill`` true it is computed and appended
    (the caller publishes ``ht_keys``/``cnt`` afterwards).  With ``root_done``
    the bits of the frontier's own entries (list 0) are already in ``words``.

    ``gfirst[g]``: the bytes lexer state ``g`` steps on (256 bits); a state predicted at a list
    none of whose children it can step on is not queued (its entry would be empty).

    Order: the bits of every queued (list, state, set) triple are OR-ed before the
    parser is asked about any boundary (queue ``ptask``), so a boundary list
    whose tokens are already all allowed is skipped without a prediction.

    Per-mask scratch of the matcher: ``estamp`` / ``bstamp`` (entry OR-ed / per list: how much
    of it is known covered, see :func:`_covered`, and its children's bytes, :func:`_list_bytes`),
    ``work`` (triples), ``ptask`` (boundaries to predict after),
    ``vkeys/vstamp`` (triples seen), ``pkeys/pstamp/pval`` ((terminal, set) ->
    (temp set, offset, count) in ``predbuf``); the stamp tables are live where
    their stamp equals ``stampbox[1]``; ``wkeys/wstamp/wval/wpool`` the waiter index of the sets
    (:func:`structgen.cfg.earley.waiters`, its fill counts in ``stampbox[2:4]``).

    Returns a status code (OK, MISS, CACHE_FULL, CHART_FULL, SCRATCH_FULL, NODES_FULL).
    """
    NG = trans.shape[0]
    T = tstart.shape[0]
    SC = np.int64(set_off.shape[0])
    stampbox[1] += 1
    cur = stampbox[1]
    stampbox[2] = 0
    stampbox[3] = 0
    wx = (wkeys, wstamp, wval, wpool)
    nw = 0
    for q in range(nfront):
        if nw >= work.shape[0]:
            return SCRATCH_FULL
        work[nw, 0] = 0
        work[nw, 1] = front[q, 0]
        work[nw, 2] = front[q, 1]
        nw += 1
    next_set = n_sets
    npred = 0
    # signatures of the predictions made so far (per prediction: hash, length, terminal, offset)
    cap = pkeys.shape[0] // 2 + 1
    sig_h = np.empty(cap, np.int64)
    sig_n = np.empty(cap, np.int64)
    sig_t = np.empty(cap, np.int64)
    sig_of = np.empty(cap, np.int64)
    sig_k = np.empty((cap, 3), np.int64)
    sig_pool = np.empty(1024, np.int64)
    sig_tmp = np.empty(earley.ALIAS_SIGNATURE, np.int64)
    sig_syms = np.empty(earley.ALIAS_SIGNATURE, np.int32)
    nsig = 0
    nv = 0
    np_ = 0
    head = 0
    nt = 0
    thead = 0
    # first visits below a list put off until nothing else is left, when more is allowed
    defer = np.empty((0, 3), np.int32)
    nd = 0
    dhead = 0
    while True:
        if head < nw or (thead >= nt and dhead < nd):
            later = head >= nw
            if later:
                bl = defer[dhead, 0]
                g = defer[dhead, 1]
                j = defer[dhead, 2]
                dhead += 1
            else:
                bl = work[head, 0]
                g = work[head, 1]
                j = work[head, 2]
                head += 1
            key = np.int64(bl) * NG + g
            s = _slot(ht_keys, key)
            if ht_keys[s] == -1:
                # a first visit is skipped when every token below the list is allowed already: its
                # entry, and the lists it would make, cost a walk (a cached entry costs an OR); so
                # it waits for the rest of the mask, which may allow them
                if bl > 0 and _covered(bl, bl_uoff, bl_un, bidx, bval, words, bstamp, cur) != 0:
                    continue
                if bl > 0 and not later:
                    if nd >= defer.shape[0]:
                        grown = np.empty((max(64, 2 * defer.shape[0]), 3), np.int32)
                        grown[:nd] = defer[:nd]
                        defer = grown
                    defer[nd, 0] = bl
                    defer[nd, 1] = g
                    defer[nd, 2] = j
                    nd += 1
                    continue
                if not fill:
                    return MISS
                if (cnt[C_HT] + 2) * 2 > ht_keys.shape[0]:
                    return CACHE_FULL
                e = lex_fill(bl, g, trans, gacc, gout, gterm, follow, node_byte, node_depth, node_end, tok_ptr,
                             tok_ids, ht_keys, ht_vals, ent_bl2, ent_boff, ent_bn, bidx, bval, bl_off, bl_nodes, bl_kb, bl_kids,
                             bl_term, bl_uoff, bl_un, cnt, scr_words, scr_nodes, lstack, nmark, nst, act, actn, isb,
                             ftrans, chain, cum, impure, u_trans, u_acc, u0)
                if e == -1:
                    return CACHE_FULL
                if e == -2:
                    return NODES_FULL
                ht_keys[s] = key
                ht_vals[s] = e
                cnt[C_HT] += 1
            else:
                e = ht_vals[s]
            if e >= estamp.shape[0]:
                return SCRATCH_FULL
            if estamp[e] != cur and not (root_done and bl == 0):
                estamp[e] = cur
                for k in range(ent_boff[e], ent_boff[e] + ent_bn[e]):
                    words[bidx[k]] |= bval[k]
            bl2 = ent_bl2[e]
            if bl2 >= 0:
                if nt >= ptask.shape[0]:
                    return SCRATCH_FULL
                ptask[nt, 0] = bl2
                ptask[nt, 1] = gterm[g]
                ptask[nt, 2] = j
                nt += 1
            continue
        if thead >= nt:
            break
        # a lexeme can end inside a token: ask the parser what starts after it
        bl2 = ptask[thead, 0]
        t = ptask[thead, 1]
        j = ptask[thead, 2]
        thead += 1
        c = _covered(bl2, bl_uoff, bl_un, bidx, bval, words, bstamp, cur)
        if c < 0:
            return SCRATCH_FULL
        if c:
            continue
        pk = np.int64(j) * T + t
        ps = _sslot(pkeys, pstamp, cur, pk)
        if pstamp[ps] == cur:
            k2 = pval[ps, 0]
            po = pval[ps, 1]
            pn = pval[ps, 2]
        else:
            if (np_ + 1) * 2 > pkeys.shape[0]:
                return SCRATCH_FULL
            # a prediction after the same terminal from an equivalent set (same signature: the same
            # future, see earley.signature) made earlier in this mask is reused, so that the chains
            # of boundaries of a terminal that may follow itself (WORD WORD) share their sets
            # instead of multiplying along every path of boundaries
            if np_ >= sig_of.shape[0]:
                return SCRATCH_FULL
            ns = earley.signature(items, set_off, j, NN + t, NN, dr_next, dr_lhs, sig_tmp, sig_syms, wx, stampbox)
            if ns == earley.INDEX_FULL:
                return SCRATCH_FULL
            k2 = -1
            if ns >= 0:
                h = np.int64(t) * 1000003 + ns
                for r in range(ns):
                    h = h * _HASH + sig_tmp[r]
                for q in range(np_):
                    if sig_h[q] == h and sig_n[q] == ns and sig_t[q] == t:
                        same = True
                        o = sig_of[q]
                        for r in range(ns):
                            if sig_pool[o + r] != sig_tmp[r]:
                                same = False
                                break
                        if same:
                            k2 = sig_k[q, 0]
                            po = sig_k[q, 1]
                            pn = sig_k[q, 2]
                            break
                if nsig + ns > sig_pool.shape[0]:
                    more = np.empty(2 * (nsig + ns), np.int64)
                    more[:nsig] = sig_pool[:nsig]
                    sig_pool = more
                sig_pool[nsig:nsig + ns] = sig_tmp[:ns]
            else:
                h = np.int64(-1)
            sig_h[np_] = h
            sig_n[np_] = ns
            sig_t[np_] = t
            sig_of[np_] = nsig
            nsig += max(ns, 0)
            if k2 < 0:
                k2 = next_set
                if k2 + 2 >= set_off.shape[0]:
                    return CHART_FULL
                pn = predict_after(t, j, items, set_off, k2, predbuf[npred:], NN, dr_next, dr_lhs, nt_ptr, nt_dr0,
                                   nullable, final_dr, tstart, mark, stampbox, wx)
                if pn == earley.INDEX_FULL:
                    return SCRATCH_FULL
                if pn < 0:
                    return CHART_FULL
                po = npred
                npred += pn
                next_set += 1
            sig_k[np_, 0] = k2
            sig_k[np_, 1] = po
            sig_k[np_, 2] = pn
            pkeys[ps] = pk
            pstamp[ps] = cur
            pval[ps, 0] = k2
            pval[ps, 1] = po
            pval[ps, 2] = pn
            np_ += 1
        # the bytes of the list's children (once per list and mask): a lexeme that takes none of
        # them has nothing below it
        if bstamp[bl2, 2] != cur:
            _list_bytes(bl_kb[257 * bl2:257 * bl2 + 257], bstamp[bl2])
            bstamp[bl2, 2] = cur
        b0, b1 = np.uint64(bstamp[bl2, 3]), np.uint64(bstamp[bl2, 4])
        b2, b3 = np.uint64(bstamp[bl2, 5]), np.uint64(bstamp[bl2, 6])
        for r in range(po, po + pn):
            g2 = predbuf[r, 0]
            if (gfirst[g2, 0] & b0) | (gfirst[g2, 1] & b1) | (gfirst[g2, 2] & b2) | (gfirst[g2, 3] & b3) == 0:
                continue
            vk = (np.int64(bl2) * NG + g2) * SC + k2
            vs = _sslot(vkeys, vstamp, cur, vk)
            if vstamp[vs] == cur:
                continue
            if (nv + 1) * 2 > vkeys.shape[0] or nw >= work.shape[0]:
                return SCRATCH_FULL
            vkeys[vs] = vk
            vstamp[vs] = cur
            nv += 1
            work[nw, 0] = bl2
            work[nw, 1] = g2
            work[nw, 2] = k2
            nw += 1
    return OK


@njit(cache=True, nogil=True)
def _list_bytes(kb, row):
    """``row[3:7]``: the bytes with a bucket in ``kb`` (a list's 257 bucket offsets), as four
    64-bit words (stored as int64)."""
    w = np.zeros(4, np.uint64)
    for x in range(256):
        if kb[x + 1] > kb[x]:
            w[x >> 6] |= np.uint64(1) << np.uint64(x & 63)
    for i in range(4):
        row[3 + i] = np.int64(w[i])


@njit(cache=True, nogil=True)
def _covered(bl, bl_uoff, bl_un, bidx, bval, words, bstamp, cur):
    """1 when every token below boundary list ``bl`` is already in ``words``, 0 if not, -1 when
    ``bstamp`` is too small.

    ``bstamp[bl]`` is (stamp, words checked): where the stamp is ``cur`` (this mask), the first
    ``bstamp[bl, 1]`` words of the list were found allowed, and stay so (``words`` only grow), so a
    list asked again resumes there -- a list asked once per boundary (hundreds of times in a mask)
    costs its length once, not per question."""
    if bl >= bstamp.shape[0]:
        return -1
    o = bl_uoff[bl]
    n = bl_un[bl]
    k = bstamp[bl, 1] if bstamp[bl, 0] == cur else 0
    bstamp[bl, 0] = cur
    while k < n:
        if (words[bidx[o + k]] & bval[o + k]) != bval[o + k]:
            bstamp[bl, 1] = k
            return 0
        k += 1
    bstamp[bl, 1] = n
    return 1


@njit(cache=True, nogil=True)
def fill_entries(bls, gs, trans, gacc, gout, gterm, follow, node_byte, node_depth, node_end, tok_ptr, tok_ids,
                 ht_keys, ht_vals, ent_bl2, ent_boff, ent_bn, bidx, bval, bl_off, bl_nodes, bl_kb, bl_kids,
                 bl_term, bl_uoff, bl_un, cnt, scr_words, scr_nodes, lstack, nmark, nst, act, actn, isb,
                 ftrans, chain, cum, impure, u_trans, u_acc, u0):
    """Compute the entries ``(bls[i], gs[i])`` that are not cached yet (what
    :func:`expand_mask` would compute on first use).  Returns ``(done, status)``: how many
    pairs are done, stopping early at a full pool (``CACHE_FULL``) or scratch (``NODES_FULL``)."""
    NG = trans.shape[0]
    for i in range(gs.shape[0]):
        key = np.int64(bls[i]) * NG + gs[i]
        s = _slot(ht_keys, key)
        if ht_keys[s] != -1:
            continue
        if (cnt[C_HT] + 2) * 2 > ht_keys.shape[0]:
            return i, CACHE_FULL
        e = lex_fill(bls[i], gs[i], trans, gacc, gout, gterm, follow, node_byte, node_depth, node_end, tok_ptr,
                     tok_ids, ht_keys, ht_vals, ent_bl2, ent_boff, ent_bn, bidx, bval, bl_off, bl_nodes, bl_kb, bl_kids,
                     bl_term, bl_uoff, bl_un, cnt, scr_words, scr_nodes, lstack, nmark, nst, act, actn, isb,
                     ftrans, chain, cum, impure, u_trans, u_acc, u0)
        if e == -1:
            return i, CACHE_FULL
        if e == -2:
            return i, NODES_FULL
        ht_keys[s] = key
        ht_vals[s] = e
        cnt[C_HT] += 1
    return gs.shape[0], OK


@njit(cache=True, nogil=True)
def or_roots(gs, ht_keys, ht_vals, ent_boff, ent_bn, bidx, bval, words):
    """OR the cached bits of lexer states ``gs`` at the trie root (list 0) into ``words``;
    False (words partly written) when one is not cached yet."""
    for i in range(gs.shape[0]):
        key = np.int64(gs[i])
        s = _slot(ht_keys, key)
        if ht_keys[s] == -1:
            return False
        e = ht_vals[s]
        for k in range(ent_boff[e], ent_boff[e] + ent_bn[e]):
            words[bidx[k]] |= bval[k]
    return True


@njit(cache=True, nogil=True)
def expand_mask_packed(front, nfront, n_sets, fill, root_done, words, m, NN, u0, g, c, s):
    """:func:`expand_mask` with its arrays passed as four tables (:mod:`structgen.kernels.packed`):
    ``g`` the grammar's (:data:`PACKED_GRAMMAR`), ``c`` a cache snapshot's (:class:`CacheArrays`),
    ``s`` the cache's fill scratch (:class:`FillScratch`), ``m`` the matcher's (:data:`PACKED_MATCHER`).
    Twelve arguments instead of seventy: the call costs ~1 us instead of ~4.5 us."""
    i4, i8, u1, u4 = np.int32, np.int64, np.uint8, np.uint32
    return expand_mask(
        front, nfront, n_sets, view2(m, 0, i4), view1(m, 1, i4),
        NN, view1(g, 0, i4), view1(g, 1, i4), view1(g, 2, i4), view1(g, 3, i4), view1(g, 4, u1), view1(g, 5, i4),
        view2(g, 6, i4), view1(g, 7, u1), view1(g, 8, u1), view1(g, 9, i4), view1(g, 10, i4),
        view1(m, 2, i8), view1(m, 3, i8),
        view1(g, 11, u1), view1(g, 12, i4), view1(g, 13, i4), view1(g, 14, i4), view1(g, 15, i4),
        view1(c, 0, i8), view1(c, 1, i4), view1(c, 2, i4), view1(c, 3, i8), view1(c, 4, i4), view1(c, 5, i4),
        view1(c, 6, u4), view1(c, 7, i8), view1(c, 8, i4), view1(c, 9, i8), view1(c, 10, i4), view1(c, 11, i4),
        view1(c, 12, i8), view1(c, 13, i4), view1(c, 14, i8),
        view2(g, 16, u1), fill, root_done,
        view1(s, 0, u4), view1(s, 1, i4), view1(s, 2, i4), view1(s, 3, i8), view1(s, 4, i8), view2(s, 5, i4),
        view1(s, 6, i8), view1(s, 7, u1),
        view2(g, 17, i4), view1(g, 18, i4), view2(g, 19, u4), view1(g, 20, u1),
        view2(g, 21, i4), view1(g, 22, u1), u0, view2(g, 23, np.uint64),
        words, view1(m, 4, i8), view2(m, 5, i8), view2(m, 6, i4), view2(m, 7, i4), view1(m, 8, i8),
        view1(m, 9, i8), view1(m, 10, i8), view1(m, 11, i8), view2(m, 12, i4), view2(m, 13, i4),
        view1(m, 16, i8), view1(m, 17, i8), view1(m, 18, i4), view2(m, 19, i4))


@njit(cache=True, nogil=True)
def step_bytes_packed(data, front, nfront, n_sets, NN, g, m):
    """:func:`structgen.cfg.earley.step_bytes` with the grammar's and the matcher's arrays as
    the tables of :func:`expand_mask_packed` (its first eleven grammar rows are the Earley tables)."""
    i4, i8, u1 = np.int32, np.int64, np.uint8
    return earley.step_bytes(
        data, view2(m, 0, i4), view1(m, 1, i4), n_sets, front, nfront, view3(m, 15, i4), view2(m, 14, i4),
        NN, view1(g, 0, i4), view1(g, 1, i4), view1(g, 2, i4), view1(g, 3, i4), view1(g, 4, u1), view1(g, 5, i4),
        view2(g, 6, i4), view1(g, 7, u1), view1(g, 8, u1), view1(g, 9, i4), view1(g, 10, i4),
        view1(m, 2, i8), view1(m, 3, i8))


# ------------------------------------------------------------------ kernel argument records
#: The grammar's flat tables (:meth:`structgen.cfg.engine.Tables.args`; names as in :mod:`.earley`).
GrammarArrays = namedtuple("GrammarArrays", "NN dr_next dr_lhs nt_ptr nt_dr0 nullable final_dr trans gacc gout gterm "
                                            "tstart")
#: The vocabulary's DFS-flattened token trie (:class:`structgen.vocab.trie.TokenTrie`).
TrieArrays = namedtuple("TrieArrays", "node_byte node_depth node_end tok_ptr tok_ids")
#: The pools and hash table of a cache snapshot (:class:`structgen.cfg.cache.MaskCache`).
CacheArrays = namedtuple("CacheArrays", "ht_keys ht_vals ent_bl2 ent_boff ent_bn bidx bval bl_off bl_nodes bl_kb "
                                        "bl_kids bl_term bl_uoff bl_un cnt")
#: The scratch of a cache fill (used under the cache's lock).
FillScratch = namedtuple("FillScratch", "scr_words scr_nodes lstack nmark nst act actn isb")
#: Per grammar: the free lexer and the run tables
#: (:meth:`~structgen.cfg.engine.CompiledCFG.free_lexer`, :meth:`~structgen.cfg.engine.CompiledCFG.runs`).
LexerAids = namedtuple("LexerAids", "ftrans chain cum impure u_trans u_acc u0")

#: What callers splat into each kernel, in order: records and lists of single parameters.
KERNEL_ORDERS = {
    "earley.step_bytes": ("data items set_off n_sets front nfront fbuf comp", GrammarArrays, "mark stampbox"),
    "lex_fill": ("bl g trans gacc gout gterm follow", TrieArrays, CacheArrays, FillScratch, LexerAids),
    "fill_entries": ("bls gs trans gacc gout gterm follow", TrieArrays, CacheArrays, FillScratch, LexerAids),
}

#: The rows of :func:`expand_mask_packed`'s grammar table: what never changes for a compiled grammar.
PACKED_GRAMMAR = (GrammarArrays._fields[1:] + TrieArrays._fields + ("follow",) + LexerAids._fields[:-1]
                  + ("gfirst",))
#: The rows of :func:`expand_mask_packed`'s matcher table: a matcher's chart and per-mask scratch.
PACKED_MATCHER = ("items", "set_off", "mark", "stampbox", "estamp", "bstamp", "work", "ptask", "vkeys", "vstamp",
                  "pkeys", "pstamp", "pval", "predbuf", "comp", "fbuf", "wkeys", "wstamp", "wval", "wpool")


def check_kernel_orders() -> None:
    """Raise AssertionError when a kernel's parameters are not the concatenation of
    :data:`KERNEL_ORDERS` (a record reordered, a parameter added on one side only)."""
    for name, parts in KERNEL_ORDERS.items():
        want = []
        for part in parts:
            want += part.split() if isinstance(part, str) else list(part._fields)
        kernel = getattr(earley, name.split(".")[1]) if name.startswith("earley.") else globals()[name]
        have = list(inspect.signature(kernel.py_func).parameters)
        if have != want:
            raise AssertionError(f"mask.{name} takes {have}, its callers pass {want}")
    # the packed calls: each view's table row must name the parameter it is passed as
    rows = {"g": PACKED_GRAMMAR, "c": CacheArrays._fields, "s": FillScratch._fields, "m": PACKED_MATCHER}
    for packed, kernel in ((expand_mask_packed, expand_mask), (step_bytes_packed, earley.step_bytes)):
        call = next(n for n in ast.walk(ast.parse(inspect.getsource(packed.py_func))) if isinstance(n, ast.Call)
                    and kernel.py_func.__name__ in (getattr(n.func, "id", ""), getattr(n.func, "attr", "")))
        passed = [a.id if isinstance(a, ast.Name) else rows[a.args[0].id][a.args[1].value] for a in call.args]
        have = list(inspect.signature(kernel.py_func).parameters)
        if passed != have:
            raise AssertionError(f"mask.{packed.py_func.__name__} passes {passed}, its kernel takes {have}")


check_kernel_orders()
