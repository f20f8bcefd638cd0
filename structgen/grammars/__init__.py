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

_DIR = Path(__file__).resolve().parent


def names() -> list:
    """Names of the shipped grammars."""
    return sorted(p.stem for p in _DIR.glob("*.lark"))


def load(name: str) -> str:
    """The Lark text of a shipped grammar."""
    p = _DIR / f"{name}.lark"
    if not p.is_file():
        raise KeyError(f"no shipped grammar {name!r}; available: {', '.join(names())}")
    return p.read_text(encoding="utf-8")


def path(name: str) -> Path:
    """The file of a shipped grammar."""
    load(name)
    return _DIR / f"{name}.lark"
