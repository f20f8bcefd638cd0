"""Compile-time shortcuts of the grammar engine, each against the slow construction it replaces.

- ``terminals.literal_set_dfa`` (unions of plain literals as a minimised trie) vs the builder's
  subset construction of the same IR: the same arrays;
- the byte-pair free lexer handed to the mask kernel (``CompiledCFG.free_lexer``) vs one accepting
  every byte string (no list ever skipped): the same masks; the text of sampled sentences stays
  inside it, and its language is closed under factors (what the kernel's one-state walk needs);
- ``trie_walks.free_walk`` (one state per depth) vs ``union_walk`` (state sets) with that lexer, on
  random nested boundary lists of the llama3 trie: the same tokens;
- the prefill's pools grown before each batch: the same masks as without a prefill.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from structgen import grammars
from structgen.automaton import ir
from structgen.automaton.build import build_dfa
from structgen.cfg import compile_cfg
from structgen.frontends import lark_to_cfg
from structgen.cfg import engine as E
from structgen.cfg.terminals import build, literal_set_dfa
from structgen.cfg.trie_walks import free_walk, union_walk
from tests.helpers import load_vocab


def _same_dfa(a, b) -> bool:
    return (a.start == b.start and np.array_equal(a.transitions, b.transitions)
            and np.array_equal(a.accepting, b.accepting) and np.array_equal(a.byte_class, b.byte_class))


@pytest.mark.parametrize("seed", range(4))
def test_literal_set_dfa_equals_builder(seed):
    rng = random.Random(seed)
    for _ in range(150):
        alphabet = rng.choice(["ab", "abc+=", "a\u00e9\u20acx\U0001F600", "<>=!", "\x00\xff"])
        words = {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 5))) for _ in range(rng.randint(2, 8))}
        node = ir.alt(*[ir.literal(w) for w in words])
        d = literal_set_dfa(node.items if isinstance(node, ir.Alt) else (node,))
        assert d is not None
        assert _same_dfa(d, build_dfa(node)), words
        assert _same_dfa(build(node), build_dfa(node))


def test_literal_set_dfa_declines_other_unions():
    for node in [ir.alt(ir.literal("ab"), ir.CharSet.of([(0x61, 0x62)])),       # a class of two
                 ir.alt(ir.literal("ab"), ir.repeat(ir.literal("c"), 0, None)),  # a repeat
                 ir.alt(ir.literal("a"), ir.seq(ir.literal("b"), ir.CharSet.of([(0xD800, 0xD800)])))]:
        assert literal_set_dfa(node.items) is None
        assert _same_dfa(build(node), build_dfa(node))


@pytest.fixture(scope="module")
def llama3():
    return load_vocab("llama3")


def _walk_masks(cg, vocab, seed: int, steps: int = 24, walks: int = 4):
    """Masks along random walks through allowed tokens."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(walks):
        m = cg.matcher()
        for _ in range(steps):
            w = m.mask_words().copy()
            out.append(w)
            allowed = np.flatnonzero(np.unpackbits(w.view(np.uint8), bitorder="little"))
            allowed = allowed[allowed < vocab.logits_width]
            allowed = allowed[~np.isin(allowed, vocab.eos_ids)]
            if allowed.size == 0:
                break
            assert m.advance(int(rng.choice(allowed)))
    return out


ANY_BYTES = np.zeros((1, 256), np.int32)


@pytest.mark.parametrize("name", ["c_subset", "sql", "robot", "csv", "json"])
def test_byte_pair_free_lexer_gives_the_same_masks(name, llama3, monkeypatch):
    cfg = lark_to_cfg(grammars.load(name))
    plain = compile_cfg(cfg, llama3, skip_covered=True)
    assert plain.lexer_aids.ftrans.shape[0] == 257  # the byte-pair lexer is in use
    masks = _walk_masks(plain, llama3, 7)
    monkeypatch.setattr(E.CompiledCFG, "free_lexer", lambda self: ANY_BYTES)
    cg = compile_cfg(cfg, llama3, skip_covered=True)
    for a, b in zip(masks, _walk_masks(cg, llama3, 7)):
        assert np.array_equal(a, b)


def test_covered_first_visits_are_skipped(llama3):
    # words may follow words (lark's csv.lark): a list of boundaries after every byte of a word,
    # then one after every two words, ...; with skip_covered the chain stops once covered
    cfg = lark_to_cfg('start: row+\nrow: (WORD | INT | _SEP)+ _NL\nWORD: /[a-zA-Z]+/\nINT: /[0-9]+/\n'
                      '_SEP: /[ ,]+/\n_NL: /\\n/\n')
    skip, walk = compile_cfg(cfg, llama3, skip_covered=True), compile_cfg(cfg, llama3, skip_covered=False)
    assert walk.lexer_aids.ftrans.shape[0] == 1
    for a, b in zip(_walk_masks(skip, llama3, 11), _walk_masks(walk, llama3, 11)):
        assert np.array_equal(a, b)
    assert skip.cache.n_entries < 0.6 * walk.cache.n_entries  # (53 against 113 when written)


@pytest.mark.parametrize("name", ["c_subset", "sql", "csv", "json"])
def test_byte_pair_free_lexer_holds_sampled_sentences(name, llama3):
    cg = compile_cfg(lark_to_cfg(grammars.load(name)), llama3)
    ft = cg.free_lexer()
    rng = np.random.default_rng(3)
    for _ in range(6):
        m, text = cg.matcher(), b""
        for _ in range(60):
            w = m.mask_words()
            allowed = np.flatnonzero(np.unpackbits(w.view(np.uint8), bitorder="little"))
            allowed = allowed[(allowed < llama3.logits_width) & ~np.isin(allowed, llama3.eos_ids)]
            if allowed.size == 0:
                break
            t = int(rng.choice(allowed))
            assert m.advance(t)
            text += llama3.token_bytes(t)
        s = 0
        for b in text:
            s = ft[s, b]
            assert s >= 0, (name, text)
    # and it rejects something: a byte no terminal takes, after a byte of a lexeme
    assert (ft[1:] < 0).any()
    # closed under factors: from any state, a byte leads where it leads from the start, or nowhere
    assert np.array_equal(ft[0], np.arange(1, 257))
    assert ((ft == -1) | (ft == ft[0][None, :])).all()

@pytest.mark.parametrize("name, levels", [("csv", 8), ("c_subset", 2)])  # (C's 8-level closure takes > 5 s)
def test_prefilled_masks_equal_unprefilled(name, levels, llama3):
    cfg = lark_to_cfg(grammars.load(name))
    filled = compile_cfg(cfg, llama3)
    if filled.prefill_thread is not None:
        filled.prefill_thread.join()
    filled.cache.prefill(filled, 5.0, levels=levels)
    assert filled.cache.prefilled
    cold = compile_cfg(cfg, llama3)
    for a, b in zip(_walk_masks(filled, llama3, 3), _walk_masks(cold, llama3, 3)):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("name", ["csv", "json", "c_subset"])
def test_free_walk_matches_union_walk(name, llama3):
    cg = compile_cfg(lark_to_cfg(grammars.load(name)), llama3)
    ft = cg.free_lexer()
    facc, fout = np.zeros(257, np.uint8), (ft >= 0).any(axis=1).astype(np.uint8)  # union_walk's DFA form
    tr = llama3.trie
    depth = int(tr.max_depth) + 2
    inner = np.flatnonzero(tr.node_end > np.arange(tr.node_end.shape[0]) + 1)  # nodes with children
    rng = np.random.default_rng(5)
    nmark = np.zeros(tr.node_end.shape[0], np.int64)
    for trial in range(12):
        # nested lists: random nodes and, for some, their ancestors (every prefix of a word)
        picks = set(rng.choice(inner, 40 if trial % 2 else 400).tolist())
        for n in list(picks)[:20]:
            for a in range(n - 1, max(n - 8, -1), -1):
                if tr.node_end[a] > n and tr.node_end[a] > a + 1:
                    picks.add(a)
        u = np.array(sorted(picks), np.int32)
        fb = (rng.random(256) < 0.6).astype(np.uint8) if trial % 3 else np.ones(256, np.uint8)
        nmark[u] = trial + 1
        want = np.zeros((llama3.logits_width + 31) // 32, np.uint32)
        got = want.copy()
        union_walk(u, fb, 0, ft, facc, fout, tr.node_byte, tr.node_depth, tr.node_end, tr.tok_ptr, tr.tok_ids,
                   nmark, trial + 1, np.zeros((depth, depth), np.int32), np.zeros(depth, np.int64),
                   np.zeros(depth, np.uint8), want, np.zeros(16, np.int32))
        free_walk(u, fb, ft, tr.node_byte, tr.node_depth, tr.node_end, tr.tok_ptr, tr.tok_ids, nmark, trial + 1,
                  np.zeros(depth, np.int32), np.zeros(depth, np.uint8), got)
        assert want.any() and np.array_equal(got, want)
