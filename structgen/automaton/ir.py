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

from dataclasses import dataclass
from typing import Optional

MAX_CODE_POINT = 0x10FFFF


class Node:
    """Base class of IR nodes."""

    __slots__ = ()


def _cached_hash(self) -> int:
    # IR trees are deep and hashed often (every cache lookup): compute once per node.
    h = self.__dict__.get("_hash")
    if h is None:
        h = hash((type(self).__name__,) + tuple(self.__dict__[f] for f in self.__dataclass_fields__))
        object.__setattr__(self, "_hash", h)
    return h


def _state_without_hash(self) -> dict:
    # string hashes differ between processes: never carry a cached hash through pickle
    return {k: v for k, v in self.__dict__.items() if k not in ("_hash", "_size")}


def size(node) -> int:
    """The number of nodes of the IR tree ``node`` (shared sub-trees counted once per use),
    cached on the nodes."""
    d = getattr(node, "__dict__", None)
    if d is None:
        return 1
    n = d.get("_size")
    if n is not None:
        return n
    todo, post = [node], []
    while todo:  # iterative: IR trees can be deeper than the recursion limit
        x = todo.pop()
        if "_size" in x.__dict__:
            continue
        post.append(x)
        todo.extend(c for c in _children(x) if "_size" not in c.__dict__)
    for x in reversed(post):
        if "_size" not in x.__dict__:
            object.__setattr__(x, "_size", 1 + sum(c.__dict__["_size"] for c in _children(x)))
    return node.__dict__["_size"]


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
    __hash__ = _cached_hash
    __getstate__ = _state_without_hash
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

    def contains(self, cp: int) -> bool:
        return any(a <= cp <= b for a, b in self.ranges)


@dataclass(frozen=True)
class ByteSet(Node):
    __hash__ = _cached_hash
    __getstate__ = _state_without_hash
    ranges: tuple

    @staticmethod
    def of(ranges) -> "ByteSet":
        return ByteSet(_normalise_ranges(ranges, 255))


@dataclass(frozen=True)
class Seq(Node):
    __hash__ = _cached_hash
    __getstate__ = _state_without_hash
    items: tuple


@dataclass(frozen=True)
class Alt(Node):
    __hash__ = _cached_hash
    __getstate__ = _state_without_hash
    items: tuple


@dataclass(frozen=True)
class Repeat(Node):
    __hash__ = _cached_hash
    __getstate__ = _state_without_hash
    item: Node
    min: int
    max: Optional[int]  # None: unbounded


@dataclass(frozen=True)
class And(Node):
    __hash__ = _cached_hash
    __getstate__ = _state_without_hash
    items: tuple


@dataclass(frozen=True)
class Not(Node):
    __hash__ = _cached_hash
    __getstate__ = _state_without_hash
    item: Node


@dataclass(frozen=True, eq=False)
class Embed(Node):
    dfa: object  # ByteDFA; compared by identity


EMPTY = Seq(())
NOTHING = Alt(())
ANY_CHAR = CharSet(((0, 0xD7FF), (0xE000, MAX_CODE_POINT)))


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
