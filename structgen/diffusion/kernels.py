"""Numba kernels of the diffusion DPs over (position, state), one sequence per call.

Inputs shared by every kernel (see :mod:`.transitions` for the grouped edges):

- ``lp[L, V]``: natural-log probabilities; ``mode[L]`` (int8): 0 = read ``lp``, 1 = the token
  ``tok[i]`` is fixed (log-prob 0), 2 = a hole (exactly one unknown token: every edge, weight 0),
  3 = a trailing hole already folded into ``endw`` (the state does not move);
  ``start``: local start state; ``endw[n]``: 0 for states the sequence may end in, -inf otherwise.
- Group maxima / log-sum-exps are computed lazily, only for groups leaving a state the DP has
  reached (``stamp`` arrays), so one position costs Σ out-degree over the reachable states.

Ties: the first edge in (source, destination) order, the smallest token id, the smallest end state.
The sum kernels (forward, sample, marginals) take no holes: the caller strips trailing holes into
``endw`` and hands interior holes to :mod:`.subsets`.
"""
from __future__ import annotations

import numpy as np
from numba import njit

NEG = -np.inf


@njit(cache=True, nogil=True)
def _member(gtok, lo, hi, t):
    """Is token ``t`` in the sorted slice ``gtok[lo:hi]``?"""
    while lo < hi:
        mid = (lo + hi) >> 1
        v = gtok[mid]
        if v < t:
            lo = mid + 1
        elif v > t:
            hi = mid
        else:
            return True
    return False


@njit(cache=True, nogil=True)
def _group_max(row, gtok, lo, hi):
    best = NEG
    for k in range(lo, hi):
        v = row[gtok[k]]
        if v > best:
            best = v
    return best


@njit(cache=True, nogil=True)
def _group_argmax(row, gtok, lo, hi):
    best = NEG
    arg = -1
    for k in range(lo, hi):
        v = row[gtok[k]]
        if v > best:
            best = v
            arg = gtok[k]
    return arg


@njit(cache=True, nogil=True)
def _group_lse(row, gtok, lo, hi):
    m = _group_max(row, gtok, lo, hi)
    if m == NEG:
        return NEG
    s = 0.0
    for k in range(lo, hi):
        s += np.exp(row[gtok[k]] - m)
    return m + np.log(s)


@njit(cache=True, nogil=True)
def _edge_weights(lp, mode, tok, i, W, gptr, gtok, esrc, egrp, use_lse, gval, gstamp, stamp, out):
    """Weights of every edge at position ``i`` (-inf for edges leaving unreached states)."""
    m = mode[i]
    for e in range(esrc.size):
        if W[esrc[e]] == NEG:
            out[e] = NEG
            continue
        g = egrp[e]
        if m == 2:
            out[e] = 0.0
        elif m == 1:
            out[e] = 0.0 if _member(gtok, gptr[g], gptr[g + 1], tok[i]) else NEG
        else:
            if gstamp[g] != stamp:
                if use_lse:
                    gval[g] = _group_lse(lp[i], gtok, gptr[g], gptr[g + 1])
                else:
                    gval[g] = _group_max(lp[i], gtok, gptr[g], gptr[g + 1])
                gstamp[g] = stamp
            out[e] = gval[g]


@njit(cache=True, nogil=True)
def dingo_kernel(lp, mode, tok, start, endw, n, gptr, gtok, esrc, edst, egrp, out_tok):
    """Viterbi over (position, state); writes the best tokens (-1 at holes) into ``out_tok`` and
    returns their score (-inf when no sequence is valid)."""
    L = mode.size
    E = esrc.size
    G = gptr.size - 1
    W = np.full(n, NEG)
    W[start] = 0.0
    be = np.full((L, n), -1, dtype=np.int32)
    gval = np.empty(G)
    gstamp = np.full(G, -1, dtype=np.int64)
    w = np.empty(E)
    for i in range(L):
        if mode[i] == 3:
            continue
        _edge_weights(lp, mode, tok, i, W, gptr, gtok, esrc, egrp, False, gval, gstamp, i, w)
        Wn = np.full(n, NEG)
        for e in range(E):
            if w[e] == NEG:
                continue
            c = W[esrc[e]] + w[e]
            d = edst[e]
            if c > Wn[d]:
                Wn[d] = c
                be[i, d] = e
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
        g = egrp[e]
        if m == 2:
            out_tok[i] = -1
        elif m == 1:
            out_tok[i] = tok[i]
        else:
            out_tok[i] = _group_argmax(lp[i], gtok, gptr[g], gptr[g + 1])
        q = esrc[e]
    return best


@njit(cache=True, nogil=True)
def forward_kernel(lp, mode, tok, start, n, gptr, gtok, esrc, edst, egrp, A, ew):
    """Forward log-sums: ``A[i, q]`` = log Σ over prefixes of length i ending in q; ``ew[i, e]``
    the edge log-weights at position i."""
    L = mode.size
    E = esrc.size
    G = gptr.size - 1
    A[:, :] = NEG
    A[0, start] = 0.0
    gval = np.empty(G)
    gstamp = np.full(G, -1, dtype=np.int64)
    for i in range(L):
        if mode[i] == 3:
            A[i + 1, :] = A[i, :]
            ew[i, :] = NEG
            continue
        _edge_weights(lp, mode, tok, i, A[i], gptr, gtok, esrc, egrp, True, gval, gstamp, i, ew[i])
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
def sample_kernel(lp, mode, tok, endw, n, gptr, gtok, esrc, egrp, iptr, iedge, A, ew, logz, uniforms, out):
    """Backward sampling after :func:`forward_kernel`; ``uniforms[s, 2 * L + 1]`` in [0, 1);
    writes ``out[s, L]``."""
    L = mode.size
    S = out.shape[0]
    endp = np.empty(n)
    for q in range(n):
        v = A[L, q] + endw[q]
        endp[q] = np.exp(v - logz) if v != NEG else 0.0
    maxin = 0
    for q in range(n):
        if iptr[q + 1] - iptr[q] > maxin:
            maxin = iptr[q + 1] - iptr[q]
    inw = np.empty(maxin)
    maxg = 0
    for g in range(gptr.size - 1):
        if gptr[g + 1] - gptr[g] > maxg:
            maxg = gptr[g + 1] - gptr[g]
    tw = np.empty(maxg)
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
            e = iedge[lo + _pick(inw, 0, hi - lo, uniforms[s, 1 + 2 * i])]
            g = egrp[e]
            if mode[i] == 1:
                out[s, i] = tok[i]
            else:
                a, b = gptr[g], gptr[g + 1]
                row = lp[i]
                gm = _group_max(row, gtok, a, b)
                for k in range(a, b):
                    tw[k - a] = np.exp(row[gtok[k]] - gm)
                out[s, i] = gtok[a + _pick(tw, 0, b - a, uniforms[s, 2 + 2 * i])]
            q = esrc[e]


@njit(cache=True, nogil=True)
def marginals_kernel(lp, mode, tok, endw, n, gptr, gtok, esrc, edst, egrp, A, ew, logz, out):
    """Constrained marginals ``out[L, V]`` after :func:`forward_kernel` (``logz`` finite)."""
    L = mode.size
    E = esrc.size
    G = gptr.size - 1
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
            c = a + b - logz
            if cg[g] == NEG:
                cg[g] = c
            elif c > cg[g]:
                cg[g] = c + np.log1p(np.exp(cg[g] - c))
            else:
                cg[g] = cg[g] + np.log1p(np.exp(c - cg[g]))
        row = lp[i]
        for g in range(G):
            if cg[g] != NEG:
                for k in range(gptr[g], gptr[g + 1]):
                    t = gtok[k]
                    out[i, t] += np.exp(cg[g] + row[t])
