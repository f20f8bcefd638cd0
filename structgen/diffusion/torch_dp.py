"""The diffusion DPs as batched tensor programmes (CPU or CUDA; no host sync inside).

Same conventions as :mod:`.kernels` (modes 0/1/2/3, ``endw``, tie-breaking), over a batch:
``lp[B, L, V]``, ``mode[B, L]``, ``tok[B, L]``, ``start[B]``, ``endw[B, n]``.  Per position the
allowed tokens are gathered once (``index_select``) and reduced per token class with
``scatter_reduce``, the classes per group, and the groups spread over the edges; the recursion
over positions is a loop of a few tensor ops (L launches, no ``.item()``).  Gathers are chunked
over positions so that at most ``budget`` elements are live at once.
"""
from __future__ import annotations

import torch

__all__ = ["dingo_torch", "forward_torch", "sample_torch", "marginals_torch"]

_NEG = float("-inf")


def _chunks(B: int, L: int, N: int, budget: int):
    step = max(1, budget // max(1, B * N))
    for a in range(0, L, step):
        yield a, min(L, a + step)


def _segment_max(vals, seg, size, ids=None, big=0):
    """Max of ``vals[..., k]`` per segment ``seg[k]`` and, with ``ids``, the smallest id reaching it."""
    idx = seg.view(*([1] * (vals.dim() - 1)), -1).expand_as(vals)
    shape = (*vals.shape[:-1], size)
    mx = torch.full(shape, _NEG, dtype=vals.dtype, device=vals.device).scatter_reduce(
        -1, idx, vals, "amax", include_self=True)
    if ids is None:
        return mx, None
    hit = (vals == mx.gather(-1, idx)) & (vals > _NEG)
    cand = torch.where(hit, ids.expand_as(vals), torch.full_like(idx, big))
    arg = torch.full(shape, big, dtype=torch.int64, device=vals.device).scatter_reduce(
        -1, idx, cand, "amin", include_self=True)
    return mx, arg


def _segment_lse(vals, seg, size):
    idx = seg.view(*([1] * (vals.dim() - 1)), -1).expand_as(vals)
    mx, _ = _segment_max(vals, seg, size)
    safe = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
    s = torch.zeros_like(mx).scatter_add_(-1, idx, torch.exp(vals - safe.gather(-1, idx)))
    return torch.where(s > 0, safe + torch.log(s), torch.full_like(s, _NEG))


def _stats(lp: torch.Tensor, t: dict, trans, kind: str, budget: int):
    """Per (b, i): class values [B, L, C] and group values [B, L, G] — maxima with their smallest
    arg-max tokens (``kind="max"``: returns ``(gmax, gtok)``), or log-sum-exps (``kind="lse"``:
    returns ``(glse, clse)``)."""
    B, L, V = lp.shape
    ctok, cseg, gcls, gseg = t["ctok"], t["cseg"], t["gcls"], t["gseg"]
    C, G = trans.n_classes, trans.n_groups
    first = torch.empty(B, L, G, dtype=lp.dtype, device=lp.device)
    second = torch.empty(B, L, G if kind == "max" else C, dtype=torch.int64 if kind == "max" else lp.dtype,
                         device=lp.device)
    for a, b in _chunks(B, L, max(ctok.numel(), 1), budget):
        vals = lp[:, a:b].index_select(2, ctok)                            # [B, l, Nc]
        if kind == "max":
            cmax, carg = _segment_max(vals, cseg, C, ids=ctok.view(1, 1, -1), big=V)
            gm, garg = _segment_max(cmax.index_select(2, gcls), gseg, G, ids=carg.index_select(2, gcls), big=V)
            first[:, a:b], second[:, a:b] = gm, garg
        else:
            clse = _segment_lse(vals, cseg, C)
            first[:, a:b] = _segment_lse(clse.index_select(2, gcls), gseg, G)
            second[:, a:b] = clse
    return first, second


def _edge_weights(per_group: torch.Tensor, mode, tok, t: dict, n_classes: int, fixed_any: bool = True):
    """[B, L, E] edge log-weights: the group value (mode 0), 0 or -inf by membership of the fixed
    token's class (mode 1), 0 (holes, mode 2); mode 3 rows are unused.  ``fixed_any=False`` (no
    mode-1 position: known on the host) skips the membership search."""
    egrp, gkey, tcls = t["egrp"], t["gkey"], t["tcls"]
    B, L, _ = per_group.shape
    E = egrp.numel()
    w0 = per_group.index_select(2, egrp)
    zero = torch.zeros_like(w0)
    m = mode.view(B, L, 1)
    if not fixed_any:
        return torch.where(m == 0, w0, zero)
    cls = tcls[tok.clamp(min=0)]                                             # [B, L]
    q = egrp.view(1, 1, E) * (n_classes + 1) + cls.clamp(min=0).view(B, L, 1)
    if gkey.numel():
        pos = torch.searchsorted(gkey, q.reshape(-1)).clamp(max=gkey.numel() - 1).view(B, L, E)
        member = (gkey[pos] == q) & (cls >= 0).view(B, L, 1)
    else:
        member = torch.zeros_like(q, dtype=torch.bool)
    w1 = torch.where(member, zero, torch.full_like(w0, _NEG))
    return torch.where(m == 0, w0, torch.where(m == 1, w1, zero))


def _lse_by(index: torch.Tensor, vals: torch.Tensor, size: int) -> torch.Tensor:
    """log Σ exp(vals) grouped by ``index`` along dim 1 ([B, K] -> [B, size])."""
    B = vals.shape[0]
    mx = torch.full((B, size), _NEG, dtype=vals.dtype, device=vals.device)
    mx = mx.scatter_reduce(1, index, vals, "amax", include_self=True)
    safe = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
    s = torch.zeros_like(mx).scatter_add_(1, index, torch.exp(vals - safe.gather(1, index)))
    return torch.where(s > 0, safe + torch.log(s), torch.full_like(s, _NEG))


def dingo_torch(lp, mode, tok, start, endw, trans, budget: int = 1 << 24, fixed_any: bool = True):
    """``(tokens [B, L] (-1 at holes), score [B])``; score -inf where nothing is valid."""
    dev = lp.device
    t = trans.tensors(dev)
    B, L, V = lp.shape
    n = trans.n
    esrc, edst, egrp = t["esrc"], t["edst"], t["egrp"]
    E = esrc.numel()
    gm, garg = _stats(lp, t, trans, "max", budget)
    w = _edge_weights(gm, mode, tok, t, trans.n_classes, fixed_any)
    W = torch.full((B, n), _NEG, dtype=lp.dtype, device=dev)
    W[torch.arange(B, device=dev), start] = 0.0
    dst = edst.view(1, E).expand(B, E)
    eidx = torch.arange(E, device=dev).view(1, E).expand(B, E)
    back = []
    for i in range(L):
        cand = W.index_select(1, esrc) + w[:, i]
        Wn = torch.full((B, n), _NEG, dtype=lp.dtype, device=dev).scatter_reduce(1, dst, cand, "amax",
                                                                                 include_self=True)
        best = (cand == Wn.gather(1, dst)) & (cand > _NEG)
        be = torch.full((B, n), E, dtype=torch.int64, device=dev).scatter_reduce(
            1, dst, torch.where(best, eidx, torch.full_like(eidx, E)), "amin", include_self=True)
        W = torch.where((mode[:, i] == 3).view(B, 1), W, Wn)
        back.append(be)
    score = W + endw.to(W.dtype)
    q = torch.argmax(score, dim=1)
    best = score.gather(1, q.view(B, 1)).squeeze(1)
    out = torch.full((B, L), -1, dtype=torch.int64, device=dev)
    for i in range(L - 1, -1, -1):
        e = back[i].gather(1, q.view(B, 1)).squeeze(1).clamp(max=max(E - 1, 0))
        m = mode[:, i]
        chosen = torch.where(m == 0, garg[:, i].gather(1, egrp[e].view(B, 1)).squeeze(1),
                             torch.where(m == 1, tok[:, i], torch.full_like(q, -1)))
        ident = m == 3
        out[:, i] = torch.where(ident, torch.full_like(q, -1), chosen)
        q = torch.where(ident, q, esrc[e])
    return out, best


def forward_torch(lp, mode, tok, start, endw, trans, budget: int = 1 << 24, fixed_any: bool = True):
    """``(alpha [B, L + 1, n], w [B, L, E], clse [B, L, C], log_z [B])`` (no holes of mode 2)."""
    dev = lp.device
    t = trans.tensors(dev)
    B, L, V = lp.shape
    n = trans.n
    esrc, edst = t["esrc"], t["edst"]
    E = esrc.numel()
    glse, clse = _stats(lp, t, trans, "lse", budget)
    w = _edge_weights(glse, mode, tok, t, trans.n_classes, fixed_any)
    A = torch.full((B, L + 1, n), _NEG, dtype=lp.dtype, device=dev)
    A[torch.arange(B, device=dev), 0, start] = 0.0
    dst = edst.view(1, E).expand(B, E)
    for i in range(L):
        nxt = _lse_by(dst, A[:, i].index_select(1, esrc) + w[:, i], n)
        A[:, i + 1] = torch.where((mode[:, i] == 3).view(B, 1), A[:, i], nxt)
    log_z = torch.logsumexp(A[:, L] + endw.to(A.dtype), dim=1)
    return A, w, clse, log_z


def _draw_in_segment(weights, lo, hi, rows, generator):
    """Per row r: an index in [lo[r], hi[r]) drawn ∝ ``weights[rows[r], k]`` (inverse CDF)."""
    R = lo.numel()
    cdf = torch.cumsum(weights, dim=1)[rows]
    N = cdf.shape[1]
    if N == 0:
        return torch.zeros(R, dtype=torch.int64, device=lo.device)
    base = torch.where(lo > 0, cdf.gather(1, (lo - 1).clamp(min=0).view(R, 1)).squeeze(1), torch.zeros_like(cdf[:, 0]))
    top = cdf.gather(1, (hi - 1).clamp(min=0).view(R, 1)).squeeze(1)
    u = torch.rand(R, generator=generator, device=lo.device, dtype=cdf.dtype)
    k = torch.searchsorted(cdf, (base + u * (top - base)).view(R, 1), right=True).squeeze(1)
    return torch.minimum(torch.maximum(k, lo), hi - 1).clamp(min=0, max=N - 1)


def sample_torch(lp, mode, tok, start, endw, trans, num_samples: int, generator=None, budget: int = 1 << 24,
                 fixed_any: bool = True):
    """``(samples [B, S, L] (-1 at trailing holes), log_z [B])``: forward filtering, backward sampling."""
    dev = lp.device
    t = trans.tensors(dev)
    A, w, clse, log_z = forward_torch(lp, mode, tok, start, endw, trans, budget, fixed_any)
    B, L, V = lp.shape
    S = int(num_samples)
    R = B * S
    esrc, edst, egrp = t["esrc"], t["edst"], t["egrp"]
    ctok, cseg, cptr, gcls, gptr = t["ctok"], t["cseg"], t["cptr"], t["gcls"], t["gptr"]
    E = esrc.numel()
    rb = torch.arange(B, device=dev).repeat_interleave(S)
    end = (A[:, L] + endw.to(A.dtype))[rb]
    end = torch.where(torch.isfinite(log_z[rb]).view(R, 1), end, torch.zeros_like(end))
    q = torch.multinomial(torch.softmax(end, dim=1), 1, generator=generator).squeeze(1)
    out = torch.full((R, L), -1, dtype=torch.int64, device=dev)
    acc = torch.float64 if dev.type == "cpu" or lp.dtype == torch.float64 else torch.float32
    for i in range(L - 1, -1, -1):
        m = mode[rb, i]
        ident = m == 3
        into = edst.view(1, E) == q.view(R, 1)
        lw = A[rb, i].index_select(1, esrc) + w[rb, i]
        lw = torch.where(into, lw, torch.full_like(lw, _NEG))
        lw = torch.where(torch.isfinite(lw).any(1, keepdim=True), lw, torch.zeros_like(lw))
        e = torch.multinomial(torch.softmax(lw, dim=1), 1, generator=generator).squeeze(1)
        g = egrp[e]
        # a class of group g ∝ its mass at this position, then a token of that class ∝ p_i
        cl = clse[:, i].to(acc)                                              # [B, C]
        gw = torch.exp(cl.index_select(1, gcls) - cl.max(dim=1, keepdim=True).values.clamp(min=-1e300))
        gw = torch.where(torch.isfinite(gw), gw, torch.zeros_like(gw))
        k = _draw_in_segment(gw, gptr[g], gptr[g + 1], rb, generator)
        c = gcls[k] if gcls.numel() else torch.zeros_like(q)
        seg_lse = cl.index_select(1, cseg)
        fin = torch.isfinite(seg_lse)
        tw = torch.where(fin, torch.exp(lp[:, i].to(acc).index_select(1, ctok) -
                                        torch.where(fin, seg_lse, torch.zeros_like(seg_lse))), torch.zeros_like(seg_lse))
        j = _draw_in_segment(tw, cptr[c], cptr[c + 1], rb, generator)
        drawn = ctok[j] if ctok.numel() else torch.full_like(q, -1)
        chosen = torch.where(m == 0, drawn, tok[rb, i])
        out[:, i] = torch.where(ident, torch.full_like(q, -1), chosen)
        q = torch.where(ident, q, esrc[e])
    return out.view(B, S, L), log_z


def marginals_torch(lp, mode, tok, start, endw, trans, budget: int = 1 << 24, fixed_any: bool = True):
    """``(probs [B, L, V], log_z [B])``; rows of trailing holes are 0, fixed positions one-hot."""
    dev = lp.device
    t = trans.tensors(dev)
    A, w, _, log_z = forward_torch(lp, mode, tok, start, endw, trans, budget, fixed_any)
    B, L, V = lp.shape
    n = trans.n
    esrc, edst, egrp, ctok, cseg, gcls, gseg = (t[k] for k in ("esrc", "edst", "egrp", "ctok", "cseg", "gcls", "gseg"))
    E = esrc.numel()
    Nc = ctok.numel()
    src = esrc.view(1, E).expand(B, E)
    grp = egrp.view(1, E).expand(B, E)
    beta = endw.to(A.dtype).clone()
    probs = torch.zeros(B, L, V, dtype=lp.dtype, device=dev)
    safe_z = torch.where(torch.isfinite(log_z), log_z, torch.zeros_like(log_z)).view(B, 1)
    for i in range(L - 1, -1, -1):
        m = mode[:, i]
        share = A[:, i].index_select(1, esrc) + beta.index_select(1, edst) - safe_z
        share = torch.where(w[:, i] > _NEG, share, torch.full_like(share, _NEG))
        cg = _lse_by(grp, share, trans.n_groups)                              # [B, G]
        cc = _segment_lse(cg.index_select(1, gseg), gcls, trans.n_classes)    # [B, C]
        row = torch.zeros(B, V, dtype=lp.dtype, device=dev)
        if Nc:
            contrib = torch.exp(cc.index_select(1, cseg) + lp[:, i].index_select(1, ctok))
            row = row.scatter(1, ctok.view(1, Nc).expand(B, Nc), contrib)
        onehot = torch.zeros(B, V, dtype=lp.dtype, device=dev).scatter_(1, tok[:, i].clamp(min=0).view(B, 1), 1.0)
        mm = m.view(B, 1)
        probs[:, i] = torch.where(mm == 0, row, torch.where(mm == 1, onehot, torch.zeros_like(row)))
        nb = _lse_by(src, w[:, i] + beta.index_select(1, edst), n)
        beta = torch.where((m == 3).view(B, 1), beta, nb)
    ok = torch.isfinite(log_z).view(B, 1, 1)
    return torch.where(ok, probs, torch.zeros_like(probs)), log_z
