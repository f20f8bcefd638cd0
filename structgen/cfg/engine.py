"""CompiledCFG: a :class:`CFG` compiled into lexer DFAs and Earley tables, met with a vocabulary.

Normalisation (exact, see :mod:`structgen.cfg.grammar` for the language):

- each terminal ``T`` used in rules becomes the regular language ``IGN* T`` where
  ``IGN`` are lexemes of the ignore terminals, each its terminal's longest match
  (:func:`~structgen.cfg.terminals.after_ignores`), and the start rule gets an
  optional trailing ``IGN+``: ignores between lexemes become part of lexemes;
- a terminal that matches the empty string is split into ``ε | T+`` (lexemes
  always consume at least one byte), one that matches nothing is dropped;
- right recursion of the tail form (``s ::= "" | X s``) becomes left recursion
  (:func:`~structgen.cfg.grammar.right_to_left`), linear in an Earley chart;
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
from numba import njit

from .. import caching
from ..automaton import ir
from ..automaton.build import limit_scope, warm_up as build_warm_up
from ..automaton.dfa import ByteDFA
from ..errors import GrammarError, LimitExceeded
from ..index.slices import NO_SLICING, Slicing, char_runs
from ..kernels.packed import Packed
from ..vocab.vocabulary import Vocabulary
from . import diskcache
from . import mask as mk
from .cache import MaskCache, start_background_prefill
from .grammar import CFG, literal_terminal, right_to_left, trim
from .matcher import CFGMatcher
from .split import SPLIT_STATES, split_terminal, splittable
from .terminals import after_ignores, build, literal_dfa as _literal_dfa, literal_set_dfa
from .terminals import drop_epsilon as _drop_epsilon, with_epsilon as _with_epsilon

_START = "$start"
_NORM_VERSION = 4  # in the disk cache's key: 2 = ignored lexemes are longest matches, 3 = + right recursion, 4 = + grouped splits
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
        dr_next, dr_lhs, dr0, n_alts = [], [], [], []
        for i, a in enumerate(nts):
            alts = cfg.rules[a]
            n_alts.append(len(alts))
            for rhs in alts:
                dr0.append(len(dr_next))
                dr_next.extend([sym[s] for s in rhs])
                dr_next.append(-1)
                dr_lhs.extend([i] * (len(rhs) + 1))
        self.NN = NN
        self.dr_next = np.array(dr_next, np.int32)
        self.dr_lhs = np.array(dr_lhs, np.int32)
        self.nt_ptr = np.zeros(NN + 1, np.int32)
        np.cumsum(n_alts, out=self.nt_ptr[1:])
        self.nt_dr0 = np.array(dr0, np.int32)
        self.nullable = np.zeros(NN, np.uint8)  # filled below, with the FOLLOW bytes (_grammar_sets)
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
        trans = np.full((max(total, 1), 256), -1, np.int32) if total == 0 else np.empty((total, 256), np.int32)
        gacc = np.zeros(max(total, 1), np.uint8)
        gterm = np.zeros(max(total, 1), np.int32)
        gout = np.zeros(max(total, 1), np.uint8)
        for i, t in enumerate(terms):
            d: ByteDFA = dfas[t]
            o = offs[i]
            _place(trans, gout, o, np.ascontiguousarray(d.transitions, dtype=np.int32),
                   np.ascontiguousarray(d.byte_class, dtype=np.int64))
            gacc[o:o + d.n_states] = d.accepting
            gterm[o:o + d.n_states] = i
        self.trans = trans
        self.gacc = gacc
        self.gout = gout
        self.gterm = gterm
        self.tstart = np.array(offs, np.int32)
        self.n_dr = len(dr_next)
        self.n_lexer_states = total
        T = len(terms)
        starts = np.packbits(trans[self.tstart] >= 0, axis=1, bitorder="little") if T else np.zeros((0, 32), np.uint8)
        fol = np.zeros((max(T, 1), 4), np.uint64)
        _grammar_sets(NN, self.dr_next, self.dr_lhs, self.nt_dr0, np.ascontiguousarray(starts).view(np.uint64),
                      self.nullable, fol)
        self.follow = np.unpackbits(fol.view(np.uint8), axis=1, bitorder="little")
        # per lexer state, the bytes it steps on (256 bits): a lexeme predicted at a boundary list
        # none of whose children's bytes it takes is dropped before its cache entry is looked up
        self.gfirst = np.ascontiguousarray(np.packbits(trans >= 0, axis=1, bitorder="little")).view(np.uint64)

    def args(self):
        return (self.NN, self.dr_next, self.dr_lhs, self.nt_ptr, self.nt_dr0, self.nullable, self.final_dr,
                self.trans, self.gacc, self.gout, self.gterm, self.tstart)


@njit(cache=True, nogil=True)
def _grammar_sets(NN, dr_next, dr_lhs, alt0, starts, nullable, follow):
    """NULLABLE and the FOLLOW bytes of a grammar in its flat form (:class:`Tables`), each the least
    solution of its inclusions by a worklist over the dependency edges: linear in the grammar's
    size.  Writes ``nullable[a]`` (nonterminal ``a`` derives the empty string) and ``follow[t]``
    (256 bits as 4 words: can a lexeme start with byte ``x`` right after one of terminal ``t`` in
    some sentential form -- the first bytes, ``starts[u]``, of the terminals ``u`` in FOLLOW(t);
    ignored terminals are folded into every terminal by :func:`normalise`).  The mask kernel only
    starts lexemes at such bytes after a lexeme boundary inside a token."""
    R = alt0.shape[0]
    D = dr_next.shape[0]
    # alternatives: r spans dr positions alt0[r] .. end[r] (dr_next[end[r]] == -1)
    end = np.empty(R, np.int64)
    for r in range(R):
        d = alt0[r]
        while dr_next[d] != -1:
            d += 1
        end[r] = d
    # NULLABLE: per alternative its symbols not yet known nullable (terminals never are)
    left = np.empty(R, np.int64)
    use_n = np.zeros(NN + 1, np.int64)
    for r in range(R):
        left[r] = end[r] - alt0[r]
        for d in range(alt0[r], end[r]):
            x = dr_next[d]
            if x < NN:
                use_n[x + 1] += 1
    for a in range(NN):
        use_n[a + 1] += use_n[a]
    uses = np.empty(use_n[NN], np.int64)
    fill = use_n[:NN].copy()
    for r in range(R):
        for d in range(alt0[r], end[r]):
            x = dr_next[d]
            if x < NN:
                uses[fill[x]] = r
                fill[x] += 1
    stack = np.empty(NN + R + 1, np.int64)
    sp = 0
    for r in range(R):
        if left[r] == 0:
            stack[sp] = dr_lhs[alt0[r]]
            sp += 1
    while sp > 0:
        sp -= 1
        a = stack[sp]
        if nullable[a]:
            continue
        nullable[a] = 1
        for k in range(use_n[a], use_n[a + 1]):
            r = uses[k]
            left[r] -= 1
            if left[r] == 0:
                stack[sp] = dr_lhs[alt0[r]]
                sp += 1
    # FIRST bytes: FIRST(A) >= FIRST(B) for every B that can start A (after a nullable prefix)
    first = np.zeros((NN, 4), np.uint64)
    esrc = np.empty(D, np.int64)
    edst = np.empty(D, np.int64)
    ne = 0
    for r in range(R):
        a = dr_lhs[alt0[r]]
        for d in range(alt0[r], end[r]):
            x = dr_next[d]
            if x >= NN:
                for w in range(4):
                    first[a, w] |= starts[x - NN, w]
                break
            esrc[ne] = x
            edst[ne] = a
            ne += 1
            if not nullable[x]:
                break
    _close(first, esrc[:ne], edst[:ne], NN)
    # FOLLOW bytes: FOLLOW(X) >= FIRST(what follows X in a rule), >= FOLLOW(A) where the rest is nullable
    fol = np.zeros((NN, 4), np.uint64)
    tsrc = np.empty(D, np.int64)
    tdst = np.empty(D, np.int64)
    nt = 0
    ne = 0
    trailer = np.zeros(4, np.uint64)
    for r in range(R):
        a = dr_lhs[alt0[r]]
        trailer[:] = 0
        tail = True
        for d in range(end[r] - 1, alt0[r] - 1, -1):
            x = dr_next[d]
            if x >= NN:
                i = x - NN
                for w in range(4):
                    follow[i, w] |= trailer[w]
                    trailer[w] = starts[i, w]
                if tail:
                    tsrc[nt] = a
                    tdst[nt] = i
                    nt += 1
                tail = False
            else:
                for w in range(4):
                    fol[x, w] |= trailer[w]
                if tail:
                    esrc[ne] = a
                    edst[ne] = x
                    ne += 1
                if nullable[x]:
                    for w in range(4):
                        trailer[w] |= first[x, w]
                else:
                    for w in range(4):
                        trailer[w] = first[x, w]
                    tail = False
    _close(fol, esrc[:ne], edst[:ne], NN)
    for k in range(nt):
        for w in range(4):
            follow[tdst[k], w] |= fol[tsrc[k], w]


@njit(cache=True, nogil=True)
def _close(val, src, dst, N):
    """``val[dst] |= val[src]`` for every edge, to the least fixpoint (a worklist over CSR edges)."""
    ptr = np.zeros(N + 1, np.int64)
    for k in range(src.shape[0]):
        ptr[src[k] + 1] += 1
    for a in range(N):
        ptr[a + 1] += ptr[a]
    out = np.empty(src.shape[0], np.int64)
    fill = ptr[:N].copy()
    for k in range(src.shape[0]):
        out[fill[src[k]]] = dst[k]
        fill[src[k]] += 1
    queued = np.zeros(N, np.uint8)
    stack = np.empty(N, np.int64)
    sp = 0
    for a in range(N):
        if ptr[a + 1] > ptr[a]:
            queued[a] = 1
            stack[sp] = a
            sp += 1
    while sp > 0:
        sp -= 1
        a = stack[sp]
        queued[a] = 0
        for k in range(ptr[a], ptr[a + 1]):
            b = out[k]
            changed = False
            for w in range(4):
                v = val[b, w] | val[a, w]
                if v != val[b, w]:
                    val[b, w] = v
                    changed = True
            if changed and queued[b] == 0 and ptr[b + 1] > ptr[b]:
                queued[b] = 1
                stack[sp] = b
                sp += 1


@njit(cache=True, nogil=True)
def _place(trans, gout, o, tr, bc):
    """Write the DFA ``tr`` (per byte class ``bc``) at rows ``o..`` of the 256-column table
    ``trans`` with its states shifted by ``o``; ``gout[o + s]`` = state s has a transition."""
    for s in range(tr.shape[0]):
        any_out = 0
        for b in range(256):
            t = tr[s, bc[b]]
            if t >= 0:
                trans[o + s, b] = t + o
                any_out = 1
            else:
                trans[o + s, b] = -1
        gout[o + s] = any_out


# (body key, prefix) -> prefixed DFA, or (body DFA, prefixed DFA); bounded for the garbage collector's
# sake (see structgen.automaton.build's caches)
_CHAINED = caching.LRU(1024, name="cfg.chained")


def _prefixed_build(node: ir.Node, max_states: int) -> ByteDFA:
    """``build(node)``, composed directly when ``node`` is ``Repeat(C, 0, k) body`` (a bounded run
    of an ASCII class before a body, as the JSON Schema grammar's whitespace prefixes) and the
    body cannot start with a byte of ``C``: a chain of ``k`` states in front of the body's DFA,
    instead of a subset construction per terminal.  Same language, trimmed (as small as the
    builder's DFA in the tests).  Results are kept in a process-wide LRU keyed by the body node,
    or by the identity of an embedded DFA (the builder's cache shares those across grammars)."""
    if not (isinstance(node, ir.Seq) and len(node.items) >= 2):
        return build(node, max_states=max_states)
    rep = node.items[0]
    if not (isinstance(rep, ir.Repeat) and rep.min == 0 and rep.max is not None and 0 < rep.max <= 64
            and isinstance(rep.item, ir.CharSet) and rep.item.ranges and rep.item.ranges[-1][1] < 0x80):
        return build(node, max_states=max_states)
    rest = node.items[1:]
    embed = rest[0].dfa if len(rest) == 1 and isinstance(rest[0], ir.Embed) and rest[0].dfa.start == 0 else None
    # keys of ints and strings where possible (a literal body, the prefix by its ranges): the
    # collector stops walking such tuples, and a literal entry is then one object, its DFA
    body_key = ("dfa", id(embed)) if embed is not None else ir.literal_text(ir.Seq(rest)) or rest
    key = (body_key, rep.item.ranges, rep.max)
    d = _CHAINED.get(key)
    if d is not None and embed is not None:  # (body DFA, prefixed DFA): the id may be reused
        d = d[1] if d[0] is embed else None
    if d is not None:
        if d.n_states > max_states:
            raise LimitExceeded(f"a terminal has {d.n_states} lexer states", "max_states", max_states)
        return d
    d = _chained_literal(rest, rep.item.ranges, rep.max, max_states) if embed is None else None
    if d is None:
        # an embedded DFA is trimmed already (minimal when it comes from the builder)
        body = embed if embed is not None else _literal_dfa(rest) or build(ir.seq(*rest), max_states=max_states)
        d = _chain_before(body, rep.item.ranges, rep.max, max_states) or build(node, max_states=max_states)
    _CHAINED.put(key, d if embed is None else (embed, d))  # an embedded body is kept alive with its id
    return d


_RUNS: dict = {}  # ranges -> bool[256]


def _chained_literal(items, ranges, k: int, max_states: int):
    """:func:`_chain_before` of a literal (``items`` all one-code-point CharSets: keys and
    punctuation, most of a JSON Schema grammar's terminals) built in one go: ``C{0,k}`` then the
    literal's bytes.  None when ``items`` is not such a literal or it starts with a byte of ``C``.
    States ``0..k-1``: blanks read; ``k + j``: ``j`` bytes of the literal read.  Byte classes: the
    literal's bytes one each, then the other bytes of ``C``, then the rest."""
    text = ir.literal_text(ir.Seq(tuple(items)))
    if not text:
        return None
    data = np.frombuffer(text.encode("utf-8"), np.uint8)
    key = tuple(ranges)
    run = _RUNS.get(key)
    if run is None:
        run = np.zeros(256, bool)
        for a, b in ranges:
            run[a:b + 1] = True
        _RUNS[key] = run
    if run[data[0]]:
        return None
    L = data.shape[0]
    if k + L + 1 > max_states:
        raise LimitExceeded(f"a terminal has {k + L + 1} lexer states", "max_states", max_states)
    used = np.unique(data)
    nu = used.shape[0]
    mark = np.zeros(256, bool)
    mark[used] = True
    blanks = run & ~mark
    has_blanks = bool(blanks.any())
    nc = nu + has_blanks + (nu + int(np.count_nonzero(blanks)) < 256)
    bc = np.full(256, nc - 1, np.int32)
    bc[used] = np.arange(nu, dtype=np.int32)
    if has_blanks:
        bc[blanks] = nu
    tr = np.full((k + L + 1, nc), -1, np.int32)
    tr[k + np.arange(L), bc[data]] = np.arange(k + 1, k + L + 1, dtype=np.int32)
    if k:
        tr[:k, bc[data[0]]] = k + 1
        run_cls = np.unique(bc[run])
        tr[:k, run_cls] = np.arange(1, k + 1, dtype=np.int32)[:, None]
    acc = np.zeros(k + L + 1, bool)
    acc[k + L] = True
    return ByteDFA(bc, tr, acc, 0)


def _chain_before(d: ByteDFA, ranges, k: int, max_states: int):
    """The DFA of ``C{0,k} L(d)`` for ASCII ranges ``C`` and a DFA ``d`` starting at state 0, or
    None when ``d`` is empty or its start steps on a byte of ``C`` (the chain would not be
    deterministic)."""
    run = np.zeros(256, bool)
    for a, b in ranges:
        run[a:b + 1] = True
    if d.start != 0 or d.is_empty() or (d.transitions[0, d.byte_class[run]] >= 0).any():
        return None
    n = d.n_states
    if n + k > max_states:
        raise LimitExceeded(f"a terminal has {n + k} lexer states", "max_states", max_states)
    # byte classes: the body's, split by membership in C
    keys, cls = np.unique(d.byte_class.astype(np.int64) * 2 + run, return_inverse=True)
    body = d.transitions[:, keys // 2]  # [n, C']
    # states 0..k-1: the chain (i blanks read); state k + s: body state s
    tr = np.empty((k + n, keys.shape[0]), np.int32)
    tr[k:] = np.where(body >= 0, body + k, -1)
    tr[:k] = tr[k]
    tr[:k, np.flatnonzero(keys % 2)] = (np.arange(k, dtype=np.int32) + 1)[:, None]
    acc = np.concatenate([np.full(k, bool(d.accepting[0])), d.accepting])
    return ByteDFA(cls.astype(np.int32).reshape(256), tr, acc, 0)


def normalise(cfg: CFG, max_states: int = 100_000):
    """(normalised CFG, {terminal: ByteDFA}) — see the module docstring.  Cached on
    disk per grammar (:mod:`structgen.cfg.diskcache`, keyed by the pickled CFG), except a grammar
    with embedded DFAs (the JSON Schema compiler's): its terminals are built already and only
    composed here, and the disk cache cost more than it saves -- pickling the key (every embedded
    DFA), hashing it and storing the result took as long as normalising (110 ms of a 120 ms
    normalisation on a 69,000-state schema; half of it on small ones), and a hit saved less."""
    cfg.validate()
    if _embeds(cfg):
        return _normalise(cfg, max_states)
    try:
        key = pickle.dumps((_NORM_VERSION, cfg.start, cfg.rules, cfg.terminals, cfg.ignore, max_states),
                           protocol=4)
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


def _embeds(cfg: CFG) -> bool:
    """Does a terminal embed a built DFA (at its top level)?"""
    return any(isinstance(n, ir.Embed) or (isinstance(n, ir.Seq) and any(isinstance(i, ir.Embed) for i in n.items))
               for n in cfg.terminals.values())


def _named(e: LimitExceeded, cfg: CFG, t: str) -> LimitExceeded:
    """``e`` with the rule that uses terminal ``t`` (and its position) in its message."""
    base = t.split("$")[0]
    owner = base if base in cfg.rules else next(
        (a for a, alts in cfg.rules.items() for rhs in alts if base in rhs), None)
    what = base if owner is None else owner
    line, col = cfg.where(what) if what in cfg.positions else cfg.where(base)
    at = f" at line {line}, column {col}" if line is not None else ""
    kind = "rule" if owner is not None and base not in cfg.terminals else "terminal"
    if owner is not None and base in cfg.terminals and not base.startswith("__"):
        label = f"terminal {base!r} (in rule {owner!r}{at})"
    else:
        label = f"{kind} {what!r}{at}" if kind == "terminal" else f"rule {what!r}{at}"
    return LimitExceeded(f"{label}: {e.message}", e.limit, e.value)


def _normalise(cfg: CFG, max_states: int):
    if _START in cfg.rules or _TRAIL in cfg.terminals:
        raise GrammarError(f"names {_START!r}/{_TRAIL!r} are reserved")
    ign = [cfg.terminals[n] for n in cfg.ignore]
    ign_node = ir.alt(*ign) if ign else None
    used = {s for alts in cfg.rules.values() for rhs in alts for s in rhs if s in cfg.terminals}
    dfas, rename, empty = {}, {}, set()
    rules = {a: list(alts) for a, alts in cfg.rules.items()}
    terminals = {}
    ign_dfas = [(n, build(cfg.terminals[n], max_states=max_states)) for n in cfg.ignore] if ign else []
    ign_dfas = [(n, d if not d.accepting[d.start] else _drop_epsilon(d)) for n, d in ign_dfas if not d.is_empty()]
    source = dict(cfg.terminals)  # grows with the parts of split terminals
    todo = sorted(used)
    while todo:
        t = todo.pop()
        node = source[t]
        if ign_node is not None:
            node = ir.seq(ir.repeat(ign_node, 0, None), node)
            try:
                d = build(source[t], max_states=max_states)
            except LimitExceeded as e:
                raise _named(e, cfg, t) from None
            if not d.is_empty() and ign_dfas:
                body = _drop_epsilon(d) if d.accepting[d.start] else d
                if not body.is_empty():
                    body = after_ignores(ign_dfas, body, max_states, t)
                d = _with_epsilon(body) if d.accepting[d.start] else body
        else:
            try:
                # without ignored terminals, a terminal past SPLIT_STATES is split into parser symbols
                # (the same language: a lexeme boundary may fall anywhere between sentences' parts);
                # a smaller max_states is the user's bound on every terminal, kept as such
                split = max_states >= SPLIT_STATES and splittable(node)
                d = _prefixed_build(node, SPLIT_STATES if split else max_states)
            except LimitExceeded as e:
                if not split:
                    raise _named(e, cfg, t) from None
                rules[t] = [split_terminal(t, node, source, rules, todo)]
                continue
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
    if rename:  # (most JSON Schema grammars have no terminal matching the empty text)
        rules = {a: [tuple(rename.get(s, s) for s in rhs) for rhs in alts] for a, alts in rules.items()}
    rules = right_to_left(rules, keep={cfg.start})
    start_alts = [(cfg.start,)]
    if ign_dfas:
        dt = after_ignores(ign_dfas, None, max_states)
        if not dt.is_empty():
            dfas[_TRAIL] = dt
            terminals[_TRAIL] = ir.repeat(ign_node, 1, None)
            start_alts.append((cfg.start, _TRAIL))
    rules[_START] = start_alts
    n = CFG(_START, rules, terminals, [], dict(cfg.positions))
    if cfg.start in cfg.positions:
        n.positions[_START] = cfg.positions[cfg.start]
    try:
        n = trim(n, empty)
    except GrammarError:
        raise GrammarError(f"the grammar's language is empty: start rule {cfg.start!r} derives no finite "
                           f"sentence", *cfg.where(cfg.start)) from None
    return n, dfas


class CompiledCFG:
    """A CFG compiled for one vocabulary.  ``matcher()`` hands out matchers.

    ``max_cache_bytes`` bounds the per-grammar cache of mask parts
    (:class:`~structgen.cfg.cache.MaskCache`); past it the cache starts afresh.
    ``prefill_seconds``: time spent computing mask parts that first masks would otherwise pay
    for (:meth:`MaskCache.prefill`): up to ``PREFILL_SYNC_SECONDS`` of it before returning (five of
    the seven shipped grammars' prefills finish there), the rest in a background thread
    (``prefill_thread``, None when not needed); masks computed meanwhile are exact and wait for
    one cache entry at most.  Worth it for a grammar compiled once and used many times
    (:func:`structgen.compile` gives Lark and GBNF grammars ``PREFILL_SECONDS``), not for a
    one-off JSON Schema, whose time to first mask it would lengthen.
    ``skip_covered`` (default: ``prefill_seconds > 0``): new boundary lists record their tokens
    with the byte-pair free lexer (:meth:`free_lexer`), so a mask skips the first visits below a
    list whose tokens it allows already -- the chains of lists after every byte of a word in a
    grammar where words may follow words (csv.lark: 228 cache entries and 69 lists over four
    walks, 78 and 22 with it).  Its table costs a pass over the lexer tables, which a one-off
    JSON Schema does not pay (its lists then record every token below them).
    ``slicing`` (:class:`~structgen.index.slices.Slicing`): its first slice is the character set
    of the run tokens (:meth:`runs`); masks do not depend on it.
    """

    def __init__(self, cfg: CFG, vocab, *, max_states: int = 100_000, max_lexer_states: int = 200_000,
                 max_cache_bytes: int = 256 << 20, prefill_seconds: float = 0.0, slicing: Slicing = NO_SLICING,
                 skip_covered: bool | None = None):
        _warm_up()
        t0 = time.perf_counter()
        self.cfg = cfg
        self.vocab = vocab
        self.slicing = slicing
        norm, dfas = normalise(cfg, max_states)
        self.norm = norm
        self.tables = Tables(norm, dfas, max_lexer_states)
        # the mask kernels' arguments (records of :mod:`.mask`; ``_args``/``_trie_args``: older spellings)
        self.grammar_arrays = self._args = mk.GrammarArrays(*self.tables.args())
        trie = vocab.trie
        self.trie = trie
        self.trie_arrays = self._trie_args = mk.TrieArrays(trie.node_byte, trie.node_depth, trie.node_end,
                                                           trie.tok_ptr, trie.tok_ids)
        self.words = (int(vocab.logits_width) + 31) // 32
        self.eos = np.asarray(vocab.eos_ids, np.int64)
        self._eos_set = set(self.eos.tolist())
        self.cache = MaskCache(trie, (int(vocab.logits_width) + 31) // 32, max_cache_bytes)
        if skip_covered is None:
            skip_covered = prefill_seconds > 0
        # built once: the same arrays every mask
        self.lexer_aids = mk.LexerAids(self.free_lexer() if skip_covered else _ANY_BYTES, *self.runs())
        # the same arrays as one table (:data:`structgen.cfg.mask.PACKED_GRAMMAR`), for the packed mask kernel
        named = {**self.grammar_arrays._asdict(), **self.trie_arrays._asdict(), "follow": self.tables.follow,
                 **self.lexer_aids._asdict(), "gfirst": self.tables.gfirst}
        self.packed_grammar = Packed(tuple(named[k] for k in mk.PACKED_GRAMMAR))
        self.prefill_thread = None
        # shared by this grammar's matchers (see CFGMatcher): the mask words at the start, EOS
        # aside, once one of them has computed it; and the sizes their buffers had to grow to
        self.start_mask: np.ndarray | None = None
        self.buffer_sizes: dict = {}
        if prefill_seconds > 0:
            # the first part before returning, so that the first masks do not wait on the
            # thread for the lock; the rest in the background
            sync = min(prefill_seconds, PREFILL_SYNC_SECONDS)
            t1 = time.perf_counter()
            self.cache.prefill(self, sync)
            rest = prefill_seconds - (time.perf_counter() - t1)
            if rest > 0 and not self.cache.prefilled:
                self.prefill_thread = start_background_prefill(self.cache, self, rest)
        self.compile_seconds = time.perf_counter() - t0

    def free_lexer(self):
        """``trans[257, 256]``: the byte-pair DFA of :func:`byte_pair_lexer`
        (made on first use): a DFA of a superset of the sequences of lexemes, parser ignored,
        closed under factors.  Tokens below a boundary list that it rejects can never be allowed,
        so :mod:`structgen.cfg.mask` leaves them out of the list's "everything below is allowed
        already" test (any such superset is sound there: a larger one only skips fewer lists),
        and finds those it takes in one pass with one state per node
        (:func:`~.trie_walks.free_walk`)."""
        fl = getattr(self, "_pair_lexer", None)
        if fl is None:
            tb = self.tables
            fl = self._pair_lexer = byte_pair_lexer(tb.trans, tb.gacc, tb.gterm, tb.gfirst, tb.follow)
        return fl

    def runs(self):
        """``(chain, cum, impure, u_trans, u_accept, u_start)`` for the mask kernel: per lexer
        state its run budget (``-2`` until computed, see :func:`structgen.cfg.mask.chain_budget`)
        and the vocabulary's character runs of the first slice of ``slicing``
        (:func:`structgen.index.slices.char_runs`, built once per vocabulary; none without one)."""
        r = getattr(self, "_runs", None)
        if r is None:
            sl = self.slicing.slices
            cr = char_runs(self.vocab, sl[0].charset if sl else None)
            chain = np.full(self.tables.trans.shape[0], -2, np.int32)
            r = self._runs = (chain, cr.cum, cr.impure, cr.u_trans, cr.u_accept, np.int64(cr.u_start))
        return r

    def matcher(self):
        return CFGMatcher(self)

    def __repr__(self) -> str:
        t = self.tables
        return (f"CompiledCFG({t.NN} nonterminals, {len(t.term_names)} terminals, {t.n_lexer_states} lexer "
                f"states, {self.compile_seconds * 1e3:.1f} ms)")


# one state looping on every byte (a free lexer that rejects nothing), shared; never written
# (kept writeable: Numba compiles separate kernels for read-only arrays)
_ANY_BYTES = np.zeros((1, 256), np.int32)


def byte_pair_lexer(trans, gacc, gterm, gfirst, follow):
    """The free lexer of :meth:`CompiledCFG.free_lexer`: ``trans[257, 256]``, state 0 at the
    start and ``1 + x`` after byte ``x``, which steps on
    ``y`` when ``x y`` can be adjacent in a sequence of lexemes -- inside a lexeme (some lexer
    state entered on ``x`` leaves on ``y``) or across a boundary (``x`` ends a lexeme of a
    terminal that ``y`` can follow: its FOLLOW bytes).  Over the lexer tables of
    :class:`Tables` (``gfirst``: the bytes each state leaves on, packed)."""
    ft = np.empty((257, 256), np.int32)
    _byte_pairs(trans, gacc, gterm, gfirst, follow, ft)
    return ft


@njit(cache=True, nogil=True)
def _byte_pairs(trans, gacc, gterm, gfirst, follow, ft):
    """Fill ``ft`` of :func:`byte_pair_lexer`."""
    NG = trans.shape[0]
    row = np.empty((NG, 4), np.uint64)  # per state: the bytes after one that enters it
    for s in range(NG):
        for w in range(4):
            row[s, w] = gfirst[s, w]
        if gacc[s]:
            for y in range(256):
                if follow[gterm[s], y]:
                    row[s, y >> 6] |= np.uint64(1) << np.uint64(y & 63)
    pairs = np.zeros((256, 4), np.uint64)
    for p in range(NG):
        for x in range(256):
            s = trans[p, x]
            if s >= 0:
                for w in range(4):
                    pairs[x, w] |= row[s, w]
    for y in range(256):
        ft[0, y] = y + 1
    for x in range(256):
        for y in range(256):
            ft[1 + x, y] = y + 1 if (pairs[x, y >> 6] >> np.uint64(y & 63)) & np.uint64(1) else -1


PREFILL_SECONDS = 0.05
PREFILL_SYNC_SECONDS = 0.015  # of which spent inside compile

_WARM = False


def _warm_up() -> None:
    """Load every mask kernel once per process (Numba's on-disk cache costs milliseconds per
    function on first use), so that no first mask of a user's grammar pays for it."""
    global _WARM
    if _WARM:
        return
    _WARM = True
    try:
        # Lark's grammar parser (its LALR tables: 120 ms), for the grammars our faster reader
        # leaves to Lark (%import, templates): the tiny grammar below no longer builds it
        from lark.load_grammar import _get_parser

        _get_parser()
    except Exception:  # (a private helper: a Lark without it builds its parser on first use)
        pass
    literal_set_dfa((ir.literal("ab"), ir.literal("b")))  # its minimiser's kernel (acyclic_blocks)
    vocab = Vocabulary.from_bytes([b"a", b"b", b"ab", b" ", b"ba ", b"a b", None], eos_ids=[6])
    # start: "a" NAME (" " NAME)*  with  NAME: /[ab]+/
    name = ir.repeat(ir.CharSet.of([(0x61, 0x62)]), 1, None)
    cfg = CFG("start", {"start": [("A", "NAME", "rest")], "rest": [(), ("SP", "NAME", "rest")]},
              {"A": literal_terminal("a"), "SP": literal_terminal(" "), "NAME": name})
    cg = CompiledCFG(cfg, vocab, skip_covered=True)
    m = cg.matcher()
    for t in (0, 1, 3, 2):
        m.mask_words()
        m.advance(t)
    m.mask_words()
    m.rollback(2)
    m.mask_words()
    cg.cache.prefill(cg, 1.0)
    snap = cg.cache.snap
    keys, vals = np.full(snap.ht_keys.shape[0] * 2, -1, np.int64), np.zeros(snap.ht_keys.shape[0] * 2, np.int32)
    mk.rehash(snap.ht_keys, snap.ht_vals, keys, vals)
    words = np.zeros(cg.words, np.uint32)
    mk.or_roots(np.zeros(1, np.int64), snap.ht_keys, snap.ht_vals, snap.ent_boff,
                snap.ent_bn, snap.bidx, snap.bval, words)


def compile_cfg(cfg: CFG, vocab, *, time_limit: float | None = None, **limits) -> CompiledCFG:
    """Compile ``cfg`` against ``vocab`` (see :class:`CompiledCFG`); ``time_limit`` (seconds, None:
    none) bounds the DFA builds of its terminals (:func:`~structgen.automaton.build.limit_scope`:
    :class:`LimitExceeded` with ``limit="time_limit"``)."""
    if time_limit is None:
        return CompiledCFG(cfg, vocab, **limits)
    build_warm_up()  # the kernels' loading before the clock starts
    _warm_up()
    with limit_scope(time_limit):
        return CompiledCFG(cfg, vocab, **limits)
