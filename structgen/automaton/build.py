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
``max_nfa_states`` bounds the intermediate NFA.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict

import numpy as np

from ..errors import LimitExceeded
from . import ir, kernels
from .dfa import ByteDFA
from .minimize import canonical_dfa, trimmed_dfa
from .nfa import NFA, Builder, Fragment, charset_nfa, dfa_fragment, prepare

DEFAULT_MAX_STATES = 100_000
DEFAULT_MAX_NFA_STATES = 2_000_000
_CHUNK = 2048  # DFA states per kernel call when a time limit is in force


class _LRU:
    """A small thread-safe LRU map bounded by entry count and by total array bytes."""

    def __init__(self, size: int, max_bytes: int = 256 << 20):
        self.size = size
        self.max_bytes = max_bytes
        self.bytes = 0
        self.data: OrderedDict = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key):
        with self.lock:
            v = self.data.get(key)
            if v is not None:
                self.data.move_to_end(key)
            return v

    def put(self, key, value):
        nbytes = _nbytes(value)
        if nbytes > self.max_bytes // 4:
            return  # one huge automaton must not flush everything else
        with self.lock:
            old = self.data.pop(key, None)
            if old is not None:
                self.bytes -= _nbytes(old)
            self.data[key] = value
            self.bytes += nbytes
            while len(self.data) > self.size or self.bytes > self.max_bytes:
                _, gone = self.data.popitem(last=False)
                self.bytes -= _nbytes(gone)

    def clear(self):
        with self.lock:
            self.data.clear()
            self.bytes = 0


def _nbytes(value) -> int:
    if isinstance(value, ByteDFA):
        return int(value.transitions.nbytes)
    if isinstance(value, Fragment):
        return int(value.t_src.nbytes * 3 + value.masks.nbytes)
    return 0


_DFA_CACHE = _LRU(512)
_CHARSET_CACHE = _LRU(4096)


def clear_caches() -> None:
    """Forget every cached automaton (for benchmarks that time cold builds)."""
    _DFA_CACHE.clear()
    _CHARSET_CACHE.clear()


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
    while True:
        st, trans, acc, set_ptr, pool, htab = kernels.subset_run(
            p.t_ptr, p.t_set, p.t_dst, p.sc_ptr, p.sc_cls, p.e_ptr, p.e_dst, p.important,
            p.start, p.final, k, trans, acc, set_ptr, pool, htab, ctr, mark,
            limits.max_states, budget)
        if st == kernels.ST_DONE:
            break
        if st == kernels.ST_LIMIT:
            raise limits.too_many("the subset construction")
        limits.check_time()
    n = int(ctr[0])
    return trans[:n], acc[:n], p.byte_class


def _charset_fragment(cs: ir.CharSet) -> Fragment:
    frag = _CHARSET_CACHE.get(cs)
    if frag is None:
        nfa = charset_nfa(cs)
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
    key = _Key(node) if minimize else None
    if minimize:
        hit = _DFA_CACHE.get(key)
        if hit is not None:
            if hit.n_states > limits.max_states:
                raise limits.too_many("this automaton")
            return hit
    limits.check_time()
    if isinstance(node, ir.Embed) and minimize:
        d = node.dfa
        dfa = canonical_dfa(d.transitions, d.accepting, d.byte_class) if d.start == 0 else None
        if dfa is None:
            dfa = _via_nfa(node, limits, minimize)
    elif isinstance(node, ir.And) and minimize:
        from .ops import _intersect
        if not node.items:
            dfa = _build(ir.Repeat(ir.ANY_CHAR, 0, None), limits)
        else:
            dfa = _build(node.items[0], limits)
            for it in node.items[1:]:
                dfa = _intersect(dfa, _build(it, limits), limits)
    elif isinstance(node, ir.Not) and minimize:
        from .ops import _difference
        dfa = _difference(_build(ir.Repeat(ir.ANY_CHAR, 0, None), limits),
                          _build(node.item, limits), limits)
    else:
        dfa = _via_nfa(node, limits, minimize)
    if minimize:
        _DFA_CACHE.put(key, dfa)
    return dfa


def _via_nfa(node, limits, minimize):
    builder = Builder(lambda sub: _build(sub, limits), _charset_fragment, limits.max_nfa_states)
    nfa = builder.finish(node)
    limits.check_time()
    trans, acc, bc = determinize(nfa, limits)
    limits.check_time()
    return canonical_dfa(trans, acc, bc) if minimize else trimmed_dfa(trans, acc, bc)


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
    _build(node, _Limits(DEFAULT_MAX_STATES, None, DEFAULT_MAX_NFA_STATES), True)
    _WARM = True


def dfa_from_regex(pattern: str, **kw) -> ByteDFA:
    """Pattern text -> minimal ByteDFA (full-match semantics by default).

    Same as :func:`structgen.spec.regex.dfa_from_regex`: parse keywords (``flags``,
    ``syntax``, ``anchored``) and build keywords (``max_states``, ``time_limit``, ...)."""
    from ..spec.regex import dfa_from_regex as _impl  # the front-end sits above this package

    return _impl(pattern, **kw)
