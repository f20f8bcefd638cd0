"""Deeply nested specifications without ``RecursionError``: :func:`call_deep`.

The front ends are recursive-descent translators (a sub-schema compiles its sub-schemas, a rule
its sub-expressions), so a specification nested ``n`` deep needs about ``c * n`` Python frames and
some C stack per level (``json.dumps``, ``any(...)`` over generators, descriptors).  CPython's
default recursion limit (1,000) and an 8 MiB thread stack stop them at a few hundred levels.
:func:`call_deep` runs a function on a worker thread with a large stack (``STACK_BYTES``, reserved
virtually: only the pages touched cost memory) and a raised recursion limit, so that nesting of
the depth limits the front ends enforce themselves (``max_schema_depth``, ...) fits; a
``RecursionError`` that still escapes becomes :class:`~structgen.errors.LimitExceeded`.

The recursion limit is interpreter-wide: while any deep call runs it stays at least
``RECURSION_LIMIT`` (raised on the first entry, restored when the last one leaves).
Context variables are carried to the worker; a nested :func:`call_deep` runs inline.
"""
from __future__ import annotations

import contextvars
import sys
import threading

from structgen.errors import LimitExceeded

STACK_BYTES = 1 << 30          # 1 GiB of address space: about 100 KiB per level at 10,000 levels
RECURSION_LIMIT = 400_000      # frames: ~40 per schema level at the default max_schema_depth

_lock = threading.Lock()
_active = 0
_saved_limit = None
_inside = threading.local()


def call_deep(fn, *args, limit_name: str = "max_schema_depth", limit_value=None, **kwargs):
    """``fn(*args, **kwargs)`` with room for deep recursion (see the module docstring); its result,
    or its exception re-raised here.  ``limit_name`` / ``limit_value`` name the depth setting a
    ``RecursionError`` is reported against."""
    if getattr(_inside, "deep", False):
        return _guarded(fn, args, kwargs, limit_name, limit_value)
    ctx = contextvars.copy_context()
    box: dict = {}

    def run():
        _inside.deep = True
        try:
            box["value"] = ctx.run(_guarded, fn, args, kwargs, limit_name, limit_value)
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e

    _enter()
    try:
        with _lock:
            old = threading.stack_size()
            try:
                threading.stack_size(STACK_BYTES)
                worker = threading.Thread(target=run, name="structgen-deep", daemon=True)
            finally:
                threading.stack_size(old)
        worker.start()
        worker.join()
    finally:
        _leave()
    if "error" in box:
        err = box.pop("error")
        raise err.with_traceback(err.__traceback__)
    return box.get("value")


def _guarded(fn, args, kwargs, limit_name, limit_value):
    try:
        return fn(*args, **kwargs)
    except RecursionError:
        raise LimitExceeded("the specification nests too deep to be compiled", limit_name, limit_value) from None


def _enter() -> None:
    global _active, _saved_limit
    with _lock:
        if _active == 0:
            _saved_limit = sys.getrecursionlimit()
            if _saved_limit < RECURSION_LIMIT:
                sys.setrecursionlimit(RECURSION_LIMIT)
        _active += 1


def _leave() -> None:
    global _active
    with _lock:
        _active -= 1
        if _active == 0 and _saved_limit is not None and sys.getrecursionlimit() == max(RECURSION_LIMIT, _saved_limit):
            sys.setrecursionlimit(_saved_limit)
