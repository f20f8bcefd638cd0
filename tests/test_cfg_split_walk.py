"""Root walks that take run tokens from the per-vocabulary table by first byte
(:func:`structgen.cfg.run_budgets.split_budget`): a key "other than the declared ones" after a prefix
of some of them, a ``pattern`` string, counted strings.  Every root cache entry equals the plain
walk of the whole trie; masks equal the reference walk at every prefix."""
from __future__ import annotations

import json

import numpy as np
import pytest

import structgen as sg
from structgen.cfg import compile_cfg
from structgen.cfg import mask as mk
from structgen.cfg import run_budgets as rb
from structgen.cfg import trie_walks as tw
from structgen.cfg.cache import MaskCache

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z]+( [A-Z][a-z]*)?$"},
        "names": {"type": "array", "items": {"type": "string", "maxLength": 12}},
        "nameSpace": {"type": "integer"},
        "na\u00efve": {"type": "boolean"},
        "\u65e5\u672c": {"type": "string", "minLength": 2, "maxLength": 40},
        "deadlineSeconds": {"type": "number"},
        "deadline": {"type": "string"},
        "Q1": {"type": "string"},
        "x": {"type": "object", "properties": {"kind": {"type": "string"}, "kinds": {"type": "string"}},
              "additionalProperties": {"type": "integer"}},
    },
    "required": ["name"],
    "patternProperties": {"^Q[a-z]": False},  # no key "Q" + lower-case letter, but "Q1"
    "additionalProperties": {"type": "string"},
}

INSTANCE = {"deadlineS": "z", "name": "abc Def", "nameSpac": "open", "names": ["\u00e9t\u00e9", "q" * 12],
            "na\u00efv": "x\u00ef", "\u65e5\u672c": "caf\u00e9 au lait \u65e5\u672c\u8a9e",
            "x": {"kinds": "k", "kin": 3, "kind": "s", "kindz": 4}, "deadline": "soon", "nam": "y",
            "\u65e5": "1", "deadlineSecondsX": "2", "Q1": "v", "QZ": "w"}


@pytest.fixture(scope="module")
def llama3():
    from tests.helpers import load_vocab

    return load_vocab("llama3")


@pytest.fixture(scope="module")
def engine(llama3):
    g = sg.Grammar.from_json_schema(SCHEMA, engine="cfg", whitespace="flexible", property_order="any")
    return compile_cfg(g.cfg, llama3, slicing=g.slicing)  # the JSON front end's run characters


def _plain_root(e, g):
    """Bits and sorted boundary nodes of a walk of the whole trie from lexer state ``g``."""
    tb, tr = e.tables, e.trie
    kids, kb = np.zeros(256, np.int32), np.zeros(257, np.int64)
    tw.build_kids(np.zeros(1, np.int32), np.ones(256, np.uint8), tr.node_byte, tr.node_end, kids, kb)
    n = tr.node_depth.shape[0]
    words = np.zeros(e.words, np.uint32)
    out = np.empty(n, np.int32)
    nb = tw.walk_kids(kids, kb, g, tb.trans, tb.gacc, tb.gout, *e._trie_args, np.zeros(int(tr.max_depth) + 2, np.int32),
                      words, out, np.zeros(n, np.int64), 1, np.zeros(1, np.uint8), False)
    return words, np.sort(out[:nb]), kids, kb


def _root_entry(e, g):
    """A fresh cache holding the root entry of lexer state ``g`` (mask.fill_entries, as a
    first mask computes it)."""
    tb = e.tables
    c = MaskCache(e.trie, e.words)
    w = c.begin_fill()
    for _ in range(20):
        _, st = mk.fill_entries(np.zeros(1, np.int32), np.array([g], np.int32), tb.trans, tb.gacc, tb.gout, tb.gterm,
                                tb.follow, *e._trie_args, *w.arrays(), *c.scratch(), e.free_lexer(), *e.runs())
        if st == mk.OK:
            return w
        if st == mk.CACHE_FULL:
            c.grow(w, e.words, e.trie.node_depth.shape[0])
        else:
            c.scr_nodes = np.empty(c.scr_nodes.shape[0] * 4, np.int32)
    raise AssertionError("fill_entries keeps overflowing")


def test_root_entries_equal_the_plain_walk(engine):
    e = engine
    tb, tr = e.tables, e.trie
    chain, cum, impure, u_trans, u_acc, u0 = e.runs()
    maxc = cum.shape[0] - 1
    split = 0
    for g in range(tb.trans.shape[0]):
        s = _root_entry(e, g)
        assert int(s.cnt[mk.C_ENT]) == 1
        words = np.zeros(e.words, np.uint32)
        np.bitwise_or.at(words, s.bidx[:s.ent_bn[0]], s.bval[:s.ent_bn[0]])
        bl2 = int(s.ent_bl2[0])
        ref, nodes, kids, kb = _plain_root(e, g)
        assert np.array_equal(words, ref), g
        # the boundary list keeps the nodes with a child a following terminal starts with
        kept = nodes.copy()
        kk, kkb = np.zeros(tr.node_depth.shape[0], np.int32), np.zeros(257, np.int64)
        nk, _ = tw.build_kids(kept, tb.follow[tb.gterm[g]], tr.node_byte, tr.node_end, kk, kkb) if nodes.size else (0, 0)
        got = s.bl_nodes[s.bl_off[bl2]:s.bl_off[bl2 + 1]] if bl2 >= 0 else np.zeros(0, np.int32)
        assert np.array_equal(got, kept[:nk]), g
        if chain[g] == -1:
            full = np.zeros(256, np.uint8)
            r = rb.split_budget(g, tb.trans, tb.gacc, u_trans, u_acc, u0, maxc, chain, kb, kids, tr.node_end,
                                tr.tok_ptr, full)
            split += r >= 0 and full.any()
    assert split >= 10  # the split walk was exercised (keys after a prefix of declared ones, patterns)


def test_first_byte_budgets_by_brute_force(engine, llama3):
    """vals[x] against stepping the lexer over every run token that starts with byte x."""
    e = engine
    tb = e.tables
    chain, cum, impure, u_trans, u_acc, u0 = e.runs()
    maxc = cum.shape[0] - 1
    nchars = np.zeros(e.words * 32, np.int64)  # run tokens: their character counts
    for k in range(1, maxc + 1):
        new = np.flatnonzero(np.unpackbits((cum[k] & ~cum[k - 1]).view(np.uint8), bitorder="little"))
        nchars[new] = k
    run = np.flatnonzero(nchars)
    rng = np.random.default_rng(0)
    checked = 0
    for g in range(tb.trans.shape[0]):
        vals = np.zeros(256, np.int64)
        rb.first_byte_budgets(g, tb.trans, tb.gacc, u_trans, u_acc, u0, maxc, chain, vals)
        for t in rng.choice(run, 300, replace=False):
            b = llama3.token_bytes(int(t))
            v = vals[b[0]]
            assert v != -3, (g, b)
            if v == -1:
                continue
            s, ok = g, True
            for x in b:
                s = tb.trans[s, x]
                if s < 0:
                    ok = False
                    break
            assert ok == (nchars[t] <= v), (g, b, v)
            checked += 1
    assert checked > 1000


def test_masks_equal_reference_walk_with_extra_keys(engine, llama3):
    from tests.test_cfg_engine import _check_prefixes

    text = json.dumps(INSTANCE)
    _check_prefixes(engine, llama3.encode(text), llama3, "split")
    m = engine.matcher()
    for t in llama3.encode(text):
        assert m.advance(t)
    assert m.is_accepting()
