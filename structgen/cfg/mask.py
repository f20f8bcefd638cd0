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

:func:`full_walk` is the slow reference: it steps the parser at every trie node.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .earley import predict_after, step_byte

# expand_mask status codes
OK = 0
MISS = 1        # read-only mode met a (boundary list, state) pair not in the cache
CACHE_FULL = 2  # a cache pool or its hash table must grow
CHART_FULL = 3  # the matcher's chart (items / set offsets / prediction buffer) must grow
SCRATCH_FULL = 4  # the matcher's per-mask scratch (worklist, hash sets, entry stamps) must grow
NODES_FULL = 5  # the boundary-node scratch of a lexer walk must grow

# counters of a MaskCache (the ``cnt`` array)
C_ENT, C_BITS, C_BL, C_NODES, C_HT, C_KIDS = 0, 1, 2, 3, 4, 5

# past this many trie nodes below a new boundary list, its "all allowed already" test uses every
# token below it instead of walking the free lexer there (a first visit must stay cheap)
FREE_WALK_NODES = 0

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
                # nothing walks through i: go to the next boundary inside its subtree, if any
                e = node_end[i]
                if k < nu and u[k] < e:
                    j = u[k]
                    for dd in range(d, node_depth[j]):
                        actn[dd] = 0
                        isb[dd] = 0
                    i = j
                else:
                    i = e
                continue
            i += 1
    return nb


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
def _char_step(c, trans, gacc, u_trans, u_acc, u0, pd, pu):
    """Where one character of the run character set takes lexer state ``c``: the state
    every character leads to, -1 when every one dies, -2 when they disagree (or the lexeme
    could end inside a character)."""
    return _char_rest(c, u0, trans, gacc, u_trans, u_acc, pd, pu)


@njit(cache=True, nogil=True)
def _char_rest(c, u, trans, gacc, u_trans, u_acc, pd, pu):
    """:func:`_char_step` from lexer state ``c`` with the character automaton in state ``u``
    (part of a character read): where the rest of every character leads."""
    out = -3
    pd[0] = c
    pu[0] = u
    n = 1
    head = 0
    while head < n:
        ds = pd[head]
        us = pu[head]
        head += 1
        for b in range(256):
            un = u_trans[us, b]
            if un < 0:
                continue
            dn = trans[ds, b]
            if dn < 0:
                res = -1
            elif u_acc[un]:
                res = dn
            else:
                if gacc[dn]:
                    return -2
                seen = False
                for q in range(n):
                    if pd[q] == dn and pu[q] == un:
                        seen = True
                        break
                if not seen:
                    if n == pd.shape[0]:
                        return -2
                    pd[n] = dn
                    pu[n] = un
                    n += 1
                continue
            if out == -3:
                out = res
            elif out != res:
                return -2
    return out


@njit(cache=True, nogil=True)
def chain_budget(g, trans, gacc, u_trans, u_acc, u0, maxc, chain):
    """``chain[g]``: the number ``r`` of run characters (up to ``maxc``) lexer state ``g``
    takes when every character of the set moves it alike -- through non-accepting states,
    one after another, until all die (a counted repetition, ``r`` left) or forever (a loop,
    ``maxc``) -- so that a token made only of run characters is allowed from ``g`` exactly
    when it has at most ``r`` of them; -1 when that does not hold.  Fills ``chain`` for the
    states met on the way where the value is exact."""
    if chain[g] != -2:
        return chain[g]
    pd = np.empty(64, np.int32)
    pu = np.empty(64, np.int32)
    path = np.empty(maxc + 2, np.int32)
    c = g
    r = maxc
    n = 0
    for k in range(maxc + 1):
        path[n] = c
        n += 1
        nxt = _char_step(c, trans, gacc, u_trans, u_acc, u0, pd, pu)
        if nxt == -2:
            chain[g] = -1
            return -1
        if nxt == -1:
            r = k
            for q in range(n):  # exact for every state of the chain
                chain[path[q]] = r - q
            return r
        if gacc[nxt]:
            chain[g] = -1
            return -1
        if nxt == c:  # a loop: unbounded
            for q in range(n):
                chain[path[q]] = maxc
            return maxc
        c = nxt
    chain[g] = maxc  # alive past the longest run token
    return maxc


@njit(cache=True, nogil=True)
def first_byte_budgets(g, trans, gacc, u_trans, u_acc, u0, maxc, chain, vals):
    """Per first byte ``x``, ``vals[x]``: -3 when no run character starts with ``x``; else,
    when every run character starting with ``x`` takes lexer state ``g`` alike -- through
    non-accepting states to one state ``f`` -- the number of run characters a token starting
    with one of them may have (``1 +`` :func:`chain_budget` of ``f``, at most ``maxc``; 0 when
    they all die), so that such a token made only of run characters is allowed from ``g``
    exactly when it has at most ``vals[x]`` of them; -1 when that does not hold."""
    pd = np.empty(64, np.int32)
    pu = np.empty(64, np.int32)
    for x in range(256):
        un = u_trans[u0, x]
        if un < 0:
            vals[x] = -3
            continue
        dn = trans[g, x]
        if dn < 0:
            vals[x] = 0
            continue
        if u_acc[un]:
            f = dn
        elif gacc[dn]:
            f = -2
        else:
            f = _char_rest(dn, un, trans, gacc, u_trans, u_acc, pd, pu)
        if f == -1:
            vals[x] = 0
        elif f < 0 or gacc[f]:
            vals[x] = -1
        else:
            r = chain_budget(f, trans, gacc, u_trans, u_acc, u0, maxc, chain)
            vals[x] = -1 if r < 0 else min(r + 1, maxc)


@njit(cache=True, nogil=True)
def split_budget(g, trans, gacc, u_trans, u_acc, u0, maxc, chain, kb, kids, node_end, tok_ptr, full):
    """For a root walk from a lexer state that run characters do not all move alike
    (:func:`chain_budget` -1): the budget ``R`` shared by the first bytes that hold most of
    the vocabulary (:func:`first_byte_budgets`), so that the run tokens starting with those
    come from the per-vocabulary table (``cum[R]``) and only the others need a full walk:
    ``full[x] = 1`` for the first bytes whose subtrees must be walked in full (their run
    tokens are not those of ``cum[R]``).  -1 (``full`` untouched) when that would not save
    at least half of the walk."""
    vals = np.empty(256, np.int64)
    first_byte_budgets(g, trans, gacc, u_trans, u_acc, u0, maxc, chain, vals)
    tk = np.zeros(256, np.int64)  # tokens below each first byte's children
    gain = np.zeros(maxc + 1, np.int64)
    base = 0
    total = 0
    for x in range(256):
        if vals[x] == -3:
            continue
        for q in range(kb[x], kb[x + 1]):
            c = kids[q]
            tk[x] += tok_ptr[node_end[c]] - tok_ptr[c]
        # cost of a bucket outside the shared budget: clear its bits, walk it (a dying one: clear)
        w = tk[x] if vals[x] == 0 else 2 * tk[x]
        total += w
        if vals[x] != 0:
            base += 2 * tk[x]
        if vals[x] >= 0:
            gain[vals[x]] += w
    best = 0
    for v in range(maxc + 1):
        if gain[v] > gain[best]:
            best = v
    if 2 * (total - gain[best]) >= base:
        return -1
    for x in range(256):
        full[x] = 1 if (vals[x] != -3 and vals[x] != best) else 0
    return best


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


@njit(cache=True, nogil=True)
def lex_fill(bl, g, trans, gacc, gout, gterm, follow, node_byte, node_depth, node_end, tok_ptr, tok_ids,
             ht_keys, ht_vals, ent_bl2, ent_boff, ent_bn, bidx, bval, bl_off, bl_nodes, bl_kb, bl_kids, bl_term, bl_uoff, bl_un, cnt,
             scr_words, scr_nodes, lstack, nmark, nst, act, actn, isb, ftrans, facc, fout,
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
    tokens below its nodes whose rest is a prefix of some sequence of lexemes (the
    free lexer ``ftrans``, parser ignored): a superset of what lexemes starting
    there can allow, so :func:`expand_mask` skips a list once they are all allowed.

    Root walks (list 0) from states inside a JSON string take the tokens made only of
    string characters ("run tokens") from the per-vocabulary table ``cum`` by length and
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
        # a root walk from a state counting run characters (inside a JSON string): the run
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
        span = 0
        for q in range(ko, ko + nk):
            span += node_end[bl_kids[q]] - bl_kids[q]
        if span <= FREE_WALK_NODES:
            union_walk(u, fb, 0, ftrans, facc, fout, node_byte, node_depth, node_end, tok_ptr, tok_ids,
                       nmark, st, act, actn, isb, scr_words, lstack)  # facc is all zero: no output
        else:  # a big subtree: every token below the children (a cheap, weaker superset)
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
                scr_words, scr_nodes, lstack, nmark, nst, act, actn, isb, ftrans, facc, fout,
                chain, cum, impure, u_trans, u_acc, u0, words, estamp, bstamp, work, ptask, vkeys, vstamp, pkeys, pstamp, pval, predbuf):
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

    Order: the bits of every queued (list, state, set) triple are OR-ed before the
    parser is asked about any boundary (queue ``ptask``), so a boundary list
    whose tokens are already all allowed is skipped without a prediction.

    Per-mask scratch of the matcher: ``estamp`` / ``bstamp`` (entry OR-ed / list
    known covered), ``work`` (triples), ``ptask`` (boundaries to predict after),
    ``vkeys/vstamp`` (triples seen), ``pkeys/pstamp/pval`` ((terminal, set) ->
    (temp set, offset, count) in ``predbuf``); the stamp tables are live where
    their stamp equals ``stampbox[1]``.

    Returns a status code (OK, MISS, CACHE_FULL, CHART_FULL, SCRATCH_FULL, NODES_FULL).
    """
    NG = trans.shape[0]
    T = tstart.shape[0]
    SC = np.int64(set_off.shape[0])
    stampbox[1] += 1
    cur = stampbox[1]
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
    nv = 0
    np_ = 0
    head = 0
    nt = 0
    thead = 0
    while True:
        if head < nw:
            bl = work[head, 0]
            g = work[head, 1]
            j = work[head, 2]
            head += 1
            if bl > 0 and _covered(bl, bl_uoff, bl_un, bidx, bval, words, bstamp, cur) != 0:
                continue
            key = np.int64(bl) * NG + g
            s = _slot(ht_keys, key)
            if ht_keys[s] == -1:
                if not fill:
                    return MISS
                if (cnt[C_HT] + 2) * 2 > ht_keys.shape[0]:
                    return CACHE_FULL
                e = lex_fill(bl, g, trans, gacc, gout, gterm, follow, node_byte, node_depth, node_end, tok_ptr,
                             tok_ids, ht_keys, ht_vals, ent_bl2, ent_boff, ent_bn, bidx, bval, bl_off, bl_nodes, bl_kb, bl_kids,
                             bl_term, bl_uoff, bl_un, cnt, scr_words, scr_nodes, lstack, nmark, nst, act, actn, isb,
                             ftrans, facc, fout, chain, cum, impure, u_trans, u_acc, u0)
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
            k2 = next_set
            if k2 + 2 >= set_off.shape[0]:
                return CHART_FULL
            pn = predict_after(t, j, items, set_off, k2, predbuf[npred:], NN, dr_next, dr_lhs, nt_ptr, nt_dr0,
                               nullable, final_dr, tstart, mark, stampbox)
            if pn < 0:
                return CHART_FULL
            po = npred
            npred += pn
            next_set += 1
            pkeys[ps] = pk
            pstamp[ps] = cur
            pval[ps, 0] = k2
            pval[ps, 1] = po
            pval[ps, 2] = pn
            np_ += 1
        for r in range(po, po + pn):
            g2 = predbuf[r, 0]
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
def _covered(bl, bl_uoff, bl_un, bidx, bval, words, bstamp, cur):
    """1 when every token below boundary list ``bl`` is already in ``words`` (remembered
    in ``bstamp`` for the rest of the mask: words only grow), 0 if not, -1 when
    ``bstamp`` is too small."""
    if bl >= bstamp.shape[0]:
        return -1
    if bstamp[bl] == cur:
        return 1
    for k in range(bl_uoff[bl], bl_uoff[bl] + bl_un[bl]):
        if (words[bidx[k]] & bval[k]) != bval[k]:
            return 0
    bstamp[bl] = cur
    return 1


@njit(cache=True, nogil=True)
def fill_entries(bls, gs, trans, gacc, gout, gterm, follow, node_byte, node_depth, node_end, tok_ptr, tok_ids,
                 ht_keys, ht_vals, ent_bl2, ent_boff, ent_bn, bidx, bval, bl_off, bl_nodes, bl_kb, bl_kids,
                 bl_term, bl_uoff, bl_un, cnt, scr_words, scr_nodes, lstack, nmark, nst, act, actn, isb,
                 ftrans, facc, fout, chain, cum, impure, u_trans, u_acc, u0):
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
                     ftrans, facc, fout, chain, cum, impure, u_trans, u_acc, u0)
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
def lexemes_within(trans, gacc, tstart, jtrans, jacc, j0):
    """Is every lexeme of the lexer (the words from each start ``tstart``) a word of the
    DFA ``jtrans`` (start ``j0``, accepting ``jacc``, full 256-column rows)?  A walk of
    the product automaton, trimmed lexer tables assumed."""
    NJ = jtrans.shape[0]
    seen = np.zeros(trans.shape[0] * NJ, np.uint8)
    stack = np.empty((max(1024, tstart.shape[0]), 2), np.int32)
    top = 0
    for i in range(tstart.shape[0]):
        g = tstart[i]
        if not seen[g * NJ + j0]:
            seen[g * NJ + j0] = 1
            stack[top, 0] = g
            stack[top, 1] = j0
            top += 1
    while top > 0:
        top -= 1
        g, j = stack[top, 0], stack[top, 1]
        if gacc[g] and not jacc[j]:
            return False
        for b in range(256):
            t = trans[g, b]
            if t < 0:
                continue
            u = jtrans[j, b]
            if u < 0:
                return False
            if not seen[t * NJ + u]:
                seen[t * NJ + u] = 1
                if top == stack.shape[0]:
                    more = np.empty((2 * top, 2), np.int32)
                    more[:top] = stack[:top]
                    stack = more
                stack[top, 0] = t
                stack[top, 1] = u
                top += 1
    return True
