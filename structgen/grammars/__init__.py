"""Shipped Lark grammars, usable by name::

    import structgen as sg
    g = sg.Grammar.from_lark(sg.grammars.load("sql"))

``names()`` lists them: json, sql (a SELECT subset), arithmetic, c_subset (a C-like
language), csv, sexpr (a Lisp-like DSL) and robot (a command DSL).  Their
semantics are those of :mod:`structgen.cfg.grammar` (Lark's Earley parser with
``lexer="dynamic_complete"``).
"""
from __future__ import annotations

from pathlib import Path

from ..errors import GrammarNotFound

_DIR = Path(__file__).resolve().parent


def names() -> list:
    """Names of the shipped grammars."""
    return sorted(p.stem for p in _DIR.glob("*.lark"))


def load(name: str) -> str:
    """The Lark text of a shipped grammar.

    Raises:
        GrammarNotFound: ``name`` is not one of :func:`names` (the message lists them); a
            KeyError too.  Only those names are looked up: a path (``"../x"``) is no name.
    """
    available = names()
    if not isinstance(name, str) or name not in available:
        raise GrammarNotFound(f"no shipped grammar {name!r}; available: {', '.join(available)}")
    return (_DIR / f"{name}.lark").read_text(encoding="utf-8")


def path(name: str) -> Path:
    """The file of a shipped grammar."""
    load(name)
    return _DIR / f"{name}.lark"
