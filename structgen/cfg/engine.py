"""CompiledCFG: a :class:`CFG` compiled into lexer DFAs and Earley tables, met with a vocabulary.

Normalisation (exact, see :mod:`structgen.cfg.grammar` for the language):

- each terminal ``T`` used in rules becomes the regular language ``IGN* T`` where
  ``IGN`` is the union of the ignore terminals, and the start rule gets an
  optional trailing ``IGN+``: ignores between lexemes become part of lexemes;
- a terminal that matches the empty string is split into ``ε | T+`` (lexemes
  always consume at least one byte), one that matches nothing is dropped;
- unproductive and unreachable symbols are removed (an empty language raises
  :class:`GrammarError`).

The per-lexer-state mask parts (see :mod:`structgen.cfg.mask`) are cached on the
compiled grammar, so they are shared by every matcher of it.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from ..automaton import ir
from ..automaton.dfa import ByteDFA
from ..errors import GrammarError, LimitExceeded
from . import earley
from . import mask as mk
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
    """(normalised CFG, {terminal: ByteDFA}) — see the module docstring."""
    cfg.validate()
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
    """A CFG compiled for one vocabulary.  ``matcher()`` hands out matchers."""

    def __init__(self, cfg: CFG, vocab, *, max_states: int = 100_000, max_lexer_states: int = 200_000):
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
        self.parent = _parents(trie)
        self.words = (int(vocab.logits_width) + 31) // 32
        self.eos = np.asarray(vocab.eos_ids, np.int64)
        self._eos_set = set(self.eos.tolist())
        self._lex_cache: dict = {}
        self._blists: list = [np.zeros(1, np.int32)]  # id 0: the root
        self._lock = threading.Lock()
        self.compile_seconds = time.perf_counter() - t0

    def matcher(self):
        from .matcher import CFGMatcher

        return CFGMatcher(self)

    # -- mask parts that do not depend on the parse stack, cached per grammar ------
    def lex_below(self, bl: int, g: int):
        """``(bits, bl2)`` for a lexeme in lexer state ``g`` starting at every node of the
        boundary list ``bl`` (0 = the trie root): the tokens it keeps alive, and the id
        of the list of nodes where it can end with bytes left over (-1: none)."""
        key = (bl, g)
        hit = self._lex_cache.get(key)
        if hit is not None:
            return hit
        tb = self.tables
        stack = np.zeros(self.trie.max_depth + 2, np.int32)
        cap = 1024
        while True:
            words = np.zeros(self.words, np.uint32)
            out = np.empty(cap, np.int32)
            if bl == 0:
                nb = mk.lex_walk(g, tb.trans, tb.gacc, tb.gout, *self._trie_args, stack, words, out)
            else:
                nb = mk.lex_walk_below(self._blists[bl], g, tb.trans, tb.gacc, tb.gout, *self._trie_args,
                                       stack, words, out)
            if nb >= 0:
                break
            cap *= 4
        with self._lock:
            bl2 = -1
            if nb:
                bl2 = len(self._blists)
                self._blists.append(np.unique(out[:nb]))
            res = (_pack(words), bl2)
            self._lex_cache[key] = res
        return res

    def __repr__(self) -> str:
        t = self.tables
        return (f"CompiledCFG({t.NN} nonterminals, {len(t.term_names)} terminals, {t.n_lexer_states} lexer "
                f"states, {self.compile_seconds * 1e3:.1f} ms)")


def _pack(words: np.ndarray):
    """A bit set as dense words, or as (word indices, word bits) when sparse."""
    nz = np.flatnonzero(words)
    if nz.size * 4 > words.size:
        return words
    return (nz.astype(np.intp), words[nz])


def or_into(words: np.ndarray, bits) -> None:
    """``words |= bits`` for either representation of :func:`_pack`."""
    if isinstance(bits, np.ndarray):
        np.bitwise_or(words, bits, out=words)
    elif bits[0].size:
        words[bits[0]] |= bits[1]


_PARENTS: dict = {}


def _parents(trie):
    key = id(trie)
    hit = _PARENTS.get(key)
    if hit is not None and hit[0] is trie:
        return hit[1]
    p = mk.trie_parents(trie.node_depth)
    _PARENTS[key] = (trie, p)
    return p


def compile_cfg(cfg: CFG, vocab, **limits) -> CompiledCFG:
    """Compile ``cfg`` against ``vocab`` (see :class:`CompiledCFG`)."""
    return CompiledCFG(cfg, vocab, **limits)
