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

Workers are kept: a finished one waits for the next call (at most ``IDLE_WORKERS`` wait), so a
call costs a hand-off (tens of µs) instead of a thread start with its stack mapping (~150 µs, twice
per JSON Schema compile).  Concurrent calls each get their own worker; a forked child starts
with none.
"""
from __future__ import annotations

import atexit
import contextvars
import os
import queue
import sys
import threading

from structgen.errors import LimitExceeded

STACK_BYTES = 1 << 30          # 1 GiB of address space: about 100 KiB per level at 10,000 levels
RECURSION_LIMIT = 400_000      # frames: ~40 per schema level at the default max_schema_depth
IDLE_WORKERS = 4               # finished workers kept for the next calls

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
    _enter()
    try:
        worker = _take_worker()
        ok, value = worker.call(ctx.run, _guarded, fn, args, kwargs, limit_name, limit_value)
        _give_back(worker)
    finally:
        _leave()
    if not ok:  # re-raised in the caller's thread
        try:
            raise value.with_traceback(value.__traceback__)
        finally:
            value = None  # the traceback holds this frame: no cycle through its locals
    return value


class _Worker:
    """A thread with a large stack that runs the calls handed to it, one at a time."""

    def __init__(self):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        with _lock:
            old = threading.stack_size()
            try:
                threading.stack_size(STACK_BYTES)
                self._thread = threading.Thread(target=self._loop, name="structgen-deep", daemon=True)
            finally:
                threading.stack_size(old)
        self._thread.start()

    def _loop(self) -> None:
        _inside.deep = True
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, args, box, done = job
            try:
                box.append((True, fn(*args)))
            except BaseException as e:  # noqa: BLE001 -- handed to the caller
                box.append((False, e))
            del fn, args, job, box  # (an exception's traceback holds this frame: no cycle through box)
            done.release()

    def call(self, fn, *args):
        """``(True, result)`` or ``(False, exception)`` of ``fn(*args)`` run on this worker."""
        box: list = []
        done = threading.Lock()
        done.acquire()
        self._jobs.put((fn, args, box, done))
        done.acquire()
        return box[0]

    def stop(self) -> None:
        self._jobs.put(None)


_idle: list = []


def _take_worker() -> _Worker:
    with _lock:
        if _idle:
            return _idle.pop()
    return _Worker()


def _give_back(worker: _Worker) -> None:
    with _lock:
        if len(_idle) < IDLE_WORKERS:
            _idle.append(worker)
            return
    worker.stop()


def _forget_workers() -> None:
    """In a forked child the workers' threads do not exist."""
    _idle.clear()


@atexit.register
def _stop_workers() -> None:
    with _lock:
        workers = list(_idle)
        _idle.clear()
    for w in workers:
        w.stop()


os.register_at_fork(after_in_child=_forget_workers)


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
