"""A matcher's history as a tree of immutable steps: what makes rollback, fork and
snapshot/restore exact and cheap.

Each accepted step is a :class:`Step` node pointing at its parent; the matcher holds the node
of its current point.  ``rollback(n)`` walks ``n`` parents, ``fork()`` shares the node (nodes
never change) and a snapshot is the node itself, so it stays valid after any rollback: the
branch it names lives as long as someone holds it.  A matcher whose state lives partly in
append-only buffers (a parse chart, a key pool) restores a node on another branch by replaying
the steps from the nearest shared node (:func:`path_from_shared`), where the buffers still
agree.  All roots (the start, again after ``reset``) stand for the same state.
"""
from __future__ import annotations

__all__ = ["Step", "root", "ancestor", "is_ancestor", "path_from_shared"]


class Step:
    """One point of a history: ``depth`` steps from a root; ``state`` (what the matcher needs
    to be back here, immutable) and ``data`` (the input of the step into it, for replay)."""

    __slots__ = ("parent", "depth", "state", "data")

    def __init__(self, parent: "Step | None", state, data=None):
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.state = state
        self.data = data

    def child(self, state, data=None) -> "Step":
        return Step(self, state, data)


def root(state) -> Step:
    """A fresh root (the start of the constraint)."""
    return Step(None, state)


def ancestor(node: Step, n: int) -> Step:
    """The node ``n`` steps above ``node`` (``0 <= n <= node.depth``)."""
    for _ in range(n):
        node = node.parent
    return node


def is_ancestor(a: Step, b: Step) -> bool:
    """Whether ``a`` is ``b`` or above it on the same branch."""
    return b.depth >= a.depth and ancestor(b, b.depth - a.depth) is a


def path_from_shared(current: Step, target: Step) -> tuple[Step, list[Step]]:
    """``(shared, path)``: the deepest node both ``current`` and ``target`` descend from (a root
    of ``target``'s tree when they share none: roots are equivalent) and the nodes from below it
    down to ``target``, in order."""
    path = []
    a, b = current, target
    while a.depth > b.depth:
        a = a.parent
    while b.depth > a.depth:
        path.append(b)
        b = b.parent
    while a is not b and b.parent is not None:
        path.append(b)
        a, b = a.parent, b.parent
    path.reverse()
    return b, path
