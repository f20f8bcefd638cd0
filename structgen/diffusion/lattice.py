"""Earley charts over a token *lattice*: the grammar engine's recogniser run on a canvas whose
holes each stand for one token of the vocabulary (the grammar half of :func:`completable`).

The engine's parser (:mod:`structgen.cfg.earley`) steps bytes through lexer DFAs and
creates an Earley set wherever a lexeme may end, keeping every lexing.  A hole is the
regular language "any one token": the union of the token trie's words.  Earley parsing is
exact on a word lattice (an acyclic input automaton) when every lattice node has its own
items and items name their origin node; here the lattice is the token trie below the
current point, its leaves joined again after the hole.  :func:`hole_walk` walks the trie
depth first with the engine's own ``step_byte`` (a dead byte skips the whole subtree), and at
every node where tokens end it *joins* that point into one output chart: the Earley sets the
path created, keeping only those its frontier can still read (origins, transitively) and
renumbered after the sets already in the output, and its frontier pairs.  The joined chart's
language (what its frontier lexemes can still complete) is exactly the union over the
fillings of the hole: each set is read only through origins of its own path, so no parse
mixes two fillings, and every filling's parse is there.  Identical joined parts (most
fillings inside a string or a number leave the same state) are stored once: a canonical
encoding (reachable sets in order, items sorted, frontier sorted) keyed by a hash and
compared exactly.

The walk runs over the *class trie* of the engine (:func:`class_trie`): each token's bytes
replaced by the representative of their class under the lexer's byte partition (two bytes are
in one class when every lexer state moves the same way on both).  ``step_byte`` reads a byte
only through the lexer's transition table, so every token of a class-trie path leaves the same
point, and the walk is the same walk over far fewer nodes (gpt2's 98k trie nodes are 1.3k for
the shipped arithmetic grammar, whose names are any lowercase letters).  Below a path the
children are grouped again by how the lexer states of *that* path's frontier move on their
byte (one step per group): where keywords keep letters apart in the classes, a path inside a
name that no keyword continues still steps all its letters as one.

Everything is a flat array; buffers that run out make the kernel return a status naming
them, and :class:`Chart` grows them and walks again (nothing is committed before success).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .. import caching
from ..automaton.product import shared_classes
from ..kernels.graph import reverse_csr
from ..cfg import earley
from ..errors import LimitExceeded
from ..vocab.trie import TokenTrie

OK = 0
WORK_FULL = 1       # the work chart, frontier stack or completion list
OUT_ITEMS_FULL = 2
OUT_SETS_FULL = 3
OUT_FRONT_FULL = 4
TABLE_FULL = 5      # the table of joined sets
ENC_FULL = 6        # the encoding buffer (one set's items)
WORK_LIMIT = 7      # more trie nodes than the caller allows

_SHORTEST = caching.LRU(64, name="diffusion.shortest")  # engine -> (minrest, lexdist)
_CLASS_TRIES = caching.LRU(16, name="diffusion.class_tries")  # engine -> TokenTrie over byte classes
_SELF = np.int64(0x7FFFFFFF)  # origin code of an item begun in its own set (other origins are < 2**30)


@njit(cache=True, nogil=True)
def _hash_seq(enc, n):
    h = np.uint64(1469598103934665603)
    for i in range(n):
        h ^= np.uint64(enc[i] & 0x7FFFFFFFFFFFFFFF)
        h *= np.uint64(1099511628211)
        h ^= h >> np.uint64(29)
    return np.int64(h & np.uint64(0x7FFFFFFFFFFFFFFF))


@njit(cache=True, nogil=True)
def _front_add(fkeys, out_front, nf, g, o):
    """Add pair (g, o) to the output frontier (hash set ``fkeys`` of ``g << 32 | o``); returns the
    new count, -1 when full."""
    key = (np.int64(g) << 32) | np.int64(o)
    mask = fkeys.shape[0] - 1
    h = (key * np.int64(0x9E3779B1)) & mask
    while fkeys[h] != -1:
        if fkeys[h] == key:
            return nf
        h = (h + 1) & mask
    if nf >= out_front.shape[0] or 2 * (nf + 1) > fkeys.shape[0]:
        return -1
    fkeys[h] = key
    out_front[nf, 0] = g
    out_front[nf, 1] = o
    return nf + 1


@njit(cache=True, nogil=True)
def _join(items, set_off, n0, ns, front, nf, out_items, out_set_off, out_ns0, out_ns, out_front, out_nf, fkeys,
          reach, cmap, enc, skeys, svals):
    """Join the point (sets ``n0..ns-1`` of the work chart, frontier ``front[:nf]``) into the
    output chart, whose sets from ``out_ns0`` on are hash-consed (``skeys``/``svals``: hash ->
    set).  Returns ``(status, out_ns, out_nf)``."""
    k = ns - n0
    for s in range(k):
        reach[s] = 0
    any_new = False
    for q in range(nf):
        o = front[q, 1]
        if o >= n0:
            reach[o - n0] = 1
            any_new = True
    if any_new:
        for s in range(k - 1, -1, -1):  # origins point backwards: one pass closes reachability
            if reach[s]:
                for p in range(set_off[n0 + s], set_off[n0 + s + 1]):
                    o = items[p, 1]
                    if o >= n0 and o != n0 + s:
                        reach[o - n0] = 1
        smask = skeys.shape[0] - 1
        for s in range(k):
            if not reach[s]:
                continue
            lo, hi = set_off[n0 + s], set_off[n0 + s + 1]
            m = hi - lo
            if m > enc.shape[0]:
                return ENC_FULL, out_ns, out_nf
            for i in range(m):
                o = items[lo + i, 1]
                code = _SELF if o == n0 + s else (np.int64(o) if o < n0 else np.int64(cmap[o - n0]))
                enc[i] = (np.int64(items[lo + i, 0]) << 32) | code
            enc[:m] = np.sort(enc[:m])
            h = _hash_seq(enc, m)
            slot = h & smask
            found = -1
            while skeys[slot] != -1:
                if skeys[slot] == h:
                    t = svals[slot]
                    tlo, thi = out_set_off[t], out_set_off[t + 1]
                    if thi - tlo == m:
                        same = True
                        for i in range(m):
                            o = out_items[tlo + i, 1]
                            code = _SELF if o == t else np.int64(o)
                            if ((np.int64(out_items[tlo + i, 0]) << 32) | code) != enc[i]:
                                same = False
                                break
                        if same:
                            found = t
                            break
                slot = (slot + 1) & smask
            if found < 0:
                if 2 * (out_ns - out_ns0 + 1) > skeys.shape[0]:
                    return TABLE_FULL, out_ns, out_nf
                if out_ns + 2 > out_set_off.shape[0]:
                    return OUT_SETS_FULL, out_ns, out_nf
                base = out_set_off[out_ns]
                if base + m > out_items.shape[0]:
                    return OUT_ITEMS_FULL, out_ns, out_nf
                for i in range(m):
                    v = enc[i]
                    code = v & 0xFFFFFFFF
                    out_items[base + i, 0] = np.int32(v >> 32)
                    out_items[base + i, 1] = np.int32(out_ns if code == _SELF else code)
                out_set_off[out_ns + 1] = base + m
                skeys[slot] = h
                svals[slot] = out_ns
                found = out_ns
                out_ns += 1
            cmap[s] = found
    for q in range(nf):
        o = front[q, 1]
        o2 = o if o < n0 else cmap[o - n0]
        out_nf = _front_add(fkeys, out_front, out_nf, front[q, 0], o2)
        if out_nf < 0:
            return OUT_FRONT_FULL, out_ns, out_nf
    return OK, out_ns, out_nf


@njit(cache=True, nogil=True)
def _expand(lv_nodes, lo, hi, d, front, nf, trans, node_byte, node_end, dbase, lv_gstart, lv_rep, gmap, ghash,
            grep, gcount, gl, gstamp, touched):
    """Group the children of the trie nodes ``lv_nodes[lo:hi]`` (depth ``d``) by how the lexer
    states of ``front[:nf]`` move on their byte, and lay the groups out for depth ``d + 1``
    (nodes in ``lv_nodes`` from ``dbase[d + 1]``, starts and representative bytes at
    ``dbase[d + 1] + d + 1``).  ``gstamp`` (one entry per lexer state, and a counter last)
    marks the states already listed.  Returns the number of groups."""
    gstamp[-1] += 1
    st = gstamp[-1]
    k = 0
    for q in range(nf):  # the distinct lexer states: the step reads a byte only through them
        g = front[q, 0]
        if gstamp[g] != st:
            gstamp[g] = st
            gl[k] = g
            k += 1
    ng = 0
    nt = 0
    for x in range(lo, hi):
        u = lv_nodes[x]
        c = u + 1
        while c < node_end[u]:
            b = node_byte[c]
            gi = gmap[b]
            if gi < 0:
                h = np.int64(1469598103934665603)
                for i in range(k):
                    h = (h ^ np.int64(trans[gl[i], b] + 2)) * np.int64(1099511628211)
                for r in range(ng):
                    if ghash[r] == h:
                        rb = grep[r]
                        same = True
                        for i in range(k):
                            if trans[gl[i], b] != trans[gl[i], rb]:
                                same = False
                                break
                        if same:
                            gi = r
                            break
                if gi < 0:
                    gi = ng
                    grep[ng] = b
                    ghash[ng] = h
                    gcount[ng] = 0
                    ng += 1
                gmap[b] = gi
                touched[nt] = b
                nt += 1
            gcount[gi] += 1
            c = node_end[c]
    base = dbase[d + 1] + d + 1
    pos = dbase[d + 1]
    for r in range(ng):
        lv_gstart[base + r] = pos
        lv_rep[base + r] = grep[r]
        pos += gcount[r]
        gcount[r] = lv_gstart[base + r]  # now the fill cursor
    lv_gstart[base + ng] = pos
    for x in range(lo, hi):
        u = lv_nodes[x]
        c = u + 1
        while c < node_end[u]:
            gi = gmap[node_byte[c]]
            lv_nodes[gcount[gi]] = c
            gcount[gi] += 1
            c = node_end[c]
    for i in range(nt):
        gmap[touched[i]] = -1
    return ng


@njit(cache=True, nogil=True)
def hole_walk(items, set_off, n0, front, nfront, fst, comp,
              NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, final_dr, trans, gacc, gout, gterm, tstart,
              mark, stampbox, seen, node_byte, node_end, tok_ptr, tok_ids, dbase, allow,
              out_items, out_set_off, out_ns, out_front, fkeys, reach, cmap, enc, skeys, svals, max_nodes,
              max_depth, max_work):
    """One hole: every token of the trie from the point (``n0`` sets, frontier ``front``), joined
    (only tokens ``t`` with ``allow[t]`` when ``allow`` is not empty; no trie path past
    ``max_depth`` bytes, the longest allowed token).

    The walk is depth first over *groups* of trie nodes: the children of a group whose bytes
    every lexer state of the group's frontier moves alike on are one group (one ``step_byte``,
    then their children are grouped again), since the step reads a byte only through those
    states' transitions.  Inside a name, where every letter moves the lexer alike, the whole
    subtree below collapses to a few paths.  ``dbase[d]`` is where depth ``d``'s trie nodes
    start in depth order (``dbase[D]`` = the node count).

    The work chart ``items``/``set_off`` holds the point's sets below ``n0`` and is scratch
    above; ``fst[d]`` is the frontier after the ``d`` bytes of the current path.  The output
    chart must hold the point's sets already (``out_ns`` of them); ``fkeys`` (all -1) is the
    output frontier's hash set, ``skeys`` (all -1) the table of the sets joined.  Returns
    ``(status, out_ns, out_nf, accepting, nodes, work)``: ``accepting`` whether some filling leaves a
    complete sentence; ``nodes`` the groups stepped; ``work`` the Earley items and frontier
    points those steps made (WORK_LIMIT past ``max_work``)."""
    for q in range(nfront):
        fst[0, q, 0] = front[q, 0]
        fst[0, q, 1] = front[q, 1]
    D = fst.shape[0]
    nsets = np.empty(D, np.int64)
    nfs = np.empty(D, np.int64)
    nsets[0] = n0
    nfs[0] = nfront
    n = node_byte.shape[0]
    lv_nodes = np.empty(n, np.int32)
    lv_gstart = np.empty(n + D + 1, np.int64)
    lv_rep = np.empty(n + D + 1, np.uint8)
    lv_ng = np.zeros(D + 1, np.int64)
    lv_gi = np.zeros(D + 1, np.int64)
    gmap = np.full(256, -1, np.int64)
    ghash = np.empty(256, np.int64)
    grep = np.empty(256, np.uint8)
    gcount = np.empty(256, np.int64)
    gl = np.empty(max(fst.shape[1], 1), np.int64)
    gstamp = np.zeros(trans.shape[0] + 1, np.int64)
    touched = np.empty(256, np.uint8)
    out_ns0 = out_ns
    out_nf = 0
    acc_any = False
    nodes = 0
    work = 0
    lv_nodes[0] = 0  # the root, depth 0
    if nfront == 0 or max_depth < 1:
        return OK, out_ns, out_nf, acc_any, nodes, work
    lv_ng[1] = _expand(lv_nodes, 0, 1, 0, fst[0], nfront, trans, node_byte, node_end, dbase, lv_gstart, lv_rep,
                       gmap, ghash, grep, gcount, gl, gstamp, touched)
    lv_gi[1] = 0
    d = 1
    while d >= 1:
        if lv_gi[d] >= lv_ng[d]:
            d -= 1
            continue
        gbase = dbase[d] + d + lv_gi[d]
        lv_gi[d] += 1
        lo, hi = lv_gstart[gbase], lv_gstart[gbase + 1]
        nodes += 1
        if nodes > max_nodes or work > max_work:
            return WORK_LIMIT, out_ns, out_nf, acc_any, nodes, work
        nf2, ns2, acc = earley.step_byte(lv_rep[gbase], items, set_off, nsets[d - 1], fst[d - 1], nfs[d - 1],
                                         fst[d], comp, NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable,
                                         final_dr, trans, gacc, gout, gterm, tstart, mark, stampbox, seen)
        if nf2 < 0:
            return WORK_FULL, out_ns, out_nf, acc_any, nodes, work
        work += nf2 + set_off[ns2] - set_off[nsets[d - 1]]
        if nf2 == 0 and not acc:
            continue
        nsets[d] = ns2
        nfs[d] = nf2
        ends = False
        for x in range(lo, hi):
            c = lv_nodes[x]
            if tok_ptr[c + 1] > tok_ptr[c]:
                if allow.shape[0] == 0:
                    ends = True
                    break
                for q in range(tok_ptr[c], tok_ptr[c + 1]):
                    if allow[tok_ids[q]]:
                        ends = True
                        break
                if ends:
                    break
        if ends:
            acc_any = acc_any or acc
            st, out_ns, out_nf = _join(items, set_off, n0, ns2, fst[d], nf2, out_items, out_set_off, out_ns0,
                                       out_ns, out_front, out_nf, fkeys, reach, cmap, enc, skeys, svals)
            if st != OK:
                return st, out_ns, out_nf, acc_any, nodes, work
        if d < max_depth and nf2 > 0:
            lv_ng[d + 1] = _expand(lv_nodes, lo, hi, d, fst[d], nf2, trans, node_byte, node_end, dbase, lv_gstart,
                                   lv_rep, gmap, ghash, grep, gcount, gl, gstamp, touched)
            lv_gi[d + 1] = 0
            d += 1
    return OK, out_ns, out_nf, acc_any, nodes, work


_ALL = np.zeros(0, np.uint8)  # (no filter)
SEEN_SLOTS = 1 << 15  # duplicate-table slots: sets of up to half as many items are deduplicated by hashing


def _pow2(n: int) -> int:
    return 1 << max(4, int(n - 1).bit_length())


class Chart:
    """A point of the grammar engine's parse over a canvas: the Earley chart, the frontier and
    the accepting flag, of one input or of the join of many (after holes).

    ``step_bytes`` reads fixed bytes (a token of the canvas), ``step_hole`` one hole.  Both
    return False when nothing survives (the point is then unchanged).  ``max_nodes`` bounds
    the trie nodes one hole may step, ``max_total_nodes`` those of all holes, ``max_work`` the
    Earley items and frontier points all hole walks make (the time they take), ``max_items`` the
    chart; past them
    :class:`~structgen.errors.LimitExceeded`."""

    def __init__(self, engine, items, set_off, n_sets, front, acc, *, max_nodes: int, max_items: int,
                 max_total_nodes: int | None = None, max_work: int | None = None):
        self.engine = engine
        self.ga = tuple(engine.grammar_arrays)
        tb = engine.tables
        self.items = np.ascontiguousarray(items, np.int32)
        self.set_off = np.ascontiguousarray(set_off, np.int32)
        self.n_sets = int(n_sets)
        self.front = np.ascontiguousarray(front, np.int32).reshape(-1, 2)
        self.acc = bool(acc)
        self.max_nodes = int(max_nodes)
        self.max_items = int(max_items)
        self.max_total_nodes = None if max_total_nodes is None else int(max_total_nodes)
        self.max_work = None if max_work is None else int(max_work)
        self.mark = np.zeros(2 * max(tb.n_dr, 1), np.int64)
        self.stamp = np.zeros(2, np.int64)
        self.seen = None  # the hole walks' duplicate table (earley.add_item), made by the first hole
        self.comp = np.empty((256, 2), np.int32)
        self.fcap = max(64, 2 * self.front.shape[0])
        self.fbuf = np.empty((2, self.fcap, 2), np.int32)
        self.nodes = 0  # trie nodes stepped by holes so far (work counter)
        self.work = 0  # Earley items and frontier points those steps made
        self._grew = (1024, 256, 256, 1024)  # the last hole's output growth (items, sets) and table sizes
        self._reserve(self.items.shape[0] + 1024, self.set_off.shape[0] + 64)

    @classmethod
    def start(cls, engine, **limits) -> "Chart":
        """The point before any byte (set 0: the start symbol's predictions)."""
        tb = engine.tables
        items = np.empty((1024, 2), np.int32)
        set_off = np.zeros(257, np.int32)
        front = np.empty((max(64, len(tb.term_names) + 1), 2), np.int32)
        mark = np.zeros(2 * max(tb.n_dr, 1), np.int64)
        stamp = np.zeros(2, np.int64)
        while True:
            nf, acc = earley.init_chart(items, set_off, front, tb.NN, tb.start_nt, tb.dr_next, tb.dr_lhs, tb.nt_ptr,
                                        tb.nt_dr0, tb.nullable, tb.final_dr, tb.tstart, mark, stamp)
            if nf >= 0:
                break
            items = np.empty((items.shape[0] * 4, 2), np.int32)
            front = np.empty((front.shape[0] * 4, 2), np.int32)
        return cls(engine, items[:set_off[1]], set_off[:2], 1, front[:nf], acc, **limits)

    def _reserve(self, n_items: int, n_sets: int) -> None:
        """Room for ``n_items`` items and ``n_sets`` sets (contents kept)."""
        if n_items > self.max_items:
            raise LimitExceeded(f"the completability chart needs {n_items} items", "max_items", self.max_items)
        used = int(self.set_off[self.n_sets])
        if self.items.shape[0] < n_items:
            items = np.empty((n_items, 2), np.int32)
            items[:used] = self.items[:used]
            self.items = items
        if self.set_off.shape[0] < n_sets:
            so = np.zeros(n_sets, np.int32)
            so[:self.n_sets + 1] = self.set_off[:self.n_sets + 1]
            self.set_off = so

    def _grow_work(self) -> None:
        self._reserve(2 * self.items.shape[0], 2 * self.set_off.shape[0])
        self.fcap *= 2
        if self.fcap > 1 << 16:
            raise LimitExceeded("the completability frontier keeps growing", "frontier", self.fcap)
        self.fbuf = np.empty((2, self.fcap, 2), np.int32)
        self.comp = np.empty((2 * self.comp.shape[0], 2), np.int32)

    def min_bytes(self) -> int:
        """The fewest bytes after which this point can be a complete sentence (a large number
        when it never can): :func:`min_completion`."""
        tb = self.engine.tables
        key = self.engine
        hit = _SHORTEST.get(key)
        if hit is None:
            lexdist = _lexer_distances(tb.trans, tb.gacc)
            minrest = _rest_lengths(tb.NN, tb.dr_next, tb.dr_lhs, tb.nt_ptr, tb.nt_dr0, tb.tstart, lexdist)
            hit = (minrest, lexdist)
            _SHORTEST.put(key, hit)
        minrest, lexdist = hit
        return int(min_completion(self.items, self.set_off, self.n_sets, self.front, self.front.shape[0], self.acc,
                                  tb.NN, tb.dr_next, tb.dr_lhs, tb.start_nt, tb.gterm, minrest, lexdist))

    @property
    def alive(self) -> bool:
        return self.acc or self.front.shape[0] > 0

    def step_bytes(self, data: np.ndarray) -> bool:
        if data.shape[0] == 0:
            return self.alive
        while True:
            if self.front.shape[0] > self.fcap:
                self._grow_work()
                continue
            self._reserve(int(self.set_off[self.n_sets]) + 1024, self.n_sets + data.shape[0] + 2)
            st, ns, nf, which, acc = earley.step_bytes(data, self.items, self.set_off, self.n_sets, self.front,
                                                       self.front.shape[0], self.fbuf, self.comp, *self.ga,
                                                       self.mark, self.stamp)
            if st >= 0:
                break
            self._grow_work()
        if st != 1:
            return False
        self.n_sets, self.front, self.acc = int(ns), self.fbuf[which, :nf].copy(), bool(acc)
        return True

    def step_hole(self, allow: np.ndarray | None = None) -> bool:
        """Join every token after the current point (see :func:`hole_walk`); with ``allow`` (bool
        per token id) only those it allows."""
        trie, dbase = class_trie(self.engine)
        if self.seen is None:
            self.seen = np.zeros(2 * SEEN_SLOTS, np.int64)
        if allow is None:
            allow, longest = _ALL, int(trie.max_depth)
        else:
            allow = np.ascontiguousarray(allow, np.uint8)
            longest = _longest_allowed(trie, allow)
        depth = int(trie.max_depth) + 2
        used = int(self.set_off[self.n_sets])
        # output buffers sized from the last hole (a run of holes grows the joined chart each time;
        # a buffer found too small costs a whole walk again)
        grew = self._grew
        out_items_n = 2 * used + max(1024, 4 * grew[0])
        out_sets_n = 2 * self.n_sets + max(256, 4 * grew[1])
        out_front_n = max(256, 4 * self.front.shape[0])
        table_n, enc_n = grew[2], grew[3]
        # the work chart holds the point's sets and one scratch set per byte of the trie path
        widest = int(np.diff(self.set_off[:self.n_sets + 1]).max(initial=0))
        self._reserve(used + max(1024, 4 * grew[0], 2 * depth * widest), 2 * self.n_sets + depth + 2)
        while True:
            fcap = max(self.fcap, self.front.shape[0])
            if depth * fcap > 1 << 24:
                raise LimitExceeded("the completability frontier keeps growing", "frontier", fcap)
            fst = np.empty((depth, fcap, 2), np.int32)
            out_items = np.empty((out_items_n, 2), np.int32)
            out_items[:used] = self.items[:used]
            out_set_off = np.zeros(out_sets_n, np.int32)
            out_set_off[:self.n_sets + 1] = self.set_off[:self.n_sets + 1]
            out_front = np.empty((out_front_n, 2), np.int32)
            fkeys = np.full(_pow2(2 * out_front_n), -1, np.int64)
            reach = np.empty(depth, np.uint8)
            cmap = np.empty(depth, np.int64)
            enc = np.empty(enc_n, np.int64)
            skeys = np.full(_pow2(2 * table_n), -1, np.int64)
            svals = np.zeros(skeys.shape[0], np.int64)
            budget = self.max_nodes
            if self.max_total_nodes is not None:
                budget = min(budget, self.max_total_nodes - self.nodes)
            work_left = (1 << 62) if self.max_work is None else self.max_work - self.work
            st, out_ns, out_nf, acc, nodes, work = hole_walk(
                self.items, self.set_off, self.n_sets, self.front, self.front.shape[0], fst, self.comp, *self.ga,
                self.mark, self.stamp, self.seen, trie.node_byte, trie.node_end, trie.tok_ptr, trie.tok_ids, dbase,
                allow,
                out_items, out_set_off, self.n_sets, out_front, fkeys, reach, cmap, enc, skeys, svals, budget,
                longest, work_left)
            if st == OK:
                break
            if st == WORK_LIMIT:
                if work > work_left:
                    raise LimitExceeded(f"the holes' walks made more than {self.max_work} Earley items and points",
                                        "max_work", self.max_work)
                if budget < self.max_nodes:
                    raise LimitExceeded(f"the holes' token walks passed {self.max_total_nodes} trie nodes",
                                        "max_total_nodes", self.max_total_nodes)
                raise LimitExceeded(f"a hole's token walk passed {budget} trie nodes", "max_nodes", budget)
            if st == WORK_FULL:
                self._grow_work()
            elif st == OUT_ITEMS_FULL:
                out_items_n *= 4
            elif st == OUT_SETS_FULL:
                out_sets_n *= 4
            elif st == OUT_FRONT_FULL:
                out_front_n *= 4
            elif st == TABLE_FULL:
                table_n *= 4
            else:  # ENC_FULL
                enc_n *= 4
            if out_items_n > self.max_items:
                raise LimitExceeded("the joined chart after a hole is too large", "max_items", self.max_items)
        self.nodes += int(nodes)
        self.work += int(work)
        self._grew = (int(out_set_off[out_ns]) - used, int(out_ns) - self.n_sets, table_n, enc_n)
        if out_nf == 0 and not acc:
            return False
        self.items, self.set_off, self.n_sets = out_items, out_set_off, int(out_ns)
        self.front, self.acc = out_front[:out_nf].copy(), bool(acc)
        if self.front.shape[0] > self.fcap:
            self.fcap = 2 * self.front.shape[0]
            self.fbuf = np.empty((2, self.fcap, 2), np.int32)
        self._reserve(int(self.set_off[self.n_sets]) + 1024, self.n_sets + 64)
        return True


def byte_classes(trans: np.ndarray) -> np.ndarray:
    """``rep[b]``: the smallest byte that every state of the lexer table ``trans`` (states x 256)
    moves on exactly as it moves on ``b`` (each state's row is a byte partition to refine)."""
    bc, reps = shared_classes(trans)
    return np.asarray(reps, np.uint8)[bc]


def class_trie(engine) -> tuple:
    """``(trie, dbase)``: the trie of the vocabulary's normal tokens with every byte replaced by
    its class representative (:func:`byte_classes` of the engine's lexer: same token ids, same
    lengths, one path per distinct class string), and where each depth's nodes start when the
    nodes are counted depth by depth (cached per engine)."""
    hit = _CLASS_TRIES.get(engine)
    if hit is None:
        v = engine.vocab
        rep = byte_classes(engine.grammar_arrays.trans)
        trie = TokenTrie.build(rep[v.token_data], v.token_offsets, v.is_normal)
        dbase = np.zeros(trie.max_depth + 3, np.int64)
        np.cumsum(np.bincount(trie.node_depth, minlength=trie.max_depth + 2), out=dbase[1:])
        hit = (trie, dbase)
        _CLASS_TRIES.put(engine, hit)
    return hit


_TOKEN_LENGTHS = caching.LRU(8, name="diffusion.token_lengths")  # id(trie) -> (trie, bytes per token id)


def _longest_allowed(trie, allow: np.ndarray) -> int:
    """Bytes of the longest token ``allow`` admits (the token lengths cached per trie)."""
    hit = _TOKEN_LENGTHS.get(id(trie))
    if hit is None or hit[0] is not trie:
        n = int(trie.tok_ids.max()) + 1 if trie.tok_ids.size else 0
        lengths = np.zeros(n, np.int64)
        counts = np.diff(trie.tok_ptr)
        lengths[trie.tok_ids] = np.repeat(np.asarray(trie.node_depth, np.int64)[:counts.shape[0]], counts)
        hit = (trie, lengths)
        _TOKEN_LENGTHS.put(id(trie), hit)
    lengths = hit[1]
    k = min(lengths.shape[0], allow.shape[0])
    sel = lengths[:k][allow[:k].astype(bool)]
    return int(sel.max()) if sel.size else 0


# ---------------------------------------------------------------------------- shortest completions
_INF = np.int64(1) << 40


@njit(cache=True, nogil=True)
def _lexer_distances(trans, gacc):
    """Per lexer state the fewest bytes to an accepting state (``_INF``: none), by a backward BFS."""
    S = trans.shape[0]
    cnt, pred = reverse_csr(trans)
    dist = np.full(S, _INF, np.int64)
    queue = np.empty(S, np.int64)
    qh, qt = 0, 0
    for s in range(S):
        if gacc[s]:
            dist[s] = 0
            queue[qt] = s
            qt += 1
    while qh < qt:
        t = queue[qh]
        qh += 1
        for k in range(cnt[t], cnt[t + 1]):
            s = pred[k]
            if dist[s] == _INF:
                dist[s] = dist[t] + 1
                queue[qt] = s
                qt += 1
    return dist


@njit(cache=True, nogil=True)
def _rest_lengths(NN, dr_next, dr_lhs, nt_ptr, nt_dr0, tstart, lexdist):
    """``minrest[d]``: the fewest bytes the symbols from dotted rule ``d`` to its end derive
    (terminals: their shortest lexeme; nonterminals: the least fixpoint)."""
    D = dr_next.shape[0]
    minlen = np.full(NN, _INF, np.int64)
    minrest = np.zeros(D, np.int64)
    changed = True
    while changed:
        changed = False
        for d in range(D - 1, -1, -1):
            x = dr_next[d]
            if x < 0:
                minrest[d] = 0
                continue
            v = lexdist[tstart[x - NN]] if x >= NN else minlen[x]
            r = v + minrest[d + 1]
            minrest[d] = r if r < _INF else _INF
        for a in range(NN):
            for r in range(nt_ptr[a], nt_ptr[a + 1]):
                v = minrest[nt_dr0[r]]
                if v < minlen[a]:
                    minlen[a] = v
                    changed = True
    return minrest


@njit(cache=True, nogil=True)
def min_completion(items, set_off, n_sets, front, nf, acc, NN, dr_next, dr_lhs, start_nt, gterm, minrest, lexdist):
    """The fewest bytes after which the point can be a complete sentence (``_INF``: never).

    Per item ``p = (d, o)`` of the chart, ``cost[p]``: the bytes to a sentence once the symbol
    after its dot is read -- the shortest yield of the rest of its rule, then the cost of its
    left-hand side completing from ``o`` (the least over the items of set ``o`` waiting for it;
    nothing for the start symbol from set 0).  Sets are solved in order (origins point
    backwards), each to its own fixpoint (items predicted in the same set)."""
    if acc:
        return 0
    n_items = set_off[n_sets]
    cost = np.full(n_items, _INF, np.int64)
    for k in range(n_sets):
        lo, hi = set_off[k], set_off[k + 1]
        changed = True
        while changed:
            changed = False
            for p in range(lo, hi):
                d = items[p, 0]
                if dr_next[d] < 0:
                    continue
                o = items[p, 1]
                a = dr_lhs[d]
                done = minrest[d + 1]
                if done >= _INF:
                    continue
                if a == start_nt and o == 0:
                    c = done
                else:
                    best = _INF
                    for q in range(set_off[o], set_off[o + 1]):
                        if dr_next[items[q, 0]] == a and cost[q] < best:
                            best = cost[q]
                    c = done + best if best < _INF else _INF
                if c < cost[p]:
                    cost[p] = c
                    changed = True
    best = _INF
    for q in range(nf):
        g = front[q, 0]
        j = front[q, 1]
        sym = NN + gterm[g]
        ld = lexdist[g]
        if ld >= _INF:
            continue
        for p in range(set_off[j], set_off[j + 1]):
            if dr_next[items[p, 0]] == sym and cost[p] < _INF and ld + cost[p] < best:
                best = ld + cost[p]
    return best
