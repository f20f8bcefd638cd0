"""ItemIndex (structgen.index.items) against a Python dict trie on random item sets: the allowed
tokens after every prefix (and after non-prefixes), terminal flags, item ranges, the batched
gather, walking every item, the device copy; build cost linear in the tokens."""
from __future__ import annotations

import random
import re
import time

import numpy as np
import torch
import pytest
from hypothesis import given, settings, strategies as st

import structgen as sg
from structgen.errors import StructgenError, VocabularyError
from structgen.index.items import ItemIndex


def dict_trie(items):
    root = {}
    for it in items:
        node = root
        for t in it:
            node = node.setdefault(t, {})
        node[None] = True
    return root


def dict_next(trie, prefix, eos):
    node = trie
    for t in prefix:
        if t not in node:
            return []
        node = node[t]
    out = sorted(k for k in node if k is not None)
    if None in node and eos is not None:
        out.append(eos)
    return out


def random_items(rng, n, vocab, max_len, share=0.6):
    items = []
    for _ in range(n):
        if items and rng.random() < share:
            base = rng.choice(items)
            cut = rng.randint(0, len(base))
            it = base[:cut] + [rng.randrange(vocab) for _ in range(rng.randint(0, max_len - cut))]
        else:
            it = [rng.randrange(vocab) for _ in range(rng.randint(0, max_len))]
        items.append(it)
    return items


def all_prefixes(items):
    seen = set()
    for it in items:
        for k in range(len(it) + 1):
            seen.add(tuple(it[:k]))
    return sorted(seen)


def check_against_dict(items, vocab, eos):
    ix = ItemIndex.from_token_ids(items, vocab, eos_id=eos)
    trie = dict_trie(items)
    distinct = sorted({tuple(i) for i in items})
    assert [tuple(i) for i in ix.items()] == distinct
    assert len(ix) == len(distinct)
    prefixes = all_prefixes(items)
    for p in prefixes:
        assert ix.next_tokens(list(p)).tolist() == dict_next(trie, p, eos), p
        node = ix.walk(list(p))
        assert node >= 0
        assert ix.is_terminal(node) == (p in set(distinct))
        lo, hi = ix.item_range(node)
        assert [tuple(x) for x in distinct[lo:hi]] == [x for x in distinct if x[:len(p)] == p]
    # non-prefixes: one token off every prefix
    for p in prefixes[:50]:
        for t in range(vocab):
            q = list(p) + [t]
            if tuple(q) not in set(prefixes):
                assert ix.walk(q) == -1 and ix.next_tokens(q).size == 0
    # batched gather == one at a time
    nodes = [ix.walk(list(p)) for p in prefixes] + [-1]
    toks, kids = ix.next_tokens_batch(nodes)
    for row, (node, p) in enumerate(zip(nodes, prefixes + [None])):
        want = dict_next(trie, p, eos) if p is not None else []
        got = toks[row][toks[row] >= 0].tolist()
        assert got == want
        for t, c in zip(toks[row], kids[row]):
            if t >= 0 and t != eos:
                assert c == ix.child(node, int(t))
    # unpadded rows == the padded ones, with buffers too short to start with
    small = (np.empty(len(nodes) + 1, np.int64), np.empty(1, np.int64), np.empty(1, np.int64))
    for out in (None, small):
        off, rt, rc = ix.next_tokens_ragged(nodes, out=out)
        assert off[0] == 0 and off.size == len(nodes) + 1 and rt.size == rc.size == off[-1]
        for row in range(len(nodes)):
            keep = toks[row] >= 0
            assert rt[off[row]:off[row + 1]].tolist() == toks[row][keep].tolist()
            assert rc[off[row]:off[row + 1]].tolist() == kids[row][keep].tolist()
    # per-depth max branching
    for d in range(ix.max_depth + 1):
        at_d = [p for p in prefixes if len(p) == d]
        assert ix.max_branch[d] == max(len(dict_next(trie, p, None)) for p in at_d)
    return ix


@pytest.mark.parametrize("seed", range(12))
def test_random_sets_match_dict_trie(seed):
    rng = random.Random(seed)
    vocab = rng.choice([2, 3, 5, 17])
    items = random_items(rng, rng.randint(1, 60), vocab, rng.randint(1, 7))
    eos = vocab if seed % 2 == 0 else None
    check_against_dict(items, vocab + 1, eos)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 4), max_size=6), min_size=1, max_size=30))
def test_hypothesis_sets_match_dict_trie(items):
    check_against_dict(items, 6, 5)


def test_prefix_items_and_empty_item():
    ix = check_against_dict([[1, 2, 3], [1, 2], [1], [], [2]], 5, 4)
    assert ix.next_tokens([]).tolist() == [1, 2, 4]
    assert ix.next_tokens([1, 2]).tolist() == [3, 4]
    assert [] in ix and [1, 2] in ix and [1, 3] not in ix


def test_padded_array_input_and_sorted_fast_path():
    arr = np.array([[3, 1, -1], [0, 2, 2], [3, 1, 4]])
    ix = ItemIndex.from_token_ids(arr, 5)
    assert ix.items() == [[0, 2, 2], [3, 1], [3, 1, 4]]
    ix2 = ItemIndex.from_token_ids(ix.items(), 5, assume_sorted=True)
    assert np.array_equal(ix2.token, ix.token) and np.array_equal(ix2.indptr, ix.indptr)
    with pytest.raises(StructgenError):
        ItemIndex.from_token_ids(np.array([[1, -1, 2]]), 5)


def test_bad_ids_raise_structgen_errors():
    with pytest.raises(StructgenError, match="item 1"):
        ItemIndex.from_token_ids([[1], [2, 7]], 5)
    with pytest.raises(StructgenError, match="eos_id"):
        ItemIndex.from_token_ids([[1, 4]], 5, eos_id=4)
    # padded arrays are checked in the flattening pass: the same errors, naming the row
    with pytest.raises(StructgenError, match="item 1 has token id 7"):
        ItemIndex.from_token_ids(np.array([[1, -1], [2, 7]]), 5)
    with pytest.raises(StructgenError, match="item 0 contains eos_id=4"):
        ItemIndex.from_token_ids(np.array([[4, -1]], np.int16), 5, eos_id=4)
    with pytest.raises(StructgenError, match="item 0 has token id -3"):
        ItemIndex.from_flat(np.array([1, -3], np.int32), [0, 2], 5)
    with pytest.raises(StructgenError, match="vocab_size"):
        ItemIndex.from_token_ids([[1]], 0)


def test_input_dtypes_give_the_same_index():
    rng = np.random.default_rng(3)
    arr = rng.integers(0, 200, size=(500, 5))
    arr[rng.random((500, 5)) < 0.2] = -1
    arr = np.where(np.cumsum(arr < 0, axis=1) > 0, -1, arr)   # padding only trails
    ref = ItemIndex.from_token_ids([r[r >= 0].tolist() for r in arr], 200, eos_id=200)
    for a in (arr, arr.astype(np.int16), arr.astype(np.int32), torch.from_numpy(arr)):
        ix = ItemIndex.from_token_ids(a, 200, eos_id=200)
        assert np.array_equal(ix.token, ref.token) and np.array_equal(ix.indptr, ref.indptr)
        assert np.array_equal(ix.terminal, ref.terminal)
    data, off = ref.flat_items()
    for d in (data, data.astype(np.int64), data.astype(np.uint16)):
        ix = ItemIndex.from_flat(d, off, 200, eos_id=200)
        assert np.array_equal(ix.indptr, ref.indptr) and ix.items() == ref.items()


def test_semantic_ids_every_item_walks_to_a_terminal():
    rng = np.random.default_rng(0)
    n, L, V = 20000, 6, 64
    arr = rng.integers(0, V, size=(n, L))
    ix = ItemIndex.from_token_ids(arr, V)
    for row in arr[:2000]:
        assert row.tolist() in ix
    assert ix.num_items == len({tuple(r) for r in arr.tolist()})
    assert ix.nbytes > 0


def test_build_is_linear_in_tokens():
    rng = np.random.default_rng(1)
    ItemIndex.from_token_ids(rng.integers(0, 100, size=(100, 5)), 100)   # compile
    def build(n):
        arr = rng.integers(0, 1000, size=(n, 6))
        t = time.perf_counter()
        ItemIndex.from_token_ids(arr, 1000)
        return time.perf_counter() - t
    small = min(build(20000) for _ in range(3))
    big = min(build(200000) for _ in range(2))
    assert big <= 30 * small + 0.5   # 10x the tokens; lexsort adds a log factor


def test_device_copy_gathers_the_same_rows():
    torch = pytest.importorskip("torch")
    rng = random.Random(3)
    items = random_items(rng, 80, 7, 5)
    ix = ItemIndex.from_token_ids(items, 8, eos_id=7)
    dev = ix.to("cpu")
    assert dev.nbytes > 0
    nodes = list(range(ix.num_nodes)) + [-1]
    width = int(max(ix.max_branch))
    tok, kid = dev.gather(torch.tensor(nodes), width)
    ref_t, ref_c = ix.next_tokens_batch(nodes, width + 1)
    for r, v in enumerate(nodes):
        n_kids = 0 if v < 0 else int(ix.indptr[v + 1] - ix.indptr[v])
        assert tok[r, :n_kids].tolist() == ref_t[r, :n_kids].tolist()
        assert kid[r, :n_kids].tolist() == ref_c[r, :n_kids].tolist()
        assert (tok[r, n_kids:] == -1).all()


def test_exported():
    assert sg.ItemIndex is ItemIndex


@pytest.mark.parametrize("seed", range(6))
def test_subsets_match_a_dict_trie_of_the_allowed_items(seed):
    rng = random.Random(200 + seed)
    items = random_items(rng, 50, 4, 6)
    ix = ItemIndex.from_token_ids(items, 5, eos_id=4)
    distinct = [tuple(x) for x in ix.items()]
    assert [ix.item_id(list(x)) for x in distinct] == list(range(len(distinct)))
    keep = sorted(rng.sample(range(len(distinct)), rng.randint(0, len(distinct))))
    sub = ix.subset(keep)
    allowed = [list(distinct[i]) for i in keep]
    trie = dict_trie(allowed)
    prefixes = all_prefixes(items)
    for p in prefixes:
        assert sub.next_tokens(list(p)).tolist() == dict_next(trie, p, 4), p
    nodes = [ix.walk(list(p)) for p in prefixes]
    toks, _ = sub.next_tokens_batch(nodes)
    for row, p in enumerate(prefixes):
        assert sorted(t for t in toks[row].tolist() if t >= 0) == sorted(dict_next(trie, p, 4))
    mask = np.zeros(len(distinct), bool)
    mask[keep] = True
    assert ix.subset(mask).next_tokens([]).tolist() == dict_next(trie, (), 4)
    with pytest.raises(StructgenError):
        ix.subset([len(distinct)])


def test_from_strings_indexes_the_canonical_tokenization():
    from tests.helpers import load_vocab
    vocab = load_vocab("gpt2")
    titles = ["The Matrix", "The Matrix Reloaded", "Toy Story", "Toy Story 2", "Heat", "héros"]
    ix = ItemIndex.from_strings(titles, vocab)
    assert ix.eos_id == int(vocab.eos_ids[0]) and len(ix) == len(titles)
    for t in titles:
        ids = vocab.encode(t)
        assert ids in ix
        assert vocab.decode(ix.items()[ix.item_id(ids)]) == t.encode()
    # "Heat" spelled one byte token at a time is the same text but not the canonical tokens
    bytewise = [vocab.encode(c)[0] for c in "Heat"]
    assert bytewise != vocab.encode("Heat") and bytewise not in ix


def test_from_strings_batch_encoding_matches_encode_and_finds_bad_strings():
    from tests.helpers import load_vocab
    rng = np.random.default_rng(7)
    words = ["alpha", " beta", "Gamma", "δέλτα", "42", "x-y", "  two spaces", "emoji 🙂", ""]
    strings = sorted({" ".join(rng.choice(words, size=rng.integers(1, 4))) for _ in range(300)})
    for name in ("gpt2", "llama3"):
        vocab = load_vocab(name)
        ix = ItemIndex.from_strings(strings, vocab)
        ref = ItemIndex.from_token_ids([vocab.encode(s) for s in strings], vocab.logits_width,
                                       eos_id=int(vocab.eos_ids[0]))
        assert ix.items() == ref.items() and np.array_equal(ix.indptr, ref.indptr)
    # a SentencePiece tokenizer adds its dummy space: the first string it does not round-trip is named
    sp = load_vocab("llama2")
    first_bad = next(x for x in strings if sp.decode(sp.encode(x)) != x.encode())
    with pytest.raises(VocabularyError, match=re.escape(repr(first_bad))):
        ItemIndex.from_strings(strings, sp)


@pytest.mark.parametrize("seed", range(4))
def test_dense_levels_answer_as_the_csr_rows(seed):
    rng = random.Random(seed)
    V = rng.choice([3, 17, 300])
    items = [[rng.randrange(V) for _ in range(rng.randint(0, 5))] for _ in range(rng.randint(1, 400))]
    plain = ItemIndex.from_token_ids(items, V, eos_id=V)
    for budget, levels in ((0, 0), (4 * V, 1), (1 << 30, 2 if plain.max_depth >= 1 else 1)):
        ix = ItemIndex.from_token_ids(items, V, eos_id=V)
        assert ix.dense_levels(budget) == levels
        probes = [it[:k] for it in items for k in range(len(it) + 1)]
        probes += [[rng.randrange(-2, V + 3) for _ in range(rng.randint(1, 3))] for _ in range(200)]
        for p in probes:
            assert ix.walk(p) == plain.walk(p)
            assert ix.next_tokens(p).tolist() == plain.next_tokens(p).tolist()
        for node in range(min(ix.num_nodes, 50)):
            for t in (-1, 0, V - 1, V, V + 5, rng.randrange(V)):
                assert ix.child(node, t) == plain.child(node, t)
        assert ix.nbytes >= plain.nbytes
