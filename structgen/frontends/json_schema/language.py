"""What the regular compiler builds from: a compiled sub-schema (:class:`Lang`: an IR node and
whether it is exact within the modelled universe), conjunction of those, the JSON whitespace
class, free-form strings, and ECMA ``pattern`` search languages.  Shared by the regular compiler,
its object and array parts, the grammar compiler and the combiner."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from structgen import caching
from structgen.automaton import ir
from structgen.automaton.build import build_dfa
from structgen.errors import RegexError, Unsupported

from ..regex import parse_regex
from .strings import encode_charset

#: the JSON whitespace characters (space, tab, line feed, carriage return)
WS_CHARS = ir.CharSet.of([(0x20, 0x20), (0x09, 0x0A), (0x0D, 0x0D)])
ANY_STAR = ir.Repeat(ir.ANY_CHAR, 0, None)


@dataclass(frozen=True)
class Lang:
    """A compiled sub-schema: its IR and whether it is exact within the universe (see
    :mod:`.regular`)."""

    node: ir.Node
    exact: bool = True


NOTHING = Lang(ir.NOTHING)


def lit(s: str) -> ir.Node:
    return ir.literal(s)


def any_string(mode: str) -> ir.Node:
    """Every JSON string, quotes included (``mode``: "value" or "key" escaping, see :mod:`.strings`)."""
    return ir.seq(lit('"'), ir.Repeat(encode_charset(ir.ANY_CHAR, mode), 0, None), lit('"'))


def and_langs(parts: list) -> Lang:
    """The conjunction of ``parts`` (None entries skipped; at least one must remain)."""
    parts = [p for p in parts if p is not None]
    nodes = []
    for p in parts:
        if p.node == ir.NOTHING:
            return Lang(ir.NOTHING, all(x.exact for x in parts))
        nodes.append(p.node)
    exact = all(p.exact for p in parts)
    if not nodes:
        raise AssertionError("empty conjunction")
    if len(nodes) == 1:
        return Lang(nodes[0], exact)
    return Lang(ir.And(tuple(nodes)), exact)


@lru_cache(maxsize=128)  # a schema's own repeats (1 hit in 6 across 600 schemas at 1,024 entries); IR trees
# are many objects for the collector to walk
def pattern_search_ir(pattern: str, ptr: str = "") -> ir.Node:
    """Decoded-text IR of the strings in which ``pattern`` (ECMA-262 syntax) finds a match."""
    try:
        return parse_regex(pattern, syntax="ecma", anchored=False, lookahead=True)
    except (Unsupported, RegexError) as e:
        raise Unsupported(f"pattern {pattern!r}: {e}", f"#{ptr}") from e


def pattern_finds(key: str, node: ir.Node) -> bool:
    """Does the pattern whose search language is ``node`` find a match in the literal ``key``?
    Decided on the automaton itself."""
    return build_dfa(node).fullmatch(key.encode("utf-8"))


caching.register_function("json_schema.patterns", pattern_search_ir)
