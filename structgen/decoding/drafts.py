"""Draft sources for speculative decoding and the plan one row's drafts make.

A :class:`Plan` is a chain of *slots* walked from a row's current point: each slot holds the
mask of the constraint there, the draft token proposed for it (``None`` for the last slot,
where the target samples its bonus token) with its source and its draft distribution
(``None`` for deterministic sources: one-hot), and the forced tokens fast-forward appends
after it.  Building a plan advances the row's matcher along the chain; :meth:`Plan.rewind`
takes every step back.

Sources here are the deterministic ones: :func:`lookup_continuation` (prompt lookup: the
tokens that followed the latest earlier occurrence of the context's last n-gram) and the
constraint's forced tokens.  The draft model is driven by the decoder, which batches it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..runtime.protocol import Matcher

__all__ = ["Slot", "Plan", "lookup_continuation", "lookup_firsts", "SOURCES"]

SOURCES = ("draft_model", "prompt_lookup", "grammar")


def lookup_continuation(context, max_ngram: int = 3, min_ngram: int = 1, max_tokens: int = 8) -> list[int]:
    """Up to ``max_tokens`` tokens that followed the most recent earlier occurrence of the
    longest suffix n-gram (``max_ngram`` down to ``min_ngram`` tokens) of ``context``; ``[]``
    when no suffix of those lengths occurred before."""
    ctx = np.asarray(context, dtype=np.int64)
    n_ctx = len(ctx)
    for n in range(min(max_ngram, n_ctx - 1), min_ngram - 1, -1):
        if n < 1:
            break
        starts = n_ctx - n          # a match starts at s < n_ctx - n, so a token follows it
        ok = ctx[:starts] == ctx[n_ctx - n]
        for j in range(1, n):
            ok &= ctx[j:starts + j] == ctx[n_ctx - n + j]
        hits = np.flatnonzero(ok)
        if hits.size:
            start = int(hits[-1]) + n
            return ctx[start:start + max_tokens].tolist()
    return []


def lookup_firsts(context, max_ngram: int = 3, min_ngram: int = 1, count: int = 4) -> list[int]:
    """Up to ``count`` distinct tokens that followed earlier occurrences of the context's suffix
    n-grams: longer n-grams first, then the most recent occurrence first."""
    ctx = np.asarray(context, dtype=np.int64)
    n_ctx = len(ctx)
    out: list[int] = []
    for n in range(min(max_ngram, n_ctx - 1), min_ngram - 1, -1):
        if n < 1:
            break
        starts = n_ctx - n
        ok = ctx[:starts] == ctx[n_ctx - n]
        for j in range(1, n):
            ok &= ctx[j:starts + j] == ctx[n_ctx - n + j]
        for h in np.flatnonzero(ok)[::-1].tolist():
            t = int(ctx[h + n])
            if t not in out:
                out.append(t)
                if len(out) >= count:
                    return out
    return out


@dataclass
class Slot:
    """One verification position of a plan."""

    mask: int | None                  # row of the plan's bitmask, None when unconstrained
    token: int | None = None          # the draft token; None on the last slot (bonus)
    source: str | None = None         # one of SOURCES
    q: torch.Tensor | None = None     # draft distribution [V]; None: one-hot on ``token``
    after: list[int] = field(default_factory=list)   # forced tokens fast-forward appends after ``token``


class Plan:
    """One row's draft chain for one verification pass (see the module docstring)."""

    def __init__(self, matcher: Matcher | None, bitmask: torch.Tensor | None, eos_ids, fast_forward: bool):
        self.matcher = matcher
        self.bitmask = bitmask            # [capacity, words] int32, rows filled as slots open
        self.eos = set(int(e) for e in eos_ids)
        self.fast_forward = fast_forward
        self.slots: list[Slot] = []
        self.steps = 0                    # matcher steps taken while building
        self.closed = False               # ended by an EOS draft: no bonus slot
        self._open()

    # ---------------------------------------------------------------- building
    def _open(self) -> None:
        row = None
        if self.matcher is not None:
            row = len(self.slots)
            if row >= self.bitmask.shape[0]:
                grown = torch.zeros((2 * row + 1, self.bitmask.shape[1]), dtype=torch.int32)
                grown[:row] = self.bitmask[:row]
                self.bitmask = grown
            self.matcher.fill_bitmask(self.bitmask, row)
        self.slots.append(Slot(row))

    @property
    def drafts(self) -> int:
        """Draft tokens proposed so far."""
        return len(self.slots) - 1 + (1 if self.closed else 0)

    def chain(self) -> list[int]:
        """The tokens to feed after the row's context: drafts and the forced tokens after them."""
        out = []
        for s in self.slots:
            if s.token is not None:
                out.append(s.token)
                out.extend(s.after)
        return out

    def allows(self, token: int) -> bool:
        """Whether the open slot's mask allows ``token``."""
        if self.matcher is None:
            return True
        row = self.slots[-1].mask
        word = int(self.bitmask[row, token >> 5])
        return (word >> (token & 31)) & 1 == 1

    def propose(self, token: int, source: str, q: torch.Tensor | None = None, max_forced: int = 0) -> bool:
        """Put ``token`` into the open slot and open the next one; False (nothing changed) when
        the constraint does not allow it here."""
        if self.closed or not self.allows(token):
            return False
        m = self.matcher
        if m is not None:
            if not m.advance(token):
                return False
            self.steps += 1
        slot = self.slots[-1]
        slot.token, slot.source, slot.q = int(token), source, q
        if token in self.eos:
            self.closed = True
            return True
        if m is not None and self.fast_forward and max_forced > 0:
            for f in list(m.forced_tokens())[:max_forced]:
                if not m.advance(int(f)):
                    break
                self.steps += 1
                slot.after.append(int(f))
        self._open()
        return True

    def rewind(self, keep_steps: int = 0) -> None:
        """Take back the matcher steps of this plan beyond the first ``keep_steps``."""
        if self.matcher is not None and self.steps > keep_steps:
            self.matcher.rollback(self.steps - keep_steps)
        self.steps = keep_steps
