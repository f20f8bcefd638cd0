"""Item sets through the user API: ``sg.generate(..., items=index)`` (sampling and greedy),
``choices=`` lists past ``CHOICES_INDEX_THRESHOLD`` (decoded through an ItemIndex), and the
transformers logits processor over an index (``model.generate(num_beams=...)``), with a tiny
random Llama over the gpt2 vocabulary.  Oracles: membership in the item set, a reference greedy
loop masked by a dict trie, exhaustive scoring of every item, and the regular automaton of
``choices=`` below the threshold."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import structgen as sg
import structgen.api as api
from structgen.errors import OptionError
from structgen.integrations.transformers import StructgenLogitsProcessor

from tests.helpers import load_tokenizer, tiny_llama


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("gpt2")


@pytest.fixture(scope="module")
def model(tok):
    torch.set_num_threads(1)
    return tiny_llama(len(tok), seed=3, max_positions=128)


@pytest.fixture(scope="module")
def gen(model, tok):
    return sg.Generator(model, tok)


def random_items(rng, n, lo=300, hi=340, max_len=4):
    """Token sequences over a narrow id range: shared prefixes and items that prefix others."""
    items = []
    while len(items) < n:
        if items and rng.random() < 0.5:
            base = rng.choice(items)
            it = base[:rng.randint(1, len(base))] + [rng.randrange(lo, hi) for _ in range(rng.randint(0, 2))]
        else:
            it = [rng.randrange(lo, hi) for _ in range(rng.randint(1, max_len))]
        if it not in items:
            items.append(it)
    return items


def trie_allowed(items, prefix, eos_ids):
    nxt = {it[len(prefix)] for it in items if len(it) > len(prefix) and it[:len(prefix)] == prefix}
    return sorted(nxt) + (sorted(eos_ids) if prefix in items else [])


@torch.no_grad()
def reference_greedy(model, prompt_ids, items, eos_ids, max_new):
    """Greedy decoding by hand: a full forward pass per step, argmax over the dict trie's tokens."""
    out = []
    for _ in range(max_new):
        logits = model(torch.tensor([prompt_ids + out])).logits[0, -1]
        allowed = trie_allowed(items, out, eos_ids)
        t = allowed[int(torch.argmax(logits[allowed]))]
        if t in eos_ids:
            break
        out.append(t)
    return out


def test_sampled_outputs_are_items(gen):
    rng = random.Random(0)
    items = random_items(rng, 30)
    ix = sg.ItemIndex.from_token_ids(items, gen.vocab.logits_width)
    res = gen(["first", "second prompt", "x"] * 2, items=ix, temperature=1.0, seed=5, max_new_tokens=12)
    for r in res:
        assert r.finish_reason == "stop" and r.complete
        assert r.token_ids in items
        assert r.text == gen.vocab.decode(r.token_ids).decode("utf-8", "replace")
        assert r.constraint == f"one of {len(items)} items"


@pytest.mark.parametrize("fast_forward", [True, False])
def test_greedy_equals_a_reference_greedy_over_the_dict_trie(gen, model, tok, fast_forward):
    rng = random.Random(1)
    eos = [int(e) for e in gen.vocab.eos_ids]
    for trial in range(3):
        items = random_items(rng, 12)
        ix = sg.ItemIndex.from_token_ids(items, gen.vocab.logits_width)
        prompt = f"item query {trial}"
        r = gen(prompt, items=ix, max_new_tokens=10, fast_forward=fast_forward)
        ref = reference_greedy(model, tok(prompt)["input_ids"], items, eos, 10)
        assert r.token_ids == ref and r.token_ids in items


def test_subset_and_catalog_outputs_are_current_items(gen):
    rng = random.Random(2)
    items = random_items(rng, 24)
    V = gen.vocab.logits_width
    ix = sg.ItemIndex.from_token_ids(items, V)
    keep = list(range(0, len(ix), 2))
    allowed = [ix.items()[i] for i in keep]
    for r in gen(["a", "b", "c", "d"], items=ix.subset(keep), temperature=1.0, seed=1, max_new_tokens=12):
        assert r.token_ids in allowed
    cat = sg.ItemCatalog(ix, merge_fraction=None)
    removed = ix.items()[:10]
    assert cat.remove(removed) == 10
    cat.add([[999, 1000]])
    current = [it for it in items if it not in removed] + [[999, 1000]]
    for r in gen(["a", "b", "c", "d", "e"], items=cat, temperature=1.0, seed=2, max_new_tokens=12):
        assert r.token_ids in current


def test_bad_item_options_raise(gen):
    ix = sg.ItemIndex.from_token_ids([[300]], gen.vocab.logits_width)
    with pytest.raises(TypeError):
        gen("p", items=ix, regex="a")
    with pytest.raises(OptionError):
        gen("p", items=[[300]])
    with pytest.raises(OptionError):
        StructgenLogitsProcessor(ix)   # no vocab=


def unique_spellings(vocab, rng, n):
    """Strings that only one token sequence spells (so the automaton of ``choices=`` and the
    index of canonical tokenizations admit the same token sequences)."""
    by_bytes = {vocab.token_bytes(t): t for t in range(vocab.size) if vocab.is_normal[t]}

    def ways(b):
        w = [1] + [0] * len(b)
        for j in range(1, len(b) + 1):
            w[j] = sum(w[i] for i in range(max(0, j - 16), j) if b[i:j] in by_bytes)
        return w[-1]

    out = set()
    alphabet = "qxzjkvw!?#%&"
    while len(out) < n:
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4)))
        if ways(s.encode()) == 1:
            out.add(s)
    return sorted(out)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_choices_past_the_threshold_decode_as_the_automaton(model, tok, monkeypatch, temperature):
    gen = sg.Generator(model, tok)   # (a fresh compile cache)
    choices = unique_spellings(gen.vocab, random.Random(4), 20)
    prompts = ["pick one", "another", "third"]
    small = gen(prompts, choices=choices, temperature=temperature, seed=7, max_new_tokens=8)
    built = []
    real = sg.ItemIndex.from_strings
    monkeypatch.setattr(api, "CHOICES_INDEX_THRESHOLD", 5)
    monkeypatch.setattr(sg.ItemIndex, "from_strings", lambda *a, **k: built.append(1) or real(*a, **k))
    big = gen(prompts, choices=choices, temperature=temperature, seed=7, max_new_tokens=8)
    assert built == [1]            # the index path was taken
    for a, b in zip(small, big):
        assert (a.token_ids, a.text, a.complete, a.constraint) == (b.token_ids, b.text, b.complete, b.constraint)
        assert b.text in choices


def test_transformers_beam_search_over_an_index(gen, model, tok):
    rng = random.Random(6)
    items = random_items(rng, 8, max_len=3)
    eos = int(gen.vocab.eos_ids[0])
    ix = sg.ItemIndex.from_token_ids(items, gen.vocab.logits_width)
    prompt = tok("find the item", return_tensors="pt")["input_ids"]
    k = len(items)
    proc = StructgenLogitsProcessor(ix, vocab=gen.vocab)
    out = model.generate(prompt, logits_processor=[proc], num_beams=k, num_return_sequences=k, do_sample=False,
                         max_new_tokens=max(map(len, items)) + 1, length_penalty=0.0, early_stopping=True, eos_token_id=eos,
                         pad_token_id=eos, output_scores=True, return_dict_in_generate=True)
    seqs = []
    for row in out.sequences[:, prompt.shape[1]:].tolist():
        assert eos in row
        seqs.append(row[:row.index(eos)])
    assert all(s in items for s in seqs)
    # exhaustive scoring: sum of the model's log-probabilities of the item's tokens and EOS
    @torch.no_grad()
    def score(it):
        ids = prompt[0].tolist() + it + [eos]
        lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
        n = prompt.shape[1]
        return float(sum(lp[n - 1 + j, ids[n + j]] for j in range(len(it) + 1)))
    # as many beams as items: every item is kept, so the beams are all items, best first
    best = sorted(items, key=score, reverse=True)
    assert seqs == best
    assert np.allclose(out.sequences_scores.tolist(), [score(it) for it in best], atol=1e-4)
