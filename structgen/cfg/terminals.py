"""Terminals: regex text -> regular IR, and IR -> trimmed ByteDFA.

Thin wrappers over the project's ``structgen.spec.regex.parse_regex`` and
``structgen.automaton.build.build_dfa``, plus the translation of Lark's common
terminals that rely on lazy quantifiers or lookbehind.
"""
from __future__ import annotations

from ..automaton import ir
from ..automaton.dfa import ByteDFA
from ..errors import RegexError, Unsupported

# Lark's common terminals whose regexes use lazy quantifiers or lookbehind (which
# only mean something under "first match" semantics) mapped to the regular
# language they match under Lark's dynamic lexer.
KNOWN_PATTERNS = {
    # '"' content up to the first '"' preceded by an even run of backslashes; no newlines
    '".*?(?<!\\\\)(\\\\\\\\)*?"': r'"(?:[^"\\\n]|\\[^\n])*"',
    # /* ... */ up to the first */
    "/\\*(.|\\n)*?\\*/": r"/\*(?:[^*]|\*+[^*/])*\*+/",
    "/\\*(.|\n)*?\\*/": r"/\*(?:[^*]|\*+[^*/])*\*+/",
}


def regex_to_ir(pattern: str, where: str = "") -> ir.Node:
    """The IR of a Python-syntax regex (inline flags such as ``(?i:...)`` allowed)."""
    pattern = KNOWN_PATTERNS.get(pattern, pattern)
    from ..spec.regex import parse_regex

    try:
        return parse_regex(pattern)
    except Unsupported as e:
        raise Unsupported(f"terminal regex /{pattern}/: {e.message}", where or e.where) from None
    except RegexError as e:
        raise RegexError(f"{e.message} (terminal {where})" if where else e.message, pattern, e.pos) from None


def build(node: ir.Node, max_states: int = 100_000) -> ByteDFA:
    """A trimmed ByteDFA for ``node``."""
    from ..automaton.build import build_dfa

    return build_dfa(node, max_states=max_states)
