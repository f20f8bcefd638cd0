"""Limits and the deterministic work budget of automaton construction.

Everything here is shared by the builder (:mod:`.build`) and the products (:mod:`.product`,
:mod:`.ops`), which is why it is a module of its own (no import cycle between them).

- :class:`Limits`: the state bound (``max_states``), the deadline (``time_limit``) and the
  NFA size bound of one build; ``check_time()`` raises, ``too_many(what)`` makes the error.
- :class:`WorkBudget` / :func:`work_budget`: a bound on construction work in *cells* that
  depends neither on the clock nor on the caches.  Builds in progress are a per-thread stack of
  frames (:func:`frames`, :func:`open_frame`, :func:`close_frame`); :func:`spend` charges the
  innermost, :func:`reuse` / :func:`replay` charge a cached automaton's recorded cost, and
  :func:`recording` records what a block cost for a cache of derived results.
- :func:`state_cap`: the state bound of one construction, the budget's remainder included.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from ..errors import LimitExceeded


class Limits:
    """The bounds of one build: ``max_states`` per construction, a deadline from ``time_limit``
    (seconds, None: none) and ``max_nfa_states`` for the intermediate NFA."""

    def __init__(self, max_states, time_limit, max_nfa_states):
        self.max_states = int(max_states)
        self.time_limit = time_limit
        self.deadline = None if time_limit is None else time.perf_counter() + float(time_limit)
        self.max_nfa_states = int(max_nfa_states)

    def check_time(self):
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise LimitExceeded(f"automaton construction took longer than {self.time_limit} s",
                                limit="time_limit", value=self.time_limit)

    def too_many(self, what: str):
        return LimitExceeded(f"{what} needs more than {self.max_states} DFA states",
                             limit="max_states", value=self.max_states)


# --------------------------------------------------------------- deterministic work budget
class WorkBudget:
    """A bound on automaton construction work that depends neither on the clock nor on the caches.

    Work is counted in *cells*: NFA states plus DFA states x byte classes for a subset construction,
    product states x joint classes for a product, states x classes for a minimisation (a million
    cells are about 25-40 ms).  Every automaton :func:`.build.build_node` makes records what it cost and what
    it was made from (``dfa._work``, a small tree of ints); a cache hit charges that tree as if it
    were built again, and each automaton (IR node) is charged once per budget.  An ``ir.Embed`` is
    paid for by whoever built it: using one is free, and every process-wide cache of embedded nodes
    (the JSON Schema compiler's free-form values, encoded strings...) records the work of its cold
    path (:func:`recording`) and :func:`replay` s it on a hit.  The same schema is therefore cut at
    the same point on every run, cold or warm, whatever the machine's load.
    """

    def __init__(self, cells: int):
        self.limit = int(cells)
        self.used = 0
        self.seen: set = set()

    def exceeded(self) -> LimitExceeded:
        return LimitExceeded(f"automaton construction needs more than {self.limit} work cells",
                             limit="work_budget", value=self.limit)

    def left(self) -> int:
        return self.limit - self.used


_TLS = threading.local()  # .meter: the active WorkBudget; .frames: the builds in progress


@contextmanager
def work_budget(cells: int):
    """Bound the automaton work done inside the ``with`` block (this thread) by ``cells``; going
    past it raises :class:`LimitExceeded` with ``limit="work_budget"``.  Yields the budget
    (``used`` tells what was spent)."""
    prev = getattr(_TLS, "meter", None)
    meter = _TLS.meter = WorkBudget(cells)
    try:
        yield meter
    finally:
        _TLS.meter = prev


@contextmanager
def unmetered():
    """Work charged to nobody: process-wide caches that no schema owns (UTF-8 class fragments,
    the kernels' warm-up)."""
    prev_m, prev_f = getattr(_TLS, "meter", None), getattr(_TLS, "frames", None)
    _TLS.meter, _TLS.frames = None, []
    try:
        yield
    finally:
        _TLS.meter, _TLS.frames = prev_m, prev_f


class Frame:
    __slots__ = ("h", "own", "kids", "meter")

    def __init__(self, h, meter):
        self.h, self.own, self.kids, self.meter = h, 0, [], meter


def frames() -> list:
    f = getattr(_TLS, "frames", None)
    if f is None:
        f = _TLS.frames = []
    return f


def open_frame(h) -> Frame:
    """Start accounting for the build of the node hashed ``h`` (None: never cached)."""
    meter = getattr(_TLS, "meter", None)
    if meter is not None and h is not None:
        if h in meter.seen:
            meter = None  # charged already in this budget (built before and evicted)
        else:
            meter.seen.add(h)
    fr = Frame(h, meter)
    frames().append(fr)
    return fr


def close_frame(fr: Frame) -> tuple:
    fs = frames()
    if fs and fs[-1] is fr:
        fs.pop()
    tree = (fr.h, fr.own, tuple(fr.kids))
    if fs:
        fs[-1].kids.append(tree)
    return tree


def abandon_frame(fr: Frame) -> None:
    """Drop ``fr`` (a build that raised) without charging its parent."""
    fs = frames()
    if fs and fs[-1] is fr:
        fs.pop()


def spend(cells: int) -> None:
    """Charge ``cells`` to the innermost build in progress (and to the active budget)."""
    fs = frames()
    if not fs:
        return
    fr = fs[-1]
    fr.own += int(cells)
    m = fr.meter
    if m is not None:
        m.used += int(cells)
        if m.used > m.limit:
            raise m.exceeded()


def reuse(tree) -> None:
    """An automaton taken from a cache: charge what building it cost (once per budget)."""
    if tree is None:
        return
    fs = frames()
    if fs:
        fs[-1].kids.append(tree)
    meter = getattr(_TLS, "meter", None)
    if meter is None:
        return
    todo = [tree]
    while todo:
        h, own, kids = todo.pop()
        if h is not None:
            if h in meter.seen:
                continue
            meter.seen.add(h)
        meter.used += own
        todo.extend(kids)
    if meter.used > meter.limit:
        raise meter.exceeded()


class Record:
    tree = None


@contextmanager
def recording():
    """Record what the builds inside the block cost, for a cache of results derived from built
    automata (``ir.Embed`` nodes): on a hit, :func:`replay` the recorded ``.tree`` so that the
    budget is charged as if the cold path had run.  Using an embedded automaton is free (its
    producer paid), so every process-wide cache of embedded nodes must do this."""
    rec = Record()
    fr = Frame(None, getattr(_TLS, "meter", None))
    fs = frames()
    fs.append(fr)
    try:
        yield rec
    finally:
        if fs and fs[-1] is fr:
            fs.pop()
    rec.tree = (None, fr.own, tuple(fr.kids))
    if fs:
        fs[-1].kids.append(rec.tree)


def replay(tree) -> None:
    """Charge a tree recorded by :func:`recording` (or a built DFA's ``_work``) to the active
    budget, each automaton once per budget, as building it would have."""
    reuse(tree)


def state_cap(limits: Limits, k: int):
    """``(max states, budget-bound?)`` for a construction of ``k`` classes in the current build."""
    fs = frames()
    m = fs[-1].meter if fs else None
    if m is None:
        return limits.max_states, False
    by_budget = max(m.left(), 0) // max(k, 1) + 1
    return (by_budget, True) if by_budget < limits.max_states else (limits.max_states, False)
