"""sg.fill_bitmasks (structgen/runtime/batch.py): parallel filling gives, row for row, the bits of
each matcher's own fill_bitmask on a mixed llama3 batch (regex, JSON Schema with the key guard on
both engines, a Lark grammar, at different points, duplicates and None rows; numpy and torch);
the lowest failing row's exception is the one raised; rows really are filled concurrently and a
slow row does not hold the others; bitmask checks name the expected shape and dtype; thread
counts.  No timing assertions."""
from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
import torch

import structgen as sg
from tests.helpers import load_vocab

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
                                           "age": {"type": "integer"}, "ok": {"type": "boolean"}},
          "required": ["name"], "additionalProperties": False}
VALUE = {"age": 41, "tags": ["x y", "zz"], "name": "Ann Lee", "ok": True}
LARK = r'''
start: stmt (";" stmt)*
stmt: "let " NAME " = " expr
expr: NUM | NAME | "(" expr " + " expr ")"
NAME: /[a-z]+/
NUM: /[0-9]+/
'''
LARK_TEXT = "let x = (12 + y);let zed = (1 + (2 + q))"


@pytest.fixture(scope="module")
def llama3():
    return load_vocab("llama3")


@pytest.fixture(scope="module")
def grammars(llama3):
    """(compiled grammar, example text) of each kind."""
    text = json.dumps(VALUE)
    return {
        "regex": (sg.compile(sg.Grammar.from_regex(r'[A-Z][a-z]+( [a-z]+){0,6}\.( [0-9]{1,3})?'), llama3),
                  "Hello big wide world out there. 123"),
        "json-dfa": (sg.compile(sg.Grammar.from_json_schema(SCHEMA, engine="dfa", whitespace="flexible"), llama3),
                     json.dumps({"name": "Ann Lee", "tags": ["x y", "zz"], "age": 41, "ok": True})),
        "guard-dfa": (sg.compile(sg.Grammar.from_json_schema(SCHEMA, engine="dfa", whitespace="flexible",
                                                             property_order="any"), llama3), text),
        "guard-cfg": (sg.compile(sg.Grammar.from_json_schema(SCHEMA, engine="cfg", whitespace="flexible",
                                                             property_order="any"), llama3), text),
        "lark": (sg.compile(sg.Grammar.from_lark(LARK), llama3), LARK_TEXT),
    }


def mixed_batch(grammars, llama3, seed=0, per_kind=6):
    """Matchers of every kind advanced by different prefixes of their example (at least one
    matcher of each kind at the start and one after the whole example)."""
    rng = np.random.default_rng(seed)
    out = []
    for kind, (cg, text) in grammars.items():
        toks = llama3.encode(text)
        for j in range(per_kind):
            n = 0 if j == 0 else len(toks) if j == 1 else int(rng.integers(1, len(toks)))
            m = cg.matcher()
            for t in toks[:n]:
                assert m.advance(t), (kind, n)
            out.append(m)
    order = rng.permutation(len(out))
    return [out[i] for i in order]


def row_by_row(matchers, words):
    bm = np.zeros((len(matchers), words), np.int32)
    for i, m in enumerate(matchers):
        if m is None:
            bm[i] = -1
        else:
            m.fill_bitmask(bm, i)
    return bm


def test_kinds_cover_both_engines_and_the_guard(grammars):
    names = {kind: type(cg.matcher()).__name__ for kind, (cg, _) in grammars.items()}
    assert names["regex"] == names["json-dfa"] == "TokenDFAMatcher"
    assert names["lark"] == "CFGMatcher"
    assert names["guard-dfa"] == names["guard-cfg"] == "KeyGuardMatcher"


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_parallel_fill_is_bit_identical_to_row_by_row(grammars, llama3, threads):
    ms = mixed_batch(grammars, llama3, seed=threads)
    ms[3:3] = [None]
    ms.append(ms[0])  # the same matcher in two rows
    words = (llama3.logits_width + 31) // 32
    want = row_by_row(ms, words)
    got = np.full((len(ms) + 2, words), 7, np.int32)
    sg.fill_bitmasks(ms, got, num_threads=threads)
    assert np.array_equal(got[:len(ms)], want)
    assert bool((got[len(ms):] == 7).all()), "rows past the matchers must stay untouched"
    t = torch.zeros((len(ms), words), dtype=torch.int32)
    sg.fill_bitmasks(ms, t, num_threads=threads)
    assert np.array_equal(t.numpy(), want)
    assert np.array_equal(row_by_row(ms, words), want), "filling must not move a matcher"


def test_fresh_grammars_filled_concurrently_match_sequential(llama3):
    """Rows not cached yet (TokenDFA walks, grammar-engine cache fills) computed by several
    threads at once on matchers of the same compiled grammars give the sequential bits."""
    text = json.dumps(VALUE)
    toks = llama3.encode(text)

    def batch_of(cg):
        ms = []
        for n in range(len(toks) + 1):
            m = cg.matcher()
            for t in toks[:n]:
                assert m.advance(t)
            ms.append(m)
        return ms

    words = (llama3.logits_width + 31) // 32
    for engine in ("dfa", "cfg"):
        def fresh():
            g = sg.Grammar.from_json_schema(SCHEMA, engine=engine, whitespace="flexible", property_order="any")
            return batch_of(sg.compile(g, llama3, cache=False))

        want = row_by_row(fresh(), words)
        want_inner = row_by_row([m.inner for m in fresh()], words)
        got_inner = np.zeros_like(want_inner)  # TokenDFAMatcher / CFGMatcher rows, unguarded
        sg.fill_bitmasks([m.inner for m in fresh()], got_inner, num_threads=4)
        assert np.array_equal(got_inner, want_inner), engine
        got = np.zeros_like(want)
        sg.fill_bitmasks(fresh(), got, num_threads=4)
        assert np.array_equal(got, want), engine


def test_grammar_rows_run_as_mask_jobs_with_their_own_bits(llama3, monkeypatch):
    """Quick grammar rows go to the jobs kernel (structgen/cfg/jobs.py) on several threads:
    rows at every point of a Lark text and a JSON document (accepting rows with their EOS bits, a
    terminated row), on a fresh grammar whose next points miss cache entries (their jobs end
    unfinished and the matchers fill them), and with the memo holding the masks, all give the
    bits of each matcher's own fill_bitmask."""
    from structgen.cfg.matcher import CFGMatcher
    from structgen.kernels.packed import CODE, describe, type_code
    assert describe((np.zeros(3, np.uint32),))[0, CODE] == type_code(np.uint32, 1)  # (the batch writes the row)
    calls = {"jobs": 0, "redone": 0}
    mask_job, finish_job = CFGMatcher.mask_job, CFGMatcher.finish_job

    def spy_job(self, out):
        calls["jobs"] += 1
        return mask_job(self, out)

    def spy_finish(self, out, status):
        calls["redone"] += status != 0
        return finish_job(self, out, status)

    monkeypatch.setattr(sg.runtime.batch, "MIN_JOBS", 2)  # (these batches are small)
    monkeypatch.setattr(sg.runtime.batch, "SLOW_ROW_S", 60.0)  # every row quick, however busy the machine
    monkeypatch.setattr(CFGMatcher, "mask_job", spy_job)
    monkeypatch.setattr(CFGMatcher, "finish_job", spy_finish)
    words = (llama3.logits_width + 31) // 32
    for grammar, text in ((sg.Grammar.from_lark(LARK), LARK_TEXT),
                          (sg.Grammar.from_json_schema(SCHEMA, engine="cfg", whitespace="flexible"),
                           json.dumps({"name": "Ann Lee", "tags": ["x y", "zz"], "age": 41, "ok": True}))):
        cg = sg.compile(grammar, llama3, cache=False)
        toks = llama3.encode(text)
        ms = []
        for n in range(0, len(toks) + 1, 2):
            m = cg.matcher()
            assert all(m.advance(t) for t in toks[:n])
            ms.append(m)
        full, done = cg.matcher(), cg.matcher()  # accepting (EOS bits), terminated
        assert all(full.advance(t) and done.advance(t) for t in toks) and full.is_accepting()
        assert done.advance(int(llama3.eos_ids[0])) and done.is_terminated()
        ms += [full, done]
        assert type(ms[0]) is CFGMatcher
        bm = np.zeros((len(ms), words), np.int32)
        sg.fill_bitmasks(ms, bm, num_threads=2)
        assert np.array_equal(bm, row_by_row(ms, words))
        for m, n in zip(ms[:-2], range(0, len(toks) + 1, 2)):  # new points: entries not computed yet
            if n < len(toks):
                assert m.advance(toks[n])
        before = dict(calls)
        for threads in (2, 3):
            got = np.zeros((len(ms), words), np.int32)
            sg.fill_bitmasks(ms, got, num_threads=threads)
            assert np.array_equal(got, row_by_row(ms, words)), (grammar, threads)
        assert calls["jobs"] - before["jobs"] == 2 * len(ms), "every quick grammar row must run as a job"
    assert calls["redone"] > 0, "some new points of a fresh grammar must miss cache entries"
    # the memo holding every mask: jobs are answered from it
    import structgen.cfg.matcher as matcher_module
    monkeypatch.setattr(matcher_module, "MEMO_MIN_SECONDS", 0.0)
    cg = sg.compile(sg.Grammar.from_lark(LARK), llama3, cache=False)
    toks = llama3.encode(LARK_TEXT)
    ms = []
    for n in (len(toks), len(toks) - 1, 3):
        m = cg.matcher()
        assert all(m.advance(t) for t in toks[:n])
        ms.append(m)
    row_by_row(ms, words)  # (the grammar's cache fills, if it must)
    want = row_by_row(ms, words)  # the memo keeps each mask
    jobs, redone = calls["jobs"], calls["redone"]
    monkeypatch.setattr(CFGMatcher, "JOB", (None,) + CFGMatcher.JOB[1:])  # (a job left to the kernel fails)
    got = np.zeros_like(want)
    sg.fill_bitmasks(ms, got, num_threads=2)
    assert calls["jobs"] == jobs + len(ms) and calls["redone"] == redone and np.array_equal(got, want)


# ----------------------------------------------------------------------------- errors
class Boom(Exception):
    pass


class Stub:
    """A row that runs ``action(bitmask, row)`` (what a matcher's fill_bitmask would do)."""

    def __init__(self, vocab, action):
        self.vocab, self.action = vocab, action

    def fill_bitmask(self, bitmask, row=0):
        self.action(bitmask, row)


def busy(b, r, seconds=0.002):
    t0 = time.thread_time()
    while time.thread_time() - t0 < seconds:
        pass


def slow_rows(stubs, bm):
    """Fill once with every stub busy for 2 ms of CPU, so that fill_bitmasks knows them as slow
    rows (the pool takes only rows whose last fill was slow), then give them back their actions."""
    actions = [s.action for s in stubs]
    for s in stubs:
        s.action = busy
    sg.fill_bitmasks(stubs, bm, num_threads=1)
    for s, a in zip(stubs, actions):
        s.action = a
    return stubs


def test_lowest_failing_row_raises_its_exception(grammars, llama3):
    ms = mixed_batch(grammars, llama3, seed=5, per_kind=3)
    first, second = Boom("row 4"), ValueError("row 9")

    def raise_(e):
        def action(bm, row):
            raise e
        return action

    ms[4] = Stub(llama3, raise_(first))
    ms[9] = Stub(llama3, raise_(second))
    words = (llama3.logits_width + 31) // 32
    want = np.zeros((len(ms), words), np.int32)
    for i in range(4):
        ms[i].fill_bitmask(want, i)
    for threads in (1, 2, 4):
        bm = np.zeros((len(ms), words), np.int32)
        with pytest.raises(Boom) as info:
            sg.fill_bitmasks(ms, bm, num_threads=threads)
        assert info.value is first
        assert np.array_equal(bm[:4], want[:4]), "rows before the failing one are filled"
    # on a torch bitmask too
    t = torch.zeros((len(ms), words), dtype=torch.int32)
    with pytest.raises(Boom):
        sg.fill_bitmasks(ms, t, num_threads=2)
    assert np.array_equal(t[:4].numpy(), want[:4])


def test_rows_are_filled_concurrently(llama3):
    """Two grammar-like rows wait for each other: only a parallel fill gets past the barrier."""
    barrier = threading.Barrier(2, timeout=20)
    seen = set()

    def meet(bm, row):
        barrier.wait()
        seen.add(threading.get_ident())
        bm[row] = row

    words = (llama3.logits_width + 31) // 32
    bm = np.zeros((2, words), np.int32)
    sg.fill_bitmasks(slow_rows([Stub(llama3, meet), Stub(llama3, meet)], bm), bm, num_threads=2)
    assert len(seen) == 2 and bm[1, 0] == 1
    with pytest.raises(threading.BrokenBarrierError):  # one thread: the first row waits alone
        barrier.reset()
        b1 = threading.Barrier(2, timeout=0.5)
        sg.fill_bitmasks(slow_rows([Stub(llama3, lambda bm, r: b1.wait()), Stub(llama3, lambda bm, r: b1.wait())],
                                   bm), bm, num_threads=1)


def test_a_slow_row_does_not_hold_the_others(grammars, llama3):
    """Row 0 waits until the last row was filled: the other rows must go on without it."""
    done = threading.Event()
    cg, text = grammars["regex"]

    def slow(bm, row):
        assert done.wait(20), "the other rows waited for the slow one"
        bm[row] = 5

    def last(bm, row):
        bm[row] = 6
        done.set()

    ms = [Stub(llama3, slow)] + [cg.matcher() for _ in range(10)] + [Stub(llama3, last)]
    words = (llama3.logits_width + 31) // 32
    bm = np.zeros((len(ms), words), np.int32)
    slow_rows([ms[0], ms[-1]], bm[:2])
    sg.fill_bitmasks(ms, bm, num_threads=2)
    assert bm[0, 0] == 5 and bm[-1, 0] == 6
    assert np.array_equal(bm[1], cg.matcher().mask_words().view(np.int32))


# ----------------------------------------------------------------------------- checks and threads
def test_bitmask_checks_name_the_expected_shape(grammars, llama3):
    ms = [grammars["regex"][0].matcher(), grammars["lark"][0].matcher()]
    words = (llama3.logits_width + 31) // 32
    want = rf"C-contiguous int32 bitmask of shape \(>= 2, {words}\) for V = {llama3.logits_width} tokens"
    bad = [np.zeros((1, words), np.int32), np.zeros((2, words - 1), np.int32), np.zeros((2, words), np.int64),
           torch.zeros((2, words), dtype=torch.float32), np.zeros((2, words, 1), np.int32),
           np.zeros((words, 2), np.int32).T, torch.zeros((words, 2), dtype=torch.int32).T,
           np.zeros((2, 2 * words), np.int32)[:, ::2]]
    for b in bad:
        with pytest.raises(ValueError, match=want):
            sg.fill_bitmasks(ms, b)
    with pytest.raises(ValueError, match="non-contiguous"):
        sg.fill_bitmasks(ms, np.zeros((2, 2 * words), np.int32)[:, ::2])
    with pytest.raises(TypeError, match="numpy array or torch tensor"):
        sg.fill_bitmasks(ms, [[0] * words] * 2)
    for n in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="num_threads"):
            sg.fill_bitmasks(ms, np.zeros((2, words), np.int32), num_threads=n)
    ro = np.zeros((2, words), np.int32)
    ro.flags.writeable = False
    with pytest.raises(ValueError):  # numpy's own error, as fill_bitmask gives it
        sg.fill_bitmasks(ms, ro)
    sg.fill_bitmasks([], np.zeros((0, words), np.int32))
    # one row (its matcher's own fill): the same checks, the same bits, on numpy and torch
    one = [ms[1]]
    for b in (np.zeros((1, words - 1), np.int32), np.zeros((2, 2 * words), np.int32)[:1, ::2],
              torch.zeros((1, words), dtype=torch.int64)):
        with pytest.raises(ValueError, match=rf"bitmask of shape \(>= 1, {words}\)"):
            sg.fill_bitmasks(one, b)
    for b in (np.full((1, words), 7, np.int32), torch.full((1, words), 7, dtype=torch.int32)):
        sg.fill_bitmasks(one, b)
        assert np.array_equal(np.asarray(b), row_by_row(one, words))


def test_thread_count_setting(grammars, llama3):
    default = sg.get_num_threads()
    assert default >= 1
    try:
        sg.set_num_threads(3)
        assert sg.get_num_threads() == 3
        ms = mixed_batch(grammars, llama3, seed=9, per_kind=2)
        words = (llama3.logits_width + 31) // 32
        bm = np.zeros((len(ms), words), np.int32)
        sg.fill_bitmasks(ms, bm)
        assert np.array_equal(bm, row_by_row(ms, words))
        sg.set_num_threads(1)
        assert sg.get_num_threads() == 1
        for bad in (0, -2, 2.0, "2", False):
            with pytest.raises(ValueError, match="num_threads"):
                sg.set_num_threads(bad)
    finally:
        sg.set_num_threads(None)
    assert sg.get_num_threads() == default
