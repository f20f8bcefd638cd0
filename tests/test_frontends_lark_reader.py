"""The faster reader of Lark's grammar syntax (``lark_frontend._parse_tree``) against Lark's own
grammar parser: on every text it reads, the tree must be the one Lark builds (node for node,
token types and symbol kinds included); on every text Lark rejects it must give up; and the
CFG built from it must equal the one from Lark's loader."""
from __future__ import annotations

import random

import pytest
from lark.grammar import Symbol
from lark.lexer import Token
from lark.load_grammar import _parse_grammar
from lark.tree import Tree

from structgen import grammars
from structgen.frontends import lark as lf


def _same(a, b) -> bool:
    """Deep equality that also compares classes, token types and terminal filter flags."""
    if type(a) is not type(b):
        return False
    if isinstance(a, Tree):
        return a.data == b.data and len(a.children) == len(b.children) and all(
            _same(x, y) for x, y in zip(a.children, b.children))
    if isinstance(a, Token):
        return a.type == b.type and str(a) == str(b)
    if isinstance(a, Symbol):
        return a.name == b.name and getattr(a, "filter_out", None) == getattr(b, "filter_out", None)
    return a == b


def _lark_tree(text):
    try:
        return _parse_grammar(text, "<string>")
    except Exception:  # LarkError, or a TypeError from Lark's error-message matching
        return None


SUPPORTED = [
    'start: "a"',
    'start: "a"\n',
    '\n\n// c\nstart: a b\n  | c // x\n  # y\n  | "d"i\na: A\nb: /x+/i\nc: "q".."z"\nA: "a"\n',
    '?start: a "x"i (b | C)* [d] e~2..3 -> al\n!_a.2 : /re/i C? | "q"\nA.3: "a" | B "c"\nB: /b/\n'
    '%ignore " "\n%ignore A\na: "a"\nb: "b"\nC: "c"\nd: "d"\ne: "e"\n',
    'start: (a | (b c)+)? [x y] z~3\nx: "x"\ny: "y"\nz: "z" |\na: "a"\nb: "b"\nc: "c"\n',
    'start: a\n\n\n| b\na: "a" -> x\n   | "b" -> y\nb: "\\"" "\\\\" /\\//\n',
    '!?start: A B\nA: "a"+\nB.-1: ("b" | "c")~1..2 A?\n',
    'start:\n',
    'start: | "a"\n',
    'start: _x\n_x: "a" _x?\n',
    'start: "a" // comment "x" | y\n',
    'start: "a#b" /#/\n',
    'start:"a"|"b"\n',
    'start: -> x\n',
]
UNSUPPORTED = [
    'start: WS\n%import common.WS\n',
    'start: _sep{A, ","}\n_sep{x, s}: x (s x)*\nA: "a"\n',
    '%declare FOO\nstart: FOO\n',
    'start: "a" \\\n "b"\n',
    'start: "a"\r\n',
    'start: a\n%override a: "b"\n',
]
INVALID = ['start: "a" (\n', 'start: a b:\n', 'start: b??\n', 'start: +\n', 'Aa: "x"\n',
           'start: "a" -> X\n', 'start: a+1\n', 'start: ?a\n', 'start: 2\n', '| a\n', 'start: a\n| b\n  ]\n',
           'start "a"\n', '"a"\n', 'start: ~1\n', 'start: a~\n', 'start: a~1..\n', 'start: a.2\n']


@pytest.mark.parametrize("text", SUPPORTED + [grammars.load(n) for n in grammars.names()])
def test_reader_builds_larks_tree(text):
    mine = lf._parse_tree(text)
    assert mine is not None
    assert _same(mine, _parse_grammar(text, "<string>"))


@pytest.mark.parametrize("text", UNSUPPORTED)
def test_reader_leaves_other_syntax_to_lark(text):
    assert lf._parse_tree(text) is None


@pytest.mark.parametrize("text", INVALID)
def test_reader_gives_up_where_lark_fails(text):
    assert _lark_tree(text) is None
    assert lf._parse_tree(text) is None


_PIECES = ['a', 'b', '_c', 'A', 'B', '_W', '"x"', '"y"i', '"\\""', '/z+/', '/[ab]/i', '"0".."9"', '(', ')', '[', ']',
           '|', '?', '*', '+', '~', '2', '1..3', '->', 'al', ':', '.', '..', ' ', ' ', '  ', '\t', '\n', '\n', '\n  |',
           '// c', '# c\n', '%ignore', '!', '?', '-1', '{', ',', '\\']


def _random_text(rng: random.Random) -> str:
    out = []
    for _ in range(rng.randint(1, 5)):
        head = rng.choice(['start', 'a', 'b', '?a', '!b', '_c', 'A', 'B', 'A.2', 'b.1', '%ignore', '_W'])
        out.append(head + ('' if head == '%ignore' else rng.choice([':', ': ', ' : '])))
        for _ in range(rng.randint(0, 9)):
            # mostly well-formed items, some noise
            if rng.random() < 0.7:
                out.append(' ' + rng.choice(['a', 'b', 'A', 'B', '"x"', '"y"i', '/z+/', '(a | B)', '[b "x"]',
                                             'a?', 'B*', '"x"+', 'a~2', 'B~1..3', '| b', '\n  | A', '-> al',
                                             '// note', '"0".."9"']))
            else:
                out.append(rng.choice(_PIECES))
        out.append(rng.choice(['\n', '\n\n', ' // end\n', '']))
    return ''.join(out)


def test_reader_random_texts():
    rng = random.Random(1234)
    read = 0
    for _ in range(3000):
        text = _random_text(rng)
        lark_tree = _lark_tree(text)
        mine = lf._parse_tree(text)
        if lark_tree is None:
            assert mine is None, text
        elif mine is not None:
            assert _same(mine, lark_tree), text
            read += 1
    assert read > 300  # the reader handles most of the valid texts


def _slow_cfg(text, monkeypatch, start="start"):
    with monkeypatch.context() as m:
        m.setattr(lf, "_fast_grammar", lambda text: None)
        return lf._lark_to_cfg(text, start)


@pytest.mark.parametrize("text", SUPPORTED[3:6] + [grammars.load(n) for n in grammars.names()])
def test_fast_cfg_equals_larks(text, monkeypatch):
    slow = _slow_cfg(text, monkeypatch)
    fast = lf._lark_to_cfg(text, "start")
    assert fast.rules == slow.rules and list(fast.rules) == list(slow.rules)
    assert fast.terminals == slow.terminals and list(fast.terminals) == list(slow.terminals)
    assert fast.ignore == slow.ignore and fast.positions == slow.positions


def test_fast_path_errors_are_larks(monkeypatch):
    from structgen.errors import GrammarError

    for text in ['start: a\n', 'start: "a"\nstart: "b"\n', 'start: A\nA: ""\n', 'start: [a] "c" | "c"\na: "a"\n',
                 'start: A\nA: a\na: "x"\n', 'start: A\nA: B\nB: A\n', 'start: "a"\n%ignore B\n',
                 'start: "a"\nA: "a"i\n']:
        try:
            slow = _slow_cfg(text, monkeypatch)
        except GrammarError as e:
            slow = str(e)
        try:
            fast = lf._lark_to_cfg(text, "start")
        except GrammarError as e:
            fast = str(e)
        assert isinstance(slow, str) or isinstance(fast, str) or (fast.rules, fast.terminals) == (slow.rules, slow.terminals)
        if isinstance(slow, str) or isinstance(fast, str):
            assert fast == slow


def _random_grammar(rng: random.Random) -> str:
    """A random, mostly valid grammar: its symbols all defined (but by chance twice, or unused)."""
    heads = rng.sample(['start', 'x', 'y', '?z', '!w', '_v', 'X', 'Y.2', '_W', '%ignore', '%ignore'], rng.randint(1, 5))
    if 'start' not in heads:
        heads[0] = 'start'
    items = ['a', 'b', 'A', 'B', 'x', 'y', 'z', 'w', '_v', '"x"', '"y"i', '"+"', '"if"', '"("', '/z+/', '/[ab]/i',
             '"0".."9"', '(a | B)', '[b "x"]', 'a?', 'B*', '"x"+', 'a~2', 'B~1..3', '(x "y")~2..3', '("q" | a)*']
    term_items = ['A', 'B', '"x"', '"y"i', '/z+/', '("a" | "bb")', '"c"?', 'A~2', '"0".."9"']
    out = []
    for h in heads:
        is_term = h.lstrip('_').isupper() or h == '%ignore'
        pool = term_items if is_term else items
        out.append(h + ('' if h == '%ignore' else ':'))
        for _ in range(rng.randint(1, 6)):
            out.append(' ' + rng.choice(pool + (['|', '\n  |'] if h != '%ignore' else [])))
        out.append(rng.choice(['\n', ' // c\n', '\n\n']))
    defined = {h.lstrip('?!').split('.')[0] for h in heads}
    for name, body in [('a', '"a"'), ('b', '"b" | "c" b'), ('A', '"A"'), ('B', '/b+/'), ('x', 'a'), ('y', 'B'),
                       ('z', '"z"'), ('w', 'a | b'), ('_v', '"v"'), ('X', '"X"'), ('Y', '/[0-9]/')]:
        if name not in defined:
            out.append(f'{name}: {body}\n')
    return ''.join(out)


def test_random_grammars_compile_alike(monkeypatch):
    """Whole pipeline on random grammars: the same CFG, or the same error, with and without the reader."""
    from structgen.errors import StructgenError

    rng = random.Random(99)
    same = 0
    for _ in range(400):
        text = _random_grammar(rng)
        out = []
        for fast in (True, False):
            lf._CACHE.clear()
            try:
                cfg = lf._lark_to_cfg(text, "start") if fast else _slow_cfg(text, monkeypatch)
                out.append((list(cfg.rules.items()), list(cfg.terminals.items()), cfg.ignore, cfg.positions))
            except StructgenError as e:
                out.append((type(e), str(e)))
        assert out[0] == out[1], text
        same += len(out[0]) == 4
    assert same > 200
