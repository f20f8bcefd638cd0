"""completable(): exact against brute force over every filling of the holes.

Oracles: the autoregressive matcher (token by token, every filling enumerated depth first),
and independently Python's ``regex`` (partial and full matches) for regexes and Lark's Earley
parser for whole sentences of grammars, on tiny vocabularies that spell every character
of their alphabet (so a byte prefix is a token prefix)."""
from __future__ import annotations

import itertools

import lark
import numpy as np
import pytest
import regex
import torch
from transformers import AutoTokenizer
from hypothesis import HealthCheck, given, settings, strategies as st

import structgen as sg
from structgen.diffusion import completable
from structgen.errors import LimitExceeded

M = 1000  # the hole id (outside the tiny vocabularies)


def _vocab(tokens):
    toks = [t.encode() for t in tokens] + [None]
    return sg.Vocabulary.from_bytes(toks, eos_ids=[len(tokens)]), len(tokens)


def brute(cg, canvas, final, start=None):
    """Some filling of the holes that the AR matcher accepts token by token (EOS rules:
    after the first EOS only EOS; ``final``: accepting at the end or ended by EOS)."""
    vocab = cg.vocab
    eos = set(vocab.eos_ids)
    ids = list(range(vocab.logits_width))
    n = len(canvas)

    def rec(m, i):
        if i == n:
            return (m.is_accepting() or m.is_terminated()) if final else True
        for t in (ids if canvas[i] == M else [canvas[i]]):
            if m.is_terminated():
                if t in eos and rec(m, i + 1):
                    return True
                continue
            if m.advance(t):
                ok = rec(m, i + 1)
                m.rollback(1)
                if ok:
                    return True
        return False

    return rec(cg.matcher() if start is None else start.fork(), 0)


def brute_from(cg, matcher, canvas, final):
    return brute(cg, canvas, final, start=matcher)


def fillings(vocab, canvas):
    ids = list(range(vocab.logits_width))
    out = [[]]
    for t in canvas:
        out = [f + [x] for f in out for x in (ids if t == M else [t])]
    return out


def text_of(vocab, filled):
    """(text before the first EOS, EOS rules kept?)."""
    eos = set(vocab.eos_ids)
    if any(t in eos for t in filled):
        k = next(i for i, t in enumerate(filled) if t in eos)
        if not all(t in eos for t in filled[k:]):
            return None, False
        filled = filled[:k]
        ended = True
    else:
        ended = False
    return b"".join(vocab.token_bytes(t) for t in filled).decode("utf-8", "replace"), ended


def canvases(n_tokens, max_len=7, max_holes=4):
    tok = st.integers(0, n_tokens)  # n_tokens is EOS
    cell = st.one_of(tok, st.just(M))
    return st.lists(cell, min_size=0, max_size=max_len).filter(lambda c: c.count(M) <= max_holes)


# ----------------------------------------------------------------------------- regexes
REGEXES = [r"(ab|a)*c", r"[ab]{2,4}", r"a(b|cd)*e?", r"(aa|b)+", r"x|xy|xyz"]
REGEX_TOKENS = ["a", "b", "c", "d", "e", "x", "y", "z", "ab", "ca", "bc"]


@pytest.mark.parametrize("pattern", REGEXES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_regex_equals_brute_force(pattern, data):
    vocab, eos = _vocab(REGEX_TOKENS)
    cg = sg.compile(sg.Grammar.from_regex(pattern), vocab)
    canvas = data.draw(canvases(len(REGEX_TOKENS), max_holes=3))
    for final in (False, True):
        got = completable(cg, canvas, mask_token_id=M, final=final)
        assert got == brute(cg, canvas, final), (canvas, final)


@pytest.mark.parametrize("pattern", REGEXES[:3])
def test_regex_equals_python_regex(pattern):
    """Independent oracle: ``regex`` partial matching (prefix) and fullmatch (sentence)."""
    toks = ["a", "b", "c", "d", "e", "ab"]
    vocab, eos = _vocab(toks)
    cg = sg.compile(sg.Grammar.from_regex(pattern), vocab)
    rx = regex.compile(pattern)
    rng = np.random.default_rng(0)
    for _ in range(60):
        n = int(rng.integers(1, 6))
        canvas = [M if rng.random() < 0.4 else int(rng.integers(0, len(toks) + 1)) for _ in range(n)]
        if canvas.count(M) > 3:
            continue
        for final in (False, True):
            want = False
            for f in fillings(vocab, canvas):
                text, ended = text_of(vocab, f)
                if text is None:
                    continue
                if final or ended:
                    ok = rx.fullmatch(text) is not None
                else:
                    ok = rx.fullmatch(text, partial=True) is not None
                if ok:
                    want = True
                    break
            assert completable(cg, canvas, mask_token_id=M, final=final) == want, (canvas, final)


# ----------------------------------------------------------------------------- grammars
GRAMMARS = {
    # "(((" and "(()" make Earley sets inside a token that only later sets refer to ("((" is no token)
    "brackets": ('start: | "(" start ")" start', ["(", ")", "()", ")(", "(((", "(()"]),
    "arith": ('start: e\ne: e "+" t | t\nt: t "*" f | f\nf: "(" e ")" | NUM\nNUM: /[0-9]+/',
              ["1", "2", "+", "*", "(", ")", "12", "+1", "1*", ")+"]),
    "json": ('start: value\n?value: obj | arr | STR | NUM\nobj: "{" [pair ("," pair)*] "}"\n'
             'pair: STR ":" value\narr: "[" [value ("," value)*] "]"\nSTR: /"[ab]*"/\nNUM: /[0-9]+/',
             ['{', '}', '[', ']', '"', 'a', ':', ',', '1', '"a', '":', '],', '{"']),
    "left_rec": ('start: start "a" | "b" | start "c" start', ["a", "b", "c", "ab", "ca", "bb"]),
    "ambiguous": ('start: x x x?\nx: "a" | "aa" | W\nW: /b+/', ["a", "b", "aa", "ab", "ba", "bb"]),
    "words": ('start: W (" "? W)*\nW: /[ab]+/', ["a", "b", " ", "ab", "b ", " a"]),
}


@pytest.fixture(scope="module")
def grammars():
    out = {}
    for name, (text, toks) in GRAMMARS.items():
        vocab, _ = _vocab(toks)
        out[name] = (sg.compile(sg.Grammar.from_lark(text), vocab), lark.Lark(text, parser="earley", lexer="dynamic_complete"), toks)
    return out


@pytest.mark.parametrize("name", list(GRAMMARS))
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_grammar_equals_brute_force(grammars, name, data):
    cg, _, toks = grammars[name]
    canvas = data.draw(canvases(len(toks)))
    for final in (False, True):
        got = completable(cg, canvas, mask_token_id=M, final=final)
        assert got == brute(cg, canvas, final), (name, canvas, final)


@pytest.mark.parametrize("name", ["brackets", "arith", "json", "ambiguous"])
def test_grammar_sentences_equal_lark(grammars, name):
    """Independent oracle for ``final=True``: some filling parses with Lark."""
    cg, parser, toks = grammars[name]
    vocab = cg.vocab
    rng = np.random.default_rng(1)
    seen = 0
    for _ in range(40):
        n = int(rng.integers(1, 6))
        canvas = [M if rng.random() < 0.45 else int(rng.integers(0, len(toks) + 1)) for _ in range(n)]
        if canvas.count(M) > 3:
            continue
        want = False
        for f in fillings(vocab, canvas):
            text, _ = text_of(vocab, f)
            if text is None:
                continue
            try:
                parser.parse(text)
            except lark.exceptions.LarkError:
                continue
            want = True
            break
        seen += want
        assert completable(cg, canvas, mask_token_id=M, final=True) == want, (name, canvas)
    assert seen > 0


def test_the_oracle_can_fail(grammars):
    """The comparison has teeth: a checker that ignores what follows a hole differs from brute force."""
    cg, _, toks = grammars["brackets"]
    canvas = [M, 1, 1, 1, 1]  # four ")" after any one token: never a prefix
    assert not brute(cg, canvas, False)
    assert not completable(cg, canvas, mask_token_id=M)
    assert brute(cg, canvas[:4], False) and completable(cg, canvas[:4], mask_token_id=M)  # "(((" ")))"


# ----------------------------------------------------------------------------- EOS and details
def test_eos_rules(grammars):
    cg, _, toks = grammars["brackets"]
    eos = len(toks)
    o, c = toks.index("("), toks.index(")")
    assert completable(cg, [o, c, eos, eos], mask_token_id=M, final=True)
    assert not completable(cg, [o, c, eos, o], mask_token_id=M)          # a token after EOS
    assert completable(cg, [o, c, eos, M], mask_token_id=M, final=True)  # the hole is EOS
    assert not completable(cg, [o, eos], mask_token_id=M)                # EOS where not accepting
    assert completable(cg, [o, M, eos], mask_token_id=M, final=True)     # "(" ")" EOS
    assert not completable(cg, [o, M], mask_token_id=M, final=True) or brute(cg, [o, M], True)
    assert completable(cg, [M, M], mask_token_id=M, final=True)          # EOS EOS: the empty sentence
    assert completable(cg, [], mask_token_id=M, final=True)
    # extra EOS ids (a model's pad id)
    assert completable(cg, [o, c, 4], mask_token_id=M, final=True, eos_ids=[eos, 4])


def test_inputs_and_state(grammars):
    cg, _, toks = grammars["arith"]
    can = [toks.index("1"), M, toks.index("2")]
    assert completable(cg, torch.tensor(can), mask_token_id=M)
    assert completable(cg, np.array(can), mask_token_id=M, final=True)
    m = cg.matcher()
    assert m.advance(toks.index("("))
    # from the matcher's point: "(" then "1+" and one token never ends; two tokens can ("2" ")")
    can = [toks.index("1"), toks.index("+"), M]
    assert completable(cg, can, mask_token_id=M, state=m)
    assert not completable(cg, can, mask_token_id=M, state=m, final=True)
    assert not brute_from(cg, m, can, True)
    assert completable(cg, can + [M], mask_token_id=M, state=m, final=True)
    assert m.accepted_tokens() == 1  # not moved
    with pytest.raises(sg.TokenError):
        completable(cg, [1.5], mask_token_id=M)


def test_regular_state_ids():
    vocab, eos = _vocab(REGEX_TOKENS)
    cg = sg.compile(sg.Grammar.from_regex(r"abc"), vocab)
    m = cg.matcher()
    m.advance(REGEX_TOKENS.index("a"))
    c = REGEX_TOKENS.index("c")
    assert completable(cg, [M, c], mask_token_id=M, state=m, final=True)
    assert completable(cg, [M, c], mask_token_id=M, state=m.state, final=True)
    assert not completable(cg, [c], mask_token_id=M, state=m, final=True)


def test_limits_raise_never_guess(grammars):
    cg, _, toks = grammars["json"]
    with pytest.raises(LimitExceeded):
        completable(cg, [M, M, M, toks.index("}")], mask_token_id=M, max_nodes=3)
    with pytest.raises(LimitExceeded, match="max_work"):
        completable(cg, [M, M, M, toks.index("}")], mask_token_id=M, max_work=50)
    assert completable(cg, [M, M, M, toks.index("}")], mask_token_id=M) == brute(cg, [M, M, M, toks.index("}")], False)


def test_key_guarded_schema_uses_the_fork_search():
    """property_order="any": the key guard is outside the engine; the fork search is exact."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
              "required": ["a", "b"], "additionalProperties": False}
    toks = ['{', '}', '"a"', '"b"', ':', ',', '1', '{"a":', '1,']
    vocab, eos = _vocab(toks)
    cg = sg.compile(sg.Grammar.from_json_schema(schema, property_order="any"), vocab)
    rng = np.random.default_rng(2)
    for _ in range(15):
        n = int(rng.integers(1, 7))
        canvas = [M if rng.random() < 0.3 else int(rng.integers(0, len(toks) + 1)) for _ in range(n)]
        if canvas.count(M) > 2:
            continue
        for final in (False, True):
            assert completable(cg, canvas, mask_token_id=M, final=final) == brute(cg, canvas, final), canvas
    # a duplicate key: {"a":1,"a" can never be completed, though the grammar alone would allow it
    can = [toks.index('{"a":'), toks.index('1,'), toks.index('"a"'), M]
    assert not completable(cg, can, mask_token_id=M)
    assert completable(cg, can[:2] + [toks.index('"b"'), M], mask_token_id=M)


BYTE_GRAMMARS = {
    "brackets": 'start: | "(" start ")" start',
    "arith": 'start: e\ne: e "+" t | t\nt: t "*" f | f\nf: "(" e ")" | NUM\nNUM: /[0-9]+/',
    "words": 'start: W (" " W)* "."\nW: /[ab]+/',
}


@pytest.mark.parametrize("name", list(BYTE_GRAMMARS))
def test_tail_tests_on_a_byte_covering_vocabulary(name):
    """Every byte a token: trailing holes use the tail tests (free tail, shortest completion);
    they agree with walking every hole, and the shortest completion with a byte-level BFS."""
    extra = [b"((", b"))", b"12", b"+(", b"ab ", b"a."]
    vocab = sg.Vocabulary.from_bytes([bytes([b]) for b in range(256)] + extra + [None], eos_ids=[256 + len(extra)])
    cg = sg.compile(sg.Grammar.from_lark(BYTE_GRAMMARS[name]), vocab)
    alphabet = sorted(set(b"()+*0123456789ab ."))
    rng = np.random.default_rng(3)
    from structgen.diffusion.lattice import Chart
    for _ in range(30):
        n = int(rng.integers(0, 5))
        head = [int(rng.choice(alphabet)) if rng.random() < 0.8 else 256 + int(rng.integers(0, len(extra)))
                for _ in range(n)]
        k = int(rng.integers(1, 4))
        m = cg.matcher()
        if m.advance_many(head) < len(head):
            continue
        for final in (False, True):
            fast = completable(cg, head + [M] * k, mask_token_id=M, final=final)
            slow = completable(cg, head + [M] * k, mask_token_id=M, final=final, shortcuts=False)
            assert fast == slow, (head, k, final)
        # shortest completion by bytes, by BFS over the matcher
        ch = Chart.start(cg.engine, max_nodes=10**7, max_items=10**7)
        for t in head:
            ch.step_bytes(np.frombuffer(vocab.token_bytes(t), np.uint8))
        want = _bfs_bytes(m, alphabet, 6)
        got = ch.min_bytes()
        assert got == want or (want is None and got > 6), (head, got, want)


@pytest.mark.parametrize("name", list(BYTE_GRAMMARS))
def test_inner_holes_on_a_byte_covering_vocabulary(name):
    """Every byte a token: holes before a fixed token are first tried with single-byte tokens only
    (a witness pass); the answers equal walking every token of every hole (``shortcuts=False``,
    exact against brute force above), True and False both met."""
    extra = [b"((", b"))", b"12", b"+(", b"ab ", b"a.", b"2)", b"b b"]
    vocab = sg.Vocabulary.from_bytes([bytes([b]) for b in range(256)] + extra + [None], eos_ids=[256 + len(extra)])
    cg = sg.compile(sg.Grammar.from_lark(BYTE_GRAMMARS[name]), vocab)
    alphabet = sorted(set(b"()+*0123456789ab ."))
    rng = np.random.default_rng(11)
    seen = set()
    sentences = {"brackets": [b"(()())", b"((()))()"], "arith": [b"1+(2*3)", b"(12+4)*5"],
                 "words": [b"ab b.", b"a ba bb."]}[name]
    for _ in range(40):  # a sentence, some bytes holes, sometimes one byte changed
        canvas = list(sentences[int(rng.integers(0, len(sentences)))])
        if rng.random() < 0.4:
            canvas[int(rng.integers(0, len(canvas)))] = int(rng.choice(alphabet))
        for i in range(len(canvas) - 1):
            if rng.random() < 0.35:
                canvas[i] = M
        if M not in canvas or canvas.count(M) > 3:
            continue
        for final in (False, True):
            fast = completable(cg, canvas, mask_token_id=M, final=final)
            slow = completable(cg, canvas, mask_token_id=M, final=final, shortcuts=False)
            assert fast == slow, (canvas, final)
            seen.add(fast)
        # holes restricted to a few tokens (multi-byte ones too): against enumerating them
        holes = [i for i, t in enumerate(canvas) if t == M]
        sets = {i: sorted(set(rng.choice(alphabet, 3).tolist()) | {256 + int(rng.integers(0, len(extra)))})
                for i in holes}
        for final in (False, True):
            want = False
            for fill in itertools.product(*(sets[i] for i in holes)):
                full = list(canvas)
                for i, t in zip(holes, fill):
                    full[i] = t
                m = cg.matcher()
                if m.advance_many(full) == len(full) and (m.is_accepting() or not final):
                    want = True
                    break
            assert completable(cg, canvas, mask_token_id=M, final=final, restrict=sets) == want, (canvas, sets)
    assert seen == {True, False}


def _bfs_bytes(m, alphabet, depth):
    frontier = [m]
    for d in range(depth + 1):
        if any(x.is_accepting() for x in frontier):
            return d
        nxt = []
        for x in frontier:
            for b in alphabet:
                f = x.fork()
                if f.advance(b):
                    nxt.append(f)
        frontier = nxt[:3000]
    return None


def test_real_vocabulary_free_tail_and_holes():
    """gpt2: trailing holes cost nothing (every byte is a token); holes inside JSON strings join
    to a few points (the walk is one pass over the trie per hole)."""
    tok_path = "tests/data/tokenizers/gpt2"
    vocab = sg.Vocabulary.from_tokenizer(tok_path)
    cg = sg.compile(sg.Grammar.from_lark(sg.grammars.load("json")), vocab)
    tk = AutoTokenizer.from_pretrained(tok_path)
    H = 10**6  # (1000 is a gpt2 token)
    ids = tk.encode('{"name": "Ada", "tags": [1, 2]}')
    can = [H if tk.decode([t]) in ("Ada", " 2") else t for t in ids]
    assert can.count(H) >= 1
    assert completable(cg, can, mask_token_id=H, final=True)
    assert completable(cg, ids[:3] + [H] * 40, mask_token_id=H)
    assert completable(cg, ids[:3] + [H] * 8, mask_token_id=H, final=True)
    bad = tk.encode("[1, 2") + [H] + tk.encode("}")
    assert completable(cg, bad, mask_token_id=H)  # the hole may open a string: '[1, 2,"}'
    assert not completable(cg, bad, mask_token_id=H, final=True)  # but "}" never closes the array
    deep = tk.encode('{"a": [1, {"b": ')
    assert completable(cg, deep + [H] * 4, mask_token_id=H, final=True)  # 1}]} by the shortest completion
    assert not completable(cg, deep + [H], mask_token_id=H, final=True)


def _one_hole_brute(cg, prefix, after, final):
    """Some token h with ``prefix + [h] + after`` accepted by the matcher (``final``: and complete)."""
    m = cg.matcher()
    assert m.advance_many(prefix) == len(prefix)
    words = np.asarray(m.mask_words(), np.uint32)
    allowed = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))
    eos = set(cg.vocab.eos_ids.tolist())
    for h in allowed.tolist():
        if h in eos:
            continue
        f = m.fork()
        if f.advance(h) and f.advance_many(after) == len(after) and (f.is_accepting() or not final):
            return True
    return False


def test_hole_walks_group_what_the_lexer_cannot_tell_apart():
    """gpt2, the shipped arithmetic and sql grammars: a hole's walk steps bytes by lexer class and
    groups the trie below by how the current lexer states move, so a hole inside a name steps a
    few hundred groups, not the trie's 98k nodes; one-hole canvases agree with trying every
    allowed token through the matcher, True and False both met."""
    from structgen.diffusion.lattice import Chart, byte_classes, class_trie
    tok_path = "tests/data/tokenizers/gpt2"
    vocab = sg.Vocabulary.from_tokenizer(tok_path)
    tk = AutoTokenizer.from_pretrained(tok_path)
    H = 10**6
    arith = sg.compile(sg.Grammar.from_lark(sg.grammars.load("arithmetic")), vocab)
    rep = byte_classes(arith.engine.grammar_arrays.trans)
    assert rep[ord("q")] == rep[ord("a")] and rep[ord("7")] == rep[ord("0")] != rep[ord("a")]
    assert len({rep[ord(c)] for c in "+-*/^(),. "}) == 10
    ch = Chart.start(arith.engine, max_nodes=10**7, max_items=10**7)
    assert ch.step_bytes(np.frombuffer(b"1+x", np.uint8)) and ch.step_hole()
    # the class trie is 1/50 of the trie, and the grouping steps under half of the class trie's nodes
    assert 2 * ch.nodes < class_trie(arith.engine)[0].n_nodes < vocab.trie.n_nodes // 50
    sql = sg.compile(sg.Grammar.from_lark(sg.grammars.load("sql")), vocab)
    seen = set()
    for cg, prefix, after in [(arith, "1+", " x"), (arith, "foo", "("), (arith, "(a", "b"), (arith, "2*", ")"),
                              (arith, "f(", ",3)"), (sql, "SELECT a", " FROM t"), (sql, "SELECT a FROM", " b"),
                              (sql, "SELECT a FROM t", " WHERE"), (sql, "SELECT", ")"), (sql, "SELECT 'x", "é'")]:
        pre, aft = tk.encode(prefix), tk.encode(after)
        for final in (False, True):
            want = _one_hole_brute(cg, pre, aft, final)
            assert completable(cg, pre + [H] + aft, mask_token_id=H, final=final) == want, (prefix, after, final)
            seen.add(want)
    assert seen == {True, False}
