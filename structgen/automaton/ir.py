"""The regular-language IR every front-end emits and the automaton builder consumes.

Nodes are immutable and hashable, so compiled results can be cached by node.
Characters are Unicode code points; the builder expands them to UTF-8 byte
sequences.  ``ByteSet`` exists for the rare places that need raw bytes.

Semantics (L = the set of byte strings a node matches):

- ``CharSet(ranges)``: one code point in one of the inclusive ``(lo, hi)`` ranges,
  encoded as UTF-8.  Surrogates (U+D800..U+DFFF) are never matched.
- ``ByteSet(ranges)``: one raw byte in one of the inclusive ranges.
- ``Seq(items)``: concatenation; ``Seq(())`` is the empty string (``EMPTY``).
- ``Alt(items)``: union; ``Alt(())`` is the empty language (``NOTHING``).
- ``Repeat(item, min, max)``: ``min`` to ``max`` copies (``max=None``: unbounded).
- ``And(items)``: intersection.
- ``Not(item)``: complement relative to all valid UTF-8 strings.
- ``Embed(dfa)``: the language of an already built :class:`ByteDFA`.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

MAX_CODE_POINT = 0x10FFFF
MAX_DEPTH = 20_000  # IR nesting the builder takes (deeper: LimitExceeded, limit "max_depth")


class Node:
    """Base class of IR nodes.  Each node keeps its fields and four caches (hash, size, depth,
    an equal tree: see :func:`_equal`) in slots: no ``__dict__``, so a cached IR tree is half as
    many objects for the garbage collector to walk."""

    __slots__ = ()


def _cached_hash(self) -> int:
    # IR trees are deep and hashed often (every cache lookup): compute once per node.
    try:
        return self._hash
    except AttributeError:
        _hash_below(self)
        return self._hash


def _own_hash(x) -> int:
    return hash((type(x).__name__,) + tuple(getattr(x, f) for f in x.__dataclass_fields__))


def _hash_below(node) -> None:
    """Cache the hash of ``node`` and of every node below it not hashed yet, children first and
    without recursion (hashing a tuple of nodes then hashes each child from its cache: a tree
    deeper than the recursion limit hashes like a flat one)."""
    todo, post = [node], []
    while todo:
        x = todo.pop()
        post.append(x)
        todo.extend(c for c in _children(x) if type(c).__hash__ is _cached_hash and not hasattr(c, "_hash"))
    for x in reversed(post):
        if not hasattr(x, "_hash"):
            object.__setattr__(x, "_hash", _own_hash(x))


def _equal(self, other) -> bool:
    """Structural equality of two IR trees, without recursion (``Embed`` nodes by identity).
    A tree found equal to another keeps a pointer to it (``_canon``), so comparing the two again
    -- a cache lookup with an equal tree built anew, every time a schema repeats a pattern --
    is one step instead of a walk of both trees."""
    if self is other:
        return True
    if not isinstance(other, Node):
        return NotImplemented
    a = getattr(self, "_canon", self)
    if a is getattr(other, "_canon", other):
        return True
    todo = [(self, other)]
    while todo:
        x, y = todo.pop()
        if x is y or getattr(x, "_canon", x) is getattr(y, "_canon", y):
            continue
        if type(x) is not type(y) or isinstance(x, Embed) or hash(x) != hash(y):
            return False
        if isinstance(x, (Seq, Alt, And)):
            if len(x.items) != len(y.items):
                return False
            todo.extend(zip(x.items, y.items))
        elif isinstance(x, Repeat):
            if x.min != y.min or x.max != y.max:
                return False
            todo.append((x.item, y.item))
        elif isinstance(x, Not):
            todo.append((x.item, y.item))
        elif x.ranges != y.ranges:
            return False
    object.__setattr__(other, "_canon", a)
    return True


def _state_without_hash(self) -> dict:
    # string hashes differ between processes: never carry a cached hash through pickle
    return {f: getattr(self, f) for f in self.__dataclass_fields__}


def _set_state(self, state: dict) -> None:
    for k, v in state.items():
        object.__setattr__(self, k, v)


def size(node) -> int:
    """The number of nodes of the IR tree ``node`` (shared sub-trees counted once per use),
    cached on the nodes."""
    return _fold(node, "_size", lambda kids: 1 + sum(kids))


def depth(node) -> int:
    """The nesting depth of the IR tree ``node`` (1 for a leaf), cached on the nodes: what a
    recursive walk over it needs (see :func:`recursion_room`)."""
    return _fold(node, "_depth", lambda kids: 1 + max(kids, default=0))


def _fold(node, attr: str, combine) -> int:
    if not isinstance(node, Node):
        return 1
    n = getattr(node, attr, None)
    if n is not None:
        return n
    todo, post = [node], []
    while todo:  # iterative: IR trees can be deeper than the recursion limit
        x = todo.pop()
        if hasattr(x, attr):
            continue
        post.append(x)
        todo.extend(c for c in _children(x) if not hasattr(c, attr))
    for x in reversed(post):
        if not hasattr(x, attr):
            object.__setattr__(x, attr, combine([getattr(c, attr) for c in _children(x)]))
    return getattr(node, attr)


@contextmanager
def recursion_room(levels: int, frames_per_level: int = 4):
    """Let a recursive walk of ``levels`` levels (``frames_per_level`` Python frames each) run:
    raises the interpreter's recursion limit by that much for the block when it is more than a
    few hundred frames.  Safe for pure-Python recursion (CPython 3.11+ runs Python-to-Python
    calls without C stack); callers bound ``levels`` (the regex parser's ``max_depth``,
    :data:`MAX_DEPTH`) so the C parts of a walk stay shallow."""
    need = levels * frames_per_level
    if need < 200:
        yield
        return
    old = sys.getrecursionlimit()
    new = old + need
    sys.setrecursionlimit(new)
    try:
        yield
    finally:
        if sys.getrecursionlimit() == new:
            sys.setrecursionlimit(old)


def _children(x) -> tuple:
    if isinstance(x, (Seq, Alt, And)):
        return x.items
    if isinstance(x, Repeat):
        return (x.item,)
    if isinstance(x, Not):
        return (x.item,)
    return ()


def _normalise_ranges(ranges, top: int) -> tuple:
    rs = sorted((int(a), int(b)) for a, b in ranges if a <= b)
    out = []
    for a, b in rs:
        if a < 0 or b > top:
            raise ValueError(f"range {a}..{b} outside 0..{top}")
        if out and a <= out[-1][1] + 1:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return tuple(out)


@dataclass(frozen=True)
class CharSet(Node):
    __slots__ = ('ranges', '_hash', '_size', '_depth', '_canon')
    __hash__ = _cached_hash
    __eq__ = _equal
    __getstate__ = _state_without_hash
    __setstate__ = _set_state
    ranges: tuple  # tuple[tuple[int, int], ...], sorted, disjoint, non-adjacent

    @staticmethod
    def of(ranges) -> "CharSet":
        return CharSet(_normalise_ranges(ranges, MAX_CODE_POINT))

    def negate(self) -> "CharSet":
        out, lo = [], 0
        for a, b in self.ranges:
            if a > lo:
                out.append((lo, a - 1))
            lo = b + 1
        if lo <= MAX_CODE_POINT:
            out.append((lo, MAX_CODE_POINT))
        return CharSet(tuple(out))

    def union(self, other: "CharSet") -> "CharSet":
        return CharSet.of(self.ranges + other.ranges)

    def difference(self, other: "CharSet") -> "CharSet":
        """The code points of ``self`` that are not in ``other``."""
        return self.negate().union(other).negate()

    def contains(self, cp: int) -> bool:
        return any(a <= cp <= b for a, b in self.ranges)


@dataclass(frozen=True)
class ByteSet(Node):
    __slots__ = ('ranges', '_hash', '_size', '_depth', '_canon')
    __hash__ = _cached_hash
    __eq__ = _equal
    __getstate__ = _state_without_hash
    __setstate__ = _set_state
    ranges: tuple

    @staticmethod
    def of(ranges) -> "ByteSet":
        return ByteSet(_normalise_ranges(ranges, 255))


@dataclass(frozen=True)
class Seq(Node):
    __slots__ = ('items', '_hash', '_size', '_depth', '_canon')
    __hash__ = _cached_hash
    __eq__ = _equal
    __getstate__ = _state_without_hash
    __setstate__ = _set_state
    items: tuple


@dataclass(frozen=True)
class Alt(Node):
    __slots__ = ('items', '_hash', '_size', '_depth', '_canon')
    __hash__ = _cached_hash
    __eq__ = _equal
    __getstate__ = _state_without_hash
    __setstate__ = _set_state
    items: tuple


@dataclass(frozen=True)
class Repeat(Node):
    __slots__ = ('item', 'min', 'max', '_hash', '_size', '_depth', '_canon')
    __hash__ = _cached_hash
    __eq__ = _equal
    __getstate__ = _state_without_hash
    __setstate__ = _set_state
    item: Node
    min: int
    max: Optional[int]  # None: unbounded


@dataclass(frozen=True)
class And(Node):
    __slots__ = ('items', '_hash', '_size', '_depth', '_canon')
    __hash__ = _cached_hash
    __eq__ = _equal
    __getstate__ = _state_without_hash
    __setstate__ = _set_state
    items: tuple


@dataclass(frozen=True)
class Not(Node):
    __slots__ = ('item', '_hash', '_size', '_depth', '_canon')
    __hash__ = _cached_hash
    __eq__ = _equal
    __getstate__ = _state_without_hash
    __setstate__ = _set_state
    item: Node


@dataclass(frozen=True, eq=False)
class Embed(Node):
    __slots__ = ("dfa", "_size", "_depth")
    __getstate__ = _state_without_hash
    __setstate__ = _set_state
    dfa: object  # ByteDFA; compared by identity


EMPTY = Seq(())
NOTHING = Alt(())
ANY_CHAR = CharSet(((0, 0xD7FF), (0xE000, MAX_CODE_POINT)))


def literal_text(node) -> Optional[str]:
    """The string ``node`` matches when it is a plain literal (a one-code-point ``CharSet``, or a
    ``Seq`` of them), else None."""
    if isinstance(node, Seq):
        cps = [single_code_point(x) for x in node.items]
        return "".join(map(chr, cps)) if None not in cps else None
    cp = single_code_point(node)
    return None if cp is None else chr(cp)


def single_code_point(node) -> Optional[int]:
    """The code point a one-code-point ``CharSet`` matches (never a surrogate), else None."""
    if isinstance(node, CharSet) and len(node.ranges) == 1:
        lo, hi = node.ranges[0]
        if lo == hi and not 0xD800 <= lo <= 0xDFFF:
            return lo
    return None


_POINTS: dict = {}  # code point -> its CharSet, shared (nodes are immutable; the hash is cached once)


def _point(c: str) -> "CharSet":
    n = _POINTS.get(c)
    if n is None:
        o = ord(c)
        n = CharSet(((o, o),))
        if len(_POINTS) < 65536:
            _POINTS[c] = n
    return n


def literal(text: str) -> Node:
    """The node matching exactly ``text``."""
    if len(text) == 1:
        return _point(text)
    return Seq(tuple([_point(c) for c in text]))


def seq(*items: Node) -> Node:
    flat = []
    for it in items:
        if isinstance(it, Seq):
            flat.extend(it.items)
        else:
            flat.append(it)
    if any(type(it) is Alt and not it.items for it in flat):  # (it == NOTHING)
        return NOTHING
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def alt(*items: Node) -> Node:
    flat = []
    seen = set()  # hash-based duplicate check: `it not in flat` was quadratic for big enums
    for it in items:
        if isinstance(it, Alt):
            flat.extend(it.items)
        elif it not in seen:
            seen.add(it)
            flat.append(it)
    flat = [it for it in flat if it != NOTHING]
    return flat[0] if len(flat) == 1 else Alt(tuple(flat))


def repeat(item: Node, lo: int, hi: Optional[int]) -> Node:
    return Repeat(item, int(lo), None if hi is None else int(hi))


def optional(item: Node) -> Node:
    return Repeat(item, 0, 1)
