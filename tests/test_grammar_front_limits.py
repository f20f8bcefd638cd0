"""Hostile grammars (issue #14): deep rule chains, deep nesting and surrogate literals end in a
compiled grammar or a named :class:`GrammarError` with its position, never a RecursionError.

The cases are the grammar entries of ``tests/data/fuzz_seeds_grammar.json`` (shared with the fuzz
suite): ``expect`` is ``"ok"`` or the error class's name."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import structgen as sg
from structgen.vocab.vocabulary import Vocabulary

SEEDS = json.loads((Path(__file__).resolve().parent / "data" / "fuzz_seeds_grammar.json").read_text())
VOCAB = Vocabulary.from_bytes([bytes([i]) for i in range(32, 127)] + [b"\n", None], eos_ids=[96])


@pytest.mark.parametrize("case", SEEDS, ids=[f"{c['kind']}-{i}" for i, c in enumerate(SEEDS)])
def test_seed(case):
    make = sg.Grammar.from_gbnf if case["kind"] == "gbnf" else sg.Grammar.from_lark
    try:
        sg.compile(make(case["input"], **case["options"]), VOCAB)
        got = "ok"
    except sg.StructgenError as e:
        got = type(e).__name__
        if isinstance(e, sg.GrammarError):
            assert e.line is not None and e.column is not None, str(e)
    assert got == case["expect"]


def test_chain_of_5000_rules_accepts_its_sentence():
    text = "\n".join([f'r{i} ::= "a" r{i + 1}' for i in range(5000)] + ['r5000 ::= "x"']).replace("r0", "root", 1)
    m = sg.compile(sg.Grammar.from_gbnf(text), VOCAB).matcher()
    assert m.advance_bytes(b"a" * 5000 + b"x") and m.is_accepting()


def test_surrogate_positions():
    with pytest.raises(sg.GrammarError) as ei:
        sg.Grammar.from_gbnf('x ::= "a"\nroot ::= "ab" | "c\\uD800"')
    assert (ei.value.line, ei.value.column) == (2, 19)
    with pytest.raises(sg.GrammarError) as ei:
        sg.Grammar.from_lark('start: "a" X\nX: "\\udfff"\n')
    assert (ei.value.line, ei.value.column) == (2, 5)
    with pytest.raises(sg.GrammarError) as ei:
        sg.Grammar.from_gbnf("root ::= " + "(" * 300 + '"x"' + ")" * 300)
    assert ei.value.column == 10 + 200


def test_lark_nesting_limit_does_not_depend_on_the_recursion_limit():
    """Groups nested deeper than MAX_NESTING are refused with the deepest group's position even
    when the interpreter's recursion limit would let Lark's loader through (CI once ran with a
    raised one and compiled the 200-deep seed)."""
    import sys

    from structgen.frontends import lark as lark_frontend

    limit = lark_frontend.MAX_NESTING
    ok = "start: " + "(" * limit + '"a"' + ")" * limit
    bad = "start: " + "(" * (limit + 1) + '"a"' + ")" * (limit + 1)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        with pytest.raises(sg.GrammarError, match=f"nested {limit + 1} deep") as e:
            sg.Grammar.from_lark(bad)
    finally:
        sys.setrecursionlimit(old)
    assert (e.value.line, e.value.column) == (1, len("start: ") + limit + 1)
    assert sg.compile(sg.Grammar.from_lark(ok), VOCAB).matcher().advance_bytes(b"a")
