"""structgen.collector: the cyclic garbage collector is held off while schemas are read and
compiled, and comes back as it was."""
from __future__ import annotations

import gc
import threading

import pytest

import structgen as sg
from structgen import collector

# a schema whose read and compile allocate enough to start collections
SCHEMA = {"type": "object", "properties": {f"k{i}": {"anyOf": [{"type": "integer", "minimum": i},
                                                                 {"type": "string", "pattern": f"^x{i}[a-z]+$"},
                                                                 {"type": "array", "items": {"type": "number"}}]}
                                             for i in range(40)}}


@pytest.mark.parametrize("pause", [True, False])
def test_reads_and_compiles_run_with_the_collector_off(pause, vocab, monkeypatch):
    """Inside ``from_json_schema`` (where it bundles the schema) and ``compile`` (where it builds)
    the collector is off, back on after; with ``PAUSE = False`` it stays on (so the check can
    tell)."""
    from structgen import compiler, grammar

    monkeypatch.setattr(collector, "PAUSE", pause)
    seen = []

    def spy(fn):
        def run(*a, **k):
            seen.append(gc.isenabled())
            return fn(*a, **k)
        return run

    monkeypatch.setattr(grammar, "bundle_remote", spy(grammar.bundle_remote))
    monkeypatch.setattr(compiler, "_compile", spy(compiler._compile))
    llama3 = vocab("llama3")
    g = sg.Grammar.from_json_schema(SCHEMA)
    assert gc.isenabled()
    sg.compile(g, llama3, cache=False)
    assert gc.isenabled()
    sg.compile(sg.Grammar.from_lark('start: "a"+'), llama3, cache=False)
    assert seen == [not pause] * 3


def test_fewer_collections_when_paused(vocab, monkeypatch):
    """Reading and compiling a schema in both orders starts fewer collections with the pause
    than without (where young collections keep moving the compile's objects on)."""
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", "")
    llama3 = vocab("llama3")
    counts = []
    for pause in (False, True):
        monkeypatch.setattr(collector, "PAUSE", pause)
        sg.clear_caches()
        seen = []

        def count(phase, info):
            if phase == "start":
                seen.append(info["generation"])

        gc.collect()
        gc.callbacks.append(count)
        try:
            for order in ("declared", "any"):
                sg.compile(sg.Grammar.from_json_schema(SCHEMA, property_order=order), llama3, cache=False)
        finally:
            gc.callbacks.remove(count)
        counts.append(len(seen))
    assert counts[1] * 4 < counts[0], counts   # 48 against 2 when written


def test_paused_nests_across_threads_and_restores_the_collector():
    assert gc.isenabled()
    inside = threading.Event()
    leave = threading.Event()

    def other():
        with collector.paused():
            inside.set()
            leave.wait(5)

    t = threading.Thread(target=other)
    with collector.paused():
        assert not gc.isenabled()
        t.start()
        assert inside.wait(5)
        with collector.paused():
            assert not gc.isenabled()
    assert not gc.isenabled()        # the other thread's compile is still in progress
    leave.set()
    t.join(5)
    assert gc.isenabled()            # the last one out brings it back
    gc.disable()
    try:
        with collector.paused():
            pass
        assert not gc.isenabled()    # a collector the user turned off stays off
    finally:
        gc.enable()


def test_an_error_inside_brings_the_collector_back():
    with pytest.raises(sg.StructgenError):
        sg.Grammar.from_json_schema({"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}})
    assert gc.isenabled()


@pytest.mark.parametrize("due", [True, False])
def test_a_compile_that_ends_with_a_full_collection_due_runs_it(due, vocab):
    """When the oldest generation is due (its count at its threshold) as a compile ends, the
    compile runs that full collection before returning, instead of leaving it to the next
    allocations (the caller's masks); when it is not due, no full collection runs.  Just after a
    full collection, with few objects added, the collector itself would not start one."""
    llama3 = vocab("llama3")
    g = sg.Grammar.from_lark('start: "a"+ "b"')
    sg.compile(g, llama3, cache=False)
    old = gc.get_threshold()
    full = []

    def count(phase, info):
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    gc.collect()
    gc.set_threshold(old[0], old[1], 0 if due else 1 << 20)
    gc.callbacks.append(count)
    try:
        sg.compile(g, llama3, cache=False)
        during = len(full)
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*old)
    assert during == (1 if due else 0)
