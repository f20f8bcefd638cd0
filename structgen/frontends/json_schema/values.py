"""JSON values as JSON Schema compares them: the type of an instance, equality (``1 == 1.0``,
``true != 1``, key order irrelevant) as a hashable key, and de-duplication by that equality.
A leaf: imports only :mod:`.numbers`."""
from __future__ import annotations

from . import numbers as json_numbers


def json_type(v) -> str:
    """The JSON Schema type of the instance ``v`` ("integer" for integral numbers, ``1.0`` too)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer()):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def canon(v):
    """A hashable key with JSON Schema equality (1 == 1.0, true != 1, key order irrelevant)."""
    if isinstance(v, bool) or v is None:
        return ("lit", v)
    if isinstance(v, (int, float)):
        return ("num", json_numbers.to_decimal(v).normalize())
    if isinstance(v, str):
        return ("str", v)
    if isinstance(v, list):
        return ("arr", tuple(canon(x) for x in v))
    return ("obj", tuple(sorted((k, canon(x)) for k, x in v.items())))


def dedupe(values: list) -> list:
    """``values`` without repeats under JSON Schema equality, first occurrences kept in order."""
    seen, out = set(), []
    for v in values:
        c = canon(v)
        if c not in seen:
            seen.add(c)
            out.append(v)
    return out
