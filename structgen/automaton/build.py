"""IR -> minimal ByteDFA: the automaton builder.

Pipeline (each step a module of its own):

1. :mod:`.nfa` -- Thompson NFA over bytes (CharSets expanded to UTF-8 byte ranges,
   bounded repeats tiled with numpy), then the coarsest byte-class partition.
2. :func:`.kernels.subset_run` -- subset construction over byte classes in Numba,
   resumable so a time limit can be checked between chunks.
3. :mod:`.minimize` -- Hopcroft minimisation, trimming and a canonical numbering.

``And``/``Not`` are built from their children's DFAs with products
(:mod:`.product`); ``Not(x)`` is the complement relative to valid UTF-8.  ``build_node(node,
limits)`` is the builder itself (cached, charged to the work budget of :mod:`.limits`), for
modules of this package that hold a :class:`~.limits.Limits` already; ``build_dfa`` is the entry
point for everyone else.

Results are cached per IR node (nodes are immutable and hashable) in a bounded LRU;
non-ASCII CharSets, which expand to many byte sequences, are cached on their own.
Built DFAs are read-only (their arrays are not writeable) because they are shared.

Limits: ``max_states`` bounds the DFA states created by any single subset
construction or product (:class:`LimitExceeded` with ``limit="max_states"``);
``time_limit`` (seconds) bounds the whole build (``limit="time_limit"``; checked inside the
subset construction every ``_CHUNK_SECONDS`` or so of work, so it is overshot by little more);
``max_nfa_states`` bounds the intermediate NFA and ``max_memory`` (bytes) the NFA sets and DFA
table of each subset construction (all in :mod:`.limits`, with :func:`limit_scope`).  :func:`work_budget` bounds all the
construction work done in a block by a deterministic count (:class:`WorkBudget`), which
the JSON Schema engine choice uses instead of a clock.

Shortcuts: a bounded repetition of a prefix code (an encoded character class, ``maxLength``)
is tiled from its item's DFA (:func:`_tile`) instead of a subset construction over the tiled
NFA; sub-trees of ``_SUBTREE_MIN`` IR nodes or more are built (and cached) as DFAs of their
own and embedded; :func:`embedded` wraps equal languages in one ``ir.Embed`` node, so that
IR built around them stays a cache key.
"""
from __future__ import annotations

import time

import numpy as np

from .. import caching
from . import ir, kernels
from ..errors import LimitExceeded
from .dfa import ByteDFA
from .limits import (DEFAULT_MAX_MEMORY, DEFAULT_MAX_NFA_STATES, Limits, WorkBudget, abandon_frame, close_frame,
                     frames, in_timed_scope, limit_scope, open_frame, recording, replay, reuse, spend, state_cap, unmetered,
                     work_budget)
from .minimize import byte_set, canonical_dfa, canonical_enclosed, is_canonical, trimmed_dfa
from .nfa import NFA, Builder, Fragment, charset_nfa, dfa_fragment, prepare
from .product import difference_dfas, intersect_dfas

# re-exported: the front ends' caches of embedded automata use these (see :mod:`.limits`)
__all__ = ["DEFAULT_MAX_STATES", "DEFAULT_MAX_NFA_STATES", "DEFAULT_MAX_MEMORY", "LRUCache", "Limits", "WorkBudget",
           "build_dfa", "build_node", "clear_caches", "determinize", "embedded", "limit_scope", "recording",
           "replay", "warm_up", "work_budget"]

DEFAULT_MAX_STATES = 100_000
# With a deadline, the subset construction runs in chunks of work sized to take about
# _CHUNK_SECONDS (at most 2 % of the time limit), so a limit is overshot by about one chunk.
_CHUNK_SECONDS = 0.02
_FIRST_CHUNK = 1 << 16  # units of work (NFA-set operations) before the first measurement


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


# Process-wide caches are bounded in entries as much as in bytes: their keys and values are IR
# trees and automata, objects every full garbage collection walks (one in a mask is a pause of
# that length).  600 dev-split schemas in one process, with these, cfg.chained, literal_sets,
# other_keys and json_schema.patterns two to eight times larger, then as sized now (alternated
# twice): 66,500 -> 42,500 objects left by compiles; full collections any order 76, 68 -> 69, 57
# ms on average, declared 47, 45 -> 31, 24 ms; compile times within noise (the extra entries were
# mostly other schemas' and seldom hit).
_DFA_CACHE = LRUCache(256, name="automaton.dfa")
_CHARSET_CACHE = LRUCache(4096, name="automaton.charset")
_EMBEDS = LRUCache(512, 128 << 20, name="automaton.embeds")  # content key -> ir.Embed


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


def determinize(nfa: NFA, limits: Limits):
    """Subset construction; returns ``(trans int32[n, k], acc bool[n], byte_class)``."""
    p = prepare(nfa)
    k = p.n_classes
    cap = 64
    trans = np.empty((cap, k), np.int32)
    acc = np.zeros(cap, np.bool_)
    set_ptr = np.zeros(cap + 1, np.int64)
    pool = np.empty(1024, np.int32)
    htab = np.full(256, -1, np.int32)
    ctr = np.zeros(6, np.int64)
    mark = np.zeros(max(nfa.n, 1), np.int64)
    timed = limits.deadline is not None
    budget = _FIRST_CHUNK if timed else np.iinfo(np.int64).max
    target = min(_CHUNK_SECONDS, 0.02 * float(limits.time_limit)) if timed else 0.0
    cap, by_budget = state_cap(limits, k)
    while True:
        t0, w0 = time.perf_counter(), int(ctr[5])
        st, trans, acc, set_ptr, pool, htab = kernels.subset_run(
            p.t_ptr, p.t_set, p.t_dst, p.sc_ptr, p.sc_cls, p.e_ptr, p.e_dst, p.important,
            p.start, p.final, k, trans, acc, set_ptr, pool, htab, ctr, mark,
            cap, budget, limits.max_memory)
        if st == kernels.ST_DONE:
            break
        if st == kernels.ST_LIMIT:
            if by_budget:
                raise frames()[-1].meter.exceeded()
            raise limits.too_many("the subset construction")
        if st == kernels.ST_MEMORY:
            raise limits.too_big("the subset construction")
        limits.check_time()
        # size the next chunk from this one's speed (work per second varies with the NFA)
        dt, dw = time.perf_counter() - t0, int(ctr[5]) - w0
        if dw > 0:
            budget = int(min(max(dw * target / max(dt, 1e-6), 1 << 12), 1 << 40))
    n = int(ctr[0])
    return trans[:n], acc[:n], p.byte_class


def _charset_fragment(cs: ir.CharSet) -> Fragment:
    frag = _CHARSET_CACHE.get(cs)
    if frag is None:
        nfa = charset_nfa(cs)
        with unmetered():
            trans, acc, bc = determinize(nfa, Limits(DEFAULT_MAX_STATES, None, DEFAULT_MAX_NFA_STATES, DEFAULT_MAX_MEMORY))
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


def build_node(node: ir.Node, limits: Limits, minimize: bool = True) -> ByteDFA:
    """The DFA of ``node`` under ``limits`` (minimal and cached unless ``minimize`` is False)."""
    if minimize and isinstance(node, ir.Embed) and is_canonical(node.dfa):
        # an embedded automaton is paid for by whoever built it (see WorkBudget): free here
        if node.dfa.n_states > limits.max_states:
            raise limits.too_many("this automaton")
        return node.dfa
    key = _Key(node) if minimize else None
    if minimize:
        hit = _DFA_CACHE.get(key)
        if hit is not None:
            reuse(getattr(hit, "_work", None))
            if hit.n_states > limits.max_states:
                raise limits.too_many("this automaton")
            return hit
    limits.check_time()
    fr = open_frame(key.h if key is not None else None)
    try:
        dfa = _construct(node, limits, minimize)
    except BaseException:
        abandon_frame(fr)
        raise
    tree = close_frame(fr)
    dfa._work = tree  # what building it cost, charged again on every reuse (see WorkBudget)
    if minimize:
        _DFA_CACHE.put(key, dfa)
    return dfa


def _construct(node: ir.Node, limits: Limits, minimize: bool) -> ByteDFA:
    if isinstance(node, ir.Embed) and minimize:
        d = node.dfa  # not canonical (see build_node)
        if d.start == 0:
            spend(d.n_states * d.n_classes)
            return canonical_dfa(d.transitions, d.accepting, d.byte_class)
        return _via_nfa(node, limits, minimize)
    if isinstance(node, ir.And) and minimize:
        if not node.items:
            return build_node(ir.Repeat(ir.ANY_CHAR, 0, None), limits)
        dfa = build_node(node.items[0], limits)
        for it in node.items[1:]:
            dfa = intersect_dfas(dfa, build_node(it, limits), limits)
        return dfa
    if isinstance(node, ir.Not) and minimize:
        return difference_dfas(build_node(ir.Repeat(ir.ANY_CHAR, 0, None), limits), build_node(node.item, limits), limits)
    if minimize and isinstance(node, ir.Seq) and len(node.items) == 3:
        dfa = _enclosed(node, limits)
        if dfa is not None:
            return dfa
    if minimize and _tileable(node):
        item = build_node(node.item, limits)
        if _tile_fits(item, node, limits):
            t, a = _tile(item, node.min, node.max)
            spend(2 * t.shape[0] * t.shape[1])
            return canonical_dfa(t, a, item.byte_class)
    return _via_nfa(node, limits, minimize)


_ENCLOSED_MIN = 512  # body states: smaller quoted bodies go through the NFA (see _enclosed)


def _enclosed(node, limits):
    """A quoted body (``Seq(byte set, body, byte set)``, a JSON string with a pattern) put together
    from the body's DFA (:func:`~.minimize.canonical_enclosed`), or None.  Building it through the
    NFA copied the body into a subset construction and minimised the whole again: 0.35 s of a
    one-second build for a pattern under ``maxLength: 254`` (73,000 states)."""
    a, body, c = node.items
    # only bodies the NFA builder builds as DFAs too (Boolean combinations, embedded automata), and
    # big ones: on a small body numpy's overheads cost more than the subset construction (0.52 ms
    # against 0.35 ms per build, averaged over five quoted bodies of 2-12 states)
    if not (isinstance(a, ir.CharSet) and isinstance(c, ir.CharSet) and isinstance(body, (ir.And, ir.Not, ir.Embed))):
        return None
    inner = build_node(body, limits)
    if inner.n_states < _ENCLOSED_MIN:
        return None
    opening, closing = byte_set(build_node(a, limits)), byte_set(build_node(c, limits))
    if opening is None or closing is None:
        return None
    dfa = canonical_enclosed(opening, inner, closing)
    if dfa is not None:
        spend(2 * dfa.n_states * dfa.n_classes)
        if dfa.n_states > limits.max_states:
            raise limits.too_many("this automaton")
    return dfa


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


def _tile_fits(item: ByteDFA, node, limits: Limits) -> bool:
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
    if not _tileable(node) or not _tile_fits(build_node(node.item, limits), node, limits):
        return None
    return build_node(node, limits)


def _via_nfa(node, limits, minimize):
    builder = Builder(lambda sub: build_node(sub, limits), _charset_fragment, limits.max_nfa_states,
                      repeat_dfa=lambda sub: _repeat_dfa(sub, limits),
                      subtree_min=_SUBTREE_MIN if minimize else None)
    nfa = builder.finish(node)
    limits.check_time()
    trans, acc, bc = determinize(nfa, limits)
    spend(nfa.n + trans.shape[0] * trans.shape[1])
    limits.check_time()
    if not minimize:
        return trimmed_dfa(trans, acc, bc)
    spend(trans.shape[0] * trans.shape[1])
    return canonical_dfa(trans, acc, bc)


def build_dfa(node: ir.Node, max_states: int = DEFAULT_MAX_STATES, time_limit: float | None = None,
              *, max_nfa_states: int | None = None, max_memory: int | None = None,
              minimize: bool = True) -> ByteDFA:
    """The minimal, trimmed ByteDFA of the IR ``node``.

    ``max_states`` bounds every intermediate DFA, ``time_limit`` (seconds) the whole
    build, ``max_nfa_states`` (default ``DEFAULT_MAX_NFA_STATES``) the NFA of every subset
    construction and ``max_memory`` (bytes, default ``DEFAULT_MAX_MEMORY``) its tables; all raise
    :class:`LimitExceeded` naming the limit.  Inside a :func:`limit_scope` its deadline applies too
    and its values replace the defaults.  ``minimize=False`` returns the trimmed
    subset-construction DFA without merging equivalent states (tests, diagnostics);
    it is not cached.  The returned arrays are read-only and may be shared.
    """
    if not isinstance(node, ir.Node):
        raise TypeError(f"build_dfa expects an IR node, got {type(node).__name__}")
    if time_limit is not None or in_timed_scope():
        warm_up()  # before the clock starts
    limits = Limits(max_states, time_limit, max_nfa_states, max_memory)
    levels = ir.depth(node)
    if levels > ir.MAX_DEPTH:
        raise LimitExceeded(f"the expression nests {levels} levels deep", "max_depth", ir.MAX_DEPTH)
    # the NFA builder and the nested builds of big sub-trees recurse once per level (pure Python)
    with ir.recursion_room(levels, 12 if levels * 2 > _SUBTREE_MIN else 4):
        return build_node(node, limits, minimize)


_WARM = False


def warm_up() -> None:
    """Load (or, on a fresh install, JIT-compile) every automaton kernel once per
    process, so that a time limit measures construction, not Numba's compiler (callers that
    start a :func:`limit_scope` call this first)."""
    global _WARM
    if _WARM:
        return
    ab = ir.CharSet.of([(0x61, 0x62), (0xE9, 0xE9)])
    node = ir.And((ir.Repeat(ab, 0, None), ir.Not(ir.literal("ab"))))
    with unmetered():
        build_node(node, Limits(DEFAULT_MAX_STATES, None, DEFAULT_MAX_NFA_STATES, DEFAULT_MAX_MEMORY), True)
    _WARM = True
