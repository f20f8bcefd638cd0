"""The structgen error hierarchy.

Every error a user can cause derives from :class:`StructgenError`, and names the
offending fragment: a position in a regex, a JSON pointer in a schema, a line and
column in a grammar.  Unsupported features raise :class:`Unsupported` unless the
caller opted into a documented lenient mode.
"""
from __future__ import annotations


class StructgenError(Exception):
    """Base class of every error structgen raises on purpose."""


class RegexError(StructgenError, ValueError):
    """A regular expression that cannot be parsed or compiled.

    ``pattern`` is the regex text and ``pos`` the 0-based character offset of the
    offending construct (or None when the whole pattern is at fault).
    """

    def __init__(self, message: str, pattern: str | None = None, pos: int | None = None):
        self.message = message
        self.pattern = pattern
        self.pos = pos
        text = message
        if pattern is not None and pos is not None:
            text = f"{message} at position {pos} in regex {pattern!r}\n    {pattern}\n    {' ' * pos}^"
        elif pattern is not None:
            text = f"{message} in regex {pattern!r}"
        super().__init__(text)


class SchemaError(StructgenError, ValueError):
    """A JSON Schema that is malformed; ``pointer`` is the JSON pointer of the fragment."""

    def __init__(self, message: str, pointer: str = ""):
        self.message = message
        self.pointer = pointer
        super().__init__(f"{message} (at JSON pointer '{pointer or '#'}')" if pointer is not None else message)


class EmptyLanguage(SchemaError):
    """A constraint that no output satisfies; ``pointer`` names the sub-schema (JSON pointer) that
    empties it.  Raised by the front end, before any vocabulary is involved."""


class GrammarError(StructgenError, ValueError):
    """A grammar with a syntax or semantic error, at ``line``/``column`` (1-based) when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        self.message = message
        self.line = line
        self.column = column
        where = f" at line {line}, column {column}" if line is not None else ""
        super().__init__(f"{message}{where}")


class Unsupported(StructgenError):
    """A feature structgen does not implement (a regex lookaround, a schema keyword, ...).

    ``where`` names the fragment: a JSON pointer, a regex position or a grammar location.
    """

    def __init__(self, message: str, where: str | None = None):
        self.message = message
        self.where = where
        super().__init__(f"{message} (at {where})" if where else message)


class LimitExceeded(StructgenError):
    """A configurable limit (automaton states, compile time, recursion depth) was exceeded.

    ``limit`` names the setting to raise, ``value`` is its value in force.
    """

    def __init__(self, message: str, limit: str | None = None, value: object = None):
        self.message = message
        self.limit = limit
        self.value = value
        hint = f" (limit {limit}={value!r}; raise it to allow more)" if limit else ""
        super().__init__(f"{message}{hint}")


class VocabularyError(StructgenError, ValueError):
    """A tokenizer that cannot be turned into a vocabulary (no EOS, unknown token format, ...)."""
