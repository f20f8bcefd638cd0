"""Constraints from what users write: ``schema=`` / ``regex=`` / ``grammar=`` / ``choices=``
keywords and Python type annotations, each resolved to a :class:`Constraint` — the grammar to
compile, how to parse the output and how to name it in messages."""
from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import re
import typing
from typing import Any, Callable

from .errors import SchemaError, Unsupported
from .frontends.pydantic import close_objects as _closed, pydantic_to_schema
from .grammar import Grammar
from .tools import tool_calls

__all__ = ["Constraint", "constraint_from_annotation", "resolve_constraint", "identity", "string_choices", "choice_strings"]


@dataclasses.dataclass
class Constraint:
    """A resolved constraint: the grammar (None = unconstrained), how to turn the output
    text into a value, and a short description."""

    grammar: Grammar | None
    parse: Callable[[str], Any]
    description: str

    @property
    def key(self):
        return None if self.grammar is None else self.grammar.key


def identity(text: str) -> str:
    return text


def _is_pydantic_model(obj) -> bool:
    try:
        from pydantic import BaseModel
    except ImportError:  # pragma: no cover
        return False
    return isinstance(obj, type) and issubclass(obj, BaseModel)




def _pydantic_grammar(tp, options: dict) -> Grammar:
    """Grammar of a Pydantic model or TypeAdapter type; objects closed unless ``strict=False``."""
    options = dict(options)
    if not options.pop("strict", True):
        return Grammar.from_pydantic(tp, **options)
    g = Grammar.from_json_schema(_closed(pydantic_to_schema(tp)), **options)
    g.source = f"Pydantic {_type_name(tp)}"
    return g


def _schema_constraint(schema, options: dict) -> Constraint:
    if isinstance(schema, Grammar):
        return Constraint(schema, json.loads, schema.source)
    if _is_pydantic_model(schema):
        return Constraint(_pydantic_grammar(schema, options), schema.model_validate_json,
                          f"Pydantic {schema.__name__}")
    if isinstance(schema, (dict, bool, str, bytes)):
        if isinstance(schema, (str, bytes)):
            try:
                schema = json.loads(schema)
            except ValueError as e:
                raise SchemaError(f"schema= text is not JSON: {e}", "") from None
        options = dict(options)
        # Generation closes objects that do not say what extra keys may hold (as xgrammar's
        # strict mode and OpenAI's structured outputs do): every output still validates, and a
        # model cannot wander off into keys nobody asked for.  strict=False keeps them open.
        if options.pop("strict", True):
            schema = _closed(schema)
        return Constraint(Grammar.from_json_schema(schema, **options), json.loads, "JSON Schema")
    # any other type: through Pydantic's TypeAdapter (dataclass, TypedDict, list[int], ...)
    adapter = _type_adapter(schema, "schema=")
    return Constraint(_pydantic_grammar(schema, options), adapter.validate_json, _type_name(schema))


def _type_name(tp) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _type_adapter(tp, what: str):
    from pydantic import TypeAdapter

    try:
        adapter = TypeAdapter(tp)
        adapter.json_schema()
    except Exception as e:
        raise Unsupported(f"{what} {_type_name(tp)} cannot be a constraint: Pydantic cannot describe it as "
                          f"JSON ({type(e).__name__}: {str(e).splitlines()[0]})", where=_type_name(tp)) from None
    return adapter


def string_choices(tp) -> list[str] | None:
    """The values of a Literal of strings or a str-valued Enum (None otherwise)."""
    if typing.get_origin(tp) is typing.Literal:
        vals = typing.get_args(tp)
        return list(vals) if vals and all(isinstance(v, str) for v in vals) else None
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        vals = [m.value for m in tp]
        return vals if vals and all(isinstance(v, str) for v in vals) else None
    return None


#: JSON layout for generation when none is given: json.dumps' ", " and ": " — the layout models
#: have seen most, and fixed, so fast-forward can force it (measured on SmolLM2: compact made the
#: model misplace numbers, flexible gave fast-forward little to force).
DEFAULT_WHITESPACE = "dumps"

#: JSON Schema semantics for generation when none is given: the exact language with the
#: restrictions of :class:`structgen.JsonHygiene` (integer literals in the 64-bit range, bounded
#: number digits and exponents, short whitespace runs, extra members last), so that a weak model
#: cannot run away in ``23.000...``; ``schema_options={"hygiene": False}`` keeps exact semantics.
DEFAULT_HYGIENE = True


def constraint_from_annotation(tp, *, whitespace: str | None = None, where: str = "return annotation",
                               property_order: str | None = None) -> Constraint:
    """The constraint for a Python type: ``str`` is free text; a Literal of strings or a
    str Enum is a choice of its raw values; anything else Pydantic can describe as JSON
    (models, dataclasses, TypedDicts, ``list[...]``, ``int``, ``float``, ``bool``, ...)
    is JSON validated by ``TypeAdapter``.  Raises :class:`Unsupported` otherwise.
    ``property_order="any"`` lets object members come in any order (see :func:`generate`)."""
    if tp is inspect.Signature.empty or tp is None or tp is type(None):
        raise Unsupported(f"the {where} is missing: annotate the return type (a Pydantic model, "
                          "TypedDict, dataclass, Literal, Enum, list[...], int, float, bool or str)")
    if tp is str:
        return Constraint(None, lambda t: t.strip(), "free text")
    choices = string_choices(tp)
    if choices is not None:
        from pydantic import TypeAdapter

        adapter = TypeAdapter(tp)
        return Constraint(Grammar.choice(choices), adapter.validate_python, f"one of {choices}")
    adapter = _type_adapter(tp, where)
    options = {"whitespace": whitespace or DEFAULT_WHITESPACE, "hygiene": DEFAULT_HYGIENE}
    if property_order is not None:
        options["property_order"] = property_order
    return Constraint(_pydantic_grammar(tp, options), adapter.validate_json, _type_name(tp))


def resolve_constraint(*, schema=None, regex=None, grammar=None, choices=None, whitespace=None,
                       schema_options: dict | None = None, property_order: str | None = None, tools=None,
                       tool_format: str | None = None) -> Constraint:
    """One constraint from the keyword arguments of :func:`generate` (at most one given;
    ``tools=`` with ``tool_format=`` is :func:`structgen.tools.tool_calls`)."""
    given = [k for k, v in (("schema", schema), ("regex", regex), ("grammar", grammar), ("choices", choices),
                            ("tools", tools)) if v is not None]
    if len(given) > 1:
        raise TypeError(f"pass at most one of schema=, regex=, grammar=, choices=, tools= (got {', '.join(given)})")
    if tools is not None:
        g = tool_calls(tools, tool_format or "hermes", whitespace=whitespace or DEFAULT_WHITESPACE)
        return Constraint(g, identity, g.source)
    if tool_format is not None:
        raise TypeError("tool_format= goes with tools=")
    if not given:
        return Constraint(None, identity, "unconstrained")
    options = dict(schema_options or {})
    if whitespace is not None:
        options["whitespace"] = whitespace
    if property_order is not None:
        options["property_order"] = property_order
    options.setdefault("whitespace", DEFAULT_WHITESPACE)
    options.setdefault("hygiene", DEFAULT_HYGIENE)
    if schema is not None:
        return _schema_constraint(schema, options)
    if regex is not None:
        if isinstance(regex, re.Pattern):
            regex = regex.pattern
        return Constraint(Grammar.from_regex(regex), identity, f"regex {regex!r}")
    if choices is not None:
        if isinstance(choices, str):
            raise TypeError("choices= takes a list of strings, not one string")
        opts = choice_strings(choices)
        return Constraint(Grammar.choice(opts), identity, f"one of {len(opts)} choices")
    if isinstance(grammar, Grammar):
        return Constraint(grammar, identity, grammar.source)
    if isinstance(grammar, str):
        g = Grammar.from_gbnf(grammar) if "::=" in grammar else Grammar.from_lark(grammar)
        return Constraint(g, identity, g.source)
    raise TypeError(f"grammar= takes a structgen.Grammar or grammar text, not {type(grammar).__name__}")


def choice_strings(choices) -> list[str]:
    """The strings of a ``choices=`` list (str-valued Enum members by value).

    Raises:
        TypeError: one string instead of a list, or an entry that is not a string."""
    if isinstance(choices, str):
        raise TypeError("choices= takes a list of strings, not one string")
    opts = [c.value if isinstance(c, enum.Enum) else c for c in choices]
    if not all(isinstance(c, str) for c in opts):
        raise TypeError("choices= takes strings (or str-valued Enum members)")
    return opts


# ----------------------------------------------------------------------------- results
