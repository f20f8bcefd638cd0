"""Lookarounds whose view is not the pattern's own continuation, with marker bytes.

Marker bytes (``0xFB``..``0xFF``) never occur in UTF-8, so they can stand for a position inside
the language being built; the lookaround views let them through anywhere
(:func:`marker_transparent`, :func:`marker_complement`).

- **The end of a grammar terminal's lexeme.**  A lookahead in a terminal sees the text after the
  lexeme, up to the end of the input (Lark's dynamic lexers match a terminal's regex against the
  whole text).  :func:`split_at_marker` reads the pattern lowered with the continuation
  ``MARK .*``: in the minimal DFA of that language the states reached by ``MARK`` split the
  lexemes into variants (the lexemes that reach state ``q``, the rests of the input allowed after
  them = the language of ``q``).  Exact: a lexeme ``w`` with rest ``r`` matches in context iff
  ``w MARK r`` is in the language, by construction of the continuation.
- **Lookbehinds.**  A lookbehind lowers to its own marker (:data:`BEHIND_BYTES`);
  :func:`resolve_behind` then keeps, at each of its occurrences, only the strings whose text
  before it ends (or, negative, does not end) with the lookbehind's body, and erases the marker.
  In a grammar terminal the text before the lexeme is not seen: a lookbehind that could look
  there is refused (:func:`behind_width`, :func:`shortest_before`).
"""
from __future__ import annotations

import heapq

import numpy as np

from ...automaton import ir, ops
from ...automaton.build import DEFAULT_MAX_STATES, build_dfa, embedded
from ...automaton.dfa import ByteDFA
from ...automaton.minimize import canonical_dfa
from ...automaton.product import shared_classes
from ...errors import LimitExceeded

MARK_BYTE = 0xFF
#: the markers of a pattern's lookbehinds, one per lookbehind
BEHIND_BYTES = (0xFE, 0xFD, 0xFC, 0xFB)
_MARKERS = (MARK_BYTE, *BEHIND_BYTES)


def marker_node(byte: int) -> ir.Node:
    """The IR of the one-byte string ``byte``."""
    bc = np.zeros(256, np.int32)
    bc[byte] = 1
    return ir.Embed(canonical_dfa(np.array([[-1, 1], [-1, -1]], np.int32), np.array([False, True]), bc))


#: the marker of the end of the lexeme
MARK = marker_node(MARK_BYTE)


def _with_columns(d: ByteDFA, columns: dict):
    """``(transitions, byte classes)`` of ``d`` where byte ``b`` of ``columns`` moves as
    ``columns[b]`` (a state per state) in a class of its own."""
    trans = np.array(d.transitions, np.int32)
    bc = np.array(d.byte_class, np.int32)
    for b, col in columns.items():
        c = int(bc[b])
        if int((bc == c).sum()) == 1:  # alone in its class: its column is rewritten
            trans[:, c] = col
        else:  # (every class keeps a byte: the minimiser's class compression expects it)
            bc[b] = trans.shape[1]
            trans = np.hstack([trans, np.asarray(col, np.int32)[:, None]])
    return trans, bc


def marker_transparent(node: ir.Node, max_states: int = DEFAULT_MAX_STATES) -> ir.Node:
    """``node``'s language with every marker allowed anywhere (loops at every state): a
    lookaround's view, which the positions the markers stand for do not interrupt."""
    d = build_dfa(node, max_states=max_states)
    loop = np.arange(d.n_states, dtype=np.int32)
    trans, bc = _with_columns(d, {b: loop for b in _MARKERS})
    return embedded(canonical_dfa(trans, d.accepting, bc))


def _complete(d: ByteDFA):
    """``(transitions, accepting)`` of ``d`` with a sink state for its dead moves (the last row)."""
    n, k = d.transitions.shape
    trans = np.vstack([np.where(d.transitions < 0, n, d.transitions), np.full((1, k), n, np.int32)])
    return trans.astype(np.int32), np.append(np.asarray(d.accepting, bool), False)


def marker_complement(node: ir.Node, max_states: int = DEFAULT_MAX_STATES) -> ir.Node:
    """Every byte string not in :func:`marker_transparent` of ``node`` (a negative lookahead's
    view; intersected with the continuation, which keeps the text UTF-8)."""
    d = build_dfa(marker_transparent(node, max_states), max_states=max_states)
    trans, acc = _complete(d)
    return embedded(canonical_dfa(trans, ~acc, d.byte_class))


def split_at_marker(d: ByteDFA) -> list:
    """``[(lexeme DFA, rest DFA or None)]`` of the DFA of ``lexeme MARK rest`` (one marker per
    string); ``None`` where every rest is allowed."""
    n = d.n_states
    after = np.asarray(d.transitions)[:, int(d.byte_class[MARK_BYTE])]
    plain, bc = _with_columns(d, {MARK_BYTE: np.full(n, -1, np.int32)})  # no marker inside a lexeme or a rest
    out = []
    anything = ops.utf8_star()
    for q in sorted({int(t) for t in after if t >= 0}):
        lexemes = canonical_dfa(plain, after == q, bc)
        order = np.arange(n)
        order[0], order[q] = q, 0  # state q first: the rest DFA starts there
        rank = np.argsort(order)
        moved = np.where(plain[order] < 0, -1, rank[np.maximum(plain[order], 0)]).astype(np.int32)
        rest = canonical_dfa(moved, np.asarray(d.accepting, bool)[order], bc)
        out.append((lexemes, None if ops.equivalent(rest, anything) else rest))
    return out


def resolve_behind(d: ByteDFA, byte: int, body: ir.Node, negative: bool,
                   max_states: int = DEFAULT_MAX_STATES) -> ByteDFA:
    """``d`` (a language with lookbehind marker ``byte``) where, at each ``byte``, the text before
    it (markers skipped) ends with a string of ``body`` (not, when ``negative``), without the
    marker: a subset construction over pairs (state of ``d``, state of the view ``.* body``) where
    ``byte`` is an empty move allowed when the view's state says so."""
    view = build_dfa(marker_transparent(ir.seq(ir.Repeat(ir.ANY_CHAR, 0, None), body), max_states),
                     max_states=max_states)
    vt, vacc = _complete(view)
    dt, dbc, dacc = np.asarray(d.transitions), np.asarray(d.byte_class), np.asarray(d.accepting)
    vbc = np.asarray(view.byte_class)
    m = int(dbc[byte])
    bc, reps = shared_classes([dbc, vbc])
    reps = [b for b in reps if b != byte]  # the marker's own class (the view loops on it): empty moves
    cls = [int(bc[b]) for b in reps]

    def closure(pairs):
        out = set(pairs)
        todo = list(pairs)
        while todo:
            q, s = todo.pop()
            q2 = int(dt[q, m])
            if q2 >= 0 and bool(vacc[s]) != negative and (q2, s) not in out:
                out.add((q2, s))
                todo.append((q2, s))
        return frozenset(out)

    start = closure({(int(d.start), int(view.start))})
    index = {start: 0}
    sets = [start]
    rows = []
    j = 0
    while j < len(sets):
        row = np.full(bc.max() + 1, -1, np.int32)
        for b, c in zip(reps, cls):
            nxt = {(int(dt[q, dbc[b]]), int(vt[s, vbc[b]])) for q, s in sets[j] if dt[q, dbc[b]] >= 0}
            if not nxt:
                continue
            key = closure(nxt)
            if key not in index:
                if len(sets) >= max_states:
                    raise LimitExceeded(f"a lookbehind needs more than {max_states} DFA states", "max_states",
                                        max_states)
                index[key] = len(sets)
                sets.append(key)
            row[c] = index[key]
        rows.append(row)
        j += 1
    acc = np.array([any(dacc[q] for q, _ in st) for st in sets])
    return canonical_dfa(np.array(rows, np.int32).reshape(len(sets), -1), acc, bc)


def behind_width(body: ir.Node, max_states: int = DEFAULT_MAX_STATES) -> int | None:
    """The most code points a string of ``body`` has (None: no bound)."""
    d = build_dfa(body, max_states=max_states)
    n = d.n_states
    if n == 0:
        return 0
    t = np.asarray(d.transitions)[:, np.asarray(d.byte_class)]  # [n, 256]
    lead = np.array([not 0x80 <= b < 0xC0 for b in range(256)], np.int64)
    indeg = np.zeros(n, np.int64)
    for s in range(n):
        for x in t[s][t[s] >= 0]:
            indeg[x] += 1
    order = [s for s in range(n) if indeg[s] == 0]
    for s in order:  # Kahn's order; a trimmed DFA with a cycle has strings of every length
        for x in t[s][t[s] >= 0]:
            indeg[x] -= 1
            if indeg[x] == 0:
                order.append(int(x))
    if len(order) < n:
        return None
    longest = np.zeros(n, np.int64)
    for s in reversed(order):
        ok = t[s] >= 0
        if ok.any():
            longest[s] = int((longest[t[s][ok]] + lead[ok]).max())
    return int(longest[d.start])


def shortest_before(d: ByteDFA, byte: int) -> int:
    """The fewest code points any string of ``d`` has before a ``byte`` marker (markers not
    counted); a large number when ``byte`` never occurs."""
    dt, dbc = np.asarray(d.transitions), np.asarray(d.byte_class)
    n = d.n_states
    dist = np.full(n, 1 << 30, np.int64)
    dist[d.start] = 0
    todo = [(0, int(d.start))]
    best = 1 << 30
    while todo:
        dd, s = heapq.heappop(todo)
        if dd > dist[s]:
            continue
        if dt[s, dbc[byte]] >= 0:
            best = min(best, dd)
        for b in range(256):
            x = int(dt[s, dbc[b]])
            if x < 0:
                continue
            w = 0 if (0x80 <= b < 0xC0 or b in _MARKERS) else 1
            if dd + w < dist[x]:
                dist[x] = dd + w
                heapq.heappush(todo, (dd + w, x))
    return best
