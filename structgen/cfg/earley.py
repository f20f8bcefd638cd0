"""Incremental Earley recogniser over lexemes, stepped one byte at a time (Numba kernels).

State of a parse after some bytes (all flat int32 arrays, so a trie walk can push
and pop it cheaply):

- the *chart*: Earley sets created at lexeme boundaries.  Set ``k`` holds the
  items ``items[set_off[k]:set_off[k+1]]``, each ``(dotted_rule, origin_set)``.
  Sets are append-only: undoing bytes is truncating to an earlier ``n_sets``.
- the *frontier*: lexemes in progress, ``(g, j)`` = global lexer-DFA state ``g``
  (which names its terminal) of a lexeme that started at set ``j``.  Only states
  that can still consume a byte are kept.
- ``acc``: whether the bytes so far form a complete sentence.

Stepping a byte ``b``: every frontier lexeme steps its DFA; those that reach an
accepting state *complete* their terminal: the items of set ``j`` waiting for it
advance into a new set ``k`` (one per byte, shared by all completions at that
byte), which is closed under prediction and completion (with the
Aycock–Horspool fix for nullable nonterminals), and every terminal it expects
starts a new lexeme at ``k``.  All lexings are explored at once, so this
recognises exactly the language described in :mod:`structgen.cfg.grammar`.
A new lexeme takes the origin of a lexeme of its terminal already in progress when both
origins have the same :func:`signature` (the items its future can read), so a terminal that may
follow itself does not keep one lexeme per byte.

Grammar arrays (see :class:`structgen.cfg.engine.Tables`): dotted rules ``dr``
with ``dr_next[dr]`` (next symbol: nonterminal ``< NN``, terminal ``NN + t``,
-1 when complete) and ``dr_lhs[dr]``; ``nt_ptr``/``nt_dr0`` (CSR: the dot-0
dotted rules of each nonterminal); ``nullable``; ``final_dr`` (dotted rules whose
presence with origin 0 means "accepting").  Lexer: ``trans[g, byte]`` over the
concatenated terminal DFAs, ``gacc``/``gout`` (accepting / has a transition),
``gterm`` (terminal of a state), ``tstart`` (start state of each terminal).

Kernels return -1 when an output buffer is too small; the caller grows it and
retries (nothing is committed before a step succeeds).
"""
from __future__ import annotations

import numpy as np
from numba import njit

OVERFLOW = -1


@njit(cache=True, nogil=True)
def add_item(items, set_base, n, dr, org, k, mark, stamp, seen):
    """Append (dr, org) to set k (items[set_base:n]) unless present; returns new n (-1: full).

    ``mark`` has two halves: ``mark[dr] == stamp`` iff (dr, k) is in the set,
    ``mark[half + dr] == stamp`` iff dr is there with some other origin.  Only then is a
    duplicate looked for: in ``seen`` when it is not None and the set is below half its
    slots (an open-addressing table of ``(dr << 32 | org, stamp)`` pairs, stale entries being
    those of older stamps: the lattice's sets hold one rule with hundreds of origins), else by
    scanning the set."""
    if org == k:
        if mark[dr] == stamp:
            return n
        mark[dr] = stamp
    elif seen is None:  # (pruned at compile time: the autoregressive specialisation only scans)
        h = mark.shape[0] // 2 + dr
        if mark[h] == stamp:
            for p in range(set_base, n):
                if items[p, 0] == dr and items[p, 1] == org:
                    return n
        else:
            mark[h] = stamp
    else:
        h = mark.shape[0] // 2 + dr
        hashed = 2 * (n - set_base) < seen.shape[0] // 2
        if mark[h] == stamp:
            if hashed:
                if not _seen_insert(seen, (np.int64(dr) << 32) | org, stamp):
                    return n
            else:
                for p in range(set_base, n):
                    if items[p, 0] == dr and items[p, 1] == org:
                        return n
        else:
            mark[h] = stamp
            if hashed:
                _seen_insert(seen, (np.int64(dr) << 32) | org, stamp)
    if n >= items.shape[0]:
        return -1
    items[n, 0] = dr
    items[n, 1] = org
    return n + 1


@njit(cache=True, nogil=True)
def _seen_insert(seen, key, stamp):
    """Insert ``key`` into the table ``seen`` (slot i: ``seen[2i]`` key, ``seen[2i+1]`` its stamp;
    a power-of-two number of slots); False when it was there under ``stamp`` already."""
    mask = seen.shape[0] // 2 - 1
    i = ((key * np.int64(0x9E3779B97F4A7C15)) >> np.int64(20)) & mask
    while seen[2 * i + 1] == stamp:
        if seen[2 * i] == key:
            return False
        i = (i + 1) & mask
    seen[2 * i] = key
    seen[2 * i + 1] = stamp
    return True


# -------------------------------------------------------------- waiter index (mask scratch)
# A mask closes a hundred would-be sets, and each completion or signature looked for the items of an
# origin set waiting for one symbol by scanning the whole set (python.lark: 300-700 items, a dozen
# completions per closing).  Within one mask no set below the one being closed changes, so
# :func:`waiters` groups a set's items by next symbol on first use, once per mask: ``wx`` is
# ``(wkeys, wstamp, wval, wpool)``, an open-addressing table ``(set << 32 | symbol) -> head`` whose
# slots are live where ``wstamp`` equals the mask's stamp ``stampbox[1]`` (key ``set << 32 | NO_SYMBOL``:
# the set is indexed), and a pool of ``(item position, next entry)`` chains filled up to
# ``stampbox[2]``.  The lookups return ``INDEX_FULL`` when table or pool must grow.
INDEX_FULL = -2
SCAN_BELOW = 48  # sets smaller than this are scanned: indexing them costs more than it saves
_NO_SYMBOL = np.int64(0x7FFFFFFF)


@njit(cache=True, nogil=True, inline="always")
def _wslot(wkeys, wstamp, cur, key):
    m = wkeys.shape[0] - 1
    h = key * np.int64(-7046029254386353131)
    s = (h ^ (h >> 31)) & m
    while wstamp[s] == cur and wkeys[s] != key:
        s = (s + 1) & m
    return s


@njit(cache=True, nogil=True)
def waiters(o, x, items, set_off, dr_next, wx, stampbox):
    """The first entry of the chain of items of (closed) set ``o`` whose next symbol is ``x`` in
    ``wx``'s pool (follow ``wpool[e, 1]``; the item is ``wpool[e, 0]``), -1 when there is none,
    ``INDEX_FULL`` when the index must grow.  Chains run in the set's order."""
    wkeys, wstamp, wval, wpool = wx
    cur = stampbox[1]
    o64 = np.int64(o) << 32
    s = _wslot(wkeys, wstamp, cur, o64 | _NO_SYMBOL)
    if wstamp[s] != cur:  # first use of set o in this mask: index it
        lo, hi = set_off[o], set_off[o + 1]
        if 2 * (stampbox[3] + hi - lo + 1) > wkeys.shape[0] or stampbox[2] + hi - lo > wpool.shape[0]:
            return INDEX_FULL
        wkeys[s] = o64 | _NO_SYMBOL
        wstamp[s] = cur
        stampbox[3] += 1
        e = stampbox[2]
        for p in range(hi - 1, lo - 1, -1):
            y = dr_next[items[p, 0]]
            if y < 0:
                continue
            t = _wslot(wkeys, wstamp, cur, o64 | y)
            if wstamp[t] != cur:
                wkeys[t] = o64 | y
                wstamp[t] = cur
                wpool[e, 1] = -1
                stampbox[3] += 1
            else:
                wpool[e, 1] = wval[t]
            wpool[e, 0] = p
            wval[t] = e
            e += 1
        stampbox[2] = e
    s = _wslot(wkeys, wstamp, cur, o64 | x)
    return wval[s] if wstamp[s] == cur else -1


@njit(cache=True, nogil=True)
def advance_scanned(o, x, items, set_off, base, n, k, dr_next, mark, stamp, seen):
    """:func:`advance_waiters` by scanning set ``o``; returns the new end (-1: the chart is full)."""
    for q in range(set_off[o], set_off[o + 1]):
        d2 = items[q, 0]
        if dr_next[d2] == x:
            n = add_item(items, base, n, d2 + 1, items[q, 1], k, mark, stamp, seen)
            if n < 0:
                return -1
    return n


@njit(cache=True, nogil=True)
def advance_waiters(o, x, items, set_off, base, n, k, dr_next, mark, stamp, seen, wx, stampbox):
    """Add to set k (being built, ``items[base:n]``) the items of set ``o`` waiting for symbol ``x``
    with their dot moved over it, found through the waiter index ``wx`` (a set under ``SCAN_BELOW``
    items is scanned); returns the new end (-1: the chart is full, ``INDEX_FULL``: the index is)."""
    if set_off[o + 1] - set_off[o] < SCAN_BELOW:
        return advance_scanned(o, x, items, set_off, base, n, k, dr_next, mark, stamp, seen)
    e = waiters(o, x, items, set_off, dr_next, wx, stampbox)
    if e == INDEX_FULL:
        return INDEX_FULL
    wpool = wx[3]
    while e >= 0:
        q = wpool[e, 0]
        n = add_item(items, base, n, items[q, 0] + 1, items[q, 1], k, mark, stamp, seen)
        if n < 0:
            return -1
        e = wpool[e, 1]
    return n


@njit(cache=True, nogil=True)
def close_set(items, set_off, k, n, NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, mark, stamp, seen,
              wx=None, stampbox=None):
    """Close set k (items[set_off[k]:n]) under prediction and completion; returns the new end (-1: full,
    ``INDEX_FULL``: the waiter index ``wx`` must grow; without one, origin sets are scanned).

    Two shortcuts, both exact: a nonterminal is expanded once per set (its first dot-0 rule with
    origin ``k`` is present exactly when it was), and a rule completed with origin ``k`` (an empty
    derivation, its left-hand side nullable) is not completed against set ``k``: every item of
    ``k`` waiting for a nullable nonterminal has been advanced over it already (Aycock-Horspool),
    and that scan of the growing set was most of the closing time of large grammars."""
    base = set_off[k]
    p = base
    while p < n:
        dr = items[p, 0]
        org = items[p, 1]
        s = dr_next[dr]
        if s < 0:
            if org == k:
                p += 1
                continue
            a = dr_lhs[dr]
            if wx is None:
                n = advance_scanned(org, a, items, set_off, base, n, k, dr_next, mark, stamp, seen)
                if n < 0:
                    return -1
            else:
                n = advance_waiters(org, a, items, set_off, base, n, k, dr_next, mark, stamp, seen, wx, stampbox)
                if n < 0:
                    return n
        elif s < NN:
            r0, r1 = nt_ptr[s], nt_ptr[s + 1]
            if r0 < r1 and mark[nt_dr0[r0]] == stamp:
                r0 = r1  # predicted already
            for r in range(r0, r1):
                n = add_item(items, base, n, nt_dr0[r], k, k, mark, stamp, seen)
                if n < 0:
                    return -1
            if nullable[s]:
                n = add_item(items, base, n, dr + 1, org, k, mark, stamp, seen)
                if n < 0:
                    return -1
        p += 1
    return n


@njit(cache=True, nogil=True)
def set_accepting(items, set_off, k, final_dr):
    for p in range(set_off[k], set_off[k + 1]):
        if items[p, 1] == 0:
            d = items[p, 0]
            for f in range(final_dr.shape[0]):
                if final_dr[f] == d:
                    return True
    return False


@njit(cache=True, nogil=True)
def _add_pair(fout, nf, g, org):
    """Append the frontier pair (g, org) to ``fout[:nf]`` unless present; the new count, or -1
    when ``fout`` is full."""
    for q in range(nf):
        if fout[q, 0] == g and fout[q, 1] == org:
            return nf
    if nf >= fout.shape[0]:
        return -1
    fout[nf, 0] = g
    fout[nf, 1] = org
    return nf + 1


@njit(cache=True, nogil=True)
def predict_frontier(items, set_off, k, NN, dr_next, tstart, fout, nf):
    """Start a lexeme at set k for every terminal it expects; returns the new count (-1: full)."""
    for p in range(set_off[k], set_off[k + 1]):
        s = dr_next[items[p, 0]]
        if s >= NN:
            g = tstart[s - NN]
            nf = _add_pair(fout, nf, g, k)
            if nf < 0:
                return -1
    return nf


# origin aliasing (see :func:`predict_frontier_aliased`): sets and signatures larger than these are
# not compared (the comparison must stay cheaper than the lexeme it saves)
ALIAS_SET_ITEMS = 512
ALIAS_SIGNATURE = 64


@njit(cache=True, nogil=True, inline="always")
def _next_waiting(items, p, hi, x, dr_next):
    """The first position after ``p`` and below ``hi`` of an item waiting for ``x``, else -1."""
    for q in range(p + 1, hi):
        if dr_next[items[q, 0]] == x:
            return q
    return -1


@njit(cache=True, nogil=True)
def signature(items, set_off, j, sym, NN, dr_next, dr_lhs, out, syms, wx=None, stampbox=None):
    """The items of set ``j`` a lexeme of terminal symbol ``sym`` begun at ``j`` can ever read,
    as sorted keys ``dr << 32 | (origin + 1)`` with origin ``j`` itself written as -1, in
    ``out``; returns their number (-1: too many).  Completing the lexeme reads the items of set
    ``j`` waiting for ``sym``; an item among them that began at ``j`` reads set ``j`` again when
    its rule completes (the items waiting for its left-hand side), and so on; nothing else of
    set ``j`` is ever read for it."""
    ns = 1
    syms[0] = sym
    n = 0
    q = 0
    scan = True  # small sets are scanned (see SCAN_BELOW)
    if wx is not None:
        scan = set_off[j + 1] - set_off[j] < SCAN_BELOW
    while q < ns:
        x = syms[q]
        q += 1
        e = -1
        if wx is not None:
            if not scan:
                e = waiters(j, x, items, set_off, dr_next, wx, stampbox)
                if e == INDEX_FULL:
                    return INDEX_FULL
        p = set_off[j] - 1
        while True:  # the items of j waiting for x: by scanning j, or from the index
            # (two scanning branches: Numba prunes `wx is None` only as a condition of its own,
            # and the index branch must not be typed for a missing index)
            if wx is None:
                p = _next_waiting(items, p, set_off[j + 1], x, dr_next)
                if p < 0:
                    break
            elif scan:
                p = _next_waiting(items, p, set_off[j + 1], x, dr_next)
                if p < 0:
                    break
            else:
                if e < 0:
                    break
                p = wx[3][e, 0]
                e = wx[3][e, 1]
            d = items[p, 0]
            o = items[p, 1]
            if n >= out.shape[0]:
                return -1
            out[n] = (np.int64(d) << 32) | np.int64(0 if o == j else o + 1)
            n += 1
            if o == j:
                a = dr_lhs[d]
                seen = False
                for r in range(ns):
                    if syms[r] == a:
                        seen = True
                        break
                if not seen:
                    if ns >= syms.shape[0]:
                        return -1
                    syms[ns] = a
                    ns += 1
    out[:n] = np.sort(out[:n])
    return n


@njit(cache=True, nogil=True)
def frontier_signature(front, nf, items, set_off, NN, dr_next, dr_lhs, gterm, out):
    """A key of everything the next tokens' masks read from the chart: per frontier lexeme its
    lexer state, then the :func:`signature` of its origin set for its terminal (``[g, n, keys...]``
    in frontier order), in ``out``; returns its length, -1 when a signature or ``out`` is too
    long.  Two points of one chart with equal keys allow the same tokens: a signature names the
    origin set's items by rule and origin, with the set itself relative, and every other origin
    is a committed set both points share."""
    # origin sets of SCAN_BELOW items and more are read through a waiter index of their own: many
    # lexemes often share one big origin set, and scanning it once per symbol of every signature
    # cost a millisecond a key (164 lexemes of a 494-item set)
    big = np.empty(nf, np.int64)
    nbig = 0
    pool = 0
    for q in range(nf):
        j = front[q, 1]
        size = set_off[j + 1] - set_off[j]
        if size < SCAN_BELOW:
            continue
        new = True
        for r in range(nbig):
            if big[r] == j:
                new = False
                break
        if new:
            big[nbig] = j
            nbig += 1
            pool += size
    if nbig == 0:
        return _signatures(front, nf, items, set_off, NN, dr_next, dr_lhs, gterm, out)
    slots = 64
    while slots < 2 * (pool + nbig + 1):
        slots *= 2
    wx = (np.zeros(slots, np.int64), np.full(slots, -1, np.int64), np.empty(slots, np.int32),
          np.empty((pool, 2), np.int32))
    return _signatures(front, nf, items, set_off, NN, dr_next, dr_lhs, gterm, out, wx, np.zeros(4, np.int64))


@njit(cache=True, nogil=True)
def _signatures(front, nf, items, set_off, NN, dr_next, dr_lhs, gterm, out, wx=None, stampbox=None):
    """:func:`frontier_signature`'s key, the sets read through ``wx`` when given."""
    tmp = np.empty(ALIAS_SIGNATURE, np.int64)
    syms = np.empty(ALIAS_SIGNATURE, np.int32)
    n = 0
    for q in range(nf):
        g = front[q, 0]
        ns = signature(items, set_off, front[q, 1], NN + gterm[g], NN, dr_next, dr_lhs, tmp, syms, wx, stampbox)
        if ns < 0 or n + 2 + ns > out.shape[0]:
            return -1
        out[n] = g
        out[n + 1] = ns
        for r in range(ns):
            out[n + 2 + r] = tmp[r]
        n += 2 + ns
    return n


@njit(cache=True, nogil=True)
def predict_frontier_aliased(items, set_off, k, NN, dr_next, dr_lhs, gterm, tstart, fout, nf):
    """:func:`predict_frontier` for a set ``k`` made by a byte, whose frontier ``fout[:nf]`` holds the
    lexemes still going: a new lexeme of terminal ``t`` takes the origin ``j`` of such a lexeme of
    ``t`` instead of ``k`` when the two origins have the same :func:`signature` -- its future
    (completions, predictions after it) is then the same from either, and once both lexemes
    reach the same lexer state they are one frontier entry.  Without this, a terminal that may
    follow itself (``WORD WORD`` with an optional separator between) keeps one lexeme per byte of
    the current word, and every step and mask costs the word's length."""
    nf0 = nf
    sig_k = np.empty(ALIAS_SIGNATURE, np.int64)
    sig_j = np.empty(ALIAS_SIGNATURE, np.int64)
    syms = np.empty(ALIAS_SIGNATURE, np.int32)
    small = set_off[k + 1] - set_off[k] <= ALIAS_SET_ITEMS
    for p in range(set_off[k], set_off[k + 1]):
        s = dr_next[items[p, 0]]
        if s < NN:
            continue
        t = s - NN
        g = tstart[t]
        org = k
        if small:
            nk = -2  # signature of (k, t) not computed yet
            tried = -1
            for q in range(nf0):
                j = fout[q, 1]
                if j == k or j == tried or gterm[fout[q, 0]] != t or set_off[j + 1] - set_off[j] > ALIAS_SET_ITEMS:
                    continue
                if nk == -2:
                    nk = signature(items, set_off, k, s, NN, dr_next, dr_lhs, sig_k, syms)
                if nk < 0:
                    break
                tried = j
                nj = signature(items, set_off, j, s, NN, dr_next, dr_lhs, sig_j, syms)
                same = nj == nk
                if same:
                    for r in range(nk):
                        if sig_j[r] != sig_k[r]:
                            same = False
                            break
                if same:
                    org = j
                    break
        nf = _add_pair(fout, nf, g, org)
        if nf < 0:
            return -1
    return nf


@njit(cache=True, nogil=True)
def step_byte(b, items, set_off, n_sets, fin, nfin, fout, comp,
              NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, final_dr,
              trans, gacc, gout, gterm, tstart, mark, stampbox, seen):
    """Consume byte ``b``: frontier ``fin[:nfin]`` -> ``fout`` (``seen``: see :func:`add_item`;
    None for small charts: sets are scanned).

    Returns ``(nf, n_sets_after, acc)``; ``nf == -1`` means a buffer overflowed.
    ``nf == 0 and not acc`` means the byte is not viable.
    """
    nf = 0
    nc = 0
    for q in range(nfin):
        g2 = trans[fin[q, 0], b]
        if g2 < 0:
            continue
        j = fin[q, 1]
        if gacc[g2]:
            t = gterm[g2]
            dup = False
            for c in range(nc):
                if comp[c, 0] == t and comp[c, 1] == j:
                    dup = True
                    break
            if not dup:
                if nc >= comp.shape[0]:
                    return -1, n_sets, False
                comp[nc, 0] = t
                comp[nc, 1] = j
                nc += 1
        if gout[g2]:
            dup = False
            for c in range(nf):
                if fout[c, 0] == g2 and fout[c, 1] == j:
                    dup = True
                    break
            if not dup:
                if nf >= fout.shape[0]:
                    return -1, n_sets, False
                fout[nf, 0] = g2
                fout[nf, 1] = j
                nf += 1
    if nc == 0:
        return nf, n_sets, False
    k = n_sets
    if k + 1 >= set_off.shape[0]:
        return -1, n_sets, False
    stampbox[0] += 1
    stamp = stampbox[0]
    base = set_off[k]
    n = base
    for c in range(nc):
        n = advance_scanned(comp[c, 1], NN + comp[c, 0], items, set_off, base, n, k, dr_next, mark, stamp, seen)
        if n < 0:
            return -1, n_sets, False
    n = close_set(items, set_off, k, n, NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, mark, stamp, seen)
    if n < 0:
        return -1, n_sets, False
    set_off[k + 1] = n
    acc = set_accepting(items, set_off, k, final_dr)
    nf = predict_frontier_aliased(items, set_off, k, NN, dr_next, dr_lhs, gterm, tstart, fout, nf)
    if nf < 0:
        return -1, n_sets, False
    return nf, k + 1, acc


@njit(cache=True, nogil=True)
def init_chart(items, set_off, fout, NN, start_nt, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, final_dr,
               tstart, mark, stampbox):
    """Set 0: the predictions of the start symbol.  Returns ``(nf, acc)``."""
    stampbox[0] += 1
    stamp = stampbox[0]
    set_off[0] = 0
    n = 0
    for r in range(nt_ptr[start_nt], nt_ptr[start_nt + 1]):
        n = add_item(items, 0, n, nt_dr0[r], 0, 0, mark, stamp, None)
    n = close_set(items, set_off, 0, n, NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, mark, stamp, None)
    if n < 0:
        return -1, False
    set_off[1] = n
    acc = set_accepting(items, set_off, 0, final_dr)
    nf = predict_frontier(items, set_off, 0, NN, dr_next, tstart, fout, 0)
    return nf, acc


@njit(cache=True, nogil=True)
def step_bytes(data, items, set_off, n_sets, front, nfront, fbuf, comp,
               NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, final_dr,
               trans, gacc, gout, gterm, tstart, mark, stampbox):
    """Consume ``data`` from (n_sets, front[:nfront]).

    Frontiers ping-pong inside ``fbuf`` (shape [2, cap, 2]).  Returns
    ``(status, n_sets, nf, which, acc)``: status 1 = alive (or accepting) after all
    bytes, 0 = rejected, -1 = overflow; the final frontier is ``fbuf[which, :nf]``.
    """
    for q in range(nfront):
        fbuf[0, q, 0] = front[q, 0]
        fbuf[0, q, 1] = front[q, 1]
    nf = nfront
    cur = 0
    acc = False
    if data.shape[0] == 0:
        return 1, n_sets, nf, cur, acc
    for i in range(data.shape[0]):
        if nf == 0:
            return 0, n_sets, 0, cur, False
        res = step_byte(data[i], items, set_off, n_sets, fbuf[cur], nf, fbuf[1 - cur], comp,
                        NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, final_dr,
                        trans, gacc, gout, gterm, tstart, mark, stampbox, None)
        nf2, ns2, acc = res
        if nf2 < 0:
            return -1, n_sets, 0, cur, False
        n_sets = ns2
        nf = nf2
        cur = 1 - cur
    if nf == 0 and not acc:
        return 0, n_sets, 0, cur, False
    return 1, n_sets, nf, cur, acc


@njit(cache=True, nogil=True)
def probe_keys(front, nfront, trans, gacc, gout, data, doff, out, out_off, stop, ended):
    """What each probe ``data[doff[i]:doff[i + 1]]`` reads of the frontier ``front[:nfront]``:
    its bytes are taken by the lexers alone (as :func:`step_byte` does while no lexeme
    completes) up to and including the first byte after which some lexeme may complete, or the
    last; the lexemes alive then, as distinct ``(lexer state, origin set)`` rows sorted, go to
    ``out[out_off[i]:out_off[i + 1]]`` and the index of that byte to ``stop[i]``.  The probe's
    answer follows from those rows and the bytes after ``stop[i]`` alone (with the committed
    sets the origins name), so two frontiers that agree on them give it the same answer: the
    states of a string's characters counted so far differ, those after its closing quote do not.
    ``ended[i]`` is 1 when that byte is one after which a lexeme may complete, or no lexeme is
    alive after it: then the rows and the bytes after ``stop[i]`` also determine the answer of
    every longer probe that starts with this one (0: the probe ran out first).  An empty probe
    gets no rows, ``stop[i] = -1`` and ``ended[i] = 0``.  ``out`` holds ``nfront`` rows per probe."""
    o = 0
    out_off[0] = 0
    cur = np.empty(nfront, np.int64)
    nxt = np.empty(nfront, np.int64)
    for i in range(doff.shape[0] - 1):
        lo = doff[i]
        hi = doff[i + 1]
        stop[i] = -1
        ended[i] = 0
        for q in range(nfront):
            cur[q] = np.int64(front[q, 0]) << 32 | np.int64(front[q, 1])
        n = nfront
        for p in range(lo, hi):
            b = data[p]
            m = 0
            lexeme_end = False
            for q in range(n):
                g2 = trans[cur[q] >> 32, b]
                if g2 >= 0:
                    nxt[m] = np.int64(g2) << 32 | (cur[q] & 0xFFFFFFFF)
                    m += 1
                    if gacc[g2]:
                        lexeme_end = True
            stop[i] = p - lo
            if lexeme_end or m == 0 or p == hi - 1:
                ended[i] = 1 if lexeme_end or m == 0 else 0
                r = np.sort(nxt[:m])
                for q in range(m):
                    if q == 0 or r[q] != r[q - 1]:
                        out[o] = r[q]
                        o += 1
                break
            n = 0
            for q in range(m):  # carried on, as step_byte keeps them
                if gout[nxt[q] >> 32]:
                    cur[n] = nxt[q]
                    n += 1
        out_off[i + 1] = o


@njit(cache=True, nogil=True)
def step_each(data, doff, items, set_off, n_sets, front, nfront, fbuf, comp,
              NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, final_dr,
              trans, gacc, gout, gterm, tstart, mark, stampbox, ok, out, out_off):
    """:func:`step_bytes` of each probe ``data[doff[i]:doff[i + 1]]`` from the same point (each
    overwrites the scratch sets past ``n_sets``): ``ok[i]`` 1 when the grammar takes it, and then
    the distinct lexer states of its final frontier, ascending, in ``out[out_off[i]:out_off[i + 1]]``
    (empty for a refused probe).  Returns 1, -1 when a chart buffer overflows (grow and call
    again), -2 when ``out`` is too small."""
    o = 0
    out_off[0] = 0
    for i in range(doff.shape[0] - 1):
        st, ns, nf, which, acc = step_bytes(data[doff[i]:doff[i + 1]], items, set_off, n_sets, front, nfront, fbuf,
                                            comp, NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, final_dr,
                                            trans, gacc, gout, gterm, tstart, mark, stampbox)
        if st < 0:
            return -1
        ok[i] = st
        if st == 1:
            if o + nf > out.shape[0]:
                return -2
            g = np.sort(fbuf[which, :nf, 0])
            for q in range(nf):
                if q == 0 or g[q] != g[q - 1]:
                    out[o] = g[q]
                    o += 1
        out_off[i + 1] = o
    return 1


@njit(cache=True, nogil=True)
def predict_after(t, j, items, set_off, n_sets, fout,
                  NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, final_dr, tstart, mark, stampbox, wx):
    """Lexer states that start right after terminal ``t`` completes a lexeme begun at set ``j``.

    Builds the would-be set ``n_sets`` without committing it, finding the items of earlier sets
    through the mask's waiter index ``wx`` (see :func:`waiters`).  Returns the number of states
    written to ``fout[:, 0]``, -1 when a chart buffer is too small, ``INDEX_FULL`` when the
    index is.
    """
    k = n_sets
    if k + 1 >= set_off.shape[0]:
        return -1
    stampbox[0] += 1
    stamp = stampbox[0]
    base = set_off[k]
    n = base
    n = advance_waiters(j, NN + t, items, set_off, base, n, k, dr_next, mark, stamp, None, wx, stampbox)
    if n < 0:
        return n
    n = close_set(items, set_off, k, n, NN, dr_next, dr_lhs, nt_ptr, nt_dr0, nullable, mark, stamp, None,
                  wx, stampbox)
    if n < 0:
        return n
    set_off[k + 1] = n
    return predict_frontier(items, set_off, k, NN, dr_next, tstart, fout, 0)
