"""Arguments checked where they enter (issue 14): token ids must be integers on every matcher kind,
bitmasks and logits of the wrong dtype / shape / device / batch are refused with the expected ones
named, generate() options out of their domain fail before any work, model=None with a tokenizer
does not load the demo model, an unknown shipped grammar name lists the available ones."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import structgen as sg
from structgen.decoding.autoregressive import Row, decode, sample
from structgen.integrations.transformers import StructgenLogitsProcessor
from structgen.runtime.checks import check_bitmask, check_tokens
from structgen.runtime.key_guard import KeyGuardMatcher

PIECES = [bytes([b]) for b in range(256)] + [b'{"', b'":', b'ab', b'12', b'true', b'"a"']
EOS = len(PIECES)
SCHEMA = {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "integer"}},
          "required": ["a"], "additionalProperties": False}
KINDS = {
    "regular": lambda: sg.Grammar.from_regex(r"[ab]{1,4}[0-9]*"),
    "cfg": lambda: sg.Grammar.from_lark('start: "[" [start ("," start)*] "]" | /[ab]+/\n'),
    "guard": lambda: sg.Grammar.from_json_schema(SCHEMA, property_order="any"),
}


@pytest.fixture(scope="module")
def tiny():
    return sg.Vocabulary.from_bytes(PIECES + [b""], eos_ids=[EOS])


@pytest.fixture(scope="module")
def compiled(tiny):
    return {k: sg.compile(f(), tiny) for k, f in KINDS.items()}


def test_the_kinds_are_the_three_matchers(compiled):
    names = {k: type(c.matcher()).__name__ for k, c in compiled.items()}
    assert names["regular"] == "TokenDFAMatcher" and names["cfg"] == "CFGMatcher"
    assert isinstance(compiled["guard"].matcher(), KeyGuardMatcher)


# ----------------------------------------------------------------------------- token ids
NOT_IDS = [1.5, 97.0, np.float64(97.0), np.float32(2.0), True, np.bool_(False), "a", None, b"a",
           torch.tensor(97.0), torch.tensor(True)]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("bad", NOT_IDS, ids=repr)
def test_advance_refuses_non_integers(compiled, kind, bad):
    m = compiled[kind].matcher()
    if kind == "guard":
        assert m.advance(ord("{"))
    before = (m.accepted_tokens(), m.snapshot())
    with pytest.raises(sg.TokenError, match="integer"):
        m.advance(bad)
    assert (m.accepted_tokens(), m.snapshot()) == before


@pytest.mark.parametrize("kind", list(KINDS))
def test_sequences_of_non_integers_are_refused_before_any_step(compiled, kind, tiny):
    first = ord("{") if kind == "guard" else ord("a") if kind == "regular" else ord("[")
    for bad in ([first, first + 0.7], [first + 0.7], np.array([first, 98], np.float64), [first, True],
                torch.tensor([first, 98], dtype=torch.float32), [first, None], np.array([[first]]), "ab"):
        for method in ("validate", "advance_many"):
            m = compiled[kind].matcher()
            with pytest.raises(sg.TokenError):
                getattr(m, method)(bad)
            assert m.accepted_tokens() == 0, (method, bad)
    # integers of every flavour are fine, and the same
    m = compiled[kind].matcher()
    for good in ([first], np.array([first], np.int32), np.array([first], np.uint16), torch.tensor([first]),
                 (t for t in [first]), [np.int64(first)], []):
        assert m.validate(good) == (0 if isinstance(good, list) and not good else 1)
    assert m.advance(np.int32(first)) and m.advance_many(np.zeros(0, np.int64)) == 0


@pytest.mark.parametrize("kind", list(KINDS))
def test_integers_out_of_the_vocabulary_are_rejected_not_errors(compiled, kind, tiny):
    m = compiled[kind].matcher()
    for t in (-1, -2 ** 40, tiny.logits_width, tiny.logits_width + 5, 2 ** 70, np.uint64(2 ** 63 + 1)):
        assert m.advance(t) is False
        assert m.validate([t]) == 0 and m.advance_many([t]) == 0
    assert m.validate(np.array([2 ** 63 + 1], np.uint64)) == 0
    assert m.accepted_tokens() == 0


def test_check_tokens_keeps_int64_ids():
    assert check_tokens([1, 2, 3]).dtype == np.int64
    assert check_tokens(np.array([7], np.uint8)).tolist() == [7]
    assert check_tokens([2 ** 70, 3]).tolist() == [-1, 3]


# ----------------------------------------------------------------------------- bitmasks
@pytest.mark.parametrize("kind", list(KINDS))
def test_fill_bitmask_refuses_wrong_dtype_shape_and_row(compiled, kind, tiny):
    m = compiled[kind].matcher()
    w = (tiny.logits_width + 31) // 32
    bad = [np.zeros((1, w), np.uint8), np.zeros((1, w * 4), np.uint8), np.zeros((1, w), np.int64),
           np.zeros((1, w), np.uint32), torch.zeros((1, w), dtype=torch.int64), np.zeros((1, w + 1), np.int32),
           np.zeros((1, w - 1), np.int32), np.zeros(w, np.int32), np.zeros((1, 1, w), np.int32), [[0] * w]]
    for bm in bad:
        keep = bm.copy() if isinstance(bm, np.ndarray) else bm
        with pytest.raises(sg.BitmaskError, match=rf"int32 bitmask of shape \(.*, {w}\)"):
            m.fill_bitmask(bm, 0)
        if isinstance(bm, np.ndarray):
            assert np.array_equal(bm, keep), "a refused bitmask was written"
    good = np.full((3, w), -1, np.int32)
    for row in (None, 3, -1, 1.0, True, "0"):
        with pytest.raises(sg.BitmaskError, match="row"):
            m.fill_bitmask(good, row)
        assert (good == -1).all(), f"row={row!r} wrote into the bitmask"
    m.fill_bitmask(good, np.int64(1))
    assert (good[0] == -1).all() and (good[2] == -1).all() and not (good[1] == -1).all()
    t = torch.full((2, w), -1, dtype=torch.int32)
    m.fill_bitmask(t, 1)
    assert np.array_equal(t[1].numpy(), good[1])


def test_check_bitmask_names_expected_shape_and_dtype():
    check_bitmask(np.zeros((2, 4), np.int32), 100, rows=2)
    check_bitmask(torch.zeros((2, 4), dtype=torch.int32), None)
    with pytest.raises(sg.BitmaskError, match=r"int32 bitmask of shape \(>= 3, 4\) for V = 100 tokens.*uint8"):
        check_bitmask(np.zeros((2, 4), np.uint8), 100, rows=3)
    with pytest.raises(TypeError):  # BitmaskError is a TypeError and a ValueError too
        check_bitmask("x", 100)
    with pytest.raises(ValueError):
        check_bitmask(np.zeros((2, 5), np.int32), 100)


def test_apply_bitmask_refuses_broadcast_dtype_and_width():
    v = 100
    bm = sg.allocate_bitmask(1, v)
    bm[0] = 0
    bm[0, 0] = 1
    with pytest.raises(sg.BitmaskError, match=r"shape \(2, <= 4\)"):
        sg.apply_bitmask_(torch.zeros(2, v), bm)   # one mask row is not reused for two logits rows
    for bad in (bm.to(torch.int64), bm.to(torch.uint8), bm.numpy(), torch.zeros(1, 5, dtype=torch.int32),
                torch.zeros(1, 0, dtype=torch.int32), bm[0].unsqueeze(0).unsqueeze(0)):
        with pytest.raises(sg.BitmaskError, match="int32"):
            sg.apply_bitmask_(torch.zeros(1, v), bad)
    for logits in (torch.zeros(1, v, dtype=torch.int64), torch.zeros(1, 1, v), np.zeros((1, v), np.float32)):
        with pytest.raises(sg.BitmaskError, match="floating"):
            sg.apply_bitmask_(logits, bm)
    lg = torch.zeros(1, v)
    with pytest.raises(sg.BitmaskError):
        sg.apply_bitmask_(lg, bm.to(torch.int64))
    assert (lg == 0).all(), "a refused call modified the logits"
    out = sg.apply_bitmask_(torch.zeros(1, v), bm)
    assert torch.isfinite(out[0]).nonzero().flatten().tolist() == [0]
    one = sg.apply_bitmask_(torch.zeros(v), bm)               # [V] logits with a one-row mask
    assert one.shape == (v,) and torch.isfinite(one).sum() == 1
    two = sg.apply_bitmask_(torch.zeros(2, v), sg.allocate_bitmask(2, v).index_copy_(0, torch.tensor([1]), bm))
    assert torch.isfinite(two[0]).all() and torch.isfinite(two[1]).sum() == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_apply_bitmask_refuses_another_device():
    with pytest.raises(sg.BitmaskError, match="cuda"):
        sg.apply_bitmask_(torch.zeros(1, 100, device="cuda"), sg.allocate_bitmask(1, 100))


# ----------------------------------------------------------------------------- generate()
def tiny_model(v):
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=v, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128,
                      bos_token_id=None, eos_token_id=None, pad_token_id=0)
    return LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def gpt2():
    from tests.helpers import load_tokenizer, load_vocab

    vocab = load_vocab("gpt2")
    model = tiny_model(vocab.logits_width)
    return model, load_tokenizer("gpt2"), sg.Generator(model, load_tokenizer("gpt2"), vocab=vocab)


BAD_OPTIONS = [("temperature", math.nan), ("temperature", math.inf), ("temperature", -1.0), ("temperature", "1"),
               ("temperature", True), ("top_p", 0.0), ("top_p", 1.5), ("top_p", -0.1), ("top_p", math.nan),
               ("top_k", -1), ("top_k", 2.5), ("max_new_tokens", None), ("max_new_tokens", 2.5),
               ("max_new_tokens", 0), ("max_new_tokens", -3), ("max_new_tokens", "4"), ("max_new_tokens", True),
               ("seed", "abc"), ("seed", 1.5), ("seed", 2 ** 64), ("fast_forward", "yes"), ("chat", 1),
               ("system", 5)]


@pytest.mark.parametrize("name,value", BAD_OPTIONS, ids=[f"{n}={v!r}" for n, v in BAD_OPTIONS])
def test_generate_options_are_checked_up_front(gpt2, name, value, monkeypatch):
    model, tok, gen = gpt2
    calls = []
    monkeypatch.setattr(gen, "compile", lambda g: calls.append(g))  # nothing may be compiled (or run) first
    with pytest.raises(sg.OptionError, match=name):
        gen("x", regex="[ab]{2}", **{name: value})
    with pytest.raises(sg.OptionError, match=name):
        sg.Generator(model, tok, vocab=gen.vocab, **{name: value})
    assert calls == []


def test_generate_with_good_options_runs(gpt2):
    model, tok, gen = gpt2
    r = sg.generate(model, tok, "x", regex="[ab]{2}", temperature=0.7, top_p=0.9, top_k=5, seed=np.int64(3),
                    max_new_tokens=np.int32(4))
    assert len(r.value) == 2
    assert gen("x", regex="a", temperature=None, top_p=None, top_k=None).value == "a"


def test_decode_and_sample_check_their_options(gpt2):
    model, tok, gen = gpt2
    with pytest.raises(sg.OptionError, match="max_new_tokens"):
        decode(model, [Row([1])], gen.vocab, max_new_tokens=2.5)
    with pytest.raises(sg.OptionError, match="temperature"):
        sample(torch.zeros(1, 5), temperature=math.nan)
    with pytest.raises(sg.OptionError, match="top_p"):
        sample(torch.zeros(1, 5), temperature=1.0, top_p=0)
    assert sample(torch.tensor([[0.0, 1.0]])).tolist() == [1]


def test_model_none_with_a_tokenizer_does_not_load_the_demo(gpt2, monkeypatch):
    import structgen.api as api

    def no_demo():
        raise AssertionError("the demo model was loaded")

    monkeypatch.setattr(api, "load_demo", no_demo)
    model, tok, gen = gpt2
    with pytest.raises(sg.OptionError, match="demo model"):
        sg.generate(None, tok, "x", regex="a")
    with pytest.raises(sg.OptionError, match="demo model"):
        sg.Generator(None, tok)


def test_logits_processor_checks_its_arguments(compiled):
    with pytest.raises(sg.OptionError, match="CompiledGrammar"):
        StructgenLogitsProcessor("not compiled")
    with pytest.raises(sg.OptionError, match="CompiledGrammar"):
        StructgenLogitsProcessor([])
    with pytest.raises(sg.OptionError, match="prompt_length"):
        StructgenLogitsProcessor(compiled["regular"], prompt_length=-1)
    p = StructgenLogitsProcessor(compiled["regular"])
    with pytest.raises(sg.OptionError, match="same batch"):
        p(torch.zeros((2, 3), dtype=torch.long), torch.zeros(1, compiled["regular"].vocab.logits_width))


# ----------------------------------------------------------------------------- shipped grammars
def test_unknown_shipped_grammar_names_the_available_ones():
    for name in ("nope", "../grammars/json", "json.lark", "", None, 3):
        with pytest.raises(sg.GrammarNotFound, match=r"available: arithmetic, .*json") as e:
            sg.grammars.load(name)
        assert isinstance(e.value, KeyError) and isinstance(e.value, sg.StructgenError)
        assert not str(e.value).startswith("'")
    assert "start" in sg.grammars.load("json")


def test_tiny_temperature_is_greedy_not_nan():
    """temperature=1e-300 (legal: finite and > 0) must not overflow into NaN probabilities."""
    import torch as _torch

    from structgen.decoding.autoregressive import sample, sampling_probs
    z = _torch.tensor([[0.5, -0.2, float("-inf"), 0.1]])
    p = sampling_probs(z, 1e-300)
    assert _torch.isfinite(p).all() and float(p[0, 0]) == 1.0
    assert int(sample(z, 1e-300, top_p=1e-300)[0]) == 0
