"""TokenDFA: a byte DFA lifted to a tokenizer's vocabulary.

For each DFA state the allowed tokens (those whose bytes keep the DFA alive,
plus EOS in accepting states) and the states they lead to.  Rows are computed
lazily on first visit by a Numba walk of the token trie and cached as packed
bitmask rows; :meth:`TokenDFA.csr` materialises the reachable part as CSR
(``indptr``, ``token_ids``, ``next_state``) for consumers that want it all at
once (device-resident decoding, diffusion DP, benchmarks).  Nothing is ever a
dense states × V table.

Liveness: the byte DFA is trimmed, so a live byte prefix can always be
completed *byte by byte*.  When every byte the DFA uses exists as a
single-byte token (true of byte-level BPE and byte-fallback vocabularies) that
also holds token by token and the lazy mode is exact.  Otherwise the whole
reachable token graph is built eagerly and transitions into states that cannot
reach acceptance by tokens are pruned, so a matcher can never get stuck.
"""
from __future__ import annotations

from collections import deque

import numpy as np
import torch

from ..automaton.dfa import ByteDFA
from ..errors import LimitExceeded, StructgenError
from ..kernels.bitmask import bitmask_words, clear_bits, set_bits
from ..kernels.trie_walk import token_crosses, walk_bytes, walk_state, walk_states, walk_tokens
from .slices import NO_SLICING, Slicing, loops_on_charset, may_loop_on, vocab_slice

_EMPTY_I32 = np.zeros(0, dtype=np.int32)


class TokenDFA:
    """Token-level view of ``dfa`` over ``vocab`` (see module docstring).

    ``cache_rows`` bounds the number of cached bitmask rows (each is
    ``ceil(V/32) * 4`` bytes: 16 KiB at V = 128k).  ``slicing``: the vocabulary slices
    (:mod:`.slices`) that states looping on a whole character set take their masks from; the
    first one that some state may loop on and that is large enough for ``vocab`` is used.
    Masks do not depend on it.
    """

    def __init__(self, dfa: ByteDFA, vocab, *, cache_rows: int = 4096, slicing: Slicing = NO_SLICING):
        self.dfa = dfa
        self.vocab = vocab
        self.start = int(dfa.start)
        self.words = bitmask_words(vocab.logits_width)
        self.cache_rows = int(cache_rows)
        self._trans = np.ascontiguousarray(dfa.transitions, dtype=np.int32)
        self._byte_class = np.ascontiguousarray(dfa.byte_class, dtype=np.int32)
        self._accepting = np.asarray(dfa.accepting, dtype=np.bool_)
        trie = vocab.trie
        self._trie = trie
        self._node_class = self._byte_class[trie.node_byte]
        self._stack = np.zeros(int(trie.max_depth) + 2, dtype=np.int32)
        self._eos = np.asarray(vocab.eos_ids, dtype=np.int64)
        self._eos_set = frozenset(int(t) for t in self._eos)
        self._rows: dict[int, np.ndarray] = {}
        self._live: np.ndarray | None = None  # token-level live states (eager mode only)
        self._slice = None                    # set below; the eager pruning walks rows before that
        self._loops: dict[int, bool] = {}
        self._prepare_forcing()
        if not self._single_bytes_cover_dfa():
            self._prune_token_dead_states()
        if self._live is None:
            for sdef in slicing.slices:
                if not may_loop_on(self._trans, self._byte_class, sdef.charset):
                    continue
                sl = vocab_slice(vocab, sdef)
                if sl is not None:
                    self._slice = sl
                    self._rest_node_class = self._byte_class[sl.rest_trie.node_byte]
                    break
        if not self.state_is_live(self.start):
            raise StructgenError("the constraint matches no token sequence of this vocabulary")

    # -- rows ---------------------------------------------------------------
    def _uses_slice(self, state: int) -> bool:
        """Does ``state`` map every character of the slice back to itself?"""
        if self._slice is None:
            return False
        hit = self._loops.get(state)
        if hit is None:
            sl = self._slice
            hit = self._loops[state] = bool(loops_on_charset(
                self._trans, self._byte_class, state, sl.u_trans, sl.u_class, sl.u_accept, sl.u_start))
        return hit

    def _walk(self, state: int, record: bool):
        """Allowed normal tokens of ``state``: mask words, and when ``record`` the
        tokens (ascending) with their next states."""
        sliced = self._uses_slice(state)
        t = self._slice.rest_trie if sliced else self._trie
        node_class = self._rest_node_class if sliced else self._node_class
        words = self._slice.bits.copy() if sliced else np.zeros(self.words, dtype=np.uint32)
        if record:
            out_tok = np.empty(t.tok_ids.shape[0], dtype=np.int32)
            out_next = np.empty(t.tok_ids.shape[0], dtype=np.int32)
        else:
            out_tok = out_next = _EMPTY_I32
        # a stack of its own: rows of one TokenDFA may be computed by several threads at once
        n = walk_state(self._trans, node_class, state, t.node_depth, t.node_end,
                       t.tok_ptr, t.tok_ids, np.empty_like(self._stack), words, out_tok, out_next)
        if not record:
            return words, None, None
        toks, nexts = out_tok[:n], out_next[:n]
        if sliced:
            toks = np.concatenate([toks, self._slice.tokens])
            nexts = np.concatenate([nexts, np.full(self._slice.size, state, dtype=np.int32)])
        toks, nexts = _sort_row(toks, nexts, self.vocab.logits_width)
        return words, toks, nexts

    def _set_eos(self, words: np.ndarray, state: int) -> None:
        if self._accepting[state]:
            set_bits(words, self._eos)

    def mask_row(self, state: int) -> np.ndarray:
        """The int32 bitmask row of ``state`` (cached; do not modify it)."""
        row = self._rows.get(state)
        if row is not None:
            return row
        if self._live is not None:
            words, toks, nexts = self._walk(state, record=True)
            dead = ~self._live[nexts]
            if dead.any():
                clear_bits(words, toks[dead])
        else:
            words, _, _ = self._walk(state, record=False)
        self._set_eos(words, state)
        row = words.view(np.int32)
        if len(self._rows) >= self.cache_rows:
            self._rows.pop(next(iter(self._rows)), None)  # another thread may have evicted it
        self._rows[state] = row
        return row

    def row(self, state: int):
        """``(token_ids, next_states)`` of ``state``, sorted by token id.

        EOS tokens of an accepting state are listed with next state -1.
        """
        _, toks, nexts = self._walk(state, record=True)
        return self._finish_row(state, toks, nexts)

    def _finish_row(self, state, toks, nexts):
        if self._live is not None:
            keep = self._live[nexts]
            toks, nexts = toks[keep], nexts[keep]
        if self._accepting[state] and self._eos.size:
            toks = np.concatenate([toks, self._eos.astype(np.int32)])
            nexts = np.concatenate([nexts, np.full(self._eos.size, -1, np.int32)])
            order = np.argsort(toks, kind="stable")
            toks, nexts = toks[order], nexts[order]
        return toks, nexts

    # -- transitions ----------------------------------------------------------
    def next_state(self, state: int, token: int) -> int:
        """State after a normal ``token`` from ``state``, or -1 if not allowed.

        EOS is not a transition; ask :meth:`is_accepting`.
        """
        v = self.vocab
        if token < 0 or token >= v.logits_width or not v.is_normal[token]:
            return -1
        s = walk_bytes(self._trans, self._byte_class, state, v.token_data,
                       v.token_offsets[token], v.token_offsets[token + 1])
        if s >= 0 and self._live is not None and not self._live[s]:
            return -1
        return int(s)

    def walk_tokens(self, state: int, tokens: np.ndarray):
        """``(n, state)``: how many leading normal tokens are accepted, and the state then."""
        v = self.vocab
        toks = np.ascontiguousarray(tokens, dtype=np.int64)
        if self._live is None:
            n, s = walk_tokens(self._trans, self._byte_class, state, v.token_data,
                               v.token_offsets, toks, v.is_normal)
            return int(n), int(s)
        s, n = state, 0
        for t in toks:
            ns = self.next_state(s, int(t))
            if ns < 0:
                break
            s, n = ns, n + 1
        return n, s

    def walk_bytes(self, state: int, data: bytes) -> int:
        """State after the raw bytes ``data`` from ``state`` (no token boundary implied), or
        -1 when the DFA dies or the state reached cannot be completed by tokens."""
        s = self.dfa.walk(data, state) if data else state
        return int(s) if s >= 0 and self.state_is_live(s) else -1

    def byte_automaton(self):
        """``(transitions, byte_class (int64), zeros (uint8))`` of the byte DFA, made once:
        the automaton a matcher's byte states refer to (no lexeme ends inside one DFA)."""
        hit = getattr(self, "_byte_automaton", None)
        if hit is None:
            d = self.dfa
            hit = self._byte_automaton = (np.ascontiguousarray(d.transitions), np.asarray(d.byte_class, np.int64),
                                          np.zeros(d.transitions.shape[0], np.uint8))
        return hit

    def is_accepting(self, state: int) -> bool:
        return bool(self._accepting[state])

    def is_eos(self, token: int) -> bool:
        return token in self._eos_set

    def state_is_live(self, state: int) -> bool:
        if self._live is not None:
            return bool(self._live[state])
        return state >= 0 and (bool(self._accepting[state]) or bool((self._trans[state] >= 0).any()))

    # -- eager construction ---------------------------------------------------
    def explore(self, max_nnz: int | None = None, batch: int = 32, roots=None) -> dict:
        """Rows of every DFA state reachable by tokens from the start (or from each of
        ``roots``): ``{state: (token_ids, next_states)}`` (see :meth:`row`).

        States are walked ``batch`` at a time in one pass over the trie.
        """
        rows = {}
        starts = [self.start] if roots is None else sorted({int(r) for r in roots})
        todo = deque(starts)
        seen = set(starts)
        nnz = 0
        while todo:
            group = [todo.popleft() for _ in range(min(batch, len(todo)))]
            for s, (toks, nexts) in zip(group, self._rows_of(group)):
                rows[s] = (toks, nexts)
                nnz += toks.size
                if max_nnz is not None and nnz > max_nnz:
                    raise LimitExceeded("token-level CSR too large", limit="max_nnz", value=max_nnz)
                for ns in np.unique(nexts[nexts >= 0]).tolist():
                    if ns not in seen:
                        seen.add(ns)
                        todo.append(ns)
        return rows

    def _rows_of(self, states: list[int]):
        """:meth:`row` for several states, walking the trie once."""
        if len(states) == 1 or any(self._uses_slice(s) for s in states):
            return [self.row(s) for s in states]
        t = self._trie
        k = len(states)
        n_tok = t.tok_ids.shape[0]
        out_tok = np.empty((k, n_tok), dtype=np.int32)
        out_next = np.empty((k, n_tok), dtype=np.int32)
        counts = np.zeros(k, dtype=np.int64)
        stack = np.empty((int(t.max_depth) + 2, k), dtype=np.int32)
        walk_states(self._trans, self._node_class, np.asarray(states, dtype=np.int32), t.node_depth,
                    t.node_end, t.tok_ptr, t.tok_ids, stack, out_tok, out_next, counts)
        result = []
        for j, s in enumerate(states):
            toks, nexts = _sort_row(out_tok[j, :counts[j]], out_next[j, :counts[j]], self.vocab.logits_width)
            result.append(self._finish_row(s, toks, nexts))
        return result

    def csr(self, max_nnz: int = 64_000_000):
        """Materialise ``(indptr, token_ids, next_state)`` over all DFA states.

        Row ``s`` lists the tokens allowed in state ``s`` (sorted; EOS with next
        state -1); states not reachable by tokens have empty rows.  Raises
        LimitExceeded past ``max_nnz`` entries.
        """
        rows = self.explore(max_nnz)
        counts = np.zeros(self.dfa.n_states + 1, dtype=np.int64)
        for s, (toks, _) in rows.items():
            counts[s + 1] = toks.size
        indptr = np.cumsum(counts)
        token_ids = np.empty(int(indptr[-1]), dtype=np.int32)
        next_state = np.empty(int(indptr[-1]), dtype=np.int32)
        for s, (toks, nexts) in rows.items():
            token_ids[indptr[s]:indptr[s + 1]] = toks
            next_state[indptr[s]:indptr[s + 1]] = nexts
        return indptr, token_ids, next_state

    def _single_bytes_cover_dfa(self) -> bool:
        v = self.vocab
        lengths = np.diff(v.token_offsets)
        single = np.flatnonzero((lengths == 1) & v.is_normal)
        covered = np.zeros(256, dtype=np.bool_)
        covered[v.token_data[v.token_offsets[single]]] = True
        used_classes = np.flatnonzero((self._trans >= 0).any(axis=0))
        used_bytes = np.isin(self._byte_class, used_classes)
        return bool(np.all(covered[used_bytes]))

    def _prune_token_dead_states(self) -> None:
        """Eager mode: keep only states from which tokens can reach acceptance."""
        n = self.dfa.n_states
        self._live = np.ones(n, dtype=np.bool_)  # row() filters with it; all live while building
        rows = {s: nexts for s, (_, nexts) in self.explore().items()}
        preds: dict[int, list[int]] = {s: [] for s in rows}
        for s, nexts in rows.items():
            for ns in np.unique(nexts[nexts >= 0]).tolist():
                preds.setdefault(ns, []).append(s)
        live = np.zeros(n, dtype=np.bool_)
        todo = deque(s for s in rows if self._accepting[s])
        for s in todo:
            live[s] = True
        while todo:
            s = todo.popleft()
            for p in preds.get(s, ()):
                if not live[p]:
                    live[p] = True
                    todo.append(p)
        self._live = live
        self._rows.clear()

    # -- forced text ----------------------------------------------------------
    def _prepare_forcing(self) -> None:
        bc = self._byte_class
        n_classes = self._trans.shape[1]
        class_size = np.bincount(bc, minlength=n_classes)
        first_byte = np.full(n_classes, -1, dtype=np.int64)
        first_byte[bc[::-1]] = np.arange(255, -1, -1)
        out = self._trans >= 0
        n_out = out.sum(axis=1)
        only = np.argmax(out, axis=1)
        forced = (n_out == 1) & (class_size[only] == 1) & ~self._accepting
        self._forced_byte = np.where(forced, first_byte[only], -1)

    def forced_bytes(self, state: int, limit: int = 256) -> bytes:
        """Bytes every match must continue with from ``state`` (possibly empty)."""
        out = bytearray()
        s = state
        while len(out) < limit and s >= 0:
            b = int(self._forced_byte[s])
            if b < 0:
                break
            out.append(b)
            s = int(self._trans[s, self._byte_class[b]])
        return bytes(out)

    def crosses_boundary(self, state: int, rest: bytes) -> bool:
        """True when an allowed token starts with ``rest`` and runs past its end."""
        t = self._trie
        return bool(token_crosses(self._trans, self._byte_class, state,
                                  np.frombuffer(rest, dtype=np.uint8), t.node_byte,
                                  t.node_depth, t.node_end, t.tok_ptr, self._stack))

    def to(self, device, max_nnz: int = 64_000_000) -> "DeviceTokenDFA":
        """A device-resident copy for decode loops without host sync."""
        return DeviceTokenDFA(self, device, max_nnz=max_nnz)

    def __repr__(self) -> str:
        mode = "eager-pruned" if self._live is not None else "lazy"
        return (f"TokenDFA(states={self.dfa.n_states}, width={self.vocab.logits_width}, "
                f"cached_rows={len(self._rows)}, mode={mode})")


def _sort_row(toks, nexts, width):
    """Sort a row by token id (a scatter over the vocabulary for dense rows)."""
    if toks.size > width >> 6:
        by_token = np.full(width, -1, dtype=np.int32)
        by_token[toks] = nexts
        toks = np.flatnonzero(by_token >= 0).astype(np.int32)
        return toks, by_token[toks]
    order = np.argsort(toks, kind="stable")
    return toks[order], nexts[order]


class DeviceTokenDFA:
    """All reachable rows of a :class:`TokenDFA` as tensors on one device.

    ``masks(states)`` gathers bitmask rows; ``step(states, tokens)`` looks up
    next states by a sorted-key search over the CSR — both are pure tensor ops,
    so a decode loop on the accelerator never waits for the host.  State -1
    stands for "finished or rejected": its mask allows only EOS, so sampling
    never sees an all -inf row.
    """

    def __init__(self, tdfa: TokenDFA, device, max_nnz: int = 64_000_000):
        self.device = torch.device(device)
        self.start = tdfa.start
        self.width = tdfa.vocab.logits_width
        indptr, token_ids, next_state = tdfa.csr(max_nnz=max_nnz)
        n = tdfa.dfa.n_states
        self.n_states = n
        rows = np.zeros((n + 1, tdfa.words), dtype=np.int32)
        for s in np.flatnonzero(np.diff(indptr)):
            rows[s] = tdfa.mask_row(int(s))
        rows[n] = set_bits(np.zeros(tdfa.words, dtype=np.uint32), tdfa._eos).view(np.int32)
        row_of_state = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
        keys = row_of_state * self.width + token_ids.astype(np.int64)
        self.indptr = torch.from_numpy(indptr).to(self.device)
        self.token_ids = torch.from_numpy(token_ids).to(self.device)
        self.next_state_table = torch.from_numpy(next_state).to(self.device)
        self._keys = torch.from_numpy(keys).to(self.device)
        self._rows = torch.from_numpy(rows).to(self.device)

    def masks(self, states: torch.Tensor) -> torch.Tensor:
        """``[B, words]`` int32 bitmask rows for a ``[B]`` tensor of states."""
        idx = torch.where(states < 0, torch.full_like(states, self.n_states), states)
        return self._rows.index_select(0, idx.long())

    def step(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Next states; -1 where the token is not allowed, is EOS, or the row is finished."""
        s = states.long()
        q = s.clamp(min=0) * self.width + tokens.long()
        if self._keys.numel() == 0:
            return torch.full_like(s, -1)
        pos = torch.searchsorted(self._keys, q).clamp(max=self._keys.numel() - 1)
        hit = (self._keys[pos] == q) & (s >= 0)
        nxt = self.next_state_table[pos].long()
        return torch.where(hit, nxt, torch.full_like(nxt, -1))
