"""structgen.caching: the LRU, the registry behind sg.clear_caches()/sg.cache_info(), the disk format."""
from __future__ import annotations

import functools
import os
import pickle
import threading

import numpy as np
import pytest

import structgen as sg
from structgen import caching


def test_lru_evicts_least_recent_by_entries():
    c = caching.LRU(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1  # "a" is now the most recent
    c.put("c", 3)
    assert c.get("b") is None and c.get("a") == 1 and c.get("c") == 3
    i = c.info()
    assert i["entries"] == 2 and i["max_entries"] == 2 and i["hits"] == 3 and i["misses"] == 1


def test_lru_evicts_by_bytes_and_skips_huge_values():
    c = caching.LRU(100, 4000)
    for k in range(5):
        c.put(k, np.zeros(1000, np.uint8))
    assert len(c) == 4 and c.bytes == 4000 and c.get(0) is None
    c.put("huge", np.zeros(1001, np.uint8))  # over a quarter of the bound: not kept
    assert "huge" not in c and c.bytes == 4000
    c.set_limits(max_bytes=2000)
    assert len(c) == 2 and c.bytes == 2000
    c.put(1, np.zeros(10, np.uint8))  # replacing an entry updates the byte count
    assert c.bytes <= 2000 and c.get(1).nbytes == 10


def test_lru_is_thread_safe():
    c = caching.LRU(50)

    def work(t):
        for i in range(2000):
            c.put((t, i % 80), i)
            c.get((t, (i * 7) % 80))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(c) == 50


def test_registry_clears_and_reports_every_kind():
    lru = caching.LRU(4, name="test.lru")

    @functools.lru_cache(maxsize=8)
    def square(x):
        return x * x

    caching.register_function("test.fn", square)
    d = {"k": 1}
    caching.on_clear(d.clear, name="test.dict")

    class Member:
        def __init__(self):
            self.n = 3

        def clear(self):
            self.n = 0

        def info(self):
            return {"entries": self.n, "bytes": 10 * self.n, "hits": None, "misses": None}

    m = Member()
    caching.register_group("test.group").add(m)
    lru.put("x", 1)
    square(3), square(3)
    info = sg.cache_info()
    assert info["test.lru"]["entries"] == 1
    assert info["test.fn"]["entries"] == 1 and info["test.fn"]["hits"] == 1 and info["test.fn"]["max_entries"] == 8
    assert info["test.dict"]["entries"] == 1
    assert info["test.group"]["entries"] == 3 and info["test.group"]["members"] == 1
    sg.clear_caches()
    info = sg.cache_info()
    assert len(lru) == 0 and square.cache_info().currsize == 0 and not d and m.n == 0
    assert info["test.group"]["bytes"] == 0
    sg.set_cache_limits("test.lru", entries=1)
    assert lru.entries == 1
    with pytest.raises(KeyError):
        sg.set_cache_limits("no.such.cache", entries=1)
    with pytest.raises(TypeError):
        sg.set_cache_limits("test.fn", entries=1)


def test_the_library_caches_are_registered():
    import structgen.frontends.lark  # noqa: F401  (registers its cache on import)

    names = set(sg.cache_info())
    for name in ("compile", "automaton.dfa", "automaton.charset", "automaton.embeds", "lark.cfg", "cfg.chained",
                 "api.vocabularies", "api.generators"):
        assert name in names, name


def test_clear_caches_empties_the_compile_cache():
    vocab = sg.Vocabulary.from_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])
    g = sg.Grammar.from_regex(r"[a-c]{2,5}x")
    a = sg.compile(g, vocab)
    hits = sg.cache_info()["compile"]["hits"]
    assert sg.compile(g, vocab) is a and sg.cache_info()["compile"]["hits"] == hits + 1
    assert sg.cache_info()["automaton.dfa"]["entries"] > 0
    sg.clear_caches()
    info = sg.cache_info()
    assert info["compile"]["entries"] == 0 and info["automaton.dfa"]["entries"] == 0
    misses = info["compile"]["misses"]
    b = sg.compile(g, vocab)
    assert b is not a and sg.cache_info()["compile"]["misses"] == misses + 1


def test_clear_caches_reaches_grammar_mask_caches():
    vocab = sg.Vocabulary.from_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])
    cg = sg.compile(sg.Grammar.from_lark('start: "(" start ")" | "x"\n'), vocab)
    m = cg.matcher()
    bm = sg.allocate_bitmask(1, vocab.logits_width)
    m.fill_bitmask(bm, 0)
    assert sg.cache_info()["cfg.mask"]["members"] >= 1
    sg.clear_caches()
    assert cg.engine.cache.n_entries == 0
    m.fill_bitmask(bm, 0)  # still works after a clear
    assert sg.unpack_bitmask(bm[0], vocab.logits_width)[ord("(")]


def test_disk_round_trip_and_bad_files_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path))
    d = caching.DiskCache("test")
    value = {"a": np.arange(5), "b": "text"}
    assert d.load(b"k") is None
    assert d.store(b"k", value)
    got = d.load(b"k")
    assert np.array_equal(got["a"], value["a"]) and got["b"] == "text"
    assert [p.name for p in tmp_path.iterdir()] == ["test"] and not list((tmp_path / "test").glob("*.tmp"))
    info = caching.disk_info()
    assert info["files"] == 1 and info["namespaces"]["test"]["bytes"] == os.path.getsize(d.path(b"k")) > 0
    # corrupt: ignored, then rewritten
    open(d.path(b"k"), "wb").write(b"not a pickle")
    assert d.load(b"k") is None
    assert d.store(b"k", 1) and d.load(b"k") == 1
    # stale (another structgen version): ignored
    rec = pickle.load(open(d.path(b"k"), "rb"))
    rec["version"] = "old"
    pickle.dump(rec, open(d.path(b"k"), "wb"))
    assert d.load(b"k") is None
    # another key's record under this name: ignored
    d.store(b"other", 2)
    os.replace(d.path(b"other"), d.path(b"k"))
    assert d.load(b"k") is None
    assert sg.cache_info(disk=True)["disk"]["dir"] == str(tmp_path)
    sg.clear_caches(disk=True)
    assert caching.disk_info()["files"] == 0


def test_disk_cache_off_with_an_empty_directory(monkeypatch):
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", "")
    d = caching.DiskCache("test")
    assert caching.cache_dir() is None and d.path(b"k") is None
    assert not d.store(b"k", 1) and d.load(b"k") is None


def test_unwritable_directory_is_silent(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    d = caching.DiskCache("test", directory=f)  # a file, not a folder
    assert not d.store(b"k", 1) and d.load(b"k") is None
