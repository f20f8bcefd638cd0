"""The grammar matcher's mask memo (structgen.cfg.matcher): a mask served from the memo equals
the mask computed afresh, along random walks with rollbacks, restores and forks."""
from __future__ import annotations

import numpy as np
import pytest

import structgen as sg
from structgen.cfg import matcher as cm
from structgen.kernels.bitmask import set_bits
from structgen.vocab import Vocabulary

CSV = r"""
start: header _NL row+
header: "#" " "? (WORD _SEP?)+
row: (_anything _SEP?)+ _NL
_anything: INT | WORD | NSS
NSS: /[a-z.;]+/
_SEP: /[ ]+/ | ","
_NL: /\r?\n/
%import common.WORD
%import common.INT
"""

LIST = r"""
start: "[" [item ("," " "? item)*] "]"
item: NAME | NUMBER | start
NAME: /[a-z]+/
NUMBER: /[0-9]+/
"""

ARITH = r"""
?start: sum
?sum: product | sum "+" product | sum "-" product
?product: atom | product "*" atom
?atom: NUMBER | "(" sum ")" | NAME
NAME: /[a-z]+/
NUMBER: /[0-9]+/
%ignore " "
"""


def _vocab():
    pieces = [bytes([b]) for b in range(32, 127)] + [b"\n", b"\r\n", b"ab", b"abc", b"a b", b", ", b",a", b"1,",
                                                      b"12", b"x.y", b"a;b", b" \n", b"(1", b"+(", b"[a", b"],",
                                                      b"ba", b"cab", b"a\nb", b"  ", b"bc,", b"c1", b"]]", b"]]]", b"b]]]]"]
    return Vocabulary.from_bytes(pieces + [None], eos_ids=[len(pieces)])


def _fresh(ref, words):
    """``ref``'s mask computed without its memo."""
    ref._compute_fresh(ref.engine, words)
    if ref.is_accepting():
        set_bits(words, ref.engine.eos)
    return words


@pytest.mark.parametrize("text", [CSV, LIST, ARITH], ids=["csv", "list", "arith"])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("keys", ["signature", "frontier"])
def test_memo_masks_equal_fresh_ones(text, seed, keys, monkeypatch):
    monkeypatch.setattr(cm, "MEMO_MIN_SECONDS", -1.0)   # every matcher keeps masks from the first
    monkeypatch.setattr(cm, "MEMO_PROBATION", 1 << 30)  # and keeps its memo
    monkeypatch.setattr(cm, "SIGNATURE_PROBATION", 1 << 30)  # and its signatures
    if keys == "frontier":  # no signature fits: every key is the frontier's
        monkeypatch.setattr(cm, "_KEY_WORDS", 1)
    vocab = _vocab()
    cg = sg.compile(sg.Grammar.from_lark(text), vocab, cache=False)
    rng = np.random.default_rng(seed)
    m = cg.matcher()
    ref = cg.matcher()
    words = np.empty(cg.engine.words, np.uint32)
    snaps = []
    hits = sig_hits = 0
    for step in range(160):
        if m._memo is not None and not m.is_terminated():
            by_front = m._front_key() in m._memo
            hits += by_front or m._config_key(m.engine) in m._memo
            sig_hits += not by_front and m._config_key(m.engine) in m._memo
        got = m.mask_words()
        want = _fresh(ref, words.copy())
        assert np.array_equal(got, want), step
        allowed = np.flatnonzero(np.unpackbits(got.view(np.uint8), bitorder="little"))
        normal = [t for t in allowed.tolist() if t < len(vocab.token_offsets) - 2]
        r = rng.random()
        if r < 0.1 and m.accepted_tokens() > 2:          # back, then elsewhere
            k = int(rng.integers(1, min(6, m.accepted_tokens()) + 1))
            m.rollback(k)
            ref.rollback(k)
        elif r < 0.15:
            snaps.append((m.snapshot(), ref.snapshot()))
        elif r < 0.2 and snaps:
            a, b = snaps[int(rng.integers(len(snaps)))]
            m.restore(a)
            ref.restore(b)
        elif r < 0.23:
            m = m.fork()                                  # a fork starts without the memo
        elif normal:
            t = int(rng.choice(normal))
            assert m.advance(t) and ref.advance(t)
        else:
            m.reset()
            ref.reset()
    assert hits > 0   # the memo served masks
    assert (sig_hits > 0) == (keys == "signature")  # some by signature alone, where signatures fit


def test_memo_is_dropped_when_the_chart_goes_back(monkeypatch):
    monkeypatch.setattr(cm, "MEMO_MIN_SECONDS", -1.0)
    cg = sg.compile(sg.Grammar.from_lark(CSV), _vocab(), cache=False)
    m = cg.matcher()
    assert m.advance_bytes(b"# ab\nab ")
    m.mask_words()
    assert m._memo
    m.rollback(1)
    assert not m._memo
    m.mask_words()
    snap = m.snapshot()
    m.advance_bytes(b"c")
    m.mask_words()
    m.restore(snap)
    assert not m._memo
    assert m.fork()._memo is None


def test_a_stale_memo_would_be_wrong(monkeypatch):
    """Equal keys name committed sets by number: after "[[[" + "[b" and, on another branch,
    "[a," + "[b", the lexeme and its origin set read alike, but set 3 is four lists deep in one
    and two in the other ("b]]]]" closes all four).  Going back must drop the memo."""
    monkeypatch.setattr(cm, "MEMO_MIN_SECONDS", -1.0)
    cg = sg.compile(sg.Grammar.from_lark(LIST), _vocab(), cache=False)
    m = cg.matcher()
    assert m.advance_bytes(b"[[[[b")
    deep = m.mask_words().copy()
    key = m._config_key(m.engine)
    m.rollback(1)
    assert m.advance_bytes(b"[a,[b")
    assert m._config_key(m.engine) == key          # the same key ...
    ref = cg.matcher()
    assert ref.advance_bytes(b"[a,[b")
    want = _fresh(ref, np.empty(cg.engine.words, np.uint32))
    assert not np.array_equal(deep, want)          # ... for different masks
    assert np.array_equal(m.mask_words(), want)


def test_memo_is_dropped_where_it_seldom_hits(monkeypatch):
    """A right-recursive list read item by item repeats no configuration: after the probation the
    matcher stops computing keys; masks stay exact."""
    monkeypatch.setattr(cm, "MEMO_MIN_SECONDS", -1.0)
    monkeypatch.setattr(cm, "MEMO_PROBATION", 8)
    cg = sg.compile(sg.Grammar.from_lark(LIST), _vocab(), cache=False)
    m, ref = cg.matcher(), cg.matcher()
    text = b"[[[[[[[[[[[[[[[[[[[[a]]]]]]]]]]]]]]]]]]]"
    for i in range(len(text)):
        assert np.array_equal(m.mask_words(), _fresh(ref, np.empty(cg.engine.words, np.uint32))), i
        assert m.advance_bytes(text[i:i + 1]) and ref.advance_bytes(text[i:i + 1])
    assert m._memo is None and m._memo_off and m._memo_hits * 16 < m._memo_looks


def test_signatures_are_dropped_where_they_seldom_hit(monkeypatch):
    """Going deeper into nested lists repeats no signature: after SIGNATURE_PROBATION signature
    lookups the matcher stops computing them, keeps masks under their frontier, and these are
    found inside a long string (its frontier repeats); masks stay exact."""
    monkeypatch.setattr(cm, "MEMO_MIN_SECONDS", -1.0)
    monkeypatch.setattr(cm, "SIGNATURE_PROBATION", 8)
    grammar = 'start: "[" [item ("," item)*] "]"\nitem: STRING | start\nSTRING: /"[a-z]*"/\n'
    cg = sg.compile(sg.Grammar.from_lark(grammar), _vocab(), cache=False)
    m, ref = cg.matcher(), cg.matcher()
    text = b"[" * 12 + b'"' + b"a" * 12 + b'"' + b"]" * 12
    for i in range(len(text)):
        if i == 12:
            assert m._sig_off and m._sig_hits * 4 < m._sig_looks
            looks, hits = m._sig_looks, m._memo_hits
        assert np.array_equal(m.mask_words(), _fresh(ref, np.empty(cg.engine.words, np.uint32))), i
        assert m.advance_bytes(text[i:i + 1]) and ref.advance_bytes(text[i:i + 1])
    assert m._sig_looks == looks             # no signature computed since
    assert m._memo_hits >= hits + 10         # the string's masks came from the memo, by frontier


def test_compile_prefill_option():
    """``sg.compile(..., prefill=)``: 0 fills nothing ahead; more time fills the cache to its
    fixpoint on a background thread; masks are the same either way; bad values are refused."""
    from structgen.errors import OptionError

    vocab = _vocab()
    g = sg.Grammar.from_lark(CSV)
    none = sg.compile(g, vocab, cache=False, prefill=0).engine
    assert none.prefill_thread is None and none.cache.n_entries == 0
    full = sg.compile(g, vocab, cache=False, prefill=5.0).engine
    if full.prefill_thread is not None:
        full.prefill_thread.join(timeout=30)
    assert full.cache.prefilled and full.cache.n_entries > 0
    a, b = none.matcher(), full.matcher()
    for chunk in (b"# ab", b" cd\n", b"12 x.y,", b"ab\n"):
        assert np.array_equal(a.mask_words(), b.mask_words())
        assert a.advance_bytes(chunk) and b.advance_bytes(chunk)
    for bad in (-1, float("nan"), "1"):
        with pytest.raises(OptionError, match="prefill"):
            sg.compile(g, vocab, prefill=bad)


def test_matchers_share_the_start_mask():
    """A grammar's matchers compute the mask at the start once (``engine.start_mask``), whichever
    matcher comes there first, by a reset or a rollback too; a mask at any other point is not kept
    as it (the mask after "[a" differs from the start's, so keeping it would fail below)."""
    cg = sg.compile(sg.Grammar.from_lark(LIST), _vocab(), cache=False)
    e = cg.engine
    ref = cg.matcher()
    start = _fresh(ref, np.empty(e.words, np.uint32))
    m = cg.matcher()
    assert m.advance_bytes(b"[a")
    inside = m.mask_words().copy()
    assert e.start_mask is None and not np.array_equal(inside, start)
    m.rollback(1)
    assert np.array_equal(m.mask_words(), start)
    assert np.array_equal(e.start_mask, start)

    def not_again(*_):
        raise AssertionError("the start mask was computed again")

    for fresh in (cg.matcher(), m.fork()):
        fresh._compute_fresh = not_again
        assert np.array_equal(fresh.mask_words(), start)
        out = np.zeros(e.words, np.uint32)
        assert fresh.mask_job(out) is None and np.array_equal(out, start)   # the batch path too
    assert m.advance_bytes(b"[a") and np.array_equal(m.mask_words(), inside)


def test_new_matchers_start_with_the_buffers_earlier_ones_grew(monkeypatch):
    """A matcher whose waiter index, worklist or chart is too small computes its mask again after
    doubling it; the grammar keeps the sizes its matchers grew to, so the next matcher's masks run
    once each -- and are the same masks."""
    from structgen import grammars
    from structgen.cfg import mask as mk

    monkeypatch.setattr(cm, "INDEX_SLOTS", 4)
    calls = [0]
    kernel = mk.expand_mask_packed

    def counted(*a):
        calls[0] += 1
        return kernel(*a)

    monkeypatch.setattr(mk, "expand_mask_packed", counted)
    monkeypatch.setattr(cm, "MEMO_MIN_SECONDS", 1e9)   # every mask computed
    vocab = _vocab()
    cg = sg.compile(sg.Grammar.from_lark(grammars.load("sql")), vocab, cache=False)
    text = b"SELECT a, b FROM t WHERE (a = 1 AND b > 2) OR c < 3 ORDER BY a"
    runs = []
    for _ in range(2):
        m = cg.matcher()
        calls[0] = 0
        got = [m.mask_words().copy()]
        for i in range(0, len(text), 3):
            assert m.advance_bytes(text[i:i + 3])
            got.append(m.mask_words().copy())
        runs.append((calls[0], got))
    (first_calls, first), (second_calls, second) = runs
    assert cg.engine.buffer_sizes["wkeys"] > 4
    assert max(cg.engine.buffer_sizes.values()) <= cm.HINT_ROWS
    assert first_calls > len(first) - 1            # the first matcher grew its buffers, mask again
    assert second_calls == len(second) - 1         # (the start mask is shared: not computed again)
    assert all(np.array_equal(a, b) for a, b in zip(first, second))


def test_a_long_document_grows_the_chart_not_the_prediction_buffer():
    """Reading grows the chart; the prediction buffer, which only masks use, stays as it was
    (it used to double with every chart growth), and masks after the read stay exact."""
    cg = sg.compile(sg.Grammar.from_lark(LIST), _vocab(), cache=False)
    m = cg.matcher()
    rows, chart = m._predbuf.shape[0], m._items.shape[0]
    text = b"[" + b",".join(b"[ab, 12]" for _ in range(400)) + b", ["
    assert m.advance_bytes(text)
    assert m._items.shape[0] >= 8 * chart and m._predbuf.shape[0] == rows
    ref = cg.matcher()
    assert ref.advance_bytes(text)
    assert np.array_equal(m.mask_words(), _fresh(ref, np.empty(cg.engine.words, np.uint32)))


def test_a_new_matcher_builds_its_kernel_table_once(monkeypatch):
    """A matcher's stamps start as long as the grammar's cache pools are, so its first mask does
    not replace them (and rebuild the table of buffers it hands the kernels) after its first step."""
    from structgen import grammars

    monkeypatch.setattr(cm, "MEMO_MIN_SECONDS", 1e9)
    cg = sg.compile(sg.Grammar.from_lark(grammars.load("sql")), _vocab(), cache=False)
    m = cg.matcher()
    assert m.advance_bytes(b"SELECT a, b FROM t WHERE ")
    m.mask_words()                       # fills the cache: its pools grow past 256 rows
    assert cg.engine.cache.snap.ent_bl2.shape[0] > 256
    m2 = cg.matcher()
    assert m2.advance_bytes(b"SELECT ")
    table = m2._mpack
    assert table is not None
    m2.mask_words()
    assert m2._mpack is table
