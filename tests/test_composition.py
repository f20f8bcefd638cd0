"""Composed grammars (sequence, alternatives, repetition, literals, special tokens) against a
brute-force oracle on tiny vocabularies: at every prefix of random walks, the mask is exactly the
set of tokens after which the text is still a prefix of a sentence, and EOS is allowed exactly on
sentences.  The oracle composes the parts' own oracles (``re.fullmatch``, Lark's Earley parser
with ``lexer="dynamic_complete"``, string equality) by splitting the string, so it knows nothing
of how structgen composes."""
from __future__ import annotations

import functools
import itertools
import random
import re

import pytest
from lark import Lark
from lark.exceptions import LarkError

import structgen as sg
from structgen.automaton import ir
from structgen.cfg.compose import trim_edges
from structgen.frontends.lark import lark_to_cfg
from structgen.vocab.vocabulary import Vocabulary

G = sg.Grammar
SPECIAL = "§"  # the special token's character in oracle strings (no ordinary token holds it)


# ----------------------------------------------------------------------------- oracles
def o_regex(pattern):
    rx = re.compile(pattern, re.S)
    return lambda s: rx.fullmatch(s) is not None


def o_lit(text):
    return lambda s: s == text


def o_lark(text, special_ok=False):
    parser = Lark(text, parser="earley", lexer="dynamic_complete")

    def accepts(s):
        if SPECIAL in s and not special_ok:
            return False
        try:
            parser.parse(s)
            return True
        except LarkError:
            return False
    return accepts


def o_seq(*parts):
    parts = [functools.lru_cache(maxsize=None)(p) for p in parts]

    def accepts(s):
        @functools.lru_cache(maxsize=None)
        def from_(k, i):
            if k == len(parts):
                return i == len(s)
            return any(parts[k](s[i:j]) and from_(k + 1, j) for j in range(i, len(s) + 1))
        return from_(0, 0)
    return accepts


def o_alt(*parts):
    return lambda s: any(p(s) for p in parts)


def o_rep(part, lo, hi):
    part = functools.lru_cache(maxsize=None)(part)

    def accepts(s):
        @functools.lru_cache(maxsize=None)
        def count_ok(i, k):  # s[i:] splits into c more parts with lo <= k + c <= hi
            if i == len(s) and k >= lo:
                return True
            if hi is not None and k >= hi:
                return False
            # an empty part only helps to reach lo
            return any(part(s[i:j]) and count_ok(j, k + 1) for j in range(i + (1 if k >= lo else 0), len(s) + 1))
        return count_ok(0, 0)
    return accepts


# ----------------------------------------------------------------------------- the check
PIECES = ["a", "b", "c", " ", "ab", "ba", "b ", " a", "<", "|t|", ">", "<|t|>x"]  # ordinary tokens
ALPHABET = "abc <>|t" + SPECIAL


def tiny_vocab(pieces=PIECES):
    """``pieces`` as ordinary tokens, then the special token ``<|t|>``, then EOS."""
    toks = [p.encode() for p in pieces] + [b"<|t|>", b"<eos>"]
    return Vocabulary.from_bytes(toks, eos_ids=[len(toks) - 1], special_ids=[len(toks) - 2])


def texts(pieces=PIECES):
    return list(pieces) + [SPECIAL]  # token id -> its text in oracle strings


def check(grammar, accepts, alphabet, n, slack, seed=0, walks=14, pieces=PIECES):
    vocab = tiny_vocab(pieces)
    eos = vocab.size - 1
    sentences = set()
    for k in range(n + 1):
        for tup in itertools.product(alphabet, repeat=k):
            s = "".join(tup)
            if accepts(s):
                sentences.add(s)
    assert sentences, "the oracle accepts nothing: a useless case"
    prefixes = {s[:i] for s in sentences for i in range(len(s) + 1)}
    cg = sg.compile(grammar, vocab)
    rng = random.Random(seed)
    pieces = texts(pieces)
    for _ in range(walks):
        m = cg.matcher()
        prefix = ""
        while True:
            allowed = set(m.allowed_tokens().tolist())
            if len(prefix) <= n:
                assert (eos in allowed) == (prefix in sentences), (prefix, eos in allowed)
            for t, text in enumerate(pieces):
                cand = prefix + text
                if cand in prefixes:
                    assert t in allowed, (prefix, text)
                elif len(cand) <= n - slack:
                    assert t not in allowed, (prefix, text)
            choices = sorted(allowed - {eos})
            if not choices or len(prefix) > n:
                break
            t = rng.choice(choices)
            assert m.advance(t)
            prefix += pieces[t]
    return cg


LARK_NEST = 'start: "a" start "b" | "c"\n'
LARK_WS = 'start: "a" "b"\n%ignore " "\n'


CASES = {
    # regular with regular, a special token in the middle: stays regular
    "regular-seq-special": (lambda: G.sequence("a", G.from_regex("b*"), G.special("<|t|>"), "a"),
                            lambda: o_seq(o_lit("a"), o_regex("b*"), o_lit(SPECIAL), o_lit("a")), "ab" + SPECIAL, 7, 2,
                            "regular"),
    "regular-alt-rep": (lambda: G.repeat(G.from_regex("ab?") | "c", 1, 3) + G.optional(" "),
                        lambda: o_seq(o_rep(o_alt(o_regex("ab?"), o_lit("c")), 1, 3), o_rep(o_lit(" "), 0, 1)),
                        "abc ", 7, 0, "regular"),
    # context-free with regular parts and a special token
    "cfg-alt": (lambda: G.from_regex("a+") | (G.from_lark(LARK_NEST) + G.special(12)),
                lambda: o_alt(o_regex("a+"), o_seq(o_lark(LARK_NEST), o_lit(SPECIAL))), "abc" + SPECIAL, 7, 5, "cfg"),
    # a Lark part's %ignore applies inside it only (trailing spaces included), not in the regex after it
    "cfg-ignore-scoped": (lambda: G.sequence(G.from_lark(LARK_WS), G.from_regex("( b)?c")),
                          lambda: o_seq(o_lark(LARK_WS), o_regex("( b)?c")), "ab c", 7, 2, "cfg"),
    # repetition of a grammar-engine part, bounded and unbounded
    "cfg-repeat": (lambda: G.repeat(G.from_lark(LARK_NEST), 1, 2) + G.repeat(G.from_regex("b|ab"), 0, None),
                   lambda: o_seq(o_rep(o_lark(LARK_NEST), 1, 2), o_rep(o_regex("b|ab"), 0, None)), "abc", 8, 5, "cfg"),
    # two Lark grammars using the same names stay apart
    "cfg-same-names": (lambda: G.from_lark('start: A\nA: "a"\n') + G.from_lark('start: A A\nA: "b"|"c"\n'),
                       lambda: o_seq(o_lark('start: A\nA: "a"\n'), o_lark('start: A A\nA: "b"|"c"\n')), "abc", 5, 0,
                       "cfg"),
    # the special token's text spelled by ordinary tokens is text, never the token
    "special-text-is-text": (lambda: G.sequence(G.optional(G.special("<|t|>")), G.from_regex("[<|t>]*")),
                             lambda: o_seq(o_rep(o_lit(SPECIAL), 0, 1), o_regex("[<|t>]*")), "<>|t" + SPECIAL, 6, 0,
                             "regular"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_composed_mask_equals_bruteforce(name):
    make, oracle, alphabet, n, slack, kind = CASES[name]
    g = make()
    assert g.resolve(tiny_vocab()).kind == kind
    check(g, oracle(), alphabet, n, slack, seed=len(name))


def test_operators_and_literals():
    a, b = G.from_regex("a"), G.from_regex("b")
    assert (a | "c").kind == "regular" and ("c" | a).kind == "regular"
    assert ("x" + a + "y").kind == "regular"
    cg = sg.compile(" " + (a | b) + "c", tiny_vocab())
    assert cg.is_regular
    with pytest.raises(TypeError):
        G.sequence(a, 3)
    with pytest.raises(sg.GrammarError):
        G.repeat(a, 3, 2)
    with pytest.raises(sg.GrammarError):
        G.alternatives()


def test_special_token_errors():
    vocab = tiny_vocab()
    with pytest.raises(sg.GrammarError, match="unknown special token"):
        sg.compile(G.special("<|nope|>"), vocab)
    with pytest.raises(sg.GrammarError, match="end-of-sequence"):
        sg.compile(G.special("<eos>"), vocab)
    with pytest.raises(sg.GrammarError, match="end-of-sequence"):
        sg.compile(G.special(vocab.size - 1), vocab)
    with pytest.raises(sg.Unsupported, match="ordinary token"):
        sg.compile(G.special(0), vocab)


def test_marker_resolves_per_vocabulary():
    """A marker is the special token where the vocabulary has it, text elsewhere."""
    with_token = tiny_vocab()
    plain = Vocabulary.from_bytes([p.encode() for p in PIECES] + [b"<eos>"], eos_ids=[len(PIECES)])
    g = G.marker("a<|t|>b")
    m = sg.compile(g, with_token).matcher()
    assert m.advance(0) and m.advance(12) and m.advance(1) and m.is_accepting()
    m = sg.compile(g, plain).matcher()
    assert m.advance(0) and m.advance(8) and m.advance(9) and m.advance(10) and m.advance(1) and m.is_accepting()


def test_trim_edges_equals_bruteforce():
    """trim_edges: the sentences of a grammar that neither start nor end with a space (nullable
    parts, left and right recursion, a terminal that is all spaces)."""
    text = 'start: x y x\nx: " "* | x "a"\ny: SP? "b" | "a" y\nSP: /[ a]+/\n'
    cfg = trim_edges(lark_to_cfg(text), ir.CharSet.of([(32, 32)]))
    lark = o_lark(text)
    check(G("cfg", cfg=cfg, key=("trimmed", text)), lambda s: lark(s) and not s.startswith(" ") and not s.endswith(" "),
          "ab ", 7, 2, seed=5)


def test_embedded_grammar_keeps_its_own_ignores():
    """Grammar.embedding (a Lark grammar's %json part): the outer %ignore goes around the embedded
    grammar's text, never inside it, and the embedded grammar's own %ignore stays inside it."""
    outer = lark_to_cfg('start: "a" X "b"\nX: "@"\n%ignore " "\n')
    nested = G.from_lark('start: "c" start "a" | "b"\n%ignore "c"\n')  # (ignores "c" between its lexemes)
    g = G.embedding(outer, {"X": nested}, ("embedding-test",))
    assert g.kind == "cfg"
    inner = o_lark('start: "c" start "a" | "b"\n%ignore "c"\n')
    check(g, o_seq(o_regex(" *a *"), inner, o_regex(" *b *")), "abc ", 7, 3, seed=11)
