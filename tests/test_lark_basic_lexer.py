"""Grammar.from_lark(..., lexer="basic"): Lark's basic lexer (first terminal in Lark's order,
its longest match, keywords reclassified from names) against Lark's Earley parser with
``lexer="basic"`` on every string up to a length, and walks under the mask that Lark must parse."""
from __future__ import annotations

import itertools
import random

import pytest

lark = pytest.importorskip("lark")

import structgen as sg  # noqa: E402
from structgen.vocab.vocabulary import Vocabulary  # noqa: E402
from tests.helpers import lark_accepts  # noqa: E402


def _vocab(tokens):
    return Vocabulary.from_bytes([t.encode() for t in tokens] + [None], eos_ids=[len(tokens)])


def _compare(text, alphabet, n):
    parser = lark.Lark(text, parser="earley", lexer="basic")
    try:
        cg = sg.compile(sg.Grammar.from_lark(text, lexer="basic"), _vocab(alphabet))
    except sg.GrammarError as e:  # a terminal the lexer never yields can empty the language
        assert "empty" in str(e)
        cg = None
    valid = 0
    for k in range(n + 1):
        for t in itertools.product(alphabet, repeat=k):
            s = "".join(t)
            ok = lark_accepts(parser, s)
            m = cg.matcher() if cg is not None else None
            assert (m is not None and m.advance_bytes(s.encode()) and m.is_accepting()) == ok, (text, s)
            valid += ok
    return valid


STATEMENTS = r'''start: stmt+
stmt: NAME "=" expr ";" | "ab" expr ";"
expr: NAME | NUM | expr "<" expr | expr "<=" expr | expr "==" expr
NAME: /[ab]+/
NUM: /[0-9]+/
%ignore " "
'''


def test_keywords_names_and_operators():
    # "ab" is a keyword (never a NAME), "aba" a name; "<=" is one operator, "< =" two tokens
    assert _compare(STATEMENTS, "ab1=<; ", 5) > 50
    cg = sg.compile(sg.Grammar.from_lark(STATEMENTS, lexer="basic"), _vocab("ab1=<; "))
    dyn = sg.compile(sg.Grammar.from_lark(STATEMENTS), _vocab("ab1=<; "))
    for s, ok in [("ab a;", True), ("aba;", False), ("abb=1;", True), ("ab=1;", False), ("a=b<=1;", True)]:
        m = cg.matcher()
        assert (m.advance_bytes(s.encode()) and m.is_accepting()) == ok, s
    m = dyn.matcher()  # the default (every lexing) reads "aba;" as "ab a;"
    assert m.advance_bytes(b"aba;") and m.is_accepting()


def _random_grammar(rng):
    name = rng.choice(["/[ab]+/", "/a[ab0]*/", "/[ab][ab0-9]*/"])
    num = rng.choice(["/[0-9]+/", "/[0-9]+(\\.[0-9]+)?/", "/0|[1-9][0-9]*/"])
    kw = rng.choice(['"ab"', '"b"', '"ba"'])
    op = rng.choice(['"." | ".."', '"=" | "=="', '"." | ".0"'])
    shape = rng.choice([
        "start: item+\nitem: NAME | NUM | KW | OP\n",
        "start: (NAME OP NUM)+\n",
        "start: KW? NAME (OP (NAME | NUM))*\n",
        "start: (NUM | NAME)+ KW\n",
    ])
    prio = rng.choice(["", ".2"]) if "KW" in shape else ""
    ign = rng.choice(['%ignore " "\n', 'WS: / +/\n%ignore WS\n', ""])
    text = shape + f"NAME{prio}: {name}\nNUM: {num}\nKW: {kw}\nOP: {op}\n" + ign
    return text, "ab0.1= "


@pytest.mark.parametrize("seed", range(8))
def test_random_grammars(seed):
    text, alphabet = _random_grammar(random.Random(seed))
    _compare(text, alphabet, 4)


def test_walks_under_the_mask_parse_with_lark():
    tokens = list("ab1=<; ") + ["ab", "<=", "==", "  "]
    v = _vocab(tokens)
    cg = sg.compile(sg.Grammar.from_lark(STATEMENTS, lexer="basic"), v)
    parser = lark.Lark(STATEMENTS, parser="earley", lexer="basic")
    rng = random.Random(2)
    bm = sg.allocate_bitmask(1, v.size)
    eos, finished = len(tokens), 0
    for _ in range(150):
        m, text = cg.matcher(), ""
        for _ in range(40):
            m.fill_bitmask(bm, 0)
            allowed = [int(t) for t in sg.bitmask_to_ids(bm[0]) if t < v.size]
            assert allowed, text
            if eos in allowed and rng.random() < 0.25:
                break
            t = rng.choice([t for t in allowed if t != eos] or [eos])
            if t == eos:
                break
            assert m.advance(t)
            text += tokens[t]
        else:
            continue
        assert m.is_accepting() and lark_accepts(parser, text), text
        finished += 1
    assert finished > 40


def test_refusals():
    # whether the ignored "a" is lexed depends on the next character ("ab" comes first)
    with pytest.raises(sg.Unsupported, match="ignored terminal"):
        sg.Grammar.from_lark('start: X+\nX: "ab" | "b"\nA: "a"\n%ignore A\n', lexer="basic")
    with pytest.raises(sg.OptionError, match="lexer"):
        sg.Grammar.from_lark('start: "a"\n', lexer="contextual")
