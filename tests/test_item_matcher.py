"""ItemMatcher (structgen.runtime.item_matcher), the Matcher view of an ItemIndex, on a tiny
byte vocabulary: the mask after every prefix equals brute force (advance on a fork) and the
dict trie; rollback / snapshot / restore / fork / reset / validate; byte steps against the
items' byte spellings; forced tokens; then AR decoding with a tiny random Llama: every output
is an item."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import structgen as sg
from structgen.decoding.autoregressive import Row, decode
from structgen.errors import StructgenError
from structgen.runtime.item_matcher import ItemMatcher

PIECES = [bytes([b]) for b in b"abcdxyz"] + [b"ab", b"abc", b"cd", b"xy", b"bc", b"zz", b"da"]
EOS = len(PIECES)
V = EOS + 1


@pytest.fixture(scope="module")
def vocab():
    return sg.Vocabulary.from_bytes(PIECES + [b""], eos_ids=[EOS])


def random_items(rng, n, max_len=5):
    items = []
    for _ in range(n):
        if items and rng.random() < 0.5:
            base = rng.choice(items)
            it = base[:rng.randint(0, len(base))]
            it += [rng.randrange(EOS) for _ in range(rng.randint(0, max_len - len(it)))]
        else:
            it = [rng.randrange(EOS) for _ in range(rng.randint(1, max_len))]
        items.append(it)
    return items


def brute_allowed(m):
    out = []
    for t in range(V):
        f = m.fork()
        if f.advance(t):
            out.append(t)
    return out


def dict_allowed(items, prefix):
    nxt = {it[len(prefix)] for it in items if len(it) > len(prefix) and it[:len(prefix)] == prefix}
    return sorted(nxt) + ([EOS] if prefix in items else [])


@pytest.mark.parametrize("seed", range(6))
def test_mask_on_every_prefix(vocab, seed):
    rng = random.Random(seed)
    items = random_items(rng, 25)
    ix = sg.ItemIndex.from_token_ids(items, V, eos_id=EOS)
    prefixes = {tuple(it[:k]) for it in items for k in range(len(it) + 1)}
    bm = sg.allocate_bitmask(2, V)
    for p in sorted(prefixes):
        m = ItemMatcher(ix, vocab)
        assert m.advance_many(list(p)) == len(p)
        want = dict_allowed(items, list(p))
        assert m.allowed_tokens().tolist() == want
        assert brute_allowed(m) == want
        m.fill_bitmask(bm, 1)
        assert np.asarray(sg.bitmask_to_ids(bm[1])).tolist() == want
        assert m.is_accepting() == (list(p) in items)
        assert m.accepted_tokens() == len(p)
        snap = m.snapshot()
        assert m.validate(want[:1]) == min(1, len(want))
        if m.is_accepting():
            assert m.advance(EOS) and m.is_terminated()
            assert m.allowed_tokens().tolist() == [EOS] and not m.advance(0)
            m.rollback(1)
        assert m.snapshot() == snap
        # forced tokens: the only continuation, item tokens exactly
        forced = m.forced_tokens()
        f = m.fork()
        assert f.advance_many(forced) == len(forced)
        if forced:
            assert all(len(dict_allowed(items, list(p) + forced[:k])) == 1 for k in range(len(forced)))
        assert m.forced_bytes() == vocab.decode(forced)


def test_history_round_trips(vocab):
    rng = random.Random(7)
    items = random_items(rng, 30)
    ix = sg.ItemIndex.from_token_ids(items, V)
    target = max(items, key=len)
    m = ItemMatcher(ix, vocab)
    snaps = [m.snapshot()]
    for t in target:
        assert m.advance(t)
        snaps.append(m.snapshot())
    assert m.is_accepting() == (target in items)
    f = m.fork()
    m.rollback(len(target))
    assert m.allowed_tokens().tolist() == dict_allowed(items, [])
    assert f.accepted_tokens() == len(target)   # the fork is independent
    for k, s in enumerate(snaps):
        m.restore(s)
        assert m.accepted_tokens() == k
        assert m.allowed_tokens().tolist() == dict_allowed(items, target[:k])
    m.reset()
    assert m.accepted_tokens() == 0
    m.restore(snaps[-1])
    assert m.validate(target[len(target):] + [EOS]) == int(target in items)
    m.reset()
    assert m.validate(target + [EOS]) == len(target) + int(target in items)
    assert m.snapshot() != snaps[-1] or m.accepted_tokens() == 0
    with pytest.raises(ValueError):
        m.rollback(1)
    with pytest.raises(ValueError):
        ItemMatcher(ix, vocab).restore(snaps[0])
    assert not m.advance(-3) and not m.advance(10 ** 9)


@pytest.mark.parametrize("seed", range(4))
def test_byte_steps_follow_the_item_spellings(vocab, seed):
    rng = random.Random(100 + seed)
    items = random_items(rng, 12, 4)
    ix = sg.ItemIndex.from_token_ids(items, V, eos_id=EOS)
    spellings = {vocab.decode(it) for it in items}
    starts = sorted({s[:k] for s in spellings for k in range(1, len(s) + 1)})
    for data in starts[:40]:
        m = ItemMatcher(ix, vocab)
        assert m.advance_bytes(data)
        assert m.accepted_tokens() == 1
        want = [t for t in range(EOS) if any(s.startswith(data + PIECES[t]) for s in spellings)]
        if data in spellings:
            want.append(EOS)
        assert brute_allowed(m) == want, data
        assert m.allowed_tokens().tolist() == want, data
        m.rollback(1)
        assert m.allowed_tokens().tolist() == dict_allowed(items, [])
    m = ItemMatcher(ix, vocab)
    assert not m.advance_bytes(b"q")
    assert m.advance_bytes(b"") and m.accepted_tokens() == 1


def test_items_with_eos_ids_are_refused(vocab):
    with pytest.raises(StructgenError):
        ItemMatcher(sg.ItemIndex.from_token_ids([[1, EOS]], V), vocab)


def tiny_llama(vocab_size, seed=0):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128,
                      bos_token_id=None, eos_token_id=None, pad_token_id=0)
    return LlamaForCausalLM(cfg).eval()


@pytest.mark.parametrize("fast_forward", [True, False])
def test_ar_decode_outputs_are_items(vocab, fast_forward):
    torch.set_num_threads(1)
    rng = random.Random(11)
    items = random_items(rng, 40, 6)
    ix = sg.ItemIndex.from_token_ids(items, V, eos_id=EOS)
    model = tiny_llama(V)
    gen = torch.Generator().manual_seed(0)
    rows = [Row(prompt_ids=[rng.randrange(EOS) for _ in range(3)], matcher=ItemMatcher(ix, vocab))
            for _ in range(8)]
    decode(model, rows, vocab, max_new_tokens=20, temperature=1.0, generator=gen, fast_forward=fast_forward)
    for r in rows:
        assert r.finish_reason == "stop"
        assert r.output_ids in items


def test_subset_matcher_masks(vocab):
    rng = random.Random(5)
    items = random_items(rng, 25)
    ix = sg.ItemIndex.from_token_ids(items, V, eos_id=EOS)
    distinct = ix.items()
    keep = [i for i in range(len(distinct)) if i % 3 == 0]
    allowed = [distinct[i] for i in keep]
    prefixes = {tuple(it[:k]) for it in allowed for k in range(len(it) + 1)}
    for p in sorted(prefixes):
        m = ItemMatcher(ix.subset(keep), vocab)
        assert m.advance_many(list(p)) == len(p)
        assert m.allowed_tokens().tolist() == dict_allowed(allowed, list(p)) == brute_allowed(m)
        forced = m.forced_tokens()
        assert m.advance_many(forced) == len(forced)
