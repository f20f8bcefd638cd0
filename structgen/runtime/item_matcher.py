"""ItemMatcher: the :class:`~structgen.Matcher` view of an :class:`~structgen.ItemIndex`.

The language is the index's item set: token sequences that are items, then EOS (any of the
vocabulary's EOS ids) where an item ends.  The state is a trie node (``-2`` once EOS was
accepted); the history a tree of :mod:`.history` steps, so rollback, fork, snapshot and
restore are O(1) per step.  Masks: the node's children tokens, EOS at terminal nodes.

Bytes (``advance_bytes``, token healing): the items are matched by their byte spelling
(each token's bytes in the vocabulary).  After a byte step the position may lie inside an
item token, or on several paths at once, so the state becomes a *set* of ``(node, pending
bytes)`` pairs and from then on (until a rollback, restore or reset) tokens are matched by
bytes against the items' spelling: a token may span or split item tokens.  Before any byte
step, tokens match item tokens exactly: a different token sequence spelling an item's text
is not accepted.

Forced tokens are the item's own tokens along a chain of single-child, non-terminal nodes.
"""
from __future__ import annotations

import numpy as np

from ..errors import StructgenError
from ..index.catalog import ItemCatalog
from ..index.items import ItemSubset
from ..kernels.bitmask import set_bits
from . import history as hist
from .batch import write_row
from .protocol import Matcher, Snapshot

__all__ = ["ItemMatcher"]

_TERMINATED = -2


class ItemMatcher(Matcher):
    """Matcher over an :class:`~structgen.ItemIndex` (or an
    :class:`~structgen.index.items.ItemSubset` of one, or the current items of an
    :class:`~structgen.ItemCatalog`) for vocabulary ``vocab``.

    Raises:
        StructgenError: an item token is outside the vocabulary's logits width or is an EOS id.
    """

    __slots__ = ("_index", "_vocab", "_node", "_lineage", "_eos", "_words")

    def __init__(self, index, vocab):
        if isinstance(index, ItemCatalog):
            index = index.view()
        base = index.index if isinstance(index, ItemSubset) else index
        if base.num_nodes > 1:
            toks = base.token[1:]
            if int(toks.max()) >= vocab.logits_width:
                raise StructgenError(f"items: token id {int(toks.max())} is outside the vocabulary's "
                                     f"logits width {vocab.logits_width}")
            if np.isin(toks, vocab.eos_ids).any():
                raise StructgenError("items: an item contains one of the vocabulary's EOS ids")
        self._index = index
        self._vocab = vocab
        self._node = hist.root(0)
        self._lineage = object()
        self._eos = frozenset(int(e) for e in vocab.eos_ids)
        self._words = (vocab.logits_width + 31) // 32

    @property
    def vocab(self):
        return self._vocab

    @property
    def index(self):
        """The :class:`~structgen.ItemIndex` (immutable, shared)."""
        return self._index

    @property
    def node(self):
        """The trie node (int; -2 terminated) or, after a byte step, the frozenset of
        ``(node, pending bytes)`` pairs."""
        return self._node.state

    # ------------------------------------------------------------------ byte-level helpers
    def _expand(self, node: int, buf: bytes, out: set) -> None:
        """Add to ``out`` every ``(n, rest)`` where a path from ``node`` to ``n`` spells a
        prefix of ``buf`` and ``rest`` (the remainder) is a proper prefix of a child token's
        bytes (or empty)."""
        if not buf:
            out.add((node, b""))
            return
        ix, v = self._index, self._vocab
        pending_ok = False
        for t, c in zip(*ix.children(node)):
            tb = v.token_bytes(int(t))
            if not tb:
                continue
            if buf.startswith(tb):
                self._expand(int(c), buf[len(tb):], out)
            elif not pending_ok and tb.startswith(buf):
                pending_ok = True
                out.add((node, buf))

    def _step_bytes(self, state, data: bytes):
        """The state after raw bytes, or None when no item spelling continues with them."""
        pairs = [(state, b"")] if isinstance(state, int) else state
        out: set = set()
        for n, pend in pairs:
            self._expand(n, pend + data, out)
        return frozenset(out) if out else None

    def _byte_mode_tokens(self, pairs) -> np.ndarray:
        """Normal tokens whose bytes continue some pair's spelling (a joint walk of the item
        trie's byte spelling and the vocabulary's token trie, bounded by the longest token)."""
        ix, v = self._index, self._vocab
        trie = v.trie
        found: list[np.ndarray] = []
        stack = []
        for n, pend in pairs:
            for t, c in zip(*ix.children(n)):
                tb = v.token_bytes(int(t))
                if len(tb) > len(pend) and tb.startswith(pend):
                    stack.append((int(c), tb[len(pend):], 0))
        while stack:
            n, rem, vt = stack.pop()
            if not rem:
                for t, c in zip(*ix.children(n)):
                    tb = v.token_bytes(int(t))
                    if tb:
                        stack.append((int(c), tb, vt))
                continue
            nv = trie.child(vt, rem[0])
            if nv < 0:
                continue
            lo, hi = trie.tok_ptr[nv], trie.tok_ptr[nv + 1]
            if hi > lo:
                found.append(trie.tok_ids[lo:hi])
            stack.append((n, rem[1:], nv))
        if not found:
            return np.zeros(0, np.int64)
        return np.unique(np.concatenate(found).astype(np.int64))

    # ------------------------------------------------------------------ steps
    def advance(self, token: int) -> bool:
        s = self._node.state
        if isinstance(s, int) and s == _TERMINATED:
            return False
        token = int(token)
        if token in self._eos:
            if not self._accepting(s):
                return False
            ns = _TERMINATED
        elif isinstance(s, int):
            ns = self._index.child(s, token) if 0 <= token < self._vocab.logits_width else -1
            if ns < 0:
                return False
        else:
            if not (0 <= token < self._vocab.logits_width) or not self._vocab.is_normal[token]:
                return False
            tb = self._vocab.token_bytes(token)
            ns = self._step_bytes(s, tb) if tb else None
            if ns is None:
                return False
        self._node = self._node.child(ns)
        return True

    def advance_bytes(self, data: bytes) -> bool:
        s = self._node.state
        if isinstance(s, int) and s == _TERMINATED:
            return False
        ns = s if not data else self._step_bytes(s, bytes(data))
        if ns is None:
            return False
        self._node = self._node.child(ns)
        return True

    def rollback(self, n: int = 1) -> None:
        if n < 0 or n > self._node.depth:
            raise ValueError(f"cannot roll back {n} tokens; {self._node.depth} were accepted")
        self._node = hist.ancestor(self._node, n)

    def accepted_tokens(self) -> int:
        return self._node.depth

    def reset(self) -> None:
        self._node = hist.root(0)

    def fork(self) -> "ItemMatcher":
        m = ItemMatcher.__new__(ItemMatcher)
        m._index, m._vocab, m._node, m._lineage = self._index, self._vocab, self._node, self._lineage
        m._eos, m._words = self._eos, self._words
        return m

    def snapshot(self) -> Snapshot:
        return Snapshot(self._lineage, (self._node,))

    def restore(self, snapshot: Snapshot) -> None:
        if not isinstance(snapshot, Snapshot) or snapshot.lineage is not self._lineage:
            raise ValueError("restore() takes a snapshot of this matcher or of one forked from the same start")
        self._node = snapshot.point[0]

    # ------------------------------------------------------------------ masks
    def _allowed(self) -> np.ndarray:
        s = self._node.state
        eos = np.asarray(self._vocab.eos_ids, np.int64)
        if isinstance(s, int):
            if s == _TERMINATED:
                return eos
            toks = self._index.children(s)[0].astype(np.int64)
        else:
            toks = self._byte_mode_tokens(s)
        return np.concatenate([toks, eos]) if self._accepting(s) else toks

    def mask_words(self) -> np.ndarray:
        return set_bits(np.zeros(self._words, np.uint32), self._allowed())

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        write_row(bitmask, row, self.mask_words().view(np.int32))

    def allowed_tokens(self) -> np.ndarray:
        return np.unique(self._allowed())

    def validate(self, tokens) -> int:
        s = self._node.state
        if not isinstance(s, int):
            return super().validate(tokens)
        if s == _TERMINATED:
            return 0
        ix = self._index
        n = 0
        for t in np.asarray(tokens, np.int64).reshape(-1).tolist():
            if t in self._eos:
                n += int(ix.is_terminal(s))
                break
            s = ix.child(s, t) if t < self._vocab.logits_width else -1
            if s < 0:
                break
            n += 1
        return n

    # ------------------------------------------------------------------ queries
    def _accepting(self, s) -> bool:
        if isinstance(s, int):
            return s >= 0 and self._index.is_terminal(s)
        return any(not pend and self._index.is_terminal(n) for n, pend in s)

    def is_accepting(self) -> bool:
        return self._accepting(self._node.state)

    def is_terminated(self) -> bool:
        s = self._node.state
        return isinstance(s, int) and s == _TERMINATED

    def _forced_chain(self) -> list[int]:
        s = self._node.state
        if not isinstance(s, int) or s < 0:
            return []
        ix, out = self._index, []
        while not ix.is_terminal(s):
            toks, kids = ix.children(s)
            if toks.size != 1:
                break
            s = int(kids[0])
            out.append(int(toks[0]))
        return out

    def forced_bytes(self) -> bytes:
        return self._vocab.decode(self._forced_chain())

    def forced_tokens(self, max_back_off: int = 4) -> list[int]:
        # the item's own tokens: items are token sequences, so nothing to re-tokenize or back off
        return self._forced_chain()

    def __repr__(self) -> str:
        return f"ItemMatcher(node={self.node!r}, tokens={self._node.depth})"
