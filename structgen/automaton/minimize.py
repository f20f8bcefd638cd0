"""Minimisation and canonical form of byte DFAs.

:func:`canonical_dfa` takes any (partial, possibly untrimmed) DFA over byte classes
and returns the minimal, trimmed :class:`ByteDFA` of its language in a canonical
layout: states numbered in BFS order from the start, byte classes equal to the
coarsest partition of 0..255 the minimal automaton distinguishes, numbered by their
smallest byte.  Two DFAs of the same language therefore have identical arrays.

Minimisation is Hopcroft's algorithm (:func:`kernels.hopcroft`), O(k n log n), with
the partial DFA completed by a sink so that dead states are merged away as well.
"""
from __future__ import annotations

import numpy as np

from .dfa import ByteDFA
from .kernels import acyclic_blocks, column_groups, hopcroft, quotient, trim


def compress_classes(trans: np.ndarray, byte_class: np.ndarray):
    """Merge byte classes whose transition columns are identical.

    Returns ``(trans, byte_class)`` with classes renumbered by their smallest byte."""
    k = trans.shape[1]
    if k == 1:
        return trans, byte_class
    inv = column_groups(trans)
    # Order new classes by the smallest byte they contain.
    new_bc = inv[byte_class]
    present, first_byte = np.unique(new_bc, return_index=True)
    order = present[np.argsort(first_byte, kind="stable")]
    rank = np.empty(order.shape[0], np.int64)
    rank[order] = np.arange(order.shape[0])
    # Column of new class r = column of any old class c with inv[c] == order[r].
    rep_old = np.empty(order.shape[0], np.int64)
    rep_old[rank[inv]] = np.arange(k)
    out = np.ascontiguousarray(trans[:, rep_old])
    return out, rank[new_bc].astype(np.int32)


def canonical_dfa(trans: np.ndarray, acc: np.ndarray, byte_class: np.ndarray) -> ByteDFA:
    """The minimal trimmed ByteDFA of a DFA given as ``trans[n, k]``/``acc[n]``."""
    trans = np.ascontiguousarray(trans, dtype=np.int32)
    acc = np.ascontiguousarray(acc, dtype=np.bool_)
    trans, byte_class = compress_classes(trans, byte_class)
    blk, nb = hopcroft(trans, acc)
    t, a = quotient(trans, acc, blk, nb)
    t, byte_class = compress_classes(t, byte_class)
    dfa = _frozen(ByteDFA(np.ascontiguousarray(byte_class, np.int32), t, a))
    dfa._canonical = True  # canonical_dfa(dfa) would return the same arrays: callers may skip it
    return dfa


def canonical_acyclic_dfa(trans: np.ndarray, acc: np.ndarray, byte_class: np.ndarray) -> ByteDFA:
    """:func:`canonical_dfa` for a trimmed DFA that is usually acyclic (a finite language: a set of
    literals), minimised bottom-up in O(n k) (:func:`kernels.acyclic_blocks`); the same result.
    Falls back to Hopcroft when there is a cycle."""
    trans = np.ascontiguousarray(trans, dtype=np.int32)
    acc = np.ascontiguousarray(acc, dtype=np.bool_)
    trans, byte_class = compress_classes(trans, byte_class)
    blk, nb = acyclic_blocks(trans, acc)
    if nb < 0:
        return canonical_dfa(trans, acc, byte_class)
    t, a = quotient(trans, acc, blk, nb)
    t, byte_class = compress_classes(t, byte_class)
    dfa = _frozen(ByteDFA(np.ascontiguousarray(byte_class, np.int32), t, a))
    dfa._canonical = True
    return dfa


def is_canonical(dfa: ByteDFA) -> bool:
    """Was ``dfa`` made by :func:`canonical_dfa` (minimal, trimmed, canonically numbered)?"""
    return bool(getattr(dfa, "_canonical", False))


def trimmed_dfa(trans: np.ndarray, acc: np.ndarray, byte_class: np.ndarray) -> ByteDFA:
    """Trimmed but *not* minimised (for tests and diagnostics)."""
    t, a = trim(np.ascontiguousarray(trans, dtype=np.int32), np.ascontiguousarray(acc, np.bool_))
    return _frozen(ByteDFA(np.ascontiguousarray(byte_class, np.int32), t, a))


def _frozen(dfa: ByteDFA) -> ByteDFA:
    # Built DFAs are cached and shared: make accidental in-place edits fail loudly.
    for arr in (dfa.byte_class, dfa.transitions, dfa.accepting):
        arr.flags.writeable = False
    return dfa
