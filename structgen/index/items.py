"""ItemIndex: a finite set of token sequences (a catalogue of items) as a CSR-flattened trie.

STATIC (algorithms.md §1): the prefix trie of the items, flattened so that one decoding step
for a whole batch of beams is a gather.  Nodes are numbered breadth first over the sorted
items, so

- the nodes of depth ``d`` are the ids ``depth_start[d] .. depth_start[d+1]-1``, in sorted
  order of their prefixes;
- the children of node ``p`` are the *consecutive* ids ``indptr[p] .. indptr[p+1]-1``, sorted
  by the token on their edge (``token[c]``): the CSR row of ``p`` is that id range, and the
  column entries are ``token[indptr[p]:indptr[p+1]]`` (the child of entry ``e`` is ``e``);
- ``terminal[p]``: an item ends at ``p`` (it may still have children: an item may be a
  prefix of another);
- ``item_lo[p] .. item_hi[p]-1``: the sorted items through ``p`` (a contiguous range, what a
  per-request item subset restricts by prefix sums);
- ``max_branch[d]``: the largest number of children of a node of depth ``d`` (static shapes
  for the batched gather);
- one int64 *head word* per node (first child id, that child's token, terminal flag): the
  batched gather reads a node's row from it and its neighbour, so a node with one child costs
  one random read (deep nodes of large catalogues mostly have one), not three.

Build (Numba kernels in :mod:`.item_kernels`): the items are flattened and checked in one
pass, packed into uint64 keys, radix-sorted and unpacked without duplicates, then one pass over
the tokens (O(total tokens)) computes every node.  ``from_strings`` spells each string with the
tokenizer's own (canonical) encoding: only that token sequence is in the index; other token
sequences spelling the same text are *not* accepted.

May import: ``errors``, ``kernels``, ``vocab``, ``automaton`` (only ``errors`` is needed).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from ..errors import StructgenError, VocabularyError
from . import item_kernels as K

__all__ = ["ItemIndex", "DeviceItemIndex", "ItemSubset"]

_INT64 = np.dtype(np.int64)


def _flatten(sequences, vocab_size: int, eos_id: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(flat int32 tokens, int64 offsets) from a list of sequences or a padded 2-D array
    (negative entries are padding and end a row), every token checked.

    Raises:
        StructgenError: bad padding, a token outside ``[0, vocab_size)`` or ``eos_id`` in an item.
    """
    eos = -1 if eos_id is None else int(eos_id)
    if isinstance(sequences, np.ndarray) or hasattr(sequences, "shape"):
        arr = np.asarray(sequences.cpu() if hasattr(sequences, "cpu") else sequences)
        if arr.ndim != 2:
            raise StructgenError(f"items: a padded array must be 2-D, not of shape {arr.shape}")
        if arr.dtype.kind not in "iu":
            arr = arr.astype(np.int64)
        data, off, code, row, value = K.flatten_padded(np.ascontiguousarray(arr), int(vocab_size), eos)
        if code == 1:
            raise StructgenError("items: padding (negative ids) must only trail each row")
        if code == 2:
            raise StructgenError(f"items: item {row} has token id {value} outside [0, vocab_size={vocab_size})")
        if code == 3:
            raise StructgenError(f"items: item {row} contains eos_id={eos_id}")
        return data, off
    lengths = np.fromiter((len(s) for s in sequences), np.int64, count=len(sequences))
    off = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=off[1:])
    data = np.fromiter((int(t) for s in sequences for t in s), np.int64, count=int(off[-1]))
    return _checked(data, off, vocab_size, eos_id), off


def _checked(data: np.ndarray, off: np.ndarray, vocab_size: int, eos_id: int | None) -> np.ndarray:
    """``data`` as int32 once every token is in ``[0, vocab_size)`` and none is ``eos_id``."""
    bad = int(K.first_bad_token(data, int(vocab_size), -1 if eos_id is None else int(eos_id)))
    if bad >= 0:
        item = int(np.searchsorted(off, bad, side="right") - 1)
        t = int(data[bad])
        if eos_id is not None and t == eos_id:
            raise StructgenError(f"items: item {item} contains eos_id={eos_id}")
        raise StructgenError(f"items: item {item} has token id {t} outside [0, vocab_size={vocab_size})")
    return data.astype(np.int32, copy=False)


def _sorted_distinct(data: np.ndarray, off: np.ndarray):
    """Items sorted lexicographically (a prefix before its extensions), duplicates dropped:
    tokens packed into uint64 keys (``ceil(log2(V + 2))`` bits each, token ``t`` as ``t + 1``),
    radix-sorted, unpacked.  Returns ``(data, off, lcp, count, max_len)`` (see
    :func:`~structgen.index.item_kernels.unpack_distinct`)."""
    L = int(np.diff(off).max()) if off.size > 1 else 0
    if off.size == 1 or L == 0:
        return K.unpack_distinct(np.zeros((off.size - 1, 1), np.uint64), 1, 1, 0, 0)
    top = int(data.max()) + 2
    bits = max(1, (top - 1).bit_length())
    per_word = max(1, 64 // bits)
    words = max(1, -(-L // per_word))
    keys = K.radix_sort_keys(K.pack_keys(data, off, bits, per_word, words))
    return K.unpack_distinct(keys, bits, per_word, int(data.size), L)


def _encode_batch(vocab, strings: list[str]) -> list:
    """:meth:`Vocabulary.encode` of every string, through the tokenizer's batch call when it
    has one (the same encoding: no special tokens, no padding)."""
    tok = vocab.tokenizer
    if tok is None or not strings:
        return [vocab.encode(x) for x in strings]
    rust = tok if hasattr(tok, "encode_batch") else getattr(tok, "backend_tokenizer", None)
    if rust is not None:                    # a tokenizers.Tokenizer (a fast tokenizer's backend)
        batch = getattr(rust, "encode_batch_fast", rust.encode_batch)   # (no character offsets)
        return [e.ids for e in batch(strings, add_special_tokens=False)]
    if callable(tok):                       # a transformers tokenizer
        return tok(strings, add_special_tokens=False)["input_ids"]
    return [vocab.encode(x) for x in strings]


def _first_mismatch(spelled: np.ndarray, soff: np.ndarray, strings: list[str]) -> int:
    """The first ``i`` whose spelling ``spelled[soff[i]:soff[i + 1]]`` is not ``strings[i]``'s
    UTF-8, or -1."""
    enc = [x.encode("utf-8") for x in strings]
    lens = np.fromiter(map(len, enc), np.int64, count=len(enc))
    want = np.frombuffer(b"".join(enc), np.uint8)
    short = np.flatnonzero(lens != np.diff(soff))
    stop = int(short[0]) if short.size else len(enc)   # offsets agree before the first length mismatch
    upto = int(soff[stop])
    diff = np.flatnonzero(spelled[:upto] != want[:upto])
    if diff.size:
        return int(np.searchsorted(soff, diff[0], side="right") - 1)
    return stop if stop < len(enc) else -1


class ItemIndex:
    """A set of token sequences as a CSR trie (see the module docstring).

    Build with :meth:`from_token_ids` or :meth:`from_strings`; query with :meth:`walk`,
    :meth:`next_tokens` (one prefix) and :meth:`next_tokens_batch` (many nodes at once);
    :meth:`to` puts the arrays on a torch device for the beam search."""

    def __init__(self, token, indptr, terminal, depth_start, vocab_size, eos_id):
        self.token = token
        self.indptr = indptr
        self.terminal = terminal
        self._ranges = None
        self._dense = np.zeros((0, 1), np.int32)   # direct child tables of the first nodes (dense_levels)
        self.depth_start = depth_start
        self.max_branch = K.max_branch(indptr, depth_start)
        self.vocab_size = int(vocab_size)
        self.eos_id = None if eos_id is None else int(eos_id)
        self._eos_arg = -1 if eos_id is None else int(eos_id)
        self.num_items = int(terminal.sum())
        self._head = K.head_words(token, indptr, terminal)   # the batched gather's one read per node
        for a in (token, indptr, terminal, depth_start, self.max_branch, self._head):
            a.flags.writeable = False

    # ------------------------------------------------------------------ build
    @classmethod
    def from_token_ids(cls, sequences, vocab_size: int, eos_id: int | None = None, *,
                       assume_sorted: bool = False) -> "ItemIndex":
        """Index of the items ``sequences`` (a list of token-id lists, or a padded 2-D array
        whose negative entries trail as padding).

        Items may have any length (an empty item makes the root terminal) and one may be a
        prefix of another; duplicates count once.  ``eos_id`` is what :meth:`next_tokens`
        offers where an item ends (None: nothing).  ``assume_sorted``: the items are already
        sorted and distinct (skips the sort).

        Raises:
            StructgenError: a token id outside ``[0, vocab_size)`` (naming the item), or
                ``eos_id`` among the item tokens.
        """
        data, off = _flatten(sequences, vocab_size, eos_id)
        return cls._from_checked(data, off, vocab_size, eos_id, assume_sorted)

    @classmethod
    def from_flat(cls, data, offsets, vocab_size: int, eos_id: int | None = None, *,
                  assume_sorted: bool = False) -> "ItemIndex":
        """As :meth:`from_token_ids`, the items given flat: item ``i`` is
        ``data[offsets[i]:offsets[i + 1]]`` (the layout :meth:`flat_items` returns)."""
        data = np.ascontiguousarray(data).reshape(-1)
        if data.dtype.kind not in "iu":
            data = data.astype(np.int64)
        off = np.ascontiguousarray(offsets, np.int64).reshape(-1)
        if off.size == 0 or off[0] != 0 or off[-1] != data.size or (np.diff(off) < 0).any():
            raise StructgenError(f"items: offsets must rise from 0 to len(data)={data.size}")
        return cls._from_checked(_checked(data, off, vocab_size, eos_id), off, vocab_size, eos_id, assume_sorted)

    @classmethod
    def _from_checked(cls, data, off, vocab_size, eos_id, assume_sorted) -> "ItemIndex":
        """The index of checked int32 items ``(data, off)``: sort and dedup unless
        ``assume_sorted``, then the node arrays."""
        if not 0 < vocab_size < 2 ** 31:
            raise StructgenError(f"items: vocab_size must be in [1, 2**31), got {vocab_size}")
        if assume_sorted:
            lcp, count, max_len = K.lcp_and_depths(data, off)
        else:
            data, off, lcp, count, max_len = _sorted_distinct(data, off)
        count[0] = 1
        depth_start = np.zeros(max_len + 2, np.int64)
        np.cumsum(count[:max_len + 1], out=depth_start[1:])
        n_nodes = int(depth_start[-1])
        if n_nodes >= 2 ** 32 - 1:   # the head words of the gather hold node ids in 32 bits
            raise StructgenError(f"items: {n_nodes} trie nodes; an index holds at most 2**32 - 2")
        ptr = np.zeros(0, np.int32 if n_nodes < 2 ** 31 - 1 else np.int64)
        token, indptr, terminal = K.build_nodes(data, off, lcp, depth_start, n_nodes, max_len, ptr.dtype)
        return cls(token, indptr, terminal, depth_start, vocab_size, eos_id)

    @classmethod
    def from_strings(cls, strings: Sequence[str], vocab, eos_id: int | None = None) -> "ItemIndex":
        """Index of ``strings`` spelled by the tokenizer's own (canonical) encoding.

        ``vocab``: a :class:`~structgen.Vocabulary` with a tokenizer (``eos_id`` defaults to
        its first EOS id) or a tokenizer with ``encode(text, add_special_tokens=False)``.
        Only the canonical token sequence of each string is indexed: a different token
        sequence that spells the same text is not accepted by the index or its matcher.

        Raises:
            VocabularyError: the tokenizer does not round-trip a string (naming it).
        """
        if hasattr(vocab, "logits_width"):
            width = vocab.logits_width
            if eos_id is None:
                eos_id = int(vocab.eos_ids[0])
            strings = list(strings)
            data, off = _flatten(_encode_batch(vocab, strings), width, eos_id)
            spelled, soff = K.spell(data, off, vocab.token_data, vocab.token_offsets)
            bad = _first_mismatch(spelled, soff, strings)
            if bad >= 0:
                raise VocabularyError(f"items: the tokenizer does not round-trip {strings[bad]!r}")
            return cls._from_checked(data, off, width, eos_id, False)
        width = len(vocab)
        if eos_id is None and getattr(vocab, "eos_token_id", None) is not None:
            eos_id = int(vocab.eos_token_id)
        seqs = [list(vocab.encode(s, add_special_tokens=False)) for s in strings]
        return cls.from_token_ids(seqs, width, eos_id)

    # ------------------------------------------------------------------ queries
    @property
    def num_nodes(self) -> int:
        return int(self.token.size)

    @property
    def max_depth(self) -> int:
        return int(self.depth_start.size - 2)

    @property
    def nbytes(self) -> int:
        """Bytes of the index arrays."""
        arrays = [self.token, self.indptr, self.terminal, self.depth_start, self.max_branch, self._head]
        if self._ranges is not None:
            arrays += list(self._ranges)
        arrays.append(self._dense)
        return int(sum(a.nbytes for a in arrays))

    @property
    def item_lo(self) -> np.ndarray:
        """Per node, the first sorted item id through it (computed on first use)."""
        return self._item_ranges()[0]

    @property
    def item_hi(self) -> np.ndarray:
        """Per node, one past the last sorted item id through it."""
        return self._item_ranges()[1]

    def _item_ranges(self):
        if self._ranges is None:
            lo, hi = K.item_ranges(self.indptr, self.terminal)
            lo.flags.writeable = hi.flags.writeable = False
            self._ranges = (lo, hi)
        return self._ranges

    def walk(self, prefix: Sequence[int]) -> int:
        """The node after ``prefix`` (0 = root), or -1 when no item starts with it."""
        p = np.asarray(prefix, np.int64).reshape(-1)
        return int(K.walk_dense(self.token, self.indptr, self._dense, p))

    def child(self, node: int, token: int) -> int:
        """The child of ``node`` along ``token``, or -1."""
        if node < 0 or token < 0:
            return -1
        return int(K.child_dense(self.token, self.indptr, self._dense, int(node), int(token)))

    def dense_levels(self, budget_bytes: int = 64 << 20) -> int:
        """Direct tables for the first levels, within ``budget_bytes``: the root (depth 0) and
        then the depth-1 nodes each get an int32 row of ``vocab_size`` entries (child by token,
        -1 when none), a level only when all rows up to it fit.  :meth:`child` and
        :meth:`walk` then look those nodes up in O(1) instead of a binary search over a wide
        row.  Returns the number of levels now tabled (0, 1 or 2); the tables count in
        :attr:`nbytes`.  The other queries and the node layout do not change."""
        row = 4 * self.vocab_size
        rows = 0
        for d in (0, 1):
            if d > self.max_depth or int(self.depth_start[d + 1]) * row > budget_bytes:
                break
            rows = int(self.depth_start[d + 1])   # nodes of depths 0..d are the ids below this
        if rows != self._dense.shape[0]:
            t = K.dense_rows(self.token, self.indptr, rows, self.vocab_size) if rows else np.zeros((0, 1), np.int32)
            t.flags.writeable = False
            self._dense = t
        return 0 if rows == 0 else (1 if rows == 1 else 2)

    def children(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        """(tokens, child ids) of ``node``'s row, sorted by token (views)."""
        lo, hi = int(self.indptr[node]), int(self.indptr[node + 1])
        return self.token[lo:hi], np.arange(lo, hi)

    def is_terminal(self, node: int) -> bool:
        return node >= 0 and bool(self.terminal[node])

    def item_range(self, node: int) -> tuple[int, int]:
        """The sorted items through ``node``: ids ``[lo, hi)``."""
        return int(self.item_lo[node]), int(self.item_hi[node])

    def next_tokens(self, prefix: Sequence[int]) -> np.ndarray:
        """The token ids allowed after ``prefix`` (ascending, ``eos_id`` last where an item
        ends when ``eos_id`` was given); empty when no item starts with ``prefix``."""
        node = self.walk(prefix)
        if node < 0:
            return np.zeros(0, np.int64)
        toks = self.token[self.indptr[node]:self.indptr[node + 1]].astype(np.int64)
        if self.eos_id is not None and self.terminal[node]:
            toks = np.append(toks, self.eos_id)
        return toks

    def next_tokens_batch(self, nodes, width: int | None = None, out=None) -> tuple[np.ndarray, np.ndarray]:
        """Allowed ``(tokens, children)`` for many nodes at once, each ``[B, width]`` int64
        padded with -1 (a node of -1 gets an all -1 row).  A terminal node's row ends with
        ``(eos_id, -1)`` when ``eos_id`` was given.  ``width`` defaults to the widest row
        (a narrower one cuts rows).  ``out``: two preallocated ``[B, width]`` int64 arrays."""
        if not (type(nodes) is np.ndarray and nodes.dtype is _INT64 and nodes.ndim == 1):
            nodes = np.ascontiguousarray(np.asarray(nodes, np.int64).reshape(-1))   # (per-step callers pass these)
        if width is None:
            ok = nodes[nodes >= 0]
            width = int((self.indptr[ok + 1] - self.indptr[ok]).max(initial=0))
            width += int(self.eos_id is not None and bool(self.terminal[ok].any()))
        if out is None:
            out_tok = np.empty((nodes.size, width), np.int64)
            out_child = np.empty((nodes.size, width), np.int64)
        else:
            out_tok, out_child = out
        K.gather(self._head, self.token, nodes, self._eos_arg, out_tok, out_child)
        return out_tok, out_child

    def next_tokens_ragged(self, nodes, out=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`next_tokens_batch` without padding: ``(offsets, tokens, children)``, node ``b``'s
        pairs being ``tokens[offsets[b]:offsets[b + 1]]`` (EOS last, child -1).  The work is
        proportional to the pairs, not to ``B x`` the widest row (catalogues whose rows are
        skewed, such as titles).  ``out``: ``(offsets, tokens, children)`` buffers to reuse
        (int64; ``offsets`` of length ``B + 1``); the results are views of them, grown when too
        short."""
        if not (type(nodes) is np.ndarray and nodes.dtype is _INT64 and nodes.ndim == 1):
            nodes = np.ascontiguousarray(np.asarray(nodes, np.int64).reshape(-1))
        if out is None:
            offsets = np.empty(nodes.size + 1, np.int64)
            cap = 4 * nodes.size + 16
            out_tok, out_child = np.empty(cap, np.int64), np.empty(cap, np.int64)
        else:
            offsets, out_tok, out_child = out
            if offsets.shape[0] < nodes.size + 1:
                offsets = np.empty(nodes.size + 1, np.int64)
        n = K.gather_ragged(self._head, self.token, nodes, self._eos_arg, offsets, out_tok, out_child)
        if n > out_tok.shape[0]:
            out_tok, out_child = np.empty(n, np.int64), np.empty(n, np.int64)
            K.gather_ragged(self._head, self.token, nodes, self._eos_arg, offsets, out_tok, out_child)
        return offsets[:nodes.size + 1], out_tok[:n], out_child[:n]

    def item_id(self, seq: Sequence[int]) -> int:
        """The id of item ``seq`` (its rank in sorted order, the order of :meth:`items`), or -1."""
        node = self.walk(seq)
        return int(self.item_lo[node]) if self.is_terminal(node) else -1

    def subset(self, allowed) -> "ItemSubset":
        """A per-request restriction to some items, without rebuilding: ``allowed`` is a bool
        mask over item ids (``[num_items]``) or a sequence of item ids."""
        return ItemSubset(self, allowed)

    def flat_items(self) -> tuple[np.ndarray, np.ndarray]:
        """Every item in sorted order, flat: ``(data, offsets)`` (int32 tokens, int64 offsets), item ``i`` being
        ``data[offsets[i]:offsets[i + 1]]``."""
        return K.paths(self.token, self.indptr, self.num_nodes, self.depth_start, self.terminal)

    def items(self) -> list[list[int]]:
        """Every item, in sorted order."""
        data, off = self.flat_items()
        return [data[off[i]:off[i + 1]].tolist() for i in range(off.size - 1)]

    def __contains__(self, seq) -> bool:
        return self.is_terminal(self.walk(seq))

    def __len__(self) -> int:
        return self.num_items

    def to(self, device) -> "DeviceItemIndex":
        """The arrays as torch tensors on ``device`` (for :func:`structgen.beam_search`)."""
        return DeviceItemIndex(self, device)

    def __repr__(self) -> str:
        return (f"ItemIndex(items={self.num_items}, nodes={self.num_nodes}, max_depth={self.max_depth}, "
                f"nbytes={self.nbytes})")


class DeviceItemIndex:
    """An :class:`ItemIndex`'s arrays on a torch device: ``token`` (int64), ``indptr``
    (int64), ``terminal`` (bool); ``max_branch`` and ``depth_start`` stay host arrays (static
    shapes).  ``host`` is the CPU index."""

    def __init__(self, index: ItemIndex, device):
        self.host = index
        self.device = torch.device(device)
        self.token = torch.from_numpy(index.token.astype(np.int64)).to(self.device)
        self.indptr = torch.from_numpy(index.indptr.astype(np.int64)).to(self.device)
        self.terminal = torch.from_numpy(np.array(index.terminal)).to(self.device)
        self.max_branch = index.max_branch
        self.depth_start = index.depth_start
        self.eos_id = index.eos_id

    @property
    def nbytes(self) -> int:
        return int(sum(t.element_size() * t.numel() for t in (self.token, self.indptr, self.terminal)))

    def to(self, device) -> "DeviceItemIndex":
        return self.host.to(device)

    def gather(self, nodes, width: int):
        """``(tokens, children)`` ``[B, width]`` for node tensor ``nodes`` (int64 on the
        device; -1 rows stay all -1).  Children only; EOS is the caller's extra column."""
        live = nodes >= 0
        safe = nodes.clamp(min=0)
        start = self.indptr[safe]
        cnt = torch.where(live, self.indptr[safe + 1] - start, torch.zeros_like(start))
        ar = torch.arange(width, device=nodes.device)
        valid = ar[None, :] < cnt[:, None]
        idx = torch.where(valid, start[:, None] + ar[None, :], torch.zeros_like(start)[:, None])
        tok = torch.where(valid, self.token[idx], torch.full_like(idx, -1))
        child = torch.where(valid, idx, torch.full_like(idx, -1))
        return tok, child


class ItemSubset:
    """An :class:`ItemIndex` restricted to some of its items (one request's catalogue).

    Every node covers the contiguous item ids ``[item_lo, item_hi)``, so with ``cum`` the
    prefix sums of the item mask a child stays allowed when ``cum[hi] - cum[lo] > 0`` (O(1)
    per candidate) and a terminal node's item (id ``item_lo``, the first of its range) when
    its bit is set.  Same queries as the index: :meth:`walk`, :meth:`next_tokens`,
    :meth:`next_tokens_batch`, :meth:`is_terminal`.

    Raises:
        StructgenError: an item id out of range or a mask of the wrong length.
    """

    def __init__(self, index: ItemIndex, allowed):
        self.index = index
        a = np.asarray(allowed)
        if a.dtype == np.bool_:
            if a.shape != (index.num_items,):
                raise StructgenError(f"items subset: a mask needs {index.num_items} entries, got shape {a.shape}")
            mask = a.copy()
        else:
            ids = a.astype(np.int64).reshape(-1)
            if ids.size and (ids.min() < 0 or ids.max() >= index.num_items):
                raise StructgenError(f"items subset: item id {int(ids[(ids < 0) | (ids >= index.num_items)][0])} "
                                     f"outside [0, {index.num_items})")
            mask = np.zeros(index.num_items, np.bool_)
            mask[ids] = True
        self.mask = mask
        self.cum = np.zeros(mask.size + 1, np.int64)
        np.cumsum(mask, out=self.cum[1:])
        self.eos_id = index.eos_id

    def live(self, node: int) -> bool:
        """Some allowed item goes through ``node``."""
        ix = self.index
        return node >= 0 and bool(self.cum[ix.item_hi[node]] > self.cum[ix.item_lo[node]])

    def is_terminal(self, node: int) -> bool:
        return self.index.is_terminal(node) and bool(self.mask[self.index.item_lo[node]])

    def child(self, node: int, token: int) -> int:
        c = self.index.child(node, token)
        return c if self.live(c) else -1

    def walk(self, prefix: Sequence[int]) -> int:
        node = self.index.walk(prefix)
        return node if self.live(node) else -1

    def children(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        toks, kids = self.index.children(node)
        ix = self.index
        keep = self.cum[ix.item_hi[kids]] > self.cum[ix.item_lo[kids]]
        return toks[keep], kids[keep]

    def next_tokens(self, prefix: Sequence[int]) -> np.ndarray:
        node = self.walk(prefix)
        if node < 0:
            return np.zeros(0, np.int64)
        toks = self.children(node)[0].astype(np.int64)
        if self.eos_id is not None and self.is_terminal(node):
            toks = np.append(toks, self.eos_id)
        return toks

    def next_tokens_batch(self, nodes, width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`ItemIndex.next_tokens_batch`, dropped children and EOS shown as -1
        (rows keep the index's slots, so the allowed entries need not be leading)."""
        ix = self.index
        nodes = np.asarray(nodes, np.int64).reshape(-1)
        tok, kid = ix.next_tokens_batch(nodes, width)
        if ix.num_items == 0:
            return tok, kid
        safe = np.maximum(kid, 0)
        ok = (kid >= 0) & (self.cum[ix.item_hi[safe]] > self.cum[ix.item_lo[safe]])
        if self.eos_id is not None:
            nsafe = np.maximum(nodes, 0)
            term_ok = (nodes >= 0) & ix.terminal[nsafe] & self.mask[np.minimum(ix.item_lo[nsafe], max(ix.num_items - 1, 0))]
            ok |= (tok == self.eos_id) & (kid < 0) & term_ok[:, None]
        return np.where(ok, tok, -1), np.where(ok, kid, -1)
