"""sg.beam_search over an ItemIndex with a tiny random Llama: with enough beams it returns exactly
the top items of exhaustive scoring (sum of log-probs incl. EOS, full forward per item); with
few beams it equals a reference dict-trie beam search (pure Python, full recompute) token for
token; every beam is an item; batches of prompts of different lengths; length_penalty."""
from __future__ import annotations

import math
import random

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import structgen as sg

V = 12
EOS = V - 1


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128,
                      bos_token_id=None, eos_token_id=None, pad_token_id=0)
    m = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():   # sharper distributions than a fresh init, so beams really differ
        m.lm_head.weight.mul_(8.0)
    return m


def random_items(rng, n, max_len=5):
    items = []
    for _ in range(n):
        if items and rng.random() < 0.6:
            base = rng.choice(items)
            it = base[:rng.randint(0, len(base))]
            it += [rng.randrange(EOS) for _ in range(rng.randint(0 if it else 1, max_len - len(it)))]
        else:
            it = [rng.randrange(EOS) for _ in range(rng.randint(1, max_len))]
        items.append(it)
    return sorted({tuple(i) for i in items})


def logprobs(model, ids):
    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([ids])).logits[0, -1].float(), -1)


def exhaustive(model, prompt, items):
    out = []
    for it in items:
        s = 0.0
        seq = list(prompt)
        for t in list(it) + [EOS]:
            s += float(logprobs(model, seq)[t])
            seq.append(t)
        out.append((s, list(it)))
    out.sort(key=lambda x: -x[0])
    return out


def reference_beam(model, prompt, items, K):
    """Dict-trie beam search, full recompute: the same rules as sg.beam_search."""
    trie = {}
    for it in items:
        node = trie
        for t in it:
            node = node.setdefault(t, {})
        node[None] = True
    beams = [(0.0, [], trie)]
    finished = []
    while beams:
        cands = []
        for sc, seq, node in beams:
            lp = logprobs(model, list(prompt) + seq)
            if None in node:
                finished.append((sc + float(lp[EOS]), seq))
            for t, ch in node.items():
                if t is not None:
                    cands.append((sc + float(lp[t]), seq + [t], ch))
        cands.sort(key=lambda x: -x[0])
        beams = cands[:K]
    finished.sort(key=lambda x: -x[0])
    return finished[:K]


def max_prefixes(items):
    per_depth = {}
    for it in items:
        for k in range(len(it) + 1):
            per_depth.setdefault(k, set()).add(tuple(it[:k]))
    return max(len(v) for v in per_depth.values())


@pytest.mark.parametrize("seed", range(4))
def test_enough_beams_is_exhaustive(model, seed):
    rng = random.Random(seed)
    items = random_items(rng, 14)
    ix = sg.ItemIndex.from_token_ids(items, V, eos_id=EOS)
    K = max_prefixes(items)
    prompt = [rng.randrange(EOS) for _ in range(3)]
    out = sg.beam_search(model, prompt, ix, num_beams=K)
    ref = exhaustive(model, prompt, items)[:K]
    assert out.sequences == [s for _, s in ref]
    for a, (b, _) in zip(out.scores, ref):
        assert math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-4)


@pytest.mark.parametrize("seed", range(4))
def test_few_beams_equal_reference_dict_trie_search(model, seed):
    rng = random.Random(50 + seed)
    items = random_items(rng, 30, 6)
    ix = sg.ItemIndex.from_token_ids(items, V, eos_id=EOS)
    prompt = [rng.randrange(EOS) for _ in range(2)]
    for K in (1, 2, 3):
        out = sg.beam_search(model, prompt, ix, num_beams=K)
        ref = reference_beam(model, prompt, items, K)
        assert out.sequences == [s for _, s in ref], K
        assert all(tuple(s) in set(items) for s in out.sequences)


def test_batch_of_prompts_matches_single_runs(model):
    rng = random.Random(9)
    items = random_items(rng, 25)
    ix = sg.ItemIndex.from_token_ids(items, V, eos_id=EOS).to("cpu")
    prompts = [[1, 2, 3, 4], [5], [7, 7]]
    out = sg.beam_search(model, prompts, ix, num_beams=3)
    for p, seqs, scs in zip(prompts, out.sequences, out.scores):
        one = sg.beam_search(model, p, ix, num_beams=3)
        assert seqs == one.sequences
        assert all(math.isclose(a, b, abs_tol=1e-4) for a, b in zip(scs, one.scores))
        assert scs == sorted(scs, reverse=True)


def test_length_penalty_and_max_new_tokens(model):
    items = [(1,), (1, 2), (1, 2, 3, 4), (5, 6, 7)]
    ix = sg.ItemIndex.from_token_ids(items, V, eos_id=EOS)
    out = sg.beam_search(model, [3], ix, num_beams=4, length_penalty=1.0)
    ex = exhaustive(model, [3], items)
    want = sorted(((s / (len(it) + 1), it) for s, it in ex), key=lambda x: -x[0])
    assert out.sequences == [it for _, it in want]
    short = sg.beam_search(model, [3], ix, num_beams=4, max_new_tokens=3)
    assert sorted(map(tuple, short.sequences)) == [(1,), (1, 2)]


def test_subset_beams_are_allowed_items_and_exhaustive(model):
    rng = random.Random(21)
    items = random_items(rng, 30)
    ix = sg.ItemIndex.from_token_ids(items, V, eos_id=EOS)
    distinct = [tuple(x) for x in ix.items()]
    keep = [i for i in range(len(distinct)) if i % 2 == 1]
    allowed = [distinct[i] for i in keep]
    K = max_prefixes(allowed)
    out = sg.beam_search(model, [4, 2], ix, num_beams=K, subset=keep)
    ref = exhaustive(model, [4, 2], allowed)[:K]
    assert out.sequences == [s for _, s in ref]
    out2 = sg.beam_search(model, [4, 2], ix.subset(keep), num_beams=2)
    assert all(tuple(s) in set(allowed) for s in out2.sequences)


def test_tokenizer_and_prompt_text():
    from tests.helpers import load_tokenizer, load_vocab
    tok, vocab = load_tokenizer("gpt2"), load_vocab("gpt2")
    torch.manual_seed(1)
    cfg = LlamaConfig(vocab_size=vocab.logits_width, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                      bos_token_id=None, eos_token_id=None, pad_token_id=0)
    lm = LlamaForCausalLM(cfg).eval()
    titles = ["The Matrix", "The Matrix Reloaded", "Toy Story", "Heat"]
    ix = sg.ItemIndex.from_strings(titles, vocab)
    out = sg.beam_search(lm, tok, ix, num_beams=4, prompt="Best film:")
    assert sorted(tok.decode(s) for s in out.sequences) == sorted(titles)
    with pytest.raises(sg.StructgenError):
        sg.beam_search(lm, tok, ix, num_beams=2)
