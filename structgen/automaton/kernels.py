"""Numba kernels of the automaton builder: subset construction, Hopcroft, products.

Everything here works on flat numpy arrays (no typed containers), is compiled with
``@njit(cache=True, nogil=True)`` and knows nothing about regexes or the IR.  Growable
arrays are grown inside the kernels and handed back to the caller, which makes the
kernels resumable: the subset construction stops after ``budget`` units of work so the
Python driver can check a time limit between chunks, and before a table would outgrow
its memory bound.

Conventions: a DFA is ``trans int32[n, k]`` (-1 = dead) plus ``acc bool[n]`` with start
state 0.  Status codes returned by the resumable kernels are the ``ST_*`` constants.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..kernels.graph import reverse_csr

ST_DONE = 0
ST_BUDGET = 1
ST_LIMIT = 2
ST_MEMORY = 3

OP_AND = 0
OP_OR = 1
OP_DIFF = 2
OP_XOR = 3

_FNV_OFFSET = -3750763034362895579  # 14695981039346656037 as int64
_FNV_PRIME = 1099511628211


@njit(cache=True, nogil=True)
def _hash_ints(a, lo, hi):
    h = _FNV_OFFSET
    for i in range(lo, hi):
        h = (h ^ np.int64(a[i])) * _FNV_PRIME
    return h ^ (h >> 29)


# ----------------------------------------------------------------- subset construction


@njit(cache=True, nogil=True)
def _closure(seeds, lo, hi, e_ptr, e_dst, important, mark, gen, stack, out):
    """Epsilon closure of ``seeds[lo:hi]``; writes its *important* states to ``out``.

    Returns ``(how many were written, work)``, work being the seeds and epsilon edges looked at.
    ``mark`` is stamped with ``gen`` (no clearing)."""
    top = 0
    work = hi - lo
    for i in range(lo, hi):
        s = seeds[i]
        if mark[s] != gen:
            mark[s] = gen
            stack[top] = s
            top += 1
    k = 0
    while top > 0:
        top -= 1
        s = stack[top]
        if important[s]:
            out[k] = s
            k += 1
        work += e_ptr[s + 1] - e_ptr[s]
        for j in range(e_ptr[s], e_ptr[s + 1]):
            t = e_dst[j]
            if mark[t] != gen:
                mark[t] = gen
                stack[top] = t
                top += 1
    return k, work


@njit(cache=True, nogil=True)
def _rehash(set_ptr, pool, n, cap):
    htab = np.full(cap, -1, np.int32)
    mask = cap - 1
    for d in range(n):
        idx = _hash_ints(pool, set_ptr[d], set_ptr[d + 1]) & mask
        while htab[idx] != -1:
            idx = (idx + 1) & mask
        htab[idx] = d
    return htab


@njit(cache=True, nogil=True)
def _table_bytes(trans, acc, set_ptr, pool, htab):
    return trans.nbytes + acc.nbytes + set_ptr.nbytes + pool.nbytes + htab.nbytes


@njit(cache=True, nogil=True)
def subset_run(t_ptr, t_set, t_dst, sc_ptr, sc_cls, e_ptr, e_dst, important, start, final,
               n_classes, trans, acc, set_ptr, pool, htab, ctr, mark, max_states, budget, max_bytes):
    """Resumable subset construction over byte classes.

    NFA: byte transitions of state s are ``t_set/t_dst[t_ptr[s]:t_ptr[s+1]]`` where a
    transition set id ``q`` covers classes ``sc_cls[sc_ptr[q]:sc_ptr[q+1]]``; epsilon
    edges are ``e_dst[e_ptr[s]:e_ptr[s+1]]``.  A DFA state is the sorted tuple of the
    *important* NFA states (those with byte transitions, and ``final``) in a closure.

    ``ctr`` = [n_dfa, n_done, pool_used, gen, next class of state n_done, work done].  Work is
    counted in NFA-set operations (set members and transitions scanned, closure seeds and epsilon
    edges, successor set members sorted, compared and stored); a call returns ``ST_BUDGET`` once it
    has done ``budget`` of it, between two byte classes of a state when one state is that big (the
    next call redoes that state's successor buckets, so a stop mid-state waits until the closures
    since the call began outweigh them).  ``max_bytes`` bounds the growable tables (NFA sets, DFA
    transitions, hash table): a growth past it returns ``ST_MEMORY`` before allocating.  Returns
    ``(status, trans, acc, set_ptr, pool, htab)`` (arrays possibly regrown).
    """
    n_nfa = important.shape[0]
    stack = np.empty(n_nfa + 1, np.int32)
    buf = np.empty(n_nfa + 1, np.int32)
    cnt = np.zeros(n_classes + 1, np.int64)
    fill = np.zeros(n_classes, np.int64)
    work = 0

    if ctr[0] == 0:
        seed = np.empty(1, np.int32)
        seed[0] = start
        ctr[3] += 1
        k, w = _closure(seed, 0, 1, e_ptr, e_dst, important, mark, ctr[3], stack, buf)
        work += w + k
        key = np.sort(buf[:k])
        if k > pool.shape[0]:
            if _table_bytes(trans, acc, set_ptr, pool, htab) + 4 * (2 * k + 16) > max_bytes:
                return ST_MEMORY, trans, acc, set_ptr, pool, htab
            pool = np.empty(2 * k + 16, np.int32)
        pool[:k] = key
        set_ptr[0] = 0
        set_ptr[1] = k
        acc[0] = mark[final] == ctr[3]
        ctr[0] = 1
        ctr[2] = k
        h = _hash_ints(pool, 0, k) & (htab.shape[0] - 1)
        htab[h] = 0

    while ctr[1] < ctr[0]:
        if work >= budget:
            ctr[5] += work
            return ST_BUDGET, trans, acc, set_ptr, pool, htab
        d = ctr[1]
        a = set_ptr[d]
        b = set_ptr[d + 1]
        # Bucket the successors of the members of d by byte class.
        cnt[:] = 0
        for i in range(a, b):
            s = pool[i]
            for j in range(t_ptr[s], t_ptr[s + 1]):
                q = t_set[j]
                for r in range(sc_ptr[q], sc_ptr[q + 1]):
                    cnt[sc_cls[r] + 1] += 1
        for c in range(n_classes):
            cnt[c + 1] += cnt[c]
        bsize = cnt[n_classes]
        bucket = np.empty(bsize, np.int32)
        for c in range(n_classes):
            fill[c] = cnt[c]
        for i in range(a, b):
            s = pool[i]
            for j in range(t_ptr[s], t_ptr[s + 1]):
                q = t_set[j]
                t = t_dst[j]
                for r in range(sc_ptr[q], sc_ptr[q + 1]):
                    c = sc_cls[r]
                    bucket[fill[c]] = t
                    fill[c] += 1
        work += 2 * (b - a + bsize)
        c0 = ctr[4]
        cwork = 0  # closure work in this call for this state
        for c in range(c0, n_classes):
            if c > c0 and work >= budget and cwork >= bsize:
                ctr[4] = c
                ctr[5] += work
                return ST_BUDGET, trans, acc, set_ptr, pool, htab
            lo = cnt[c]
            hi = cnt[c + 1]
            if lo == hi:
                trans[d, c] = -1
                continue
            ctr[3] += 1
            gen = ctr[3]
            k, w = _closure(bucket, lo, hi, e_ptr, e_dst, important, mark, gen, stack, buf)
            w += 3 * k
            work += w
            cwork += w
            if k == 0:
                trans[d, c] = -1
                continue
            key = np.sort(buf[:k])
            h = _hash_ints(key, 0, k)
            hmask = htab.shape[0] - 1
            idx = h & hmask
            found = -1
            while htab[idx] != -1:
                e = htab[idx]
                ea = set_ptr[e]
                if set_ptr[e + 1] - ea == k:
                    same = True
                    for z in range(k):
                        if pool[ea + z] != key[z]:
                            same = False
                            break
                    if same:
                        found = e
                        break
                idx = (idx + 1) & hmask
            if found < 0:
                nid = ctr[0]
                if nid >= max_states:
                    ctr[5] += work
                    return ST_LIMIT, trans, acc, set_ptr, pool, htab
                if nid + 1 >= trans.shape[0]:
                    cap = 2 * trans.shape[0]
                    if _table_bytes(trans, acc, set_ptr, pool, htab) + cap * (4 * n_classes + 9) + 8 > max_bytes:
                        ctr[5] += work
                        return ST_MEMORY, trans, acc, set_ptr, pool, htab
                    t2 = np.empty((cap, n_classes), np.int32)
                    t2[: trans.shape[0]] = trans
                    trans = t2
                    a2 = np.zeros(cap, np.bool_)
                    a2[: acc.shape[0]] = acc
                    acc = a2
                    p2 = np.zeros(cap + 1, np.int64)
                    p2[: set_ptr.shape[0]] = set_ptr
                    set_ptr = p2
                used = ctr[2]
                if used + k > pool.shape[0]:
                    grown = used + k + (used + k) // 2  # 1.5x: the copy briefly holds both
                    if _table_bytes(trans, acc, set_ptr, pool, htab) + 4 * grown > max_bytes:
                        ctr[5] += work
                        return ST_MEMORY, trans, acc, set_ptr, pool, htab
                    pl2 = np.empty(grown, np.int32)
                    pl2[:used] = pool[:used]
                    pool = pl2
                pool[used:used + k] = key
                set_ptr[nid + 1] = used + k
                ctr[2] = used + k
                acc[nid] = mark[final] == gen
                ctr[0] = nid + 1
                if 2 * (nid + 1) > htab.shape[0]:
                    if _table_bytes(trans, acc, set_ptr, pool, htab) + 8 * htab.shape[0] > max_bytes:
                        ctr[5] += work
                        return ST_MEMORY, trans, acc, set_ptr, pool, htab
                    htab = _rehash(set_ptr, pool, nid + 1, 2 * htab.shape[0])
                else:
                    htab[idx] = nid
                found = nid
            trans[d, c] = found
        ctr[4] = 0
        ctr[1] = d + 1
    ctr[5] += work
    return ST_DONE, trans, acc, set_ptr, pool, htab


# ----------------------------------------------------------------------- minimisation


@njit(cache=True, nogil=True)
def hopcroft(trans, acc):
    """Coarsest partition of a partial DFA's states into language-equivalence blocks.

    The DFA is completed with a sink (index n), so every state that cannot reach
    acceptance lands in the sink's block.  Returns ``(block int64[n+1], n_blocks)``.
    Block-level worklist variant of Hopcroft: when a block splits, the smaller half
    is queued (and relabelled), which keeps the O(k n log n) bound.
    """
    n = trans.shape[0]
    k = trans.shape[1]
    N = n + 1
    # Inverse transitions, CSR keyed by (class, target).
    ptr = np.zeros(k * N + 1, np.int64)
    for s in range(N):
        for c in range(k):
            t = n
            if s < n:
                t = trans[s, c]
                if t < 0:
                    t = n
            ptr[c * N + t + 1] += 1
    for i in range(k * N):
        ptr[i + 1] += ptr[i]
    src = np.empty(k * N, np.int32)
    pos = ptr[:-1].copy()
    for s in range(N):
        for c in range(k):
            t = n
            if s < n:
                t = trans[s, c]
                if t < 0:
                    t = n
            src[pos[c * N + t]] = s
            pos[c * N + t] += 1

    elems = np.empty(N, np.int64)
    loc = np.empty(N, np.int64)
    blk = np.zeros(N, np.int64)
    bstart = np.zeros(N, np.int64)
    bend = np.zeros(N, np.int64)
    n_acc = 0
    for s in range(n):
        if acc[s]:
            n_acc += 1
    # Accepting states first, then the rest (sink included).
    ia = 0
    ir = n_acc
    for s in range(N):
        if s < n and acc[s]:
            elems[ia] = s
            loc[s] = ia
            ia += 1
        else:
            elems[ir] = s
            loc[s] = ir
            ir += 1
    nb = 0
    if n_acc > 0:
        bstart[0] = 0
        bend[0] = n_acc
        for i in range(n_acc):
            blk[elems[i]] = 0
        nb = 1
    bstart[nb] = n_acc
    bend[nb] = N
    for i in range(n_acc, N):
        blk[elems[i]] = nb
    nb += 1

    work = np.empty(N, np.int64)
    in_w = np.zeros(N, np.bool_)
    nw = 0
    if nb == 2:
        smaller = 0 if n_acc <= N - n_acc else 1
        work[0] = smaller
        in_w[smaller] = True
        nw = 1
    marked = np.zeros(N, np.int64)
    touched = np.empty(N, np.int64)
    snap = np.empty(N, np.int64)

    while nw > 0:
        nw -= 1
        B = work[nw]
        in_w[B] = False
        ns = bend[B] - bstart[B]
        for i in range(ns):
            snap[i] = elems[bstart[B] + i]
        for c in range(k):
            nt = 0
            for i in range(ns):
                t = snap[i]
                for j in range(ptr[c * N + t], ptr[c * N + t + 1]):
                    s = src[j]
                    Y = blk[s]
                    p = loc[s]
                    q = bstart[Y] + marked[Y]
                    if p < q:
                        continue  # already marked
                    if marked[Y] == 0:
                        touched[nt] = Y
                        nt += 1
                    u = elems[q]
                    elems[q] = s
                    loc[s] = q
                    elems[p] = u
                    loc[u] = p
                    marked[Y] += 1
            for i in range(nt):
                Y = touched[i]
                m = marked[Y]
                marked[Y] = 0
                size = bend[Y] - bstart[Y]
                if m == size:
                    continue
                Z = nb
                nb += 1
                if m <= size - m:
                    # New block = marked part (the front).
                    bstart[Z] = bstart[Y]
                    bend[Z] = bstart[Y] + m
                    bstart[Y] = bend[Z]
                else:
                    bstart[Z] = bstart[Y] + m
                    bend[Z] = bend[Y]
                    bend[Y] = bstart[Z]
                for p in range(bstart[Z], bend[Z]):
                    blk[elems[p]] = Z
                # Y in W: both halves must be processed; else the smaller suffices.
                work[nw] = Z
                in_w[Z] = True
                nw += 1
    return blk, nb


@njit(cache=True, nogil=True)
def quotient(trans, acc, blk, n_blocks):
    """The minimal DFA from a Hopcroft partition, BFS-renumbered from the start state.

    The sink's block is dropped (transitions into it become -1).  Returns
    ``(trans int32[m, k], acc bool[m])``; for the empty language ``m == 1`` with no
    transitions and no acceptance."""
    n = trans.shape[0]
    k = trans.shape[1]
    sink = blk[n]
    rep = np.full(n_blocks, -1, np.int64)
    for s in range(n):
        if rep[blk[s]] < 0:
            rep[blk[s]] = s
    new_id = np.full(n_blocks, -1, np.int64)
    order = np.empty(n_blocks, np.int64)
    b0 = blk[0]
    if b0 == sink:
        t = np.full((1, k), -1, np.int32)
        a = np.zeros(1, np.bool_)
        return t, a
    new_id[b0] = 0
    order[0] = b0
    m = 1
    head = 0
    while head < m:
        b = order[head]
        head += 1
        s = rep[b]
        for c in range(k):
            t = trans[s, c]
            if t < 0:
                continue
            bt = blk[t]
            if bt == sink or new_id[bt] >= 0:
                continue
            new_id[bt] = m
            order[m] = bt
            m += 1
    out = np.full((m, k), -1, np.int32)
    out_acc = np.zeros(m, np.bool_)
    for i in range(m):
        s = rep[order[i]]
        out_acc[i] = acc[s]
        for c in range(k):
            t = trans[s, c]
            if t < 0:
                continue
            bt = blk[t]
            if bt != sink:
                out[i, c] = new_id[bt]
    return out, out_acc


@njit(cache=True, nogil=True)
def trim(trans, acc):
    """Keep the states reachable from 0 that can reach acceptance (no merging).

    Returns ``(trans, acc)`` renumbered in BFS order; the empty language gives one
    dead start state."""
    n = trans.shape[0]
    k = trans.shape[1]
    # Co-reachability by reverse fixpoint over a reverse CSR.
    rptr, rsrc = reverse_csr(trans)
    live = np.zeros(n, np.bool_)
    stack = np.empty(n, np.int64)
    top = 0
    for s in range(n):
        if acc[s]:
            live[s] = True
            stack[top] = s
            top += 1
    while top > 0:
        top -= 1
        t = stack[top]
        for j in range(rptr[t], rptr[t + 1]):
            s = rsrc[j]
            if not live[s]:
                live[s] = True
                stack[top] = s
                top += 1
    if n == 0 or not live[0]:
        return np.full((1, k), -1, np.int32), np.zeros(1, np.bool_)
    new_id = np.full(n, -1, np.int64)
    order = np.empty(n, np.int64)
    new_id[0] = 0
    order[0] = 0
    m = 1
    head = 0
    while head < m:
        s = order[head]
        head += 1
        for c in range(k):
            t = trans[s, c]
            if t >= 0 and live[t] and new_id[t] < 0:
                new_id[t] = m
                order[m] = t
                m += 1
    out = np.full((m, k), -1, np.int32)
    out_acc = np.zeros(m, np.bool_)
    for i in range(m):
        s = order[i]
        out_acc[i] = acc[s]
        for c in range(k):
            t = trans[s, c]
            if t >= 0 and live[t]:
                out[i, c] = new_id[t]
    return out, out_acc


# --------------------------------------------------------------------------- products


@njit(cache=True, nogil=True)
def product(ta, acc_a, tb, acc_b, ca, cb, op, max_states):
    """Reachable product of two trimmed DFAs over joint classes ``(ca[j], cb[j])``.

    A dead side is tracked as the sink index ``n_a`` / ``n_b`` so union, difference and
    symmetric difference are exact.  Returns ``(status, trans, acc)``; status is
    ``ST_LIMIT`` when more than ``max_states`` pairs are reachable.
    """
    na = ta.shape[0]
    nb = tb.shape[0]
    kj = ca.shape[0]
    stride = np.int64(nb + 1)
    cap = 64
    trans = np.empty((cap, kj), np.int32)
    acc = np.zeros(cap, np.bool_)
    pa = np.empty(cap, np.int64)
    pb = np.empty(cap, np.int64)
    hcap = 128
    hkey = np.full(hcap, -1, np.int64)
    hval = np.empty(hcap, np.int32)

    pa[0] = 0
    pb[0] = 0
    hkey[_hash_pair(0, hcap)] = 0
    hval[_hash_pair(0, hcap)] = 0
    n = 1
    head = 0
    while head < n:
        x = pa[head]
        y = pb[head]
        ax = x < na and acc_a[x]
        by = y < nb and acc_b[y]
        if op == OP_AND:
            acc[head] = ax and by
        elif op == OP_OR:
            acc[head] = ax or by
        elif op == OP_DIFF:
            acc[head] = ax and not by
        else:
            acc[head] = ax != by
        for j in range(kj):
            x2 = na
            if x < na:
                x2 = ta[x, ca[j]]
                if x2 < 0:
                    x2 = na
            y2 = nb
            if y < nb:
                y2 = tb[y, cb[j]]
                if y2 < 0:
                    y2 = nb
            dead = False
            if x2 == na and y2 == nb:
                dead = True
            elif op == OP_AND and (x2 == na or y2 == nb):
                dead = True
            elif op == OP_DIFF and x2 == na:
                dead = True
            if dead:
                trans[head, j] = -1
                continue
            key = x2 * stride + y2
            idx = _hash_pair(key, hcap)
            while hkey[idx] != -1 and hkey[idx] != key:
                idx = (idx + 1) & (hcap - 1)
            if hkey[idx] == key:
                trans[head, j] = hval[idx]
                continue
            if n >= max_states:
                return ST_LIMIT, trans[:n], acc[:n]
            if n >= cap:
                cap *= 2
                t2 = np.empty((cap, kj), np.int32)
                t2[:n] = trans[:n]
                trans = t2
                a2 = np.zeros(cap, np.bool_)
                a2[:n] = acc[:n]
                acc = a2
                p2 = np.empty(cap, np.int64)
                p2[:n] = pa[:n]
                pa = p2
                p3 = np.empty(cap, np.int64)
                p3[:n] = pb[:n]
                pb = p3
            pa[n] = x2
            pb[n] = y2
            hkey[idx] = key
            hval[idx] = n
            trans[head, j] = n
            n += 1
            if 2 * n > hcap:
                hcap *= 2
                hkey = np.full(hcap, -1, np.int64)
                hval = np.empty(hcap, np.int32)
                for i in range(n):
                    kk = pa[i] * stride + pb[i]
                    ii = _hash_pair(kk, hcap)
                    while hkey[ii] != -1:
                        ii = (ii + 1) & (hcap - 1)
                    hkey[ii] = kk
                    hval[ii] = i
        head += 1
    return ST_DONE, trans[:n], acc[:n]


@njit(cache=True, nogil=True)
def _hash_pair(key, cap):
    h = (key * -7046029254386353131) ^ (key >> 31)
    h = h ^ (h >> 29)
    return h & (cap - 1)


# ------------------------------------------------------------------ class compression


@njit(cache=True, nogil=True)
def column_groups(trans):
    """Group id per column of ``trans`` (ids in order of first appearance); equal ids
    exactly for identical columns."""
    n = trans.shape[0]
    k = trans.shape[1]
    h = np.empty(k, np.int64)
    for c in range(k):
        x = _FNV_OFFSET
        for s in range(n):
            x = (x ^ np.int64(trans[s, c])) * _FNV_PRIME
        h[c] = x
    gid = np.full(k, -1, np.int64)
    rep = np.empty(k, np.int64)
    ng = 0
    for c in range(k):
        for g in range(ng):
            r = rep[g]
            if h[r] != h[c]:
                continue
            same = True
            for s in range(n):
                if trans[s, r] != trans[s, c]:
                    same = False
                    break
            if same:
                gid[c] = g
                break
        if gid[c] < 0:
            gid[c] = ng
            rep[ng] = c
            ng += 1
    return gid


@njit(cache=True, nogil=True)
def csr_by_source(src, a, b, n):
    """Counting sort of edges ``(src, a, b)`` by source: ``(ptr int64[n+1], a, b)``."""
    m = src.shape[0]
    ptr = np.zeros(n + 1, np.int64)
    for i in range(m):
        ptr[src[i] + 1] += 1
    for i in range(n):
        ptr[i + 1] += ptr[i]
    fill = ptr[:-1].copy()
    oa = np.empty(m, np.int32)
    ob = np.empty(m, np.int32)
    for i in range(m):
        j = fill[src[i]]
        oa[j] = a[i]
        ob[j] = b[i]
        fill[src[i]] = j + 1
    return ptr, oa, ob


# ------------------------------------------------------------ acyclic minimisation


@njit(cache=True, nogil=True)
def acyclic_blocks(trans, acc):
    """Language-equivalence blocks of an *acyclic* DFA, bottom-up (Revuz): states are
    visited in reverse topological order and merged when they agree on acceptance and on the
    blocks of their successors -- O(n k), against Hopcroft's O(k n log n) with a larger constant.
    Returns ``(block int64[n+1], n_blocks)`` as :func:`hopcroft` does (index n: the dead sink, a
    block of its own), or ``(block, -1)`` when the DFA has a cycle."""
    n = trans.shape[0]
    k = trans.shape[1]
    blk = np.full(n + 1, -1, np.int64)
    # iterative DFS post-order from every state; colour 0 new, 1 on stack, 2 done
    colour = np.zeros(n, np.int8)
    order = np.empty(n, np.int64)
    n_order = 0
    stack = np.empty(n, np.int64)
    edge = np.empty(n, np.int64)
    for root in range(n):
        if colour[root] != 0:
            continue
        top = 0
        stack[0] = root
        edge[0] = 0
        colour[root] = 1
        while top >= 0:
            s = stack[top]
            c = edge[top]
            pushed = False
            while c < k:
                t = trans[s, c]
                c += 1
                if t < 0:
                    continue
                if colour[t] == 1:
                    return blk, -1  # a cycle
                if colour[t] == 0:
                    edge[top] = c
                    top += 1
                    stack[top] = t
                    edge[top] = 0
                    colour[t] = 1
                    pushed = True
                    break
            if not pushed:
                colour[s] = 2
                order[n_order] = s
                n_order += 1
                top -= 1
    # signatures in post-order (successors first), hashed
    cap = 16
    while cap < 2 * n + 2:
        cap *= 2
    htab = np.full(cap, -1, np.int64)
    rep = np.empty(n + 1, np.int64)   # block -> representative state
    nb = 0
    for i in range(n_order):
        s = order[i]
        if not acc[s]:
            dead = True
            for c in range(k):
                t = trans[s, c]
                if t >= 0 and blk[t] >= 0:
                    dead = False
                    break
            if dead:
                continue  # cannot reach acceptance: the sink's block (-1 until the end)
        h = _FNV_OFFSET
        h = (h ^ np.int64(acc[s])) * _FNV_PRIME
        for c in range(k):
            t = trans[s, c]
            b = np.int64(-1) if t < 0 else blk[t]
            h = (h ^ b) * _FNV_PRIME
        idx = (h ^ (h >> 29)) & (cap - 1)
        found = -1
        while htab[idx] != -1:
            r = rep[htab[idx]]
            if acc[r] == acc[s]:
                same = True
                for c in range(k):
                    a = trans[r, c]
                    b = trans[s, c]
                    ba = np.int64(-1) if a < 0 else blk[a]
                    bb = np.int64(-1) if b < 0 else blk[b]
                    if ba != bb:
                        same = False
                        break
                if same:
                    found = htab[idx]
                    break
            idx = (idx + 1) & (cap - 1)
        if found < 0:
            found = nb
            rep[nb] = s
            htab[idx] = nb
            nb += 1
        blk[s] = found
    for s in range(n + 1):
        if blk[s] < 0:
            blk[s] = nb  # the sink, and every state that cannot reach acceptance
    return blk, nb + 1
