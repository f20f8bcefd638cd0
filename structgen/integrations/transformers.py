"""A transformers ``LogitsProcessor`` that enforces a compiled constraint.

``model.generate`` calls a logits processor with the whole sequence so far, and
not always once per step: assisted (speculative) generation calls it on
drafted prefixes and then on verified ones, beam search reorders rows.  So this
processor never assumes a call order.  For each row it keeps a matcher and the
tokens that matcher consumed; on every call it rolls back to the longest common
prefix with the row's generated tokens and advances through the rest.  The
generated part of a row starts at the prompt length, taken from the first call
(or given).  Matchers are used only through the :class:`~structgen.Matcher`
protocol (``advance``, ``rollback``, ``fill_bitmask``), so ``compiled`` may be any
object with ``matcher()`` and ``vocab``; an item set (:class:`~structgen.ItemIndex`,
:class:`~structgen.ItemCatalog` or an index's ``subset()``) with ``vocab=`` is decoded through
:class:`~structgen.runtime.item_matcher.ItemMatcher`, so ``model.generate(num_beams=...)`` runs a
beam search over the items.
"""
from __future__ import annotations

import numpy as np
import torch

from ..errors import OptionError
from ..index.catalog import ItemCatalog
from ..index.items import ItemIndex, ItemSubset
from ..kernels.bitmask import allocate_bitmask, apply_bitmask_
from ..runtime.batch import fill_bitmasks
from ..runtime.item_matcher import ItemMatcher

try:  # transformers is a dependency, but keep the import error readable.
    from transformers import LogitsProcessor as _Base
except Exception:  # pragma: no cover
    _Base = object


class _RowState:
    __slots__ = ("matcher", "tokens", "broken_at")

    def __init__(self, matcher):
        self.matcher = matcher
        self.tokens: list[int] = []
        self.broken_at: int | None = None  # first generated position the constraint rejected


class _ItemSource:
    """An item set and a vocabulary, as the ``matcher()`` / ``vocab`` pair the processor takes."""

    def __init__(self, items, vocab):
        self.items, self.vocab = items, vocab
        ItemMatcher(items, vocab)  # refuse bad item tokens now, not at the first call

    def matcher(self) -> ItemMatcher:
        return ItemMatcher(self.items, self.vocab)


_ITEM_TYPES = (ItemIndex, ItemSubset, ItemCatalog)


class StructgenLogitsProcessor(_Base):
    """Masks logits so that every row's generated tokens stay inside the constraint.

    ``compiled`` is one :class:`~structgen.CompiledGrammar` for every row, or a
    list with one per input sequence (rows of a beam search or of
    ``num_return_sequences`` map to their input sequence).  A row whose
    generated tokens left the constraint (only padding after EOS can) is given
    an EOS-only mask.  Call :meth:`reset` (or make a new processor) between
    ``generate`` calls.

    ``compiled`` (or an entry of the list) may also be an item set (an
    :class:`~structgen.ItemIndex`, :class:`~structgen.ItemCatalog` or ``index.subset(...)``);
    then ``vocab`` (the :class:`~structgen.Vocabulary` at the model's logits width) is
    required, and each row's output is one item followed by EOS.
    """

    def __init__(self, compiled, prompt_length: int | None = None, *, vocab=None):
        many = compiled if isinstance(compiled, (list, tuple)) else [compiled]
        if any(isinstance(c, _ITEM_TYPES) for c in many):
            if vocab is None:
                raise OptionError("StructgenLogitsProcessor over an item set needs vocab= (a structgen.Vocabulary)")
            many = [_ItemSource(c, vocab) if isinstance(c, _ITEM_TYPES) else c for c in many]
            compiled = many if isinstance(compiled, (list, tuple)) else many[0]
        if not many or not all(callable(getattr(c, "matcher", None)) and hasattr(c, "vocab") for c in many):
            raise OptionError("StructgenLogitsProcessor takes a CompiledGrammar (structgen.compile(...)) or a "
                              f"non-empty list of them, got {type(compiled).__name__}")
        if prompt_length is not None and (isinstance(prompt_length, bool) or not isinstance(prompt_length, int)
                                          or prompt_length < 0):
            raise OptionError(f"prompt_length must be None or an integer >= 0, got {prompt_length!r}")
        self._compiled = compiled
        self._given_prompt_length = prompt_length
        self.reset()

    def reset(self) -> None:
        self.prompt_length = self._given_prompt_length
        self._rows: list[_RowState] = []
        self._bitmask = None

    def _grammar_for_row(self, row: int, n_rows: int):
        if not isinstance(self._compiled, (list, tuple)):
            return self._compiled
        per = max(1, n_rows // len(self._compiled))
        return self._compiled[min(row // per, len(self._compiled) - 1)]

    def _sync(self, st: _RowState, generated: np.ndarray) -> None:
        toks = st.tokens
        n = min(len(toks), generated.size)
        common = 0
        if n:
            diff = np.flatnonzero(np.asarray(toks[:n]) != generated[:n])
            common = int(diff[0]) if diff.size else n
        if common < len(toks):
            st.matcher.rollback(len(toks) - common)
            del toks[common:]
        if st.broken_at is not None and st.broken_at >= common:
            st.broken_at = None
        if st.broken_at is not None:
            return
        for t in generated[common:]:
            if not st.matcher.advance(int(t)):
                st.broken_at = len(toks)
                return
            toks.append(int(t))

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.dtype.is_floating_point \
                or not isinstance(scores, torch.Tensor) or scores.dim() != 2 \
                or scores.shape[0] != input_ids.shape[0]:
            raise OptionError("StructgenLogitsProcessor is called with integer input_ids [batch, length] and "
                              "scores [batch, V] of the same batch, got "
                              f"{getattr(input_ids, 'shape', type(input_ids).__name__)} and "
                              f"{getattr(scores, 'shape', type(scores).__name__)}")
        n_rows, length = input_ids.shape
        if self.prompt_length is None:
            self.prompt_length = length
        if length < self.prompt_length:
            raise ValueError("StructgenLogitsProcessor saw a sequence shorter than the prompt; "
                             "call reset() between generate() calls")
        while len(self._rows) < n_rows:
            self._rows.append(_RowState(self._grammar_for_row(len(self._rows), n_rows).matcher()))
        ids = input_ids[:, self.prompt_length:].cpu().numpy()
        width = scores.shape[-1]
        if self._bitmask is None or self._bitmask.shape[0] < n_rows or self._bitmask_width != width:
            self._bitmask = allocate_bitmask(n_rows, width)
            self._bitmask_width = width
        bm = self._bitmask[:n_rows]
        live = []
        for r in range(n_rows):
            st = self._rows[r]
            self._sync(st, ids[r])
            live.append(st.matcher if st.broken_at is None else None)
        fill_bitmasks(live, bm)  # rows in parallel; the broken ones (None) get EOS only below
        for r, m in enumerate(live):
            if m is None:
                self._eos_only(bm, r, n_rows)
        return apply_bitmask_(scores, bm.to(scores.device))

    def _eos_only(self, bm: torch.Tensor, r: int, n_rows: int) -> None:
        bm[r] = 0
        for eos in self._grammar_for_row(r, n_rows).vocab.eos_ids:
            eos = int(eos)
            bm[r, eos >> 5] |= _bit(eos & 31)

    def matchers(self):
        """The per-row matchers (after the last call)."""
        return [st.matcher for st in self._rows]


def _bit(i: int) -> int:
    v = 1 << i
    return v - (1 << 32) if v >= (1 << 31) else v
