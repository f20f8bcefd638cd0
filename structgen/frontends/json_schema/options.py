"""The options of the JSON Schema compilers, checked at the edge.

:data:`REGULAR_OPTIONS` are the keyword options of :class:`.regular.RegularCompiler` (and of
:func:`.regular.compile_json_schema`); :data:`GRAMMAR_OPTIONS` the ones only the grammar compiler
(:func:`.cfg.compile_json_schema_cfg`) adds; engine selection (:mod:`.select`) takes both.  An
unknown name raises :class:`OptionError` naming it (instead of a ``TypeError`` from deep inside
a constructor).  :func:`parse_json_text` turns schema text into a value.
"""
from __future__ import annotations

import json

from structgen.errors import OptionError, SchemaError

REGULAR_OPTIONS = frozenset({
    "whitespace", "max_whitespace", "lenient", "max_recursion_depth", "recursion", "any_depth",
    "unique_items_limit", "draft", "max_multiple_of_states", "max_properties_unroll", "max_states",
    "time_limit", "dfa_blocks", "extra_properties", "property_order", "any_order_limit",
    "any_order_max_states", "max_schema_depth", "hygiene"})
GRAMMAR_OPTIONS = frozenset({"max_array_unroll", "max_string_length", "max_floating_permutations", "edge_whitespace"})


def check_options(options: dict, allowed: frozenset, who: str) -> dict:
    """``options`` when every name is in ``allowed``; else :class:`OptionError` naming the others."""
    bad = sorted(k for k in options if k not in allowed)
    if bad:
        raise OptionError(f"{who} has no option{'s' if len(bad) > 1 else ''} {', '.join(map(repr, bad))} "
                          f"(it takes {', '.join(sorted(allowed))})")
    return options


def regular_options(options: dict, drop_grammar: bool = False) -> dict:
    """The options for the regular compiler; ``drop_grammar``: leave out the grammar compiler's
    own options (engine selection passes one set of options to both compilers)."""
    if drop_grammar:
        options = {k: v for k, v in options.items() if k not in GRAMMAR_OPTIONS}
    return check_options(options, REGULAR_OPTIONS, "the JSON Schema regular compiler")


def grammar_options(options: dict) -> dict:
    """The options for the grammar compiler (its own and the regular leaf compiler's)."""
    return check_options(options, REGULAR_OPTIONS | GRAMMAR_OPTIONS, "the JSON Schema grammar compiler")


def parse_json_text(schema):
    """``schema`` itself, or the value of JSON text (``str``/``bytes``).  Text that is not JSON
    raises :class:`SchemaError` naming the line, column and character position (also as its
    ``line``, ``column`` and ``position`` attributes; 1-based line and column, 0-based position)."""
    if not isinstance(schema, (str, bytes, bytearray)):
        return schema
    try:
        return json.loads(schema)
    except json.JSONDecodeError as e:
        line, column, pos, why = e.lineno, e.colno, e.pos, e.msg
    except UnicodeDecodeError as e:
        line, column, pos, why = None, None, e.start, f"bytes are not {e.encoding} text ({e.reason})"
    except (ValueError, RecursionError) as e:  # an integer too long for int(), nesting past the limit
        line, column, pos, why = None, None, None, str(e) or type(e).__name__
    where = f" at line {line}, column {column} (character {pos})" if line is not None else \
        f" at byte {pos}" if pos is not None else ""
    err = SchemaError(f"schema is not valid JSON: {why}{where}", None)
    err.line, err.column, err.position = line, column, pos
    raise err from None
