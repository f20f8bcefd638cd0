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

from .json_schema.keywords import SCHEMA_MAPS  # names -> sub-schemas (the map is not a schema)


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


def close_objects(node):
    """The schema with ``additionalProperties: false`` on every object that lists properties
    and says nothing about extra ones.  Pydantic models ignore unknown keys by default, so
    generating them only wastes tokens (and lets a model wander off into free-form JSON);
    a model with ``extra="allow"`` says ``additionalProperties: true`` and is left alone."""
    if isinstance(node, dict):
        out = {k: ({n: close_objects(sub) for n, sub in v.items()} if k in SCHEMA_MAPS and isinstance(v, dict)
                   else close_objects(v)) for k, v in node.items()}
        if "properties" in out and "additionalProperties" not in out and "patternProperties" not in out \
                and "unevaluatedProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [close_objects(x) for x in node]
    return node
