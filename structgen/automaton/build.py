"""IR -> minimal ByteDFA: the automaton builder.

Pipeline (each step a module of its own):

1. :mod:`.nfa` -- Thompson NFA over bytes (CharSets expanded to UTF-8 byte ranges,
   bounded repeats tiled with numpy), then the coarsest byte-class partition.
2. :func:`.kernels.subset_run` -- subset construction over byte classes in Numba,
   resumable so a time limit can be checked between chunks.
3. :mod:`.minimize` -- Hopcroft minimisation, trimming and a canonical numbering.

``And``/``Not`` are built from their children's DFAs with products
(:mod:`.ops`); ``Not(x)`` is the complement relative to valid UTF-8.

Results are cached per IR node (nodes are immutable and hashable) in a bounded LRU;
non-ASCII CharSets, which expand to many byte sequences, are cached on their own.
Built DFAs are read-only (their arrays are not writeable) because they are shared.

Limits: ``max_states`` bounds the DFA states created by any single subset
construction or product (:class:`LimitExceeded` with ``limit="max_states"``);
``time_limit`` (seconds) bounds the whole build (``limit="time_limit"``);
``max_nfa_states`` bounds the intermediate NFA.  :func:`work_budget` bounds all the
construction work done in a block by a deterministic count (:class:`WorkBudget`), which
the JSON Schema engine choice uses instead of a clock.

Shortcuts: a bounded repetition of a prefix code (an encoded character class, ``maxLength``)
is tiled from its item's DFA (:func:`_tile`) instead of a subset construction over the tiled
NFA; sub-trees of ``_SUBTREE_MIN`` IR nodes or more are built (and cached) as DFAs of their
own and embedded; :func:`embedded` wraps equal languages in one ``ir.Embed`` node, so that
IR built around them stays a cache key.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import numpy as np

from .. import caching
from ..errors import LimitExceeded
from . import ir, kernels
from .dfa import ByteDFA
from .minimize import canonical_dfa, is_canonical, trimmed_dfa
from .nfa import NFA, Builder, Fragment, charset_nfa, dfa_fragment, prepare

DEFAULT_MAX_STATES = 100_000
DEFAULT_MAX_NFA_STATES = 2_000_000
_CHUNK = 2048  # DFA states per kernel call when a time limit is in force


def _nbytes(value) -> int:
    if isinstance(value, ByteDFA):
        return int(value.transitions.nbytes)
    if isinstance(value, Fragment):
        return int(value.t_src.nbytes * 3 + value.masks.nbytes)
    if isinstance(value, ir.Embed):
        return _nbytes(value.dfa)
    if isinstance(value, tuple) and value:
        return _nbytes(value[0])
    return 0


def LRUCache(entries: int, max_bytes: int = 256 << 20, name: str | None = None) -> caching.LRU:
    """A :class:`structgen.caching.LRU` of automata (sized by their arrays), for the front ends'
    caches of embedded automata."""
    return caching.LRU(entries, max_bytes, sizeof=_nbytes, name=name)


_DFA_CACHE = LRUCache(512, name="automaton.dfa")
_CHARSET_CACHE = LRUCache(4096, name="automaton.charset")
_EMBEDS = LRUCache(4096, 128 << 20, name="automaton.embeds")  # content key -> ir.Embed

on_clear = caching.on_clear  # kept for the front ends that register clear callbacks here


def clear_caches() -> None:
    """Forget every cached automaton (for benchmarks that time cold builds): now every
    registered cache, see :func:`structgen.caching.clear_caches`."""
    caching.clear_caches()


def embedded(dfa: ByteDFA) -> ir.Embed:
    """``ir.Embed(dfa)``, one node per language: canonical DFAs of equal languages have equal
    arrays, and an Embed compares by identity, so wrapping each built block afresh made every IR
    around it a new cache key (a schema's sub-schema merged into several ``allOf`` combinations was
    rebuilt once per combination).  Non-canonical DFAs get a fresh node."""
    if not is_canonical(dfa):
        return ir.Embed(dfa)
    tr, acc, bc = dfa.transitions, dfa.accepting, dfa.byte_class
    key = (tr.shape, hash(tr.tobytes()), hash(acc.tobytes()), hash(bc.tobytes()))
    hit = _EMBEDS.get(key)
    if hit is not None:
        d = hit.dfa
        if d is dfa or (np.array_equal(d.transitions, tr) and np.array_equal(d.accepting, acc)
                        and np.array_equal(d.byte_class, bc)):
            return hit
    node = ir.Embed(dfa)
    _EMBEDS.put(key, node)
    return node


class _Limits:
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
    cells are about 25-40 ms).  Every automaton :func:`_build` makes records what it cost and what
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
def _unmetered():
    """Work charged to nobody: process-wide caches that no schema owns (UTF-8 class fragments,
    the kernels' warm-up)."""
    prev_m, prev_f = getattr(_TLS, "meter", None), getattr(_TLS, "frames", None)
    _TLS.meter, _TLS.frames = None, []
    try:
        yield
    finally:
        _TLS.meter, _TLS.frames = prev_m, prev_f


class _Frame:
    __slots__ = ("h", "own", "kids", "meter")

    def __init__(self, h, meter):
        self.h, self.own, self.kids, self.meter = h, 0, [], meter


def _frames() -> list:
    f = getattr(_TLS, "frames", None)
    if f is None:
        f = _TLS.frames = []
    return f


def _open(h) -> _Frame:
    """Start accounting for the build of the node hashed ``h`` (None: never cached)."""
    meter = getattr(_TLS, "meter", None)
    if meter is not None and h is not None:
        if h in meter.seen:
            meter = None  # charged already in this budget (built before and evicted)
        else:
            meter.seen.add(h)
    fr = _Frame(h, meter)
    _frames().append(fr)
    return fr


def _close(fr: _Frame) -> tuple:
    fs = _frames()
    if fs and fs[-1] is fr:
        fs.pop()
    tree = (fr.h, fr.own, tuple(fr.kids))
    if fs:
        fs[-1].kids.append(tree)
    return tree


def _spend(cells: int) -> None:
    """Charge ``cells`` to the innermost build in progress (and to the active budget)."""
    fs = _frames()
    if not fs:
        return
    fr = fs[-1]
    fr.own += int(cells)
    m = fr.meter
    if m is not None:
        m.used += int(cells)
        if m.used > m.limit:
            raise m.exceeded()


def _reuse(tree) -> None:
    """An automaton taken from a cache: charge what building it cost (once per budget)."""
    if tree is None:
        return
    fs = _frames()
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


class _Record:
    tree = None


@contextmanager
def recording():
    """Record what the builds inside the block cost, for a cache of results derived from built
    automata (``ir.Embed`` nodes): on a hit, :func:`replay` the recorded ``.tree`` so that the
    budget is charged as if the cold path had run.  Using an embedded automaton is free (its
    producer paid), so every process-wide cache of embedded nodes must do this."""
    rec = _Record()
    fr = _Frame(None, getattr(_TLS, "meter", None))
    fs = _frames()
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
    _reuse(tree)


def _state_cap(limits: _Limits, k: int):
    """``(max states, budget-bound?)`` for a construction of ``k`` classes in the current build."""
    fs = _frames()
    m = fs[-1].meter if fs else None
    if m is None:
        return limits.max_states, False
    by_budget = max(m.left(), 0) // max(k, 1) + 1
    return (by_budget, True) if by_budget < limits.max_states else (limits.max_states, False)


def determinize(nfa: NFA, limits: _Limits):
    """Subset construction; returns ``(trans int32[n, k], acc bool[n], byte_class)``."""
    p = prepare(nfa)
    k = p.n_classes
    cap = 64
    trans = np.empty((cap, k), np.int32)
    acc = np.zeros(cap, np.bool_)
    set_ptr = np.zeros(cap + 1, np.int64)
    pool = np.empty(1024, np.int32)
    htab = np.full(256, -1, np.int32)
    ctr = np.zeros(4, np.int64)
    mark = np.zeros(max(nfa.n, 1), np.int64)
    budget = _CHUNK if limits.deadline is not None else np.iinfo(np.int64).max
    cap, by_budget = _state_cap(limits, k)
    while True:
        st, trans, acc, set_ptr, pool, htab = kernels.subset_run(
            p.t_ptr, p.t_set, p.t_dst, p.sc_ptr, p.sc_cls, p.e_ptr, p.e_dst, p.important,
            p.start, p.final, k, trans, acc, set_ptr, pool, htab, ctr, mark,
            cap, budget)
        if st == kernels.ST_DONE:
            break
        if st == kernels.ST_LIMIT:
            if by_budget:
                raise _frames()[-1].meter.exceeded()
            raise limits.too_many("the subset construction")
        limits.check_time()
    n = int(ctr[0])
    return trans[:n], acc[:n], p.byte_class


def _charset_fragment(cs: ir.CharSet) -> Fragment:
    frag = _CHARSET_CACHE.get(cs)
    if frag is None:
        nfa = charset_nfa(cs)
        with _unmetered():
            trans, acc, bc = determinize(nfa, _Limits(DEFAULT_MAX_STATES, None, DEFAULT_MAX_NFA_STATES))
        dfa = canonical_dfa(trans, acc, bc)
        frag = dfa_fragment(dfa)
        _CHARSET_CACHE.put(cs, frag)
    return frag


class _Key:
    """Cache key hashing an IR tree once (dataclass hashes are recomputed per call)."""

    __slots__ = ("node", "h")

    def __init__(self, node):
        self.node = node
        self.h = hash(node)

    def __hash__(self):
        return self.h

    def __eq__(self, other):
        return self.h == other.h and self.node == other.node


def _build(node: ir.Node, limits: _Limits, minimize: bool = True) -> ByteDFA:
    if minimize and isinstance(node, ir.Embed) and is_canonical(node.dfa):
        # an embedded automaton is paid for by whoever built it (see WorkBudget): free here
        if node.dfa.n_states > limits.max_states:
            raise limits.too_many("this automaton")
        return node.dfa
    key = _Key(node) if minimize else None
    if minimize:
        hit = _DFA_CACHE.get(key)
        if hit is not None:
            _reuse(getattr(hit, "_work", None))
            if hit.n_states > limits.max_states:
                raise limits.too_many("this automaton")
            return hit
    limits.check_time()
    fr = _open(key.h if key is not None else None)
    try:
        dfa = _construct(node, limits, minimize)
    except BaseException:
        fs = _frames()
        if fs and fs[-1] is fr:
            fs.pop()
        raise
    tree = _close(fr)
    dfa._work = tree  # what building it cost, charged again on every reuse (see WorkBudget)
    if minimize:
        _DFA_CACHE.put(key, dfa)
    return dfa


def _construct(node: ir.Node, limits: _Limits, minimize: bool) -> ByteDFA:
    if isinstance(node, ir.Embed) and minimize:
        d = node.dfa  # not canonical (see _build)
        if d.start == 0:
            _spend(d.n_states * d.n_classes)
            return canonical_dfa(d.transitions, d.accepting, d.byte_class)
        return _via_nfa(node, limits, minimize)
    if isinstance(node, ir.And) and minimize:
        from .ops import _intersect
        if not node.items:
            return _build(ir.Repeat(ir.ANY_CHAR, 0, None), limits)
        dfa = _build(node.items[0], limits)
        for it in node.items[1:]:
            dfa = _intersect(dfa, _build(it, limits), limits)
        return dfa
    if isinstance(node, ir.Not) and minimize:
        from .ops import _difference
        return _difference(_build(ir.Repeat(ir.ANY_CHAR, 0, None), limits), _build(node.item, limits), limits)
    if minimize and _tileable(node):
        item = _build(node.item, limits)
        if _tile_fits(item, node, limits):
            t, a = _tile(item, node.min, node.max)
            _spend(2 * t.shape[0] * t.shape[1])
            return canonical_dfa(t, a, item.byte_class)
    return _via_nfa(node, limits, minimize)


_SUBTREE_MIN = 2000  # IR nodes: bigger sub-trees are built (and cached) as DFAs of their own


# ----------------------------------------------------- counted repetitions of a prefix code
_TILE_MIN = 16      # bounded repeats with at least this many copies
_TILE_ITEM = 256    # item IR nodes at most (character-level items: encoded code points)


def _tileable(node) -> bool:
    """A Repeat worth building as copies of its item's DFA (see :func:`_tile`): a bounded count of
    at least ``_TILE_MIN`` over a small character-level item (no Repeat / And / Not inside)."""
    if not (isinstance(node, ir.Repeat) and node.max is not None and node.max >= _TILE_MIN
            and node.max >= node.min):
        return False
    todo, n = [node.item], 0
    while todo:
        x = todo.pop()
        n += 1
        if n > _TILE_ITEM:
            return False
        if isinstance(x, (ir.Seq, ir.Alt)):
            todo.extend(x.items)
        elif not isinstance(x, (ir.CharSet, ir.ByteSet, ir.Embed)):
            return False
    return True


def _prefix_free(d: ByteDFA) -> bool:
    """Is L(d) a non-empty prefix code without the empty string (no word of it extends another)?
    For a trimmed DFA: the start does not accept and no accepting state has a transition."""
    acc = np.asarray(d.accepting)
    return d.start == 0 and bool(acc.any()) and not bool(acc[0]) and not bool((d.transitions[acc] >= 0).any())


def _tile_fits(item: ByteDFA, node, limits: _Limits) -> bool:
    """Can ``node`` (a tileable Repeat of ``item``) be tiled within the state limit?  (Past it, the
    NFA path reports whichever limit the plain construction meets first.)"""
    if not _prefix_free(item):
        return False
    copies = node.max if node.max is not None else node.min + 1
    return copies * (item.n_states - int(np.count_nonzero(item.accepting))) < limits.max_states


def _tile(d: ByteDFA, lo: int, hi):
    """``(trans, acc)`` of ``L(d){lo,hi}`` for a prefix code ``L(d)`` (:func:`_prefix_free`): one copy
    of ``d``'s non-accepting states per count, a completed word stepping to the next copy's start
    (the code is prefix-free, so where a word ends is never in doubt).  ``hi=None``: the last copy
    loops.  Exact, deterministic, built with numpy instead of a subset construction over ``hi``
    tiled NFA copies (``maxLength: 256`` strings); not yet minimal."""
    tr = np.asarray(d.transitions)
    acc = np.asarray(d.accepting)
    inner = np.flatnonzero(~acc)           # the start (0) first
    m = inner.shape[0]
    r = np.full(tr.shape[0], -1, np.int64)
    r[inner] = np.arange(m)
    copies = hi if hi is not None else lo + 1
    row = tr[inner].astype(np.int64)       # [m, k]
    dead = row < 0
    safe = np.where(dead, 0, row)
    done = ~dead & acc[safe]
    i = np.arange(copies, dtype=np.int64)[:, None, None]
    nxt = np.minimum(i + 1, copies - 1) * m if hi is None else (i + 1) * m
    out = np.where(dead[None], -1, np.where(done[None], nxt, i * m + r[safe][None]))
    n = copies * m + (0 if hi is None else 1)
    trans = np.full((n, tr.shape[1]), -1, np.int32)
    trans[:copies * m] = out.reshape(copies * m, tr.shape[1])
    accept = np.zeros(n, np.bool_)
    accept[np.arange(lo, copies) * m] = True
    if hi is not None:
        accept[n - 1] = True
    return trans, accept


def _repeat_dfa(node, limits):
    """For the NFA builder: the DFA of a tileable Repeat node, or None (inline it as NFA)."""
    if not _tileable(node) or not _tile_fits(_build(node.item, limits), node, limits):
        return None
    return _build(node, limits)


def _via_nfa(node, limits, minimize):
    builder = Builder(lambda sub: _build(sub, limits), _charset_fragment, limits.max_nfa_states,
                      repeat_dfa=lambda sub: _repeat_dfa(sub, limits),
                      subtree_min=_SUBTREE_MIN if minimize else None)
    nfa = builder.finish(node)
    limits.check_time()
    trans, acc, bc = determinize(nfa, limits)
    _spend(nfa.n + trans.shape[0] * trans.shape[1])
    limits.check_time()
    if not minimize:
        return trimmed_dfa(trans, acc, bc)
    _spend(trans.shape[0] * trans.shape[1])
    return canonical_dfa(trans, acc, bc)


def build_dfa(node: ir.Node, max_states: int = DEFAULT_MAX_STATES, time_limit: float | None = None,
              *, max_nfa_states: int = DEFAULT_MAX_NFA_STATES, minimize: bool = True) -> ByteDFA:
    """The minimal, trimmed ByteDFA of the IR ``node``.

    ``max_states`` bounds every intermediate DFA, ``time_limit`` (seconds) the whole
    build; both raise :class:`LimitExceeded`.  ``minimize=False`` returns the trimmed
    subset-construction DFA without merging equivalent states (tests, diagnostics);
    it is not cached.  The returned arrays are read-only and may be shared.
    """
    if not isinstance(node, ir.Node):
        raise TypeError(f"build_dfa expects an IR node, got {type(node).__name__}")
    if time_limit is not None:
        _warm_up()
    return _build(node, _Limits(max_states, time_limit, max_nfa_states), minimize)


_WARM = False


def _warm_up() -> None:
    """Load (or, on a fresh install, JIT-compile) every automaton kernel once per
    process, so that a time limit measures construction, not Numba's compiler."""
    global _WARM
    if _WARM:
        return
    ab = ir.CharSet.of([(0x61, 0x62), (0xE9, 0xE9)])
    node = ir.And((ir.Repeat(ab, 0, None), ir.Not(ir.literal("ab"))))
    with _unmetered():
        _build(node, _Limits(DEFAULT_MAX_STATES, None, DEFAULT_MAX_NFA_STATES), True)
    _WARM = True


def dfa_from_regex(pattern: str, **kw) -> ByteDFA:
    """Pattern text -> minimal ByteDFA (full-match semantics by default).

    Same as :func:`structgen.frontends.regex.dfa_from_regex`: parse keywords (``flags``,
    ``syntax``, ``anchored``) and build keywords (``max_states``, ``time_limit``, ...)."""
    from ..frontends.regex import dfa_from_regex as _impl  # the front-end sits above this package

    return _impl(pattern, **kw)
