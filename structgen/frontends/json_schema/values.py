"""JSON values as JSON Schema compares them: the type of an instance, equality (``1 == 1.0``,
``true != 1``, key order irrelevant) as a hashable key, and de-duplication by that equality.
A leaf: imports only :mod:`.numbers`."""
from __future__ import annotations

import math
from decimal import Decimal

from . import numbers as json_numbers


def json_type(v) -> str:
    """The JSON Schema type of the instance ``v`` ("integer" for integral numbers, ``1.0`` too)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int) or (isinstance(v, (float, Decimal)) and is_integral(v)):
        return "integer"
    if isinstance(v, (float, Decimal)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def is_number(v) -> bool:
    """Is ``v`` a JSON number (``int``, ``float`` or ``Decimal``, as ``json.loads(...,
    parse_float=Decimal)`` gives; not ``bool``)?"""
    return isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)


def is_integral(v) -> bool:
    """Is the finite number ``v`` integral (``1.0`` and ``Decimal("1.00")`` are)?"""
    if isinstance(v, int):
        return True
    if isinstance(v, float):
        return v.is_integer()
    return v.is_finite() and v == v.to_integral_value()


def is_count(v) -> bool:
    """Is ``v`` a non-negative integral number (what ``minLength``, ``maxItems``... take; ``2.0``
    counts, ``True`` does not)?"""
    if not is_number(v):
        return False
    if isinstance(v, float) and not math.isfinite(v):
        return False
    return is_integral(v) and v >= 0


def canon(v):
    """A hashable key with JSON Schema equality (1 == 1.0, true != 1, key order irrelevant)."""
    if isinstance(v, bool) or v is None:
        return ("lit", v)
    if isinstance(v, int):
        return ("num", v)  # equal (and hashed equal) to the Decimal of an integral float
    if isinstance(v, (float, Decimal)):
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
