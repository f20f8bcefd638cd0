"""Thompson NFA over bytes, assembled from the regular-language IR with numpy.

Why Thompson (and not derivatives or Glushkov): it is linear in the size of the IR
(Glushkov's follow sets are quadratic for things like ``(a|b|...)*``), every IR node
becomes a handful of array appends, and bounded repeats are built by *tiling* the
arrays of one copy with offsets instead of re-walking the subtree ``n`` times.  The
epsilon edges cost nothing in the end because the subset construction
(:mod:`.kernels`) computes closures on the fly and keys DFA states by their
*important* NFA states only.

Fragments obey the usual Thompson discipline -- parents only add edges *out of* a
fragment's end and *into* its start -- which keeps composition exact even when a
start or end state sits on a loop.

Byte transitions carry a 256-bit mask (``uint64[4]``: bit ``b & 63`` of word
``b >> 6``).  :func:`prepare` turns the masks into the coarsest byte-class partition
the NFA distinguishes and lays everything out as CSR arrays for the kernels.
``And``/``Not``/``Embed`` nodes are built as DFAs first (through a callback) and then
embedded as fragments.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from .. import caching
from ..errors import LimitExceeded
from . import ir
from .kernels import csr_by_source
from .utf8 import utf8_sequences

_EMPTY_I32 = np.empty(0, np.int32)
_EMPTY_MASK = np.empty((0, 4), np.uint64)


def mask_from_bytes(bits: np.ndarray) -> np.ndarray:
    """bool[..., 256] -> uint64[..., 4] bit masks."""
    packed = np.packbits(bits.astype(np.bool_), axis=-1, bitorder="little")
    return np.ascontiguousarray(packed).view("<u8").astype(np.uint64)


def mask_from_ranges(ranges) -> np.ndarray:
    bits = np.zeros(256, np.bool_)
    for lo, hi in ranges:
        bits[lo:hi + 1] = True
    return mask_from_bytes(bits)


def bytes_of_masks(masks: np.ndarray) -> np.ndarray:
    """uint64[n, 4] -> bool[n, 256]."""
    as_u8 = np.ascontiguousarray(masks.astype("<u8")).view(np.uint8)
    return np.unpackbits(as_u8, axis=-1, bitorder="little").astype(np.bool_)


_SINGLE_BYTE = mask_from_bytes(np.eye(256, dtype=np.bool_))  # [256, 4]


@dataclass
class Fragment:
    """A piece of NFA in local numbering: states ``0..n-1``, entry ``start``, exit ``end``."""

    n: int
    start: int
    end: int
    t_src: np.ndarray
    t_dst: np.ndarray
    t_set: np.ndarray   # index into ``masks`` per transition
    masks: np.ndarray   # uint64[u, 4], distinct byte sets
    e_src: np.ndarray = field(default_factory=lambda: _EMPTY_I32)
    e_dst: np.ndarray = field(default_factory=lambda: _EMPTY_I32)


_FRAGMENTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # ByteDFA -> its Fragment


def dfa_fragment(dfa) -> Fragment:
    """A ByteDFA as a fragment: its states, plus one fresh end reached by epsilon from
    every accepting state.  Cached per (read-only) DFA: an embedded automaton is often added
    many times (an encoded character class in every position of a pattern)."""
    if not dfa.transitions.flags.writeable:
        try:
            hit = _FRAGMENTS.get(dfa)
        except TypeError:
            hit = None
        if hit is not None:
            return hit
        frag = _dfa_fragment(dfa)
        try:
            _FRAGMENTS[dfa] = frag
        except TypeError:
            pass
        return frag
    return _dfa_fragment(dfa)


def _dfa_fragment(dfa) -> Fragment:
    tr = dfa.transitions
    n = dfa.n_states
    src, cls = np.nonzero(tr >= 0)
    dst = tr[src, cls]
    bits = np.zeros((dfa.n_classes, 256), np.bool_)
    bits[dfa.byte_class, np.arange(256)] = True
    class_masks = mask_from_bytes(bits)
    acc = np.flatnonzero(dfa.accepting).astype(np.int32)
    return Fragment(
        n + 1, int(dfa.start), n,
        src.astype(np.int32), dst.astype(np.int32), cls.astype(np.int32), class_masks,
        acc, np.full(acc.shape[0], n, np.int32),
    )


@dataclass
class NFA:
    """A finished NFA: ``n`` states, one ``start``, one ``final``; flat arrays."""

    n: int
    start: int
    final: int
    t_src: np.ndarray
    t_dst: np.ndarray
    t_set: np.ndarray   # index into ``masks``
    masks: np.ndarray   # uint64[n_sets, 4], distinct
    e_src: np.ndarray
    e_dst: np.ndarray


class Builder:
    """Assembles a Thompson NFA for an IR node.

    ``dfa_of(node)`` must return the ByteDFA of a sub-node (used for And/Not, whose
    semantics need a deterministic automaton); ``charset_fragment(cs)`` the fragment
    of a non-ASCII CharSet; ``repeat_dfa(node)`` (optional) the ByteDFA of a Repeat node
    when it can be built without a subset construction, else None.  ``max_states``
    bounds the NFA size.
    """

    def __init__(self, dfa_of, charset_fragment, max_states: int = 2_000_000, repeat_dfa=None,
                 subtree_min: int | None = None):
        self.dfa_of = dfa_of
        self.charset_fragment = charset_fragment
        self.repeat_dfa = repeat_dfa  # Repeat node -> its ByteDFA built directly, or None (inline it)
        # sub-trees of at least this many IR nodes (not the root) are built as DFAs through dfa_of
        # and embedded: cached, so a big leaf (an encoded format, say) used in many places is
        # emitted once, and the fragment of a minimal DFA is far smaller than its Thompson NFA
        self.subtree_min = subtree_min
        self.root = None
        self.max_states = max_states
        self.n = 0
        self.t_parts: list = []  # (src, dst, set id)
        self.e_parts: list = []  # (src, dst)
        self.e_src: list = []    # pending single epsilon edges
        self.e_dst: list = []
        self.l_src: list = []    # pending byte transitions l_src[i] -> l_src[i] + 1 on byte l_byte[i]
        self.l_byte: list = []
        self.mask_ids: dict = {}  # 32-byte mask -> set id
        self.mask_list: list = []
        self.byte_ids = np.full(256, -1, np.int32)  # set id of each single-byte mask

    def _intern(self, masks: np.ndarray) -> np.ndarray:
        """Global set ids of distinct masks (uint64[u, 4])."""
        out = np.empty(masks.shape[0], np.int32)
        for i in range(masks.shape[0]):
            key = masks[i].tobytes()
            j = self.mask_ids.get(key)
            if j is None:
                j = self.mask_ids[key] = len(self.mask_list)
                self.mask_list.append(masks[i])
            out[i] = j
        return out

    def _byte_ids(self, byts: np.ndarray) -> np.ndarray:
        ids = self.byte_ids[byts]
        if (ids < 0).any():
            new = np.unique(byts[ids < 0])
            self.byte_ids[new] = self._intern(_SINGLE_BYTE[new])
            ids = self.byte_ids[byts]
        return ids

    # -- bookkeeping
    def _alloc(self, k: int) -> int:
        base = self.n
        self.n += k
        if self.n > self.max_states:
            raise LimitExceeded(
                f"the NFA needs more than {self.max_states} states",
                limit="max_nfa_states", value=self.max_states)
        return base

    def _eps(self, a: int, b: int) -> None:
        self.e_src.append(a)
        self.e_dst.append(b)

    def _flush(self) -> None:
        if self.e_src:
            self.e_parts.append((np.array(self.e_src, np.int32), np.array(self.e_dst, np.int32)))
            self.e_src = []
            self.e_dst = []
        if self.l_src:
            src = np.array(self.l_src, np.int32)
            self.t_parts.append((src, src + 1, self._byte_ids(np.array(self.l_byte, np.uint8))))
            self.l_src = []
            self.l_byte = []

    def _add_fragment(self, f: Fragment):
        base = self._alloc(f.n)
        if f.t_src.shape[0]:
            self.t_parts.append((f.t_src + base, f.t_dst + base, self._intern(f.masks)[f.t_set]))
        if f.e_src.shape[0]:
            self.e_parts.append((f.e_src + base, f.e_dst + base))
        return base + f.start, base + f.end

    def _literal(self, data: bytes):
        # kept in Python lists until the next flush: a key or an escape is a few bytes, and
        # numpy's per-call cost was most of the time of schemas with hundreds of them
        k = len(data)
        base = self._alloc(k + 1)
        self.l_src.extend(range(base, base + k))
        self.l_byte.extend(data)
        return base, base + k

    # -- the IR walk
    def emit(self, node):
        if isinstance(node, ir.CharSet):
            rs = node.ranges
            if len(rs) == 1 and rs[0][0] == rs[0][1] and not 0xD800 <= rs[0][0] <= 0xDFFF:
                return self._literal(chr(rs[0][0]).encode("utf-8"))
            if not rs:
                return self._alt(())
            if rs[-1][1] < 0x80:
                return self._add_fragment(_ascii_fragment(rs))
            return self._add_fragment(self.charset_fragment(node))
        if self.subtree_min is not None and node is not self.root and isinstance(node, (ir.Seq, ir.Alt, ir.Repeat)) \
                and ir.size(node) >= self.subtree_min:
            return self._add_fragment(dfa_fragment(self.dfa_of(node)))
        if isinstance(node, ir.Seq):
            return self._seq(node.items)
        if isinstance(node, ir.Alt):
            return self._alt(node.items)
        if isinstance(node, ir.Repeat):
            d = self.repeat_dfa(node) if self.repeat_dfa is not None else None
            if d is not None:
                return self._add_fragment(dfa_fragment(d))
            return self._repeat(node.item, node.min, node.max)
        if isinstance(node, ir.ByteSet):
            if not node.ranges:
                return self._alt(())
            base = self._alloc(2)
            self.t_parts.append((np.array([base], np.int32), np.array([base + 1], np.int32),
                                 self._intern(mask_from_ranges(node.ranges)[None, :])))
            return base, base + 1
        if isinstance(node, (ir.And, ir.Not, ir.Embed)):
            return self._add_fragment(dfa_fragment(self.dfa_of(node)))
        raise TypeError(f"not an IR node: {node!r}")

    def _seq(self, items):
        if not items:
            s = self._alloc(1)
            return s, s
        first = last = None
        cps = [ir.single_code_point(x) for x in items]
        i = 0
        while i < len(items):
            it = items[i]
            # Runs of single code points become one byte chain.
            j = i
            while j < len(items) and cps[j] is not None:
                j += 1
            if j - i >= 2:
                s, e = self._literal("".join(map(chr, cps[i:j])).encode("utf-8"))
                i = j
            else:
                s, e = self.emit(it)
                i += 1
            if first is None:
                first = s
            else:
                self._eps(last, s)
            last = e
        return first, last

    def _alt(self, items):
        s = self._alloc(2)
        e = s + 1
        texts = []
        for it in items:
            text = ir.literal_text(it)
            if text is not None:
                texts.append(text)
                continue
            a, b = self.emit(it)
            self._eps(s, a)
            self._eps(b, e)
        if texts:
            self._literal_branches(texts, s, e)
        return s, e

    def _literal_branches(self, texts, s, e):
        """Literal alternatives (enums, keyword lists, a character's escapes) as byte chains,
        vectorised when there are many."""
        if len(texts) <= _FEW_BRANCHES:
            for t in texts:
                a, b = self._literal(t.encode("utf-8"))
                self._eps(s, a)
                self._eps(b, e)
            return
        data = [t.encode("utf-8") for t in texts]
        lens = np.fromiter(map(len, data), np.int64, len(data))
        base = self._alloc(int(lens.sum()) + len(data))
        starts = base + np.concatenate(([0], np.cumsum(lens + 1)[:-1]))
        ends = starts + lens
        chain = np.repeat(np.arange(len(data)), lens)
        src = (base + np.arange(int(lens.sum())) + chain).astype(np.int32)
        if src.shape[0]:
            byts = np.frombuffer(b"".join(data), np.uint8)
            self.t_parts.append((src, src + 1, self._byte_ids(byts)))
        self._flush()
        k = len(data)
        self.e_parts.append((np.full(k, s, np.int32), starts.astype(np.int32)))
        self.e_parts.append((ends.astype(np.int32), np.full(k, e, np.int32)))

    def _repeat(self, item, lo: int, hi):
        if hi is not None and hi < lo:
            return self._alt(())
        if hi == 0:
            s = self._alloc(1)
            return s, s
        copies = lo if hi is None else hi
        copies = max(copies, 1)
        self._flush()
        mark_t, mark_e, mark_n = len(self.t_parts), len(self.e_parts), self.n
        s0, e0 = self.emit(item)
        self._flush()
        size = self.n - mark_n
        if copies > 1:
            self._tile(mark_t, mark_e, mark_n, size, copies)
        starts = [s0 + i * size for i in range(copies)]
        ends = [e0 + i * size for i in range(copies)]
        if hi is None:
            if lo == 0:
                # Star: a fresh hub state, loop through the single copy.
                h = self._alloc(1)
                self._eps(h, starts[0])
                self._eps(ends[0], h)
                return h, h
            for i in range(copies - 1):
                self._eps(ends[i], starts[i + 1])
            self._eps(ends[-1], starts[-1])  # the last mandatory copy repeats (X+)
            return starts[0], ends[-1]
        # Bounded: copies >= lo are optional; a fresh gate state before each lets the
        # match stop there (never an edge out of a start, which may sit on a loop).
        exit_ = self._alloc(1)
        entry = None
        prev_end = None
        for i in range(copies):
            if i >= lo:
                g = self._alloc(1)
                self._eps(g, starts[i])
                self._eps(g, exit_)
                target = g
            else:
                target = starts[i]
            if prev_end is None:
                entry = target
            else:
                self._eps(prev_end, target)
            prev_end = ends[i]
        self._eps(prev_end, exit_)
        return entry, exit_

    def _tile(self, mark_t, mark_e, mark_n, size, copies):
        extra = size * (copies - 1)
        self._alloc(extra)
        offs = (np.arange(1, copies, dtype=np.int64) * size).astype(np.int32)
        if len(self.t_parts) > mark_t:
            ts = np.concatenate([p[0] for p in self.t_parts[mark_t:]])
            td = np.concatenate([p[1] for p in self.t_parts[mark_t:]])
            tm = np.concatenate([p[2] for p in self.t_parts[mark_t:]])
            self.t_parts.append(((ts[None, :] + offs[:, None]).ravel(),
                                 (td[None, :] + offs[:, None]).ravel(),
                                 np.tile(tm, copies - 1)))
        if len(self.e_parts) > mark_e:
            es = np.concatenate([p[0] for p in self.e_parts[mark_e:]])
            ed = np.concatenate([p[1] for p in self.e_parts[mark_e:]])
            self.e_parts.append(((es[None, :] + offs[:, None]).ravel(),
                                 (ed[None, :] + offs[:, None]).ravel()))

    def finish(self, node) -> NFA:
        self.root = node
        s, e = self.emit(node)
        self._flush()
        t = self.t_parts
        ep = self.e_parts
        return NFA(
            self.n, s, e,
            np.concatenate([p[0] for p in t]).astype(np.int32) if t else _EMPTY_I32,
            np.concatenate([p[1] for p in t]).astype(np.int32) if t else _EMPTY_I32,
            np.concatenate([p[2] for p in t]).astype(np.int32) if t else _EMPTY_I32,
            np.array(self.mask_list, np.uint64).reshape(-1, 4),
            np.concatenate([p[0] for p in ep]).astype(np.int32) if ep else _EMPTY_I32,
            np.concatenate([p[1] for p in ep]).astype(np.int32) if ep else _EMPTY_I32,
        )


_FEW_BRANCHES = 32  # literal alternatives built in Python below this many (numpy's fixed cost)


@lru_cache(maxsize=1024)
def _ascii_fragment(ranges) -> Fragment:
    return Fragment(2, 0, 1, np.zeros(1, np.int32), np.ones(1, np.int32), np.zeros(1, np.int32),
                    mask_from_ranges(ranges)[None, :])


def charset_nfa(cs: ir.CharSet) -> NFA:
    """A small NFA for one CharSet: a chain per UTF-8 byte-range sequence, sharing the
    start and the end.  Determinised and minimised once, then cached by the caller."""
    seqs = utf8_sequences(cs.ranges)
    src, dst, masks = [], [], []
    n = 2
    for sq in seqs:
        prev = 0
        for i, (lo, hi) in enumerate(sq):
            if i == len(sq) - 1:
                nxt = 1
            else:
                nxt = n
                n += 1
            src.append(prev)
            dst.append(nxt)
            masks.append((lo, hi))
            prev = nxt
    distinct = sorted(set(masks))
    index = {r: i for i, r in enumerate(distinct)}
    bits = np.zeros((len(distinct), 256), np.bool_)
    for r, (lo, hi) in enumerate(distinct):
        bits[r, lo:hi + 1] = True
    return NFA(n, 0, 1, np.array(src, np.int32), np.array(dst, np.int32),
               np.array([index[m] for m in masks], np.int32),
               mask_from_bytes(bits) if distinct else _EMPTY_MASK, _EMPTY_I32, _EMPTY_I32)


@dataclass
class Prepared:
    """An NFA laid out for :func:`kernels.subset_run`."""

    n_classes: int
    byte_class: np.ndarray  # int32[256]
    t_ptr: np.ndarray
    t_set: np.ndarray
    t_dst: np.ndarray
    sc_ptr: np.ndarray
    sc_cls: np.ndarray
    e_ptr: np.ndarray
    e_dst: np.ndarray
    important: np.ndarray
    start: int
    final: int


def prepare(nfa: NFA) -> Prepared:
    """Coarsest byte classes + CSR layout of an NFA."""
    sets = nfa.masks
    n_sets = sets.shape[0]
    if n_sets:
        bits = bytes_of_masks(sets)                      # [n_sets, 256]
        cols = np.packbits(bits.T, axis=1)               # [256, ceil(n_sets/8)] byte signatures
        _, first, inv = np.unique(cols, axis=0, return_index=True, return_inverse=True)
        inv = inv.ravel()
        order = np.argsort(first, kind="stable")         # class ids by smallest byte
        rank = np.empty_like(order)
        rank[order] = np.arange(order.shape[0])
        byte_class = rank[inv].astype(np.int32)
        reps = first[order]                              # one byte per class
        sc = bits[:, reps]                               # [n_sets, n_classes]
        n_classes = int(order.shape[0])
        rows, cls = np.nonzero(sc)
        sc_ptr = np.zeros(n_sets + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=n_sets), out=sc_ptr[1:])
        sc_cls = cls.astype(np.int32)
    else:
        byte_class = np.zeros(256, np.int32)
        n_classes = 1
        sc_ptr = np.zeros(1, np.int64)
        sc_cls = _EMPTY_I32
    n = nfa.n
    t_ptr, t_set, t_dst = csr_by_source(nfa.t_src, nfa.t_set, nfa.t_dst, n)
    e_ptr, e_dst, _ = csr_by_source(nfa.e_src, nfa.e_dst, nfa.e_dst, n)
    important = t_ptr[1:] > t_ptr[:-1]
    important[nfa.final] = True
    return Prepared(
        n_classes, byte_class, t_ptr, t_set, t_dst,
        sc_ptr, sc_cls, e_ptr, e_dst, important,
        nfa.start, nfa.final,
    )


caching.register_function("automaton.ascii_fragments", _ascii_fragment)
