"""The JSON front end's configuration of the lower layers' generic speed-ups.

:func:`json_slicing` is the :class:`~structgen.index.slices.Slicing` a JSON Schema grammar is
compiled with (:meth:`structgen.Grammar.from_json_schema` attaches it):

- one vocabulary slice, the characters a JSON string holds without escaping (every code point
  from U+0020 but ``"``, ``\\`` and the surrogates): a state inside a free string loops on all of
  them (:class:`~structgen.index.token_dfa.TokenDFA`), a state inside a string with
  ``maxLength`` counts them (the grammar engine's run tokens).

Masks never depend on this; only how fast they are computed.
"""
from __future__ import annotations

from functools import lru_cache

from ...automaton import ir
from ...index.slices import SliceDef, Slicing

#: Characters a JSON string holds without escaping.
JSON_STRING_CHARS = ir.CharSet.of([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0xD7FF), (0xE000, 0x10FFFF)])

#: The JSON-string-body slice.
JSON_STRING_SLICE = SliceDef(JSON_STRING_CHARS, 0.25, "JSON string characters")

@lru_cache(maxsize=None)
def json_slicing() -> Slicing:
    """The slicing of JSON Schema grammars (one object per process: see the module doc)."""
    return Slicing((JSON_STRING_SLICE,))
