"""JSON string encoding as a language transform: decoded-text IR -> JSON-escaped-text IR.

Schema constraints on strings (``pattern``, ``format``, ``minLength``...) speak about the *decoded*
string, while the automaton reads the *escaped* JSON text.  :func:`encode` maps a character-level IR
node ``R`` to the IR of every JSON string body whose decoding is in ``R``.  It is a substitution of
each code point by the set of its encodings, and because the JSON escape code is uniquely decodable
(every escaped text decodes to exactly one string) the substitution commutes with union,
concatenation, repetition, *intersection* and *complement* (taken relative to all encoded strings).
So ``encode`` is exact on every IR node, ``And``/``Not`` included.

Encodings of a code point ``c`` (``mode="value"``, RFC 8259 in full):

- itself, unless it is a control character (< U+0020), ``"`` or ``\\``;
- a short escape ``\\" \\\\ \\/ \\b \\f \\n \\r \\t`` where one exists;
- ``\\uXXXX`` with hex digits in either case for c <= U+FFFF (lone surrogates are never produced:
  a lone ``\\uD800`` is legal JSON syntax but is not a Unicode string, so it is outside our language);
- a surrogate pair ``\\uD8xx\\uDCxx`` (either case) for c > U+FFFF.

``mode="key"`` is the narrower form used for object keys, which keeps the key tries of an object's
automaton small: printable ASCII raw (``\\"``, ``\\\\`` escaped), control characters as a short
escape or lowercase ``\\u00xx``, U+007F and above raw or lowercase ``\\uxxxx`` (pairs for the
astral planes).  That is exactly what ``json.dumps`` writes with or without ``ensure_ascii``.
"""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from structgen import caching
from structgen.automaton import ir
from structgen.automaton.build import LRUCache, build_dfa, embedded, recording, replay
from structgen.automaton.minimize import canonical_acyclic_dfa, canonical_dfa
from structgen.errors import LimitExceeded, Unsupported

HEX_LOWER = "0123456789abcdef"
SHORT_ESCAPES = {0x22: '"', 0x5C: "\\", 0x2F: "/", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}
KEY_SHORT = {c: e for c, e in SHORT_ESCAPES.items() if c != 0x2F}
_RAW_FORBIDDEN = ir.CharSet(((0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)))
_RAW_OK = _RAW_FORBIDDEN.negate()
_BACKSLASH = ir.literal("\\")
ANY_STRING_CHARS = ir.Repeat(ir.ANY_CHAR, 0, None)


def _intersect(cs: ir.CharSet, lo: int, hi: int) -> list:
    return [(max(a, lo), min(b, hi)) for a, b in cs.ranges if a <= hi and b >= lo]


def _hex_digit_set(d1: int, d2: int, lower_only: bool) -> ir.Node:
    ranges = []
    for d in range(d1, d2 + 1):
        ch = HEX_LOWER[d]
        ranges.append((ord(ch), ord(ch)))
        if not lower_only and ch.isalpha():
            ranges.append((ord(ch.upper()), ord(ch.upper())))
    return ir.CharSet.of(ranges)


def hex_range(lo: int, hi: int, ndigits: int = 4, lower_only: bool = False) -> ir.Node:
    """IR of the ``ndigits``-digit hex numerals with value in ``lo..hi`` (digits in either case)."""
    if lo > hi:
        return ir.NOTHING
    if ndigits == 0:
        return ir.EMPTY
    unit = 16 ** (ndigits - 1)
    top_lo, top_hi = lo // unit, hi // unit
    rest_lo, rest_hi = lo % unit, hi % unit
    if top_lo == top_hi:
        return ir.seq(_hex_digit_set(top_lo, top_lo, lower_only),
                      hex_range(rest_lo, rest_hi, ndigits - 1, lower_only))
    parts = []
    first, last = top_lo, top_hi
    if rest_lo != 0:
        parts.append(ir.seq(_hex_digit_set(top_lo, top_lo, lower_only),
                            hex_range(rest_lo, unit - 1, ndigits - 1, lower_only)))
        first += 1
    tail = None
    if rest_hi != unit - 1:
        tail = ir.seq(_hex_digit_set(top_hi, top_hi, lower_only), hex_range(0, rest_hi, ndigits - 1, lower_only))
        last -= 1
    if first <= last:
        parts.append(ir.seq(_hex_digit_set(first, last, lower_only), _any_hex(ndigits - 1, lower_only)))
    if tail is not None:
        parts.append(tail)
    return ir.alt(*parts)


@lru_cache(maxsize=256)
def _any_hex(n: int, lower_only: bool) -> ir.Node:
    return ir.repeat(_hex_digit_set(0, 15, lower_only), n, n) if n else ir.EMPTY


def _u_escapes(cs: ir.CharSet, lower_only: bool) -> list:
    """``\\uXXXX`` (and surrogate-pair) encodings of the code points of ``cs``."""
    parts = []
    u = ir.seq(_BACKSLASH, ir.literal("u"))
    bmp = [r for lo, hi in ((0, 0xD7FF), (0xE000, 0xFFFF)) for r in _intersect(cs, lo, hi)]
    if bmp:
        parts.append(ir.seq(u, ir.alt(*[hex_range(a, b, 4, lower_only) for a, b in bmp])))
    for a, b in _intersect(cs, 0x10000, ir.MAX_CODE_POINT):
        a, b = a - 0x10000, b - 0x10000
        ha, hb = 0xD800 + (a >> 10), 0xD800 + (b >> 10)
        la, lb = 0xDC00 + (a & 0x3FF), 0xDC00 + (b & 0x3FF)

        def pair(h1, h2, l1, l2):
            return ir.seq(u, hex_range(h1, h2, 4, lower_only), u, hex_range(l1, l2, 4, lower_only))

        if ha == hb:
            parts.append(pair(ha, ha, la, lb))
            continue
        parts.append(pair(ha, ha, la, 0xDFFF))
        if ha + 1 <= hb - 1:
            parts.append(pair(ha + 1, hb - 1, 0xDC00, 0xDFFF))
        parts.append(pair(hb, hb, 0xDC00, lb))
    return parts


_EMBED_CHARSET_NODES = 24


def encode_charset(cs: ir.CharSet, mode: str = "value") -> ir.Node:
    """The IR of every encoding of one code point of ``cs`` inside a JSON string.

    A large one (the ``\\uXXXX`` forms of a class: dozens of nodes) is returned as its embedded
    minimal DFA, built once: a string pattern or format repeats its classes many times, and the
    automaton builder then adds one small fragment per use instead of re-emitting the tree.
    Encodings are a prefix code, so the DFA is small (tens of states)."""
    node, work = _encode_charset(cs, mode)
    if work is not None:

        replay(work)  # a work budget is charged as if it were built now (see automaton.build)
    return node


@lru_cache(maxsize=4096)
def _encode_charset(cs: ir.CharSet, mode: str):
    """``(encode_charset IR, recorded build work or None)``."""
    parts = []
    if mode == "value":
        raw = _intersect(cs, 0, ir.MAX_CODE_POINT)
        raw_cs = ir.CharSet.of([r for a, b in _RAW_OK.ranges for r in _intersect(ir.CharSet.of(raw), a, b)])
        if raw_cs.ranges:
            parts.append(raw_cs)
        shorts = [e for c, e in SHORT_ESCAPES.items() if cs.contains(c)]
        if shorts:
            parts.append(ir.seq(_BACKSLASH, ir.CharSet.of([(ord(e), ord(e)) for e in shorts])))
        parts.extend(_u_escapes(cs, lower_only=False))
    elif mode == "key":
        raw_ok = ir.CharSet.of([(0x20, 0x21), (0x23, 0x5B), (0x5D, ir.MAX_CODE_POINT)])
        raw = [r for a, b in raw_ok.ranges for r in _intersect(cs, a, b)]
        if raw:
            parts.append(ir.CharSet.of(raw))
        shorts = [e for c, e in KEY_SHORT.items() if cs.contains(c)]
        if shorts:
            parts.append(ir.seq(_BACKSLASH, ir.CharSet.of([(ord(e), ord(e)) for e in shorts])))
        # controls without a short escape, and U+007F and above, also as lowercase \uXXXX
        esc = [r for lo, hi in ((0, 0x1F), (0x7F, ir.MAX_CODE_POINT)) for r in _intersect(cs, lo, hi)
               if not (r[0] == r[1] and r[0] in KEY_SHORT)]
        esc_cs = ir.CharSet.of(esc)
        esc_cs = ir.CharSet.of([r for r in esc_cs.ranges for r in _split_out(r, KEY_SHORT)])
        if esc_cs.ranges:
            parts.extend(_u_escapes(esc_cs, lower_only=True))
    else:
        raise ValueError(f"unknown string encoding mode {mode!r}")
    node = ir.alt(*parts)
    if ir.size(node) >= _EMBED_CHARSET_NODES:

        with recording() as rec:
            node = embedded(build_dfa(node))
        return node, rec.tree
    return node, None


def _split_out(r, points) -> list:
    out, (a, b) = [], r
    for p in sorted(points):
        if a <= p <= b:
            if a <= p - 1:
                out.append((a, p - 1))
            a = p + 1
    if a <= b:
        out.append((a, b))
    return out


ENCODE_DFA_NODES = 500  # decoded IR of at least this many nodes is encoded as an automaton (formats)


def encode(node: ir.Node, mode: str = "value") -> ir.Node:
    """Map a decoded-text IR node to the IR of its JSON-escaped texts (string body, no quotes).

    In ``"value"`` mode, a node of ``ENCODE_DFA_NODES`` or more becomes its decoded DFA encoded by
    :func:`encode_dfa` (embedded): the IR substitution (:func:`encode_ir`) grows ten-fold with the
    escapes, and its automaton took a subset construction of that size (an encoded ``uri``: 11,000
    nodes, 100 ms).
    Those are cached (IR nodes are immutable): schemas repeat the same ``format`` in many places.
    Smaller ones are substituted afresh (cheap; keeping their trees alive costs GC time)."""
    if mode != "value" or ir.size(node) < ENCODE_DFA_NODES or _has_embed(node):
        # cheap enough (key mode writes printable ASCII raw only: no escapes to multiply the IR),
        # and not worth keeping alive (GC time)
        return encode_ir(node, mode)
    out, work = _encode_cached(node, mode)
    if work is not None:

        replay(work)  # a work budget is charged as if it were built now (see automaton.build)
    return out


@lru_cache(maxsize=256)
def _encode_cached(node: ir.Node, mode: str):
    """``(encoded node, recorded build work)`` of a large node: its automaton encoded, or (past
    ``ENCODE_DFA_MAX_STATES``) the IR substitution."""

    with recording() as rec:
        try:
            enc = encode_dfa(build_dfa(node, max_states=ENCODE_DFA_MAX_STATES), mode)
        except LimitExceeded as e:
            if e.limit == "work_budget":
                raise
            enc = None  # a large automaton: the IR way, built within the caller's limits
        if enc is not None:
            out = embedded(enc)
    if enc is not None:
        return out, rec.tree
    with recording() as rec:  # the encode_charset automata it embeds
        out = encode_ir(node, mode)
    return out, rec.tree


def _has_embed(node) -> bool:
    todo = [node]
    while todo:
        x = todo.pop()
        if isinstance(x, ir.Embed):
            return True
        todo.extend(ir._children(x))
    return False


def encode_ir(node: ir.Node, mode: str = "value") -> ir.Node:
    """:func:`encode` as an IR substitution: each code point class by its encodings."""
    memo: dict = {}

    def go(n):
        hit = memo.get(id(n))
        if hit is not None and hit[0] is n:
            return hit[1]
        if isinstance(n, ir.CharSet):
            r = encode_charset(n, mode) if n.ranges else ir.NOTHING
        elif isinstance(n, ir.Seq):
            r = ir.seq(*[go(x) for x in n.items]) if n.items else ir.EMPTY
        elif isinstance(n, ir.Alt):
            r = ir.alt(*[go(x) for x in n.items]) if n.items else ir.NOTHING
        elif isinstance(n, ir.Repeat):
            r = ir.Repeat(go(n.item), n.min, n.max)
        elif isinstance(n, ir.And):
            r = ir.And(tuple(go(x) for x in n.items))
        elif isinstance(n, ir.Not):
            r = ir.And((ir.Repeat(encode_charset(ir.ANY_CHAR, mode), 0, None), ir.Not(go(n.item))))
        else:
            raise Unsupported(f"cannot apply a string constraint containing {type(n).__name__} nodes")
        memo[id(n)] = (n, r)
        return r

    try:
        return go(node)
    finally:
        go = None  # a recursive closure is a reference cycle: break it, or it waits for the collector


# ---------------------------------------------------------------- sets of string literals as one DFA
def _code_point_encodings(c: int, mode: str) -> list:
    """Every encoding of the code point ``c`` inside a JSON string, as tuples of byte sets (a hex
    digit written in either case is one position with two bytes); the same set as
    :func:`encode_charset` of ``c``."""
    out = []
    if mode == "value":
        raw = not (c < 0x20 or c in (0x22, 0x5C))
        short = SHORT_ESCAPES.get(c)
        lower_only = False
        escaped = True
    else:
        raw = c >= 0x20 and c not in (0x22, 0x5C)
        short = KEY_SHORT.get(c)
        lower_only = True
        escaped = (c < 0x20 or c >= 0x7F) and c not in KEY_SHORT
    if raw:
        out.append(tuple((b,) for b in chr(c).encode("utf-8")))
    if short is not None:
        out.append(((0x5C,), (ord(short),)))
    if escaped:
        def hex4(v):
            ds = []
            for ch in f"{v:04x}":
                ds.append((ord(ch),) if lower_only or not ch.isalpha() else (ord(ch), ord(ch.upper())))
            return ((0x5C,), (0x75,), *ds)
        if c <= 0xFFFF:
            out.append(hex4(c))
        else:
            v = c - 0x10000
            out.append(hex4(0xD800 + (v >> 10)) + hex4(0xDC00 + (v & 0x3FF)))
    return out


@lru_cache(maxsize=8192)
def code_point_gadget(cps: tuple, mode: str):
    """The byte trie of every encoding of the code points ``cps`` (sorted) out of one state:
    ``(internal states, ((src, byte, dst), ...))`` with state 0 the entry, 1.. internal states, and
    ``-(j + 1)`` the exit after code point ``cps[j]``.  The encodings form a prefix code, so the
    trie is deterministic.  Tuples of ints only: a cached entry is nothing the garbage collector
    walks."""
    nxt: list = [{}]
    edges = []
    for j, c in enumerate(cps):
        for enc in _code_point_encodings(c, mode):
            s = 0
            for pos in enc[:-1]:
                t = nxt[s].get(pos[0])
                if t is None:
                    t = len(nxt)
                    nxt.append({})
                    for b in pos:
                        nxt[s][b] = t
                        edges.append((s, b, t))
                s = t
            for b in enc[-1]:
                edges.append((s, b, -(j + 1)))
    return len(nxt) - 1, tuple(edges)


SURROGATE = re.compile("[\ud800-\udfff]")


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of two strings (binary search on slices)."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while lo < hi:  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


# (mode, texts) -> node; a schema's own repeats (entries are IR trees: see structgen.automaton.build's caches)
_LITERAL_SET_CACHE = LRUCache(128, 64 << 20, name="json_schema.literal_sets")


def literal_set_node(texts, mode: str = "value") -> ir.Node:
    """The IR (an embedded minimal DFA) of every JSON string, quotes included, whose decoding is one
    of ``texts``: the union of the JSON string literals of each, built directly as a trie of code
    points whose edges carry the (prefix-free) encodings of their code point, instead of a
    Thompson NFA with an alternative per character (enums of thousands of characters spent most of
    their compile time there).  Equal sets give the same node (cached), so terminals and automata
    built from it are shared like IR nodes are."""

    texts = tuple(sorted(set(texts)))
    key = (mode, texts)
    hit = _LITERAL_SET_CACHE.get(key)
    if hit is not None:
        return hit

    # the trie of code points, from the sorted texts and their common prefixes: node 0 the root,
    # node i > 0 entered from par[i - 1] by code point cp[i - 1]
    par: list = []
    cps_in: list = []
    ends: list = []
    cur: list = []   # the nodes along the previous text
    prev = None
    for t in texts:
        if SURROGATE.search(t):
            continue  # a lone surrogate is not a Unicode string: no encoding (as ir.literal)
        lcp = _common_prefix(prev, t) if prev is not None else 0
        first = len(par) + 1
        new = len(t) - lcp
        if new:
            par.append(cur[lcp - 1] if lcp else 0)
            par.extend(range(first, first + new - 1))
            cps_in.extend(map(ord, t[lcp:]))
            del cur[lcp:]
            cur.extend(range(first, first + new))
        ends.append(cur[len(t) - 1] if t else 0)
        prev = t
    if not ends:
        node = ir.NOTHING
    else:
        # DFA states: 0 before the opening quote, 1 after the closing one, 2 + i trie node i, then
        # the internal states of each node's encodings (the trie nodes grouped by the code points
        # leaving them, each group laid out at once)
        k = len(par) + 1
        parent = np.array(par, np.int64)
        cp = np.array(cps_in, np.int64)
        child = np.arange(1, k, dtype=np.int64)
        n_out = np.bincount(parent, minlength=k) if k > 1 else np.zeros(1, np.int64)
        groups: list = []  # (code points, nodes int64[M], children int64[M, len(code points)])
        single = n_out[parent] == 1
        s_idx = np.flatnonzero(single)
        s_idx = s_idx[np.argsort(cp[s_idx], kind="stable")]
        s_cp = cp[s_idx]
        cuts = np.flatnonzero(np.diff(s_cp)) + 1
        for lo, hi in zip(np.concatenate(([0], cuts)), np.concatenate((cuts, [s_idx.shape[0]]))):
            if hi > lo:
                sel = s_idx[lo:hi]
                groups.append(((int(s_cp[lo]),), parent[sel], child[sel][:, None]))
        multi: dict = {}
        for e in np.flatnonzero(~single):
            multi.setdefault(int(parent[e]), []).append((int(cp[e]), int(child[e])))
        by_cps: dict = {}
        for u, out in multi.items():
            out.sort()
            g = by_cps.setdefault(tuple(c for c, _ in out), ([], []))
            g[0].append(u)
            g[1].append([v for _, v in out])
        for cps, (nodes, kids) in by_cps.items():
            groups.append((cps, np.array(nodes, np.int64), np.array(kids, np.int64)))
        n_int = np.zeros(k, np.int64)
        for cps, nodes, _ in groups:
            n_int[nodes] = code_point_gadget(cps, mode)[0]
        base = 2 + k + np.cumsum(n_int) - n_int - 1  # internal state a >= 1 of node i: base[i] + a
        fin = np.array(ends, np.int64)
        parts = [(np.array([0]), np.array([0x22]), np.array([2])),
                 (2 + fin, np.full(fin.shape[0], 0x22), np.ones_like(fin))]
        for cps, nodes, kids in groups:
            edges = np.array(code_point_gadget(cps, mode)[1], np.int64)          # [E, 3]
            a, b, d = edges[:, 0], edges[:, 1], edges[:, 2]
            nb = base[nodes][:, None]
            src = np.where(a == 0, 2 + nodes[:, None], nb + a)
            ext = kids[:, np.where(d < 0, -d - 1, 0)] + 2
            dst = np.where(d < 0, ext, nb + d)
            parts.append((src.ravel(), np.broadcast_to(b, src.shape).ravel(), dst.ravel()))
        n = int(2 + k + n_int.sum())
        src_a = np.concatenate([p[0] for p in parts])
        byt_a = np.concatenate([p[1] for p in parts])
        dst_a = np.concatenate([p[2] for p in parts])
        used = np.unique(byt_a)
        byte_class = np.zeros(256, np.int32)
        byte_class[used] = np.arange(1, used.shape[0] + 1, dtype=np.int32)
        table = np.full((n, used.shape[0] + 1), -1, np.int32)
        table[src_a, byte_class[byt_a]] = dst_a
        acc = np.zeros(n, np.bool_)
        acc[1] = True
        node = embedded(canonical_acyclic_dfa(table, acc, byte_class))
    _LITERAL_SET_CACHE.put(key, node)
    return node


# ---------------------------------------------------------------- encoding a built automaton
_RAW_FORBIDDEN_BYTES = [*range(0x20), 0x22, 0x5C]
_LEADS = ((0xC2, 0xDF, 1, 0x1F), (0xE0, 0xEF, 2, 0x0F), (0xF0, 0xF4, 3, 0x07))  # lead, lead, continuations, bits
ENCODE_DFA_MAX_STATES = 20_000  # decoded automata past this size are encoded the IR way


def _runs(targets: np.ndarray, offset: int) -> list:
    """``(lo, hi, target)`` runs of equal targets (>= 0) at consecutive positions, shifted by
    ``offset``."""
    idx = np.flatnonzero(targets >= 0)
    if idx.shape[0] == 0:
        return []
    t = targets[idx]
    brk = np.flatnonzero((np.diff(idx) != 1) | (np.diff(t) != 0)) + 1
    starts = np.concatenate(([0], brk))
    ends = np.concatenate((brk - 1, [idx.shape[0] - 1]))
    return [(int(idx[a]) + offset, int(idx[b]) + offset, int(t[a])) for a, b in zip(starts, ends)]


def _code_point_moves(tr256: np.ndarray, p: int, memo: dict) -> list:
    """The code point transitions of state ``p`` of a UTF-8 byte DFA (rows of 256 next states):
    sorted disjoint ``(lo, hi, target)`` runs (one target per run, adjacent runs merged).
    ``memo`` caches the continuation-byte walks per (state, bytes left)."""
    row = tr256[p]
    out = _runs(row[:0x80], 0)

    for first, last, k, bits in _LEADS:
        for b in np.flatnonzero(row[first:last + 1] >= 0) + first:
            base = (int(b) & bits) << (6 * k)
            for lo, hi, t in _tails(tr256, memo, int(row[b]), k):
                out.append((base + lo, base + hi, t))
    out.sort()
    merged: list = []
    for lo, hi, t in out:
        _append(merged, lo, hi, t)
    return merged


def _tails(tr256: np.ndarray, memo: dict, q: int, k: int) -> list:
    """(lo, hi, target) over the ``64**k`` values of ``k`` continuation bytes read from state ``q``
    (see :func:`_code_point_moves`; a function of its own, not a recursive closure: a closure
    that calls itself is a reference cycle left to the garbage collector, one per state)."""
    key = (q, k)
    hit = memo.get(key)
    if hit is not None:
        return hit
    cont = _runs(tr256[q, 0x80:0xC0], 0)
    if k == 1:
        res = cont
    else:
        size = 64 ** (k - 1)
        res = []
        for lo, hi, t in cont:
            sub = _tails(tr256, memo, t, k - 1)
            if len(sub) == 1 and sub[0][0] == 0 and sub[0][1] == size - 1:
                _append(res, lo * size, hi * size + size - 1, sub[0][2])
                continue
            for b in range(lo, hi + 1):
                for a2, b2, t2 in sub:
                    _append(res, b * size + a2, b * size + b2, t2)
    memo[key] = res
    return res


def _append(runs: list, lo: int, hi: int, t: int) -> None:
    if runs and runs[-1][2] == t and runs[-1][1] + 1 == lo:
        runs[-1] = (runs[-1][0], hi, t)
    else:
        runs.append((lo, hi, t))


def _clip(runs, lo: int, hi: int) -> list:
    return [(max(a, lo), min(b, hi), t) for a, b, t in runs if a <= hi and b >= lo]


def _minus_points(runs, points) -> list:
    out = []
    for a, b, t in runs:
        for lo, hi in _split_out((a, b), points):
            out.append((lo, hi, t))
    return out


class _EscapeBuilder:
    """The escape sub-automata of :func:`encode_dfa`: byte tries after a backslash, states numbered
    from ``first``; identical sub-tries are shared (they have the same right language)."""

    def __init__(self, first: int, lower_only: bool):
        self.rows: list = []       # state - first -> {byte: next state}
        self.first = first
        self.lower_only = lower_only
        self.memo: dict = {}

    def new(self) -> int:
        self.rows.append({})
        return self.first + len(self.rows) - 1

    def row(self, s: int) -> dict:
        return self.rows[s - self.first]

    def hex_node(self, level: int, items: tuple) -> int:
        """The state reading ``level`` more hex digits; ``items``: ``(lo, hi, payload)`` relative
        to the block, payload a target state (int) or a low-surrogate item tuple (after which
        ``\\uXXXX`` of a low surrogate follows)."""
        key = ("hex", level, items)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        s = self.new()
        self.memo[key] = s
        size = 16 ** (level - 1)
        row = self.row(s)
        i, m = 0, len(items)  # items are sorted and disjoint: one sweep over the 16 blocks
        for v in range(16):
            blo, bhi = v * size, (v + 1) * size - 1
            while i < m and items[i][1] < blo:
                i += 1
            j, sub = i, []
            while j < m and items[j][0] <= bhi:
                a, b, pl = items[j]
                sub.append((max(a, blo) - blo, min(b, bhi) - blo, pl))
                j += 1
            if not sub:
                continue
            sub = tuple(sub)
            if level == 1:
                pl = sub[0][2]
                nxt = pl if isinstance(pl, int) else self.low_pair(pl)
            else:
                nxt = self.hex_node(level - 1, sub)
            ch = HEX_LOWER[v]
            row[ord(ch)] = nxt
            if not self.lower_only and ch.isalpha():
                row[ord(ch.upper())] = nxt
        return s

    def low_pair(self, low_items: tuple) -> int:
        """After a high surrogate: ``\\u`` and the low surrogate (items relative to U+DC00)."""
        key = ("pair", low_items)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        s = self.new()
        self.memo[key] = s
        u = self.new()
        self.row(s)[0x5C] = u
        self.row(u)[ord("u")] = self.hex_node(4, tuple((a + 0xDC00, b + 0xDC00, t) for a, b, t in low_items))
        return s

    def escape(self, shorts: tuple, bmp: list, astral: list) -> int | None:
        """The state after a backslash: short escapes ``(byte, target)``, ``\\uXXXX`` for the BMP
        runs and surrogate pairs for the astral ones."""
        units = list(bmp)
        # astral runs -> (high lo, high hi, low item tuple) with equal low items grouped
        for a, b, t in astral:
            a, b = a - 0x10000, b - 0x10000
            ha, hb, la, lb = 0xD800 + (a >> 10), 0xD800 + (b >> 10), a & 0x3FF, b & 0x3FF
            if ha == hb:
                units.append((ha, ha, ((la, lb, t),)))
                continue
            units.append((ha, ha, ((la, 0x3FF, t),)))
            if ha + 1 <= hb - 1:
                units.append((ha + 1, hb - 1, ((0, 0x3FF, t),)))
            units.append((hb, hb, ((0, lb, t),)))
        units.sort(key=lambda x: x[0])
        merged: list = []
        for a, b, pl in units:  # same high surrogate from several astral runs: merge their lows
            if merged and merged[-1][0] == a == b == merged[-1][1] and not isinstance(pl, int):
                merged[-1] = (a, b, merged[-1][2] + pl)
            else:
                merged.append((a, b, pl))
        key = ("esc", shorts, tuple(merged))
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        if not shorts and not merged:
            return None
        s = self.new()
        self.memo[key] = s
        row = self.row(s)
        for byte, t in shorts:
            row[byte] = t
        if merged:
            row[ord("u")] = self.hex_node(4, tuple(merged))
        return s


def encode_dfa(dfa, mode: str = "value"):
    """The minimal DFA of every JSON string body (no quotes) whose decoding is in ``L(dfa)``, built
    from the decoded automaton instead of from the IR: the raw code points are the decoded DFA's
    own UTF-8 transitions (minus the bytes JSON forbids raw), and each state gets one trie of
    backslash escapes (short forms, ``\\uXXXX`` in either case -- lowercase only in ``"key"``
    mode --, surrogate pairs), whose leaves are the decoded targets.  The escape code is a prefix
    code, so the result is deterministic as built; same language as :func:`encode` (whose IR
    grows ten-fold from the escapes and took a subset construction of that size).  None when the
    decoded DFA is larger than ``ENCODE_DFA_MAX_STATES``."""

    n = dfa.n_states
    if dfa.start != 0 or n > ENCODE_DFA_MAX_STATES:
        return None
    tr256 = np.ascontiguousarray(np.asarray(dfa.transitions)[:, np.asarray(dfa.byte_class)], dtype=np.int32)
    value = mode == "value"
    shorts_of = SHORT_ESCAPES if value else KEY_SHORT
    esc = _EscapeBuilder(n, lower_only=not value)
    back = np.full(n, -1, np.int64)
    memo: dict = {}
    for p in range(n):
        runs = _code_point_moves(tr256, p, memo)
        if not runs:
            continue
        shorts = []
        for c, e in sorted(shorts_of.items()):
            for a, b, t in runs:
                if a <= c <= b:
                    shorts.append((ord(e), t))
                    break
        if value:
            bmp = _clip(runs, 0, 0xD7FF) + _clip(runs, 0xE000, 0xFFFF)
            astral = _clip(runs, 0x10000, ir.MAX_CODE_POINT)
        else:  # lowercase \uXXXX for controls without a short form, and U+007F and above
            low = _minus_points(_clip(runs, 0, 0x1F), KEY_SHORT)
            bmp = low + _clip(runs, 0x7F, 0xD7FF) + _clip(runs, 0xE000, 0xFFFF)
            astral = _clip(runs, 0x10000, ir.MAX_CODE_POINT)
        s = esc.escape(tuple(sorted(shorts)), bmp, astral)
        if s is not None:
            back[p] = s
    total = n + len(esc.rows)
    table = np.full((total, 256), -1, np.int32)
    table[:n] = tr256
    table[:n, _RAW_FORBIDDEN_BYTES] = -1
    table[:n, 0x5C] = back
    for i, row in enumerate(esc.rows):
        if row:
            table[n + i, list(row)] = list(row.values())
    acc = np.zeros(total, np.bool_)
    acc[:n] = np.asarray(dfa.accepting)
    return canonical_dfa(table, acc, np.arange(256, dtype=np.int32))


caching.register_function("json_schema.hex_digits", _any_hex)
caching.register_function("json_schema.encoded_charsets", _encode_charset)
caching.register_function("json_schema.encoded_strings", _encode_cached)
caching.register_function("json_schema.code_point_gadgets", code_point_gadget)
