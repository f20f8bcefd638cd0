"""TokenDFAMatcher: the :class:`~structgen.runtime.protocol.Matcher` of regular constraints.

Its state is one state of a :class:`structgen.index.TokenDFA` (``-2`` once EOS was
accepted); its history a tree of :class:`~structgen.runtime.history.Step` nodes holding
those states, so ``rollback``, ``fork``, ``snapshot`` and ``restore`` are O(1) per step and
a snapshot stays valid whatever happens after it.  Masks are the TokenDFA's cached rows.

This module also re-exports the batch helpers of :mod:`.batch` (``fill_bitmasks``,
``write_row``, ``cpu_view``) for older imports.
"""
from __future__ import annotations

import numpy as np

from ..kernels.bitmask import set_bits
from . import history as hist
from .batch import cpu_view, fill_bitmasks, host_row, write_row
from .checks import check_token, check_tokens
from .protocol import ByteStateView, Matcher, Snapshot
from .tokenize import tokenize_exact

__all__ = ["TokenDFAMatcher", "Matcher", "fill_bitmasks", "write_row", "cpu_view"]

_TERMINATED = -2
_NO_STATES = np.zeros(0, np.int64)
_NO_STATES.flags.writeable = False


class TokenDFAMatcher(Matcher, ByteStateView):
    """Matcher over a :class:`structgen.index.TokenDFA` (regular constraints)."""

    __slots__ = ("_tdfa", "_node", "_lineage", "_states")
    #: masks are the TokenDFA's cached rows (a copy each): fill_bitmasks queues them last
    fills_from_cache = True

    def __init__(self, token_dfa, state: int | None = None):
        self._tdfa = token_dfa
        self._node = hist.root(token_dfa.start if state is None else int(state))
        self._lineage = object()   # shared by forks: whose snapshots restore here
        self._states = None        # (state, its byte_states array), see byte_states

    @property
    def vocab(self):
        return self._tdfa.vocab

    @property
    def token_dfa(self):
        """The compiled :class:`~structgen.index.TokenDFA` (immutable, shared)."""
        return self._tdfa

    @property
    def state(self) -> int:
        """The current DFA state (-2 once terminated)."""
        return self._node.state

    # ------------------------------------------------------------------ steps
    def advance(self, token: int) -> bool:
        s = self._node.state
        if s == _TERMINATED:
            return False
        t = self._tdfa
        token = check_token(token)
        if t.is_eos(token):
            if not t.is_accepting(s):
                return False
            ns = _TERMINATED
        else:
            ns = t.next_state(s, token)
            if ns < 0:
                return False
        self._node = self._node.child(ns)
        return True

    def advance_bytes(self, data: bytes) -> bool:
        s = self._node.state
        if s == _TERMINATED:
            return False
        ns = self._tdfa.walk_bytes(s, bytes(data))
        if ns < 0:
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
        self._node = hist.root(self._tdfa.start)

    def fork(self) -> "TokenDFAMatcher":
        m = TokenDFAMatcher.__new__(TokenDFAMatcher)
        m._tdfa, m._node, m._lineage, m._states = self._tdfa, self._node, self._lineage, None
        return m

    def snapshot(self) -> Snapshot:
        return Snapshot(self._lineage, (self._node,))

    def restore(self, snapshot: Snapshot) -> None:
        if not isinstance(snapshot, Snapshot) or snapshot.lineage is not self._lineage:
            raise ValueError("restore() takes a snapshot of this matcher or of one forked from the same start")
        self._node = snapshot.point[0]

    # ------------------------------------------------------------------ masks
    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        row, out = host_row(bitmask, row, self._tdfa.vocab.logits_width)
        s = self._node.state
        src = self._eos_only_row() if s == _TERMINATED else self._tdfa.mask_row(s)
        if out is not None:
            out[:] = src.view(np.uint32)
        else:
            write_row(bitmask, row, src)

    def mask_words(self) -> np.ndarray:
        s = self._node.state
        if s == _TERMINATED:
            return self._eos_only_row().view(np.uint32)
        words = self._tdfa.mask_row(s).view(np.uint32)
        words.flags.writeable = False  # the TokenDFA's cached row (see Matcher.mask_words)
        return words

    def _eos_only_row(self) -> np.ndarray:
        t = self._tdfa
        return set_bits(np.zeros(t.words, dtype=np.uint32), np.asarray(t.vocab.eos_ids, np.int64)).view(np.int32)

    def validate(self, tokens) -> int:
        toks = check_tokens(tokens)
        s = self._node.state
        if s == _TERMINATED:
            return 0
        n, s = self._tdfa.walk_tokens(s, toks)
        if n < toks.size and self._tdfa.is_eos(int(toks[n])) and self._tdfa.is_accepting(s):
            n += 1
        return n

    # ------------------------------------------------------------------ queries
    def is_accepting(self) -> bool:
        s = self._node.state
        return s != _TERMINATED and self._tdfa.is_accepting(s)

    def is_terminated(self) -> bool:
        return self._node.state == _TERMINATED

    def forced_bytes(self) -> bytes:
        s = self._node.state
        return b"" if s == _TERMINATED else self._tdfa.forced_bytes(s)

    def forced_tokens(self, max_back_off: int = 4) -> list[int]:
        # the generic rule of Matcher.forced_tokens, with the DFA's boundary kernel
        # instead of a mask per backed-off token
        s = self._node.state
        if s == _TERMINATED:
            return []
        t = self._tdfa
        forced = t.forced_bytes(s)
        try:
            forced.decode("utf-8")
        except UnicodeDecodeError as e:
            forced = forced[:e.start]
        if not forced:
            return []
        tokens = tokenize_exact(t.vocab, forced)
        if not tokens:
            return []
        states = [s]
        for tok in tokens:
            states.append(t.next_state(states[-1], tok))
            if states[-1] < 0:
                return []
        offsets = np.cumsum([0] + [len(t.vocab.token_bytes(x)) for x in tokens])
        keep = len(tokens)
        for k in range(len(tokens) - 1, max(len(tokens) - max_back_off, 0) - 1, -1):
            if t.crosses_boundary(states[k], forced[offsets[k]:]):
                keep = k
        return tokens[:keep]

    # ------------------------------------------------------------------ ByteStateView
    def byte_automaton(self):
        return self._tdfa.byte_automaton()

    def byte_states(self) -> np.ndarray:
        s = self._node.state
        if s < 0:
            return _NO_STATES
        hit = self._states
        if hit is None or hit[0] != s:
            arr = np.array([s], np.int64)
            arr.flags.writeable = False
            hit = self._states = (s, arr)
        return hit[1]

    def byte_states_after(self, data: bytes):
        s = self._node.state
        if s < 0:
            return None
        ns = self._tdfa.walk_bytes(s, bytes(data)) if data else s
        return np.array([ns], np.int64) if ns >= 0 else None

    def __repr__(self) -> str:
        return f"TokenDFAMatcher(state={self.state}, tokens={self._node.depth})"

