"""``%import`` of Lark grammar files (``import_paths=``, ``source_path=``) and error positions.

lark's ``examples/composition/storage.lark`` imports ``csv.lark`` and ``json.lark`` beside it
(vendored in tests/data/lark_composition, MIT); Lark itself is the oracle for the sentences.
"""
from __future__ import annotations

from pathlib import Path

import pytest

lark = pytest.importorskip("lark")

import structgen as sg  # noqa: E402
from structgen.vocab.vocabulary import Vocabulary  # noqa: E402
from tests.helpers import lark_accepts  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "lark_composition"
VOCAB = Vocabulary.from_bytes([bytes([i]) for i in range(32, 127)] + [b"\n", b"\t", None], eos_ids=[97])

SENTENCES = [
    "# a b\n1,2\n", '{"a": 1}\n', '# x\nfoo,1.5\n{"k": [1, 2, null]}\n', '{"a": }\n', "# a\n", "1,2\n",
    '# h\n3 4\n{"b": "c"}', '{"a": 1}{"b": 2}',
]


@pytest.mark.parametrize("how", ["import_paths", "source_path"])
def test_storage_lark_imports_csv_and_json(how):
    text = (DATA / "storage.lark").read_text()
    kw = {"import_paths": [DATA]} if how == "import_paths" else {"source_path": DATA / "storage.lark"}
    cg = sg.compile(sg.Grammar.from_lark(text, **kw), VOCAB)
    oracle = lark.Lark(text, parser="earley", lexer="dynamic_complete", import_paths=[str(DATA)])
    seen = set()
    for s in SENTENCES:
        m = cg.matcher()
        got = m.advance_bytes(s.encode()) and m.is_accepting()
        want = lark_accepts(oracle, s)
        assert got == want, s
        seen.add(want)
    assert seen == {True, False}


def test_missing_import_names_the_import_and_its_line():
    text = (DATA / "storage.lark").read_text()
    with pytest.raises(sg.GrammarError) as ei:
        sg.Grammar.from_lark(text)
    e = ei.value
    assert "%import" in str(e) and "csv.lark" in str(e) and "regex" not in str(e)
    line = text.splitlines()[e.line - 1]
    assert line.startswith("%import .csv"), (e.line, e.column)
    assert e.column == 1


def test_import_paths_accepts_one_folder():
    text = "start: WORD\n%import mygrammar.WORD\n"
    with pytest.raises(sg.GrammarError) as ei:
        sg.Grammar.from_lark(text, import_paths=str(DATA))
    assert (ei.value.line, ei.value.column) == (2, 1)
    assert "mygrammar.lark" in str(ei.value)


def test_empty_terminal_error_points_at_the_literal():
    """llguidance's rfc.lark: Lark refuses ``""``; the position is the literal's, not 1:1."""
    text = (DATA / "llguidance_rfc.lark").read_text()
    with pytest.raises(sg.GrammarError) as ei:
        sg.Grammar.from_lark(text)
    e = ei.value
    assert "Empty terminals" in str(e)
    assert e.line > 1
    assert text.splitlines()[e.line - 1][e.column - 1:e.column + 1] == '""'


def test_empty_terminal_position_skips_comments_and_escapes():
    text = 'start: "a" x\n// "" in a comment\nx: "\\"" | ""\n'
    with pytest.raises(sg.GrammarError) as ei:
        sg.Grammar.from_lark(text)
    assert (ei.value.line, ei.value.column) == (3, 11)
