"""Checks of the decoding options, done once before any compile or forward pass.

``generate``/``Generator`` (through :func:`check_generate_options`) and
:func:`~structgen.decoding.autoregressive.decode_steps` (through :func:`check_sampling`)
refuse values they cannot honour with :class:`~structgen.errors.OptionError` naming the
option, the value and what is accepted -- instead of failing inside ``torch.multinomial``
(NaN, infinite temperature, ``top_p=0``), in a bare ``int()`` (``max_new_tokens=None``,
``seed="abc"``) or silently doing something else (``temperature=-1`` running greedy,
``max_new_tokens=2.5`` becoming 2).

Accepted values:

- ``max_new_tokens``: an integer ``>= 1`` (not a float, not a bool).
- ``temperature``: a finite real ``>= 0`` (0 = greedy); ``None`` means 0.
- ``top_p``: a real in ``(0, 1]``; ``None`` means 1.
- ``top_k``: an integer ``>= 0`` (0 = no cut); ``None`` means 0.
- ``seed``: ``None`` or an integer in ``[-2**63, 2**64)``.
- ``chat``: ``None`` or a bool; ``fast_forward``, ``token_healing``: bools; ``system``:
  ``None`` or a string.
"""
from __future__ import annotations

import math
import numbers
import operator

from ..errors import OptionError

__all__ = ["check_sampling", "check_generate_options"]


def _is_bool(x) -> bool:
    return isinstance(x, bool) or type(x).__name__ == "bool_"  # numpy's bool without importing numpy


def _integer(name: str, value, low: int, what: str) -> int:
    if _is_bool(value) or value is None or isinstance(value, (float, str, bytes)):
        raise OptionError(f"{name} must be {what}, got {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise OptionError(f"{name} must be {what}, got {value!r} ({type(value).__name__})") from None
    if v < low:
        raise OptionError(f"{name} must be {what}, got {v}")
    return v


def _real(name: str, value, what: str) -> float:
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise OptionError(f"{name} must be {what}, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not math.isfinite(v):
        raise OptionError(f"{name} must be {what}, got {v}")
    return v


def check_sampling(max_new_tokens, temperature, top_k, top_p) -> tuple[int, float, int, float]:
    """``(max_new_tokens, temperature, top_k, top_p)`` normalised (``None`` defaults applied),
    or :class:`OptionError` naming the first option out of its domain (see the module)."""
    n = _integer("max_new_tokens", max_new_tokens, 1, "an integer >= 1")
    t = 0.0 if temperature is None else _real("temperature", temperature, "a finite number >= 0 (0 = greedy)")
    if t < 0:
        raise OptionError(f"temperature must be a finite number >= 0 (0 = greedy), got {t}; "
                          "a negative temperature is not greedy decoding")
    k = 0 if top_k is None else _integer("top_k", top_k, 0, "an integer >= 0 (0 = no cut)")
    p = 1.0 if top_p is None else _real("top_p", top_p, "a number in (0, 1]")
    if not 0.0 < p <= 1.0:
        raise OptionError(f"top_p must be a number in (0, 1] (1 = no cut), got {p}")
    return n, t, k, p


def check_generate_options(opts: dict) -> None:
    """Check the decoding options of ``generate`` present in ``opts`` (keys of the module's
    list); raise :class:`OptionError` for the first bad one."""
    if {"max_new_tokens", "temperature", "top_k", "top_p"} <= set(opts):
        check_sampling(opts["max_new_tokens"], opts["temperature"], opts["top_k"], opts["top_p"])
    else:  # a partial set (Generator defaults): each one given
        d = {"max_new_tokens": 1, "temperature": 0.0, "top_k": 0, "top_p": 1.0}
        d.update({k: opts[k] for k in d if k in opts})
        check_sampling(d["max_new_tokens"], d["temperature"], d["top_k"], d["top_p"])
    seed = opts.get("seed")
    if seed is not None:
        s = _integer("seed", seed, -(2 ** 63), "None or an integer")
        if s >= 2 ** 64:
            raise OptionError(f"seed must be None or an integer in [-2**63, 2**64), got {s}")
    for name in ("fast_forward", "token_healing"):
        if name in opts and not _is_bool(opts[name]):
            raise OptionError(f"{name} must be True or False, got {opts[name]!r}")
    if opts.get("chat") is not None and not _is_bool(opts["chat"]):
        raise OptionError(f"chat must be None, True or False, got {opts['chat']!r}")
    if opts.get("system") is not None and not isinstance(opts["system"], str):
        raise OptionError(f"system must be None or a string, got {type(opts['system']).__name__}")
