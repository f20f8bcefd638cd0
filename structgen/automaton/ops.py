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
from .build import DEFAULT_MAX_STATES, _build, _frames, _Limits, _spend, _state_cap
from .dfa import ByteDFA
from .minimize import canonical_dfa


def _joint_classes(a: ByteDFA, b: ByteDFA):
    key = a.byte_class.astype(np.int64) * 256 + b.byte_class.astype(np.int64)
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    # Number the joint classes by smallest byte (np.unique already sorts by key, which
    # is not byte order; the canonicaliser renumbers anyway).
    return (uniq // 256).astype(np.int64), (uniq % 256).astype(np.int64), inv.astype(np.int32)


def _product(a: ByteDFA, b: ByteDFA, op: int, limits: _Limits):
    ca, cb, bc = _joint_classes(a, b)
    cap, by_budget = _state_cap(limits, ca.shape[0])
    st, trans, acc = kernels.product(
        np.ascontiguousarray(a.transitions, np.int32), np.ascontiguousarray(a.accepting, np.bool_),
        np.ascontiguousarray(b.transitions, np.int32), np.ascontiguousarray(b.accepting, np.bool_),
        ca, cb, op, cap)
    if st == kernels.ST_LIMIT:
        if by_budget:
            raise _frames()[-1].meter.exceeded()
        raise limits.too_many("the product construction")
    _spend(trans.shape[0] * trans.shape[1])
    limits.check_time()
    return trans, acc, bc


def _minimal(trans, acc, bc):
    _spend(trans.shape[0] * trans.shape[1])
    return canonical_dfa(trans, acc, bc)


def _intersect(a, b, limits):
    return _minimal(*_product(a, b, kernels.OP_AND, limits))


def _difference(a, b, limits):
    return _minimal(*_product(a, b, kernels.OP_DIFF, limits))


def _limits(max_states, time_limit=None):
    return _Limits(max_states, time_limit, 1 << 62)


def intersect(a: ByteDFA, b: ByteDFA, max_states: int = DEFAULT_MAX_STATES) -> ByteDFA:
    """L(a) ∩ L(b)."""
    return _intersect(a, b, _limits(max_states))


def union(a: ByteDFA, b: ByteDFA, max_states: int = DEFAULT_MAX_STATES) -> ByteDFA:
    """L(a) ∪ L(b)."""
    return canonical_dfa(*_product(a, b, kernels.OP_OR, _limits(max_states)))


def difference(a: ByteDFA, b: ByteDFA, max_states: int = DEFAULT_MAX_STATES) -> ByteDFA:
    """L(a) \\ L(b)."""
    return _difference(a, b, _limits(max_states))


def utf8_star() -> ByteDFA:
    """All valid UTF-8 strings (including the empty one)."""
    return _build(ir.Repeat(ir.ANY_CHAR, 0, None), _limits(DEFAULT_MAX_STATES))


def complement(a: ByteDFA, max_states: int = DEFAULT_MAX_STATES) -> ByteDFA:
    """Valid UTF-8 strings not in L(a)."""
    return _difference(utf8_star(), a, _limits(max_states))


def concat(a: ByteDFA, b: ByteDFA, max_states: int = DEFAULT_MAX_STATES) -> ByteDFA:
    """L(a) · L(b)."""
    return _build(ir.Seq((ir.Embed(a), ir.Embed(b))), _limits(max_states))


def is_empty(a: ByteDFA) -> bool:
    """True when L(a) is empty (trimmed DFAs: no accepting state)."""
    return not bool(np.asarray(a.accepting).any())


def equivalent(a: ByteDFA, b: ByteDFA, max_states: int = 10 * DEFAULT_MAX_STATES) -> bool:
    """True when L(a) == L(b) (emptiness of the symmetric difference)."""
    _, acc, _ = _product(a, b, kernels.OP_XOR, _limits(max_states))
    return not bool(acc.any())
