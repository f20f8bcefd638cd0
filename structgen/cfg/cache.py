"""MaskCache: the per-grammar cache of mask parts that do not depend on the parse stack.

For a pair (boundary list ``bl``, lexer state ``g``) — see :mod:`structgen.cfg.mask`
— the cache holds the tokens a lexeme in state ``g`` keeps alive below the nodes
of ``bl`` (sparse: word index, word) and the id of the boundary list where it can
end inside a token.  Everything lives in flat, append-only numpy pools so the
Numba kernel :func:`~structgen.cfg.mask.expand_mask` reads and extends them.

Concurrency: readers (masks computed with ``fill=False``) use an immutable
*snapshot* — a hash table and the pools; entries are only ever appended past
the counters a snapshot knows, and a fill works on a private copy of the hash
table and counters that is published at the end under a lock.  So a matcher in
one thread never sees a half-written entry of another thread's fill.

Bound: when the pools exceed ``max_bytes`` the next fill starts from an empty
cache (old snapshots stay valid for their readers); ``clears`` counts those.
"""
from __future__ import annotations

import atexit
import threading
import time
import weakref

import numpy as np

from .. import caching
from ..kernels.packed import Packed
from . import mask as mk

# Background prefills stop at interpreter exit and are joined there: a daemon thread still in a
# kernel when the interpreter finalizes is killed by forced unwinding, which aborts the process
# ("terminate called without an active exception") when native frames are on its stack.
_EXITING = threading.Event()
_BACKGROUND: "weakref.WeakSet[threading.Thread]" = weakref.WeakSet()


def start_background_prefill(cache: "MaskCache", engine, seconds: float) -> threading.Thread:
    """Run ``cache.prefill(engine, seconds, batch=1)`` on a daemon thread that stops, and is
    joined, when the interpreter exits."""
    thread = threading.Thread(target=cache.prefill, args=(engine, seconds, 1), name="structgen-prefill", daemon=True)
    _BACKGROUND.add(thread)
    thread.start()
    return thread


@atexit.register
def _stop_background_prefills() -> None:
    _EXITING.set()
    for thread in list(_BACKGROUND):
        thread.join(timeout=10.0)


class _Snapshot:
    __slots__ = ("ht_keys", "ht_vals", "ent_bl2", "ent_boff", "ent_bn", "bidx", "bval", "bl_off", "bl_nodes",
                 "bl_kb", "bl_kids", "bl_term", "bl_uoff", "bl_un", "cnt", "_packed")

    def __init__(self):
        self._packed = None

    def packed(self) -> Packed:
        """The arrays as one table (:mod:`structgen.kernels.packed`), made once per snapshot: for
        published snapshots only, which never change (a fill copy's pools are replaced as they grow)."""
        p = self._packed
        if p is None:
            p = self._packed = Packed(self.arrays())
        return p

    def arrays(self) -> mk.CacheArrays:
        return mk.CacheArrays(self.ht_keys, self.ht_vals, self.ent_bl2, self.ent_boff, self.ent_bn, self.bidx,
                              self.bval, self.bl_off, self.bl_nodes, self.bl_kb, self.bl_kids, self.bl_term,
                              self.bl_uoff, self.bl_un, self.cnt)

    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays())


class MaskCache:
    """Append-only pools of cached mask parts for one compiled grammar."""

    def __init__(self, trie, n_words: int, max_bytes: int = 256 << 20):
        self.max_bytes = int(max_bytes)
        self.lock = threading.Lock()
        self.clears = 0
        # boundary list 0 is the trie root alone: its children by byte
        self._root_kids = np.zeros(256, np.int32)
        self._root_kb = np.zeros(257, np.int64)
        _, n = mk.build_kids(np.zeros(1, np.int32), np.ones(256, np.uint8), trie.node_byte, trie.node_end,
                             self._root_kids, self._root_kb)
        self._n_root_kids = int(n)
        self._n_nodes = int(trie.node_depth.shape[0])
        self.snap = self._empty()
        # fill scratch (used under ``lock``), allocated here: a reader thread must never see it half-made
        self.alloc_scratch(n_words, self._n_nodes, int(trie.max_depth) + 2)
        self.roots: dict = {}  # frontier lexer states (their bytes) -> their root bits, dense
        self.prefilled = False  # a prefill ran to completion
        caching.register_group("cfg.mask").add(self)  # sg.clear_caches() / sg.cache_info() see it

    def root_bits(self, snap: _Snapshot, gs: np.ndarray):
        """The OR of the root-level bits of lexer states ``gs`` (a frontier), cached per
        set of states; None while one of them is not in the snapshot ``snap`` yet."""
        key = gs.tobytes()  # as given (order, repeats): one hash of a few bytes per mask
        hit = self.roots.get(key)
        if hit is not None:
            return hit
        words = np.zeros(self.scr_words.shape[0], np.uint32)
        if not mk.or_roots(gs.astype(np.int64), snap.ht_keys, snap.ht_vals, snap.ent_boff,
                           snap.ent_bn, snap.bidx, snap.bval, words):
            return None
        self.roots[key] = words
        return words

    def alloc_scratch(self, n_words: int, n_nodes: int, depth: int) -> None:
        self._scratch_packed = None
        self.scr_words = np.zeros(n_words, np.uint32)
        self.scr_nodes = np.empty(max(n_nodes, 1024), np.int32)
        self.lstack = np.zeros(depth, np.int32)
        self.nmark = np.zeros(max(n_nodes, 1), np.int64)  # per trie node stamps
        self.nst = np.zeros(1, np.int64)
        # union walks: at depth d at most d lexemes are in progress (one per boundary above)
        self.act = np.zeros((depth, depth), np.int32)
        self.actn = np.zeros(depth, np.int64)
        self.isb = np.zeros(depth, np.uint8)

    def scratch_table(self) -> np.ndarray:
        """:meth:`scratch` as one table (:mod:`structgen.kernels.packed`), remade when an array of it is replaced."""
        p = self._scratch_packed
        if p is None or any(a is not b for a, b in zip(p.arrays, self.scratch())):
            p = self._scratch_packed = Packed(self.scratch())
        return p.table

    def scratch(self) -> mk.FillScratch:
        return mk.FillScratch(self.scr_words, self.scr_nodes, self.lstack, self.nmark, self.nst, self.act, self.actn,
                              self.isb)

    def _empty(self) -> _Snapshot:
        s = _Snapshot()
        # first sizes: room for a typical grammar's first masks without growing (growing copies a
        # pool, a spike in the mask that triggers it), small enough that a JSON Schema compiled for
        # one request does not pay for allocating (and later freeing) megabytes
        s.ht_keys = np.full(1 << 12, -1, np.int64)
        s.ht_vals = np.zeros(1 << 12, np.int32)
        s.ent_bl2 = np.zeros(1 << 10, np.int32)
        s.ent_boff = np.zeros(1 << 10, np.int64)
        s.ent_bn = np.zeros(1 << 10, np.int32)
        s.bidx = np.zeros(1 << 17, np.int32)
        s.bval = np.zeros(1 << 17, np.uint32)
        s.bl_off = np.zeros(1 << 10, np.int64)
        # a list's nodes: room for a walk of the whole trie, which a first mask's room check asks
        # for as soon as a lexer state takes a byte that starts many tokens (a space); zeroed
        # lazily by the allocator, so only the pages a walk writes cost memory
        s.bl_nodes = np.zeros(max(1 << 15, self._n_nodes), np.int32)
        s.bl_kb = np.zeros(257 * (1 << 8), np.int64)
        s.bl_kids = np.zeros(max(1 << 15, self._n_nodes), np.int32)
        s.bl_term = np.full(1 << 10, -1, np.int32)
        s.bl_uoff = np.zeros(1 << 10, np.int64)
        s.bl_un = np.zeros(1 << 10, np.int32)
        # boundary list 0 is the trie root alone
        s.bl_off[1] = 1
        s.bl_nodes[0] = 0
        s.bl_kb[:257] = self._root_kb
        s.bl_kids[:self._n_root_kids] = self._root_kids[:self._n_root_kids]
        s.cnt = np.array([0, 0, 1, 1, 0, self._n_root_kids], np.int64)
        return s

    @property
    def n_entries(self) -> int:
        return int(self.snap.cnt[mk.C_ENT])

    def nbytes(self) -> int:
        return self.snap.nbytes() + sum(w.nbytes for w in self.roots.values())

    def clear(self) -> None:
        """Start afresh, as when the bound is reached (readers keep the snapshot they hold)."""
        with self.lock:
            self.clears += 1
            self.snap = self._empty()
            self.roots = {}

    def info(self) -> dict:
        return {"entries": self.n_entries, "bytes": self.nbytes(), "hits": None, "misses": None,
                "max_entries": None, "max_bytes": self.max_bytes}

    def begin_fill(self) -> _Snapshot:
        """A private copy of the hash table and counters over the shared pools (call under ``lock``)."""
        s = self.snap
        if self.nbytes() > self.max_bytes:
            self.clears += 1
            s = self.snap = self._empty()
            self.roots = {}
        w = _Snapshot()
        for name in mk.CacheArrays._fields:
            setattr(w, name, getattr(s, name))
        w.ht_keys = s.ht_keys.copy()
        w.ht_vals = s.ht_vals.copy()
        w.cnt = s.cnt.copy()
        return w

    def prefill(self, engine, seconds: float, batch: int = 8, levels: int = 8) -> int:
        """Spend up to ``seconds`` computing cache entries a first mask would otherwise pay
        for: the root-level entries of every lexer state (start states first), then those of
        the terminals that can start below each boundary list found, for tokens of up to ``levels``
        lexemes.  Works in small batches, each under the lock and published at once, so it can
        run in a background thread while matchers compute masks (there ``batch=1``: a matcher
        that needs the lock waits for one entry at most).  Stops when the cache is cleared
        (``max_bytes``).  Returns the number of entries computed."""
        if seconds <= 0:
            return 0
        deadline = time.perf_counter() + seconds
        tb = engine.tables
        starts = np.unique(tb.tstart)
        rest = np.setdiff1d(np.arange(tb.trans.shape[0], dtype=np.int32), starts)
        gs = np.concatenate([starts, rest]).astype(np.int32)
        epoch = self.clears  # a fill that finds the cache cleared stops: list ids changed meaning
        n = self._fill(engine, np.zeros(gs.shape[0], np.int32), gs, deadline, batch, epoch)
        if n < 0:
            return -n - 1
        # then lexemes starting below the boundary lists those entries made, then below the lists
        # that these make (tokens of three lexemes or more), and so on for ``levels`` levels (the
        # closure can be large: the C grammar's has tens of thousands of lists)
        first = (tb.trans[starts] >= 0)  # (start states, 256)
        lo, hi = 1, int(self.snap.cnt[mk.C_BL])
        for _ in range(levels - 1):
            for b in range(lo, hi):
                # the terminals that may follow the one ending there (a mask looks their entries
                # up even where none of their first bytes is below the list: empty entries)
                g2 = starts[(first & (tb.follow[self.snap.bl_term[b]] > 0)).any(axis=1)].astype(np.int32)
                k = self._fill(engine, np.full(g2.shape[0], b, np.int32), g2, deadline, batch, epoch)
                if k < 0:
                    return n - k - 1
                n += k
            lo, hi = hi, int(self.snap.cnt[mk.C_BL])
        self.prefilled = True
        return n

    def _fill(self, engine, bls, gs, deadline, batch: int, epoch: int) -> int:
        """Compute the entries ``(bls, gs)`` in batches: the number computed, or ``-1 - that``
        when ``deadline`` stopped it or the cache was cleared since ``clears`` was ``epoch``."""
        tb = engine.tables
        done = made = 0
        while done < gs.shape[0]:
            if time.perf_counter() >= deadline or _EXITING.is_set():
                return -1 - made
            with self.lock:
                w = self.begin_fill()
                if self.clears != epoch:
                    return -1 - made
                n0 = int(w.cnt[mk.C_ENT])
                # room for an entry of any size first: a full pool is only found at the end of an
                # entry's walk, which then runs again (a root entry of a terminal that takes most
                # tokens -- an identifier, a CSV field -- costs milliseconds)
                self.grow(w, engine.words, engine.trie.node_depth.shape[0])
                k, st = mk.fill_entries(bls[done:done + batch], gs[done:done + batch], tb.trans, tb.gacc, tb.gout, tb.gterm,
                                        tb.follow, *engine.trie_arrays, *w.arrays(), *self.scratch(),
                                        *engine.lexer_aids)
                if st == mk.CACHE_FULL:
                    self.grow(w, engine.words, engine.trie.node_depth.shape[0])
                elif st == mk.NODES_FULL:
                    self.scr_nodes = np.empty(self.scr_nodes.shape[0] * 4, np.int32)
                made += int(w.cnt[mk.C_ENT]) - n0
                self.publish(w)
            done += int(k)
        return made

    def grow(self, w: _Snapshot, n_words: int, n_nodes: int) -> None:
        """Make room in the fill copy ``w`` for one more entry of any size (two bit sets
        of ``n_words`` words, a boundary list of ``n_nodes`` trie nodes); call under ``lock``.
        Full pools are replaced by larger copies: old snapshots keep theirs."""
        c = w.cnt
        if (c[mk.C_HT] + 2) * 2 > w.ht_keys.shape[0]:
            n = w.ht_keys.shape[0] * 2
            keys, vals = np.full(n, -1, np.int64), np.zeros(n, np.int32)
            mk.rehash(w.ht_keys, w.ht_vals, keys, vals)
            w.ht_keys, w.ht_vals = keys, vals
        if c[mk.C_ENT] + 1 >= w.ent_bl2.shape[0]:
            n = 2 * w.ent_bl2.shape[0]
            w.ent_bl2, w.ent_boff, w.ent_bn = (_larger(a, n) for a in (w.ent_bl2, w.ent_boff, w.ent_bn))
        if c[mk.C_BITS] + 2 * n_words > w.bidx.shape[0]:
            n = max(2 * w.bidx.shape[0], int(c[mk.C_BITS]) + 2 * n_words)
            w.bidx, w.bval = _larger(w.bidx, n), _larger(w.bval, n)
        if c[mk.C_BL] + 2 >= w.bl_off.shape[0]:
            n = 2 * w.bl_off.shape[0]
            w.bl_off, w.bl_uoff, w.bl_un, w.bl_term = (_larger(a, n) for a in (w.bl_off, w.bl_uoff, w.bl_un, w.bl_term))
        if 257 * (c[mk.C_BL] + 2) > w.bl_kb.shape[0]:
            w.bl_kb = _larger(w.bl_kb, 2 * w.bl_kb.shape[0])
        if c[mk.C_NODES] + n_nodes > w.bl_nodes.shape[0]:
            w.bl_nodes = _larger(w.bl_nodes, max(2 * w.bl_nodes.shape[0], int(c[mk.C_NODES]) + n_nodes))
        if c[mk.C_KIDS] + n_nodes > w.bl_kids.shape[0]:
            w.bl_kids = _larger(w.bl_kids, max(2 * w.bl_kids.shape[0], int(c[mk.C_KIDS]) + n_nodes))

    def publish(self, w: _Snapshot) -> None:
        """Make the fill copy ``w`` the snapshot readers see (call under ``lock``)."""
        self.snap = w


def _larger(a: np.ndarray, n: int) -> np.ndarray:
    if n <= a.shape[0]:
        return a
    b = np.zeros(n, a.dtype)
    b[:a.shape[0]] = a
    return b

