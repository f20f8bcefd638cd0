"""Key languages of objects.

- :func:`other_keys_node`, "every JSON object key but these": an embedded minimal DFA built
  directly from the trie of the declared keys (instead of two subset constructions, a product and
  a difference per object).  Used by the grammar compiler's object rules and by the combiner's
  member automata.
- :func:`key_cells`, the undeclared keys split by the ``patternProperties`` they match: only the
  non-empty cells, found by refining the key space one pattern at a time (a schema's patterns are
  mostly disjoint, so n patterns give about n + 1 cells, not 2^n).

Results are cached and dropped by :func:`structgen.automaton.build.clear_caches`."""
from __future__ import annotations

import numpy as np

from structgen import caching
from structgen.automaton import ir, ops
from structgen.automaton.build import build_dfa, embedded, recording, replay
from structgen.automaton.minimize import canonical_dfa

from .language import ANY_STAR
from .strings import SURROGATE, code_point_gadget, encode, encode_charset

_KEY_CHAR = None  # (A: the DFA of one encoded key code point, its 256-column rows mapped for other_keys_node)
# sorted declared keys -> node; a schema's own repeats (see structgen.automaton.build's caches)
_OTHER_KEYS = caching.LRU(128, name="json_schema.other_keys")
_KEY_CELLS = caching.LRU(256, name="json_schema.key_cells")  # (patterns, declared keys) -> cells
#: the most non-empty cells :func:`key_cells` builds (each one is an alternative of the object)
MAX_KEY_CELLS = 64


def _key_char():
    """``(A, rows)``: A the minimal DFA of the encodings of one code point in a JSON key
    (``encode_charset(ANY_CHAR, "key")``, a prefix code), ``rows[a, b]`` the state of
    :func:`other_keys_node`'s layout after byte ``b`` from A's state ``a`` outside the trie of
    declared keys (-1 dead, 2 the boundary state O, ``3 + a'`` A's state ``a'`` mid code point);
    None when A is not a prefix-code automaton starting at 0 (then the generic path is used)."""
    global _KEY_CHAR
    if _KEY_CHAR is None:
        a = build_dfa(encode_charset(ir.ANY_CHAR, "key"))
        t = np.asarray(a.transitions)[:, np.asarray(a.byte_class)].astype(np.int32)  # [nA, 256]
        acc = np.asarray(a.accepting, bool)
        ok = a.start == 0 and not acc[0] and not (t[acc] >= 0).any() and not (t == 0).any()
        rows = np.where(t < 0, -1, np.where(acc[np.maximum(t, 0)], 2, 3 + t)).astype(np.int32)
        _KEY_CHAR = (a, t, acc, rows) if ok else False
    return _KEY_CHAR or None


def other_keys_node(declared) -> ir.Node | None:
    """The IR (an embedded minimal DFA) of every JSON object key, quotes included, whose decoding
    is not one of ``declared``: ``"`` encode(Not(alt(literals)), "key") ``"``, built directly
    instead of by two subset constructions, a product and a difference per object (a millisecond
    and more each, most of a small schema's compile time).  The layout: the trie of the declared
    keys' code points; from a trie node, each code point to a child by its encodings (the byte
    trie of :func:`strings.code_point_gadget`), every other encoding of a code point (A, mid code point:
    A's own states) to the boundary state O, outside the trie, where anything goes; the closing
    quote from O and from trie nodes that are not a declared key.  Exact because the encodings
    form a prefix code and decoding is a function.  None when the generic path must be used."""
    kc = _key_char()
    if kc is None:
        return None
    texts = tuple(sorted(set(declared)))
    hit = _OTHER_KEYS.get(texts)
    if hit is not None:
        return hit
    A, at, aacc, rows = kc
    nA = at.shape[0]
    # the trie of code points: children[u] = {code point: node}; end[u]: a declared key ends at u
    children: list = [{}]
    end = [False]
    for t in texts:
        if SURROGATE.search(t):
            continue  # a lone surrogate is not a Unicode string: it excludes nothing (as ir.literal)
        u = 0
        for ch in t:
            c = ord(ch)
            v = children[u].get(c)
            if v is None:
                v = len(children)
                children[u][c] = v
                children.append({})
                end.append(False)
            u = v
        end[u] = True
    n_nodes = len(children)
    # states: 0 before the opening quote, 1 after the closing one, 2 = O, 3 + a = A's state a
    # (mid code point, outside the trie), then node u's entry E(u) = base + u, then gadget states
    base = 3 + nA
    simple_src, simple_byte, simple_dst = [], [], []
    extra_rows = []  # (row of A, [(byte, target)]) for gadget-internal states
    complex_entry = []  # (node, [(byte, target)])
    for u, ch in enumerate(children):
        simple = []
        hard = []
        for c, v in ch.items():
            if 0x20 <= c < 0x7F and c != 0x22 and c != 0x5C:
                simple.append((c, v))  # printable ASCII: its one encoding is its raw byte
            else:
                hard.append((c, v))
        for c, v in simple:
            simple_src.append(base + u)
            simple_byte.append(c)
            simple_dst.append(base + v)
        if hard:
            hard.sort()
            cps = tuple(c for c, _ in hard)
            kids = [base + v for _, v in hard]
            n_int, edges = code_point_gadget(cps, "key")
            first = base + n_nodes + len(extra_rows)
            a_of = [0] + [-1] * n_int  # A's state at each gadget state (the walk from A's start)
            rows_of = [[] for _ in range(n_int + 1)]
            for src, byte, dst in edges:
                a2 = int(at[a_of[src], byte])
                if a2 < 0:
                    return None  # not A's language: do not guess
                if dst < 0:
                    if not aacc[a2]:
                        return None
                    rows_of[src].append((byte, kids[-dst - 1]))
                else:
                    if a_of[dst] not in (-1, a2) or aacc[a2]:
                        return None
                    a_of[dst] = a2
                    rows_of[src].append((byte, first + dst - 1))
            complex_entry.append((u, rows_of[0]))
            for g in range(1, n_int + 1):
                extra_rows.append((a_of[g], rows_of[g]))
    n = base + n_nodes + len(extra_rows)
    # byte classes: A's, with every byte written explicitly above (and the quote) a class of its own
    explicit = np.zeros(256, bool)
    explicit[0x22] = True
    explicit[simple_byte] = True
    for _, row in complex_entry + extra_rows:
        for byte, _ in row:
            explicit[byte] = True
    code = np.asarray(A.byte_class, np.int64) * 257 + np.where(explicit, np.arange(1, 257), 0)
    _, rep, bc = np.unique(code, return_index=True, return_inverse=True)
    bc = bc.reshape(256).astype(np.int32)
    crows = rows[:, rep]
    table = np.empty((n, rep.shape[0]), np.int32)
    q = bc[0x22]
    table[0] = -1
    table[0, q] = base
    table[1] = -1
    table[2] = crows[0]
    table[2, q] = 1
    table[3:base] = crows
    table[base:base + n_nodes] = crows[0]
    ends = np.array(end, bool)
    table[base + np.flatnonzero(~ends), q] = 1
    if simple_src:
        table[np.array(simple_src), bc[np.array(simple_byte)]] = np.array(simple_dst, np.int32)
    for u, row in complex_entry:
        for byte, dst in row:
            table[base + u, bc[byte]] = dst
    for i, (a, row) in enumerate(extra_rows):
        r = base + n_nodes + i
        table[r] = crows[a]
        for byte, dst in row:
            table[r, bc[byte]] = dst
    acc = np.zeros(n, bool)
    acc[1] = True
    node = embedded(canonical_dfa(table, acc, bc))
    _OTHER_KEYS.put(texts, node)
    return node


def key_cells(patterns: tuple, declared) -> list | None:
    """The keys not in ``declared``, split by which of ``patterns`` (decoded-text search IRs, see
    :func:`.language.pattern_search_ir`) they match: ``[(indexes of the matched patterns, quoted
    key IR: one embedded DFA)]``, one entry per non-empty cell, the cell matching none first when it is not empty.
    Exact: the cells are disjoint and cover every undeclared key.  None past
    :data:`MAX_KEY_CELLS` cells; build limits raise :class:`~structgen.errors.LimitExceeded`."""
    names = tuple(sorted(set(declared)))
    outside = ir.Not(ir.alt(*[ir.literal(k) if k else ir.EMPTY for k in names])) if names else None
    if not patterns:  # one cell, not worth an automaton
        return [((), _quoted(outside))]
    key = (tuple(patterns), names)
    hit = _KEY_CELLS.get(key)
    if hit is not None:
        replay(hit[1])  # charge a work budget as building the cells would
        return hit[0]
    with recording() as rec:
        # (matched indexes, cell DFA: for emptiness, cell IR)
        cells = [((), build_dfa(outside) if outside is not None else ops.utf8_star(), outside)]
        for i, p in enumerate(patterns):
            pd = build_dfa(p)
            split = []
            for idx, d, node in cells:
                for part, idx2, cond in ((ops.difference(d, pd), idx, ir.Not(p)), (ops.intersect(d, pd), idx + (i,), p)):
                    if not ops.is_empty(part):
                        split.append((idx2, part, ir.And((node, cond)) if node is not None else cond))
            if len(split) > MAX_KEY_CELLS:
                return None
            cells = split
        # kept as embedded DFAs: a cell's IR tree is hundreds of Python objects, which a
        # process-wide cache would hold for the garbage collector to walk on every full collection
        out = [(idx, embedded(build_dfa(_quoted(node)))) for idx, _, node in sorted(cells, key=lambda c: c[0])]
    _KEY_CELLS.put(key, (out, rec.tree))
    return out


def _quoted(body) -> ir.Node:
    """The quoted JSON keys whose decoding is in ``body`` (None: any), encoded the IR way (cheap in
    "key" mode; encoding the cells' DFAs cost more)."""
    return ir.seq(ir.literal('"'), encode(ANY_STAR if body is None else body, "key"), ir.literal('"'))
