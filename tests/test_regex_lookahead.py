"""Lookaheads in whole-input regexes (``parse_regex(lookahead=True)``: JSON Schema ``pattern``,
``Grammar.from_regex``), checked against ``re`` on every string up to length 5 of a small
alphabet, in fullmatch and search semantics, and in grammar terminals (``parse_terminal``: the
lookahead sees the text after the lexeme) on every lexeme and rest; what stays refused is
refused with its position."""
from __future__ import annotations

import itertools
import json
import random
import re

import jsonschema
import pytest

import structgen as sg
from structgen.automaton.build import build_dfa
from structgen.errors import Unsupported
from structgen.frontends.regex import parse_regex, parse_terminal

ALPHA = "abc\n"
WORDS = ["".join(t) for n in range(6) for t in itertools.product(ALPHA, repeat=n)]


def rand_plain(r: random.Random, depth: int) -> str:
    """A random pattern without lookaheads over a, b, c."""
    k = r.randrange(7 if depth else 3)
    if k == 0:
        return r.choice("abc")
    if k == 1:
        return r.choice(["[ab]", ".", "[^a]"])
    if k == 2:
        return ""
    if k == 3:
        return rand_plain(r, depth - 1) + rand_plain(r, depth - 1)
    if k == 4:
        return f"(?:{rand_plain(r, depth - 1)}|{rand_plain(r, depth - 1)})"
    if k == 5:
        return f"(?:{rand_plain(r, depth - 1) or 'a'})" + r.choice("*+?")
    return f"(?:{rand_plain(r, depth - 1)}){{0,2}}"


def rand_look(r: random.Random, depth: int, behind: bool = False) -> str:
    """A random pattern with lookaheads (none inside an unbounded repetition); ``behind``: and
    fixed-width lookbehinds (what Python's ``re`` takes)."""
    k = r.randrange(6 if depth else 2)
    if behind and r.random() < 0.25:
        body = "".join(r.choice(["a", "b", "[ab]", ".", "\\n"]) for _ in range(r.randint(1, 2)))
        return f"(?<{r.choice('=!')}{body})"
    if k == 0:
        return rand_plain(r, 1)
    if k == 1:
        body = rand_plain(r, 2) + r.choice(["", "", "$", ".*"])
        return f"(?{r.choice('=!')}{body})"
    if k == 2:
        return rand_look(r, depth - 1, behind) + rand_look(r, depth - 1, behind)
    if k == 3:
        return f"(?:{rand_look(r, depth - 1, behind)}|{rand_look(r, depth - 1, behind)})"
    if k == 4:
        return f"(?:{rand_look(r, depth - 1, behind)})" + r.choice(["?", "{2}", "{1,3}"])
    return f"(?{r.choice('=!')}{rand_look(r, depth - 1)})"


def test_random_lookaheads_match_re_on_every_short_string():
    r = random.Random(5)
    checked = with_look = 0
    for _ in range(150):
        p = rand_look(r, 3)
        rx = re.compile(p)
        with_look += "(?=" in p or "(?!" in p
        for anchored in (True, False):
            d = build_dfa(parse_regex(p, anchored=anchored, lookahead=True))
            for w in WORDS:
                want = (rx.fullmatch(w) if anchored else rx.search(w)) is not None
                assert d.fullmatch(w.encode()) == want, (p, anchored, w)
                checked += 1
    assert with_look > 100 and checked > 100_000


@pytest.mark.parametrize("pattern", [
    r"^@([\da-z](?:(?!.*--)[\da-z-]*[\da-z])?)/([\da-z](?:(?!.*--)[\da-z-]*[\da-z])?)$",  # JsonSchemaStore
    r"^(?=.*\d)(?=.*[a-z])(?=.*[A-Z]).{8,}$",  # a password rule
    r"^(?!\s)(?!.*\s$).+$",  # no leading or trailing space
])
def test_schema_patterns_with_lookaheads(pattern):
    vocab = sg.Vocabulary.from_bytes([bytes([c]) for c in range(32, 127)] + [b""], eos_ids=[95])
    schema = {"type": "string", "pattern": pattern}
    cg = sg.compile(sg.Grammar.from_json_schema(schema), vocab, cache=False)
    val = jsonschema.Draft202012Validator(schema)
    r = random.Random(len(pattern))
    pool = "aZ9-/@ .xY"
    texts = ["@a/b", "@a--b/c", "@ab/c-d", "Passw0rdX", "password1", "PASSWORD1a", " x", "x ", "x y", ""]
    texts += ["".join(r.choice(pool) for _ in range(r.randrange(12))) for _ in range(300)]
    for t in texts:
        m = cg.matcher()
        text = json.dumps(t).encode()
        assert (m.advance_bytes(text) and m.is_accepting()) == val.is_valid(t), (pattern, t)


def test_what_stays_refused_names_its_position():
    for p, pos in [(r"a(?:(?!b).)*", 1), (r"a(?<=(?=a)a)b", 1), (r"(?<=a)(?<=b)(?<=c)(?<!d)(?<=e)", 0)]:
        with pytest.raises(Unsupported) as e:
            parse_regex(p, lookahead=True)
        assert e.value.pos == pos, p
    with pytest.raises(Unsupported, match="before the lexeme") as e:
        parse_terminal(r"a|(?<!\\)b")  # a grammar terminal does not see the text before its lexeme
    assert e.value.pos == 2
    with pytest.raises(Unsupported, match="lookaround"):
        parse_regex("a(?=b)")  # off by default: a grammar terminal's lookahead sees past it
    with pytest.raises(Unsupported, match="lookaround"):
        parse_regex("a(?=b)", syntax="rust", lookahead=True)


def test_terminal_lookaheads_see_past_the_lexeme():
    """``parse_terminal``: lexeme ``w`` followed by rest ``r`` is in some variant iff ``re``
    matches the pattern at the start of ``w + r`` ending exactly after ``w``."""
    r = random.Random(7)
    words = [w for w in WORDS if len(w) <= 4]
    rests = [w for w in WORDS if len(w) <= 3]
    checked = split = 0
    for _ in range(120):
        p = rand_look(r, 3)
        variants = [(build_dfa(lex), rest) for lex, rest in parse_terminal(p)]
        split += any(rest is not None for _, rest in variants)
        for w in words:
            mine = [rest for lex, rest in variants if lex.fullmatch(w.encode())]
            assert len(mine) <= 1, (p, w)  # the variants' lexemes are disjoint
            for rest in rests:
                want = re.compile(f"(?:{p})(?={re.escape(rest)}\\Z)").match(w + rest) is not None
                got = bool(mine) and (mine[0] is None or mine[0].fullmatch(rest.encode()))
                assert got == want, (p, w, rest)
                checked += 1
    assert split > 40 and checked > 100_000


def test_random_lookbehinds_match_re_on_every_short_string():
    """Lookbehinds (a marker byte per lookbehind, resolved on the built language), beside
    lookaheads, in fullmatch and search semantics."""
    r = random.Random(11)
    checked = with_behind = 0
    for _ in range(150):
        p = rand_look(r, 3, behind=True)
        try:
            rx = re.compile(p)
        except re.error:
            continue
        try:
            d_full = build_dfa(parse_regex(p, anchored=True, lookahead=True))
            d_search = build_dfa(parse_regex(p, anchored=False, lookahead=True))
        except Unsupported:
            continue  # more than four lookbehinds after unrolling, a lookaround inside one
        with_behind += "(?<" in p
        for w in WORDS:
            assert d_full.fullmatch(w.encode()) == (rx.fullmatch(w) is not None), (p, w)
            assert d_search.fullmatch(w.encode()) == (rx.search(w) is not None), (p, w)
            checked += 2
    assert with_behind > 60 and checked > 100_000


def test_terminal_lookbehinds_inside_the_lexeme():
    """``parse_terminal`` with lookbehinds that look back inside the lexeme only (others are
    refused), against ``re`` matching at the start of ``w + rest``."""
    r = random.Random(13)
    words = [w for w in WORDS if len(w) <= 4]
    rests = [w for w in WORDS if len(w) <= 2]
    kept = refused = 0
    for _ in range(200):
        p = rand_look(r, 3, behind=True)
        if "(?<" not in p:
            continue
        if r.random() < 0.8:
            p = "[ab][ab\\n]" + p  # room to look back inside the lexeme
        try:
            re.compile(p)
            variants = [(build_dfa(lex), rest) for lex, rest in parse_terminal(p)]
        except re.error:
            continue
        except Unsupported:
            refused += 1
            continue
        kept += 1
        for w in words:
            mine = [rest for lex, rest in variants if lex.fullmatch(w.encode())]
            for rest in rests:
                want = re.compile(f"(?:{p})(?={re.escape(rest)}\\Z)").match(w + rest) is not None
                got = bool(mine) and (mine[0] is None or mine[0].fullmatch(rest.encode()))
                assert got == want, (p, w, rest)
    assert kept > 20 and refused > 5
