"""Boolean and sequential operations on ByteDFAs (for the JSON Schema compiler).

All results are minimal, trimmed, canonical ByteDFAs (see :mod:`.minimize`).

- ``intersect(a, b)``, ``union(a, b)``, ``difference(a, b)``: reachable product
  construction (:func:`.kernels.product`) over the joint byte classes.
- ``complement(a)``: valid UTF-8 strings not in ``a`` (``UTF8* \\ L(a)``), so the
  result never accepts malformed UTF-8.
- ``concat(a, b)``: through the NFA path (epsilon from ``a``'s accepting states).
- ``is_empty(a)``, ``equivalent(a, b)``: equivalence is emptiness of the symmetric
  difference, decided on the product without minimising it.
"""
from __future__ import annotations

import numpy as np

from . import ir, kernels
from .build import DEFAULT_MAX_STATES, build_node
from .dfa import ByteDFA
from .limits import Limits
from .minimize import canonical_dfa
from .product import difference_dfas, intersect_dfas, product


def _limits(max_states, time_limit=None):
    return Limits(max_states, time_limit, 1 << 62)


def intersect(a: ByteDFA, b: ByteDFA, max_states: int = DEFAULT_MAX_STATES) -> ByteDFA:
    """L(a) ∩ L(b)."""
    return intersect_dfas(a, b, _limits(max_states))


def union(a: ByteDFA, b: ByteDFA, max_states: int = DEFAULT_MAX_STATES) -> ByteDFA:
    """L(a) ∪ L(b)."""
    return canonical_dfa(*product(a, b, kernels.OP_OR, _limits(max_states)))


def difference(a: ByteDFA, b: ByteDFA, max_states: int = DEFAULT_MAX_STATES) -> ByteDFA:
    """L(a) \\ L(b)."""
    return difference_dfas(a, b, _limits(max_states))


def utf8_star() -> ByteDFA:
    """All valid UTF-8 strings (including the empty one)."""
    return build_node(ir.Repeat(ir.ANY_CHAR, 0, None), _limits(DEFAULT_MAX_STATES))


def complement(a: ByteDFA, max_states: int = DEFAULT_MAX_STATES) -> ByteDFA:
    """Valid UTF-8 strings not in L(a)."""
    return difference_dfas(utf8_star(), a, _limits(max_states))


def concat(a: ByteDFA, b: ByteDFA, max_states: int = DEFAULT_MAX_STATES) -> ByteDFA:
    """L(a) · L(b)."""
    return build_node(ir.Seq((ir.Embed(a), ir.Embed(b))), _limits(max_states))


def is_empty(a: ByteDFA) -> bool:
    """True when L(a) is empty (trimmed DFAs: no accepting state)."""
    return not bool(np.asarray(a.accepting).any())


def equivalent(a: ByteDFA, b: ByteDFA, max_states: int = 10 * DEFAULT_MAX_STATES) -> bool:
    """True when L(a) == L(b) (emptiness of the symmetric difference)."""
    _, acc, _ = product(a, b, kernels.OP_XOR, _limits(max_states))
    return not bool(acc.any())


def longest_match_variants(d: ByteDFA) -> list:
    """``[(lexemes, rests)]``: the lexemes of ``d`` (canonical) split by the state they reach, each
    with the DFA of the rests of the input that do not make a longer lexeme (longest match)."""
    trans = np.asarray(d.transitions, np.int32)
    acc = np.asarray(d.accepting, bool)
    n, k = trans.shape
    out = []
    for q in np.flatnonzero(acc):
        q = int(q)
        lexemes = canonical_dfa(trans, np.arange(n) == q, d.byte_class)
        # rest checker from q: entering an accepting state is a longer lexeme (dead); leaving the
        # DFA settles the condition (state n: everything allowed)
        order = np.arange(n)
        order[0], order[q] = q, 0
        rank = np.argsort(order)
        t = trans[order]
        moved = np.where(t < 0, n, np.where(acc[np.maximum(t, 0)], -1, rank[np.maximum(t, 0)]))
        rest = np.vstack([moved, np.full((1, k), n)]).astype(np.int32)
        out.append((lexemes, canonical_dfa(rest, np.ones(n + 1, bool), d.byte_class)))
    return out
