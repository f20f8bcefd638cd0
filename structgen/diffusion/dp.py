"""DINGO MAP decoding, exact constrained sampling and constrained marginals for a masked block.

    import structgen.diffusion as sgd
    tokens, log_prob = sgd.dingo(log_probs, compiled, masked=None, state=None, final=False)
    samples = sgd.sample(log_probs, compiled, masked=None, state=None, final=False, num_samples=1)
    probs, log_mass = sgd.marginals(log_probs, compiled, masked=None, state=None, final=False)

The set of sequences (the same for all three).  ``log_probs`` is ``[L, V]`` or ``[B, L, V]``
(natural log, V the logits width, numpy or torch).  A position with ``masked[i]`` true is a hole:
it adds no score and stands for exactly one token still to be chosen (EOS included).  A sequence
counts when *some* filling of its holes makes it

- a prefix of the language (``final=False``: the automaton ends in a live state), or
- a whole sentence (``final=True``: it ends accepting),

under the diffusion EOS rule: after the first EOS every position is EOS, and the state at the first
EOS is accepting (an answer shorter than the block is padded with EOS).  EOS ids are the
vocabulary's plus ``eos_ids=`` (e.g. a model's pad id; it must be a special token).  ``state``
continues from earlier blocks: a matcher of the same constraint (a terminated one means "after
EOS"), a DFA state id, or one of those per row.  ``fixed`` (extra, ``[L]`` / ``[B, L]`` ids, -1 for
none) pins positions to a token without reading their log-probs — the same as a one-hot row, cheaper;
``tail_holes=k`` (extra) appends ``k`` holes after the block without materialising their rows (the
rest of a canvas: the block must stay completable within it).

- :func:`dingo` maximises Σ ``log_probs[i, t_i]`` over the visible positions (ties: the smaller
  token, the smaller source state, the smaller end state — identical in every backend);
- :func:`sample` draws exactly from ∏ p_i(t_i) restricted to the set (forward filtering, backward
  sampling), holes returned as -1;
- :func:`marginals` returns the exact marginals P(t_i = t | the set) and log Σ over the set of
  ∏ p_i(t_i) (the log of the probability mass that stays valid when each row is normalised).

All raise :class:`~structgen.errors.GenerationError` when the set is empty.  Backends: ``"numba"``
(CPU, one sequence per call of a ``@njit`` kernel), ``"torch"`` (batched tensors, CPU or CUDA, no
host sync until the final emptiness check); ``"auto"`` picks torch for CUDA tensors.  Holes between
visible positions make :func:`sample` / :func:`marginals` determinise the automaton over state sets
(:mod:`.subsets`, on the host); :func:`dingo` and trailing holes need no such step.
"""
from __future__ import annotations

import numpy as np
import torch

from ..errors import BitmaskError, GenerationError, OptionError
from . import kernels
from .subsets import SubsetLattice
from .torch_dp import dingo_torch, marginals_torch, sample_torch
from .transitions import Transitions, transitions_of

__all__ = ["dingo", "sample", "marginals", "log_mass", "local_log_mass", "prepare"]


class Prepared:
    """A call's inputs, normalised: ``mode``/``tok`` [B, L] (see :mod:`.kernels`), ``start`` [B]
    local states, ``endw`` [B, n], the transitions and how to give results back."""

    def __init__(self, trans: Transitions, lp, is_torch: bool, batched: bool, mode, tok, start, endw, tails):
        self.trans, self.lp, self.is_torch, self.batched = trans, lp, is_torch, batched
        self.mode, self.tok, self.start, self.endw, self.tails = mode, tok, start, endw, tails

    @property
    def interior_holes(self) -> np.ndarray:
        """Bool [B]: rows with a hole before a visible position."""
        return (self.mode == 2).any(axis=1)


def _rows(x, B: int, L: int, name: str, dtype):
    if x is None:
        return None
    a = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    if a.ndim == 1:
        a = np.broadcast_to(a, (B, a.shape[0]))
    if a.shape != (B, L):
        raise BitmaskError(f"{name} has shape {tuple(a.shape)}; expected ({L},) or ({B}, {L})")
    return np.ascontiguousarray(a.astype(dtype))


def _states(state, B: int) -> list[int]:
    def one(s):
        if s is None:
            return None
        if hasattr(s, "state") and not isinstance(s, (int, np.integer)):
            return int(s.state)
        if isinstance(s, (bool, float)) or not isinstance(s, (int, np.integer)):
            raise OptionError(f"state must be None, a matcher or a DFA state id, got {type(s).__name__}")
        return int(s)

    if isinstance(state, torch.Tensor):
        state = state.tolist()
    if isinstance(state, np.ndarray):
        state = state.tolist()
    if isinstance(state, (list, tuple)):
        if len(state) != B:
            raise OptionError(f"state lists {len(state)} entries for a batch of {B}")
        return [one(s) for s in state]
    return [one(state)] * B


def prepare(log_probs, compiled, *, masked=None, state=None, final=False, fixed=None, eos_ids=(),
            tail_holes=0) -> Prepared:
    """Normalise the arguments shared by :func:`dingo`, :func:`sample` and :func:`marginals`."""
    is_torch = isinstance(log_probs, torch.Tensor)
    lp = log_probs if is_torch else np.asarray(log_probs)
    if lp.ndim not in (2, 3):
        raise BitmaskError(f"log_probs must be [L, V] or [B, L, V], got shape {tuple(lp.shape)}")
    batched = lp.ndim == 3
    if not batched:
        lp = lp[None]
    B, L, V = (int(d) for d in lp.shape)
    if is_torch and not lp.is_floating_point():
        raise BitmaskError(f"log_probs must be floating point, got {lp.dtype}")
    if not is_torch and not np.issubdtype(lp.dtype, np.floating):
        raise BitmaskError(f"log_probs must be floating point, got {lp.dtype}")
    if not isinstance(final, (bool, np.bool_)):
        raise OptionError(f"final must be a bool, got {final!r}")
    if isinstance(tail_holes, bool) or not isinstance(tail_holes, (int, np.integer)) or tail_holes < 0:
        raise OptionError(f"tail_holes must be an integer >= 0, got {tail_holes!r}")
    states = _states(state, B)
    trans = transitions_of(compiled, roots=[s for s in states if s is not None], eos_ids=eos_ids)
    if V < trans.size:
        raise BitmaskError(f"log_probs has {V} columns; the vocabulary has {trans.size} tokens "
                           f"(logits width {trans.width})")
    start = np.empty(B, dtype=np.int64)
    for b, s in enumerate(states):
        q = trans.local(trans.token_dfa.start if s is None else s)
        if q < 0:
            raise GenerationError(f"row {b}: state {s} cannot continue (dead or unknown to this constraint)")
        start[b] = q
    hole = _rows(masked, B, L, "masked", np.bool_)
    hole = np.zeros((B, L), dtype=np.bool_) if hole is None else hole
    tok = _rows(fixed, B, L, "fixed", np.int64)
    tok = np.full((B, L), -1, dtype=np.int64) if tok is None else tok
    if (tok >= V).any():
        raise BitmaskError(f"fixed holds a token id >= the logits width {V}")
    if (hole & (tok >= 0)).any():
        raise OptionError("a position is both masked and fixed")
    mode = np.where(tok >= 0, 1, 0).astype(np.int8)
    mode[hole] = 2
    visible = ~hole
    last = np.where(visible.any(axis=1), L - 1 - np.argmax(visible[:, ::-1], axis=1), -1)
    tails = (L - 1 - last).astype(np.int64) + int(tail_holes)
    mode[np.arange(L)[None, :] > last[:, None]] = 3
    ends = trans.valid_ends(bool(final))
    endw = np.empty((B, trans.n), dtype=np.float64)
    cache: dict[int, np.ndarray] = {}
    for b in range(B):
        k = int(tails[b])
        if k not in cache:
            cache[k] = np.where(trans.can_end_within(ends, k), 0.0, -np.inf)
        endw[b] = cache[k]
    return Prepared(trans, lp, is_torch, batched, mode, tok, start, endw, tails)


def _backend(p: Prepared, backend: str) -> str:
    if backend not in ("auto", "numba", "torch"):
        raise OptionError(f"backend must be 'auto', 'numba' or 'torch', got {backend!r}")
    if backend == "auto":
        return "torch" if p.is_torch and p.lp.device.type != "cpu" else "numba"
    return backend


def _host(p: Prepared) -> np.ndarray:
    lp = p.lp.detach().cpu().numpy() if p.is_torch else p.lp
    if lp.dtype not in (np.float32, np.float64):
        lp = lp.astype(np.float32)
    return lp


def _fail(what: str, rows) -> GenerationError:
    rows = [int(r) for r in rows]
    where = f"row {rows[0]}" if len(rows) == 1 else f"rows {rows[:8]}{'...' if len(rows) > 8 else ''}"
    return GenerationError(f"{what}: no token sequence satisfies the constraint ({where}): every sequence these "
                           "log-probabilities allow leaves the language, or cannot finish in the positions given")


def _torch_args(p: Prepared) -> tuple:
    """The torch kernels' leading arguments: (log-probs as float, mode, tok, start, endw) on the
    log-probs' device."""
    dev = p.lp.device
    lp = p.lp if p.lp.dtype in (torch.float32, torch.float64) else p.lp.float()
    return (lp, torch.from_numpy(p.mode.astype(np.int64)).to(dev), torch.from_numpy(p.tok).to(dev),
            torch.from_numpy(p.start).to(dev), torch.from_numpy(p.endw).to(dev))


def _check_rows(what: str, log_z) -> None:
    """Raise the GenerationError of :func:`_fail` for the rows whose valid mass is zero."""
    bad = torch.isinf(log_z)
    if bool(bad.any()):
        raise _fail(what, torch.nonzero(bad).flatten().tolist())


def dingo(log_probs, compiled, *, masked=None, state=None, final=False, fixed=None, eos_ids=(), tail_holes=0,
          backend="auto"):
    """DINGO: the most probable valid sequence — ``(tokens, log_prob)``.

    ``tokens``: ``[L]`` (or ``[B, L]``) ids, -1 at masked positions; ``log_prob``: the sum of
    ``log_probs[i, tokens[i]]`` over the visible positions (a float, or ``[B]``).  The answer
    maximises that sum over the sequences described in the module docstring; ties are broken
    deterministically.  Same container as ``log_probs`` (numpy, or torch on its device).
    Raises GenerationError when no valid sequence exists.
    """
    p = prepare(log_probs, compiled, masked=masked, state=state, final=final, fixed=fixed, eos_ids=eos_ids,
                tail_holes=tail_holes)
    t = p.trans
    B, L = p.mode.shape
    if _backend(p, backend) == "torch":
        tokens, score = dingo_torch(*_torch_args(p), t, fixed_any=bool((p.mode == 1).any()))
        _check_rows("dingo", score)
    else:
        lp = _host(p)
        tokens = np.full((B, L), -1, dtype=np.int64)
        score = np.empty(B, dtype=np.float64)
        for b in range(B):
            score[b] = kernels.dingo_kernel(lp[b], p.mode[b], p.tok[b], int(p.start[b]), p.endw[b], t.n, t.tcls,
                                            t.cptr, t.ctok, t.gptr, t.gcls, t.esrc, t.edst, t.egrp, tokens[b])
        if np.isinf(score).any():
            raise _fail("dingo", np.flatnonzero(np.isinf(score)))
        if p.is_torch:
            tokens = torch.from_numpy(tokens).to(p.lp.device)
            score = torch.from_numpy(score).to(p.lp.device)
    if not p.batched:
        return tokens[0], float(score[0])
    return tokens, score


def _numpy_rng(generator):
    if isinstance(generator, np.random.Generator):
        return generator
    if isinstance(generator, torch.Generator):
        return np.random.default_rng(int(torch.randint(0, 2 ** 62, (1,), generator=generator,
                                                       device=generator.device).item()))
    if generator is None or isinstance(generator, (int, np.integer)):
        return np.random.default_rng(generator)
    raise OptionError(f"generator must be None, a seed, a numpy Generator or a torch.Generator, "
                      f"got {type(generator).__name__}")


def _forward(lp_b, p: Prepared, b: int):
    t = p.trans
    L = p.mode.shape[1]
    A = np.empty((L + 1, t.n))
    ew = np.empty((L, t.esrc.size))
    clse = np.full((L, t.n_classes), -np.inf)
    kernels.forward_kernel(lp_b, p.mode[b], p.tok[b], int(p.start[b]), t.n, t.tcls, t.cptr, t.ctok, t.gptr,
                           t.gcls, t.esrc, t.edst, t.egrp, A, ew, clse)
    return A, ew, clse, kernels.log_total(A[L], p.endw[b])


def sample(log_probs, compiled, *, masked=None, state=None, final=False, num_samples=1, generator=None,
           fixed=None, eos_ids=(), tail_holes=0, backend="auto", return_log_mass=False):
    """Exact samples from ∏ p_i(t_i) restricted to the valid sequences (see the module docstring).

    Returns ``[num_samples, L]`` (or ``[B, num_samples, L]``) token ids, -1 at masked positions, in
    the container of ``log_probs``.  ``generator``: a ``torch.Generator`` (the torch backend draws
    with it; the numba one seeds a numpy generator from it), a numpy ``Generator``, a seed or None.
    ``return_log_mass``: return ``(samples, log_mass)`` (as :func:`marginals`' second value).
    Raises GenerationError when no valid sequence exists.
    """
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)) or num_samples < 1:
        raise OptionError(f"num_samples must be an integer >= 1, got {num_samples!r}")
    p = prepare(log_probs, compiled, masked=masked, state=state, final=final, fixed=fixed, eos_ids=eos_ids,
                tail_holes=tail_holes)
    t = p.trans
    B, L = p.mode.shape
    S = int(num_samples)
    holes = p.interior_holes
    use_torch = _backend(p, backend) == "torch" and not holes.any()
    if use_torch:
        if generator is not None and not isinstance(generator, torch.Generator):
            raise OptionError("the torch backend samples with a torch.Generator (or None)")
        out, log_z = sample_torch(*_torch_args(p), t, S, generator=generator, fixed_any=bool((p.mode == 1).any()))
        _check_rows("sample", log_z)
    else:
        rng = _numpy_rng(generator)
        lp = _host(p)
        out = np.full((B, S, L), -1, dtype=np.int64)
        log_z = np.empty(B, dtype=np.float64)
        bad = []
        for b in range(B):
            if holes[b]:
                lat = SubsetLattice(t, lp[b], p.mode[b], p.tok[b], int(p.start[b]), p.endw[b])
                log_z[b] = lat.log_z
                if np.isinf(lat.log_z):
                    bad.append(b)
                    continue
                out[b] = lat.sample(rng, S)
                continue
            A, ew, clse, log_z[b] = _forward(lp[b], p, b)
            if np.isinf(log_z[b]):
                bad.append(b)
                continue
            kernels.sample_kernel(lp[b], p.mode[b], p.tok[b], p.endw[b], t.n, t.cptr, t.ctok, t.gptr, t.gcls,
                                  t.esrc, t.egrp, t.iptr, t.iedge, A, ew, clse, log_z[b], rng.random((S, 3 * L + 1)),
                                  out[b])
        if bad:
            raise _fail("sample", bad)
        if p.is_torch:
            out = torch.from_numpy(out).to(p.lp.device)
            log_z = torch.from_numpy(log_z).to(p.lp.device)
    if not p.batched:
        out, log_z = out[0], float(log_z[0])
    return (out, log_z) if return_log_mass else out


def marginals(log_probs, compiled, *, masked=None, state=None, final=False, fixed=None, eos_ids=(),
              tail_holes=0, backend="auto"):
    """Exact constrained marginals — ``(probs, log_mass)``.

    ``probs[i, t]`` = P(t_i = t) under ∏ p_i restricted to the valid sequences (``[L, V]`` or
    ``[B, L, V]``; masked rows are 0, fixed positions one-hot); ``log_mass`` = log of
    Σ over the valid sequences of ∏ p_i(t_i) over the visible positions (a float, or ``[B]``).
    Raises GenerationError when no valid sequence exists.
    """
    p = prepare(log_probs, compiled, masked=masked, state=state, final=final, fixed=fixed, eos_ids=eos_ids,
                tail_holes=tail_holes)
    t = p.trans
    B, L = p.mode.shape
    V = int(p.lp.shape[-1])
    holes = p.interior_holes
    if _backend(p, backend) == "torch" and not holes.any():
        probs, log_z = marginals_torch(*_torch_args(p), t, fixed_any=bool((p.mode == 1).any()))
        _check_rows("marginals", log_z)
    else:
        lp = _host(p)
        probs = np.zeros((B, L, V), dtype=np.float64)
        log_z = np.empty(B, dtype=np.float64)
        for b in range(B):
            if holes[b]:
                lat = SubsetLattice(t, lp[b], p.mode[b], p.tok[b], int(p.start[b]), p.endw[b])
                log_z[b] = lat.log_z
                if not np.isinf(lat.log_z):
                    lat.marginals(probs[b])
                continue
            A, ew, _, log_z[b] = _forward(lp[b], p, b)
            if not np.isinf(log_z[b]):
                kernels.marginals_kernel(lp[b], p.mode[b], p.tok[b], p.endw[b], t.n, t.cptr, t.ctok, t.gptr, t.gcls,
                                         t.esrc, t.edst, t.egrp, A, ew, log_z[b], probs[b])
        if np.isinf(log_z).any():
            raise _fail("marginals", np.flatnonzero(np.isinf(log_z)))
        if p.is_torch:
            probs = torch.from_numpy(probs).to(device=p.lp.device, dtype=p.lp.dtype)
            log_z = torch.from_numpy(log_z).to(p.lp.device)
    if not p.batched:
        return probs[0], float(log_z[0])
    return probs, log_z


def log_mass(log_probs, compiled, *, masked=None, state=None, final=False, fixed=None, eos_ids=(), tail_holes=0):
    """log Σ over the valid sequences of ∏ p_i(t_i) (the second value of :func:`marginals`, by a
    forward pass only): ``-inf`` where nothing is valid (no error).  A float, or ``[B]`` numpy."""
    p = prepare(log_probs, compiled, masked=masked, state=state, final=final, fixed=fixed, eos_ids=eos_ids,
                tail_holes=tail_holes)
    lp = _host(p)
    out = np.empty(p.mode.shape[0], dtype=np.float64)
    for b in range(out.size):
        if p.interior_holes[b]:
            out[b] = SubsetLattice(p.trans, lp[b], p.mode[b], p.tok[b], int(p.start[b]), p.endw[b]).log_z
        else:
            out[b] = _forward(lp[b], p, b)[3]
    return out if p.batched else float(out[0])


def local_log_mass(log_probs, compiled, at, *, state=None, final=False, fixed=None, eos_ids=(), tail_holes=0):
    """Per-position masks: ``[L]`` (or ``[B, L]``) numpy, entry ``i`` (where ``at[i]``) the log of
    Σ p_i(t) over the tokens t that keep the sequence completable when every other position that
    is not ``fixed`` is a hole (what an autoregressive token mask keeps, position by position);
    NaN where not ``at``.  Two boolean passes over the edges plus one pass over V per position."""
    p = prepare(log_probs, compiled, state=state, final=final, fixed=fixed, eos_ids=eos_ids, tail_holes=tail_holes)
    t = p.trans
    B, L = p.mode.shape
    want = np.broadcast_to(np.asarray(at, dtype=np.bool_), (B, L))
    lp = _host(p)
    mode = np.where(p.mode == 0, 2, p.mode).astype(np.int8)   # every free position a hole
    mode[p.mode == 3] = 3
    out = np.full((B, L), np.nan)
    for b in range(B):
        kernels.local_mass_kernel(lp[b], mode[b], p.tok[b], int(p.start[b]), p.endw[b], t.n, t.tcls, t.cptr, t.ctok,
                                  t.gptr, t.gcls, t.esrc, t.edst, t.egrp, np.ascontiguousarray(want[b]), out[b])
    out[~want] = np.nan
    return out if p.batched else out[0]
