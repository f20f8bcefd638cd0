"""Right recursion in the grammar engine: time and chart size independent of the generated
length (the tail form is rewritten into left recursion during normalisation), exactly the same
language and live prefixes as the grammar as written."""
from __future__ import annotations

import itertools
import random
import time

import pytest

from structgen.automaton import ir
from structgen.cfg import CFG, compile_cfg
from structgen.cfg import engine as cfg_engine
from structgen.cfg.grammar import literal_terminal
from structgen.errors import GrammarError
from structgen.errors import LimitExceeded
from structgen.frontends import gbnf_to_cfg, lark_to_cfg
from structgen.vocab.vocabulary import Vocabulary

from .helpers import bounded_language, load_vocab

QUOTED_RR = 'root ::= "\\"" s "\\""\ns ::= "" | [^"\\\\] s\n'
XGRAMMAR_STRING = ('root ::= "\\"" s1 "\\""\n'
                   's1 ::= "" | [^"\\\\\\x00-\\x1F] s1 | "\\\\" escape s1\n'
                   'escape ::= ["\\\\/bfnrt] | "u" [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9]\n')
WS_HELPER = 'root ::= "[" ws "]"\nws ::= ([ \\t\\n] ws)?\n'

TINY = Vocabulary.from_bytes([b'"', b"a", b"b", b"ab", b" ", b"[", b"]", b"\\n", b'a"', None], eos_ids=[9])


def _time(fn, reps=3):
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def test_right_recursive_string_mask_and_advance_time_independent_of_length():
    vocab = load_vocab("llama3")
    m = compile_cfg(gbnf_to_cfg(QUOTED_RR), vocab).matcher()
    assert m.advance_bytes(b'"')
    done, work, times = 0, {}, {}
    for n in (10, 100, 1000, 5000):
        assert m.advance_bytes(b"a" * (n - done))
        done = n
        m.mask_words()  # first visits of this length's cache entries aside

        def step():
            m.mask_words()
            assert m.advance_bytes(b"b")
            m.rollback(1)

        times[n] = _time(step)
        work[n] = m.chart_stats()
    # work per step: the Earley set each byte makes has the same size at every length
    assert work[5000]["last_set"] <= work[100]["last_set"] + 2, work
    assert work[5000]["frontier"] <= work[100]["frontier"], work
    assert times[5000] <= 3 * times[100] + 2e-3, times
    assert m.advance_bytes(b'"') and m.is_accepting()


@pytest.mark.parametrize("text,open_,body,close", [(QUOTED_RR, b'"', b"ab", b'"'),
                                                   (XGRAMMAR_STRING, b'"', b"a\\nb\\u00e9", b'"'),
                                                   (WS_HELPER, b"[", b" \t\n", b"]")])
def test_right_recursive_chart_stays_small(text, open_, body, close):
    m = compile_cfg(gbnf_to_cfg(text), TINY).matcher()
    assert m.advance_bytes(open_)
    sizes = []
    for k in range(60):
        assert m.advance_bytes(body)
        sizes.append(m.chart_stats()["last_set"])
    assert max(sizes[10:]) <= max(sizes[:10]), sizes
    assert m.advance_bytes(close) and m.is_accepting()


# ------------------------------------------------------------------ exactness on random grammars
ALPHA = "abc"


def random_cfg(rng: random.Random):
    nts = ["S", "A", "B", "C"]
    rules = {}
    for a in nts:
        alts = []
        for _ in range(rng.randint(1, 3)):
            kind = rng.random()
            body = tuple(rng.choice(nts + list(ALPHA) * 2) for _ in range(rng.randint(0, 2)))
            if kind < 0.4:
                alts.append(body + (a,))          # right recursion (the tail form)
            elif kind < 0.55:
                alts.append((a,) + body)          # left recursion
            elif kind < 0.65 and body:
                alts.append(body[:1] + (a,) + body[1:])  # recursion in the middle (not rewritten)
            else:
                alts.append(body)
        if rng.random() < 0.3:  # a helper used once, as a whole alternative (GBNF's groups)
            h = f"{a}h"
            rules[h] = [(rng.choice(ALPHA), a), ()]
            alts.append((h,))
        rules[a] = alts
    terms = {c: literal_terminal(c) for c in ALPHA}
    return CFG("S", rules, terms)


def test_rewrite_keeps_language_and_live_prefixes(monkeypatch):
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", "")  # the reference normalisation must not be cached
    rng = random.Random(15)
    rewritten = 0
    checked = 0
    for _ in range(60):
        cfg = random_cfg(rng)
        try:
            new = compile_cfg(cfg, TINY)
            with monkeypatch.context() as mp:
                mp.setattr(cfg_engine, "right_to_left", lambda rules, keep=(): rules)
                ref = compile_cfg(cfg, TINY)
        except GrammarError:  # an empty language
            continue
        checked += 1
        rewritten += any(n.endswith("$rep") for n in new.norm.rules)
        lang = bounded_language(cfg, 6)
        for k in range(7):
            for w in itertools.product(ALPHA, repeat=k):
                s = "".join(w).encode()
                m1, m2 = new.matcher(), ref.matcher()
                live1, live2 = m1.advance_bytes(s), m2.advance_bytes(s)
                assert live1 == live2, (cfg.rules, s)
                acc = live1 and m1.is_accepting()
                assert acc == (live2 and m2.is_accepting()) == (s.decode() in lang), (cfg.rules, s)
    assert checked >= 30 and rewritten >= 15, (checked, rewritten)


# ------------------------------------------------------------------ a terminal that may follow itself
WORDS = 'start: (WORD SEP?)+ NL\nWORD: /[a-z]+/\nSEP: /[ ,]+/\nNL: "\\n"\n'


def test_word_word_frontier_and_mask_time_independent_of_word_length():
    """``(WORD SEP?)+``: after n letters a WORD may have begun at any of them.  Lexemes of the
    same terminal whose origins have the same future share one origin (earley.signature), and
    masks share their predictions likewise, so the frontier and the mask stay the same size."""
    vocab = load_vocab("llama3")
    m = compile_cfg(lark_to_cfg(WORDS), vocab).matcher()
    sizes, times = {}, {}
    done = 0
    for n in (8, 64, 512):
        assert m.advance_bytes(b"abcdefgh" * ((n - done) // 8))
        done = n
        m.mask_words()
        sizes[n] = m.chart_stats()
        times[n] = _time(m.mask_words)
    assert sizes[512]["frontier"] <= sizes[8]["frontier"], sizes
    assert sizes[512]["last_set"] <= sizes[8]["last_set"] + 2, sizes
    assert times[512] <= 3 * times[8] + 5e-3, times
    assert m.advance_bytes(b"\n") and m.is_accepting()


def test_word_word_language_equals_lark():
    from lark import Lark

    parser = Lark(WORDS, parser="earley", lexer="dynamic_complete")
    cg = compile_cfg(lark_to_cfg(WORDS), TINY)
    for k in range(1, 7):
        for w in itertools.product("ab ,\n", repeat=k):
            s = "".join(w)
            try:
                parser.parse(s)
                want = True
            except Exception:
                want = False
            m = cg.matcher()
            assert (m.advance_bytes(s.encode()) and m.is_accepting()) == want, s
            if want:  # every prefix of a sentence is live
                m = cg.matcher()
                for i in range(len(s)):
                    assert m.advance_bytes(s[i].encode()), s[:i + 1]


# ------------------------------------------------------------------ bounded repetitions in GBNF
NAME_AGE = ('char ::= [^"\\\\\\x7F\\x00-\\x1F] | [\\\\] (["\\\\bfnrt] | "u" [0-9a-fA-F]{4})\n'
            'item ::= "{" space item-name-kv "," space item-age-kv "}" space\n'
            'item-age ::= ([0-9] | ([1-8] [0-9] | [9] [0-9]) | "1" ([0-4] [0-9] | [5] "0")) space\n'
            'item-age-kv ::= "\\"age\\"" space ":" space item-age\n'
            'item-name ::= "\\"" char{1,100} "\\"" space\n'
            'item-name-kv ::= "\\"name\\"" space ":" space item-name\n'
            'root ::= "[" space item ("," space item){9,99} "]" space\n'
            'space ::= | " " | "\\n" [ \\t]{0,20}\n')


def test_llama_cpp_name_age_grammar_compiles_and_is_exact():
    """llama.cpp's README grammar is regular as a whole (one terminal of more than 100,000 DFA
    states); the big terminal is split into parser symbols instead."""
    import json
    import re

    cg = compile_cfg(gbnf_to_cfg(NAME_AGE), TINY)
    item = lambda n, a: json.dumps({"name": n, "age": a}, separators=(",", ":"))
    ok = "[" + ",".join(item(f"n{i}\u00e9", i * 15) for i in range(10)) + "]"
    m = cg.matcher()
    assert m.advance_bytes(ok.encode()) and m.is_accepting()
    nine = "[" + ",".join(item("x", 1) for _ in range(9)) + "]"
    m = cg.matcher()
    assert m.advance_bytes(nine[:-1].encode()) and not m.advance_bytes(b"]")
    long_name = "[" + ",".join(item("x" * (101 if i == 3 else 100), 150) for i in range(10)) + "]"
    m = cg.matcher()
    assert not m.advance_bytes(long_name.encode())
    m = cg.matcher()
    cut = long_name.index("x" * 101) + 100
    assert m.advance_bytes(long_name[:cut].encode()) and not m.advance_bytes(b"x")
    assert re.fullmatch(r"\[(\{.*\},){9}\{.*\}\]", ok)


def test_split_keeps_small_consecutive_parts_in_one_lexeme():
    """The split of the name/age grammar keeps "[" + the first item as one terminal, so inside the
    first name one lexeme is in progress and it cannot end there (the closing quote is part of
    it): its characters move non-accepting lexer states, which the mask kernel counts alike."""
    from structgen.cfg.split import SPLIT_GROUP, split_terminal, unrolled_size

    cg = compile_cfg(gbnf_to_cfg(NAME_AGE), TINY)
    assert len(cg.norm.terminals) <= 4                   # not one terminal per character
    m = cg.matcher()
    assert m.advance_bytes(b'[{"name":"ab')
    front = m.chart_state()[3]
    assert front.shape[0] == 1 and not cg.tables.gacc[front[0, 0]]
    # the size stand-in unrolls bounded repetitions, and a grouping that splits nothing splits all
    x = ir.repeat(ir.CharSet.of([(97, 98)]), 1, 100)
    assert unrolled_size(x) == 1 + 100 * unrolled_size(ir.CharSet.of([(97, 98)]))
    parts, rules, todo = {}, {}, []
    small = ir.seq(*(ir.literal(c) for c in "abcd"))
    assert unrolled_size(small) < SPLIT_GROUP
    assert len(split_terminal("T", small, parts, rules, todo)) == 4


def test_name_age_run_characters_are_counted():
    """The name/age grammar repeats the printable characters but DEL: the compiler gives the
    grammar engine that set as its run characters (the default set holds DEL, on which the
    string's states die), so the string's states get run budgets."""
    import structgen as sg
    from structgen.cfg.run_budgets import chain_budget
    from structgen.compiler import QUOTED_TEXT, slicing_of

    g = sg.Grammar.from_gbnf(NAME_AGE)
    first = slicing_of(g).slices[0].charset
    assert first != QUOTED_TEXT and not first.contains(0x7F) and first.contains(ord("a"))
    assert slicing_of(sg.Grammar.from_gbnf('root ::= "\\"" [^"\\\\]* "\\""')).slices[0].charset == QUOTED_TEXT
    vocab = load_vocab("gpt2")
    cg = sg.compile(g, vocab, cache=False).engine
    m = cg.matcher()
    for text in (b'[{"name":"ab', b'[{"name":"x","age":1},{"name":"ab'):
        m.reset()
        assert m.advance_bytes(text)
        chain, cum, impure, ut, ua, u0 = cg.runs()
        g0 = int(m.chart_state()[3][0, 0])
        assert chain_budget(g0, cg.tables.trans, cg.tables.gacc, ut, ua, u0, cum.shape[0] - 1, chain) >= 0


def test_big_terminal_error_names_the_rule():
    g = gbnf_to_cfg('root ::= "x" word\nword ::= [ab]* "a" [ab]{12}\n')
    with pytest.raises(LimitExceeded, match="root|word"):
        compile_cfg(g, TINY, max_states=50)
