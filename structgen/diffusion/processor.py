"""A logits processor that keeps transformers' DiffusionGemma on a regular constraint.

    from transformers import LogitsProcessorList
    proc = sgd.DiffusionLogitsProcessor(compiled, max_new_tokens=64)        # method="map" | "sample"
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
"""
from __future__ import annotations

import math

import torch

from ..errors import OptionError
from .dp import dingo, sample
from .transitions import token_dfa_of

__all__ = ["DiffusionLogitsProcessor"]

try:  # transformers is a dependency, but keep the import error readable
    from transformers import LogitsProcessor as _Base
except Exception:  # pragma: no cover
    _Base = object


class DiffusionLogitsProcessor(_Base):
    """Turns each denoising step's scores into a valid canvas (see the module docstring)."""

    def __init__(self, compiled, *, method: str = "map", max_new_tokens: int | None = None,
                 prompt_length: int | None = None, eos_ids=(), generator=None, backend: str = "auto"):
        token_dfa_of(compiled)                 # regular constraints only (Unsupported otherwise)
        if method not in ("map", "sample"):
            raise OptionError(f"method must be 'map' or 'sample', got {method!r}")
        for name, v in (("max_new_tokens", max_new_tokens), ("prompt_length", prompt_length)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise OptionError(f"{name} must be None or an integer >= 0, got {v!r}")
        self.compiled = compiled
        self.method = method
        self.max_new_tokens = max_new_tokens
        self._given_prompt_length = prompt_length
        self.eos_ids = tuple(int(t) for t in eos_ids)
        self.generator = generator
        self.backend = backend
        self.calls = 0
        self.reset()

    def reset(self) -> None:
        self.prompt_length = self._given_prompt_length
        self._rows: list = []       # per row: (tokens consumed, matcher)

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
        if scores.dim() != 3:
            raise OptionError(f"DiffusionLogitsProcessor takes canvas scores [B, L, V], got {tuple(scores.shape)}")
        self.calls += 1
        if self.prompt_length is None:
            self.prompt_length = int(input_ids.shape[1])
        B, L, V = scores.shape
        gen = input_ids[:, self.prompt_length:].tolist()
        states = [self._state(b, gen[b]) for b in range(B)]
        final, tail = False, 0
        if self.max_new_tokens is not None:
            canvases = math.ceil(self.max_new_tokens / L)
            done = len(gen[0]) // L if gen else 0
            tail = max(0, canvases - done - 1) * L
            final = True
        lp = torch.log_softmax(scores.float(), dim=-1)
        kw = dict(state=states, final=final, eos_ids=self.eos_ids, tail_holes=tail, backend=self.backend)
        if self.method == "map":
            tokens, _ = dingo(lp, self.compiled, **kw)
        else:
            tokens = sample(lp, self.compiled, generator=self.generator, **kw)[:, 0]
        tokens = torch.as_tensor(tokens, device=scores.device).long()
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(2, tokens.view(B, L, 1), 0.0)
