"""Numba kernels of the diffusion DPs over (position, state), one sequence per call.

Inputs shared by every kernel (see :mod:`.transitions` for the grouped edges):

- ``lp[L, V]``: natural-log probabilities; ``mode[L]`` (int8): 0 = read ``lp``, 1 = the token
  ``tok[i]`` is fixed (log-prob 0), 2 = a hole (exactly one unknown token: every edge, weight 0),
  3 = a trailing hole already folded into ``endw`` (the state does not move);
  ``start``: local start state; ``endw[n]``: 0 for states the sequence may end in, -inf otherwise.
- Token classes and groups of classes as in :mod:`.transitions` (``tcls``, ``cptr``/``ctok``,
  ``gptr``/``gcls``).  Per visible position the class maxima / log-sum-exps are one pass over the
  allowed tokens; group values are computed lazily, only for groups leaving a state the DP has
  reached (``stamp`` arrays); then one pass over the edges.

Ties: the first edge in (source, destination) order, the smallest token id, the smallest end state.
The sum kernels (forward, sample, marginals) take no holes: the caller strips trailing holes into
``endw`` and hands interior holes to :mod:`.subsets`.
"""
from __future__ import annotations

import numpy as np
from numba import njit

NEG = -np.inf


@njit(cache=True, nogil=True)
def _member(sorted_ids, lo, hi, t):
    """Is ``t`` in the sorted slice ``sorted_ids[lo:hi]``?"""
    while lo < hi:
        mid = (lo + hi) >> 1
        v = sorted_ids[mid]
        if v < t:
            lo = mid + 1
        elif v > t:
            hi = mid
        else:
            return True
    return False


@njit(cache=True, nogil=True)
def _class_stats(row, cptr, ctok, use_lse, cval, carg):
    """Per class: the max and smallest arg-max token of ``row`` (or, with ``use_lse``, the log-sum-exp)."""
    C = cptr.size - 1
    for c in range(C):
        best = NEG
        arg = -1
        for k in range(cptr[c], cptr[c + 1]):
            v = row[ctok[k]]
            if v > best:
                best = v
                arg = ctok[k]
        if use_lse and best != NEG:
            s = 0.0
            for k in range(cptr[c], cptr[c + 1]):
                s += np.exp(row[ctok[k]] - best)
            best = best + np.log(s)
        cval[c] = best
        carg[c] = arg


@njit(cache=True, nogil=True)
def _group_value(g, gptr, gcls, cval, carg, use_lse):
    """(value, token): the max over the group's classes and its smallest arg-max token, or the
    log-sum-exp (token -1)."""
    best = NEG
    tok = -1
    if use_lse:
        for k in range(gptr[g], gptr[g + 1]):
            v = cval[gcls[k]]
            if v > best:
                best = v
        if best == NEG:
            return NEG, -1
        s = 0.0
        for k in range(gptr[g], gptr[g + 1]):
            s += np.exp(cval[gcls[k]] - best)
        return best + np.log(s), -1
    for k in range(gptr[g], gptr[g + 1]):
        c = gcls[k]
        v = cval[c]
        if v > best or (v == best and v != NEG and carg[c] < tok):
            best = v
            tok = carg[c]
    return best, tok


@njit(cache=True, nogil=True)
def _edge_weights(lp, mode, tok, i, W, tcls, cptr, ctok, gptr, gcls, esrc, egrp, use_lse, cval, carg,
                  gval, garg, gstamp, stamp, out):
    """Weights of every edge at position ``i`` (-inf for edges leaving unreached states); for mode 0
    also ``garg[g]`` (the best token of each group computed)."""
    m = mode[i]
    if m == 0:
        _class_stats(lp[i], cptr, ctok, use_lse, cval, carg)
    for e in range(esrc.size):
        if W[esrc[e]] == NEG:
            out[e] = NEG
            continue
        g = egrp[e]
        if m == 2:
            out[e] = 0.0
        elif m == 1:
            if gstamp[g] != stamp:    # membership once per group, not once per edge
                c = tcls[tok[i]]
                gval[g] = 0.0 if c >= 0 and _member(gcls, gptr[g], gptr[g + 1], c) else NEG
                gstamp[g] = stamp
            out[e] = gval[g]
        else:
            if gstamp[g] != stamp:
                v, t = _group_value(g, gptr, gcls, cval, carg, use_lse)
                gval[g] = v
                garg[g] = t
                gstamp[g] = stamp
            out[e] = gval[g]


@njit(cache=True, nogil=True)
def dingo_kernel(lp, mode, tok, start, endw, n, tcls, cptr, ctok, gptr, gcls, esrc, edst, egrp, out_tok):
    """Viterbi over (position, state); writes the best tokens (-1 at holes) into ``out_tok`` and
    returns their score (-inf when no sequence is valid)."""
    L = mode.size
    E = esrc.size
    G = gptr.size - 1
    C = cptr.size - 1
    W = np.full(n, NEG)
    W[start] = 0.0
    be = np.full((L, n), -1, dtype=np.int32)
    bt = np.full((L, n), -1, dtype=np.int64)   # the token of the best edge into each state
    cval = np.empty(C)
    carg = np.empty(C, dtype=np.int64)
    gval = np.empty(G)
    garg = np.empty(G, dtype=np.int64)
    gstamp = np.full(G, -1, dtype=np.int64)
    w = np.empty(E)
    for i in range(L):
        if mode[i] == 3:
            continue
        _edge_weights(lp, mode, tok, i, W, tcls, cptr, ctok, gptr, gcls, esrc, egrp, False, cval, carg,
                      gval, garg, gstamp, i, w)
        Wn = np.full(n, NEG)
        for e in range(E):
            if w[e] == NEG:
                continue
            c = W[esrc[e]] + w[e]
            d = edst[e]
            if c > Wn[d]:
                Wn[d] = c
                be[i, d] = e
        if mode[i] == 0:
            for d in range(n):
                if be[i, d] >= 0:
                    bt[i, d] = garg[egrp[be[i, d]]]
        W = Wn
    best = NEG
    q = -1
    for s in range(n):
        v = W[s] + endw[s]
        if v > best:
            best = v
            q = s
    if q < 0:
        return NEG
    for i in range(L - 1, -1, -1):
        m = mode[i]
        if m == 3:
            out_tok[i] = -1
            continue
        e = be[i, q]
        if m == 2:
            out_tok[i] = -1
        elif m == 1:
            out_tok[i] = tok[i]
        else:
            out_tok[i] = bt[i, q]
        q = esrc[e]
    return best


@njit(cache=True, nogil=True)
def forward_kernel(lp, mode, tok, start, n, tcls, cptr, ctok, gptr, gcls, esrc, edst, egrp, A, ew, clse):
    """Forward log-sums: ``A[i, q]`` = log Σ over prefixes of length i ending in q; ``ew[i, e]``
    the edge log-weights and ``clse[i, c]`` the class log-sum-exps at position i."""
    L = mode.size
    E = esrc.size
    G = gptr.size - 1
    C = cptr.size - 1
    A[:, :] = NEG
    A[0, start] = 0.0
    carg = np.empty(C, dtype=np.int64)
    gval = np.empty(G)
    garg = np.empty(G, dtype=np.int64)
    gstamp = np.full(G, -1, dtype=np.int64)
    for i in range(L):
        if mode[i] == 3:
            A[i + 1, :] = A[i, :]
            ew[i, :] = NEG
            continue
        _edge_weights(lp, mode, tok, i, A[i], tcls, cptr, ctok, gptr, gcls, esrc, egrp, True, clse[i], carg,
                      gval, garg, gstamp, i, ew[i])
        # per destination: max first, then the sum of exponentials (stable log-sum-exp)
        mx = np.full(n, NEG)
        for e in range(E):
            if ew[i, e] != NEG:
                c = A[i, esrc[e]] + ew[i, e]
                if c > mx[edst[e]]:
                    mx[edst[e]] = c
        acc = np.zeros(n)
        for e in range(E):
            if ew[i, e] != NEG:
                d = edst[e]
                acc[d] += np.exp(A[i, esrc[e]] + ew[i, e] - mx[d])
        for d in range(n):
            if mx[d] != NEG:
                A[i + 1, d] = mx[d] + np.log(acc[d])


@njit(cache=True, nogil=True)
def log_total(A_last, endw):
    m = NEG
    for q in range(A_last.size):
        v = A_last[q] + endw[q]
        if v > m:
            m = v
    if m == NEG:
        return NEG
    s = 0.0
    for q in range(A_last.size):
        v = A_last[q] + endw[q]
        if v != NEG:
            s += np.exp(v - m)
    return m + np.log(s)


@njit(cache=True, nogil=True)
def _pick(weights, lo, hi, u):
    """Index in [lo, hi) drawn with probability ∝ ``weights`` (linear scan; u in [0, 1))."""
    total = 0.0
    for k in range(lo, hi):
        total += weights[k]
    target = u * total
    acc = 0.0
    last = -1
    for k in range(lo, hi):
        if weights[k] > 0.0:
            acc += weights[k]
            last = k
            if acc > target:
                return k
    return last


@njit(cache=True, nogil=True)
def sample_kernel(lp, mode, tok, endw, n, cptr, ctok, gptr, gcls, esrc, egrp, iptr, iedge, A, ew, clse, logz,
                  uniforms, out):
    """Backward sampling after :func:`forward_kernel`; ``uniforms[s, 3 * L + 1]`` in [0, 1);
    writes ``out[s, L]``.  A token of a group: a class ∝ its mass, then a token of the class."""
    L = mode.size
    S = out.shape[0]
    endp = np.empty(n)
    for q in range(n):
        v = A[L, q] + endw[q]
        endp[q] = np.exp(v - logz) if v != NEG else 0.0
    maxin = 1
    for q in range(n):
        if iptr[q + 1] - iptr[q] > maxin:
            maxin = iptr[q + 1] - iptr[q]
    inw = np.empty(maxin)
    maxg = 1
    for g in range(gptr.size - 1):
        if gptr[g + 1] - gptr[g] > maxg:
            maxg = gptr[g + 1] - gptr[g]
    cw = np.empty(maxg)
    maxc = 1
    for c in range(cptr.size - 1):
        if cptr[c + 1] - cptr[c] > maxc:
            maxc = cptr[c + 1] - cptr[c]
    tw = np.empty(maxc)
    for s in range(S):
        q = _pick(endp, 0, n, uniforms[s, 0])
        for i in range(L - 1, -1, -1):
            if mode[i] == 3:
                out[s, i] = -1
                continue
            lo, hi = iptr[q], iptr[q + 1]
            mx = NEG
            for k in range(lo, hi):
                e = iedge[k]
                v = A[i, esrc[e]] + ew[i, e] if ew[i, e] != NEG else NEG
                inw[k - lo] = v
                if v > mx:
                    mx = v
            for k in range(hi - lo):
                inw[k] = np.exp(inw[k] - mx) if inw[k] != NEG else 0.0
            e = iedge[lo + _pick(inw, 0, hi - lo, uniforms[s, 1 + 3 * i])]
            g = egrp[e]
            if mode[i] == 1:
                out[s, i] = tok[i]
            else:
                a, b = gptr[g], gptr[g + 1]
                cm = NEG
                for k in range(a, b):
                    if clse[i, gcls[k]] > cm:
                        cm = clse[i, gcls[k]]
                for k in range(a, b):
                    v = clse[i, gcls[k]]
                    cw[k - a] = np.exp(v - cm) if v != NEG else 0.0
                c = gcls[a + _pick(cw, 0, b - a, uniforms[s, 2 + 3 * i])]
                row = lp[i]
                ca, cb = cptr[c], cptr[c + 1]
                for k in range(ca, cb):
                    tw[k - ca] = np.exp(row[ctok[k]] - clse[i, c])
                out[s, i] = ctok[ca + _pick(tw, 0, cb - ca, uniforms[s, 3 + 3 * i])]
            q = esrc[e]


@njit(cache=True, nogil=True)
def marginals_kernel(lp, mode, tok, endw, n, cptr, ctok, gptr, gcls, esrc, edst, egrp, A, ew, logz, out):
    """Constrained marginals ``out[L, V]`` after :func:`forward_kernel` (``logz`` finite)."""
    L = mode.size
    E = esrc.size
    G = gptr.size - 1
    C = cptr.size - 1
    B = np.empty((L + 1, n))
    B[L, :] = endw
    for i in range(L - 1, -1, -1):
        if mode[i] == 3:
            B[i, :] = B[i + 1, :]
            continue
        mx = np.full(n, NEG)
        for e in range(E):
            if ew[i, e] != NEG and B[i + 1, edst[e]] != NEG:
                c = ew[i, e] + B[i + 1, edst[e]]
                if c > mx[esrc[e]]:
                    mx[esrc[e]] = c
        acc = np.zeros(n)
        for e in range(E):
            if ew[i, e] != NEG and B[i + 1, edst[e]] != NEG:
                acc[esrc[e]] += np.exp(ew[i, e] + B[i + 1, edst[e]] - mx[esrc[e]])
        for q in range(n):
            B[i, q] = mx[q] + np.log(acc[q]) if mx[q] != NEG else NEG
    cg = np.empty(G)  # per group: log of the summed path weight around its edges, without the token
    cc = np.empty(C)  # the same per class (summed over the groups holding it)
    for i in range(L):
        if mode[i] == 1:
            out[i, tok[i]] = 1.0
            continue
        if mode[i] == 3:
            continue
        cg[:] = NEG
        for e in range(E):
            a = A[i, esrc[e]]
            b = B[i + 1, edst[e]]
            if a == NEG or b == NEG or ew[i, e] == NEG:
                continue
            g = egrp[e]
            cg[g] = _logaddexp(cg[g], a + b - logz)
        cc[:] = NEG
        for g in range(G):
            if cg[g] != NEG:
                for k in range(gptr[g], gptr[g + 1]):
                    cc[gcls[k]] = _logaddexp(cc[gcls[k]], cg[g])
        row = lp[i]
        for c in range(C):
            if cc[c] != NEG:
                for k in range(cptr[c], cptr[c + 1]):
                    t = ctok[k]
                    out[i, t] += np.exp(cc[c] + row[t])


@njit(cache=True, nogil=True)
def _logaddexp(x, y):
    if x == NEG:
        return y
    if y == NEG:
        return x
    if x > y:
        return x + np.log1p(np.exp(y - x))
    return y + np.log1p(np.exp(x - y))


@njit(cache=True, nogil=True)
def _step_reach(R, Rn, mode, tok, i, tcls, gptr, gcls, esrc, edst, egrp):
    """Rn = states reachable from R in one position (every token allowed unless fixed)."""
    Rn[:] = False
    m = mode[i]
    if m == 3:
        Rn[:] = R[:]
        return
    ing = _groups_holding(tcls[tok[i]] if m == 1 else -2, gptr, gcls)
    for e in range(esrc.size):
        if R[esrc[e]] and ing[egrp[e]]:
            Rn[edst[e]] = True


@njit(cache=True, nogil=True)
def _groups_holding(c, gptr, gcls):
    """Bool per group: does it hold class ``c``?  (``c == -2``: every group; -1: none.)"""
    G = gptr.size - 1
    out = np.empty(G, dtype=np.bool_)
    for g in range(G):
        out[g] = True if c == -2 else (c >= 0 and _member(gcls, gptr[g], gptr[g + 1], c))
    return out


@njit(cache=True, nogil=True)
def local_mass_kernel(lp, mode, tok, start, endw, n, tcls, cptr, ctok, gptr, gcls, esrc, edst, egrp, at, out):
    """For each position ``i`` with ``at[i]``: ``out[i]`` = log Σ p_i(t) over the tokens t that some
    filling of every other non-fixed position completes into a valid sequence (the mask the
    constraint puts on position i alone, as a token mask does in autoregressive decoding)."""
    L = mode.size
    C = cptr.size - 1
    F = np.zeros((L + 1, n), dtype=np.bool_)
    F[0, start] = True
    for i in range(L):
        _step_reach(F[i], F[i + 1], mode, tok, i, tcls, gptr, gcls, esrc, edst, egrp)
    Bk = np.zeros((L + 1, n), dtype=np.bool_)
    for q in range(n):
        Bk[L, q] = endw[q] == 0.0
    for i in range(L - 1, -1, -1):
        m = mode[i]
        if m == 3:
            Bk[i, :] = Bk[i + 1, :]
            continue
        ing = _groups_holding(tcls[tok[i]] if m == 1 else -2, gptr, gcls)
        for e in range(esrc.size):
            if Bk[i + 1, edst[e]] and ing[egrp[e]]:
                Bk[i, esrc[e]] = True
    allowed = np.zeros(C, dtype=np.bool_)
    cval = np.empty(C)
    carg = np.empty(C, dtype=np.int64)
    for i in range(L):
        if not at[i]:
            continue
        allowed[:] = False
        for e in range(esrc.size):
            if F[i, esrc[e]] and Bk[i + 1, edst[e]]:
                g = egrp[e]
                for k in range(gptr[g], gptr[g + 1]):
                    allowed[gcls[k]] = True
        _class_stats(lp[i], cptr, ctok, True, cval, carg)
        mx = NEG
        for c in range(C):
            if allowed[c] and cval[c] > mx:
                mx = cval[c]
        if mx == NEG:
            out[i] = NEG
            continue
        s = 0.0
        for c in range(C):
            if allowed[c] and cval[c] != NEG:
                s += np.exp(cval[c] - mx)
        out[i] = mx + np.log(s)
