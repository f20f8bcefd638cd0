"""A grammar terminal's lookaheads that see past its match: the lexeme's end as a marker byte.

A lookahead in a terminal sees the text after the lexeme, up to the end of the input (Lark's
dynamic lexers match a terminal's regex against the whole text).  :func:`split_at_marker` reads
the pattern lowered with the continuation ``MARK .*``: ``MARK`` is byte ``0xFF``, never in UTF-8,
standing where the lexeme ends, and the lookahead languages let it through anywhere
(:func:`marker_transparent`, :func:`marker_complement`).  In the minimal DFA of that language the
states reached by ``MARK`` split the lexemes into variants: (the lexemes that reach state ``q``,
the rests of the input allowed after them = the language of ``q``).  Exact: a lexeme ``w`` with
rest ``r`` matches in context iff ``w MARK r`` is in the language, by construction of the
continuation.
"""
from __future__ import annotations

import numpy as np

from ...automaton import ir, ops
from ...automaton.build import DEFAULT_MAX_STATES, build_dfa, embedded
from ...automaton.dfa import ByteDFA
from ...automaton.minimize import canonical_dfa

MARK_BYTE = 0xFF


def _marker_dfa() -> ByteDFA:
    bc = np.zeros(256, np.int32)
    bc[MARK_BYTE] = 1
    return canonical_dfa(np.array([[-1, 1], [-1, -1]], np.int32), np.array([False, True]), bc)


#: the marker, one byte standing for the end of the lexeme
MARK = ir.Embed(_marker_dfa())


def _with_marker_column(d: ByteDFA, column: np.ndarray):
    """``(transitions, byte classes)`` of ``d`` with ``column`` as the marker byte's moves (its
    own class: a new column, or its old one if no other byte shares it)."""
    trans = np.array(d.transitions, np.int32)
    bc = np.array(d.byte_class, np.int32)
    m = int(bc[MARK_BYTE])
    if int((bc == m).sum()) == 1:
        trans[:, m] = column
        return trans, bc
    bc[MARK_BYTE] = trans.shape[1]
    return np.hstack([trans, np.asarray(column, np.int32)[:, None]]), bc


def marker_transparent(node: ir.Node, max_states: int = DEFAULT_MAX_STATES) -> ir.Node:
    """``node``'s language with the marker allowed anywhere (a loop on ``MARK_BYTE`` at every
    state): a lookahead's view, which the lexeme's end does not interrupt."""
    d = build_dfa(node, max_states=max_states)
    trans, bc = _with_marker_column(d, np.arange(d.n_states, dtype=np.int32))
    return embedded(canonical_dfa(trans, d.accepting, bc))


def marker_complement(node: ir.Node, max_states: int = DEFAULT_MAX_STATES) -> ir.Node:
    """Every byte string not in :func:`marker_transparent` of ``node`` (the view of a negative
    lookahead; intersected with the continuation, which keeps the text UTF-8)."""
    d = build_dfa(marker_transparent(node, max_states), max_states=max_states)
    n, k = d.transitions.shape
    trans = np.vstack([np.where(d.transitions < 0, n, d.transitions), np.full((1, k), n, np.int32)])
    acc = np.append(~np.asarray(d.accepting, bool), True)
    return embedded(canonical_dfa(trans.astype(np.int32), acc, d.byte_class))


def split_at_marker(d: ByteDFA) -> list:
    """``[(lexeme DFA, rest DFA or None)]`` of the DFA of ``lexeme MARK rest`` (one marker per
    string); ``None`` where every rest is allowed."""
    n = d.n_states
    after = np.asarray(d.transitions)[:, int(d.byte_class[MARK_BYTE])]
    plain, bc = _with_marker_column(d, np.full(n, -1, np.int32))  # no marker inside a lexeme or a rest
    out = []
    anything = ops.utf8_star()
    for q in sorted({int(t) for t in after if t >= 0}):
        lexemes = canonical_dfa(plain, after == q, bc)
        order = np.arange(n)
        order[0], order[q] = q, 0  # state q first: the rest DFA starts there
        rank = np.argsort(order)
        moved = np.where(plain[order] < 0, -1, rank[np.maximum(plain[order], 0)]).astype(np.int32)
        rest = canonical_dfa(moved, np.asarray(d.accepting, bool)[order], bc)
        out.append((lexemes, None if ops.equivalent(rest, anything) else rest))
    return out
