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


def byte_set(dfa: ByteDFA):
    """The bytes of ``dfa`` when its language is a set of one-byte words (bool[256]), else None."""
    t, a = dfa.transitions, dfa.accepting
    if t.shape[0] != 2 or a[0] or not a[1] or (t[1] >= 0).any():
        return None
    return t[0][dfa.byte_class] == 1


def canonical_enclosed(opening, body: ByteDFA, closing):
    """The canonical DFA of ``S body C`` for byte sets ``opening`` = S and ``closing`` = C (bool[256];
    a JSON string: quote, content, quote) and a canonical ``body``, without a subset construction
    or a minimisation of the whole, when no accepting state of ``body`` steps on a byte of C (the
    closing byte then always ends the body); else None.

    Why the result is minimal: two states of ``body`` that some word ``w`` tells apart are told
    apart by ``w`` followed by a byte of C, and the state after the closing byte is the only final
    one; so the only state that may merge with another is the start, with a body state whose one
    way out is S to the body's start -- found here, and then the whole is minimised after all."""
    opening, closing = np.asarray(opening, bool), np.asarray(closing, bool)
    t, acc = np.asarray(body.transitions), np.asarray(body.accepting)
    if not opening.any() or not closing.any() or not acc.any() or not is_canonical(body):
        return None
    steps_out = t[acc][:, np.unique(body.byte_class[closing])]
    if (steps_out >= 0).any():
        return None
    # classes: the body's, split by membership of S and of C
    key = body.byte_class.astype(np.int64) * 4 + opening * 2 + closing
    _, first, cls = np.unique(key, return_index=True, return_inverse=True)
    k, n = first.shape[0], t.shape[0]
    cls = cls.astype(np.int32)
    trans = np.full((n + 2, k), -1, np.int32)
    inner = t[:, body.byte_class[first]]
    trans[1:n + 1] = np.where(inner >= 0, inner + 1, -1)
    trans[0, opening[first]] = 1 + body.start
    rows = np.flatnonzero(acc) + 1
    trans[np.ix_(rows, np.flatnonzero(closing[first]))] = n + 1
    final = np.zeros(n + 2, np.bool_)
    final[n + 1] = True
    start_like = (trans[1:n + 1] == trans[0]).all(axis=1) & ~acc
    if start_like.any():
        return canonical_dfa(trans, final, cls)
    trans, cls = compress_classes(trans, cls)
    ident = np.arange(n + 3, dtype=np.int64)  # every state its own block, the sink (n + 2) too
    t2, a2 = quotient(trans, final, ident, n + 3)
    t2, cls = compress_classes(t2, cls)
    dfa = _frozen(ByteDFA(np.ascontiguousarray(cls, np.int32), t2, a2))
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
