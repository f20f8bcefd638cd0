"""Lookahead: the propose / look ahead / verify acceptance engine of ``method="lookahead"``.

After LAVE (Zhang et al., arXiv 2602.00612) with an exact fallback (Mündler et al., arXiv
2508.10111).  A masked diffusion model proposes a token ``t`` at the most confident hole ``j``
of the current block.  The proposal is kept only if the whole canvas with ``t`` at ``j`` can
still become a valid output:

1. *Beam*: the holes from the committed prefix up to the last fixed position are filled by a
   beam over the model's current per-position log-probs, each beam expanding only tokens its
   matcher allows (one :func:`~structgen.fill_bitmasks` call per hole for all beams, top
   ``beam_width`` allowed tokens each, the ``beam_width`` best kept); fixed tokens are checked
   by the matchers.  A surviving beam whose tail (the holes after the last fixed position) is
   completable (:func:`~.completable.completable` from the beam's matcher) proves the
   proposal valid, and its filling is cached as a *verified completion*.
2. *Exact*: if no beam survives, :func:`~.completable.completable` decides.  A passed work
   bound (:class:`~structgen.errors.LimitExceeded`) counts as a rejection: nothing is
   committed on a guess.

A rejected token gets ``-inf`` at its position for the rest of the generation (a canvas with
more tokens has fewer completions, so a rejection never becomes wrong) and the model's next
best proposal is tried.  After ``tau`` rejections in a row, *recovery*: the cached verified
completion is committed, and the rest of the block is finished left to right, each hole
taking its most likely token among those that keep the canvas completable.

Invariant: the canvas is completable after every commit (every accepted token has a witness
or the exact check's proof), so generation never reaches a dead end.  For grammars over a
vocabulary that spells every byte the invariant is kept in a stronger form: the holes after the
last fixed position can end the output *in single-byte tokens* (the shortest completion in bytes
fits; ``tail_walk=False`` of :func:`completable`), so left-to-right filling always finds a token
by that test alone (the first byte of a shortest completion is one).  At the prefix
position the matcher's own mask filters proposals first (an invalid next token is never
proposed).  ``final=True`` asks for a whole sentence within the canvas (EOS rules of
:mod:`.completable`), ``final=False`` for a prefix.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from ..errors import LimitExceeded, StructgenError
from ..kernels.bitmask import bitmask_to_ids
from .. import caching
from ..runtime.batch import fill_bitmasks
from .completable import completable, fits_decide_tails, tail_fits
from .sampler import BlockStep, register_method

__all__ = ["Lookahead", "LookaheadStats", "DEFAULTS", "denoise"]

#: options of the engines ``generate(method="lookahead")`` builds (change them here)
DEFAULTS = {"beam_width": 5, "tau": 5, "limits": {"max_total_nodes": 1_000_000, "max_work": 10_000_000},
            "tail_nodes": 300_000,
            "exact_max_holes": 4}


class LookaheadStats:
    """Counters of one :class:`Lookahead`: ``proposals``, ``rejections``, ``beam_successes``,
    ``exact_checks`` (with ``exact_seconds``, one entry per check, and ``exact_limits``: checks
    that passed a bound and were counted as rejections), ``exact_skipped`` (proposals rejected
    without an exact check, see ``exact_max_holes``), ``recoveries``, ``commits`` (tokens
    written by the engine), ``beam_seconds``."""

    __slots__ = ("proposals", "rejections", "beam_successes", "exact_checks", "exact_seconds", "exact_limits",
                 "exact_skipped", "recoveries", "commits", "beam_seconds")

    def __init__(self):
        self.proposals = self.rejections = self.beam_successes = 0
        self.exact_checks = self.exact_limits = self.exact_skipped = self.recoveries = self.commits = 0
        self.exact_seconds: list = []
        self.beam_seconds = 0.0

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__slots__}
        d["exact_seconds"] = list(self.exact_seconds)
        return d

    def merge(self, other: "LookaheadStats") -> None:
        for k in self.__slots__:
            if k == "exact_seconds":
                self.exact_seconds.extend(other.exact_seconds)
            else:
                setattr(self, k, getattr(self, k) + getattr(other, k))

    def __repr__(self) -> str:
        return "LookaheadStats(" + ", ".join(f"{k}={getattr(self, k)}" for k in self.__slots__
                                             if k != "exact_seconds") + f", exact_checks_timed={len(self.exact_seconds)})"


class Lookahead:
    """The acceptance engine for one sequence's canvas (see the module docstring).

    Args:
        compiled: a :class:`~structgen.CompiledGrammar`.
        mask_token_id: the hole id of the canvas.
        eos_ids: the ids that end the output (default: the vocabulary's EOS ids).  When a hole
            is filled with EOS the id written is ``eos_ids[0]``.
        beam_width: beams kept and allowed tokens tried per beam and hole (0: no beam, every
            check is exact).
        tau: rejections in a row before recovery.
        final: True: the canvas must become a whole sentence; False: a prefix.
        state: where the canvas starts (None, or a matcher of ``compiled``; it is forked).
        limits: work bounds of the exact check (see :func:`~.completable.completable`).
        on_commit: called as ``on_commit(canvas)`` after every commit (tests check the invariant).
        tail_nodes: trie nodes the beam's tail check may walk (see :meth:`_tail_ok`).
        first_tries: in left-to-right filling, how many most likely tokens are tried by the beam's
            check before the single-byte tokens and the exact checks.
        exact_max_holes: the exact check runs only when at most this many holes lie between the
            committed prefix and the last fixed position (None: always); past it a proposal the
            beam cannot place is rejected (``exact_skipped``), as LAVE does.  Rejecting is always
            sound; this bounds the time of the proposals a model gets wrong.
    """

    def __init__(self, compiled, mask_token_id: int, eos_ids=None, *, beam_width: int = 5, tau: int = 5,
                 final: bool = True, state=None, limits: dict | None = None, on_commit=None,
                 tail_nodes: int = 300_000, first_tries: int = 8, exact_max_holes: int | None = None):
        self.compiled = compiled
        self.mask = int(mask_token_id)
        v = compiled.vocab
        self.eos_ids = [int(e) for e in (v.eos_ids if eos_ids is None else eos_ids)]
        if not self.eos_ids and final:
            raise StructgenError("final=True needs an EOS id to pad the canvas with")
        self._eos = set(self.eos_ids)
        self._eos_arr = np.asarray(self.eos_ids, np.int64)
        self._vocab_eos = np.asarray(v.eos_ids, np.int64)
        self.beam_width = int(beam_width)
        self.tau = int(tau)
        self.final = bool(final)
        self.limits = dict(limits or {})
        self.on_commit = on_commit
        self.tail_nodes = int(tail_nodes)
        self.first_tries = int(first_tries)
        self.exact_max_holes = None if exact_max_holes is None else int(exact_max_holes)
        self._fits_decide = fits_decide_tails(compiled)
        self.stats = LookaheadStats()
        self._start = compiled.matcher() if state is None else state.fork()
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """Forget the canvas (bans, cache, prefix): the next ``step`` starts afresh."""
        self.matcher = self._start.fork()
        self.prefix = 0          # canvas[:prefix] is fixed and read by self.matcher
        self._prefix_ids = []
        self.bans: dict = {}     # position -> set of rejected tokens
        self.cache = None        # {position: token}: a verified filling of the current canvas
        self._streak = 0

    def _sync(self, canvas: np.ndarray) -> None:
        """Advance the prefix matcher over the fixed tokens that now lead the canvas."""
        if self._prefix_ids and (self.prefix > canvas.shape[0]
                                 or canvas[:self.prefix].tolist() != self._prefix_ids):
            self.matcher = self._start.fork()  # the caller changed the canvas under us: replay
            self.prefix, self._prefix_ids = 0, []
        n = canvas.shape[0]
        while self.prefix < n and canvas[self.prefix] != self.mask:
            t = int(canvas[self.prefix])
            if self.matcher.is_terminated():
                if t not in self._eos:
                    raise StructgenError(f"position {self.prefix}: token {t} after the end of the output")
            elif not self.matcher.advance(self._matcher_eos(t)):
                raise StructgenError(f"position {self.prefix}: token {t} is not allowed by the constraint")
            self._prefix_ids.append(t)
            self.prefix += 1

    def _matcher_eos(self, t: int) -> int:
        """A model EOS id the matcher may not know (a pad id) as one it knows."""
        if t in self._eos and self._vocab_eos.size and t not in set(self._vocab_eos.tolist()):
            return int(self._vocab_eos[0])
        return t

    # ------------------------------------------------------------------ checks
    def _last_fixed(self, canvas: np.ndarray) -> int:
        fixed = np.flatnonzero(canvas[self.prefix:] != self.mask)
        return self.prefix + int(fixed[-1]) if fixed.size else self.prefix - 1

    def _tail_ok(self, m, k: int) -> bool:
        """The ``k`` holes after the beam's last fixed position can end the output.  The tail
        tests of :func:`completable` decide most tails at once; walking the holes is bounded by
        ``tail_nodes`` trie nodes (past it: not verified, the beam fails)."""
        if k == 0 or m.is_terminated():
            return (m.is_terminated() or m.is_accepting()) if self.final else True
        if self._fits_decide:
            return tail_fits(self.compiled, m, k, self.final, **self.limits)
        lim = dict(self.limits)
        lim["max_total_nodes"] = min(lim.get("max_total_nodes", self.tail_nodes), self.tail_nodes)
        try:
            return completable(self.compiled, [self.mask] * k, mask_token_id=self.mask, state=m, final=self.final,
                               eos_ids=self.eos_ids, tail_walk=False, **lim)
        except LimitExceeded:
            return False

    def beam(self, canvas: np.ndarray, lp: np.ndarray, width: int | None = None):
        """A verified filling ``{position: token}`` of the holes before the last fixed position
        of ``canvas`` (the beam of the module docstring), or None."""
        width = self.beam_width if width is None else width
        if width <= 0:
            return None
        t0 = time.perf_counter()
        try:
            return self._beam(canvas, lp, width)
        finally:
            self.stats.beam_seconds += time.perf_counter() - t0

    def _beam(self, canvas, lp, width):
        r = self._last_fixed(canvas)
        n = canvas.shape[0]
        beams = [(0.0, self.matcher.fork(), ())]
        words = (self.compiled.vocab.logits_width + 31) // 32
        bitmask = np.zeros((width, words), np.int32)
        for p in range(self.prefix, r + 1):
            t = int(canvas[p])
            if t != self.mask:
                keep = []
                for sc, m, fill in beams:
                    if m.is_terminated():
                        if t in self._eos:
                            keep.append((sc, m, fill))
                    elif m.advance(self._matcher_eos(t)):
                        keep.append((sc, m, fill))
                beams = keep
            else:
                live = [b for b in beams if not b[1].is_terminated()]
                out = [(sc, m, fill + ((p, self.eos_ids[0]),)) for sc, m, fill in beams if m.is_terminated()]
                if live:
                    fill_bitmasks([b[1] for b in live], bitmask)
                    row = lp[p]
                    for i, (sc, m, fill) in enumerate(live):
                        ids = bitmask_to_ids(bitmask[i])
                        ids = ids[ids < row.shape[0]]
                        if ids.size == 0:
                            continue
                        vals = row[ids]
                        k = min(width, ids.size)
                        top = np.argpartition(-vals, k - 1)[:k] if ids.size > k else np.arange(ids.size)
                        for q in top[np.argsort(-vals[top], kind="stable")].tolist():
                            tok = int(ids[q])
                            f = m.fork()
                            if f.advance(tok):
                                out.append((sc + float(vals[q]), f, fill + ((p, tok),)))
                out.sort(key=lambda b: -b[0])
                beams = out[:width]
            if not beams:
                return None
        for sc, m, fill in beams:
            if self._tail_ok(m, n - r - 1):
                return dict(fill)
        return None

    def exact(self, canvas: np.ndarray) -> bool:
        """:func:`completable` of the canvas from the committed prefix (False past a bound)."""
        self.stats.exact_checks += 1
        t0 = time.perf_counter()
        try:
            return completable(self.compiled, canvas[self.prefix:], mask_token_id=self.mask, state=self.matcher,
                               final=self.final, eos_ids=self.eos_ids, tail_walk=False, **self.limits)
        except LimitExceeded:
            self.stats.exact_limits += 1
            return False
        finally:
            self.stats.exact_seconds.append(time.perf_counter() - t0)

    def check(self, canvas: np.ndarray, j: int, t: int, lp: np.ndarray, exact: bool = True) -> bool:
        """Whether ``t`` at hole ``j`` keeps ``canvas`` completable (beam, then exact unless
        ``exact`` is False); on a beam success the verified filling becomes the cache."""
        trial = canvas.copy()
        trial[j] = t
        fill = self.beam(trial, lp, max(self.beam_width, 1) if not exact else None)
        if fill is not None:
            self.stats.beam_successes += 1
            self.cache = fill
            return True
        if exact and self.exact_max_holes is not None:
            inner = int((trial[self.prefix:self._last_fixed(trial) + 1] == self.mask).sum())
            if inner > self.exact_max_holes:
                self.stats.exact_skipped += 1
                return False
        if exact and self.exact(trial):
            self.cache = None  # (no witness)
            return True
        return False

    # ------------------------------------------------------------------ commits
    def _commit(self, canvas: np.ndarray, j: int, t: int) -> None:
        canvas[j] = t
        self.stats.commits += 1
        if self.cache is not None:
            if self.cache.get(j, t) != t:
                self.cache = None
            else:
                self.cache.pop(j, None)
        if t in self._eos:  # EOS rules: every later position is EOS
            later = np.flatnonzero(canvas[j + 1:] == self.mask) + j + 1
            canvas[later] = self.eos_ids[0]
            self.stats.commits += int(later.size)
        self._sync(canvas)
        if self.on_commit is not None:
            self.on_commit(canvas)

    def _propose(self, canvas, lp, lo, hi):
        """``(j, t)``: the most confident hole of ``[lo, hi)`` and its best token not banned
        (None when every hole's row is all ``-inf``)."""
        best, bj, bt = -np.inf, -1, -1
        for j in np.flatnonzero(canvas[lo:hi] == self.mask).tolist():
            j += lo
            row = lp[j]
            banned = self.bans.get(j)
            if j == self.prefix or banned:
                row = row.copy()
                if j == self.prefix:  # the next token: the matcher's mask first
                    allowed = self.matcher.allowed_tokens()
                    keep = np.full(row.shape[0], -np.inf, row.dtype)
                    ok = allowed[allowed < row.shape[0]]
                    keep[ok] = row[ok]
                    if self.matcher.is_accepting() or self.matcher.is_terminated():
                        e = self._eos_arr[self._eos_arr < row.shape[0]]
                        keep[e] = row[e]
                    row = keep
                if banned:
                    row[list(banned)] = -np.inf
            t = int(np.argmax(row))
            if row[t] > best:
                best, bj, bt = float(row[t]), j, t
        return None if bj < 0 else (bj, bt)

    def step(self, canvas, log_probs, block_range, n: int = 1):
        """Unmask up to ``n`` holes of ``block_range = (lo, hi)`` and return the new canvas.

        ``canvas``: ``[L]`` ids (list, numpy or tensor; not modified); ``log_probs``: ``[L, V]``
        natural-log probabilities from the model for this canvas (numpy or tensor; the
        positions outside holes are not read).  Each unmasking proposes, checks and commits or
        rejects as in the module docstring; ``tau`` rejections in a row trigger recovery,
        which finishes the whole block.  Returns a numpy int64 array (the type of ``canvas``
        is not kept)."""
        c = _ids(canvas)
        lp = _rows(log_probs)
        lo, hi = int(block_range[0]), int(block_range[1])
        self._sync(c)
        if self.matcher.is_terminated():  # after EOS: EOS everywhere
            c[lo:hi][c[lo:hi] == self.mask] = self.eos_ids[0]
            return c
        done = 0
        while done < n and bool((c[lo:hi] == self.mask).any()):
            prop = self._propose(c, lp, lo, hi)
            if prop is None:
                self.recover(c, lp, (lo, hi))
                break
            j, t = prop
            self.stats.proposals += 1
            if self.check(c, j, t, lp):
                self._streak = 0
                self._commit(c, j, t)
                done += 1
                continue
            self.stats.rejections += 1
            self.bans.setdefault(j, set()).add(t)
            self._streak += 1
            if self._streak >= self.tau:
                self.recover(c, lp, (lo, hi))
                break
        return c

    def finish_block(self, canvas, log_probs, block_range):
        """Fill every hole of the block left to right (the end of a block's schedule)."""
        c = _ids(canvas)
        self._sync(c)
        self._left_to_right(c, _rows(log_probs), int(block_range[0]), int(block_range[1]))
        return c

    def recover(self, canvas: np.ndarray, lp: np.ndarray, block_range) -> None:
        """Commit the cached verified completion inside the block, then finish the block left to
        right (in place)."""
        lo, hi = int(block_range[0]), int(block_range[1])
        self.stats.recoveries += 1
        self._streak = 0
        if self.cache is not None:
            for p in sorted(self.cache):
                if lo <= p < hi and canvas[p] == self.mask and self.cache is not None:
                    self._commit(canvas, p, self.cache[p])
        self._left_to_right(canvas, lp, lo, hi)

    def _left_to_right(self, canvas, lp, lo, hi):
        for p in range(min(lo, self.prefix), min(hi, canvas.shape[0])):
            if canvas[p] != self.mask:
                continue
            if p != self.prefix:  # holes before p inside the block are filled: p is the prefix end
                raise AssertionError("internal error: left-to-right filling out of order")
            if self.cache is not None and p in self.cache:
                self._commit(canvas, p, self.cache[p])
                continue
            self._commit(canvas, p, self._best_valid(canvas, lp, p))

    def _restricted(self, canvas, p, toks):
        """:func:`completable` of the canvas with hole ``p`` narrowed to ``toks`` (None: a bound passed)."""
        self.stats.exact_checks += 1
        t0 = time.perf_counter()
        try:
            return completable(self.compiled, canvas[self.prefix:], mask_token_id=self.mask, state=self.matcher,
                               final=self.final, eos_ids=self.eos_ids, tail_walk=False,
                               restrict={p - self.prefix: toks}, **self.limits)
        except LimitExceeded:
            self.stats.exact_limits += 1
            return None
        finally:
            self.stats.exact_seconds.append(time.perf_counter() - t0)

    def _witness(self, canvas, p, order):
        """The first token of ``order`` at hole ``p`` that keeps the canvas completable, by binary
        search over prefixes of ``order`` with the exact check on a narrowed hole (about
        log2(len(order)) checks); None when none is proven."""
        if order.size == 0 or not self._restricted(canvas, p, order):
            return None
        lo, hi = 0, order.size  # some token of order[:hi] works
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._restricted(canvas, p, order[:mid]):
                hi = mid
            else:
                lo = mid
        t = int(order[hi - 1])
        return t if self._restricted(canvas, p, order[hi - 1:hi]) else None

    def _best_valid(self, canvas, lp, p) -> int:
        """A likely token at the prefix hole ``p`` that keeps the canvas completable: the best
        few allowed tokens by the beam's check alone, then the allowed single-byte tokens (the
        first byte of a shortest completion is one of them whenever the tail test holds), then
        every allowed token by the full check, most likely first."""
        m = self.matcher
        if m.is_terminated():
            return self.eos_ids[0]
        allowed = m.allowed_tokens()
        row = lp[p]
        allowed = allowed[allowed < row.shape[0]]
        if m.is_accepting():
            allowed = np.union1d(allowed, self._eos_arr[self._eos_arr < row.shape[0]])
        banned = self.bans.setdefault(p, set())
        order = allowed[np.argsort(-row[allowed], kind="stable")]
        v = self.compiled.vocab
        lengths = np.diff(v.token_offsets)
        short = order[(order < lengths.shape[0]) & (lengths[np.minimum(order, lengths.shape[0] - 1)] == 1)]
        eos_first = [t for t in order.tolist() if t in self._eos][:1]
        tried = set()
        if not (canvas[p + 1:] != self.mask).any():  # only holes after p: the tail tests decide each token
            k = canvas.shape[0] - p - 1
            for t in order.tolist():
                if t in banned:
                    continue
                if t in self._eos:
                    if m.is_accepting() and self.check(canvas, p, t, lp, exact=False):
                        return t
                    continue
                f = m.fork()
                if f.advance(t) and tail_fits(self.compiled, f, k, self.final, **self.limits):
                    return t
            tried = set(order.tolist())  # what is left needs a walk of the tail: the full checks below
        else:  # fixed tokens later: a wide beam from here finds a verified filling (p included)
            fill = self.beam(canvas, lp, max(8, 2 * self.beam_width))
            if fill is not None and p in fill and fill[p] not in banned:
                self.cache = fill
                return fill[p]
            cand = np.array([t for t in order.tolist() if t not in banned], np.int64)
            t = self._witness(canvas, p, cand)
            if t is not None:
                return t
        for tier, exact in ((order[:self.first_tries].tolist() + eos_first, False), (short.tolist(), False),
                            (order.tolist(), True)):
            for t in tier:
                if t in banned or (t in tried and not exact):
                    continue
                tried.add(t)
                if self.check(canvas, p, t, lp, exact=exact):
                    return t
                if exact:
                    banned.add(t)
        raise StructgenError(f"position {p}: no token keeps the output completable (a work bound passed?)")


def _ids(canvas) -> np.ndarray:
    if isinstance(canvas, torch.Tensor):
        return canvas.detach().to("cpu", torch.int64).numpy().copy()
    return np.array(canvas, dtype=np.int64, copy=True)


def _rows(log_probs) -> np.ndarray:
    if isinstance(log_probs, torch.Tensor):
        return log_probs.detach().to("cpu", torch.float32).numpy()
    return np.asarray(log_probs, dtype=np.float32)


def denoise(model, compiled, prompt_ids, *, mask_token_id: int, length: int = 32, block_length: int = 8,
            steps: int | None = None, batch_size: int = 1, eos_ids=None, beam_width: int = 5, tau: int = 5,
            final: bool = True, limits: dict | None = None, on_commit=None, temperature: float = 0.0,
            seed: int | None = None, constrained: bool = True):
    """A minimal LLaDA-style masked-diffusion loop driven by :class:`Lookahead` (semi-autoregressive
    blocks, ``steps`` denoising steps in all, an even share of unmaskings per step, the block
    finished left to right at its last step).  ``model(input_ids=[B, P + length])`` returns logits
    ``[B, P + length, V]`` (``.logits`` or a tensor); ``batch_size`` canvases run together.
    ``temperature > 0`` adds Gumbel noise of that scale to the log-probs each step (the
    proposals and the beam then sample).  ``constrained=False`` runs the same loop without the
    constraint (most confident holes, their best tokens): the baseline.
    Returns ``(answers [batch_size, length] int64, LookaheadStats summed, per-step seconds)``."""
    prompt = torch.as_tensor(list(prompt_ids), dtype=torch.long)
    P = prompt.shape[0]
    n_blocks = -(-length // block_length)
    steps = length if steps is None else int(steps)
    per_block = max(1, steps // n_blocks)
    dev = next(model.parameters()).device if isinstance(model, torch.nn.Module) else torch.device("cpu")
    canvas = np.full((batch_size, length), int(mask_token_id), np.int64)
    engines = [Lookahead(compiled, mask_token_id, eos_ids, beam_width=beam_width, tau=tau, final=final,
                         limits=limits, on_commit=on_commit) for _ in range(batch_size)]
    step_seconds = []
    rng = np.random.default_rng(seed)
    for b in range(n_blocks):
        lo, hi = b * block_length, min(length, (b + 1) * block_length)
        for s in range(per_block):
            holes = int((canvas[:, lo:hi] == mask_token_id).sum(axis=1).max())
            if holes == 0:
                break
            ids = torch.cat([prompt.expand(batch_size, P), torch.from_numpy(canvas)], dim=1).to(dev)
            with torch.no_grad():
                out = model(input_ids=ids)
            logits = getattr(out, "logits", out)[:, P:].float()
            lp = torch.log_softmax(logits, dim=-1).cpu().numpy()
            if temperature > 0:
                lp = lp + temperature * rng.gumbel(size=lp.shape).astype(np.float32)
            lp[:, :, int(mask_token_id)] = -np.inf
            t0 = time.perf_counter()
            left = per_block - s
            if not constrained:
                for r in range(batch_size):
                    k = -(-int((canvas[r, lo:hi] == mask_token_id).sum()) // left)
                    _unconstrained(canvas[r], lp[r], lo, hi, k, int(mask_token_id))
                step_seconds.append(time.perf_counter() - t0)
                continue
            for r, la in enumerate(engines):
                if s == per_block - 1:
                    canvas[r] = la.finish_block(canvas[r], lp[r], (lo, hi))
                else:
                    k = -(-int((canvas[r, lo:hi] == mask_token_id).sum()) // left)
                    canvas[r] = la.step(canvas[r], lp[r], (lo, hi), n=k)
            step_seconds.append(time.perf_counter() - t0)
    stats = LookaheadStats()
    for la in engines:
        stats.merge(la.stats)
    return canvas, stats, step_seconds


def _unconstrained(row, lp, lo, hi, k, mask):
    """Unmask the ``k`` most confident holes of ``row[lo:hi]`` with their best tokens (in place)."""
    holes = np.flatnonzero(row[lo:hi] == mask) + lo
    if holes.size == 0:
        return
    best = lp[holes].argmax(axis=1)
    conf = lp[holes, best]
    for i in np.argsort(-conf, kind="stable")[:k].tolist():
        row[holes[i]] = best[i]


# ----------------------------------------------------------------------------- generate(method="lookahead")
_RUNS = caching.LRU(16, name="diffusion.lookahead_runs")  # id(states list) -> (states, [engine, key] per row)


def _lookahead_step(st: BlockStep):
    """The sampler's ``method="lookahead"``: per row, the block plus ``st.tail`` holes as the
    canvas (holes are -1), one :class:`Lookahead` per row and block (kept across the block's
    steps, so bans and the cached completion survive), ``pick.sum()`` unmaskings, or the whole
    block at its last step.  Writes ``st.written`` (the engine chooses positions itself: the
    most confident holes, recovery, EOS padding) and the counters into ``st.row_stats``."""
    B, Lb, V = st.log_probs.shape
    tokens = np.full((B, Lb), -1, np.int64)
    if st.compiled is None:
        return st.log_probs.argmax(axis=-1), np.zeros(B)
    hit = _RUNS.get(id(st.states))
    if hit is None or hit[0] is not st.states:
        hit = (st.states, [None] * B)
        _RUNS.put(id(st.states), hit)
    engines = hit[1]
    for b in range(B):
        key = (st.states[b].accepted_tokens(), st.tail, Lb)
        fresh = bool((st.block[b] < 0).all())
        if engines[b] is None or engines[b][1] != key or fresh:
            opts = dict(DEFAULTS)
            opts["limits"] = dict(opts.get("limits") or {})
            engines[b] = [Lookahead(st.compiled, -1, list(st.eos_ids), final=st.final, state=st.states[b], **opts),
                          key]
        la = engines[b][0]
        canvas = np.concatenate([st.block[b], np.full(st.tail, -1, np.int64)])
        n = int(st.pick[b].sum())
        before = la.stats.as_dict()
        if n >= int((st.block[b] < 0).sum()):
            out = la.step(canvas, st.log_probs[b], (0, Lb), n=Lb)
        else:
            out = la.step(canvas, st.log_probs[b], (0, Lb), n=n)
        tokens[b] = out[:Lb]
        if not (tokens[b] >= 0).all() and n >= int((st.block[b] < 0).sum()):
            out = la.finish_block(out, st.log_probs[b], (0, Lb))
            tokens[b] = out[:Lb]
        _add_stats(st, b, la.stats, before)
    st.written = (st.block < 0) & (tokens >= 0)
    return tokens, np.full(B, np.nan)


def _add_stats(st, b, stats, before=None):
    if st.row_stats is None:
        return
    acc = st.row_stats[b]
    now = stats.as_dict()
    for k, v in now.items():
        base = before[k] if before is not None else (0 if k != "exact_seconds" else [])
        if k == "exact_seconds":
            acc.setdefault(k, []).extend(v[len(base):])
        else:
            acc[k] = acc.get(k, 0) + v - base


register_method("lookahead", _lookahead_step, grammars=True)
