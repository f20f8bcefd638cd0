"""transformers' DiffusionGemmaForBlockDiffusion, through its own ``generate``, kept valid by
sg.diffusion.DiffusionLogitsProcessor.

A tiny random DiffusionGemma (hidden 32, one layer, two experts, tiny vision tower) over the GPT-2
vocabulary; 200 outputs per constraint (a regex, a non-recursive JSON Schema spanning two canvases,
choices), half MAP and half exact samples, must all fullmatch / validate; the model without the
processor is printed beside.  The model's own per-step sampling over V dominates the run time, so
canvases are short and each takes one denoising step (the multi-step case runs on a few rows).
"""
from __future__ import annotations

import json
import re

import jsonschema
import pytest
import torch

import structgen as sg
import structgen.diffusion as sgd
from tests.helpers import TOKENIZERS_DIR, tiny_diffusion_gemma

transformers = pytest.importorskip("transformers")
from transformers import LogitsProcessorList  # noqa: E402

EOS = 50256
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9},
                                           "ok": {"type": "boolean"}},
          "required": ["n", "ok"], "additionalProperties": False}          # two canvases
SMALL = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}},
         "required": ["n"], "additionalProperties": False}               # one canvas
EMAIL = r"[a-z]{2,6}@[a-z]{2,5}\.(com|org)"
CHOICES = ["red", "green", "blue", "light yellow"]


def _valid_json(s, schema=SCHEMA):
    try:
        jsonschema.validate(json.loads(s), schema)
        return True
    except Exception:
        return False


CASES = {  # grammar, new tokens (one canvas), check
    "regex": (lambda: sg.Grammar.from_regex(EMAIL), 6, lambda s: re.fullmatch(EMAIL, s) is not None),
    "json": (lambda: sg.Grammar.from_json_schema(SMALL, engine="dfa"), 6, lambda s: _valid_json(s, SMALL)),
    "choices": (lambda: sg.Grammar.choice(CHOICES), 6, lambda s: s in CHOICES),
}


@pytest.fixture(scope="module")
def setup():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(TOKENIZERS_DIR / "gpt2"), local_files_only=True)
    tok.padding_side = "left"
    tok.pad_token = tok.eos_token
    model = tiny_diffusion_gemma(len(tok), 6, EOS)
    return model, tok, sg.Vocabulary.from_tokenizer(tok)


def _texts(out, prompt_len, vocab):
    texts = []
    for s in out.sequences[:, prompt_len:].tolist():
        cut = next((i for i, t in enumerate(s) if t == EOS), len(s))
        texts.append(vocab.decode(s[:cut]).decode("utf-8", errors="replace"))
    return texts


def _run(model, tok, prompts, new, processor=None, steps=1):
    enc = tok(prompts, return_tensors="pt", padding=True)
    kw = {"logits_processor": LogitsProcessorList([processor])} if processor is not None else {}
    torch.manual_seed(len(prompts))
    return model.generate(enc.input_ids, attention_mask=enc.attention_mask, max_new_tokens=new,
                          max_denoising_steps=steps, **kw), enc.input_ids.shape[1]


@pytest.fixture(scope="module")
def unconstrained(setup):
    model, tok, vocab = setup
    out, n = _run(model, tok, [f"Q{i}:" for i in range(50)], 6)
    return _texts(out, n, vocab)


@pytest.mark.parametrize("name", list(CASES))
def test_diffusion_gemma_generate_stays_valid(setup, unconstrained, name):
    model, tok, vocab = setup
    grammar, new, ok = CASES[name]
    cg = sg.compile(grammar(), vocab)
    texts = []
    for j, method in enumerate(["map", "map", "sample", "sample"]):
        proc = sgd.DiffusionLogitsProcessor(cg, method=method, max_new_tokens=new)
        out, n = _run(model, tok, [f"Q{i}:" for i in range(50 * j, 50 * j + 50)], new, proc)
        assert proc.calls == 1
        texts += _texts(out, n, vocab)
    assert len(texts) == 200
    bad = [t for t in texts if not ok(t)]
    assert not bad, f"{len(bad)} invalid outputs, e.g. {bad[:3]}"
    free = sum(ok(t) for t in unconstrained)
    print(f"\nDiffusionGemma {name}: constrained valid 200/200; unconstrained valid {free}/{len(unconstrained)}")
    assert free < len(unconstrained)


def test_two_canvases_several_steps_and_reuse_after_reset(setup):
    """The state carries over from canvas to canvas; the last canvas ends accepting."""
    model, tok, vocab = setup
    cg = sg.compile(sg.Grammar.from_json_schema(SCHEMA, engine="dfa"), vocab)
    for method in ("map", "sample"):
        proc = sgd.DiffusionLogitsProcessor(cg, max_new_tokens=12, method=method)
        for prompts in ([f"Q{i}:" for i in range(6)], ["Another one:", "x", "A longer prompt than that:"]):
            proc.reset()
            out, n = _run(model, tok, prompts, 12, proc, steps=3)
            texts = _texts(out, n, vocab)
            assert all(_valid_json(t) for t in texts), texts
        assert proc.calls >= 2 * 3     # up to 3 steps per canvas (a batch stops once every row has ended)


def test_processor_refuses_grammars_it_cannot_follow(setup):
    _, _, vocab = setup
    cfg = sg.compile(sg.Grammar.from_lark('start: "(" start ")" | "()"'), vocab)
    with pytest.raises(sg.Unsupported):
        sgd.DiffusionLogitsProcessor(cfg)
    with pytest.raises(sg.OptionError):
        sgd.DiffusionLogitsProcessor(sg.compile(sg.Grammar.from_regex("a+"), vocab), method="greedy")
