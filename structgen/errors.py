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

    ``limit`` names the setting to raise, ``value`` is its value in force; ``option``, when
    known, says where to pass it (``"compile(max_nfa_states=...)"``).
    """

    def __init__(self, message: str, limit: str | None = None, value: object = None, option: str | None = None):
        self.message = message
        self.limit = limit
        self.value = value
        self.option = option
        if limit and option:
            hint = f" (limit {limit}={value!r}; raise it with {option})"
        elif limit:
            hint = f" (limit {limit}={value!r}; raise it to allow more)"
        else:
            hint = ""
        super().__init__(f"{message}{hint}")

    def within(self, what: str, options=(), where: str = "compile") -> "LimitExceeded":
        """The same error, its message prefixed by ``what`` was being built; when ``limit`` is one
        of ``options`` (the keyword options of ``where``), the advice names ``where(limit=...)``."""
        option = f"{where}({self.limit}=...)" if self.limit in options else self.option
        out = LimitExceeded(f"{what}: {self.message}", self.limit, self.value, option)
        out.__cause__ = self
        return out


class GenerationError(StructgenError):
    """The output is not a complete, valid value (typically: generation reached
    ``max_new_tokens`` first), or no output can satisfy the constraint under the
    probabilities given (a diffusion block with no valid filling).  ``result`` is the
    ``GenerationResult`` when there is one."""

    def __init__(self, message: str, result=None):
        self.result = result
        super().__init__(message)


class OptionError(StructgenError, ValueError, TypeError):
    """An option that does not exist or whose value makes no sense (``time_limit=nan``,
    ``max_states=-5``); a ``ValueError`` and a ``TypeError`` too, as a bad argument would be."""


class VocabularyError(StructgenError, ValueError):
    """A tokenizer that cannot be turned into a vocabulary (no EOS, unknown token format, ...)."""


class TokenError(StructgenError, TypeError):
    """A token id that is not an integer (a float, a bool, a string, ``None``, a float array)
    given to a matcher.  Integers out of the vocabulary are not errors: they are rejected."""


class BitmaskError(StructgenError, ValueError, TypeError):
    """A bitmask or logits tensor of the wrong type, dtype, shape or device, or a row outside
    it; the message names the expected shape and dtype (a ValueError and a TypeError, as
    numpy and torch raise for the same misuse)."""


class GrammarNotFound(StructgenError, KeyError):
    """A shipped grammar name that does not exist; the message lists the available ones (a
    KeyError, as a missing name in a mapping)."""

    def __str__(self) -> str:  # KeyError would print the message with quotes around it
        return str(self.args[0]) if self.args else ""


class EngineError(StructgenError, RuntimeError):
    """A serving engine (vLLM, SGLang) that structgen's backend for it cannot serve: not
    installed, or a release other than the one supported (the message names both)."""


class TokenRejected(StructgenError, ValueError):
    """A token an engine told a grammar object to accept that the constraint does not allow
    (a ValueError, as the engines' own backends raise: SGLang then aborts the request)."""
