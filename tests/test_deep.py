"""call_deep: deep recursion on kept worker threads (structgen.frontends.deep)."""
from __future__ import annotations

import contextvars
import os
import select
import signal
import sys
import threading

import pytest

from structgen.errors import LimitExceeded
from structgen.frontends import deep


def _depth(n: int) -> int:
    return 0 if n == 0 else 1 + _depth(n - 1)


def test_deep_recursion_and_result():
    assert deep.call_deep(_depth, 20_000) == 20_000


def test_workers_are_reused_and_bounded():
    idents = {deep.call_deep(threading.get_ident) for _ in range(20)}
    assert len(idents) == 1                     # one kept worker serves sequential calls
    assert threading.get_ident() not in idents  # and it is not the caller
    assert len(deep._idle) <= deep.IDLE_WORKERS


def test_exceptions_reach_the_caller():
    def boom():
        raise KeyError("x")
    with pytest.raises(KeyError):
        deep.call_deep(boom)

    def endless(n):
        return endless(n + 1)
    with pytest.raises(LimitExceeded):
        deep.call_deep(endless, 0, limit_name="max_test_depth")
    assert deep.call_deep(_depth, 10) == 10     # the worker survives both
    assert sys.getrecursionlimit() < deep.RECURSION_LIMIT   # restored once no call runs


def test_context_variables_and_nesting():
    var = contextvars.ContextVar("var", default="unset")
    var.set("caller")
    assert deep.call_deep(var.get) == "caller"
    # a nested call runs inline, on the same worker
    assert deep.call_deep(lambda: deep.call_deep(threading.get_ident) == threading.get_ident())


def test_concurrent_callers_get_their_own_workers():
    barrier = threading.Barrier(4)
    out = []

    def inner():
        barrier.wait(timeout=10)   # all four calls are inside a worker at once
        return threading.get_ident()

    threads = [threading.Thread(target=lambda: out.append(deep.call_deep(inner))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(out) == 4 and len(set(out)) == 4
    assert len(deep._idle) <= deep.IDLE_WORKERS


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_forked_child_starts_without_workers():
    deep.call_deep(_depth, 5)          # a worker is kept in this process
    assert deep._idle
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: its copy of the kept worker has no thread; a call must not hang
        try:
            ok = not deep._idle and deep.call_deep(_depth, 3000) == 3000
            os.write(w, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(w)
    ready, _, _ = select.select([r], [], [], 60)   # a hang fails, it does not block the suite
    got = os.read(r, 1) if ready else b""
    if not ready:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert got == b"1"
