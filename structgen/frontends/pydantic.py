"""Pydantic models (and any type Pydantic's TypeAdapter accepts) -> JSON Schema.

``pydantic_to_schema(Model)`` is Pydantic's own validation-mode JSON Schema, with ``$defs`` kept
local so that nested and recursive models resolve through ``$ref``.  Pydantic emits
``additionalProperties`` only when the model forbids extras (``extra="forbid"``); by default it
*ignores* unknown keys, so the schema (and our grammar) allows them -- set ``extra="forbid"`` for
generation.  Constrained types (``conint``, ``constr``, ``Field(ge=, max_length=, pattern=)``),
``Literal``, ``Enum``, ``Optional``, unions (discriminated ones become ``oneOf`` with a const
discriminator, which the compiler proves disjoint), ``list``/``tuple``/``set``/``dict`` all map
to keywords :mod:`.json_schema` compiles.

``set``/``frozenset`` fields come out as ``uniqueItems: true``; Pydantic itself accepts duplicate
items for them (it builds the set), so that keyword is dropped here: every instance the grammar
allows still validates with the model.
"""
from __future__ import annotations

from typing import Any


def pydantic_to_schema(model_or_type: Any) -> dict:
    """The JSON Schema (draft 2020-12) of a Pydantic model class or of any type."""
    try:
        from pydantic import BaseModel, TypeAdapter
    except ImportError as e:  # pragma: no cover - pydantic is a dependency
        raise ImportError("pydantic is required for pydantic_to_schema") from e
    if isinstance(model_or_type, type) and issubclass(model_or_type, BaseModel):
        schema = model_or_type.model_json_schema(mode="validation")
    else:
        schema = TypeAdapter(model_or_type).json_schema(mode="validation")
    return _drop_unique_items(schema)


def _drop_unique_items(node):
    if isinstance(node, dict):
        return {k: _drop_unique_items(v) for k, v in node.items() if not (k == "uniqueItems" and v is True)}
    if isinstance(node, list):
        return [_drop_unique_items(x) for x in node]
    return node
