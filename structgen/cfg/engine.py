"""CompiledCFG: a :class:`CFG` compiled into lexer DFAs and Earley tables, met with a vocabulary.

Normalisation (exact, see :mod:`structgen.cfg.grammar` for the language):

- each terminal ``T`` used in rules becomes the regular language ``IGN* T`` where
  ``IGN`` is the union of the ignore terminals, and the start rule gets an
  optional trailing ``IGN+``: ignores between lexemes become part of lexemes;
- a terminal that matches the empty string is split into ``ε | T+`` (lexemes
  always consume at least one byte), one that matches nothing is dropped;
- unproductive and unreachable symbols are removed (an empty language raises
  :class:`GrammarError`).

The mask parts that do not depend on the parse stack (see :mod:`structgen.cfg.mask`)
are cached on the compiled grammar (:class:`~structgen.cfg.cache.MaskCache`), so
they are shared by every matcher of it.
"""
from __future__ import annotations

import pickle
import time

import numpy as np

from ..automaton import ir
from ..automaton.dfa import ByteDFA
from ..errors import GrammarError, LimitExceeded
from . import diskcache
from .cache import MaskCache
from .grammar import CFG, trim
from .terminals import build

_START = "$start"
_TRAIL = "$trail"


class Tables:
    """Flat arrays of a normalised grammar (names as in :mod:`structgen.cfg.earley`)."""

    def __init__(self, cfg: CFG, dfas: dict, max_lexer_states: int):
        nts = list(cfg.rules)
        terms = sorted({s for alts in cfg.rules.values() for rhs in alts for s in rhs if s in cfg.terminals})
        self.nt_names, self.term_names = nts, terms
        nt_id = {n: i for i, n in enumerate(nts)}
        NN = len(nts)
        sym = dict(nt_id)
        sym.update({t: NN + i for i, t in enumerate(terms)})
        dr_next, dr_lhs, dr0 = [], [], []
        rule_of_dr = []
        for a in nts:
            firsts = []
            for rhs in cfg.rules[a]:
                firsts.append(len(dr_next))
                for s in rhs:
                    dr_next.append(sym[s])
                    dr_lhs.append(nt_id[a])
                    rule_of_dr.append((a, rhs))
                dr_next.append(-1)
                dr_lhs.append(nt_id[a])
                rule_of_dr.append((a, rhs))
            dr0.append(firsts)
        self.NN = NN
        self.dr_next = np.array(dr_next, np.int32)
        self.dr_lhs = np.array(dr_lhs, np.int32)
        self.nt_ptr = np.zeros(NN + 1, np.int32)
        np.cumsum([len(f) for f in dr0], out=self.nt_ptr[1:])
        self.nt_dr0 = np.array([x for f in dr0 for x in f], np.int32)
        nullable = set()
        changed = True
        while changed:
            changed = False
            for a, alts in cfg.rules.items():
                if a not in nullable and any(all(s in nullable for s in rhs) for rhs in alts):
                    nullable.add(a)
                    changed = True
        self.nullable = np.array([n in nullable for n in nts], np.uint8)
        self.start_nt = nt_id[cfg.start]
        final = []
        for r in range(self.nt_ptr[self.start_nt], self.nt_ptr[self.start_nt + 1]):
            d = self.nt_dr0[r]
            while dr_next[d] != -1:
                d += 1
            final.append(d)
        self.final_dr = np.array(final, np.int32)
        # lexer: concatenated DFAs over raw bytes
        offs, total = [], 0
        for t in terms:
            offs.append(total)
            total += dfas[t].n_states
        if total > max_lexer_states:
            raise LimitExceeded(f"lexer DFAs have {total} states", "max_lexer_states", max_lexer_states)
        trans = np.full((max(total, 1), 256), -1, np.int32)
        gacc = np.zeros(max(total, 1), np.uint8)
        gterm = np.zeros(max(total, 1), np.int32)
        for i, t in enumerate(terms):
            d: ByteDFA = dfas[t]
            o = offs[i]
            full = d.transitions[:, d.byte_class]  # [n_states, 256]
            trans[o:o + d.n_states] = np.where(full >= 0, full + o, -1)
            gacc[o:o + d.n_states] = d.accepting
            gterm[o:o + d.n_states] = i
        self.trans = trans
        self.gacc = gacc
        self.gout = (trans >= 0).any(axis=1).astype(np.uint8)
        self.gterm = gterm
        self.tstart = np.array(offs, np.int32)
        self.n_dr = len(dr_next)
        self.n_lexer_states = total

    def args(self):
        return (self.NN, self.dr_next, self.dr_lhs, self.nt_ptr, self.nt_dr0, self.nullable, self.final_dr,
                self.trans, self.gacc, self.gout, self.gterm, self.tstart)


def _drop_epsilon(d: ByteDFA) -> ByteDFA:
    """The same language without the empty string: a fresh non-accepting start state."""
    n = d.n_states
    tr = np.empty((n + 1, d.n_classes), np.int32)
    tr[1:] = np.where(d.transitions >= 0, d.transitions + 1, -1)
    tr[0] = tr[1 + d.start]
    acc = np.concatenate([[False], d.accepting])
    return ByteDFA(d.byte_class.copy(), tr, acc, 0)


def normalise(cfg: CFG, max_states: int = 100_000):
    """(normalised CFG, {terminal: ByteDFA}) — see the module docstring.  Cached on
    disk per grammar (:mod:`structgen.cfg.diskcache`, keyed by the pickled CFG)."""
    cfg.validate()
    try:
        key = pickle.dumps((cfg.start, cfg.rules, cfg.terminals, cfg.ignore, max_states), protocol=4)
    except Exception:  # an IR node that does not pickle: no disk cache
        key = None
    hit = diskcache.load("norm", key) if key is not None else None
    if isinstance(hit, tuple) and len(hit) == 2:
        norm, dfas = hit
        norm.positions = dict(cfg.positions)
        if cfg.start in cfg.positions:
            norm.positions[_START] = cfg.positions[cfg.start]
        return norm, dfas
    res = _normalise(cfg, max_states)
    if key is not None:
        diskcache.store("norm", key, res)
    return res


def _normalise(cfg: CFG, max_states: int):
    if _START in cfg.rules or _TRAIL in cfg.terminals:
        raise GrammarError(f"names {_START!r}/{_TRAIL!r} are reserved")
    ign = [cfg.terminals[n] for n in cfg.ignore]
    ign_node = ir.alt(*ign) if ign else None
    used = {s for alts in cfg.rules.values() for rhs in alts for s in rhs if s in cfg.terminals}
    dfas, rename, empty = {}, {}, set()
    rules = {a: list(alts) for a, alts in cfg.rules.items()}
    terminals = {}
    for t in sorted(used):
        node = cfg.terminals[t]
        if ign_node is not None:
            node = ir.seq(ir.repeat(ign_node, 0, None), node)
        d = build(node, max_states=max_states)
        if d.is_empty():
            empty.add(t)
            terminals[t] = node
            continue
        if d.accepting[d.start]:
            nz = _drop_epsilon(d)
            opt = f"{t}$opt"
            rename[t] = opt
            if bool((nz.transitions[0] >= 0).any()):
                name = f"{t}$nz"
                dfas[name] = nz
                terminals[name] = node
                rules[opt] = [(), (name,)]
            else:
                rules[opt] = [()]
        else:
            dfas[t] = d
            terminals[t] = node
    rules = {a: [tuple(rename.get(s, s) for s in rhs) for rhs in alts] for a, alts in rules.items()}
    start_alts = [(cfg.start,)]
    if ign_node is not None:
        dt = build(ir.repeat(ign_node, 1, None), max_states=max_states)
        if not dt.is_empty():
            dfas[_TRAIL] = _drop_epsilon(dt) if dt.accepting[dt.start] else dt
            terminals[_TRAIL] = ir.repeat(ign_node, 1, None)
            start_alts.append((cfg.start, _TRAIL))
    rules[_START] = start_alts
    n = CFG(_START, rules, terminals, [], dict(cfg.positions))
    if cfg.start in cfg.positions:
        n.positions[_START] = cfg.positions[cfg.start]
    try:
        n = trim(n, empty)
    except GrammarError as e:
        raise GrammarError(f"the grammar's language is empty: start rule {cfg.start!r} derives no finite "
                           f"sentence", *cfg.where(cfg.start)) from None
    return n, dfas


class CompiledCFG:
    """A CFG compiled for one vocabulary.  ``matcher()`` hands out matchers.

    ``max_cache_bytes`` bounds the per-grammar cache of mask parts
    (:class:`~structgen.cfg.cache.MaskCache`); past it the cache starts afresh.
    """

    def __init__(self, cfg: CFG, vocab, *, max_states: int = 100_000, max_lexer_states: int = 200_000,
                 max_cache_bytes: int = 256 << 20):
        t0 = time.perf_counter()
        self.cfg = cfg
        self.vocab = vocab
        norm, dfas = normalise(cfg, max_states)
        self.norm = norm
        self.tables = Tables(norm, dfas, max_lexer_states)
        self._args = self.tables.args()
        trie = vocab.trie
        self.trie = trie
        self._trie_args = (trie.node_byte, trie.node_depth, trie.node_end, trie.tok_ptr, trie.tok_ids)
        self.words = (int(vocab.logits_width) + 31) // 32
        self.eos = np.asarray(vocab.eos_ids, np.int64)
        self._eos_set = set(self.eos.tolist())
        self.cache = MaskCache(max_cache_bytes)
        self.compile_seconds = time.perf_counter() - t0

    def free_lexer(self):
        """``(trans[S, 256], zeros[S], out[S])``: a DFA of the prefixes of any sequence of
        lexemes, ignoring the parser (built on first use).  Tokens below a boundary that
        it rejects can never be allowed, so :mod:`structgen.cfg.mask` leaves them out of
        the "everything below is allowed already" test.  Accepts every byte string
        when the DFA would be too large."""
        fl = getattr(self, "_free_lexer", None)
        if fl is None:
            from ..errors import StructgenError

            nodes = [self.norm.terminals[t] for t in self.tables.term_names]
            try:
                if not nodes:
                    raise LimitExceeded("no terminals", "free lexer", 0)
                d = build(ir.repeat(ir.alt(*nodes), 1, None), max_states=4096)
                full = d.transitions[:, d.byte_class]
                trans = np.ascontiguousarray(full, dtype=np.int32)
            except StructgenError:
                trans = np.zeros((1, 256), np.int32)  # one state looping on every byte
            n = trans.shape[0]
            fl = self._free_lexer = (trans, np.zeros(n, np.uint8), (trans >= 0).any(axis=1).astype(np.uint8))
        return fl

    def matcher(self):
        from .matcher import CFGMatcher

        return CFGMatcher(self)

    def __repr__(self) -> str:
        t = self.tables
        return (f"CompiledCFG({t.NN} nonterminals, {len(t.term_names)} terminals, {t.n_lexer_states} lexer "
                f"states, {self.compile_seconds * 1e3:.1f} ms)")


def compile_cfg(cfg: CFG, vocab, **limits) -> CompiledCFG:
    """Compile ``cfg`` against ``vocab`` (see :class:`CompiledCFG`)."""
    return CompiledCFG(cfg, vocab, **limits)
