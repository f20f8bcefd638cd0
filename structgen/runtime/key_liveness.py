"""LiveKeys: the key guard's liveness check for objects whose members repeat over a closed key set.

Under ``property_order="any"`` an object too large for the subset form repeats its members (see
:mod:`structgen.frontends.json_schema.property_order`), and the key guard drops tokens that complete a used key.
That alone could let a model start a key that only used keys complete -- ``{"name": 1, "na``
when no unused key starts with ``na`` -- or write a comma when every key is used.  With
``SchemaReport.live_keys`` the guard also refuses such tokens.

The check, for a key prefix ``P`` in the innermost object with used keys ``U``: ``P`` is *dead*
when every key the grammar allows after ``P`` is in ``U``.  The grammar is seen as a set of byte
automaton states at ``P`` -- the grammar engine's lexer states inside key lexemes, or the state
of a regular DFA, asked of the inner matcher through
:class:`~structgen.runtime.protocol.ByteStateView` -- and :func:`~.dead_keys.prefix_dead` searches the trie of the used keys below ``P``: a state
that steps on a byte leaving the trie (other than the quote closing a used key), that may end a
lexeme, or that reaches a cycle without a quote (infinitely many keys) makes ``P`` live.  Sound by
construction: a refused token has no valid continuation; a byte the search cannot judge (an
escape) counts as live.

Which tokens are checked (the same rule in the mask and in ``advance``, so a mask bit still says
whether ``advance`` takes the token): tokens without any of ``\\ { } [ ]``, fed with no escape
in progress, that end inside a key or after a comma of the innermost object, having completed at
most one key of it on the way, where the object then holds a key.  Inside a key, those that go on
with it along a used key are found by walking the token trie along the used keys
(:func:`~.dead_keys.prune_in_key`); the others are listed once per vocabulary by where they start
(:func:`landing_table`: what a token without those bytes does depends only on the mode it starts
in) and checked by :func:`prune_table`, each from the automaton states right after the new key's
opening quote that its own bytes reach (one byte probe of the grammar per distinct lead, the bytes
before the key: a member's key language depends on the members before it and, under Boolean
combinations, on their values).
"""
from __future__ import annotations

from itertools import accumulate

import numpy as np
from numba import njit

from ..kernels.bitmask import clear_bits
from .dead_keys import QUOTE, cycle_memo, key_has, prefix_dead, prune_in_key, step_states
from .json_tracker import DEPTH, ESC, HIGH, KEY_STR, KLEN, MODE, NKEYS, OBJ, OK, STRUCT, VALUE_STR, Tracker, \
    feed, probe_buffers, start_in_object

_UNCHECKED = frozenset(b"\\{}[]")  # a token with one of these bytes is never checked


# ----------------------------------------------------------------------------- landing tables
@njit(cache=True, nogil=True)
def _with_key(kdata, koff, kp_data, lo, n):
    """The keys ``kdata``/``koff`` plus ``kp_data[lo:lo + n]``."""
    nk = koff.shape[0] - 1
    kd = np.empty(kdata.shape[0] + n, np.uint8)
    kd[:kdata.shape[0]] = kdata
    kd[kdata.shape[0]:] = kp_data[lo:lo + n]
    ko = np.empty(nk + 2, np.int64)
    ko[:nk + 1] = koff
    ko[nk + 1] = koff[nk] + n
    return kd, ko


#: the starting points of the landing tables: (mode, object frame state)
_STARTS = ((STRUCT, 0), (STRUCT, 1), (STRUCT, 2), (VALUE_STR, 2), (KEY_STR, 0))


@njit(cache=True, nogil=True)
def landing_table(tdata, toff, toks, mode, fstate):
    """Which tokens of ``toks``, fed from ``mode`` in an object whose frame is in ``fstate`` (a
    value string or inside a key: no escape pending), end inside the object's next key or after
    its comma, with at most one key completed on the way: ``(ids, kind (1 in a key, 0 after
    the comma), start of the new key's bytes in the token, [lo, hi) of the completed key's bytes
    in the token or -1)``.  Tokens have no ``\\ { } [ ]``, so the depth never changes and what
    they do depends on nothing else."""
    n = toks.shape[0]
    ids = np.empty(n, np.int64)
    kind = np.empty(n, np.int64)
    poff = np.empty(n, np.int64)
    klo = np.empty(n, np.int64)
    khi = np.empty(n, np.int64)
    hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data = probe_buffers()
    m = 0
    for i in range(n):
        t = toks[i]
        start_in_object(hdr, frames, mode, fstate)
        lo, hi = toff[t], toff[t + 1]
        if feed(tdata, lo, hi, hdr, frames, kbuf, kp_off, kp_len, kp_prev, kp_hash, kp_data) != OK:
            continue
        if hdr[DEPTH] != 1 or hdr[NKEYS] > 1:
            continue
        if hdr[MODE] == KEY_STR:
            kind[m] = 1
        elif hdr[MODE] == STRUCT and frames[0, 1] == 0:
            kind[m] = 0
        else:
            continue
        if mode == KEY_STR and hdr[NKEYS] == 0:
            continue  # still the same key: the key pieces (prune_in_key)
        q = hi - 1
        while q >= lo and tdata[q] != QUOTE:
            q -= 1
        poff[m] = q + 1 - lo if kind[m] == 1 else hi - lo
        klo[m] = -1
        khi[m] = -1
        if hdr[NKEYS] == 1:  # the completed key: before the first quote (from inside a key),
            a = lo           # else between the first two quotes
            if mode != KEY_STR:
                while tdata[a] != QUOTE:
                    a += 1
                a += 1
            b = a
            while tdata[b] != QUOTE:
                b += 1
            klo[m] = a - lo
            khi[m] = b - lo
        ids[m] = t
        m += 1
    return ids[:m], kind[:m], poff[:m], klo[:m], khi[:m]


@njit(cache=True, nogil=True)
def prune_table(words, ids, kind, poff, klo, khi, tdata, toff, q, qlen, head, root, n_root, kdata, koff, trans, bc,
                acc, memo, bmask, stack_s, stack_b, empty, out):
    """Clear from ``words`` the allowed tokens of a landing table (:func:`landing_table`) that
    end after the object's comma with every allowed key used, or inside a key at a dead prefix
    (``root``: the states after a key's opening quote; a completed key joins the used keys; from
    inside a key, ``q[:qlen]`` is its start).  ``empty[0]``: whether the empty key prefix is dead
    at ``root`` with the used keys alone (-1 not known yet; set here when found).  The ids cleared
    go to ``out`` (room for all of ``ids``); returns their number."""
    one = np.uint32(1)
    empty_dead = empty[0]
    pref = np.empty(256, np.uint8)
    cur = np.empty(max(n_root, 1), np.int64)
    nxt = np.empty(max(n_root, 1), np.int64)
    cleared = 0
    for i in range(ids.shape[0]):
        t = ids[i]
        w = t >> 5
        bit = one << np.uint32(t & 31)
        if words[w] & bit == 0:
            continue
        lo = toff[t]
        kd, ko = kdata, koff
        if klo[i] >= 0:
            n = qlen + khi[i] - klo[i]
            extra = np.empty(n, np.uint8)
            for j in range(qlen):
                extra[j] = q[j]
            for j in range(khi[i] - klo[i]):
                extra[qlen + j] = tdata[lo + klo[i] + j]
            kd, ko = _with_key(kdata, koff, extra, 0, n)
        elif head < 0:
            continue
        plen = toff[t + 1] - lo - poff[i] if kind[i] == 1 else 0
        if plen == 0:  # at the start of a key (after its quote or the comma): one answer
            if klo[i] < 0 and empty_dead >= 0:
                dead = empty_dead == 1
            else:
                dead = prefix_dead(trans, bc, acc, memo, bmask, root, n_root, pref, 0, kd, ko, stack_s, stack_b)
                if klo[i] < 0:
                    empty_dead = 1 if dead else 0
                    empty[0] = empty_dead
        else:
            if plen > 255:
                continue
            used = False  # only a prefix of a used key can be dead
            for c in range(ko.shape[0] - 1):
                if key_has(kd, ko, c, 0, tdata, lo + poff[i], plen):
                    used = True
                    break
            if not used:
                continue
            for j in range(n_root):
                cur[j] = root[j]
            nc = n_root
            for j in range(plen):
                b = tdata[lo + poff[i] + j]
                pref[j] = b
                nc = step_states(trans, bc, cur, nc, b, nxt)
                for k in range(nc):
                    cur[k] = nxt[k]
            dead = nc > 0 and prefix_dead(trans, bc, acc, memo, bmask, cur, nc, pref, plen, kd, ko, stack_s,
                                          stack_b)
        if dead:
            words[w] = words[w] & ~bit
            out[cleared] = t
            cleared += 1
    return cleared


@njit(cache=True, nogil=True)
def prune_groups(words, ids, kind, poff, klo, khi, sel, goff, roots, roff, tdata, toff, q, qlen, head, kdata, koff,
                 trans, bc, acc, memo, bmask, stack_s, stack_b):
    """:func:`prune_table` once per group of a landing table's rows: group ``g`` is the rows
    ``sel[goff[g]:goff[g + 1]]``, judged from the states ``roots[roff[g]:roff[g + 1]]`` (none:
    skipped).  Groups with the same states (leads that end the value alike) share whether the
    empty key prefix is dead: with many used keys that search walks all of them.  Returns the ids
    of the tokens cleared (the verdict a caller keeps)."""
    n = goff.shape[0] - 1
    cleared = np.empty(sel.shape[0], np.int64)
    m = 0
    first = np.empty(n, np.int64)        # the first group with the same states
    empty = np.full((n, 1), -1, np.int64)
    for g in range(n):
        a, b = roff[g], roff[g + 1]
        first[g] = g
        for h in range(g):
            if first[h] == h and roff[h + 1] - roff[h] == b - a:
                same = True
                for k in range(b - a):
                    if roots[roff[h] + k] != roots[a + k]:
                        same = False
                        break
                if same:
                    first[g] = h
                    break
        if a == b:
            continue
        s = sel[goff[g]:goff[g + 1]]
        m += prune_table(words, ids[s], kind[s], poff[s], klo[s], khi[s], tdata, toff, q, qlen, head, roots[a:b],
                         b - a, kdata, koff, trans, bc, acc, memo, bmask, stack_s, stack_b, empty[first[g]], cleared[m:])
    return cleared[:m]

# ----------------------------------------------------------------------------- tables
_VOCAB: dict = {}


def vocab_tables(vocab):
    """Per vocabulary (cached): ``unchecked`` (uint8 per token: 1 for the tokens the check leaves
    alone, those with any of ``\\ { } [ ]``) and the landing tables (:func:`landing_table`) of
    the other tokens with a ``"`` or ``,``, per starting point (``_STARTS``), their rows grouped
    by lead (:func:`_with_leads`)."""
    key = (id(vocab), vocab.fingerprint)
    hit = _VOCAB.get(key)
    if hit is not None and hit[0] is vocab:
        return hit[1]
    off = np.asarray(vocab.token_offsets, np.int64)
    data = np.asarray(vocab.token_data)
    width = int(vocab.logits_width)
    n = min(width, off.shape[0] - 1)
    normal = np.zeros(width, bool)
    normal[:n] = np.asarray(vocab.is_normal, bool)[:n]

    def has(byte):
        cs = np.concatenate([[0], np.cumsum(data == byte, dtype=np.int64)])
        out = np.zeros(width, bool)
        out[:n] = (cs[off[1:n + 1]] - cs[off[:n]]) > 0
        return out

    bad = np.zeros(width, bool)
    for b in _UNCHECKED:
        bad |= has(b)
    ok = normal & ~bad
    quote, comma = has(QUOTE), has(0x2C)
    cand = np.flatnonzero(ok & (quote | comma)).astype(np.int64)
    data64, off64 = np.ascontiguousarray(data), np.ascontiguousarray(off)
    landings = {start: _with_leads(landing_table(data64, off64, cand, start[0], start[1]), data64, off64)
                for start in _STARTS}
    tables = ((~ok).astype(np.uint8), landings)
    if len(_VOCAB) > 16:
        _VOCAB.clear()
    _VOCAB[key] = (vocab, tables)
    return tables


def _with_leads(table, data, off):
    """A landing table with its rows grouped by lead: ``(*table, group of each row, (lead bytes,
    kind) of each group)``; a row's lead is its token's bytes before the new key (``poff``)."""
    ids, kind, poff = table[0], table[1], table[2]
    index: dict = {}
    gid = np.empty(ids.shape[0], np.int64)
    for i in range(ids.shape[0]):
        o = int(off[ids[i]])
        gid[i] = index.setdefault((data[o:o + int(poff[i])].tobytes(), int(kind[i])), len(index))
    return (*table, gid, list(index))


_LAYOUTS = (b'"', b' "', b'\n"', b'\r\n"', b'\t"')
_MAX_INDENT = 64


def key_start_states(inner, data: bytes):
    """The automaton states after ``data`` (a comma, with what came before it in its token),
    the whitespace the layout asks for and a key's opening quote; None when none is found."""
    return key_start_states_each(inner, [data])[0]


def key_start_states_each(inner, leads) -> list:
    """:func:`key_start_states` of each lead, the grammar probed for all of them at once
    (:meth:`~structgen.runtime.protocol.ByteStateView.byte_states_after_each`): per lead the states
    of the first layout that opens a key -- ``_LAYOUTS``, then a newline and ``n`` spaces or tabs
    for ``n`` up to ``_MAX_INDENT`` (a pretty-printed object) -- or None.  An indentation is only
    tried while the grammar takes the newline and the padding before the quote, so a lead after
    which no key can start costs a few probes, not a hundred."""
    out: list = [None] * len(leads)
    todo = list(range(len(leads)))
    for ws in _LAYOUTS:
        if not todo:
            return out
        res = inner.byte_states_after_each([leads[i] + ws for i in todo])
        for i, st in zip(todo, res):
            out[i] = st
        todo = [i for i in todo if out[i] is None]
    if not todo:
        return out
    res = inner.byte_states_after_each([leads[i] + b"\n" for i in todo])
    pads = [(i, pad) for i, st in zip(todo, res) if st is not None for pad in (b" ", b"\t")]
    for n in range(1, _MAX_INDENT + 1):
        if not pads:
            break
        probes = []
        for i, pad in pads:
            body = leads[i] + b"\n" + pad * n
            probes += [body, body + b'"']
        res = inner.byte_states_after_each(probes)
        alive = []
        for k, (i, pad) in enumerate(pads):
            if out[i] is not None:
                continue   # found with spaces at this n: tabs of the same n come after it
            if res[2 * k + 1] is not None:
                out[i] = res[2 * k + 1]
            elif res[2 * k] is not None:
                alive.append((i, pad))
        pads = [(i, pad) for i, pad in alive if out[i] is None]
    return out


VERDICTS = 1024  # landing checks a LiveKeys keeps (see _prune_landings)
_NONE_CLEARED = np.zeros(0, np.int64)


class LiveKeys:
    """The liveness check of one :class:`~structgen.runtime.key_guard.KeyGuardMatcher`
    (its state: per-object key lists, dropped on rollback).

    ``inner`` is the guard's inner matcher, seen only through
    :class:`~structgen.runtime.protocol.ByteStateView`; the guard passes its tracker and its
    position (steps accepted) to every call."""

    def __init__(self, inner, vocab, memo=None):
        self.inner = inner
        self.vocab = vocab
        self.tables = vocab_tables(vocab)
        self.memo: dict = {} if memo is None else memo
        self._auto = None  # (trans, bc, acc, cycle memo, byte masks, scratch, scratch), on first use
        self._verdicts: dict = {}  # everything a landing check reads, as bytes -> the tokens it cleared
        self._lead_verdicts: dict = {}  # the same, the leads' states named by inner.leads_key (till a rollback)

    def _automaton(self):
        if self._auto is None:
            trans, bc, acc = self.inner.byte_automaton()
            self._auto = (trans, bc, acc, *cycle_memo(trans))
        return self._auto

    def fork(self, inner) -> "LiveKeys":
        f = LiveKeys(inner, self.vocab, dict(self.memo))
        f._verdicts = dict(self._verdicts)
        return f

    def clear(self) -> None:
        self.memo.clear()
        self._lead_verdicts.clear()

    def rolled_back(self, nkeys: int, pos: int) -> None:
        """Drop what named pool keys ``>= nkeys`` or positions ``>= pos`` (the guard went back
        to a point with ``nkeys`` recorded keys after ``pos`` steps: pool indices and positions
        are reused from there on)."""

        def valid(k, v):
            return k[1] < nkeys

        for k in [k for k, v in self.memo.items() if not valid(k, v)]:
            del self.memo[k]
        self._lead_verdicts.clear()  # their keys name the inner matcher's history

    # ------------------------------------------------------------------ used keys
    def _keys(self, tr: Tracker, head: int, extra=None):
        """``(kdata, koff)``: the keys of the object whose newest key is ``head`` (pool index;
        -1: none) plus ``extra``, sorted."""
        k = ("K", head, extra)
        hit = self.memo.get(k)
        if hit is None:
            keys, e = [], head
            while e >= 0:
                o = int(tr.kp_off[e])
                keys.append(tr.kp_data[o:o + int(tr.kp_len[e])].tobytes())
                e = int(tr.kp_prev[e])
            if extra is not None:
                keys.append(extra)
            keys.sort()
            koff = np.zeros(len(keys) + 1, np.int64)
            np.cumsum([len(x) for x in keys], out=koff[1:])
            # read-only whether or not there are keys: one Numba specialisation of the kernels
            # (a writable empty array made the first key of an object load a second one: up to 120 ms)
            kdata = np.frombuffer(b"".join(keys), np.uint8)
            hit = self.memo[k] = (kdata, koff)
        return hit

    def _dead(self, inner_states, prefix: bytes, kdata, koff) -> bool:
        trans, bc, acc, memo, bmask, ss, sb = self._automaton()
        pref = np.frombuffer(prefix, np.uint8) if prefix else np.zeros(1, np.uint8)
        return bool(prefix_dead(trans, bc, acc, memo, bmask, inner_states, inner_states.shape[0], pref, len(prefix),
                                kdata, koff, ss, sb))

    # ------------------------------------------------------------------ advance
    def refuses(self, tr: Tracker, pre, data) -> bool:
        """Whether the token (or bytes) ``data`` just accepted from tracker state ``pre`` must be
        refused (the inner matcher and the tracker ``tr`` are already past it)."""
        h, f, _ = pre
        d = int(h[DEPTH])
        if d == 0 or f[d - 1, 0] != OBJ:
            return False
        mode = int(h[MODE])
        if h[ESC] or (mode == KEY_STR and h[HIGH]):
            return False
        raw = bytes(data)
        if not _UNCHECKED.isdisjoint(raw) or (mode != KEY_STR and b'"' not in raw and b"," not in raw):
            return False
        inner = self.inner
        head = int(f[d - 1, 2])
        if tr.hdr[DEPTH] != d:
            return False
        new = int(tr.hdr[NKEYS] - h[NKEYS])
        extra = None
        if new == 0:
            if head < 0:
                return False
        elif new == 1 and tr.frames[d - 1, 2] == h[NKEYS]:
            e = int(h[NKEYS])
            o = int(tr.kp_off[e])
            extra = tr.kp_data[o:o + int(tr.kp_len[e])].tobytes()
        else:
            return False
        kdata, koff = self._keys(tr, head, extra)
        if tr.hdr[MODE] == KEY_STR:
            prefix = tr.kbuf[:tr.hdr[KLEN]].tobytes()
            return self._dead(inner.byte_states(), prefix, kdata, koff)
        if tr.hdr[MODE] == STRUCT and tr.frames[d - 1, 1] == 0:
            root = key_start_states(inner, b"")
            return root is not None and root.shape[0] > 0 and self._dead(root, b"", kdata, koff)
        return False

    # ------------------------------------------------------------------ mask
    def prune(self, tr: Tracker, pos: int, words) -> None:
        """Clear from ``words`` (the guarded mask, uint32) the tokens :meth:`refuses` refuses
        (``tr``: the guard's tracker, at position ``pos``)."""
        h = tr.hdr
        d = int(h[DEPTH])
        if d == 0 or tr.frames[d - 1, 0] != OBJ:
            return
        head = int(tr.frames[d - 1, 2])
        mode = int(h[MODE])
        unchecked, landings = self.tables
        if h[ESC] or (mode == KEY_STR and h[HIGH]):
            return  # an escape in progress: nothing is checked from here
        trans, bc, acc, memo, bmask, ss, sb = self._automaton()
        kdata, koff = self._keys(tr, head)
        klen = int(h[KLEN]) if mode == KEY_STR else 0
        q = tr.kbuf[:max(klen, 1)].copy()
        if mode == KEY_STR:
            if head >= 0:
                trie = self.vocab.trie
                states = self.inner.byte_states()
                prune_in_key(words, states, states.shape[0], q, klen, kdata, koff, trie.node_byte,
                             trie.node_end, trie.tok_ptr, trie.tok_ids, unchecked, trans, bc, acc, memo, bmask, ss, sb)
            table = landings[(KEY_STR, 0)]  # tokens that complete this key and reach the next one
        else:
            table = landings[(mode, int(tr.frames[d - 1, 1]))] if mode == STRUCT else landings[(VALUE_STR, 2)]
        self._prune_landings(words, table, q, klen, head, kdata, koff, mode == VALUE_STR)

    def _prune_landings(self, words, table, q, klen: int, head: int, kdata, koff, by_leads: bool = False) -> None:
        """Clear the allowed tokens of the landing ``table`` that open a dead key or end after a
        comma with every allowed key used.  Each is judged from the automaton states its own
        bytes reach after the key's opening quote (:meth:`refuses` judges from the states after
        the token: the same), found once per distinct lead (the bytes up to that quote; after a
        comma, the whole token): a member's key language can depend on the members before it
        and on how this token ends the current value or key."""
        ids, kind, poff, klo, khi, gid, leads = table
        if ids.shape[0] == 0:
            return
        rows, g, goff = allowed_groups(words, ids, gid)
        if rows.shape[0] == 0:
            return
        groups = [leads[k] for k in g[goff[:-1]].tolist()]
        # inside a string value each token moves the grammar to a new point, but the leads' states
        # stay those after the closing quote: the verdict is also kept under the leads' own key,
        # which the inner matcher finds without probing for the states (``by_leads``: elsewhere
        # the check seldom comes back to the same leads at another point)
        common = (id(table), rows.tobytes(), kdata.tobytes(), koff.tobytes(), q[:klen].tobytes(), head >= 0)
        lk = self.inner.leads_key([x for x, _ in groups]) if by_leads else None
        fast = None if lk is None else common + (lk,)
        if fast is not None:
            cleared = self._lead_verdicts.get(fast)
            if cleared is not None:
                clear_bits(words, cleared)
                return
        # every lead's states from batched probes of the grammar: inside a key the states right
        # after the lead, else those where the next key opens
        in_key = [i for i, (_, k) in enumerate(groups) if k]
        opens = [i for i, (_, k) in enumerate(groups) if not k]
        roots = [None] * len(groups)
        for i, st in zip(in_key, self.inner.byte_states_after_each([groups[i][0] for i in in_key])):
            roots[i] = st
        for i, st in zip(opens, key_start_states_each(self.inner, [groups[i][0] for i in opens])):
            roots[i] = st
        sizes = [0 if r is None else r.shape[0] for r in roots]
        if not any(sizes):
            if fast is not None:
                _keep(self._lead_verdicts, fast, _NONE_CLEARED)
            return  # no key reachable: nothing to judge (the inner mask decides)
        roff = np.fromiter(accumulate(sizes, initial=0), np.int64, len(sizes) + 1)
        flat = np.concatenate([r for r in roots if r is not None and r.shape[0]]).astype(np.int64, copy=False)
        # the same check repeats after every token of a string value (same rows, states and keys):
        # its verdict is kept under all it reads, so it holds wherever the key comes back
        key = common + (flat.tobytes(), roff.tobytes())
        cleared = self._verdicts.get(key)
        if cleared is None:
            trans, bc, acc, memo, bmask, ss, sb = self._automaton()
            cleared = prune_groups(words, ids, kind, poff, klo, khi, rows, goff, flat, roff, self.vocab.token_data,
                                   self.vocab.token_offsets, q, klen, head, kdata, koff, trans, bc, acc, memo, bmask,
                                   ss, sb)
            _keep(self._verdicts, key, cleared)
        else:
            clear_bits(words, cleared)
        if fast is not None:
            _keep(self._lead_verdicts, fast, cleared)


@njit(cache=True, nogil=True)
def allowed_groups(words, ids, gid):
    """``(rows, g, goff)``: the rows of a landing table whose token ``ids[row]`` the mask ``words``
    allows, ordered by lead group ``gid[row]`` (stable), their groups, and where each group starts
    (``goff``, one past the last at the end).  One kernel call instead of six small numpy
    operations (about 12 us at a hundred rows)."""
    rows = np.empty(ids.shape[0], np.int64)
    n = 0
    for r in range(ids.shape[0]):
        t = ids[r]
        if (words[t >> 5] >> np.uint32(t & 31)) & np.uint32(1):
            rows[n] = r
            n += 1
    rows = rows[:n]
    g = gid[rows]
    order = np.argsort(g, kind="mergesort")
    rows = rows[order]
    g = g[order]
    goff = np.empty(n + 1, np.int64)
    k = 0
    for i in range(n):
        if i == 0 or g[i] != g[i - 1]:
            goff[k] = i
            k += 1
    goff[k] = n
    return rows, g, goff[:k + 1]


def _keep(memo: dict, key, cleared) -> None:
    """Keep a verdict, at most ``VERDICTS`` per memo (then it starts afresh)."""
    if len(memo) >= VERDICTS:
        memo.clear()
    memo[key] = cleared
