"""ByteDFA: a deterministic automaton over bytes, the unit every kernel consumes.

Layout (flat numpy arrays, ready for ``@njit`` kernels):

- ``byte_class``: int32[256], byte -> class id in ``0..n_classes-1``.
- ``transitions``: int32[n_states, n_classes], next state or -1 (dead).
- ``accepting``: bool[n_states].
- ``start``: the start state (always 0 after construction).

Invariants kept by every constructor: the automaton is *trimmed* (every state
is reachable from the start and can reach an accepting state; transitions into
dead states are -1), so "the walk is still at a state >= 0" means "these bytes
are a prefix of some match".  An empty language is a DFA whose start state has
no transitions and is not accepting (the one exception to trimming).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(eq=False, slots=True, weakref_slot=True)
class ByteDFA:
    byte_class: np.ndarray
    transitions: np.ndarray
    accepting: np.ndarray
    start: int = 0
    # set by the builder: minimal and canonically numbered; what building it cost (see WorkBudget).
    # Slots, not a __dict__: process-wide caches hold thousands of DFAs, each one object fewer
    # for the garbage collector to walk.
    _canonical: bool = field(default=False, init=False, repr=False)
    _work: object = field(default=None, init=False, repr=False)

    @property
    def n_states(self) -> int:
        return int(self.transitions.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.transitions.shape[1])

    def step(self, state: int, byte: int) -> int:
        """The state after ``byte`` from ``state``, or -1."""
        if state < 0:
            return -1
        return int(self.transitions[state, self.byte_class[byte]])

    def walk(self, data: bytes, state: int | None = None) -> int:
        """The state after ``data``, or -1 as soon as the walk dies."""
        s = self.start if state is None else state
        tr, bc = self.transitions, self.byte_class
        for b in data:
            if s < 0:
                return -1
            s = int(tr[s, bc[b]])
        return s

    def fullmatch(self, data: bytes) -> bool:
        s = self.walk(data)
        return s >= 0 and bool(self.accepting[s])

    def is_prefix(self, data: bytes) -> bool:
        """True when ``data`` can still be extended to a match."""
        s = self.walk(data)
        return s >= 0 and (bool(self.accepting[s]) or bool((self.transitions[s] >= 0).any()))

    def is_empty(self) -> bool:
        return not bool(self.accepting.any())

    def __repr__(self) -> str:
        return f"ByteDFA(states={self.n_states}, classes={self.n_classes})"
