"""Token transitions of a regular constraint, grouped for dynamic programmes over (position, state).

Two levels of sharing, so that no DP ever touches a dense states × V table:

- **token classes**: tokens that every state treats alike (same next state from each state, or
  refused by each) form one class, found by hashing each token's set of (state, next state) pairs
  and then checked exactly.  JSON Schemas over 50k–128k vocabularies have a few hundred classes.
- **groups**: from each state the allowed classes are split by the state they lead to: one group
  per (state, next state) pair, a sorted list of class ids; identical groups are stored once.

So one position of a DP reads ``log_probs`` once per allowed token (a segment max / log-sum-exp
per class), then once per stored (group, class) entry, then once per edge: E = Σ_q classes(q).

EOS (the diffusion convention): an extra absorbing state ``FINISHED`` (local id ``n - 1``) that every
accepting state enters by an EOS token and that only EOS tokens keep; so after the first EOS every
position is EOS, and the state at the first EOS is accepting.  ``FINISHED`` is accepting.  The EOS ids
are the vocabulary's, plus any extra ids given (a model's pad token), which must carry no bytes; they
form one class of their own.

Local states are numbered in increasing DFA state order, ``FINISHED`` last; edges are sorted by
(source, destination); classes by their smallest token.  The DPs break ties towards the smaller
edge index (so the smaller source state), the smaller token id and the smaller end state, the same
way in every backend.
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
    - ``tcls[width]``: the class of each token id (-1: never allowed); ``cptr[C + 1]``, ``ctok``:
      class ``c`` holds ``ctok[cptr[c]:cptr[c + 1]]`` (sorted ids); ``cseg`` the class of each entry.
    - ``gptr[G + 1]``, ``gcls``: group ``g`` holds the classes ``gcls[gptr[g]:gptr[g + 1]]``
      (sorted); ``gseg`` the group of each entry.
    - ``esrc[E]``, ``edst[E]``, ``egrp[E]``: the edges, sorted by (source, destination);
      ``eptr[n + 1]`` indexes them by source and ``iptr[n + 1]`` / ``iedge`` by destination.
    """

    def __init__(self, tdfa: TokenDFA, roots=(), eos_ids=(), max_nnz: int = 64_000_000, exact_classes=False):
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
        # rows without their EOS entries (next -1): EOS is the FINISHED edge, added below
        clean = {}
        for s in states.tolist():
            toks, nexts = rows[s]
            keep = nexts >= 0
            clean[s] = (toks[keep].astype(np.int64), local[nexts[keep]])
        self.tcls = _token_classes(clean, self.width, self.eos_ids, exact_classes)
        n_cls = int(self.tcls.max()) + 1 if self.tcls.size and self.tcls.max() >= 0 else 0
        eos_class = int(self.tcls[self.eos_ids[0]]) if self.eos_ids.size else -1
        order = np.argsort(self.tcls, kind="stable")
        order = order[self.tcls[order] >= 0]
        self.ctok = order.astype(np.int32)
        self.cseg = self.tcls[order].astype(np.int32)
        self.cptr = np.searchsorted(self.cseg, np.arange(n_cls + 1)).astype(np.int64)
        self.n_classes = n_cls

        groups: dict[bytes, int] = {}
        chunks: list[np.ndarray] = []

        def group_of(classes: np.ndarray) -> int:
            key = classes.tobytes()
            g = groups.get(key)
            if g is None:
                g = groups[key] = len(chunks)
                chunks.append(classes)
            return g

        eos_group = group_of(np.asarray([eos_class], dtype=np.int32)) if eos_class >= 0 else -1
        src, dst, grp = [], [], []
        for q, s in enumerate(states.tolist()):
            toks, nexts = clean[s]
            if toks.size:
                cls = self.tcls[toks]
                pairs = np.unique(nexts * (n_cls + 1) + cls)      # (next, class), sorted
                nx, cl = pairs // (n_cls + 1), (pairs % (n_cls + 1)).astype(np.int32)
                cut = np.flatnonzero(np.diff(nx)) + 1
                for a, b in zip(np.concatenate([[0], cut]).tolist(), np.concatenate([cut, [nx.size]]).tolist()):
                    src.append(q)
                    dst.append(int(nx[a]))
                    grp.append(group_of(cl[a:b]))
            if self.accepting[q] and eos_group >= 0:
                src.append(q)
                dst.append(fin)
                grp.append(eos_group)
        if eos_group >= 0:
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
        self.gcls = (np.concatenate(chunks) if chunks else np.zeros(0, np.int32)).astype(np.int32)
        self.gseg = np.repeat(np.arange(len(chunks), dtype=np.int32), sizes)
        self.n_groups = len(chunks)
        self._device: dict = {}
        self._lock = threading.Lock()

    def group_tokens(self, g: int) -> np.ndarray:
        """The sorted token ids of group ``g``."""
        cls = self.gcls[self.gptr[g]:self.gptr[g + 1]]
        if cls.size == 1:
            c = int(cls[0])
            return self.ctok[self.cptr[c]:self.cptr[c + 1]]
        return np.sort(np.concatenate([self.ctok[self.cptr[c]:self.cptr[c + 1]] for c in cls.tolist()]))

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
        return int(sum(a.nbytes for a in (self.tcls, self.cptr, self.ctok, self.cseg, self.gptr, self.gcls, self.gseg,
                                          self.esrc, self.edst, self.egrp, self.eptr, self.iedge, self.iptr)))

    # -- device copies ----------------------------------------------------------------------------
    def tensors(self, device) -> dict:
        """The arrays as int64 tensors on ``device`` (cached per device), plus ``gkey`` =
        ``gseg * (C + 1) + gcls`` (sorted: a class-in-group test is one ``searchsorted``)."""
        dev = torch.device(device)
        key = str(dev)
        with self._lock:
            hit = self._device.get(key)
            if hit is None:
                def t(a):
                    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(dev)
                hit = {name: t(getattr(self, name)) for name in ("tcls", "cptr", "ctok", "cseg", "gptr", "gcls",
                                                                  "gseg", "esrc", "edst", "egrp", "iedge", "iptr")}
                hit["gkey"] = hit["gseg"] * (self.n_classes + 1) + hit["gcls"]
                hit["accepting"] = torch.from_numpy(self.accepting.copy()).to(dev)
                self._device[key] = hit
            return hit

    def __repr__(self) -> str:
        return (f"Transitions(states={self.n}, edges={self.esrc.size}, groups={self.n_groups}, "
                f"classes={self.n_classes}, group_entries={self.gcls.size}, width={self.width})")


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijective scramble of 64-bit words (set hashes are sums of it)."""
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _token_classes(rows: dict, width: int, eos_ids: np.ndarray, exact: bool) -> np.ndarray:
    """Class id per token (-1: allowed nowhere; EOS ids one class of their own), numbered by
    smallest member.  A token's signature is its set of (state, next) pairs: hashed (a sum of
    scrambled words), then checked exactly; ``exact`` (or a failed check) refines state by state."""
    cls = None
    if not exact:
        h = np.zeros(width, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for s, (toks, nexts) in rows.items():
                h[toks] += mix64(np.int64(s) * np.int64(1 << 32) + nexts + 1)
        _, cls = np.unique(h, return_inverse=True)
        cls = cls.astype(np.int64)
        if not _classes_hold(rows, cls):
            cls = None
    if cls is None:
        cls = np.zeros(width, dtype=np.int64)
        for s, (toks, nexts) in rows.items():
            nxt = np.full(width, -1, dtype=np.int64)
            nxt[toks] = nexts
            _, cls = np.unique(cls * (int(nxt.max()) + 2) + nxt + 1, return_inverse=True)
            cls = cls.astype(np.int64)
    allowed = np.zeros(width, dtype=np.bool_)
    for toks, _ in rows.values():
        allowed[toks] = True
    cls = np.where(allowed, cls, -1)
    if eos_ids.size:
        cls[eos_ids] = cls.max() + 1 if cls.size else 0
    # renumber by smallest member token (deterministic, and -1 stays -1)
    live = np.flatnonzero(cls >= 0)
    first = np.full(int(cls.max()) + 1 if live.size else 0, width, dtype=np.int64)
    np.minimum.at(first, cls[live], live)
    present = np.flatnonzero(first < width)
    rank = np.full(first.size, -1, dtype=np.int64)
    rank[present[np.argsort(first[present], kind="stable")]] = np.arange(present.size)
    out = np.full(width, -1, dtype=np.int32)
    out[live] = rank[cls[live]]
    return out


def _classes_hold(rows: dict, cls: np.ndarray) -> bool:
    """Do all tokens of each class share, in every row, the same presence and next state?"""
    size = np.bincount(cls, minlength=int(cls.max()) + 1)
    for toks, nexts in rows.values():
        c = cls[toks]
        if not np.array_equal(np.bincount(c, minlength=size.size)[np.unique(c)], size[np.unique(c)]):
            return False
        order = np.argsort(c, kind="stable")
        cs, ns = c[order], nexts[order]
        same = cs[1:] == cs[:-1]
        if (ns[1:][same] != ns[:-1][same]).any():
            return False
    return True


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
    if getattr(report, "unique_items", None) is not None:
        raise Unsupported("uniqueItems over an open item set relies on a guard outside the automaton; the "
                          "diffusion kernels need an exact automaton")
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
