"""Grammar front-ends: Lark and GBNF loaders, the CFG IR checks, line/column errors."""
from __future__ import annotations

import pytest

from structgen import grammars
from structgen.automaton import ir
from structgen.cfg import CFG
from structgen.frontends import gbnf_to_cfg, lark_to_cfg
from structgen.cfg.engine import normalise
from structgen.frontends.gbnf import parse_gbnf
from structgen.errors import GrammarError, Unsupported


def test_lark_rules_terminals_ignore():
    cfg = lark_to_cfg('''
start: item+
?item: NAME | "(" start ")" | _sep{NUMBER, ","}
_sep{x, s}: x (s x)*
NAME: /[a-z]+/i
%import common.NUMBER
%import common.WS
%ignore WS
''')
    assert cfg.start == "start"
    assert "WS" in cfg.ignore and "WS" in cfg.terminals
    assert set(cfg.rules) >= {"start", "item"}
    for alts in cfg.rules.values():
        for rhs in alts:
            for s in rhs:
                assert s in cfg.rules or s in cfg.terminals
    cfg.validate()


def test_lark_case_insensitive_string():
    cfg = lark_to_cfg('start: "ab"i\n')
    (t,) = cfg.terminals.values()
    assert isinstance(t, ir.Seq) and t.items[0].contains(ord("A")) and t.items[0].contains(ord("a"))


def test_known_lazy_terminals_are_translated():
    cfg = lark_to_cfg('start: ESCAPED_STRING C_COMMENT\n%import common.ESCAPED_STRING\n%import common.C_COMMENT\n')
    assert set(cfg.terminals) == {"ESCAPED_STRING", "C_COMMENT"}


def test_unknown_lookaround_is_unsupported():
    with pytest.raises(Unsupported, match="lookbehind"):
        lark_to_cfg("start: A\nA: /(?<=b)a/\n")
    with pytest.raises(GrammarError, match="empty"):  # a lookahead that nothing after A satisfies
        lark_to_cfg("start: A\nA: /a(?=b)/\n")
    lark_to_cfg('start: A "b"\nA: /a(?=b)/\n')


@pytest.mark.parametrize("text,line,col", [
    ('start: "a" (\n', 1, 13),                 # syntax error
    ('start: "x"\n   | foo\n', 2, 6),          # undefined rule
    ('start: A\nA: /a(/\n', 2, 4),             # bad regex
    ('start: "a" start\n', 1, 1),              # empty language
])
def test_lark_errors_have_line_and_column(text, line, col):
    with pytest.raises(GrammarError) as ei:
        normalise(lark_to_cfg(text))
    assert (ei.value.line, ei.value.column) == (line, col)


def test_lark_undefined_start():
    with pytest.raises(GrammarError) as ei:
        lark_to_cfg('foo: "a"\n')
    assert ei.value.line is not None


def test_declared_terminal_unsupported():
    with pytest.raises(Unsupported):
        lark_to_cfg("%declare FOO\nstart: FOO\n")


def test_every_shipped_grammar_loads():
    assert set(grammars.names()) >= {"json", "sql", "arithmetic", "c_subset", "csv", "sexpr", "robot"}
    for name in grammars.names():
        cfg = lark_to_cfg(grammars.load(name))
        normalise(cfg)
    with pytest.raises(KeyError):
        grammars.load("nope")


GBNF = r'''
# a small JSON-ish object
root  ::= "{" ws pair (ws "," ws pair)* ws "}"
pair  ::= str ws ":" ws value
value ::= str | num | root | "[" ws ( value (ws "," ws value)* )? ws "]"
str   ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4} )* "\""
num   ::= "-"? [0-9]+ ("." [0-9]+)?
ws    ::= [ \t\n]{0,3}
'''


def test_gbnf_parses_and_folds_regular_parts():
    raw = parse_gbnf(GBNF)
    assert set(raw) == {"root", "pair", "value", "str", "num", "ws"}
    cfg = gbnf_to_cfg(GBNF)
    cfg.validate()
    # str / num / ws are regular: folded into the terminals of the rules that use them (not rules)
    assert not {"str", "num", "ws"} & set(cfg.rules) and {"root", "value"} <= set(cfg.rules)
    normalise(cfg)


@pytest.mark.parametrize("text,line,col", [
    ('root ::= "a" foo\n', 1, 14),
    ('root ::= "a\n', 1, 10),
    ('root ::= ( "a" \n', 2, 1),
    ('root := "a"\n', 1, 6),
    ('root ::= "a"{3,1}\n', 1, 13),
    ('root ::= "a" )\n', 1, 14),
    ('root ::= "a"\nroot ::= "b"\n', 2, 1),
    ('root ::= [b-a]\n', 1, 10),
    ('root ::= "\\q"\n', 1, 11),
])
def test_gbnf_errors_have_line_and_column(text, line, col):
    with pytest.raises(GrammarError) as ei:
        gbnf_to_cfg(text)
    assert (ei.value.line, ei.value.column) == (line, col), str(ei.value)


def test_gbnf_missing_start_and_empty_language():
    with pytest.raises(GrammarError):
        gbnf_to_cfg('x ::= "a"\n')
    with pytest.raises(GrammarError) as ei:
        normalise(gbnf_to_cfg('root ::= "a" root\n'))
    assert ei.value.line == 1


def test_cfg_ir_validation():
    lit = ir.literal("a")
    with pytest.raises(GrammarError):
        CFG("s", {"s": [("x",)]}, {"a": lit}).validate()
    with pytest.raises(GrammarError):
        CFG("a", {"s": [("a",)]}, {"a": lit}).validate()
    with pytest.raises(GrammarError):
        CFG("s", {"s": [("a",)], "a": [()]}, {"a": lit}).validate()
    CFG("s", {"s": [("a", "s"), ()]}, {"a": lit}).validate()


def test_grammar_compiles_leave_no_reference_cycles(monkeypatch):
    """Compiling GBNF (recursive rule walks), Lark (the reader's ring of closures) with the Indenter
    (bracket rules) and a grammar with long rules (left_chains) leaves nothing of structgen's to the
    garbage collector: recursive closures are cleared after use, so what they held is freed by
    reference counting."""
    import types

    from tests.helpers import cyclic_garbage

    import structgen as sg
    from structgen import caching

    vocab = sg.Vocabulary.from_bytes([b"a", b"b", b"ab", b" ", b"\n", b"  ", b":", b"(", b")", None], eos_ids=[9])
    tree = ('start: _NL* tree\ntree: NAME ["(" NAME ")"] _NL [_INDENT tree+ _DEDENT]\nNAME: /[a-z]+/\n'
            '_NL: /(\\r?\\n[\\t ]*)+/\n%declare _INDENT _DEDENT\n')
    indenter = sg.Indenter(nl_type="_NL", open_paren_types=("LPAR",), close_paren_types=("RPAR",))

    def work():
        for g in (sg.Grammar.from_gbnf('root ::= "a" s ":" s\ns ::= "" | [ab] s\n'),
                  sg.Grammar.from_lark(tree, postlex=indenter),
                  sg.Grammar.from_lark('start: x+\nx: "a" | "b" x ":" "a" "b"\n')):
            m = sg.compile(g, vocab, cache=False, prefill=0).matcher()
            m.mask_words()

    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", "")  # read every time: not from the disk cache
    work()
    caching.clear_caches()  # nor from the memory caches
    # ours only: the standard library's ast.literal_eval (Lark's loader) leaves its own cycles
    left = sorted({getattr(o, "__qualname__", type(o).__qualname__) for o in cyclic_garbage(work)
                   if type(o).__module__.startswith("structgen")
                   or (isinstance(o, types.FunctionType) and "structgen" in o.__code__.co_filename)})
    assert not left, left
