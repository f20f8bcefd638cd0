"""A logits processor that keeps transformers' DiffusionGemma on a constraint.

    from transformers import LogitsProcessorList
    proc = sgd.DiffusionLogitsProcessor(compiled, max_new_tokens=64)   # method="map" | "sample" | "lookahead"
    out = model.generate(input_ids, logits_processor=LogitsProcessorList([proc]), max_new_tokens=64)

``DiffusionGemmaForBlockDiffusion.generate`` (transformers ≥ 5.18) decodes canvases of
``config.canvas_length`` tokens one after another; in each denoising step it calls every processor
with ``(input_ids, scores[B, L, V], cur_step)`` — ``input_ids`` the prompt plus the canvases already
appended, ``scores`` the decoder's logits for the current canvas (a uniform-noise canvas being
denoised) — then samples the canvas from ``softmax(scores)``, keeps low-entropy tokens, and appends
the last step's ``argmax`` when the canvas is done.  This processor replaces each step's scores by a
whole valid canvas: 0 at the chosen token of each position and -inf elsewhere, the tokens being
DINGO's MAP (``method="map"``) or an exact sample of the constrained product distribution
(``method="sample"``) of ``log_softmax(scores)``, given the state the earlier canvases left.  Both the
model's sample and its argmax are then that canvas, so whichever step ends a canvas, the appended
tokens are valid.  Put it first in the list (later processors only rescale; ``-inf`` stays).

``max_new_tokens`` (the value given to ``generate``) tells the processor how many canvases remain, so
that every canvas stays completable and the last one ends accepting (EOS pads the rest); without it
every canvas is only kept a valid *prefix*, and an output cut by ``max_new_tokens`` may be
incomplete.  The prompt length is taken from the first call (or ``prompt_length=``); call
:meth:`reset` (or make a new processor) between ``generate`` calls.  Tokens after the first EOS are
the model's padding and are ignored.  On a CUDA model the DP runs on the GPU (torch backend).

``method="lookahead"`` takes every constraint kind, grammars included (Lark, GBNF, recursive JSON
Schemas).  Per row and canvas one :class:`~.lookahead.Lookahead` engine (``lookahead=`` overrides
its options, default :data:`~.lookahead.DEFAULTS`) keeps the *committed* tokens across the
canvas's denoising steps: a step commits ``ceil(holes / cur_step)`` of them (``cur_step`` counts
the steps left, 1 at the last, when the whole canvas is committed), each proposed by the model's
scores of that step and kept only when the canvas stays completable.  Since DiffusionGemma may
stop at any step and appends that step's argmax, the positions still undecided are written too:
filled left to right by a second engine with the model's most likely tokens that keep the canvas
completable (the committed tokens and the later canvases, as holes, stay fixed around them).  So
every step's canvas is valid and the next step's model input is that canvas.  ``on_commit(row,
canvas, state)`` is called after every commit of either engine (``canvas``: this canvas plus the
later canvases, ``-1`` at holes; ``state``: the matcher it starts from); :attr:`stats` and
:attr:`fill_stats` sum the engines' counters, :attr:`step_seconds` the processor's time per call.
"""
from __future__ import annotations

import math
import time

import numpy as np
import torch

from ..compiler import CompiledGrammar
from ..errors import OptionError
from .completable import DEFAULT_LIMITS
from .dp import dingo, sample
from .lookahead import DEFAULTS, Lookahead, LookaheadStats
from .transitions import token_dfa_of

__all__ = ["DiffusionLogitsProcessor", "METHODS"]

METHODS = ("map", "sample", "lookahead")

try:  # transformers is a dependency, but keep the import error readable
    from transformers import LogitsProcessor as _Base
except Exception:  # pragma: no cover
    _Base = object


class DiffusionLogitsProcessor(_Base):
    """Turns each denoising step's scores into a valid canvas (see the module docstring).

    Args:
        compiled: a :class:`~structgen.CompiledGrammar`; ``map`` / ``sample``: a regular one
            (:class:`~structgen.errors.Unsupported` otherwise).
        method: ``"map"``, ``"sample"`` or ``"lookahead"``.
        max_new_tokens: the value given to ``generate`` (None: every canvas only a valid prefix).
        prompt_length: the prompt's columns in ``input_ids`` (default: the first call's width).
        eos_ids: extra ids that end the output (a model's pad id).
        generator: the torch generator of ``sample``.
        backend: the DP backend of ``map`` / ``sample``.
        lookahead: :class:`~.lookahead.Lookahead` options (``beam_width``, ``tau``, ``limits``,
            ``tail_nodes``, ``first_tries``, ``exact_max_holes``) over :data:`~.lookahead.DEFAULTS`.
        on_commit: ``method="lookahead"``: called as ``on_commit(row, canvas, state)`` after every commit.
    Raises:
        OptionError: a bad argument; Unsupported: a grammar with ``map`` / ``sample``.
    """

    def __init__(self, compiled, *, method: str = "map", max_new_tokens: int | None = None,
                 prompt_length: int | None = None, eos_ids=(), generator=None, backend: str = "auto",
                 lookahead: dict | None = None, on_commit=None):
        if method not in METHODS:
            raise OptionError(f"method must be one of {METHODS}, got {method!r}")
        if method == "lookahead":
            if not isinstance(compiled, CompiledGrammar):
                raise OptionError(f"method='lookahead' takes a CompiledGrammar (sg.compile), got "
                                  f"{type(compiled).__name__}")
        else:
            token_dfa_of(compiled)             # regular constraints only (Unsupported otherwise)
        for name, v in (("max_new_tokens", max_new_tokens), ("prompt_length", prompt_length)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise OptionError(f"{name} must be None or an integer >= 0, got {v!r}")
        if on_commit is not None and not callable(on_commit):
            raise OptionError(f"on_commit must be callable, got {type(on_commit).__name__}")
        self.compiled = compiled
        self.method = method
        self.max_new_tokens = max_new_tokens
        self._given_prompt_length = prompt_length
        self.eos_ids = tuple(int(t) for t in eos_ids)
        self.generator = generator
        self.backend = backend
        self.on_commit = on_commit
        self.options = _lookahead_options(lookahead) if method == "lookahead" else None
        if method == "lookahead":
            vocab_eos = [int(t) for t in compiled.vocab.eos_ids]
            self._la_eos = vocab_eos + [t for t in self.eos_ids if t not in vocab_eos]
            if max_new_tokens is not None and not self._la_eos:
                raise OptionError("max_new_tokens= makes the last canvas end the output: it needs an EOS id (the "
                                  "vocabulary has none; pass eos_ids=)")
        self.calls = 0
        self.step_seconds: list = []
        self._closed = LookaheadStats()
        self.fill_stats = LookaheadStats()
        self.reset()

    def reset(self) -> None:
        """Forget the rows (call it between ``generate`` calls); the counters are kept."""
        for run in getattr(self, "_runs", ()):
            if run is not None:
                self._closed.merge(run[1].stats)
        self.prompt_length = self._given_prompt_length
        self._rows: list = []       # per row: (tokens consumed, matcher)
        self._runs: list = []       # lookahead, per row: [generated length, engine, canvas, start state] or None

    @property
    def stats(self) -> LookaheadStats:
        """The committing engines' counters (``method="lookahead"``), summed over rows and canvases."""
        out = LookaheadStats()
        out.merge(self._closed)
        for run in self._runs:
            if run is not None:
                out.merge(run[1].stats)
        return out

    def _state(self, b: int, generated: list[int]):
        """The matcher after row ``b``'s generated tokens (up to its first EOS)."""
        while len(self._rows) <= b:
            self._rows.append(([], self.compiled.matcher()))
        done, m = self._rows[b]
        n = min(len(done), len(generated))
        common = next((i for i in range(n) if done[i] != generated[i]), n)
        if common < len(done):
            m = self.compiled.matcher()
            done = []
            common = 0
        for t in generated[common:]:
            if not m.is_terminated():
                m.advance(int(t))  # a refused token can only be padding after EOS
            done.append(int(t))
        self._rows[b] = (done, m)
        return m

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor, cur_step=None) -> torch.Tensor:
        if not isinstance(scores, torch.Tensor) or scores.dim() != 3:
            raise OptionError(f"DiffusionLogitsProcessor takes canvas scores [B, L, V], got "
                              f"{tuple(getattr(scores, 'shape', ()))}")
        t0 = time.perf_counter()
        self.calls += 1
        if self.prompt_length is None:
            self.prompt_length = int(input_ids.shape[1])
        B, L, V = scores.shape
        if input_ids.shape[0] != B:
            raise OptionError(f"input_ids has {input_ids.shape[0]} rows, scores {B}")
        gen = input_ids[:, self.prompt_length:].tolist()
        final, tail = False, 0
        if self.max_new_tokens is not None:
            canvases = math.ceil(self.max_new_tokens / L)
            done = len(gen[0]) // L if gen else 0
            tail = max(0, canvases - done - 1) * L
            final = True
        lp = torch.log_softmax(scores.float(), dim=-1)
        if self.method == "lookahead":
            tokens = self._lookahead(gen, lp, L, final, tail, cur_step)
        else:
            states = [self._state(b, gen[b]) for b in range(B)]
            kw = dict(state=states, final=final, eos_ids=self.eos_ids, tail_holes=tail, backend=self.backend)
            if self.method == "map":
                tokens, _ = dingo(lp, self.compiled, **kw)
            else:
                tokens = sample(lp, self.compiled, generator=self.generator, **kw)[:, 0]
        tokens = torch.as_tensor(tokens, device=scores.device).long()
        out = torch.full_like(scores, float("-inf"))
        out.scatter_(2, tokens.view(B, L, 1), 0.0)
        self.step_seconds.append(time.perf_counter() - t0)
        return out

    # ------------------------------------------------------------------ method="lookahead"
    def _lookahead(self, gen, lp, L, final, tail, cur_step) -> np.ndarray:
        """The ``[B, L]`` canvas of this step (see the module docstring)."""
        B = lp.shape[0]
        left = 1 if cur_step is None else max(1, int(cur_step))
        rows = lp.detach().to("cpu", torch.float32).numpy()
        out = np.empty((B, L), np.int64)
        eos = set(self._la_eos)
        while len(self._runs) < B:
            self._runs.append(None)
        for b in range(B):
            if eos and any(t in eos for t in gen[b]):   # the row has ended: the model's padding
                out[b] = self._la_eos[0]
                continue
            run = self._runs[b]
            if run is None or run[0] != len(gen[b]):     # a new canvas for this row
                if run is not None:
                    self._closed.merge(run[1].stats)
                start = self._state(b, gen[b]).fork()
                engine = Lookahead(self.compiled, -1, self._la_eos or None, final=final, state=start,
                                   on_commit=self._callback(b, start), **self.options)
                run = self._runs[b] = [len(gen[b]), engine, np.full(L + tail, -1, np.int64), start]
            _, engine, canvas, start = run
            holes = int((canvas[:L] < 0).sum())
            if holes:
                n = holes if left <= 1 else -(-holes // left)
                canvas = engine.step(canvas, rows[b], (0, L), n=n)
                if left <= 1 and (canvas[:L] < 0).any():
                    canvas = engine.finish_block(canvas, rows[b], (0, L))
                run[2] = canvas
            written = canvas
            if (canvas[:L] < 0).any():                  # write the undecided positions too
                if engine.cache:                        # the last beam's verified filling first: what is
                    written = canvas.copy()             # left then lies after the last fixed position,
                    for p, t in engine.cache.items():  # where the tail tests decide each token at once
                        if written[p] < 0:
                            written[p] = t
                filler = Lookahead(self.compiled, -1, self._la_eos or None, final=final, state=start,
                                   on_commit=self._callback(b, start), **self.options)
                written = filler.finish_block(written, rows[b], (0, L))
                self.fill_stats.merge(filler.stats)
            out[b] = written[:L]
        return out

    def _callback(self, b, start):
        if self.on_commit is None:
            return None
        return lambda canvas: self.on_commit(b, canvas, start)


_OPTIONS = ("beam_width", "tau", "limits", "tail_nodes", "first_tries", "exact_max_holes")


def _lookahead_options(given) -> dict:
    """:data:`~.lookahead.DEFAULTS` updated by ``given`` (checked: structgen errors for bad ones)."""
    if given is not None and not isinstance(given, dict):
        raise OptionError(f"lookahead= must be a dict of Lookahead options, got {type(given).__name__}")
    opts = {k: v for k, v in DEFAULTS.items()}
    for k, v in (given or {}).items():
        if k not in _OPTIONS:
            raise OptionError(f"unknown lookahead option {k!r} (known: {', '.join(_OPTIONS)})")
        opts[k] = v
    for k in ("beam_width", "tau", "tail_nodes", "first_tries", "exact_max_holes"):
        v = opts.get(k)
        low = 1 if k == "tau" else 0
        if v is None and k == "exact_max_holes":
            continue
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < low):
            raise OptionError(f"lookahead option {k} must be an integer >= {low}, got {v!r}")
    if opts.get("limits") is not None and not isinstance(opts["limits"], dict):
        raise OptionError(f"lookahead option limits must be a dict, got {type(opts['limits']).__name__}")
    opts["limits"] = dict(opts.get("limits") or {})
    for k, v in opts["limits"].items():
        if k not in DEFAULT_LIMITS or isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise OptionError(f"lookahead limits: {k}={v!r} (known: {', '.join(DEFAULT_LIMITS)}; integers >= 1)")
    return opts
