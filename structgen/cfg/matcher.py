"""CFGMatcher: the per-sequence cursor of the grammar engine (the Matcher contract).

State: the Earley chart (append-only sets, see :mod:`structgen.cfg.earley`), the
frontier of lexemes in progress and the accepting flag.  Every step is a node of a
history tree (:mod:`structgen.runtime.history`) holding ``(n_sets, frontier, acc,
terminated)`` and the bytes it consumed, so ``rollback(n)`` is exact (truncate the
chart, restore the frontier) and costs O(n), and a snapshot is that node.  Kernels
write only past the committed sets, so the chart below ``n_sets`` always belongs to the
current point: ``restore`` to a point on another branch replays the bytes from the
node both share.  ``fork()`` copies the used part of the chart (a few KB).

Also a :class:`~structgen.runtime.protocol.ByteStateView`: the automaton is the union
of the lexer DFAs, the states those of the frontier's lexemes.

Mask memo: once a mask of this matcher has cost more than ``MEMO_MIN_SECONDS`` without
filling the grammar's cache (a first visit is costly once), such masks are kept (the last
``MEMO_MASKS``) under the frontier itself (each lexeme's lexer state and origin set) and under
:func:`~structgen.cfg.earley.frontier_signature`, which names what a mask reads of the chart --
a repeated configuration (the next token inside a JSON string, the next word of a CSV row, the
next byte of a right-recursive string, the next token of a docstring) then costs a lookup
instead of a mask computation.  A matcher whose signature lookups seldom hit (under 1 in 4
after ``SIGNATURE_PROBATION``) stops computing signatures (up to several microseconds each), and one whose
lookups seldom hit at all (under 1 in 16) stops keeping masks.  The key refers to committed sets by number, so the memo is dropped
whenever the chart goes back (``rollback``, ``restore``, ``reset``); a fork starts without one.

Shared by a grammar's matchers (attributes of the :class:`~structgen.cfg.engine.CompiledCFG`):
the mask at the start (``start_mask``: every matcher's first mask, computed once), and the sizes
the chart and the per-mask scratch had to grow to (``buffer_sizes``), which new matchers start
with instead of computing their first masks again after each doubling.
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import LimitExceeded
from ..kernels.bitmask import set_bits
from ..kernels.packed import Packed, describe
from ..runtime import history as hist
from ..runtime.batch import host_row, write_row
from ..runtime.checks import check_token
from ..runtime.protocol import ByteStateView, Matcher, Snapshot
from . import earley
from . import jobs as jb
from . import mask as mk


MEMO_MASKS = 8              # masks a matcher keeps (each under two keys)
MEMO_MIN_SECONDS = 5e-6     # the memo starts after, and keeps, masks that took longer than this
MEMO_PROBATION = 64         # lookups after which a memo that finds under 1 in 16 is dropped
SIGNATURE_PROBATION = 8     # signature lookups after which signatures that find under 1 in 4 are dropped
_KEY_WORDS = 4096           # longest configuration key (int64 words); longer: not kept
PROBE_MEMO = 4096           # byte_states_after_each answers a matcher keeps
INDEX_SLOTS = 4096          # first size of the sets' waiter index (slots, pool rows); doubled on demand
MAX_SCRATCH_ROWS = 1 << 26  # the per-mask scratch tables stop doubling here (LimitExceeded)
HINT_ROWS = 1 << 17         # the most rows a new matcher's buffer starts with (engine.buffer_sizes)
_UNKNOWN = object()         # a probe not in that memo

_IDENTITY = np.arange(256, dtype=np.int64)  # the lexer DFAs have no byte classes
_NO_STATES = np.zeros(0, np.int64)
_NO_STATES.flags.writeable = False


class CFGMatcher(Matcher, ByteStateView):
    """Matcher over a :class:`~structgen.cfg.engine.CompiledCFG`."""

    def __init__(self, engine, _empty: bool = False):
        self.engine = engine
        self._lineage = object()  # shared by forks: whose snapshots restore here
        self._lex_states = None   # (frontier, its lexer states), see byte_states
        self._items = None
        tb = engine.tables
        self._mark = np.zeros(2 * max(tb.n_dr, 1), np.int64)  # see earley.add_item
        self._stamp = np.zeros(4, np.int64)  # [0]: Earley-set stamp, [1]: per-mask stamp, [2:4]: index fill
        # buffers start as large as this grammar's matchers needed so far (engine.buffer_sizes):
        # a mask that finds one too small is computed again after doubling it
        size = engine.buffer_sizes.get
        self._fcap = size("fcap", 256)
        self._fbuf = np.empty((2, self._fcap, 2), np.int32)
        self._comp = np.empty((self._fcap, 2), np.int32)
        # per-mask scratch of expand_mask (stamped tables: cleared by bumping _stamp[1])
        # (as long as the cache's pools already are: growing them later rebuilds the matcher's table)
        snap = engine.cache.snap
        self._estamp = np.zeros(max(256, snap.ent_bl2.shape[0]), np.int64)
        self._bstamp = np.zeros((max(256, snap.bl_off.shape[0]), 7), np.int64)  # see mask.expand_mask
        self._work = np.empty((size("work", 1024), 3), np.int32)
        self._ptask = np.empty((size("work", 1024), 3), np.int32)
        self._vkeys, self._vstamp = _stamped(size("vkeys", 2048))
        self._pkeys, self._pstamp = _stamped(size("pkeys", 256))
        self._pval = np.empty((self._pkeys.shape[0], 3), np.int32)
        self._wkeys, self._wstamp = _stamped(size("wkeys", INDEX_SLOTS))  # the sets' waiter index (earley.waiters)
        self._wval = np.empty(self._wkeys.shape[0], np.int32)
        self._wpool = np.empty((size("wpool", INDEX_SLOTS), 2), np.int32)
        self._predbuf = np.empty((size("predbuf", max(1024, 4 * tb.n_lexer_states)), 2), np.int32)
        self._memo: dict | None = None   # configuration key -> mask words, once armed
        self._probes: dict = {}          # (frontier, probe) -> byte_states_after_each's answer
        self._memo_off = False           # disarmed: its keys were seldom found
        self._memo_looks = self._memo_hits = 0
        self._sig_looks = self._sig_hits = 0
        self._sig_off = False            # signature keys dropped: they were seldom found
        self._keybuf = None
        self._args = None                # see _kernel_args
        self._mpack = None               # see _matcher_table: dropped whenever a buffer is replaced
        self._root = (None, None, None)  # (frontier, snapshot, its root bits)
        self._jfront = np.empty((16, 2), np.int32)  # mask_job: a copy of the frontier, and
        self._jtable = np.zeros((jb.TABLE_ROWS, 5), np.int64)  # the job's table, rows described for
        self._jparts = self._jpack = self._jfr = None  # these kernel arguments, tables and frontier copy
        self._jscal = np.zeros(jb.SCALARS, np.int64)
        if _empty:
            return
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        self._forget_masks()
        e = self.engine
        tb = e.tables
        # keep buffers a previous run grew: they are overwritten, never read stale
        if getattr(self, "_items", None) is None:
            size = e.buffer_sizes.get
            self._items = np.empty((size("items", 1024), 2), np.int32)
            self._set_off = np.zeros(size("sets", 257), np.int32)
        front = np.empty((max(64, len(tb.term_names) + 1), 2), np.int32)
        while True:
            nf, acc = earley.init_chart(self._items, self._set_off, front, tb.NN, tb.start_nt, tb.dr_next,
                                        tb.dr_lhs, tb.nt_ptr, tb.nt_dr0, tb.nullable, tb.final_dr, tb.tstart,
                                        self._mark, self._stamp)
            if nf >= 0:
                break
            self._items = np.empty((self._items.shape[0] * 4, 2), np.int32)
            self._mpack = None
            front = np.empty((front.shape[0] * 4, 2), np.int32)
            self._note_sizes()
        self._set_point(hist.root((1, front[:nf].copy(), bool(acc), False)))

    @property
    def vocab(self):
        return self.engine.vocab

    def _set_point(self, node) -> None:
        """Make ``node`` the current point (its chart sets must be in the chart)."""
        self._node = node
        self._n_sets, self._front, self._acc, self._terminated = node.state

    def _push(self, data, n_sets, front, acc, terminated=False) -> None:
        self._set_point(self._node.child((n_sets, front, acc, terminated), data))

    def _grow(self, predictions: bool = False):
        """Double the chart (and the frontier and completion lists, up to 2^16 rows); with
        ``predictions`` (a mask ran out of room) the prediction buffer too, which only masks use:
        doubled on every chart growth, a long document's matcher ended with a 43 MB buffer."""
        self._mpack = None
        n_items = int(self._set_off[self._n_sets])
        items = np.empty((max(self._items.shape[0] * 2, n_items * 2), 2), np.int32)
        items[:n_items] = self._items[:n_items]
        self._items = items
        so = np.zeros(self._set_off.shape[0] * 2, np.int32)
        so[:self._n_sets + 1] = self._set_off[:self._n_sets + 1]
        self._set_off = so
        # frontier and completion lists are bounded by (lexer states x sets): grow them
        # slowly, the chart is what usually overflows
        if self._fcap < 1 << 16:
            self._fcap *= 2
            self._fbuf = np.empty((2, self._fcap, 2), np.int32)
            self._comp = np.empty((self._fcap, 2), np.int32)
        if predictions:
            self._predbuf = np.empty((self._predbuf.shape[0] * 2, 2), np.int32)
        self._note_sizes()

    def _note_sizes(self) -> None:
        """Raise the grammar's ``buffer_sizes`` to this matcher's, each at most ``HINT_ROWS``: a
        long document's chart (and the prediction buffer, doubled with it) is not every matcher's
        first need, and a batch of matchers would each start with it."""
        e = self.engine
        mine = {"fcap": self._fcap, "work": self._work.shape[0], "vkeys": self._vkeys.shape[0],
                "pkeys": self._pkeys.shape[0], "wkeys": self._wkeys.shape[0], "wpool": self._wpool.shape[0],
                "predbuf": self._predbuf.shape[0], "items": self._items.shape[0], "sets": self._set_off.shape[0]}
        sizes = dict(e.buffer_sizes)
        for k, v in mine.items():
            sizes[k] = max(sizes.get(k, 0), min(v, HINT_ROWS))
        e.buffer_sizes = sizes

    def fork(self) -> "CFGMatcher":
        m = CFGMatcher(self.engine, _empty=True)
        n_items = int(self._set_off[self._n_sets])
        m._items = np.empty_like(self._items)
        m._items[:n_items] = self._items[:n_items]
        m._set_off = self._set_off.copy()
        m._lineage = self._lineage
        m._set_point(self._node)
        return m

    def _step(self, data: np.ndarray):
        """(status, n_sets, frontier, acc) after ``data``; the committed state is untouched."""
        if data.shape[0] == 0:  # (the kernel does not know the current accepting flag)
            return 1, self._n_sets, self._front, self._acc
        for _ in range(64):
            if self._front.shape[0] > self._fcap:
                self._grow()
                continue
            e = self.engine
            st, ns, nf, which, acc = mk.step_bytes_packed(data, self._front, self._front.shape[0], self._n_sets,
                                                          e.grammar_arrays.NN, e.packed_grammar.table,
                                                          self._matcher_table())
            if st >= 0:
                return st, ns, self._fbuf[which, :nf].copy(), bool(acc)
            self._grow()
        raise LimitExceeded("the parse chart keeps overflowing", "chart buffers", self._items.shape[0])

    # ------------------------------------------------------------------ contract
    def advance(self, token: int) -> bool:
        if self._terminated:
            return False
        e = self.engine
        token = check_token(token)
        if token in e._eos_set:
            if not self._acc:
                return False
            self._push(None, self._n_sets, self._front, self._acc, True)
            return True
        v = e.vocab
        if not 0 <= token < v.logits_width or not v.is_normal[token]:
            return False
        data = v.token_data[v.token_offsets[token]:v.token_offsets[token + 1]]
        st, ns, front, acc = self._step(data)
        if st != 1:
            return False
        self._push(data, ns, front, acc)
        return True

    def advance_bytes(self, data: bytes) -> bool:
        if self._terminated:
            return False
        data = np.frombuffer(bytes(data), np.uint8)
        st, ns, front, acc = self._step(data)
        if st != 1:
            return False
        self._push(data, ns, front, acc)
        return True

    def rollback(self, n: int = 1) -> None:
        if n < 0 or n > self._node.depth:
            raise ValueError(f"cannot roll back {n} tokens; {self._node.depth} were accepted")
        if n:
            self._forget_masks()
            self._set_point(hist.ancestor(self._node, n))

    def chart_stats(self) -> dict:
        """Work counters of the current point: Earley ``sets``, chart ``items`` in all, items of
        the ``last_set`` (what each step scans), lexemes in the ``frontier``."""
        n = self._n_sets
        so = self._set_off
        return {"sets": int(n), "items": int(so[n]), "last_set": int(so[n] - so[n - 1]),
                "frontier": int(self._front.shape[0])}

    def chart_state(self):
        """Copies of the current point's parse: ``(items, set_off, n_sets, frontier, accepting,
        terminated)`` in the layout of :mod:`structgen.cfg.earley` (the chart's ``n_sets`` sets,
        the lexemes in progress).  For consumers that run the Earley kernels themselves from
        this point (:mod:`structgen.diffusion`'s completability check)."""
        n = self._n_sets
        used = int(self._set_off[n])
        return (self._items[:used].copy(), self._set_off[:n + 1].copy(), int(n), self._front.copy(),
                bool(self._acc), bool(self._terminated))

    def accepted_tokens(self) -> int:
        return self._node.depth

    def snapshot(self) -> Snapshot:
        return Snapshot(self._lineage, (self._node,))

    def restore(self, snapshot: Snapshot) -> None:
        if not isinstance(snapshot, Snapshot) or snapshot.lineage is not self._lineage:
            raise ValueError("restore() takes a snapshot of this matcher or of one forked from the same start")
        target = snapshot.point[0]
        self._forget_masks()
        shared, path = hist.path_from_shared(self._node, target)
        self._set_point(shared)
        for node in path:  # rewrite the chart sets of the target's branch
            if node.data is not None and self._step(node.data)[0] != 1:
                raise AssertionError("internal error: the grammar refused bytes it accepted before")
            self._set_point(node)

    # ------------------------------------------------------------------ ByteStateView
    def byte_automaton(self):
        tb = self.engine.tables
        return tb.trans, _IDENTITY, tb.gacc

    def byte_states(self) -> np.ndarray:
        if self._terminated:
            return _NO_STATES
        front = self._front
        hit = self._lex_states
        if hit is None or hit[0] is not front:  # the frontier's lexer states, once per point
            hit = self._lex_states = (front, np.unique(front[:, 0]).astype(np.int64))
        return hit[1]

    def byte_states_after(self, data: bytes):
        if self._terminated:
            return None
        if not data:
            return self.byte_states()
        st, _, front, _ = self._step(np.frombuffer(bytes(data), np.uint8))
        return np.unique(front[:, 0]).astype(np.int64) if st == 1 else None

    def byte_states_after_each(self, probes) -> list:
        """Answers are kept per frontier and probe, and under what the probe reads of the
        frontier (:meth:`_probe_reads`), which holds across frontiers: a key guard probes the same
        key openings (the end of a string value, a comma, a quote) after every token of a string
        value, from a lexer state that counts the string's characters, new with each token, and
        the same after the closing quote.  Both keys name committed sets, the same at every point
        until the chart goes back."""
        if self._terminated:
            return [None] * len(probes)
        memo = self._probes
        here = self._front_key()
        probes = [bytes(p) for p in probes]
        got = [memo.get((here, p), _UNKNOWN) for p in probes]
        todo = [i for i, g in enumerate(got) if g is _UNKNOWN]
        if not todo:
            return got
        reads = self._probe_reads([probes[i] for i in todo], here)
        ask: dict = {}   # read -> a probe with it, for those not known yet
        for i, r in zip(todo, reads):
            got[i] = memo.get(r, _UNKNOWN)
            if got[i] is _UNKNOWN and r not in ask:
                ask[r] = probes[i]
        new = dict(zip(ask, self._probe_each(list(ask.values())))) if ask else {}
        if len(memo) + len(new) + len(todo) > PROBE_MEMO:
            memo.clear()
        memo.update(new)
        for i, r in zip(todo, reads):
            if got[i] is _UNKNOWN:
                got[i] = new[r]
            memo[(here, probes[i])] = got[i]
        return got

    def leads_key(self, leads):
        """What every probe starting with one of ``leads`` reads of the frontier, as one key: per
        lead the lexemes alive once it reaches a possible lexeme end, and where that is (the
        frontier itself for an empty lead); None when a lead runs out first.  The key names
        committed sets: it holds until a rollback."""
        if self._terminated:
            return None
        out, off, stop, ended, doff = self._reads(leads)
        empty = doff[1:] == doff[:-1]
        if not np.all((ended != 0) | empty):
            return None
        key = out[:off[-1]].tobytes() + off.tobytes() + stop.tobytes()
        return key + self._front_key() if empty.any() else key

    def _probe_reads(self, probes, here: bytes) -> list:
        """Per probe, what its answer reads of the frontier, as a key: the lexemes alive once its
        first bytes reach a possible lexeme end (:func:`~structgen.cfg.earley.probe_keys`) and the
        bytes after that; an empty probe reads the frontier itself (``here``, its key)."""
        out, off, stop, _, _ = self._reads(probes)
        raw = out.tobytes()
        offs = off.tolist()
        stops = stop.tolist()
        return [(raw[8 * offs[i]:8 * offs[i + 1]], p[stops[i] + 1:]) if p else (here, p) for i, p in enumerate(probes)]

    def _reads(self, probes) -> tuple:
        """``probe_keys`` over ``probes``: ``(rows, row offsets, stops, ended, probe offsets)``."""
        n = len(probes)
        data, doff = _packed(probes)
        front = self._front
        out = np.empty(max(1, n * front.shape[0]), np.int64)
        off = np.zeros(n + 1, np.int64)
        stop = np.empty(n, np.int64)
        ended = np.empty(n, np.uint8)
        tb = self.engine.tables
        earley.probe_keys(front, front.shape[0], tb.trans, tb.gacc, tb.gout, data, doff, out, off, stop, ended)
        return out, off, stop, ended, doff

    def _probe_each(self, probes) -> list:
        n = len(probes)
        if n == 0:
            return []
        data, doff = _packed(probes)
        ok = np.zeros(n, np.uint8)
        out_off = np.zeros(n + 1, np.int64)
        out = np.empty(max(64, 16 * n), np.int64)
        for _ in range(64):
            if self._front.shape[0] > self._fcap:
                self._grow()
                continue
            st = earley.step_each(data, doff, self._items, self._set_off, self._n_sets, self._front,
                                  self._front.shape[0], self._fbuf, self._comp, *self.engine.grammar_arrays,
                                  self._mark, self._stamp, ok, out, out_off)
            if st == 1:
                return [out[out_off[i]:out_off[i + 1]].copy() if ok[i] else None for i in range(n)]
            if st == -2:
                out = np.empty(out.shape[0] * 4, np.int64)
            else:
                self._grow()
        raise LimitExceeded("the parse chart keeps overflowing", "chart buffers", self._items.shape[0])

    def is_accepting(self) -> bool:
        return self._acc and not self._terminated

    def is_terminated(self) -> bool:
        return self._terminated

    def mask_words(self, out: np.ndarray | None = None) -> np.ndarray:
        """The allowed tokens as uint32 words (bit t of word t//32): a new array, or ``out`` (a
        contiguous uint32 array of the right length: a bitmask row) filled in place."""
        e = self.engine
        words = np.empty(e.words, np.uint32) if out is None else out
        if self._terminated:
            words[:] = 0
            set_bits(words, e.eos)
            return words
        self._compute(e, words)
        if self._acc:
            set_bits(words, e.eos)
        return words

    def _forget_masks(self) -> None:
        if self._memo:
            self._memo = {}
        self._probes.clear()

    def _config_key(self, e):
        """The current configuration's memo key (bytes), or None (see the module docstring)."""
        if self._keybuf is None:
            self._keybuf = np.empty(_KEY_WORDS, np.int64)
        ga = e.grammar_arrays
        front = self._front
        n = earley.frontier_signature(front, front.shape[0], self._items, self._set_off, ga.NN, ga.dr_next,
                                      ga.dr_lhs, ga.gterm, self._keybuf)
        return None if n < 0 else self._keybuf[:n].tobytes()

    def _front_key(self) -> bytes:
        """The frontier as a memo key (odd length: never a signature key, whose words are 8 bytes)."""
        return b"F" + self._front.tobytes()

    def _compute(self, e, words: np.ndarray) -> None:
        """The mask words, EOS aside, into ``words``: from the memo (see the module docstring),
        else computed (:meth:`_compute_fresh`).  A mask is kept under the frontier itself (lexer
        state and origin set of each lexeme: the same committed sets at every point the memo
        lives, so exact too), which repeats where the chart has not moved -- inside a string, a
        docstring, a comment -- and is cheap to look up, and under its configuration's signature,
        which also finds other frontiers with the same future, or the only key where a signature
        is too long.  The mask at the start is kept for every matcher of the grammar
        (``engine.start_mask``): all start in the same state."""
        start = self._node.depth == 0
        if start and e.start_mask is not None:
            words[:] = e.start_mask
            return
        hit, raw, key = self._memo_get(e)
        if hit is not None:
            words[:] = hit
            return
        memo = self._memo
        t0 = time.perf_counter()
        filled = self._compute_fresh(e, words)
        if start:
            e.start_mask = words.copy()
        if time.perf_counter() - t0 <= MEMO_MIN_SECONDS:
            return   # only costly masks are kept
        if memo is None:
            if self._memo_off or filled:
                return   # a first visit is costly once: the cache, not the memo, makes it cheap again
            memo = self._memo = {}
            raw = self._front_key()
        if key is None and not self._sig_off:
            key = self._config_key(e)
        kept = words.copy()
        for k in (raw, key):
            if k is not None:
                if len(memo) >= 2 * MEMO_MASKS:
                    del memo[next(iter(memo))]
                memo[k] = kept

    def _memo_get(self, e):
        """``(kept mask or None, frontier key, signature key)``: the memo lookup of :meth:`_compute`
        (keys None where not computed); drops the memo, or its signature keys, when they seldom hit."""
        memo = self._memo
        if memo is None:
            return None, None, None
        self._memo_looks += 1
        key = None
        raw = self._front_key()
        hit = memo.get(raw)
        if hit is None and not self._sig_off:
            self._sig_looks += 1
            key = self._config_key(e)
            hit = memo.get(key) if key is not None else None
            if hit is not None:
                self._sig_hits += 1
            elif self._sig_looks >= SIGNATURE_PROBATION and self._sig_hits * 4 < self._sig_looks:
                self._sig_off = True   # signatures seldom repeat when frontiers do not: stop computing them
                key = None
        if hit is not None:
            self._memo_hits += 1
        elif self._memo_looks >= MEMO_PROBATION and self._memo_hits * 16 < self._memo_looks:
            self._memo = None   # configurations do not repeat here: stop paying for keys
            self._memo_off = True
        return hit, raw, key

    def mask_job(self, out: np.ndarray):
        """This matcher's next mask as a job of :func:`structgen.cfg.jobs.run_jobs`: ``(table,
        scalars)`` with the table's ``WORDS`` row left to the caller (who describes ``out`` there,
        which holds the frontier's root bits when the scalars say so), valid until this matcher is
        used again; or None when ``out`` (this row's uint32 words) is filled already (the memo had
        the mask, or the matcher is terminated).  The caller runs the job, then :meth:`finish_job`.
        See :attr:`JOB`."""
        if self._terminated:
            self.mask_words(out)
            return None
        e = self.engine
        hit = e.start_mask if self._node.depth == 0 else None
        if hit is None:
            hit, _, _ = self._memo_get(e)
        if hit is not None:
            out[:] = hit
            if self._acc:
                set_bits(out, e.eos)
            return None
        snap = e.cache.snap
        args = self._kernel_args(e, snap)
        bits = self._root_bits(e.cache, snap)
        front = self._front
        n = front.shape[0]
        jfront = self._jfront
        if jfront.shape[0] < n:
            jfront = self._jfront = np.empty((2 * n, 2), np.int32)
        jfront[:n] = front
        sc = self._jscal
        if self._jparts is not args or self._jpack is not self._mpack or self._jfr is not jfront:
            self._jtable[jb.FRONT:] = describe((jfront, self._matcher_table(), args[4], args[5], args[6], e.eos))
            self._jparts, self._jpack, self._jfr = args, self._mpack, jfront
            sc[jb.NN] = args[2]
            sc[jb.U0] = args[3]
        if bits is None:
            sc[jb.HAS_ROOT] = 0
        else:
            out[:] = bits
            sc[jb.HAS_ROOT] = 1
        sc[jb.NFRONT] = n
        sc[jb.NSETS] = self._n_sets
        sc[jb.ACC] = self._acc
        return self._jtable, sc

    def finish_job(self, out: np.ndarray, status: int) -> None:
        """After :func:`~structgen.cfg.jobs.run_jobs` ran this matcher's job with ``status``: a
        pass that did not finish (a cache entry to compute, a buffer to grow) is redone here."""
        if status != mk.OK:
            self.mask_words(out)

    #: what :func:`structgen.runtime.batch.fill_bitmasks` runs :meth:`mask_job` s with: the
    #: kernel, the rows of a job's table (``WORDS`` first), the scalars per job
    JOB = (jb.run_jobs, jb.TABLE_ROWS, jb.SCALARS)

    def _root_bits(self, cache, snap):
        """The OR of the frontier's own cache entries (``cache.root_bits``), looked up once per
        point and snapshot; None while one of them is not computed yet."""
        front = self._front
        root = self._root
        if root[0] is not front or root[1] is not snap:
            root = self._root = (front, snap, cache.root_bits(snap, front[:, 0]))
        return root[2]

    def _compute_fresh(self, e, words: np.ndarray) -> bool:
        """The mask words, EOS aside, into ``words`` (see :func:`structgen.cfg.mask.expand_mask`);
        whether the cache was filled.

        First a read-only pass over the grammar's cache snapshot; if it misses a
        part, the whole mask is recomputed under the cache lock on a private copy
        of the cache that computes and appends the missing parts, then published."""
        cache = e.cache
        snap = cache.snap
        bits = self._root_bits(cache, snap)
        if bits is None:
            words[:] = 0
        else:
            words[:] = bits
        if self._run(e, snap, words, False, bits is not None) == mk.OK:
            return False
        with cache.lock:
            snap = cache.begin_fill()
            for _ in range(200):
                words[:] = 0
                st = self._run(e, snap, words, True, False)
                if st == mk.OK:
                    cache.publish(snap)
                    return True
                if st == mk.CACHE_FULL:
                    cache.grow(snap, e.words, e.trie.node_depth.shape[0])
                else:  # NODES_FULL
                    cache.scr_nodes = np.empty(cache.scr_nodes.shape[0] * 4, np.int32)
        raise LimitExceeded("the grammar's mask cache keeps overflowing", "mask cache entries", cache.n_entries)

    def _kernel_args(self, e, snap):
        """``(snap, scratch nodes, NN, u0, grammar table, snapshot table, scratch table)``: the
        arguments of the packed mask kernel (:func:`structgen.cfg.mask.expand_mask_packed`) that
        change with the published snapshot ``snap`` and the cache's fill scratch, if at all,
        looked up once per snapshot (with this matcher's stamps fitted to its pools)."""
        args = self._args
        if args is None or args[0] is not snap or args[1] is not e.cache.scr_nodes:
            self._fit_stamps(snap)
            args = self._args = (snap, e.cache.scr_nodes, e.grammar_arrays.NN, e.lexer_aids.u0,
                                 e.packed_grammar.table, snap.packed().table, e.cache.scratch_table())
        return args

    def _matcher_table(self):
        """This matcher's buffers as a table (:data:`structgen.cfg.mask.PACKED_MATCHER`), built
        once per set of buffers: every replacement of one drops ``_mpack``."""
        p = self._mpack
        if p is None:
            named = {"items": self._items, "set_off": self._set_off, "mark": self._mark, "stampbox": self._stamp,
                     "estamp": self._estamp, "bstamp": self._bstamp, "work": self._work, "ptask": self._ptask,
                     "vkeys": self._vkeys, "vstamp": self._vstamp, "pkeys": self._pkeys, "pstamp": self._pstamp,
                     "pval": self._pval, "predbuf": self._predbuf, "comp": self._comp, "fbuf": self._fbuf,
                     "wkeys": self._wkeys, "wstamp": self._wstamp, "wval": self._wval, "wpool": self._wpool}
            p = self._mpack = Packed(tuple(named[k] for k in mk.PACKED_MATCHER))
        return p.table

    def _fit_stamps(self, snap) -> None:
        """Entry and list stamps as long as ``snap``'s pools."""
        if self._estamp.shape[0] < snap.ent_bl2.shape[0]:
            self._estamp = np.zeros(snap.ent_bl2.shape[0], np.int64)
            self._mpack = None
        if self._bstamp.shape[0] < snap.bl_off.shape[0]:
            self._bstamp = np.zeros((snap.bl_off.shape[0], 7), np.int64)
            self._mpack = None

    def _run(self, e, snap, words, fill: bool, root_done: bool) -> int:
        """One call of the mask kernel, growing this matcher's buffers as needed."""
        for _ in range(64):
            if fill:  # a fill's private snapshot has its pools replaced as they grow: a table per run
                self._fit_stamps(snap)
                keep = Packed(snap.arrays())
                fixed = (e.grammar_arrays.NN, e.lexer_aids.u0, e.packed_grammar.table, keep.table,
                         e.cache.scratch_table())
            else:
                fixed = self._kernel_args(e, snap)[2:]
            front = self._front
            st = mk.expand_mask_packed(front, front.shape[0], self._n_sets, fill, root_done, words,
                                       self._matcher_table(), *fixed)
            if st == mk.SCRATCH_FULL:
                if max(self._work.shape[0], self._vkeys.shape[0], self._wkeys.shape[0]) >= MAX_SCRATCH_ROWS:
                    raise LimitExceeded("one mask needs more scratch than the matcher allows", "mask scratch rows",
                                        MAX_SCRATCH_ROWS)
                self._mpack = None
                self._work = np.empty((self._work.shape[0] * 2, 3), np.int32)
                self._ptask = np.empty((self._ptask.shape[0] * 2, 3), np.int32)
                self._vkeys, self._vstamp = _stamped(self._vkeys.shape[0] * 2)
                self._pkeys, self._pstamp = _stamped(self._pkeys.shape[0] * 2)
                self._pval = np.empty((self._pkeys.shape[0], 3), np.int32)
                self._wkeys, self._wstamp = _stamped(self._wkeys.shape[0] * 2)
                self._wval = np.empty(self._wkeys.shape[0], np.int32)
                self._wpool = np.empty((self._wpool.shape[0] * 2, 2), np.int32)
                self._note_sizes()
            elif st == mk.CHART_FULL:
                self._grow(predictions=True)
            else:
                return st
            if not root_done:
                words[:] = 0
        raise LimitExceeded("the mask computation keeps overflowing its buffers", "chart buffers",
                            self._items.shape[0])

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        row, out = host_row(bitmask, row, self.engine.vocab.logits_width)
        if out is not None:
            self.mask_words(out)  # in place: no row allocated and copied
        else:
            write_row(bitmask, row, self.mask_words().view(np.int32))

    # ------------------------------------------------------------------ forced text
    def forced_bytes(self, limit: int = 256) -> bytes:
        """Bytes every continuation must start with (stops where EOS or a choice is possible).

        Candidate bytes are those some frontier lexeme can step on (one row lookup
        per lexeme); two of them that keep a lexeme going already mean a choice, so
        the parser is only stepped for the few bytes that might complete a lexeme."""
        if self._terminated:
            return b""
        tb = self.engine.tables
        m = self.fork()
        out = bytearray()
        one = np.zeros(1, np.uint8)
        while len(out) < limit and not m._acc and m._front.shape[0]:
            rows = tb.trans[m._front[:, 0]]
            cand = np.flatnonzero((rows >= 0).any(axis=0))
            if cand.size == 0:
                break
            if cand.size > 1:
                nxt = rows[:, cand]
                sure = ((nxt >= 0) & (tb.gout[np.maximum(nxt, 0)] != 0)).any(axis=0)
                if int(sure.sum()) >= 2:
                    break
            only = -1
            for b in cand.tolist():
                one[0] = b
                if m._step(one)[0] == 1:
                    if only >= 0:
                        only = -2
                        break
                    only = b
            if only < 0:
                break
            out.append(only)
            m.advance_bytes(bytes([only]))
        return bytes(out)

    def __repr__(self) -> str:
        return (f"CFGMatcher(sets={self._n_sets}, frontier={self._front.shape[0]}, accepting={self._acc}, "
                f"tokens={self._node.depth})")


_PACKED: dict = {}


def _packed(probes) -> tuple:
    """``(data, doff)``: the probes' bytes end to end and their offsets, kept for the last
    ``PROBE_MEMO`` lists (a key guard asks the same lists of leads and layouts again and again)."""
    key = tuple(probes)
    hit = _PACKED.get(key)
    if hit is None:
        n = len(key)
        doff = np.zeros(n + 1, np.int64)
        np.cumsum([len(p) for p in key], out=doff[1:])
        data = np.frombuffer(b"".join(key), np.uint8) if doff[n] else np.zeros(1, np.uint8)
        if len(_PACKED) >= PROBE_MEMO:
            _PACKED.clear()
        hit = _PACKED[key] = (data, doff)
    return hit


def _stamped(n: int):
    """(keys, stamps) of an empty stamped hash table with ``n`` slots (see mask._sslot)."""
    return np.zeros(n, np.int64), np.full(n, -1, np.int64)


