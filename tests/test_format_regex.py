"""``format: "regex"``: a sound regular subset of ECMA-262 pattern syntax (``u`` flag), checked against a
JavaScript engine (QuickJS): every string the compiled schema takes compiles as a ``RegExp``; common
patterns are taken; the official suite's regex format tests pass (tests/data/json_schema_suite_baseline.json)."""
from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import structgen as sg
from structgen.vocab import Vocabulary

quickjs = pytest.importorskip("quickjs")

_ALPHABET = "ab0129zAZ_-^$\\.*+?()[]{}|,<>=!:Pkdcux/ é"


@pytest.fixture(scope="module")
def regex_format():
    toks = [bytes([i]) for i in range(256)]
    vocab = Vocabulary.from_bytes(toks + [b"</s>"], eos_ids=[256], special_ids=[256])
    return sg.compile(sg.Grammar.from_json_schema({"type": "string", "format": "regex"}), vocab, cache=False)


@pytest.fixture(scope="module")
def js_valid():
    fn = quickjs.Context().eval('(function (s) { try { new RegExp(s, "u"); return true } catch (e) { return false } })')
    return lambda s: bool(fn(s))


def _takes(cg, s: str) -> bool:
    m = cg.matcher()
    return m.advance_bytes(json.dumps(s).encode()) and m.is_accepting()


@settings(max_examples=1500, deadline=None)
@given(st.text(_ALPHABET, max_size=14))
@example("[z-a]")
@example("a{2,1}")
@example("(?<a>x)(?<a>y)")
@example("\\1")
@example("a**")
@example("^*")
@example("(?=a)*")
@example("[\\w-a]")
@example("\\-")
@example("[\\-]")
@example("]")
@example("{")
@example("\\u{110000}")
@example("(?<a>x)\\k<b>")
@example("\\c1")
@example("\\01")
@example("x{99,100}")
@example("x{10,9}")
def test_every_taken_pattern_compiles_in_javascript(regex_format, js_valid, s):
    if _takes(regex_format, s):
        assert js_valid(s), s


@pytest.mark.parametrize("s", [
    "", "^[a-z]+$", r"^\d{3}-\d{4}$", "^(foo|bar)$", r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}",
    r"^(?:\+?1)?\d{10}$", r"(?<year>\d{4})-(?:0[1-9]|1[0-2])", r"\u00e9|é", "^.*$", "x{0,}", "a|", "[]", "[^]",
    r"\cA", r"(?<=a+)b", r"(?<!\$)\d+(?:\.\d\d)?", r"^[^\s@]+$", r"\bword\b", r"\/path\/", "a{1,10}?", "[0-7]",
    "[5-9a-f]",
])
def test_common_patterns_are_taken(regex_format, js_valid, s):
    assert js_valid(s), s  # the list itself is right
    assert _takes(regex_format, s), s


def test_the_suite_cases(regex_format):
    for s, valid in [("([abc])+\\s+$", True), ("^(abc]", False), ("\\a", False), ("(?P<name>x)", False),
                     ("(?#comment)a", False), ("(?i)abc", False), ("(?<name>x)", True)]:
        assert _takes(regex_format, s) == valid, s
