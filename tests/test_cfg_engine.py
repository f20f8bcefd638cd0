"""The grammar engine against oracles: Lark (lexer="dynamic_complete"), brute force, replay.

- tiny vocabularies: at every prefix of random walks, the mask equals a brute-force
  "can this prefix still be completed" check (all strings up to N accepted by Lark);
- random grammars: sentences sampled under the mask parse with Lark; Lark-accepted
  sentences are accepted token by token;
- shipped grammars on real vocabularies: corpus sentences (generated from the grammar,
  confirmed by Lark) are accepted token by token; mask <=> advance at every prefix;
- rollback / fork / validate replay exactly.
"""
from __future__ import annotations

import itertools
import pathlib
import random

import numpy as np
import pytest
from lark import Lark
from lark.exceptions import LarkError

import structgen as sg
from structgen import grammars
from structgen.cfg import compile_cfg
from structgen.frontends import gbnf_to_cfg, lark_to_cfg
from structgen.vocab.vocabulary import Vocabulary


def lark_accepts(parser, data: bytes) -> bool:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    try:
        parser.parse(text)
        return True
    except LarkError:
        return False


def oracle(text: str) -> Lark:
    return Lark(text, parser="earley", lexer="dynamic_complete")


def allowed_set(m) -> set:
    return set(m.allowed_tokens().tolist())


# ---------------------------------------------------------------- brute force, tiny vocabularies

TINY = [
    # (grammar, alphabet, max length N, slack): a prefix p is judged "dead" only when
    # len(p) <= N - slack, slack bounding the length of its shortest completion
    ('start: "a" start "b" | "c"\n', "abc", 9, 5),
    ('start: A A | A "x" start\nA: /a+/\n', "ax", 8, 2),
    ('start: s\ns: s "+" t | t\nt: NUM | "(" s ")"\nNUM: /[0-9]+/\n%ignore " "\n', "1+()", 7, 4),
    ('start: item*\nitem: "ab" | "a" | B\nB: /b+c?/\n', "abc", 8, 1),
    ('start: x y\nx: | "a" x\ny: "b"? "c"\n', "abc", 8, 2),
]


def accepted_upto(parser, alphabet: str, n: int) -> set:
    out = set()
    for k in range(n + 1):
        for tup in itertools.product(alphabet, repeat=k):
            s = "".join(tup)
            if lark_accepts(parser, s.encode()):
                out.add(s.encode())
    return out


@pytest.mark.parametrize("case", range(len(TINY)))
def test_mask_equals_bruteforce_on_tiny_vocabulary(case):
    text, alphabet, n, slack = TINY[case]
    parser = oracle(text)
    sentences = accepted_upto(parser, alphabet, n)
    prefixes = {s[:i] for s in sentences for i in range(len(s) + 1)}
    chars = [c.encode() for c in alphabet]
    pieces = sorted(set(chars + [a + b for a in chars for b in chars][:20] + [b"ab", b"a+", b"(1", b"1)"]))
    tokens = pieces + [b"<eos>"]
    vocab = Vocabulary.from_bytes(tokens, eos_ids=[len(tokens) - 1])
    eos = len(tokens) - 1
    cg = compile_cfg(lark_to_cfg(text), vocab)
    rng = random.Random(case)
    for _ in range(12):
        m = cg.matcher()
        prefix = b""
        for _step in range(n):
            allowed = allowed_set(m)
            assert (eos in allowed) == (prefix in sentences or (len(prefix) > n and m.is_accepting())), prefix
            for t, tb in enumerate(pieces):
                cand = prefix + tb
                if cand in prefixes:
                    assert t in allowed, (prefix, tb)
                elif len(cand) <= n - slack:
                    assert t not in allowed, (prefix, tb)
            choices = [t for t in allowed if t != eos]
            if not choices:
                break
            t = rng.choice(choices)
            assert m.advance(t)
            prefix += pieces[t]
            assert prefix in prefixes or len(prefix) > n - slack


# ---------------------------------------------------------------- random grammars

def random_grammar(rng: random.Random) -> str:
    """A small random Lark grammar over the letters a-d (recursion, empty rules, regex terminals)."""
    nts = ["start", "r1", "r2", "r3"]
    terms = {"A": '"a"', "B": "/b+/", "C": '"cd"', "D": "/d?c/", "E": '"ab"'}
    lines = []
    for i, nt in enumerate(nts):
        alts = []
        for _ in range(rng.randint(1, 3)):
            syms = []
            for _ in range(rng.randint(0, 3)):
                if rng.random() < 0.55:
                    syms.append(rng.choice(list(terms)))
                else:
                    syms.append(rng.choice(nts[i:] if rng.random() < 0.6 else nts))
            alts.append(" ".join(syms))
        # a terminating alternative keeps the language non-empty
        alts.append(rng.choice(list(terms)))
        lines.append(f"{nt}: " + " | ".join(a if a else "" for a in alts))
    for t, p in terms.items():
        lines.append(f"{t}: {p}")
    if rng.random() < 0.5:
        lines.append('%ignore " "')
    return "\n".join(lines) + "\n"


def sample_under_mask(m, rng, max_tokens=30, eos=None):
    """Random logits under the mask until EOS (returns the token list, or None if unfinished)."""
    out = []
    for _ in range(max_tokens):
        allowed = m.allowed_tokens()
        assert allowed.size, "the mask must never be empty"
        if eos in allowed and (rng.random() < 0.3 or allowed.size == 1):
            assert m.advance(eos)
            return out
        choices = [t for t in allowed.tolist() if t != eos]
        t = rng.choice(choices)
        assert m.advance(t)
        out.append(t)
    return None


@pytest.mark.parametrize("seed", range(12))
def test_random_grammars_sample_and_accept(seed):
    rng = random.Random(seed)
    text = random_grammar(rng)
    parser = oracle(text)
    pieces = [b"a", b"b", b"c", b"d", b" ", b"ab", b"cd", b"bb", b"dc", b"a ", b"ca", b"bcd"]
    vocab = Vocabulary.from_bytes(pieces + [b""], eos_ids=[len(pieces)])
    eos = len(pieces)
    cg = compile_cfg(lark_to_cfg(text), vocab)
    finished = 0
    for _ in range(15):
        m = cg.matcher()
        toks = sample_under_mask(m, rng, eos=eos)
        if toks is not None:
            finished += 1
            data = b"".join(pieces[t] for t in toks)
            assert lark_accepts(parser, data), (text, data)
    # Lark-accepted strings are accepted byte by byte, and EOS exactly at the end
    for k in range(6):
        for tup in itertools.product("abcd ", repeat=k):
            s = "".join(tup).encode()
            expect = lark_accepts(parser, s)
            m = cg.matcher()
            ok = all(m.advance(pieces.index(bytes([c]))) for c in s)
            if expect:
                assert ok and m.is_accepting(), (text, s)
            elif ok:
                assert not m.is_accepting(), (text, s)


# ---------------------------------------------------------------- corpus generator for shipped grammars

def dfa_sample(dfa, rng, max_len=12):
    for _ in range(50):
        s, out = dfa.start, bytearray()
        while True:
            if dfa.accepting[s] and (rng.random() < 0.35 or not (dfa.transitions[s] >= 0).any()):
                return bytes(out)
            if len(out) >= max_len:
                break
            cls = [c for c in range(dfa.n_classes) if dfa.transitions[s, c] >= 0]
            c = rng.choice(cls)
            bs = [b for b in range(256) if dfa.byte_class[b] == c]
            printable = [b for b in bs if 32 <= b < 127] or bs
            b = rng.choice(printable)
            out.append(b)
            s = int(dfa.transitions[s, c])
    return None


def generate_sentence(cg, rng, max_depth=7):
    """A random derivation of the normalised grammar, terminals sampled from their DFAs."""
    from structgen.cfg.terminals import build

    norm = cg.norm
    dfas = {}

    def term(t):
        if t not in dfas:
            dfas[t] = build(norm.terminals[t])
        return dfa_sample(dfas[t], rng)

    def derive(sym, depth):
        if sym in norm.terminals:
            w = term(sym)
            if w is None:
                raise RecursionError
            return w
        alts = norm.rules[sym]
        if depth > max_depth:
            alts = sorted(alts, key=len)[:1]
        rhs = rng.choice(alts)
        return b"".join(derive(s, depth + 1) for s in rhs)

    for _ in range(20):
        try:
            return derive(norm.start, 0)
        except RecursionError:
            continue
    return None


SHIPPED = ["json", "sql", "arithmetic", "c_subset", "csv", "sexpr", "robot"]


@pytest.fixture(scope="module")
def llama3():
    from tests.helpers import load_vocab

    return load_vocab("llama3")


def corpus(name, cg, n, seed=0):
    parser = oracle(grammars.load(name))
    rng = random.Random(seed)
    out = []
    tries = 0
    while len(out) < n and tries < 20 * n:
        tries += 1
        s = generate_sentence(cg, rng)
        if s is not None and len(s) < 200 and lark_accepts(parser, s):
            out.append(s)
    return out


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_grammar_corpus_on_llama3(name, llama3):
    cg = compile_cfg(lark_to_cfg(grammars.load(name)), llama3)
    sents = corpus(name, cg, 6)
    assert len(sents) >= 3
    for s in sents:
        ids = llama3.encode(s.decode("utf-8"))
        m = cg.matcher()
        for i, t in enumerate(ids):
            w = m.mask_words()
            assert (w[t >> 5] >> (t & 31)) & 1, (name, s, i)
            assert m.advance(t), (name, s, i)
        assert m.is_accepting(), (name, s)
        assert m.advance(int(llama3.eos_ids[0])) and m.is_terminated()


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("tok", ["gpt2", "llama2", "qwen2.5", "qwen3", "mistral"])
def test_shipped_grammar_corpus_other_vocabularies(name, tok):
    from tests.helpers import load_vocab

    vocab = load_vocab(tok)
    cg = compile_cfg(lark_to_cfg(grammars.load(name)), vocab)
    parser = oracle(grammars.load(name))
    for s in corpus(name, cg, 3, seed=1):
        ids = vocab.encode(s.decode("utf-8"))
        data = vocab.decode(ids)  # SentencePiece may add a leading space
        expect = lark_accepts(parser, data)
        m = cg.matcher()
        ok = all(m.advance(t) for t in ids)
        assert ok == expect or (not expect and not m.is_accepting()), (name, tok, data)
        if expect:
            assert m.is_accepting()


@pytest.mark.parametrize("name", ["json", "sql", "arithmetic", "csv", "sexpr", "robot"])
def test_mask_agrees_with_advance_on_llama3(name, llama3):
    """At every prefix of a corpus sentence: mask bit <=> advance succeeds (sampled tokens)."""
    cg = compile_cfg(lark_to_cfg(grammars.load(name)), llama3)
    rng = np.random.default_rng(0)
    normal = np.flatnonzero(llama3.is_normal)
    for s in corpus(name, cg, 2, seed=2):
        m = cg.matcher()
        for t in llama3.encode(s.decode("utf-8")):
            w = m.mask_words()
            bits = np.unpackbits(w.view(np.uint8), bitorder="little")
            allowed = np.flatnonzero(bits)
            probe = np.concatenate([rng.choice(normal, 150), rng.choice(allowed, min(100, allowed.size))])
            for p in probe.tolist():
                ok = m.advance(p)
                if ok:
                    m.rollback(1)
                assert ok == bool(bits[p]), (name, llama3.token_bytes(p))
            assert m.advance(t)


@pytest.mark.parametrize("tok", ["llama3", "gpt2", "qwen2.5", "llama2", "mistral"])
def test_sampled_sentences_parse(tok):
    """Random logits under the mask (steered to finish) on a real vocabulary parse with Lark."""
    from tests.helpers import load_vocab

    vocab = load_vocab(tok)
    for name in ["json", "arithmetic", "robot", "csv", "sexpr"]:
        cg = compile_cfg(lark_to_cfg(grammars.load(name)), vocab)
        parser = oracle(grammars.load(name))
        rng = random.Random(3)
        eos = int(vocab.eos_ids[0])
        finished = 0
        for _ in range(4):
            m = cg.matcher()
            toks = []
            for step in range(60):
                allowed = m.allowed_tokens()
                if eos in allowed and (step > 5 or rng.random() < 0.2):
                    break
                cand = allowed[allowed != eos]
                if step > 15:  # steer towards an end: prefer one-byte tokens that close things
                    short = [t for t in cand.tolist() if vocab.token_bytes(t) in (b'"', b"}", b"]", b")", b"0", b"\n")]
                    cand = np.array(short) if short else cand
                t = int(rng.choice(cand.tolist()))
                assert m.advance(t)
                toks.append(t)
            if m.is_accepting():
                finished += 1
                assert lark_accepts(parser, vocab.decode(toks)), (name, vocab.decode(toks))
        assert finished >= 1, name


# ---------------------------------------------------------------- matcher contract

def test_rollback_fork_validate_replay(llama3):
    cg = compile_cfg(lark_to_cfg(grammars.load("json")), llama3)
    ids = llama3.encode('{"a": [1, 2.5, {"b": null}], "c": "x y"}')
    m = cg.matcher()
    masks = [m.mask_words().copy()]
    for t in ids:
        assert m.advance(t)
        masks.append(m.mask_words().copy())
    assert m.is_accepting()
    rng = random.Random(0)
    for _ in range(10):
        k = rng.randint(0, len(ids))
        f = m.fork()
        f.rollback(k)
        assert np.array_equal(f.mask_words(), masks[len(ids) - k])
        assert f.validate(ids[len(ids) - k:]) == k
        assert np.array_equal(f.mask_words(), masks[len(ids) - k])
        assert f.advance_many(ids[len(ids) - k:]) == k and f.is_accepting()
    # m is untouched by its forks
    assert np.array_equal(m.mask_words(), masks[-1])
    # a rejected token leaves the state unchanged
    bad = llama3.encode("}}")[0]
    m2 = cg.matcher()
    assert not m2.advance(bad) and np.array_equal(m2.mask_words(), masks[0])
    # EOS only when accepting; terminated afterwards; rollback revives
    eos = int(llama3.eos_ids[0])
    assert not m2.advance(eos)
    assert m.advance(eos) and m.is_terminated() and not m.advance(ids[0])
    m.rollback(1)
    assert not m.is_terminated() and m.is_accepting()
    with pytest.raises(ValueError):
        m.rollback(len(ids) + 5)


def test_fill_bitmask_numpy_and_torch(llama3):
    import torch

    cg = compile_cfg(lark_to_cfg(grammars.load("arithmetic")), llama3)
    m = cg.matcher()
    words = (llama3.logits_width + 31) // 32
    a = np.zeros((2, words), np.int32)
    b = torch.zeros((2, words), dtype=torch.int32)
    m.fill_bitmask(a, 1)
    m.fill_bitmask(b, 0)
    assert np.array_equal(a[1], b[0].numpy()) and not a[0].any()
    ok = np.flatnonzero(np.unpackbits(a[1].view(np.uint8), bitorder="little"))
    assert all(llama3.token_bytes(t)[:1] in b" (-0123456789abcdefghijklmnopqrstuvwxyz" for t in ok.tolist())


def test_forced_tokens(llama3):
    cg = compile_cfg(lark_to_cfg('start: "SELECT" " " NAME " FROM" " " NAME\nNAME: /[a-z]+/\n'), llama3)
    m = cg.matcher()
    forced = m.forced_tokens()
    assert llama3.decode(forced) and b"SELECT ".startswith(llama3.decode(forced))
    for t in forced:
        assert m.advance(t)
    assert m.forced_bytes() == b"SELECT "[len(llama3.decode(forced)):]


def test_gbnf_engine_matches_oracle():
    text = r'''root ::= "(" inner ")" | "x"
inner ::= root ("," root)* | ""
'''
    cg = compile_cfg(gbnf_to_cfg(text), Vocabulary.from_bytes([b"(", b")", b",", b"x", b"(x", b"x)", b""], eos_ids=[6]))
    lark = oracle('start: "(" inner ")" | "x"\ninner: start ("," start)* |\n')
    for k in range(7):
        for tup in itertools.product("(),x", repeat=k):
            s = "".join(tup).encode()
            m = cg.matcher()
            ok = all(m.advance(b"(),x".index(c)) for c in s)
            assert (ok and m.is_accepting()) == lark_accepts(lark, s), s


# ---------------------------------------------------------------- fast masks vs the slow reference walk

def reference_words(m) -> np.ndarray:
    """The mask by brute force over the trie: the parser stepped at every node (trie_walks.full_walk)."""
    from structgen.cfg import trie_walks as tw

    e = m.engine
    tr = e.trie
    depth = int(tr.max_depth) + 2
    cap = 1 << 14
    while True:
        words = np.zeros(e.words, np.uint32)
        items = np.empty((m._items.shape[0] + cap * 8, 2), np.int32)
        items[:m._items.shape[0]] = m._items
        set_off = np.zeros(m._n_sets + depth * 2 + 2, np.int32)
        set_off[:m._n_sets + 1] = m._set_off[:m._n_sets + 1]
        lvl = [np.zeros(depth, np.int64) for _ in range(3)]
        r = tw.full_walk(1, tr.node_depth.shape[0], m._n_sets, m._front, m._front.shape[0], items, set_off,
                         np.empty((cap, 2), np.int32), np.empty((cap, 2), np.int32), *lvl,
                         *e._trie_args, words, *e._args, np.zeros_like(m._mark), np.zeros(2, np.int64))
        if r == 0:
            if m.is_accepting():
                for t in e.eos.tolist():
                    words[t >> 5] |= np.uint32(1 << (t & 31))
            return words
        cap *= 4


@pytest.mark.parametrize("name,which", [("sql", 2), ("c_subset", 0), ("json", 1), ("sql_ignore_ws", 0)])
def test_mask_equals_reference_walk_on_llama3(name, which, llama3):
    """mask_words (cached lexer walks + parser at boundaries + pruning) equals the walk
    that steps the parser at every trie node, at every prefix of a benchmark sentence.
    ``sql_ignore_ws`` is the SQL grammar with an ignored whitespace terminal: a name can end
    after every byte of an identifier token and another start there, the nested boundary
    lists that :func:`structgen.cfg.mask.union_walk` walks once."""
    import importlib.util
    import pathlib

    here = pathlib.Path(__file__).resolve().parent
    path = here.parent / "benchmarks" / "bench_grammar.py"
    spec = importlib.util.spec_from_file_location("bench_grammar", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    if name == "sql_ignore_ws":
        text, sentence = (here / "data" / "sql_ignore_ws.lark").read_text(), bench.SENTENCES["sql"][which]
    else:
        text, sentence = grammars.load(name), bench.SENTENCES[name][which]
    cg = compile_cfg(lark_to_cfg(text), llama3)
    ids = llama3.encode(sentence)[:24]
    _check_prefixes(cg, ids, llama3, name)


def test_mask_equals_reference_walk_for_counted_strings(llama3):
    """JSON Schema strings that count characters (maxLength 200 and 90, an unbounded one):
    from such states a root walk takes the bits of the tokens made only of string characters
    from a per-vocabulary table by length and skips their subtrees
    (mask.chain_budget); masks still equal the reference walk at every prefix."""
    import json

    import structgen as sg

    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 200},
                                               "b": {"type": "string", "minLength": 2, "maxLength": 9},
                                               "c": {"type": "string"}},
              "required": ["a", "b", "c"], "additionalProperties": False}
    g = sg.Grammar.from_json_schema(schema, engine="cfg", whitespace="flexible")
    cg = compile_cfg(g.cfg, llama3, slicing=g.slicing)  # the JSON front end's run characters
    text = json.dumps({"a": "lorem ipsum dolor sit amet " * 6 + "x" * 30, "b": "\u00e9t\u00e9 ",
                       "c": "caf\u00e9 \"au\" lait " * 4})
    _check_prefixes(cg, llama3.encode(text), llama3, "counted")
    chain = cg.runs()[0]
    assert (chain > 0).sum() > 100 and (chain == -1).any()  # counted states met, others refused


def _check_prefixes(cg, ids, llama3, name):
    m = cg.matcher()
    for i, t in enumerate(ids):
        fast = m.mask_words()
        ref = reference_words(m)
        assert np.array_equal(fast, ref), (name, i, llama3.decode(ids[:i]))
        assert m.advance(t)
    assert m.is_accepting() or name != "counted"


def test_mask_cache_is_bounded(llama3):
    """A tiny max_cache_bytes clears the cache repeatedly; the masks do not change."""
    text = grammars.load("sql")
    big = compile_cfg(lark_to_cfg(text), llama3)
    small = compile_cfg(lark_to_cfg(text), llama3, max_cache_bytes=1 << 16)
    ids = llama3.encode("SELECT a.x, COUNT(*) FROM t AS a WHERE a.y IN (1, 2) ORDER BY x;")
    mb, ms = big.matcher(), small.matcher()
    for t in ids:
        assert np.array_equal(mb.mask_words(), ms.mask_words())
        assert mb.advance(t) and ms.advance(t)
    assert small.cache.clears > 0 and big.cache.clears == 0
    assert small.cache.nbytes() < big.cache.nbytes()


def test_prefill_stops_when_the_cache_is_cleared(llama3):
    """A prefill that outgrows max_cache_bytes stops at the clear (its list ids would point
    into the emptied pools: it used to read out of bounds); masks after it are unchanged."""
    text = grammars.load("sql")
    small = compile_cfg(lark_to_cfg(text), llama3, max_cache_bytes=1 << 20)
    small.cache.prefill(small, 60.0)
    assert small.cache.clears == 1 and not small.cache.prefilled  # it stopped at the first clear
    from structgen.cfg import mask as mk

    snap = small.cache.snap  # every cached entry names a list that exists
    keys = snap.ht_keys[snap.ht_keys >= 0]
    assert (keys // small.tables.trans.shape[0] < snap.cnt[mk.C_BL]).all()
    big = compile_cfg(lark_to_cfg(text), llama3)
    mb, ms = big.matcher(), small.matcher()
    for t in llama3.encode("SELECT a.x FROM t WHERE a.y IN (1, 2);"):
        assert np.array_equal(mb.mask_words(), ms.mask_words())
        assert mb.advance(t) and ms.advance(t)


def _forced_bytes_brute(m, limit=64) -> bytes:
    f = m.fork()
    out = bytearray()
    while len(out) < limit and not f.is_accepting():
        ok = [b for b in range(256) if f.advance_bytes(bytes([b])) and (f.rollback(1) or True)]
        if len(ok) != 1:
            break
        out.append(ok[0])
        f.advance_bytes(bytes(ok))
    return bytes(out)


@pytest.mark.parametrize("text,prefix", [
    ('start: "SELECT" " " NAME " FROM" " " NAME\nNAME: /[a-z]+/\n', b""),
    ('start: "SELECT" " " NAME " FROM" " " NAME\nNAME: /[a-z]+/\n', b"SELECT ab"),
    ('start: "(" start ")" | "x" "yz"\n', b"((x"),
    ('start: A B\nA: /ab?/\nB: "bc"\n', b"a"),
    ('start: "key" "=" NUM ";"\nNUM: /[0-9]+/\n%ignore " "\n', b"key"),
])
def test_forced_bytes_match_brute_force(text, prefix):
    vocab = Vocabulary.from_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])
    m = compile_cfg(lark_to_cfg(text), vocab).matcher()
    assert m.advance_bytes(prefix)
    assert m.forced_bytes() == _forced_bytes_brute(m)


def test_disk_cache_round_trip(tmp_path, monkeypatch):
    from structgen import caching
    from structgen.cfg import diskcache
    from structgen.frontends import lark as lark_frontend
    from structgen.cfg.engine import normalise

    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path))
    text = grammars.load("robot")
    caching.clear_caches()  # the in-memory caches, so that the disk is asked
    a = lark_to_cfg(text)
    na, da = normalise(a)
    files = sorted(p.name for p in tmp_path.iterdir() if any(p.glob("*.pkl")))
    assert files == ["cfg-lark", "cfg-norm"]
    caching.clear_caches()
    monkeypatch.setattr(lark_frontend, "_lark_to_cfg", lambda *a: pytest.fail("the disk cache was not used"))
    b = lark_to_cfg(text)
    assert b.key() == a.key() and b.positions == a.positions
    nb, db = normalise(b)
    assert nb.key() == na.key() and set(db) == set(da)
    assert all(np.array_equal(db[k].transitions, da[k].transitions) for k in da)
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", "")
    assert diskcache.cache_dir() is None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_union_walk_equals_bucket_walks(seed, llama3):
    """The two ways a lexer state is walked below a boundary list agree: one walk per child
    (:func:`walk_kids`, by byte buckets) and one pass over the union of the subtrees
    (:func:`union_walk`) -- same tokens, same new boundary nodes -- on nested lists of
    llama3's trie (identifier prefixes, where every node is a boundary) with random
    follow-byte filters."""
    from structgen.cfg import mask as mk

    rng = np.random.default_rng(seed)
    text = (pathlib.Path(__file__).resolve().parent / "data" / "sql_ignore_ws.lark").read_text()
    cg = compile_cfg(lark_to_cfg(text), llama3)
    tb, tr = cg.tables, llama3.trie
    depth = int(tr.max_depth) + 2
    n_nodes = tr.node_depth.shape[0]
    name = tb.tstart[tb.term_names.index("NAME")]
    # nested boundary nodes: where a NAME lexeme from the root accepts and the subtree goes on
    words = np.zeros(cg.words, np.uint32)
    out = np.empty(n_nodes, np.int32)
    nmark = np.zeros(n_nodes, np.int64)
    kids0, kb0 = np.zeros(256, np.int32), np.zeros(257, np.int64)
    mk.build_kids(np.zeros(1, np.int32), np.ones(256, np.uint8), tr.node_byte, tr.node_end, kids0, kb0)
    nb = mk.walk_kids(kids0, kb0, name, tb.trans, tb.gacc, tb.gout, *cg._trie_args, np.zeros(depth, np.int32),
                      words, out, nmark, 1, np.zeros(1, np.uint8), False)
    nodes = np.sort(out[:nb])
    assert nb > 10_000
    for trial in range(4):
        u = np.sort(rng.choice(nodes, size=int(rng.integers(300, 3000)), replace=False)).astype(np.int32)
        fb = (rng.random(256) < 0.6).astype(np.uint8)
        fb[ord("a"):ord("z") + 1] = 1  # letters: the nested case
        fb[ord("'")] = 1
        g0 = [name, tb.trans[name, ord("a")]][trial] if trial < 2 else \
            int(rng.integers(tb.trans.shape[0]))
        uu = u.copy()
        kids, kb = np.zeros(n_nodes, np.int32), np.zeros(257, np.int64)
        nu, _ = mk.build_kids(uu, fb, tr.node_byte, tr.node_end, kids, kb)
        w1 = np.zeros(cg.words, np.uint32)
        o1 = np.empty(n_nodes, np.int32)
        n1 = mk.walk_kids(kids, kb, g0, tb.trans, tb.gacc, tb.gout, *cg._trie_args, np.zeros(depth, np.int32),
                          w1, o1, np.zeros(n_nodes, np.int64), 1, np.zeros(1, np.uint8), False)
        w2 = np.zeros(cg.words, np.uint32)
        o2 = np.empty(n_nodes, np.int32)
        mark = np.zeros(n_nodes, np.int64)
        mark[uu[:nu]] = 7
        n2 = mk.union_walk(uu[:nu], fb, g0, tb.trans, tb.gacc, tb.gout, *cg._trie_args, mark, 7,
                           np.zeros((depth, depth), np.int32), np.zeros(depth, np.int64), np.zeros(depth, np.uint8),
                           w2, o2)
        assert np.array_equal(w1, w2), trial
        assert np.array_equal(np.sort(o1[:n1]), o2[:n2]), trial
        assert w1.any() or trial >= 2


def test_masks_while_the_background_prefill_runs(llama3, monkeypatch):
    """Compile prefills the cache for a while, then leaves the rest to a thread; masks computed
    while it runs (and after it) equal those of an engine without one."""
    import structgen as sg
    from structgen.cfg import engine as E

    text = grammars.load("sql")
    ids = llama3.encode("SELECT a.name, COUNT(*) AS n FROM users AS a WHERE a.age >= 18 LIMIT 10;")
    plain = compile_cfg(lark_to_cfg(text), llama3).matcher()
    # the shipped SQL grammar's prefill ends within compile: leave almost all of it to the thread
    monkeypatch.setattr(E, "PREFILL_SYNC_SECONDS", 0.0005)
    for _ in range(3):
        cg = sg.compile(sg.Grammar.from_lark(text), llama3, cache=False)
        assert cg.engine.prefill_thread is not None
        m = cg.matcher()
        plain.reset()
        for t in ids:
            assert np.array_equal(m.mask_words(), plain.mask_words())
            assert m.advance(t) and plain.advance(t)
        cg.engine.prefill_thread.join()
        assert cg.engine.cache.n_entries > 0


def test_prefill_covers_first_masks(llama3):
    """Prefilled to its fixpoint (all levels), the cache holds every entry the masks at and right
    after the start need: they compute nothing.  (Compile stops at two levels or 15 ms.)"""
    import structgen as sg

    cg = sg.compile(sg.Grammar.from_lark(grammars.load("sql")), llama3, cache=False)
    if cg.engine.prefill_thread is not None:
        cg.engine.prefill_thread.join()
    cg.engine.cache.prefill(cg.engine, 60.0, levels=12)
    assert cg.engine.cache.prefilled
    n0 = cg.engine.cache.n_entries
    for text in ["", "SELECT", "SELECT a"]:
        m = cg.matcher()
        assert m.advance_bytes(text.encode())
        m.mask_words()
        assert cg.engine.cache.n_entries == n0, text


def test_boundary_lists_are_shared(llama3):
    """Entries whose lexemes end at the same nodes with the same FOLLOW bytes share one boundary
    list (its entries are then computed once): no two lists are the same after a prefill."""
    from structgen.cfg import mask as mk

    cg = compile_cfg(lark_to_cfg(grammars.load("sql")), llama3)
    cg.cache.prefill(cg, 60.0)
    s, tb = cg.cache.snap, cg.tables
    seen = set()
    for b in range(1, int(s.cnt[mk.C_BL])):
        key = (s.bl_nodes[s.bl_off[b]:s.bl_off[b + 1]].tobytes(), tb.follow[s.bl_term[b]].tobytes())
        assert key not in seen, b
        seen.add(key)
    assert len(seen) > 20


def test_compile_passes_max_states_to_the_grammar_engine(llama3):
    # (a|b)*a(a|b){8} needs 2^9 DFA states: refused under a small limit, compiled under the default
    g = sg.Grammar.from_lark('start: A\nA: /(a|b)*a(a|b){8}/\n')
    with pytest.raises(sg.LimitExceeded, match="max_states=50"):
        sg.compile(g, llama3, max_states=50, cache=False)
    m = sg.compile(g, llama3, cache=False).matcher()
    assert m.advance_bytes(b"ba" + b"b" * 8) and m.is_accepting()


def test_set_duplicates_found_by_table_and_by_scan_alike():
    """earley.add_item: a set built with the duplicate table (the lattice's large sets), with a
    table too small for it (the scan takes over past half its slots) and without one holds the
    same items in the same order."""
    from structgen.cfg import earley
    rng = np.random.default_rng(5)
    k = 7  # the set being built; origins below it
    for trial in range(20):
        pairs = [(int(rng.integers(0, 12)), int(rng.choice([k, *range(int(rng.integers(1, 7)))])))
                 for _ in range(int(rng.integers(1, 200)))]
        built = []
        for seen in (None, np.zeros(2 * 8, np.int64), np.zeros(2 * 1024, np.int64)):
            items = np.zeros((256, 2), np.int32)
            mark = np.zeros(2 * 12, np.int64)
            n = 0
            for stamp in (3, 4):  # a second set reusing the scratch under a new stamp
                n = 0
                for dr, org in pairs:
                    n = earley.add_item(items, 0, n, dr, org, k, mark, stamp, seen)
            built.append(items[:n].tolist())
        assert built[0] == built[1] == built[2]
        assert len(built[0]) == len(set(pairs))


def _random_chart(rng, n_sets, n_dr, NN):
    """A chart of ``n_sets`` random sets (items ``(dotted rule, origin <= set)``) and random
    next symbols (-1: the rule is complete) over ``NN`` nonterminals and a few terminals."""
    from structgen.cfg import earley
    sizes = rng.integers(0, 3 * earley.SCAN_BELOW, n_sets)  # scanned and indexed sets
    set_off = np.zeros(n_sets + 2, np.int32)
    set_off[1:n_sets + 1] = np.cumsum(sizes)
    items = np.zeros((int(set_off[n_sets]) + 1, 2), np.int32)
    for k in range(n_sets):
        for p in range(set_off[k], set_off[k + 1]):
            items[p] = int(rng.integers(0, n_dr)), int(rng.integers(0, k + 1))
    dr_next = rng.integers(-1, NN + 4, n_dr).astype(np.int32)
    dr_lhs = rng.integers(0, NN, n_dr).astype(np.int32)
    return items, set_off, dr_next, dr_lhs


def _index(slots, pool):
    return (np.zeros(slots, np.int64), np.full(slots, -1, np.int64), np.empty(slots, np.int32),
            np.empty((pool, 2), np.int32))


def test_waiter_index_chains_are_the_scans():
    """earley.waiters: the chain of set o's items waiting for x is the scan of set o for them, in
    the set's order, looked up cold or warm, in any order of sets, and again under the next
    mask's stamp after the chart changed; an index too small answers INDEX_FULL."""
    from structgen.cfg import earley
    rng = np.random.default_rng(11)
    for trial in range(30):
        NN = int(rng.integers(1, 8))
        items, set_off, dr_next, dr_lhs = _random_chart(rng, int(rng.integers(1, 9)), int(rng.integers(1, 40)), NN)
        n_sets = set_off.shape[0] - 2
        wx = _index(1024, 1024)
        stampbox = np.zeros(4, np.int64)
        for mask in range(2):
            stampbox[1] += 1
            stampbox[2:4] = 0
            if mask:  # the next mask: another chart in the same arrays
                items[:, 0] = rng.permutation(items[:, 0])
            for _ in range(3 * n_sets * (NN + 4)):
                o, x = int(rng.integers(0, n_sets)), int(rng.integers(0, NN + 4))
                e = earley.waiters(o, x, items, set_off, dr_next, wx, stampbox)
                chain = []
                while e >= 0:
                    chain.append(int(wx[3][e, 0]))
                    e = wx[3][e, 1]
                assert e == -1
                want = [p for p in range(set_off[o], set_off[o + 1]) if dr_next[items[p, 0]] == x]
                assert chain == want, (trial, o, x)
        big = max(range(n_sets), key=lambda o: set_off[o + 1] - set_off[o])
        if set_off[big + 1] - set_off[big] > 4:
            stampbox[1] += 1
            stampbox[2:4] = 0
            assert earley.waiters(big, 0, items, set_off, dr_next, _index(1024, 4), stampbox) == earley.INDEX_FULL
            assert earley.waiters(big, 0, items, set_off, dr_next, _index(4, 1024), stampbox) == earley.INDEX_FULL


def test_signature_through_the_waiter_index_is_the_scanned_one():
    """earley.signature reads the same items of set j through the index (sets of SCAN_BELOW
    items and more) as by scanning it."""
    from structgen.cfg import earley
    rng = np.random.default_rng(12)
    for trial in range(30):
        NN = int(rng.integers(1, 8))
        items, set_off, dr_next, dr_lhs = _random_chart(rng, int(rng.integers(1, 9)), int(rng.integers(1, 40)), NN)
        stampbox = np.array([0, 1, 0, 0], np.int64)
        wx = _index(1024, 1024)
        for j in range(set_off.shape[0] - 2):
            for sym in range(NN, NN + 4):
                a, b = np.zeros(4096, np.int64), np.zeros(4096, np.int64)
                sa, sb = np.zeros(64, np.int32), np.zeros(64, np.int32)
                na = earley.signature(items, set_off, j, sym, NN, dr_next, dr_lhs, a, sa)
                nb = earley.signature(items, set_off, j, sym, NN, dr_next, dr_lhs, b, sb, wx, stampbox)
                assert na == nb and a[:na].tolist() == b[:nb].tolist(), (trial, j, sym)


def test_frontier_signature_is_the_scanned_signatures_in_frontier_order():
    """earley.frontier_signature reads big origin sets through an index of its own: its key is
    still ``[g, n, signature...]`` per frontier lexeme with each signature the scanned one, -1
    when one of them is too long, over frontiers that share origin sets, big and small."""
    from structgen.cfg import earley
    rng = np.random.default_rng(21)
    checked = failed = 0
    for trial in range(40):
        NN = int(rng.integers(1, 8))
        n_sets = int(rng.integers(1, 9))
        items, set_off, dr_next, dr_lhs = _random_chart(rng, n_sets, int(rng.integers(1, 40)), NN)
        gterm = rng.integers(0, 4, 6).astype(np.int32)
        nf = int(rng.integers(1, 40))
        front = np.stack([rng.integers(0, 6, nf), rng.integers(0, n_sets, nf)], 1).astype(np.int32)
        want = []
        for q in range(nf):
            tmp, syms = np.zeros(earley.ALIAS_SIGNATURE, np.int64), np.zeros(earley.ALIAS_SIGNATURE, np.int32)
            ns = earley.signature(items, set_off, int(front[q, 1]), NN + int(gterm[front[q, 0]]), NN, dr_next,
                                  dr_lhs, tmp, syms)
            if ns < 0:
                want = None
                break
            want += [int(front[q, 0]), ns] + tmp[:ns].tolist()
        out = np.zeros(4096, np.int64)
        n = earley.frontier_signature(front, nf, items, set_off, NN, dr_next, dr_lhs, gterm, out)
        if want is None:
            assert n == -1, trial
            failed += 1
        else:
            assert out[:n].tolist() == want, trial
            checked += any(set_off[j + 1] - set_off[j] >= earley.SCAN_BELOW for j in front[:, 1])
    assert checked >= 10 and failed >= 1


def test_masks_alike_when_the_waiter_index_starts_tiny(llama3, monkeypatch):
    """A matcher whose waiter index starts at 4 slots grows it (the mask kernel answers
    SCRATCH_FULL and is rerun) and computes the same masks along a sentence of a grammar
    with long completion chains."""
    import structgen as sg
    from structgen.cfg import matcher as cm

    g = sg.Grammar.from_lark(grammars.load("sql"))
    text = b"SELECT a, b FROM t WHERE (a = 1 AND b > 2) OR c < 3 ORDER BY a"
    masks = []
    for slots in (cm.INDEX_SLOTS, 4):
        monkeypatch.setattr(cm, "INDEX_SLOTS", slots)
        cg = sg.compile(g, llama3, cache=False)
        m = cg.matcher()
        got = [m.mask_words().copy()]
        for i in range(0, len(text), 5):
            assert m.advance_bytes(text[i:i + 5])
            got.append(m.mask_words().copy())
        masks.append(got)
    assert len(masks[0]) == len(masks[1])
    for a, b in zip(*masks):
        assert np.array_equal(a, b)


def test_mask_scratch_growth_is_bounded(llama3, monkeypatch):
    """The per-mask scratch tables double on demand up to matcher.MAX_SCRATCH_ROWS, then the mask
    ends in LimitExceeded naming that limit (instead of doubling until memory runs out)."""
    import structgen as sg
    from structgen.cfg import matcher as cm

    monkeypatch.setattr(cm, "INDEX_SLOTS", 4)
    monkeypatch.setattr(cm, "MAX_SCRATCH_ROWS", 8)
    cg = sg.compile(sg.Grammar.from_lark(grammars.load("sql")), llama3, cache=False)
    m = cg.matcher()
    assert m.advance_bytes(b"SELECT a, b FROM t WHERE (a = 1 AND ")
    with pytest.raises(sg.LimitExceeded, match="scratch") as e:
        m.mask_words()
    assert e.value.limit == "mask scratch rows" and e.value.value == 8
