"""The transformers LogitsProcessor under every decoding mode generate() offers,
with tiny random Llama models over real vocabularies."""
import re

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import structgen as sg
from structgen.integrations.transformers import StructgenLogitsProcessor
from tests.helpers import load_vocab

PATTERN = r"(\d{1,3}\.){3}\d{1,3}|[a-z]{2,6}@[a-z]{2,5}\.(com|net)"


def tiny_llama(vocab_size, seed=0, layers=1):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                      bos_token_id=None, eos_token_id=None, pad_token_id=0)
    model = LlamaForCausalLM(cfg).eval()
    return model


@pytest.fixture(scope="module")
def setup():
    vocab = load_vocab("llama3")
    cg = sg.compile(sg.Grammar.from_regex(PATTERN), vocab)
    model = tiny_llama(vocab.logits_width)
    return vocab, cg, model


def _outputs(vocab, seqs, prompt_len):
    eos = set(int(e) for e in vocab.eos_ids)
    outs = []
    for row in seqs.tolist():
        gen = row[prompt_len:]
        cut = next((i for i, t in enumerate(gen) if t in eos), None)
        assert cut is not None, "generation did not finish"
        outs.append(vocab.decode(gen[:cut]).decode())
    return outs


@pytest.mark.parametrize("mode", ["greedy", "sample", "beam"])
def test_generate_modes(setup, mode):
    vocab, cg, model = setup
    prompt = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    proc = StructgenLogitsProcessor(cg)
    kw = dict(max_new_tokens=40, logits_processor=[proc], eos_token_id=[int(e) for e in vocab.eos_ids],
              pad_token_id=int(vocab.eos_ids[0]), attention_mask=torch.ones_like(prompt))
    if mode == "greedy":
        kw.update(do_sample=False)
    elif mode == "sample":
        torch.manual_seed(0)
        kw.update(do_sample=True, temperature=1.5)
    else:
        kw.update(do_sample=False, num_beams=3, num_return_sequences=2)
    out = model.generate(prompt, **kw)
    texts = _outputs(vocab, out, prompt.shape[1])
    assert len(texts) == (4 if mode == "beam" else 2)
    for t in texts:
        assert re.fullmatch(PATTERN, t), t


def test_assisted_generation(setup):
    vocab, cg, model = setup
    assistant = tiny_llama(vocab.logits_width, seed=1)
    prompt = torch.tensor([[11, 12, 13]])
    proc = StructgenLogitsProcessor(cg)
    out = model.generate(prompt, assistant_model=assistant, logits_processor=[proc], max_new_tokens=40,
                         do_sample=False, eos_token_id=[int(e) for e in vocab.eos_ids],
                         pad_token_id=int(vocab.eos_ids[0]), attention_mask=torch.ones_like(prompt))
    (text,) = _outputs(vocab, out, prompt.shape[1])
    assert re.fullmatch(PATTERN, text), text


def test_processor_handles_prefixes_going_up_and_down(setup):
    vocab, cg, _ = setup
    proc = StructgenLogitsProcessor(cg, prompt_length=2)
    ids = vocab.encode("10.0.0.1")
    scores = torch.zeros(1, vocab.logits_width)
    seq = [7, 7] + ids
    masks = {}
    for k in list(range(len(seq) + 1)) + [5, 3, len(seq), 2]:
        if k < 2:
            continue
        out = proc(torch.tensor([seq[:k]]), scores.clone())
        fin = torch.isfinite(out[0])
        if k in masks:
            assert torch.equal(masks[k], fin)
        masks[k] = fin
        m = cg.matcher()
        m.advance_many(seq[2:k])
        bm = sg.allocate_bitmask(1, vocab.logits_width)
        m.fill_bitmask(bm, 0)
        assert torch.equal(sg.unpack_bitmask(bm, vocab.logits_width)[0], fin)
