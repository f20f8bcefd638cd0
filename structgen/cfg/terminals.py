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
from ..automaton.minimize import canonical_acyclic_dfa

def build(node: ir.Node, max_states: int = 100_000) -> ByteDFA:
    """A trimmed ByteDFA for ``node`` (a literal, or a union of literals, directly: keywords and
    operators are most of a grammar's terminals)."""
    d = literal_dfa(node.items if isinstance(node, ir.Seq) else (node,))
    if d is None and isinstance(node, ir.Alt):
        d = literal_set_dfa(node.items, max_states)
    return d if d is not None else build_dfa(node, max_states=max_states)


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
