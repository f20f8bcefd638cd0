"""Limits and the deterministic work budget of automaton construction.

Everything here is shared by the builder (:mod:`.build`) and the products (:mod:`.product`,
:mod:`.ops`), which is why it is a module of its own (no import cycle between them).

- :class:`Limits`: the state bound (``max_states``), the deadline (``time_limit``), the
  NFA size bound and the memory bound (``max_memory``) of one build; ``check_time()`` raises,
  ``too_many(what)`` / ``too_big(what)`` make the errors.  :func:`limit_scope` sets a deadline and
  defaults for every build in a block.
- :class:`WorkBudget` / :func:`work_budget`: a bound on construction work in *cells* that
  depends neither on the clock nor on the caches.  Builds in progress are a per-thread stack of
  frames (:func:`frames`, :func:`open_frame`, :func:`close_frame`); :func:`spend` charges the
  innermost, :func:`reuse` / :func:`replay` charge a cached automaton's recorded cost, and
  :func:`recording` records what a block cost for a cache of derived results.
- :func:`state_cap`: the state bound of one construction, the budget's remainder included.
- :func:`check_seconds`, :func:`check_count`, :func:`check_known`: the checks of limit options
  where users pass them (``compile()``, the ``Grammar`` constructors), raising :class:`OptionError`.
"""
from __future__ import annotations

import math
import numbers
import threading
import time
from contextlib import contextmanager

from ..errors import LimitExceeded, OptionError

_TLS = threading.local()  # .meter: the active WorkBudget; .frames: the builds in progress; .scope


DEFAULT_MAX_NFA_STATES = 2_000_000
DEFAULT_MAX_MEMORY = 1 << 30  # bytes: one subset construction's NFA sets and DFA table


class Limits:
    """The bounds of one build: ``max_states`` per construction, a deadline from ``time_limit``
    (seconds, None: none), ``max_nfa_states`` for the intermediate NFA and ``max_memory`` (bytes)
    for the tables of one subset construction (its NFA sets, DFA transitions and hash table).

    Inside a :func:`limit_scope`, the deadline is the earlier of this build's and the scope's, and
    ``max_nfa_states`` / ``max_memory`` left at None take the scope's values (else the defaults)."""

    def __init__(self, max_states, time_limit, max_nfa_states=None, max_memory=None):
        sc = getattr(_TLS, "scope", None)
        self.max_states = int(max_states)
        self.time_limit = time_limit
        self.deadline = None if time_limit is None else time.perf_counter() + float(time_limit)
        if sc is not None and sc.deadline is not None and (self.deadline is None or sc.deadline < self.deadline):
            self.deadline, self.time_limit = sc.deadline, sc.time_limit
        if max_nfa_states is None:
            max_nfa_states = sc.max_nfa_states if sc is not None and sc.max_nfa_states is not None \
                else DEFAULT_MAX_NFA_STATES
        if max_memory is None:
            max_memory = sc.max_memory if sc is not None and sc.max_memory is not None else DEFAULT_MAX_MEMORY
        self.max_nfa_states = int(max_nfa_states)
        self.max_memory = int(max_memory)

    def check_time(self):
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise LimitExceeded(f"automaton construction took longer than {self.time_limit} s",
                                limit="time_limit", value=self.time_limit)

    def too_many(self, what: str):
        return LimitExceeded(f"{what} needs more than {self.max_states} DFA states",
                             limit="max_states", value=self.max_states)

    def too_big(self, what: str):
        return LimitExceeded(f"{what} needs more than {self.max_memory} bytes for its NFA state sets and "
                             f"DFA table", limit="max_memory", value=self.max_memory)


class Scope:
    __slots__ = ("deadline", "time_limit", "max_nfa_states", "max_memory")


@contextmanager
def limit_scope(time_limit=None, *, max_nfa_states=None, max_memory=None):
    """Bounds for every automaton built inside the ``with`` block (this thread) that does not set
    its own: ``time_limit`` seconds from now (nested scopes and a build's own ``time_limit`` keep
    the earliest deadline), ``max_nfa_states`` and ``max_memory`` for builds that leave them at
    None.  For callers above the builder that build many automata through layers that take only
    ``max_states`` (the grammar engine's terminals, a regex's possessive parts)."""
    prev = getattr(_TLS, "scope", None)
    sc = Scope()
    sc.deadline, sc.time_limit = (None, None) if time_limit is None else \
        (time.perf_counter() + float(time_limit), time_limit)
    if prev is not None and prev.deadline is not None and (sc.deadline is None or prev.deadline < sc.deadline):
        sc.deadline, sc.time_limit = prev.deadline, prev.time_limit
    sc.max_nfa_states = max_nfa_states if max_nfa_states is not None else getattr(prev, "max_nfa_states", None)
    sc.max_memory = max_memory if max_memory is not None else getattr(prev, "max_memory", None)
    _TLS.scope = sc
    try:
        yield sc
    finally:
        _TLS.scope = prev


def in_timed_scope() -> bool:
    """Is a :func:`limit_scope` with a deadline active (this thread)?"""
    sc = getattr(_TLS, "scope", None)
    return sc is not None and sc.deadline is not None


def check_scope_time() -> None:
    """Raise :class:`LimitExceeded` (``limit="time_limit"``) when the innermost
    :func:`limit_scope`'s deadline has passed (for loops above the builder)."""
    sc = getattr(_TLS, "scope", None)
    if sc is not None and sc.deadline is not None and time.perf_counter() > sc.deadline:
        raise LimitExceeded(f"construction took longer than {sc.time_limit} s", limit="time_limit",
                            value=sc.time_limit)


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


# ------------------------------------------------------------------ option checks at the edge
def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_seconds(value, name: str = "time_limit", who: str = "compile()"):
    """``value`` as a float number of seconds (None: no limit); :class:`OptionError` for anything
    but a finite number >= 0 (NaN would disable every comparison with the clock, ``inf`` is what
    None says)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise OptionError(f"{who}: {name} must be a number of seconds or None, not {type(value).__name__} "
                          f"{value!r}")
    v = float(value)
    if math.isnan(v) or v < 0:
        raise OptionError(f"{who}: {name} must be a number of seconds >= 0 or None, not {value!r}")
    if math.isinf(v):
        raise OptionError(f"{who}: {name}={value!r}; pass {name}=None for no limit")
    return v


def check_count(value, name: str, who: str = "compile()", minimum: int = 1, optional: bool = False):
    """``value`` as an int >= ``minimum`` (None allowed when ``optional``); else :class:`OptionError`."""
    if value is None and optional:
        return None
    if not _is_int(value):
        raise OptionError(f"{who}: {name} must be an int, not {type(value).__name__} {value!r}")
    if value < minimum:
        raise OptionError(f"{who}: {name} must be at least {minimum}, not {value!r}")
    return int(value)


def check_known(options: dict, allowed, who: str) -> None:
    """:class:`OptionError` naming every key of ``options`` (unexpected keyword arguments) and the
    options ``who`` takes, unless there are none."""
    if options:
        bad = ", ".join(map(repr, sorted(options)))
        raise OptionError(f"{who} has no option{'s' if len(options) > 1 else ''} {bad} "
                          f"(it takes {', '.join(sorted(allowed))})")
