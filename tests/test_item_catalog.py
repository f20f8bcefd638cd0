"""ItemCatalog (structgen.index.catalog): random add / remove sequences against a Python set of
items — the allowed tokens after every prefix, membership, size, the merged index, the view the
decoders take — and the matcher and beam search over a changed catalogue."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

import structgen as sg
from structgen.errors import StructgenError
from structgen.index.catalog import ItemCatalog
from structgen.index.items import ItemIndex
from structgen.runtime.item_matcher import ItemMatcher
from tests.helpers import tiny_llama

EOS = 9


def expected_next(items, prefix):
    n = len(prefix)
    toks = sorted({it[n] for it in items if len(it) > n and tuple(it[:n]) == tuple(prefix)})
    if tuple(prefix) in items:
        toks.append(EOS)
    return toks


def check(cat, items):
    assert len(cat) == len(items)
    assert cat.items() == sorted(list(s) for s in items)
    prefixes = {s[:k] for s in items for k in range(len(s) + 1)} | {(), (0,), (8, 8), (1, 2, 3, 4, 5, 6)}
    for p in prefixes:
        assert cat.next_tokens(list(p)).tolist() == expected_next(items, p), p
        assert (p in cat) == (p in items)
    view = cat.view()
    for p in prefixes:
        assert view.next_tokens(list(p)).tolist() == expected_next(items, p), p


item = st.lists(st.integers(0, 8), min_size=0, max_size=4).map(tuple)


@settings(max_examples=60, deadline=None)
@given(st.lists(item, max_size=12), st.lists(st.tuples(st.booleans(), item), max_size=20),
       st.sampled_from([None, 0.0, 0.5]))
def test_random_changes_match_a_python_set(base, ops, frac):
    items = set(base)
    cat = ItemCatalog(ItemIndex.from_token_ids([list(s) for s in base], 9, EOS), merge_fraction=frac)
    for i, (add, s) in enumerate(ops):
        if add:
            assert cat.add([s]) == (s not in items)
            items.add(s)
        else:
            assert cat.remove([s]) == (s in items)
            items.discard(s)
        if i % 5 == 4:
            check(cat, items)
    check(cat, items)
    merged = cat.merge()
    assert sorted(map(tuple, merged.items())) == sorted(items)
    assert cat.num_added == cat.num_removed == 0
    check(cat, items)


def test_removals_alone_do_not_rebuild_and_additions_merge_on_demand():
    rng = random.Random(0)
    base = {tuple(rng.randrange(50) for _ in range(rng.randint(1, 6))) for _ in range(3000)}
    cat = ItemCatalog(ItemIndex.from_token_ids([list(s) for s in base], 50, 50), merge_fraction=None)
    gone = list(base)[:500]
    assert cat.remove(gone) == 500
    assert isinstance(cat.view(), sg.index.items.ItemSubset) and cat.merges == 0
    cat.add([(1, 2, 3, 4, 5, 6, 7)])
    assert cat.view().next_tokens([1, 2, 3, 4, 5, 6, 7]).tolist() == [50] and cat.merges == 1
    auto = ItemCatalog(ItemIndex.from_token_ids([list(s) for s in base], 50, 50), merge_fraction=0.01)
    auto.add([(49, 49, k // 50, k % 50) for k in range(1100)])
    assert auto.merges == 1 and len(auto) == len(base) + 1100


def test_bad_additions_name_the_item():
    cat = ItemCatalog(ItemIndex.from_token_ids([[1, 2]], 9, EOS))
    with pytest.raises(StructgenError, match=r"\[1, 9\]"):
        cat.add([(1, 9)])
    with pytest.raises(StructgenError, match="ItemIndex"):
        ItemCatalog([[1, 2]])


def test_matcher_and_beam_search_take_a_changed_catalogue():
    V = 40
    model = tiny_llama(V, hidden=16)
    rng = random.Random(1)
    base = {tuple(rng.randrange(1, 39) for _ in range(3)) for _ in range(200)}
    cat = ItemCatalog(ItemIndex.from_token_ids([list(s) for s in base], V, 39), merge_fraction=None)
    removed = set(list(base)[:150])
    cat.remove(removed)
    added = {(5, 6), (7, 8, 9, 10)}
    cat.add(added)
    live = (base - removed) | added
    out = sg.beam_search(model, [1, 2, 3], cat, num_beams=len(live) + 5)
    got = {tuple(s[:-1]) if s and s[-1] == 39 else tuple(s) for s in out.sequences}
    assert got == live
    vocab = sg.Vocabulary.from_bytes([bytes([65 + i]) for i in range(V - 1)] + [b""], eos_ids=[39])
    m = ItemMatcher(cat, vocab)
    bm = sg.allocate_bitmask(1, vocab.logits_width)
    m.fill_bitmask(bm, 0)
    assert sg.bitmask_to_ids(bm[0]).tolist() == sorted({s[0] for s in live})
