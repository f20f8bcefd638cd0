"""collector: Python's cyclic garbage collector held off while structgen reads and compiles.

A compile keeps many objects alive until it ends (IR trees, memo tables, automata).  Each young
collection that finds them alive moves them on to the older generations, and every quarter more
of those starts a full collection, which walks them all: over 600 dev-split schemas read and
compiled in one process (any property order), 32-33 full collections of 63-75 ms on average, up to
270 ms, all for nothing -- reading and compiling leave no reference cycles (checked by
``tests/test_json_schema_reliability.py`` and ``tests/test_frontends_lark_gbnf.py``), so reference
counting frees all of it the moment the compile ends.  Held off during reads and compiles: 4 full
collections of 25-28 ms on average (declared order: 10 -> 2); the time to first mask moved within
this machine's noise (any order p99 189, 152 -> 158, 133 ms).

But then the collector counts only what runs between compiles -- a server's masks -- and starts
its full collections there (the whole dev split, any order: 48 masks over 50 ms instead of 24).  So
a read or compile that ends when the oldest generation is due (``gc.get_count()[2]`` at its
threshold) runs that full collection itself, where the compile's time is counted: 1,500 dev-split
schemas in one process, any order / declared, full collections 15 / 29 without the pause (2 / 7
inside masks, masks over 50 ms 1 / 8), 5 / 11 with it, none inside masks (none over 50 ms).

:func:`paused` (and the decorator :func:`pausing`) is re-entrant and thread-safe: the collector
comes back when the last read or compile in progress ends, if it was enabled when the first
began.  Meanwhile other threads' cyclic garbage waits (a compile is bounded by its
``time_limit``).  Set ``PAUSE = False`` to leave the collector alone.
"""
from __future__ import annotations

import functools
import gc
import threading
from contextlib import contextmanager

__all__ = ["PAUSE", "paused", "pausing"]

#: hold the collector off during reads and compiles
PAUSE = True

_lock = threading.Lock()
_depth = 0          # reads and compiles in progress
_resume = False     # whether the collector was enabled when the first of them began


@contextmanager
def paused():
    """Hold the cyclic garbage collector off for the duration (see the module docstring)."""
    global _depth, _resume
    if not PAUSE:
        yield
        return
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            back = _depth == 0 and _resume
            if back:
                gc.enable()
        # the full collection the collector would start at its next chance -- in the caller's
        # masks, as allocations outside compiles are all it counts now -- runs here instead
        if back and gc.get_count()[2] >= gc.get_threshold()[2]:
            gc.collect()


def pausing(fn):
    """``fn`` run under :func:`paused`."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with paused():
            return fn(*args, **kwargs)
    return run
