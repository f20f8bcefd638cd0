"""Product constructions on ByteDFAs, shared by the builder (``And`` / ``Not`` nodes) and
:mod:`.ops` (the public boolean operations).

``product(a, b, op, limits)`` is the reachable product (:func:`.kernels.product`) over the
joint byte classes of ``a`` and ``b``, unminimised: ``(trans, acc, byte_class)``; the state bound
is ``limits`` (and the active work budget, :func:`.limits.state_cap`).  ``intersect_dfas`` and
``difference_dfas`` minimise it (:func:`.minimize.canonical_dfa`), charging the work budget.
"""
from __future__ import annotations

import numpy as np

from . import kernels
from .dfa import ByteDFA
from .limits import Limits, frames, spend, state_cap
from .minimize import canonical_dfa


def joint_classes(a: ByteDFA, b: ByteDFA):
    """``(class of a, class of b, joint byte_class)`` per joint class of the two partitions."""
    key = a.byte_class.astype(np.int64) * 256 + b.byte_class.astype(np.int64)
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    # Number the joint classes by smallest byte (np.unique already sorts by key, which
    # is not byte order; the canonicaliser renumbers anyway).
    return (uniq // 256).astype(np.int64), (uniq % 256).astype(np.int64), inv.astype(np.int32)


def shared_classes(byte_classes) -> tuple:
    """``(byte_class, reps)`` of the coarsest partition of the bytes finer than each of
    ``byte_classes`` (256-entry class arrays): the joint class of every byte, and one
    representative byte per joint class (in class order)."""
    sig = np.stack([np.asarray(c) for c in byte_classes], axis=1)
    _, rep, bc = np.unique(sig, axis=0, return_index=True, return_inverse=True)
    return bc.reshape(256).astype(np.int32), [int(b) for b in rep]


def product(a: ByteDFA, b: ByteDFA, op: int, limits: Limits):
    """The reachable product of ``a`` and ``b`` under ``op`` (``kernels.OP_*``), trimmed of
    nothing: ``(trans, acc, byte_class)``."""
    ca, cb, bc = joint_classes(a, b)
    cap, by_budget = state_cap(limits, ca.shape[0])
    st, trans, acc = kernels.product(
        np.ascontiguousarray(a.transitions, np.int32), np.ascontiguousarray(a.accepting, np.bool_),
        np.ascontiguousarray(b.transitions, np.int32), np.ascontiguousarray(b.accepting, np.bool_),
        ca, cb, op, cap)
    if st == kernels.ST_LIMIT:
        if by_budget:
            raise frames()[-1].meter.exceeded()
        raise limits.too_many("the product construction")
    spend(trans.shape[0] * trans.shape[1])
    limits.check_time()
    return trans, acc, bc


def minimal(trans, acc, bc) -> ByteDFA:
    """The canonical minimal DFA of a product, its minimisation charged to the budget."""
    spend(trans.shape[0] * trans.shape[1])
    return canonical_dfa(trans, acc, bc)


def intersect_dfas(a: ByteDFA, b: ByteDFA, limits: Limits) -> ByteDFA:
    """Minimal DFA of L(a) ∩ L(b)."""
    return minimal(*product(a, b, kernels.OP_AND, limits))


def difference_dfas(a: ByteDFA, b: ByteDFA, limits: Limits) -> ByteDFA:
    """Minimal DFA of L(a) \\ L(b)."""
    return minimal(*product(a, b, kernels.OP_DIFF, limits))
