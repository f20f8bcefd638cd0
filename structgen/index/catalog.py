"""Item sets that change: additions and removals without rebuilding the trie.

An :class:`ItemCatalog` keeps the big :class:`~structgen.index.items.ItemIndex` it was made
from untouched, and records changes beside it:

- a removal of a base item sets its tombstone bit (the base's items keep their ids, so the
  tombstones are a bool mask over them and an :class:`~structgen.index.items.ItemSubset` hides
  them in O(1) per query);
- an addition goes to a small *delta* index, rebuilt from the added items alone when it is
  next queried (cost proportional to the delta, not the catalogue).

Queries (:meth:`ItemCatalog.next_tokens`, ``in``, ``len``) answer for the current set exactly,
from both parts.  The decoders take one index: :meth:`ItemCatalog.view` hands them the base
(or its subset without the tombstones) while the delta is empty, and merges first otherwise —
one O(total tokens) rebuild, which also runs by itself once the delta outgrows
``merge_fraction`` of the base.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from ..errors import StructgenError
from .items import ItemIndex, ItemSubset

__all__ = ["ItemCatalog"]


def _key(seq) -> tuple[int, ...]:
    return tuple(int(t) for t in np.asarray(seq, np.int64).reshape(-1))


class ItemCatalog:
    """A mutable set of token sequences over a base :class:`~structgen.ItemIndex`.

    Args:
        index: the base index (its ``vocab_size`` and ``eos_id`` are the catalogue's).
        merge_fraction: merge the delta into a new base once it holds more than this share of
            the base's items (at least 1,024 items); ``None``: merge only when asked.

    Raises:
        StructgenError: an added item has a token outside ``[0, vocab_size)`` or the EOS id.
    """

    def __init__(self, index: ItemIndex, *, merge_fraction: float | None = 0.05):
        if not isinstance(index, ItemIndex):
            raise StructgenError(f"ItemCatalog: expected an ItemIndex, got {type(index).__name__}")
        self.merge_fraction = merge_fraction
        self._reset(index)
        self.merges = 0

    def _reset(self, base: ItemIndex) -> None:
        self.base = base
        self._dead = np.zeros(base.num_items, np.bool_)
        self._num_dead = 0
        self._added: set[tuple[int, ...]] = set()
        self._delta: ItemIndex | None = None
        self._subset: ItemSubset | None = None

    # ------------------------------------------------------------------ changes
    def add(self, sequences: Iterable[Sequence[int]]) -> int:
        """Add items (already present ones are ignored); returns how many were new."""
        new = 0
        for seq in sequences:
            key = _key(seq)
            bad = [t for t in key if t < 0 or t >= self.base.vocab_size or t == self.base.eos_id]
            if bad:
                raise StructgenError(f"ItemCatalog.add: item {list(key)} has token id {bad[0]} "
                                     f"(outside [0, {self.base.vocab_size}) or the EOS id)")
            i = self.base.item_id(key)
            if i >= 0:
                if self._dead[i]:
                    self._dead[i] = False
                    self._num_dead -= 1
                    self._subset = None
                    new += 1
            elif key not in self._added:
                self._added.add(key)
                self._delta = None
                new += 1
        limit = self.merge_fraction
        if limit is not None and len(self._added) > max(1024, limit * self.base.num_items):
            self.merge()
        return new

    def remove(self, sequences: Iterable[Sequence[int]]) -> int:
        """Remove items (absent ones are ignored); returns how many were removed."""
        gone = 0
        for seq in sequences:
            key = _key(seq)
            i = self.base.item_id(key)
            if i >= 0 and not self._dead[i]:
                self._dead[i] = True
                self._num_dead += 1
                self._subset = None
                gone += 1
            elif key in self._added:
                self._added.discard(key)
                self._delta = None
                gone += 1
        return gone

    def merge(self) -> ItemIndex:
        """Fold the changes into a new base index (returned) and clear them."""
        if not self._added and not self._num_dead:
            return self.base
        data, off = self.base.flat_items()
        if self._num_dead:
            keep = ~self._dead
            lens = np.diff(off)
            data = data[np.repeat(keep, lens)]
            off = np.zeros(int(keep.sum()) + 1, np.int64)
            np.cumsum(lens[keep], out=off[1:])
        if self._added:
            extra = sorted(self._added)
            ex_off = np.zeros(len(extra) + 1, np.int64)
            np.cumsum([len(s) for s in extra], out=ex_off[1:])
            ex_data = np.fromiter((t for s in extra for t in s), np.int64, count=int(ex_off[-1]))
            data = np.concatenate([data, ex_data])
            off = np.concatenate([off, off[-1] + ex_off[1:]])
        self._reset(ItemIndex.from_flat(data, off, self.base.vocab_size, self.base.eos_id))
        self.merges += 1
        return self.base

    # ------------------------------------------------------------------ queries
    def _live_base(self):
        if not self._num_dead:
            return self.base
        if self._subset is None:
            self._subset = self.base.subset(~self._dead)
        return self._subset

    def _delta_index(self) -> ItemIndex | None:
        if not self._added:
            return None
        if self._delta is None:
            self._delta = ItemIndex.from_token_ids(sorted(self._added), self.base.vocab_size, self.base.eos_id)
        return self._delta

    def view(self):
        """One index over the current items for the decoders: the base (or its
        :class:`~structgen.index.items.ItemSubset` without the removed items), merging
        the additions in first when there are any."""
        if self._added:
            self.merge()
        return self._live_base()

    def next_tokens(self, prefix: Sequence[int]) -> np.ndarray:
        """The token ids allowed after ``prefix`` over the current items (ascending, the EOS id
        last where an item ends)."""
        parts = [self._live_base().next_tokens(prefix)]
        delta = self._delta_index()
        if delta is not None:
            parts.append(delta.next_tokens(prefix))
        eos = self.base.eos_id
        toks = np.unique(np.concatenate(parts))
        if eos is not None and (toks == eos).any():
            toks = np.append(toks[toks != eos], eos)
        return toks

    def __contains__(self, seq) -> bool:
        key = _key(seq)
        if key in self._added:
            return True
        i = self.base.item_id(key)
        return i >= 0 and not self._dead[i]

    def __len__(self) -> int:
        return self.base.num_items - self._num_dead + len(self._added)

    @property
    def num_added(self) -> int:
        return len(self._added)

    @property
    def num_removed(self) -> int:
        return self._num_dead

    def items(self) -> list[list[int]]:
        """Every current item, in sorted order."""
        base = [s for i, s in enumerate(self.base.items()) if not self._dead[i]]
        return sorted(base + [list(s) for s in self._added])

    def __repr__(self) -> str:
        return (f"ItemCatalog(items={len(self)}, base={self.base.num_items}, added={len(self._added)}, "
                f"removed={self._num_dead}, merges={self.merges})")
