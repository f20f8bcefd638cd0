"""Token transitions of a regular constraint, grouped for dynamic programmes over (position, state).

From each DFA state reachable by tokens, the tokens are split by the state they lead to: one
*group* per (state, next state) pair, the sorted token ids of that transition class.  Identical
token sets are stored once (the string-body loop of every JSON string field is one group), so one
position of a DP reads ``log_probs`` once per stored token (``N`` = Σ distinct groups) and then works
on ``E`` = Σ_q classes(q) edges — never a dense states × V table.

EOS (the diffusion convention): an extra absorbing state ``FINISHED`` (local id ``n - 1``) that every
accepting state enters by an EOS token and that only EOS tokens keep; so after the first EOS every
position is EOS, and the state at the first EOS is accepting.  ``FINISHED`` is accepting.  The EOS ids
are the vocabulary's, plus any extra ids given (a model's pad token), which must carry no bytes.

Local states are numbered in increasing DFA state order, ``FINISHED`` last; edges are sorted by
(source, destination).  The DPs break ties towards the smaller edge index (so the smaller source
state), the smaller token id and the smaller end state, the same way in every backend.
"""
from __future__ import annotations

import threading

import numpy as np
import torch

from .. import caching
from ..errors import OptionError, Unsupported
from ..index.token_dfa import TokenDFA

__all__ = ["Transitions", "transitions_of", "token_dfa_of", "FINISHED_STATE"]

#: the DFA-state id a terminated matcher reports (after EOS)
FINISHED_STATE = -2


class Transitions:
    """Grouped transitions of one :class:`~structgen.index.TokenDFA` (see the module docstring).

    Arrays (numpy, int32/int64, read-only by convention):

    - ``dfa_state[n]``: the DFA state of each local state (``FINISHED_STATE`` for the last).
    - ``accepting[n]`` (bool).
    - ``gptr[G + 1]``, ``gtok[N]``: group ``g`` holds ``gtok[gptr[g]:gptr[g + 1]]`` (sorted ids);
      ``gseg[N]`` is the group of each entry.
    - ``esrc[E]``, ``edst[E]``, ``egrp[E]``: the edges, sorted by (source, destination);
      ``eptr[n + 1]`` indexes them by source and ``iptr[n + 1]`` / ``iedge`` by destination.
    """

    def __init__(self, tdfa: TokenDFA, roots=(), eos_ids=(), max_nnz: int = 64_000_000):
        vocab = tdfa.vocab
        self.token_dfa = tdfa
        self.width = int(vocab.logits_width)
        self.size = int(vocab.size)
        eos = sorted({int(t) for t in vocab.eos_ids} | {int(t) for t in eos_ids})
        for t in eos:
            if not 0 <= t < self.width:
                raise OptionError(f"EOS / pad id {t} is outside the logits width {self.width}")
            if t < self.size and vocab.is_normal[t]:
                raise OptionError(f"EOS / pad id {t} is a normal token (it spells {vocab.token_bytes(t)!r}): "
                                  "only special tokens can pad a diffusion answer")
        self.eos_ids = np.asarray(eos, dtype=np.int32)
        self.roots = frozenset(int(r) for r in roots) | {tdfa.start}
        rows = tdfa.explore(max_nnz=max_nnz, roots=self.roots)
        states = np.asarray(sorted(rows), dtype=np.int64)
        n = states.size + 1
        fin = n - 1
        local = np.full(tdfa.dfa.n_states, -1, dtype=np.int64)
        local[states] = np.arange(states.size)
        self._local = local
        self.n = n
        self.finished = fin
        self.dfa_state = np.concatenate([states, [FINISHED_STATE]]).astype(np.int64)
        acc = np.asarray(tdfa.dfa.accepting, dtype=np.bool_)
        self.accepting = np.concatenate([acc[states], [True]])

        groups: dict[bytes, int] = {}
        chunks: list[np.ndarray] = []

        def group_of(toks: np.ndarray) -> int:
            key = toks.tobytes()
            g = groups.get(key)
            if g is None:
                g = groups[key] = len(chunks)
                chunks.append(toks)
            return g

        eos_group = group_of(self.eos_ids)
        src, dst, grp = [], [], []
        for q, s in enumerate(states.tolist()):
            toks, nexts = rows[s]
            keep = nexts >= 0                      # EOS entries (next -1) become the FINISHED edge
            toks, nexts = toks[keep].astype(np.int32), nexts[keep].astype(np.int64)
            if toks.size:
                order = np.lexsort((toks, nexts))
                toks, nexts = toks[order], nexts[order]
                cut = np.flatnonzero(np.diff(nexts)) + 1
                starts = np.concatenate([[0], cut])
                ends = np.concatenate([cut, [toks.size]])
                for a, b in zip(starts.tolist(), ends.tolist()):
                    src.append(q)
                    dst.append(int(local[nexts[a]]))
                    grp.append(group_of(toks[a:b]))
            if self.accepting[q] and self.eos_ids.size:
                src.append(q)
                dst.append(fin)
                grp.append(eos_group)
        if self.eos_ids.size:
            src.append(fin)
            dst.append(fin)
            grp.append(eos_group)
        esrc = np.asarray(src, dtype=np.int32)
        edst = np.asarray(dst, dtype=np.int32)
        order = np.lexsort((edst, esrc))
        self.esrc, self.edst = esrc[order], edst[order]
        self.egrp = np.asarray(grp, dtype=np.int32)[order]
        self.eptr = np.searchsorted(self.esrc, np.arange(n + 1)).astype(np.int64)
        self.iedge = np.argsort(self.edst, kind="stable").astype(np.int32)
        self.iptr = np.searchsorted(self.edst[self.iedge], np.arange(n + 1)).astype(np.int64)
        sizes = np.asarray([c.size for c in chunks], dtype=np.int64)
        self.gptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.gtok = (np.concatenate(chunks) if chunks else np.zeros(0, np.int32)).astype(np.int32)
        self.gseg = np.repeat(np.arange(len(chunks), dtype=np.int32), sizes)
        self.n_groups = len(chunks)
        self._device: dict = {}
        self._lock = threading.Lock()

    # -- states ---------------------------------------------------------------------------------
    def local(self, dfa_state: int) -> int:
        """The local id of a DFA state (``FINISHED_STATE`` -> ``finished``); -1 when unknown."""
        s = int(dfa_state)
        if s == FINISHED_STATE:
            return self.finished
        if 0 <= s < self._local.size:
            return int(self._local[s])
        return -1

    def valid_ends(self, final: bool) -> np.ndarray:
        """Bool [n]: the local states a block may end in (accepting ones when ``final``)."""
        return self.accepting.copy() if final else np.ones(self.n, dtype=np.bool_)

    def can_end_within(self, ends: np.ndarray, k: int) -> np.ndarray:
        """Bool [n]: from which states exactly ``k`` more tokens (EOS included) reach ``ends``."""
        ok = np.asarray(ends, dtype=np.bool_)
        for _ in range(int(k)):
            nxt = np.zeros(self.n, dtype=np.bool_)
            hit = ok[self.edst]
            nxt[self.esrc[hit]] = True
            if np.array_equal(nxt, ok):
                break  # a fixed point: more steps change nothing
            ok = nxt
        return ok

    def successors(self, q: int) -> np.ndarray:
        """Distinct next local states of ``q`` (what one masked position may lead to)."""
        return self.edst[self.eptr[q]:self.eptr[q + 1]]

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in (self.gptr, self.gtok, self.gseg, self.esrc, self.edst, self.egrp,
                                          self.eptr, self.iedge, self.iptr)))

    # -- device copies ----------------------------------------------------------------------------
    def tensors(self, device) -> dict:
        """The arrays as int64 tensors on ``device`` (cached per device), plus ``gkey`` =
        ``gseg * width + gtok`` (sorted: a group-membership test is one ``searchsorted``)."""
        dev = torch.device(device)
        key = str(dev)
        with self._lock:
            hit = self._device.get(key)
            if hit is None:
                def t(a):
                    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(dev)
                hit = {name: t(getattr(self, name)) for name in ("gptr", "gtok", "gseg", "esrc", "edst", "egrp",
                                                                  "iedge", "iptr")}
                hit["gkey"] = hit["gseg"] * self.width + hit["gtok"]
                hit["accepting"] = torch.from_numpy(self.accepting.copy()).to(dev)
                self._device[key] = hit
            return hit

    def __repr__(self) -> str:
        return (f"Transitions(states={self.n}, edges={self.esrc.size}, groups={self.n_groups}, "
                f"stored_tokens={self.gtok.size}, width={self.width})")


_TRANSITIONS = caching.LRU(32, name="diffusion.transitions")  # (id(tdfa), eos) -> (tdfa, Transitions)
_BUILD_LOCK = threading.Lock()


def token_dfa_of(compiled) -> TokenDFA:
    """The TokenDFA of a CompiledGrammar (or a TokenDFA); Unsupported for context-free ones."""
    if isinstance(compiled, TokenDFA):
        return compiled
    tdfa = getattr(compiled, "token_dfa", None)
    if tdfa is None:
        raise Unsupported("the diffusion kernels (dingo, sample, marginals) need a regular constraint (a regex, "
                          "a non-recursive JSON Schema, choices); a context-free grammar is only supported by "
                          "generate(..., method='lookahead')", where=str(getattr(compiled, "grammar", compiled)))
    report = getattr(getattr(compiled, "grammar", None), "report", None)
    if getattr(report, "unique_keys", False):
        raise Unsupported("property_order='any' relies on a key guard outside the automaton; the diffusion "
                          "kernels need an exact automaton: use property_order='declared'")
    return tdfa


def transitions_of(compiled, roots=(), eos_ids=()) -> Transitions:
    """The cached :class:`Transitions` of ``compiled`` covering every state reachable from its
    start and from ``roots`` (DFA state ids), with ``eos_ids`` as extra EOS / pad ids."""
    tdfa = token_dfa_of(compiled)
    eos = tuple(sorted({int(t) for t in eos_ids}))
    key = (id(tdfa), eos)
    roots = {int(r) for r in roots if int(r) >= 0}
    with _BUILD_LOCK:
        hit = _TRANSITIONS.get(key)
        if hit is not None and hit[0] is tdfa:
            trans = hit[1]
            if all(trans.local(r) >= 0 for r in roots):
                return trans
            roots |= set(trans.roots)
        trans = Transitions(tdfa, roots=roots, eos_ids=eos)
        _TRANSITIONS.put(key, (tdfa, trans))
        return trans
