"""Terminals: IR -> trimmed ByteDFA.

``build`` wraps :func:`structgen.automaton.build.build_dfa` with direct constructions for the
terminals most grammars are made of: literals and chains of ASCII classes (:func:`literal_dfa`)
and unions of literals (:func:`literal_set_dfa`).  Regex text is the front ends' business
(:func:`structgen.frontends.lark.regex_to_ir`).
"""
from __future__ import annotations

import numpy as np

from ..automaton import ir
from ..automaton.build import build_dfa
from ..automaton.dfa import ByteDFA
from ..automaton.minimize import canonical_acyclic_dfa, canonical_dfa
from ..automaton.product import shared_classes
from ..errors import LimitExceeded, Unsupported

def build(node: ir.Node, max_states: int = 100_000) -> ByteDFA:
    """A trimmed ByteDFA for ``node`` (a literal, or a union of literals, directly: keywords and
    operators are most of a grammar's terminals)."""
    d = literal_dfa(node.items if isinstance(node, ir.Seq) else (node,))
    if d is None and isinstance(node, ir.Alt):
        d = literal_set_dfa(node.items, max_states)
    return d if d is not None else build_dfa(node, max_states=max_states)


def drop_epsilon(d: ByteDFA) -> ByteDFA:
    """The same language without the empty string: a fresh non-accepting start state."""
    return _fresh_start(d, False)


def with_epsilon(d: ByteDFA) -> ByteDFA:
    """The same language and the empty string (a fresh accepting start state)."""
    return _fresh_start(d, True)


def _fresh_start(d: ByteDFA, accepting: bool) -> ByteDFA:
    n = d.n_states
    tr = np.empty((n + 1, d.n_classes), np.int32)
    tr[1:] = np.where(d.transitions >= 0, d.transitions + 1, -1)
    tr[0] = tr[1 + d.start]
    acc = np.concatenate([[accepting], d.accepting])
    return ByteDFA(d.byte_class.copy(), tr, acc, 0)


def literal_set_dfa(items, max_states: int = 100_000):
    """The minimal DFA of a union of plain literals (``"+=" | "-=" | "="``, ``"int" | "char"``:
    operator and type-name terminals), or None: ``items`` not all literals (a CharSet of one code
    point, or a Seq of those; no lone surrogates).  Built as the trie of their UTF-8 bytes and
    minimised bottom-up: the builder's result (same arrays), without the subset construction and
    the per-character fragments it builds for each new CharSet (a quarter of a millisecond or
    more per terminal)."""
    words = []
    for it in items:
        seq = it.items if isinstance(it, ir.Seq) else (it,)
        cps = []
        for c in seq:
            if not (isinstance(c, ir.CharSet) and len(c.ranges) == 1 and c.ranges[0][0] == c.ranges[0][1]):
                return None
            cp = c.ranges[0][0]
            if 0xD800 <= cp <= 0xDFFF:
                return None
            cps.append(cp)
        if not cps:
            return None
        words.append("".join(map(chr, cps)).encode("utf-8"))
    if not words:
        return None
    kids = [{}]  # trie: state -> {byte: state}; 0 the root
    ends = set()
    for w in words:
        s = 0
        for b in w:
            t = kids[s].get(b)
            if t is None:
                t = kids[s][b] = len(kids)
                kids.append({})
            s = t
        ends.add(s)
    if len(kids) > max_states:
        return None  # (the builder reports the limit)
    used = sorted({b for w in words for b in w})
    bc = np.zeros(256, np.int32)
    bc[used] = np.arange(1, len(used) + 1, dtype=np.int32)
    src, byt, dst = [], [], []
    for s, out in enumerate(kids):
        for b, t in out.items():
            src.append(s)
            byt.append(b)
            dst.append(t)
    tr = np.full((len(kids), len(used) + 1), -1, np.int32)
    tr[np.array(src), bc[np.array(byt)]] = np.array(dst, np.int32)
    acc = np.zeros(len(kids), np.bool_)
    acc[sorted(ends)] = True
    return canonical_acyclic_dfa(tr, acc, bc)


def literal_dfa(items):
    """The minimal DFA of a fixed-length chain of byte sets, or None: ``items`` all CharSets,
    each one code point or ASCII only (a literal, a case-insensitive keyword ``"select"i``)."""
    sets = []
    for c in items:
        if not isinstance(c, ir.CharSet) or not c.ranges:
            return None
        if len(c.ranges) == 1 and c.ranges[0][0] == c.ranges[0][1]:
            for b in chr(c.ranges[0][0]).encode("utf-8", "surrogatepass"):
                sets.append(((b, b),))
        elif c.ranges[-1][1] < 0x80:
            sets.append(c.ranges)
        else:
            return None
    if not sets:
        return None
    L = len(sets)
    if all(len(r) == 1 and r[0][0] == r[0][1] for r in sets):  # a plain literal: one class per byte value
        data = np.array([r[0][0] for r in sets], np.uint8)
        used = np.unique(data)
        bc = np.zeros(256, np.int32)
        bc[used] = np.arange(1, used.shape[0] + 1)
        tr = np.full((L + 1, used.shape[0] + 1), -1, np.int32)
        tr[np.arange(L), bc[data]] = np.arange(1, L + 1)
        acc = np.zeros(L + 1, bool)
        acc[L] = True
        return ByteDFA(bc, tr, acc, 0)
    member = np.zeros((L, 256), bool)
    for i, ranges in enumerate(sets):
        for a, b in ranges:
            member[i, a:b + 1] = True
    # byte classes: bytes with the same membership at every position
    keys, bc = np.unique(np.packbits(member, axis=0).T, axis=0, return_inverse=True)
    bc = bc.reshape(256).astype(np.int32)
    tr = np.full((L + 1, keys.shape[0]), -1, np.int32)
    col_of = np.zeros((L, keys.shape[0]), bool)
    col_of[:, bc] = member  # a class is in set i iff its bytes are
    i_idx, c_idx = np.nonzero(col_of)
    tr[i_idx, c_idx] = i_idx + 1
    acc = np.zeros(L + 1, bool)
    acc[L] = True
    return ByteDFA(bc, tr, acc, 0)


def after_ignores(ignores, body, max_states: int = 100_000, body_name: str = "") -> ByteDFA:
    """The DFA of ``G body`` where ``G`` is a run of ignored lexemes, each the *longest* match of
    its terminal at its position (Lark's dynamic lexers match an ``%ignore``d terminal once,
    greedily: a ``#`` comment runs to the line end, whatever follows).  ``body=None``: the run
    alone, one lexeme or more (the trailing ignores at the end of the input, where nothing
    follows).

    ``ignores`` is a list of ``(name, ByteDFA)``; ``body`` a ByteDFA not accepting the empty
    string.  A subset construction over elements ``("X", i, q, guards)`` (inside ignore ``i`` at
    state ``q``), ``("J", guards, ended)`` (between lexemes) and ``("T", q, guards)`` (inside the
    body): a *guard* ``(i, g)`` is an ignored lexeme that ended at state ``g`` of its DFA; the
    bytes after it must never take ``g`` to an accepting state (that would be a longer match),
    and it is dropped when its DFA dies.  A guard still open where the body ends would constrain
    the *next* lexemes: :class:`Unsupported` (never for the usual whitespace and comment
    terminals, whose guards are settled by one byte).  States that are one body state without
    guards are the body's own states (appended as they are)."""
    dfas = [d for _, d in ignores]
    parts = dfas + ([body] if body is not None else [])
    bc, reps = shared_classes([d.byte_class for d in parts])
    K = len(reps)
    tabs = [(d.transitions, d.byte_class, d.accepting) for d in dfas]

    def guards_after(G, b):
        out = []
        for i, g in G:
            tr, cl, ac = tabs[i]
            g2 = int(tr[g, cl[b]])
            if g2 < 0:
                continue
            if ac[g2]:
                return None
            out.append((i, g2))
        return frozenset(out)

    def close(elems):
        out = set(elems)
        for e in elems:
            if e[0] == "X" and tabs[e[1]][2][e[2]]:
                out.add(("J", e[3] | {(e[1], e[2])}, True))
        return frozenset(out)

    nb = 0
    if body is not None:
        btr, bcl, bac = body.transitions, body.byte_class, body.accepting
        nb = body.n_states
    start = frozenset([("J", frozenset(), False)])
    index = {start: 0}
    order = [start]
    rows = []
    acc = []
    i = 0
    while i < len(order):
        S = order[i]
        i += 1
        row = np.full(K, -1, np.int64)
        a = False
        for e in S:
            if e[0] == "J" and body is None and e[2]:
                a = True
            elif e[0] == "T" and bac[e[1]]:
                if e[2]:
                    (gi, _), = sorted(e[2])[:1]
                    raise Unsupported(f"where the longest match of the ignored terminal {ignores[gi][0]} ends "
                                      f"depends on text after the terminal {body_name or 'that follows it'}",
                                      f"terminal {ignores[gi][0]}")
                a = True
        for c in range(K):
            b = reps[c]
            nxt = set()
            for e in S:
                if e[0] == "J":
                    G2 = guards_after(e[1], b)
                    if G2 is None:
                        continue
                    for j, (tr, cl, _) in enumerate(tabs):
                        s = int(tr[dfas[j].start, cl[b]])
                        if s >= 0:
                            nxt.add(("X", j, s, G2))
                    if body is not None:
                        s = int(btr[body.start, bcl[b]])
                        if s >= 0:
                            nxt.add(("T", s, G2))
                else:
                    G2 = guards_after(e[-1], b)
                    if G2 is None:
                        continue
                    if e[0] == "X":
                        tr, cl, _ = tabs[e[1]]
                        s = int(tr[e[2], cl[b]])
                        if s >= 0:
                            nxt.add(("X", e[1], s, G2))
                    else:
                        s = int(btr[e[1], bcl[b]])
                        if s >= 0:
                            nxt.add(("T", s, G2))
            if not nxt:
                continue
            if len(nxt) == 1:
                (e,) = nxt
                if e[0] == "T" and not e[2]:
                    row[c] = -2 - e[1]  # body state e[1] (placed after the head states)
                    continue
            T = close(nxt)
            k = index.get(T)
            if k is None:
                k = index[T] = len(order)
                order.append(T)
                if len(order) + nb > max_states:
                    raise LimitExceeded(f"an ignore-prefixed terminal has more than {max_states} lexer states",
                                       "max_states", max_states)
            row[c] = k
        rows.append(row)
        acc.append(a)
    H = len(order)
    trans = np.full((H + nb, K), -1, np.int64)
    head = np.array(rows, np.int64).reshape(H, K)
    trans[:H] = np.where(head <= -2, H + (-2 - head), head)
    accv = np.zeros(H + nb, bool)
    accv[:H] = acc
    if body is not None:
        bt = btr[:, bcl[np.array(reps)]]
        trans[H:] = np.where(bt >= 0, bt + H, -1)
        accv[H:] = bac
    return canonical_dfa(trans.astype(np.int32), accv, bc)
