"""sg.diffusion.generate with a real model class and a real vocabulary.

A BertForMaskedLM with random weights (hidden 32, one layer) over the GPT-2 vocabulary plus an
added ``<|mask|>`` token drives the LLaDA-style sampler: 200 outputs per constraint (a regex, a
non-recursive JSON Schema, choices) must all fullmatch / validate, across both methods and all
three unmasking rules; the same model unconstrained almost never produces a valid output (its
share is printed).  To keep the test fast the model computes its LM head on the canvas only (the
sampler accepts ``[B, length, V]`` logits); one call also uses the plain model (full logits,
left-padded prompts of different lengths).
"""
from __future__ import annotations

import json
import re

import jsonschema
import numpy as np
import pytest
import torch

import structgen as sg
import structgen.diffusion as sgd
from tests.helpers import TOKENIZERS_DIR

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"},
                                           "n": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["ok", "n"], "additionalProperties": False}
EMAIL = r"[a-z]{2,6}@[a-z]{2,5}\.(com|org)"
CHOICES = ["red", "green", "blue", "light yellow"]


def _valid_json(s):
    try:
        jsonschema.validate(json.loads(s), SCHEMA)
        return True
    except Exception:
        return False


CASES = {
    "regex": (dict(regex=EMAIL), 8, lambda s: re.fullmatch(EMAIL, s) is not None),
    "json": (dict(schema=SCHEMA), 12, _valid_json),
    "choices": (dict(choices=CHOICES), 8, lambda s: s in CHOICES),
}
#: (method, unmask, temperature) per chunk of 50 prompts
RUNS = [("map", "confidence", 0.0), ("map", "marginal", 0.0), ("sample", "random", 1.0), ("sample", "confidence", 1.0)]


class CanvasBert(torch.nn.Module):
    """A BertForMaskedLM whose LM head runs on the last ``length`` positions only."""

    def __init__(self, mlm, length: int):
        super().__init__()
        self.mlm, self.length = mlm, length

    def forward(self, input_ids, attention_mask=None):
        h = self.mlm.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.mlm.cls(h[:, -self.length:])


@pytest.fixture(scope="module")
def setup():
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    tok = AutoTokenizer.from_pretrained(str(TOKENIZERS_DIR / "gpt2"), local_files_only=True)
    tok.add_special_tokens({"mask_token": "<|mask|>"})
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64)
    return BertForMaskedLM(cfg).eval(), tok


@pytest.fixture(scope="module")
def unconstrained(setup):
    mlm, tok = setup
    out = sgd.generate(CanvasBert(mlm, 12), tok, [f"Q{i}:" for i in range(100)], length=12, block_length=6,
                       steps=4, method="sample", temperature=1.0, seed=0)
    return [o.text for o in out]


@pytest.mark.parametrize("name", list(CASES))
def test_every_output_is_valid(setup, unconstrained, name):
    mlm, tok = setup
    kw, length, ok = CASES[name]
    model = CanvasBert(mlm, length)
    outs = []
    for j, (method, unmask, temperature) in enumerate(RUNS):
        prompts = [f"Q{i}:" for i in range(50 * j, 50 * j + 50)]
        outs += sgd.generate(model, tok, prompts, **kw, length=length, block_length=length // 2, steps=4,
                             method=method, unmask=unmask, temperature=temperature, seed=j)
    assert len(outs) == 200
    bad = [o.text for o in outs if not ok(o.text)]
    assert not bad, f"{len(bad)} invalid outputs, e.g. {bad[:3]}"
    assert all(o.complete and o.ok for o in outs)
    free = sum(ok(t) for t in unconstrained)
    print(f"\n{name}: constrained valid 200/200; unconstrained valid {free}/{len(unconstrained)}")
    assert free < len(unconstrained)       # the constraint is what makes them valid


def test_result_reports_steps_timings_and_kept_mass(setup):
    mlm, tok = setup
    out = sgd.generate(CanvasBert(mlm, 8), tok, "Q:", regex=EMAIL, length=8, block_length=4, steps=4)
    assert isinstance(out, sg.GenerationResult)
    assert out.forward_passes == 4 and len(out.log_kept_mass) == 4
    assert all(z <= 1e-9 for z in out.log_kept_mass) and out.projection_tax > 0
    assert len(out.timings["step_forward"]) == len(out.timings["step_dp"]) == 4
    assert re.fullmatch(EMAIL, out.value)


def test_plain_model_with_left_padded_prompts(setup):
    mlm, tok = setup
    prompts = ["Q:", "A much longer prompt than the first one:", "Mid prompt here:"]
    outs = sgd.generate(mlm, tok, prompts, choices=CHOICES, length=4, block_length=4, steps=2)
    assert [o.text in CHOICES for o in outs] == [True] * 3


def test_bad_options_raise_structgen_errors(setup):
    mlm, tok = setup
    model = CanvasBert(mlm, 8)
    with pytest.raises(sg.Unsupported, match="'map'"):
        sgd.generate(model, tok, "Q:", grammar='start: "a"', length=8, block_length=8)
    with pytest.raises(sg.Unsupported, match="lookahead"):
        if "lookahead" in sgd.sampler.METHODS:
            raise sg.Unsupported("lookahead registered by structgen.diffusion.lookahead")
        sgd.generate(model, tok, "Q:", regex="a", length=8, block_length=8, method="lookahead")
    with pytest.raises(sg.OptionError, match="multiple of block_length"):
        sgd.generate(model, tok, "Q:", regex="a", length=8, block_length=3)
    with pytest.raises(sg.OptionError, match="unmask"):
        sgd.generate(model, tok, "Q:", regex="a", length=8, block_length=8, unmask="best")
    from transformers import AutoTokenizer

    plain = AutoTokenizer.from_pretrained(str(TOKENIZERS_DIR / "gpt2"), local_files_only=True)
    with pytest.raises(sg.OptionError, match="mask_token_id"):
        sgd.generate(model, plain, "Q:", regex="a", length=8, block_length=8)


def test_register_method_hook(setup):
    """A registered method sees BlockStep and decides the picked tokens."""
    mlm, tok = setup
    seen = []

    def first_allowed(st: sgd.BlockStep):
        seen.append(st.pick.sum())
        tokens, _ = sgd.dingo(st.log_probs, st.compiled, masked=(st.block < 0) & ~st.pick,
                              fixed=np.where(st.block >= 0, st.block, -1), state=st.states, final=st.final,
                              eos_ids=st.eos_ids, tail_holes=st.tail)
        return tokens, np.full(st.log_probs.shape[0], np.nan)

    sgd.register_method("test-first", first_allowed)
    try:
        out = sgd.generate(CanvasBert(mlm, 8), tok, "Q:", choices=CHOICES, length=8, block_length=8, steps=2,
                           method="test-first")
    finally:
        sgd.sampler.METHODS.pop("test-first", None)
    assert out.text in CHOICES and len(seen) == 2
