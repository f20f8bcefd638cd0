"""Lark's Indenter compiled into the grammar (structgen/cfg/indent.py), checked against Lark's
``lalr`` parser with the same Indenter: every string up to a length, random programs and their
mutations, and random walks under the mask whose texts Lark must parse."""
from __future__ import annotations

import itertools
import random

import pytest

lark = pytest.importorskip("lark")

import structgen as sg  # noqa: E402
from structgen.automaton.ops import longest_match_variants  # noqa: E402
from structgen.cfg.indent import last_line_weight  # noqa: E402
from structgen.cfg.terminals import build  # noqa: E402
from structgen.frontends.regex import parse_regex  # noqa: E402
from structgen.vocab.vocabulary import Vocabulary  # noqa: E402
from lark.indenter import Indenter as LarkIndenter, PythonIndenter  # noqa: E402


class TreeIndenter(LarkIndenter):
    NL_type = "_NL"
    OPEN_PAREN_types: list = []
    CLOSE_PAREN_types: list = []
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 2  # small, so that tabs and spaces mix within the lengths tested


# lark's examples/indented_tree.py
TREE = r"""
    ?start: _NL* tree
    tree: NAME _NL [_INDENT tree+ _DEDENT]
    %import common.CNAME -> NAME
    %import common.WS_INLINE
    %declare _INDENT _DEDENT
    %ignore WS_INLINE
    _NL: /(\r?\n[\t ]*)+/
"""

# a small Python: blocks, comments inside newlines, brackets where newlines are dropped
MINI = r"""
    start: (_NEWLINE | stmt)*
    ?stmt: simple | compound
    simple: expr _NEWLINE
    compound: "if" expr ":" suite ("else" ":" suite)?
    suite: simple | _NEWLINE _INDENT stmt+ _DEDENT
    ?expr: NAME | "(" expr ("," expr)* ")" | "[" [expr ("," expr)*] "]"
    NAME: /[a-z]/
    _NEWLINE: ( /\r?\n[\t ]*/ | COMMENT )+
    COMMENT: /#[^\n]*/
    %ignore /[\t ]+/
    %ignore COMMENT
    %declare _INDENT _DEDENT
"""


class MiniIndenter(PythonIndenter):
    tab_len = 4


def _vocab(tokens):
    return Vocabulary.from_bytes([t.encode() for t in tokens] + [None], eos_ids=[len(tokens)])


def _lark_ok(parser, s):
    """Lark's verdict, or None where Lark's Indenter crashes: a newline token without a newline
    (a comment ending the input, lexed as the newline terminal that contains comments) has no
    last line and raises IndexError; structgen reads that comment as an ignored one."""
    try:
        parser.parse(s)
        return True
    except lark.exceptions.LarkError:
        return False
    except IndexError:
        return None


def _accepts(cg, s):
    m = cg.matcher()
    return m.advance_bytes(s.encode()) and m.is_accepting()


@pytest.fixture(scope="module")
def tree():
    parser = lark.Lark(TREE, parser="lalr", postlex=TreeIndenter())
    g = sg.Grammar.from_lark(TREE, postlex=sg.Indenter.of(TreeIndenter(), max_column=12))
    return parser, g


@pytest.fixture(scope="module")
def mini():
    parser = lark.Lark(MINI, parser="lalr", postlex=MiniIndenter())
    g = sg.Grammar.from_lark(MINI, postlex=sg.Indenter.of(MiniIndenter(), max_column=16))
    return parser, g


def test_tree_every_string(tree):
    parser, g = tree
    alpha = "a \n\t"
    cg = sg.compile(g, _vocab(alpha))
    valid = 0
    for n in range(8):
        for t in itertools.product(alpha, repeat=n):
            s = "".join(t)
            ok = _lark_ok(parser, s)
            valid += ok
            assert _accepts(cg, s) == ok, repr(s)
    assert valid > 500  # the comparison saw blocks, dedents and mixed tabs


def _program(rng, depth=0, col=0):
    """A random MINI program (valid) as lines; indentation with spaces and tabs."""
    def expr(d=0):
        r = rng.random()
        if d > 2 or r < 0.5:
            return rng.choice("abcxyz")
        items = [expr(d + 1) for _ in range(rng.randint(1, 3))]
        sep = rng.choice([",", ", ", ",\n  ", " ,# c\n"])
        return ("(" if r < 0.75 else "[") + sep.join(items) + (")" if r < 0.75 else "]")

    def ind(c):
        return rng.choice([" " * c, "\t" * (c // 4) + " " * (c % 4)])

    out = []
    for _ in range(rng.randint(1, 3)):
        if depth < 3 and rng.random() < 0.4:
            out.append(ind(col) + "if " + expr() + ":")
            inner = col + rng.choice([1, 2, 4])
            out += _program(rng, depth + 1, inner)
            if rng.random() < 0.3:
                out.append(ind(col) + "else:" + (" " + expr() if rng.random() < 0.5 else ""))
                if not out[-1].endswith(":"):
                    continue
                out += _program(rng, depth + 1, col + rng.choice([2, 4]))
        else:
            out.append(ind(col) + expr() + rng.choice(["", "  # note", " #"]))
        if rng.random() < 0.2:
            out.append(rng.choice(["", "   ", "# comment", "  # x"]))
    return out


def _mutate(rng, s):
    for _ in range(rng.randint(1, 2)):
        i = rng.randrange(len(s) + 1)
        op = rng.random()
        c = rng.choice(" \t\n#(),[]:a")
        s = s[:i] + c + s[i:] if op < 0.4 else s[:i] + s[i + 1:] if op < 0.7 else s[:i] + c + s[i + 1:]
    return s


# with names of several letters, which Lark's basic lexer tells from the keywords
WORDS = MINI.replace("NAME: /[a-z]/", "NAME: /[a-z]+/")


@pytest.mark.parametrize("lexer", ["dynamic_complete", "basic"])
def test_mini_programs_and_mutations(mini, lexer):
    if lexer == "dynamic_complete":
        parser, g = mini
    else:
        parser = lark.Lark(WORDS, parser="lalr", lexer="basic", postlex=MiniIndenter())
        g = sg.Grammar.from_lark(WORDS, lexer="basic", postlex=sg.Indenter.of(MiniIndenter(), max_column=16))
    cg = sg.compile(g, _vocab(list(" \t\n#(),[]:abcxyz") + ["if", "else", "    ", "\n    "]))
    rng = random.Random(7)
    seen = {True: 0, False: 0}
    for _ in range(400):
        s = "\n".join(_program(rng)) + rng.choice(["\n", "\n\n", "\n  ", ""])
        for text in (s, _mutate(rng, s), _mutate(rng, s)):
            ok = _lark_ok(parser, text)
            if ok is None:
                continue
            seen[ok] += 1
            assert _accepts(cg, text) == ok, repr(text)
    assert min(seen.values()) > 200


@pytest.mark.parametrize("which", ["tree", "mini"])
def test_walks_under_the_mask_parse(which, tree, mini):
    parser, g = tree if which == "tree" else mini
    toks = (["a", "b", " ", "\t", "\n", "\n  ", "  "] if which == "tree"
            else list(" \t\n#(),[]:abx") + ["if", "else", "    ", "\n  ", "\n    "])
    v = _vocab(toks)
    cg = sg.compile(g, v)
    eos = len(toks)
    rng = random.Random(3)
    bm = sg.allocate_bitmask(1, v.size)
    done = 0
    for _ in range(120):
        m = cg.matcher()
        text = ""
        for _ in range(60):
            m.fill_bitmask(bm, 0)
            allowed = [int(t) for t in sg.bitmask_to_ids(bm[0]) if t < v.size]
            assert allowed, repr(text)  # never a dead end
            choices = [t for t in allowed if t != eos]
            if eos in allowed and (not choices or rng.random() < 0.15):
                break
            t = rng.choice(choices)
            assert m.advance(t)
            text += toks[t]
        else:
            continue
        assert m.is_accepting()
        assert _lark_ok(parser, text) in (True, None), repr(text)
        done += 1
    assert done > 30


def test_deeper_than_max_column_is_not_accepted(tree):
    parser, _ = tree
    g = sg.Grammar.from_lark(TREE, postlex=sg.Indenter.of(TreeIndenter(), max_column=4))
    cg = sg.compile(g, _vocab("a \n\t"))
    assert _accepts(cg, "a\n    a\n") and _lark_ok(parser, "a\n    a\n")
    assert not _accepts(cg, "a\n     a\n") and _lark_ok(parser, "a\n     a\n")


def test_last_line_weight_counts_as_lark():
    d = last_line_weight(5, 4)
    rng = random.Random(5)
    hits = 0
    for _ in range(3000):
        s = "".join(rng.choice("\n \t#a") for _ in range(rng.randint(0, 9)))
        q = d.walk(s.encode())
        got = q >= 0 and bool(d.accepting[q])
        last = s.rsplit("\n", 1)[1] if "\n" in s else None  # what Lark's Indenter counts
        assert got == (last is not None and last.count(" ") + 4 * last.count("\t") == 5), repr(s)
        hits += got
    assert hits > 20


def test_longest_match_variants():
    d = build(parse_regex(r"(\n[ ]*|#[^\n]*)+"))
    variants = longest_match_variants(d)
    rng = random.Random(1)
    for _ in range(300):
        w = "".join(rng.choice("\n #a") for _ in range(rng.randint(1, 6)))
        rest = "".join(rng.choice("\n #a") for _ in range(rng.randint(0, 4)))
        if not d.accepts(w.encode()) if hasattr(d, "accepts") else d.walk(w.encode()) < 0:
            continue
        longer = any(d.walk((w + rest[:k]).encode()) >= 0 and d.accepting[d.walk((w + rest[:k]).encode())]
                     for k in range(1, len(rest) + 1))
        hits = [r for lex, r in variants if lex.walk(w.encode()) >= 0 and lex.accepting[lex.walk(w.encode())]]
        if not (d.walk(w.encode()) >= 0 and d.accepting[d.walk(w.encode())]):
            assert not hits
            continue
        assert len(hits) == 1
        r = hits[0]
        q = r.walk(rest.encode())
        assert (q >= 0 and bool(r.accepting[q])) == (not longer), (w, rest)


def test_errors():
    with pytest.raises(sg.Unsupported, match="right after"):
        sg.Grammar.from_lark("start: A _NL | A _INDENT A _DEDENT\nA: \"a\"\n_NL: /\\n/\n%declare _INDENT _DEDENT\n",
                             postlex=sg.Indenter("_NL"))
    with pytest.raises(sg.Unsupported, match="rule start at line 1"):
        sg.Grammar.from_lark("start: A _NL | A _INDENT A _DEDENT\nA: \"a\"\n_NL: /\\n/\n%declare _INDENT _DEDENT\n",
                             postlex=sg.Indenter("_NL"))
    with pytest.raises(sg.Unsupported, match="without its"):
        sg.Grammar.from_lark("start: A _NL _INDENT A\nA: \"a\"\n_NL: /\\n/\n%declare _INDENT _DEDENT\n",
                             postlex=sg.Indenter("_NL"))
    with pytest.raises(sg.Unsupported, match="bracket"):
        sg.Grammar.from_lark('start: "(" x _NL\nx: "a" ")"\n_NL: /\\n/\n', postlex=sg.Indenter("_NL", open_paren_types=["LPAR"],
                                                                             close_paren_types=["RPAR"]))
    with pytest.raises(sg.GrammarError, match="not defined"):
        sg.Grammar.from_lark('start: "a"\n', postlex=sg.Indenter("_NL"))
    with pytest.raises(sg.OptionError, match="postlex"):
        sg.Grammar.from_lark('start: "a"\n', postlex=object())
    with pytest.raises(sg.OptionError, match="max_column"):
        sg.Indenter(max_column=0)
    with pytest.raises(sg.Unsupported, match="no pattern"):  # without postlex, declared tokens are refused
        sg.Grammar.from_lark(TREE)


def test_python_indenter_preset_matches_lark():
    ours = sg.python_indenter()
    assert sg.Indenter.of(PythonIndenter()).key() == ours.key()


def test_walks_on_llama3_parse(mini, vocab):
    """Random walks under the mask on a real vocabulary (tokens that hold newlines with
    indentation, several words, brackets and colons); preferring tokens of a small Python-like
    alphabet, so that the walks build blocks rather than one long comment."""
    parser, _ = mini
    v = vocab("llama3")
    g = sg.Grammar.from_lark(MINI, postlex=sg.Indenter.of(MiniIndenter(), max_column=16))
    cg = sg.compile(g, v)
    pieces = {"if", " if", "else", " else", ":", ":\n", "(", ")", "[", "]", ",", " ", "\n", "\n ", "\n  ",
              "\n   ", "\n    ", "\n\n", "  ", "    ", "\t", " a", " b", "a", "b", "x", " x", "#", " #", "((", "))", "),"}
    preferred = {i for i in range(v.size) if v.token_bytes(i) is not None
                 and v.token_bytes(i).decode("utf-8", "replace") in pieces}
    assert len(preferred) > 20
    rng = random.Random(11)
    finished = 0
    for _ in range(40):
        out, accepting, stopped = _walk(cg, v, rng, preferred, steps=80, stop_after=20, p_stop=0.2)
        if not (stopped and accepting):
            continue
        text = out.decode()
        assert _lark_ok(parser, text) in (True, None), repr(text)
        finished += 1
    assert finished > 10


def _walk(cg, v, rng, preferred, *, steps, stop_after, p_stop, closers=None, close_after=None):
    """One random walk under the mask of ``cg`` on vocabulary ``v``: mostly ``preferred`` tokens
    (``closers`` past ``close_after`` steps), ending at EOS, or with probability ``p_stop`` at an
    accepting point past ``stop_after`` steps.  Returns ``(bytes, accepting, stopped before
    ``steps`` ran out)``."""
    bm = sg.allocate_bitmask(1, v.logits_width)
    eos = set(v.eos_ids)
    m, out = cg.matcher(), b""
    for step in range(steps):
        m.fill_bitmask(bm, 0)
        allowed = [int(t) for t in sg.bitmask_to_ids(bm[0])]
        assert allowed
        if step > stop_after and m.is_accepting() and rng.random() < p_stop:
            return out, True, True
        pool = closers if closers is not None and step > close_after else preferred
        good = [t for t in allowed if t in pool]
        t = rng.choice(good if good and rng.random() < 0.95 else [t for t in allowed if t not in eos] or allowed)
        if t in eos:
            return out, m.is_accepting(), True
        assert m.advance(t)
        out += v.token_bytes(t)
    return out, m.is_accepting(), False


def test_lark_indented_tree_example():
    """lark's examples/indented_tree.py as vendored (comments inside the newline terminal): its
    own example parses, and every string up to 6 characters agrees with Lark."""
    from pathlib import Path

    text = (Path(__file__).parent.parent / "benchmarks" / "grammars" / "lark_indented_tree.lark").read_text()

    class Example(LarkIndenter):
        NL_type, OPEN_PAREN_types, CLOSE_PAREN_types = "_NL", [], []
        INDENT_type, DEDENT_type, tab_len = "_INDENT", "_DEDENT", 8

    parser = lark.Lark(text, parser="lalr", postlex=Example())
    alpha = "a \n\t#"
    cg = sg.compile(sg.Grammar.from_lark(text, postlex=Example()), _vocab(alpha))
    example = "\na\n    # check this comment out\n    b\n    c\n        d\n        e\n    f\n        g\n"
    assert _lark_ok(parser, example) and _accepts(cg, example)
    seen = 0
    for n in range(7):
        for t in itertools.product(alpha, repeat=n):
            s = "".join(t)
            ok = _lark_ok(parser, s)
            if ok is None:
                continue
            seen += ok
            assert _accepts(cg, s) == ok, repr(s)
    assert seen > 100


def test_python_lark_accepts_real_files(vocab):
    """lark's python.lark (file_input) with Lark's PythonIndenter: files of lark's own source are
    accepted byte by byte on llama3; a bad dedent and an unclosed block are not."""
    import os
    from pathlib import Path

    text = (Path(__file__).parent.parent / "benchmarks" / "grammars" / "lark_python.lark").read_text()
    cg = sg.compile(sg.Grammar.from_lark(text, start="file_input", postlex=PythonIndenter()), vocab("llama3"))
    # the Indenter's columns and the lookahead conditions, written per prefix of each rule
    # (grammar.left_chains), not per combination over whole rules: 3.3M dotted rules before
    assert cg.engine.tables.n_dr < 400_000, cg.engine
    parser = lark.Lark(text, parser="lalr", postlex=PythonIndenter(), start="file_input")
    here = os.path.dirname(lark.__file__)
    for name in ("indenter.py", "grammar.py", "parsers/lalr_parser_state.py"):
        src = Path(here, name).read_text()
        assert _lark_ok(parser, src)
        assert _accepts(cg, src), name
    for bad in ("if x:\n        a\n    b\n", "def f(x):\n", "x = (1,\n",
                # a comment is the newline's longest match, non-ASCII letters included: the block is empty
                "if x:\n  #\u00e9\n", "if x:\n  #c\u00e9 = 1\n"):
        assert not _lark_ok(parser, bad)
        assert not _accepts(cg, bad), bad
    for good in ("x = 1 #\u00e9\ny = 2\n", "if x:\n    y = 1\n  #c\u00e9 = 1\n", "\u00e9 = 1 # \u00e9\n"):
        assert _lark_ok(parser, good)
        assert _accepts(cg, good), good


PY_PROGRAMS = ("if x:\n    pass\n", "ifx:\n    pass\n", "ifx = 1\n", "aisx\n", "a is x\n", "_, a = 1, 2\n",
               "def f(a, *b):\n    return a\n", "returnx\n", "x = 1if y else 2\n", "x = r'a' + b\"c\"\n",
               "while x:\n\tx -= 1\nelse:\n\tpass\n", "lambdax: 1\n", "x == 1 != 2\n", "x = [\n 1,\n]\n",
               "class C(B):\n    def f(self): pass\n", "import a.b as c\n", "x = 0x1f + 1e5 + 1_000j\n",
               "notx or y\n", "for i in x: print(i)\n", "x = ...\n", "x = a[1:2, ::3]\n")


def test_python_lark_basic_lexer_as_lark(vocab):
    """python.lark with ``lexer="basic"`` (Lark's basic lexer: keywords never names, every token its
    longest match) under the PythonIndenter: the prefix chains keep its conditions' product small
    enough to compile; programs and their one-character mutations are judged as Lark's ``lalr``
    parser with the basic lexer judges them, and lark's own files as well."""
    import os
    from pathlib import Path

    text = (Path(__file__).parent.parent / "benchmarks" / "grammars" / "lark_python.lark").read_text()
    g = sg.Grammar.from_lark(text, start="file_input", postlex=PythonIndenter(), lexer="basic")
    cg = sg.compile(g, vocab("llama3"))
    parser = lark.Lark(text, parser="lalr", lexer="basic", postlex=PythonIndenter(), start="file_input")
    rng = random.Random(3)
    seen = {True: 0, False: 0}
    for prog in PY_PROGRAMS:
        cases = [prog]
        for _ in range(6):
            i = rng.randrange(len(prog))
            cases.append(prog[:i] + prog[i + 1:])
            cases.append(prog[:i] + rng.choice(" _x1:(=\n") + prog[i:])
        for s in cases:
            ok = _lark_ok(parser, s)
            if ok is None:
                continue
            seen[ok] += 1
            assert _accepts(cg, s) == ok, repr(s)
    assert seen[True] > 40 and seen[False] > 40, seen
    here = os.path.dirname(lark.__file__)
    for name in ("indenter.py", "parsers/lalr_parser_state.py"):
        src = Path(here, name).read_text()
        assert _accepts(cg, src) == _lark_ok(parser, src), name
    # sampled under the mask (llama3, tokens of a small Python-like alphabet preferred): what ends
    # accepting parses
    v = vocab("llama3")
    pieces = {"if", " if", "x", " x", "_", " _", " =", " ==", " 1", "1", " 0", ":", ":\n", "\n", "\n   ", "\n    ",
              "    ", " (", "(", ")", ",", " else", "else", " return", "pass", " pass", " not", " is", " and",
              "ifx", " ifx", "1if", "0x", " def", " f", "():", "\"", " '", "'"}
    preferred = {i for i in range(v.size) if v.token_bytes(i) is not None
                 and v.token_bytes(i).decode("utf-8", "replace") in pieces}
    closers = {i for i in preferred if v.token_bytes(i) in (b")", b"\n", b"'", b'"', b" 1", b" pass")}
    finished = 0
    for _ in range(16):
        out, accepting, _ = _walk(cg, v, rng, preferred, steps=60, stop_after=8, p_stop=0.5, closers=closers,
                                  close_after=30)
        if accepting:
            assert _lark_ok(parser, out.decode()) in (True, None), repr(out)
            finished += 1
    assert finished >= 4, finished


def test_max_follow_rules_can_be_raised_and_lowered():
    """The conditions' rule limit named by LimitExceeded is an option of from_lark."""
    ind = sg.Indenter.of(TreeIndenter(), max_column=12)
    with pytest.raises(sg.LimitExceeded, match="max_follow_rules"):
        sg.Grammar.from_lark(TREE, postlex=ind, max_follow_rules=10)
    g = sg.Grammar.from_lark(TREE, postlex=ind, max_follow_rules=10_000_000)
    assert _accepts(sg.compile(g, _vocab("a \n\t")), "a\n  a\n")
    with pytest.raises(sg.OptionError, match="max_follow_rules"):
        sg.Grammar.from_lark(TREE, postlex=ind, max_follow_rules=0)
