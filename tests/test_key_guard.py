"""KeyGuardMatcher.fill_bitmask writes the guarded mask straight into the caller's row (the inner
matcher fills it, the guard clears it in place): it equals mask_words() at every prefix, for numpy and
torch bitmasks, any row, strided views, a bitmask swapped or resized between calls, both engines."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import structgen as sg
from structgen.runtime.key_guard import KeyGuardMatcher

SCHEMA = {"type": "object",
          "properties": {"alpha": {"type": "integer"}, "beta": {"type": "string"}, "gamma": {"type": "boolean"},
                         "nest": {"type": "object", "properties": {"alpha": {"type": "integer"},
                                                                   "al": {"type": "integer"}}}},
          "required": ["alpha"]}
INSTANCE = {"beta": "x", "gamma": True, "nest": {"al": 1, "alpha": 2, "alp": 3}, "alpha": 4, "al": 5, "b": 6}


@pytest.fixture(scope="module")
def llama3():
    from tests.helpers import load_vocab

    return load_vocab("llama3")


def _rows(bm):
    return bm.numpy() if isinstance(bm, torch.Tensor) else bm


@pytest.mark.parametrize("engine", ["dfa", "cfg"])
def test_fill_bitmask_equals_mask_words(engine, llama3):
    g = sg.Grammar.from_json_schema(SCHEMA, engine=engine, whitespace="flexible", property_order="any")
    cg = sg.compile(g, llama3, cache=False)
    assert cg.is_regular == (engine == "dfa")
    m = cg.matcher()
    assert isinstance(m, KeyGuardMatcher)
    w = (llama3.logits_width + 31) // 32
    bms = [torch.zeros((3, w), dtype=torch.int32), np.zeros((2, w), np.int32),
           torch.zeros((2, 2 * w), dtype=torch.int32)[:, ::2]]  # the last one strided
    cleared = 0
    toks = llama3.encode(json.dumps(INSTANCE))
    for i, t in enumerate(toks + [None]):
        ref = m.mask_words()
        inner = m.inner.mask_words() if hasattr(m.inner, "mask_words") else None
        if inner is not None and not np.array_equal(inner, ref):
            cleared += 1
        for k, bm in enumerate(bms):
            row = (i + k) % bm.shape[0]
            _rows(bm)[row] = -1
            m.fill_bitmask(bm, row)
            assert np.array_equal(np.asarray(_rows(bm)[row]).view(np.uint32), ref), (engine, i, k)
        if t is None:
            break
        assert m.advance(t)
    assert m.is_accepting()
    assert cleared >= 1 or engine == "dfa"  # the guard removed a duplicate key somewhere
    # a tensor given new storage: the kept view must not be reused
    bm = bms[0]
    m.fill_bitmask(bm, 0)
    bm.set_(torch.zeros((5, w), dtype=torch.int32))
    m.fill_bitmask(bm, 4)
    assert np.array_equal(bm[4].numpy().view(np.uint32), m.mask_words())


@pytest.mark.parametrize("engine", ["dfa", "cfg"])
def test_fill_bitmask_clears_duplicates(engine, llama3):
    """After ``{"beta": "x", "beta`` no token that starts with ``"`` is in the row (it would
    complete the optional key ``beta`` again), while the inner grammar allows some; ``x``
    (a key ``betax...``) stays."""
    g = sg.Grammar.from_json_schema(SCHEMA, engine=engine, whitespace="flexible", property_order="any")
    m = sg.compile(g, llama3, cache=False).matcher()
    assert m.advance_bytes(b'{"beta": "x", "beta')
    bm = sg.allocate_bitmask(2, llama3.logits_width)
    m.fill_bitmask(bm, 1)
    words = bm[1].numpy().view(np.uint32)
    inner = np.zeros((1, words.shape[0]), np.int32)
    m.inner.fill_bitmask(inner, 0)
    inner = inner[0].view(np.uint32)
    closing = [t for t in range(llama3.size) if llama3.token_bytes(t).startswith(b'"')]
    assert any((inner[t >> 5] >> (t & 31)) & 1 for t in closing)
    assert not any((words[t >> 5] >> (t & 31)) & 1 for t in closing)
    a = [t for t in range(llama3.size) if llama3.token_bytes(t) == b"x"][0]
    assert (words[a >> 5] >> (a & 31)) & 1
    assert np.array_equal(words, m.mask_words())


def _key_start_reference(inner, lead):
    """The key-start search spelled out: every layout in order, one probe each."""
    layouts = [b'"', b' "', b'\n"', b'\r\n"', b'\t"']
    layouts += [b"\n" + pad * n + b'"' for n in range(1, 65) for pad in (b" ", b"\t")]
    for ws in layouts:
        st = inner.byte_states_after(lead + ws)
        if st is not None:
            return st
    return None


@pytest.mark.parametrize("engine", ["dfa", "cfg"])
@pytest.mark.parametrize("layout", ["flexible", "pretty"])
def test_batched_probes_equal_single_probes(engine, layout, llama3):
    """byte_states_after_each answers as byte_states_after one by one (refusals, empty probes,
    repeats), and key_start_states_each finds the same states as the layout-by-layout search, at
    every prefix of an instance, for leads that open a key, cannot, or need an indentation."""
    from structgen.runtime.key_liveness import key_start_states_each

    g = sg.Grammar.from_json_schema(SCHEMA, engine=engine, whitespace="flexible", property_order="any")
    cg = sg.compile(g, llama3, cache=False)
    m = cg.matcher()
    assert isinstance(m, KeyGuardMatcher)
    inner = m.inner
    text = json.dumps(INSTANCE, indent=2 if layout == "pretty" else None).encode()
    probes = [b"", b",", b", ", b'"', b'x"', b"1,", b'",', b"}", b"]", b"\n", b",\n  ", b",\n\t", b"1", b"zz\"", b","]
    leads = [b",", b"", b"1,", b'x",', b"}", b"]]", b",\n", b"2"]
    seen_some = False
    for i in range(len(text) + 1):
        if i:
            assert inner.advance_bytes(text[i - 1:i])
        got = inner.byte_states_after_each(probes)
        want = [inner.byte_states_after(p) for p in probes]
        for p, a, b in zip(probes, got, want):
            assert (a is None) == (b is None), (text[:i], p)
            if a is not None:
                assert np.array_equal(np.asarray(a, np.int64), np.asarray(b, np.int64)), (text[:i], p)
        for lead, a in zip(leads, key_start_states_each(inner, leads)):
            b = _key_start_reference(inner, lead)
            assert (a is None) == (b is None), (text[:i], lead)
            if a is not None:
                seen_some = True
                assert np.array_equal(np.asarray(a, np.int64), np.asarray(b, np.int64)), (text[:i], lead)
    assert seen_some


def test_probe_answers_are_shared_inside_a_string_value(llama3, monkeypatch):
    """Inside a string of bounded length each character moves the lexer to a new state, so the
    frontier differs at every point; a probe that closes the string first reads only what follows
    the quote (:func:`structgen.cfg.earley.probe_keys`), so the grammar is stepped for it once, and
    every answer still equals a fresh single probe's -- also for probes that stay inside the string,
    for one that runs past ``maxLength``, and after a rollback."""
    from structgen.cfg import earley

    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 12}, "b": {"type": "integer"},
                                               "c": {"type": "string"}}, "additionalProperties": False}
    g = sg.Grammar.from_json_schema(schema, engine="cfg", whitespace="flexible", property_order="any")
    cg = sg.compile(g, llama3, cache=False)
    inner = cg.matcher().inner
    assert inner.advance_bytes(b'{"a": "')
    closing = [b'",', b'", "', b'"}', b'",\n  "', b'" ,"b', b'"']
    inside = [b"x", b"xy", b'x",', b"0123456789ab", b'0123456789abc"']
    stepped = []
    real = earley.step_each

    def counting(data, doff, *args):
        stepped.append(doff.shape[0] - 1)
        return real(data, doff, *args)

    monkeypatch.setattr(earley, "step_each", counting)
    text = b"hello world!"
    lead_keys = set()
    for i in range(len(text) + 1):
        if i:
            assert inner.advance_bytes(text[i - 1:i])
        # the closing leads read the same of every point (one key); a lead that may stay inside
        # the string has none, until the string is full (then it reads that it dies)
        lead_keys.add(inner.leads_key(closing))
        assert (inner.leads_key(closing + [b"x"]) is None) == (i < len(text))
        got = inner.byte_states_after_each(closing + inside)
        fresh = cg.matcher().inner
        assert fresh.advance_bytes(b'{"a": "' + text[:i])
        for p, a in zip(closing + inside, got):
            b = fresh.byte_states_after(p)
            assert (a is None) == (b is None), (text[:i], p)
            if a is not None:
                assert np.array_equal(np.asarray(a, np.int64), np.asarray(b, np.int64)), (text[:i], p)
    assert len(lead_keys) == 1 and None not in lead_keys
    # every closing probe answered once (at the first point); the inside ones at every point
    assert sum(stepped) <= len(closing) + (len(text) + 1) * len(inside)
    assert sum(stepped) >= (len(text) + 1) * 2
    inner.rollback(3)
    fresh = cg.matcher().inner
    assert fresh.advance_bytes(b'{"a": "' + text[:-3])
    for p, a in zip(closing + inside, inner.byte_states_after_each(closing + inside)):
        b = fresh.byte_states_after(p)
        assert (a is None) == (b is None), p
        if a is not None:
            assert np.array_equal(np.asarray(a, np.int64), np.asarray(b, np.int64)), p


# keys that llama3 tokens complete whole from between values or inside a value string
# (``","``, ``""``, ``":"``, ``"."``), nested objects, arrays, escapes and layouts
_DUP_DOCS = ['{"": 1, ",": "x", ":": [1, {"a": "b", "": 2}], "a": "\\"", "b": {"": ""}, ".": 0}',
             '{"a":"","":{"":"","a":[]},",":",",".":"."}',
             '{\n  "x": "\\u0041",\n  "y": {"x": 1},\n  "-": "-"\n}']


def _check_against_replay(cg, vocab, docs, encode=None):
    """At every prefix of each of ``docs``: the guarded mask equals the inner mask less the
    allowed tokens with a quote whose bytes, fed to a copy of the key tracker, complete a
    duplicate key.  Returns how many tokens that removed."""
    from structgen.runtime.json_tracker import DUPLICATE, OK, feed

    quoted = [t for t in range(vocab.size) if b'"' in vocab.token_bytes(t) and vocab.is_normal[t]]
    off, data = vocab.token_offsets, vocab.token_data
    removed = 0
    for doc in docs:
        m = cg.matcher()
        toks = (encode or vocab.encode)(doc)
        for i, t in enumerate(toks):
            got = m.mask_words()
            want = m.inner.mask_words().copy()
            for q in quoted:
                if not (want[q >> 5] >> (q & 31)) & 1:
                    continue
                tr = m._tr.copy()
                st = feed(data, off[q], off[q + 1], tr.hdr, tr.frames, tr.kbuf, tr.kp_off, tr.kp_len, tr.kp_prev,
                          tr.kp_hash, tr.kp_data)
                assert st in (OK, DUPLICATE)
                if st == DUPLICATE:
                    want[q >> 5] &= ~np.uint32(1 << (q & 31))
                    removed += 1
            assert np.array_equal(got, want), (doc, i, vocab.decode(toks[:i]))
            assert m.advance(t)
    return removed


@pytest.mark.parametrize("engine", ["dfa", "cfg"])
def test_guard_equals_replaying_every_token(engine, llama3):
    """The per-start key tables and the quote-count shortcuts of clear_duplicates change nothing
    (llama3: keys that tokens complete whole, such as ``","``, ``""``, ``":"``)."""
    g = sg.Grammar.from_json_schema({"type": "object"}, engine=engine, whitespace="flexible",
                                    property_order="any")
    assert _check_against_replay(sg.compile(g, llama3, cache=False), llama3, _DUP_DOCS) > 20


def test_guard_tokens_that_complete_two_keys():
    """A vocabulary whose tokens end the key in progress and complete another one (three quotes:
    ``a":1,"a"``) or complete two keys between values: the shortcuts still equal the replay."""
    from structgen.vocab import Vocabulary

    pieces = [bytes([b]) for b in range(0x20, 0x7F)] + [b'a":1,"a"', b'":1,"a"', b'","', b'""', b'"a":1,"a"',
                                                          b',"a":"","b"', b'"b":{"a', b'\\\\"', b'\\\\":1,"']
    vocab = Vocabulary.from_bytes(pieces + [None], eos_ids=[len(pieces)])
    docs = ['{"a":1,"b":2}', '{"b":{"a":1,"ab":""},"":0}', '{"x\\\\":1,"a":[{"a":1}]}']
    for engine in ("dfa", "cfg"):
        g = sg.Grammar.from_json_schema({"type": "object"}, engine=engine, whitespace="flexible",
                                        property_order="any")
        by_byte = lambda doc: [b - 0x20 for b in doc.encode()]  # noqa: E731 (a token per byte)
        assert _check_against_replay(sg.compile(g, vocab, cache=False), vocab, docs, by_byte) > 5


