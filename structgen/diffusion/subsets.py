"""Exact sums over token sequences with holes in the middle (sample / marginals).

A hole stands for *some* token, chosen later, so the distribution over the visible tokens is
``∏ p_i(t_i) · 1[∃ hole tokens making the sequence valid]``.  Summing over (position, state) paths
would count a visible sequence once per way of filling its holes; instead the states are
determinised: a lattice node is the *set* of states the visible tokens so far can be in (under some
filling of the holes so far).  A hole maps a set to the union of its successors (one edge, weight 1);
a visible position splits the tokens by the set they lead to.  Without holes every set is a single
state and this is the plain forward–backward of :mod:`.kernels`, which the caller uses instead.

Sets are built lazily and bounded by ``max_nodes`` per position (LimitExceeded past it).
"""
from __future__ import annotations

import numpy as np

from ..errors import LimitExceeded
from .transitions import Transitions, mix64

__all__ = ["SubsetLattice"]

_NEG = -np.inf


def _lse(x: np.ndarray) -> float:
    if x.size == 0:
        return _NEG
    m = float(np.max(x))
    if m == _NEG:
        return _NEG
    return m + float(np.log(np.sum(np.exp(x - m))))


class SubsetLattice:
    """The determinised lattice of one sequence: ``lp[L, V]`` (numpy), ``mode``/``tok`` as in
    :mod:`.kernels` (holes: mode 2; mode 3 leaves the set as it is), ``start`` a local state,
    ``endw[n]`` the end weights."""

    def __init__(self, trans: Transitions, lp, mode, tok, start: int, endw, max_nodes: int = 4096):
        self.trans = trans
        self.lp = lp
        self.mode = mode
        self.tok = tok
        L = mode.size
        self.nodes: list[list[tuple]] = [[(int(start),)]]
        # per position: (src node ids, dst node ids, log-weights, token arrays or None for holes)
        self.edges: list[tuple[np.ndarray, np.ndarray, np.ndarray, list]] = []
        for i in range(L):
            index: dict[tuple, int] = {}
            src, dst, wts, toks = [], [], [], []
            for k, S in enumerate(self.nodes[i]):
                for nxt, w, cls in self._step(S, i):
                    j = index.get(nxt)
                    if j is None:
                        j = index[nxt] = len(index)
                        if j >= max_nodes:
                            raise LimitExceeded("too many state sets between masked positions",
                                                limit="max_nodes", value=max_nodes)
                    src.append(k)
                    dst.append(j)
                    wts.append(w)
                    toks.append(cls)
            nodes = [None] * len(index)
            for S, j in index.items():
                nodes[j] = S
            self.nodes.append(nodes)
            self.edges.append((np.asarray(src, np.int64), np.asarray(dst, np.int64), np.asarray(wts, np.float64),
                               toks))
        ends = np.asarray(endw, dtype=np.float64)
        self.end = np.asarray([_NEG if not np.any(ends[list(S)] == 0.0) else 0.0 for S in self.nodes[L]])
        self._forward()

    # -- construction -------------------------------------------------------------------------------
    def _pairs(self, S):
        """(tokens, destinations) of every edge out of the states of ``S``."""
        t = self.trans
        toks, dsts = [], []
        for q in S:
            for e in range(t.eptr[q], t.eptr[q + 1]):
                seg = t.group_tokens(int(t.egrp[e]))
                toks.append(seg)
                dsts.append(np.full(seg.size, t.edst[e], dtype=np.int64))
        if not toks:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(toks).astype(np.int64), np.concatenate(dsts)

    def _step(self, S, i):
        t = self.trans
        m = self.mode[i]
        if m == 3:  # a trailing hole, already folded into the end weights
            return [(S, 0.0, None)]
        if m == 2:
            succ = np.unique(np.concatenate([t.successors(q) for q in S]))
            return [(tuple(int(x) for x in succ), 0.0, None)] if succ.size else []
        if m == 1:
            tk = int(self.tok[i])
            c = int(t.tcls[tk])
            out = set()
            for q in S:
                for e in range(t.eptr[q], t.eptr[q + 1]):
                    g = t.egrp[e]
                    if c >= 0 and c in t.gcls[t.gptr[g]:t.gptr[g + 1]]:
                        out.add(int(t.edst[e]))
            return [(tuple(sorted(out)), 0.0, np.asarray([tk]))] if out else []
        row = self.lp[i]
        if len(S) == 1:
            q = S[0]
            res = []
            for e in range(t.eptr[q], t.eptr[q + 1]):
                cls = t.group_tokens(int(t.egrp[e]))
                res.append(((int(t.edst[e]),), _lse(row[cls].astype(np.float64)), cls))
            return res
        toks, dsts = self._pairs(S)
        order = np.lexsort((dsts, toks))
        toks, dsts = toks[order], dsts[order]
        keep = np.ones(toks.size, dtype=np.bool_)
        keep[1:] = (toks[1:] != toks[:-1]) | (dsts[1:] != dsts[:-1])
        toks, dsts = toks[keep], dsts[keep]
        first = np.flatnonzero(np.concatenate([[True], toks[1:] != toks[:-1]]))
        # a set hash per token: the sum of random 64-bit words of its destinations
        with np.errstate(over="ignore"):
            h = np.add.reduceat(mix64(dsts), first)
        uniq_tok = toks[first]
        res = []
        _, cls_of, inv = np.unique(h, return_index=True, return_inverse=True)
        ends = np.concatenate([first[1:], [toks.size]])
        for c, f in enumerate(cls_of.tolist()):
            members = uniq_tok[inv == c]
            nxt = tuple(int(x) for x in dsts[first[f]:ends[f]])
            res.append((nxt, _lse(row[members].astype(np.float64)), members))
        return res

    # -- sums ---------------------------------------------------------------------------------------
    def _forward(self):
        L = self.mode.size
        self.alpha = [np.zeros(1)]
        for i in range(L):
            src, dst, w, _ = self.edges[i]
            a = np.full(len(self.nodes[i + 1]), _NEG)
            c = self.alpha[i][src] + w
            for j in range(a.size):
                a[j] = _lse(c[dst == j])
            self.alpha.append(a)
        self.log_z = _lse(self.alpha[L] + self.end)

    def marginals(self, out: np.ndarray) -> None:
        """Add the constrained marginals into ``out[L, V]`` (rows of holes stay 0)."""
        L = self.mode.size
        beta = self.end
        for i in range(L - 1, -1, -1):
            src, dst, w, toks = self.edges[i]
            if self.mode[i] == 1:
                out[i, int(self.tok[i])] = 1.0
            elif self.mode[i] == 0:
                share = self.alpha[i][src] + beta[dst] - self.log_z
                row = self.lp[i]
                for k, cls in enumerate(toks):
                    if share[k] != _NEG:
                        np.add.at(out[i], cls, np.exp(share[k] + row[cls].astype(np.float64)))
            nb = np.full(len(self.nodes[i]), _NEG)
            c = w + beta[dst]
            for j in range(nb.size):
                nb[j] = _lse(c[src == j])
            beta = nb

    def sample(self, rng: np.random.Generator, num_samples: int) -> np.ndarray:
        """``[num_samples, L]`` exact samples (holes -1): backward sampling, all samples at once."""
        L = self.mode.size
        out = np.full((num_samples, L), -1, dtype=np.int64)
        end = self.alpha[L] + self.end
        p_end = np.exp(end - self.log_z)
        cur = rng.choice(p_end.size, size=num_samples, p=p_end / p_end.sum())
        for i in range(L - 1, -1, -1):
            src, dst, w, toks = self.edges[i]
            nxt = np.empty_like(cur)
            for j in np.unique(cur).tolist():
                who = np.flatnonzero(cur == j)
                cand = np.flatnonzero(dst == j)
                lw = self.alpha[i][src[cand]] + w[cand]
                p = np.exp(lw - lw.max())
                pick = cand[rng.choice(cand.size, size=who.size, p=p / p.sum())]
                nxt[who] = src[pick]
                if self.mode[i] == 1:
                    out[who, i] = int(self.tok[i])
                elif self.mode[i] == 0:
                    for k in np.unique(pick).tolist():
                        rows = who[pick == k]
                        cls = toks[k]
                        r = self.lp[i][cls].astype(np.float64)
                        q = np.exp(r - r.max())
                        out[rows, i] = cls[rng.choice(cls.size, size=rows.size, p=q / q.sum())]
            cur = nxt
        return out
