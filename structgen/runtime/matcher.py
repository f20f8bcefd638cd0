"""Matcher: the per-sequence cursor every decoder talks to.

Contract (shared by the regular-language matcher here and the grammar engine's):

- ``advance(token) -> bool``: accept one token; a rejected token returns False
  and leaves the state unchanged.  EOS is accepted exactly in accepting states
  and terminates the matcher.
- ``rollback(n)``: undo exactly the last ``n`` accepted tokens.
- ``fork()``: an independent copy sharing the compiled constraint.
- ``fill_bitmask(bitmask, row=0)``: write the allowed tokens into one row of an
  int32 ``[B, ceil(V/32)]`` array or tensor.  A terminated matcher allows EOS
  only, so a sampler never sees an all -inf row.
- ``is_accepting()``: EOS would be accepted now.  ``is_terminated()``: EOS was.
- ``validate(tokens) -> n``: how many leading tokens of a draft would be
  accepted, without changing the state.
- ``forced_tokens()``: canonical tokens of the text the constraint forces next,
  stopping short of tokens that could merge with what follows.
- ``reset()``: back to the start.
"""
from __future__ import annotations

import numpy as np
import torch

from ..kernels.bitmask import set_bits

_TERMINATED = -2


class Matcher:
    """Abstract base of matchers (see the module docstring for the contract)."""

    def advance(self, token: int) -> bool:
        raise NotImplementedError

    def rollback(self, n: int = 1) -> None:
        raise NotImplementedError

    def fork(self) -> "Matcher":
        raise NotImplementedError

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        raise NotImplementedError

    def is_accepting(self) -> bool:
        raise NotImplementedError

    def is_terminated(self) -> bool:
        raise NotImplementedError

    def validate(self, tokens) -> int:
        """By replay: advance as far as the tokens go, then roll back (matchers with a cheaper
        check override it)."""
        n = self.advance_many(np.asarray(tokens, dtype=np.int64).reshape(-1))
        self.rollback(n)
        return n

    def forced_tokens(self) -> list[int]:
        raise NotImplementedError

    def reset(self) -> None:
        raise NotImplementedError

    def advance_many(self, tokens) -> int:
        """Advance through ``tokens`` until one is rejected; returns how many were accepted."""
        n = 0
        for t in tokens:
            if not self.advance(int(t)):
                break
            n += 1
        return n


def write_row(bitmask, row: int, words: np.ndarray) -> None:
    """Copy one int32 mask row into ``bitmask[row]`` (numpy array or torch tensor)."""
    if isinstance(bitmask, torch.Tensor):
        view = cpu_view(bitmask)
        if view is not None:
            view[row] = words
            return
        src = torch.from_numpy(words)
        if bitmask.device.type != "cpu":
            src = src.to(bitmask.device, non_blocking=True)
        bitmask[row].copy_(src)
    else:
        bitmask[row] = words


_VIEW = (None, 0, None, None)  # (tensor, data pointer, shape, numpy view) of the last CPU bitmask


def cpu_view(bitmask: torch.Tensor):
    """A numpy view sharing the memory of a CPU int32 tensor (None for others).  Kept for the
    last tensor while its storage and shape stay the same: a numpy row copy costs a third of
    torch's indexing and ``copy_`` for one 128k-token row, paid at every mask."""
    global _VIEW
    t, ptr, shape, view = _VIEW
    if t is bitmask and bitmask.data_ptr() == ptr and bitmask.shape == shape:
        return view
    if bitmask.device.type != "cpu" or bitmask.dtype != torch.int32 or bitmask.requires_grad:
        return None
    try:
        view = bitmask.numpy()
    except (RuntimeError, TypeError, ValueError):  # e.g. a conjugated or negated view
        return None
    _VIEW = (bitmask, bitmask.data_ptr(), bitmask.shape, view)
    return view


def fill_bitmasks(matchers, bitmask) -> None:
    """Fill rows ``0..len(matchers)-1`` of ``bitmask``; ``None`` entries allow everything."""
    for i, m in enumerate(matchers):
        if m is None:
            bitmask[i] = -1
        else:
            m.fill_bitmask(bitmask, i)


class TokenDFAMatcher(Matcher):
    """Matcher over a :class:`structgen.index.TokenDFA` (regular constraints)."""

    __slots__ = ("_tdfa", "_state", "_history")

    def __init__(self, token_dfa, state: int | None = None):
        self._tdfa = token_dfa
        self._state = token_dfa.start if state is None else state
        self._history: list[int] = []

    @property
    def state(self) -> int:
        """The current DFA state (-2 once terminated)."""
        return self._state

    def advance(self, token: int) -> bool:
        s = self._state
        if s == _TERMINATED:
            return False
        t = self._tdfa
        if t.is_eos(token):
            if not t.is_accepting(s):
                return False
            ns = _TERMINATED
        else:
            ns = t.next_state(s, token)
            if ns < 0:
                return False
        self._history.append(s)
        self._state = ns
        return True

    def rollback(self, n: int = 1) -> None:
        if n < 0 or n > len(self._history):
            raise ValueError(f"cannot roll back {n} tokens; {len(self._history)} were accepted")
        if n:
            self._state = self._history[-n]
            del self._history[-n:]

    def fork(self) -> "TokenDFAMatcher":
        m = TokenDFAMatcher(self._tdfa, self._state)
        m._history = list(self._history)
        return m

    def reset(self) -> None:
        self._state = self._tdfa.start
        self._history.clear()

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        if self._state == _TERMINATED:
            write_row(bitmask, row, self._eos_only_row())
        else:
            write_row(bitmask, row, self._tdfa.mask_row(self._state))

    def _eos_only_row(self) -> np.ndarray:
        t = self._tdfa
        return set_bits(np.zeros(t.words, dtype=np.uint32), t._eos).view(np.int32)

    def is_accepting(self) -> bool:
        return self._state != _TERMINATED and self._tdfa.is_accepting(self._state)

    def is_terminated(self) -> bool:
        return self._state == _TERMINATED

    def validate(self, tokens) -> int:
        s = self._state
        if s == _TERMINATED:
            return 0
        toks = np.asarray(tokens, dtype=np.int64).reshape(-1)
        n, s = self._tdfa.walk_tokens(s, toks)
        if n < toks.size and self._tdfa.is_eos(int(toks[n])) and self._tdfa.is_accepting(s):
            n += 1
        return n

    def accepted_tokens(self) -> int:
        return len(self._history)

    def forced_tokens(self, max_back_off: int = 4) -> list[int]:
        if self._state == _TERMINATED:
            return []
        t = self._tdfa
        forced = t.forced_bytes(self._state)
        # Only whole UTF-8 characters can be tokenized as text.
        try:
            forced.decode("utf-8")
        except UnicodeDecodeError as e:
            forced = forced[:e.start]
        if not forced:
            return []
        tokens = _tokenize_exact(t.vocab, forced)
        if not tokens:
            return []
        # Back off from the end while an allowed token could straddle the end of
        # the forced text: those last tokens may be tokenized differently once
        # the free text after them is known.
        states = [self._state]
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


def _tokenize_exact(vocab, data: bytes) -> list[int]:
    """Tokens whose bytes concatenate to ``data``: the tokenizer's own encoding
    when it round-trips exactly, else greedy longest match over the trie."""
    try:
        ids = vocab.encode(data.decode("utf-8"))
        if vocab.decode(ids) == data and all(vocab.is_normal[i] for i in ids):
            return [int(i) for i in ids]
    except Exception:
        pass
    return _greedy_tokenize(vocab, data)


def _greedy_tokenize(vocab, data: bytes) -> list[int]:
    trie = vocab.trie
    out, pos = [], 0
    while pos < len(data):
        node, best, best_len, depth = 0, -1, 0, 0
        while pos + depth < len(data):
            found = trie.child(node, data[pos + depth])
            if found < 0:
                break
            node, depth = found, depth + 1
            if trie.tok_ptr[node + 1] > trie.tok_ptr[node]:
                best, best_len = int(trie.tok_ids[trie.tok_ptr[node]]), depth
        if best < 0:
            return []
        out.append(best)
        pos += best_len
    return out
