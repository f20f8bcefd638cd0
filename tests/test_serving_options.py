"""The serving backends' options from the environment (structgen.integrations.serving), no
engine needed: each value the docstring names is read, any other is an OptionError naming the
variable, and the regex syntax reaches regex requests and Lark terminals."""
import pytest

import structgen as sg
from structgen.integrations.serving import engine_options, grammar_for

BYTES = sg.Vocabulary.from_bytes([bytes([i]) for i in range(256)] + [None], eos_ids=[256])


def test_values_and_defaults():
    assert engine_options({}) == {"whitespace": "dumps", "regex_syntax": "ecma"}
    for ws in ("dumps", "compact", "flexible"):
        for syn in ("ecma", "python", "rust"):
            got = engine_options({"STRUCTGEN_WHITESPACE": ws, "STRUCTGEN_REGEX_SYNTAX": syn.upper()})
            assert got == {"whitespace": ws, "regex_syntax": syn}
    with pytest.raises(sg.OptionError, match="STRUCTGEN_REGEX_SYNTAX"):
        engine_options({"STRUCTGEN_REGEX_SYNTAX": "perl"})
    with pytest.raises(sg.OptionError, match="STRUCTGEN_WHITESPACE"):
        engine_options({"STRUCTGEN_WHITESPACE": "wide"})


def _accepts(grammar, text):
    m = sg.compile(grammar, BYTES).matcher()
    return m.advance_bytes(text.encode()) and m.is_accepting()


def test_regex_syntax_reaches_regexes_and_lark_terminals():
    assert _accepts(grammar_for("regex", r"\p{L}+\z", regex_syntax="rust"), "héllo")
    assert not _accepts(grammar_for("regex", r"\d", regex_syntax="ecma"), "٣")      # ECMA: [0-9]
    assert _accepts(grammar_for("regex", r"\d", regex_syntax="rust"), "٣")          # Rust: \p{Nd}
    lark = 'start: /[[:alpha:]]+/ ":" /\\d+/'
    assert _accepts(grammar_for("grammar", lark, regex_syntax="rust"), "ab:12")
    assert not _accepts(grammar_for("grammar", lark, regex_syntax="python"), "ab:12")  # Python: a class of [:alph
