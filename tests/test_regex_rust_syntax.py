"""The Rust ``regex`` crate's syntax (``syntax="rust"``; Lark's ``regex_syntax="rust"``, as
llguidance reads its grammars), checked against llguidance itself, whose regexes are Rust's:
on every byte prefix of every probe string, structgen's matcher and llguidance's agree on
whether the prefix is still alive, and at the end on acceptance.  The byte-level oracle feeds
GPT-2's single-byte tokens, so any UTF-8 text can be spelled.  Errors and refusals are checked
by name and position."""
from __future__ import annotations

import random
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import structgen as sg
from tests.helpers import TOKENIZERS_DIR

llguidance = pytest.importorskip("llguidance")
import llguidance.hf  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

BYTES = sg.Vocabulary.from_bytes([bytes([i]) for i in range(256)] + [None], eos_ids=[256])


def _gpt2_byte_tokens(tok):
    # GPT-2's byte-to-character table (printable bytes stand for themselves, the rest shifted)
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, map(chr, cs)))
    return [tok.convert_tokens_to_ids(table[b]) for b in range(256)]


@pytest.fixture(scope="module")
def oracle():
    tok = AutoTokenizer.from_pretrained(str(TOKENIZERS_DIR / "gpt2"))
    lt = llguidance.hf.from_tokenizer(tok)
    byte_token = _gpt2_byte_tokens(tok)

    def run(kind, text, probes):
        """Per probe: the list of prefix verdicts (alive after each byte) and the final one."""
        m = llguidance.LLMatcher(lt, llguidance.grammar_from(kind, text))
        assert not m.is_error(), m.get_error()
        out = []
        for s in probes:
            toks = [byte_token[b] for b in s.encode()]
            n = m.validate_tokens(toks)   # accepted one after another, the state unchanged
            alive = [True] * n + ([False] if n < len(toks) else [])
            accepting = False
            if n == len(toks):
                assert m.consume_tokens(toks)
                accepting = m.is_accepting()
                assert m.rollback(len(toks))
            assert not m.is_error(), m.get_error()
            out.append((alive, bool(accepting)))
        return out
    return run


def _ours(grammar, probes):
    out = []
    base = sg.compile(grammar, BYTES).matcher()
    for s in probes:
        m = base.fork()
        alive = []
        for b in s.encode():
            ok = m.advance(b)
            alive.append(ok)
            if not ok:
                break
        out.append((alive, bool(alive == [True] * len(s.encode()) and m.is_accepting())))
    return out


def _check(oracle, pattern, probes):
    want = oracle("regex", pattern, probes)
    got = _ours(sg.Grammar.from_regex(pattern, syntax="rust"), probes)
    for s, w, g in zip(probes, want, got):
        assert g == w, (pattern, s, "llguidance", w, "structgen", g)


ALPHABET = "aAbBeEéÉzZ019٣_ -*:.\n\tαΩß\u2028\u00a0😀[]&~^\\"
CASES = [
    r"\p{L}+", r"\pN\PN", r"\p{Lu}\p{gc=Ll}*", r"\p{Greek}+", r"\p{sc=Latin}+", r"\p{sc:Greek}+", r"\p{gc:Lu}", r"\p{White_Space}", r"\P{L}+",
    r"[[:alpha:]]+", r"[[:^digit:]]+", r"[[:word:][:punct:]]+", r"[a-z&&[^aeiou]]+", r"[\w--\d]+",
    r"[a-f~~c-h]+", r"[[a-c][x-z]]+", r"[^[a-z]&&[^\d]]", r"[]a]+", r"[^]a]", r"[a-]+", r"[-a]+",
    r"\x{41}\u{e9}\U{1F600}", r"\x2A\u00e9\U0001F600", r"\x41+", r"[\x{61}-\x{63}]+", r"\*\.\-\#\&\~",
    r"\d+", r"\w+", r"\s+", r"(?-u:\w)+", r"(?-u)\d\s", r"(?i)ab(?-i)c", r"a(?i)b|c", r"(?i:é)ß",
    r"(?x) a b \  c # comment", r"(?s:.)", r".", r"a$", r"\Aab\z", r"(?U)a+?b", r"(?P<x>a)(?<y>b)",
    r"a{2,3}", r"(ab|a)*", r"[\p{L}&&\p{Greek}]+", r"[\p{Nd}--[0-9]]", r"[^\p{L}\s]",
]


@pytest.mark.parametrize("pattern", CASES)
def test_against_llguidance_on_every_prefix(oracle, pattern):
    rng = random.Random(pattern)
    probes = [c for c in ALPHABET] + ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(2, 6)))
                                      for _ in range(60)]
    probes += ["ab", "ABc", "aab", "ab\n", "bcd", "Abc", "αβγ", "é😀", "*é😀", "Aé😀", "AAA", "abc", " c"]
    _check(oracle, pattern, probes)


ATOMS = [r"\p{L}", r"\pN", r"[[:alpha:]]", r"[[:^digit:]]", r"[a-z&&[^aeiou]]", r"[\w--\d]", r"[a-f~~c-h]",
         r"\x{41}", r"\u{e9}", r"\d", r"\s", r"\w", r"(?i:ab)", r".", r"[^\n]", r"\x2A", r"é", r"a", r"\p{Greek}",
         r"[\p{Lu}--[A-M]]", r"(?-u:\w)"]


@st.composite
def patterns(draw):
    def node(depth):
        if depth == 0 or draw(st.integers(0, 2)) == 0:
            return draw(st.sampled_from(ATOMS))
        kind = draw(st.integers(0, 2))
        if kind == 0:
            return "".join(node(depth - 1) for _ in range(draw(st.integers(2, 3))))
        if kind == 1:
            return "(?:" + "|".join(node(depth - 1) for _ in range(2)) + ")"
        return "(?:" + node(depth - 1) + ")" + draw(st.sampled_from(["*", "+", "?", "{1,2}", "{2}"]))
    return node(3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=patterns(), seed=st.integers(0, 2**16))
def test_random_patterns_against_llguidance(oracle, pattern, seed):
    rng = random.Random(seed)
    probes = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 5))) for _ in range(25)]
    probes += ["aa", "AéA", "b*", "bc", "Ω1"]
    _check(oracle, pattern, probes)


def test_class_escapes_match_rusts_on_sampled_code_points(oracle):
    """``\\d \\w \\s`` and a few properties on every code point below U+0800 and a sample of the
    rest (assigned characters of this Python's Unicode)."""
    rng = random.Random(7)
    cps = [c for c in range(0x20, 0x800) if unicodedata.category(chr(c)) != "Cs"]
    cps += [c for c in rng.sample(range(0x800, 0x30000), 3000)
            if unicodedata.category(chr(c)) not in ("Cs", "Cn")]
    chars = [chr(c) for c in cps]
    for cls in (r"\d", r"\w", r"\s", r"\p{Alphabetic}", r"\p{Greek}", r"\p{Lm}", r"[[:punct:]]"):
        want = [w for _, w in oracle("regex", cls, chars)]
        got = [g for _, g in _ours(sg.Grammar.from_regex(cls, syntax="rust"), chars)]
        bad = [f"U+{ord(c):04X}" for c, w, g in zip(chars, want, got) if w != g]
        assert not bad, (cls, bad[:10], len(bad))


LARK = [
    ('start: NAME ":" NUM\nNAME: /\\p{L}+/\nNUM: /\\d+/', ["héllo:12", "ab:", "a1:2", "Ωμ:٣"]),
    ('start: /\\x2A+/ "-" /[[:alpha:]&&[^aeiou]]+/', ["**-bcd", "*-a", "**-", "-b"]),
    ('start: WORD (" " WORD)*\nWORD: /\\p{Lu}/ /[\\w--\\d]/*', ["Abc Def", "Abc def", "A B_c", "A1"]),
    ('start: /(?i)hello/ /\\s+/ /\\u{e9}+/', ["HeLLo \u00e9\u00e9", "hello\t\u00e9", "hello\u00e9"]),
]


@pytest.mark.parametrize("case", range(len(LARK)))
def test_lark_terminals_in_rust_syntax_match_llguidance(oracle, case):
    text, probes = LARK[case]
    rng = random.Random(case)
    probes = probes + ["".join(rng.choice(ALPHABET + "lho:") for _ in range(rng.randint(1, 6))) for _ in range(40)]
    want = oracle("lark", text, probes)
    got = _ours(sg.Grammar.from_lark(text, regex_syntax="rust"), probes)
    for s, w, g in zip(probes, want, got):
        assert g == w, (text, s, "llguidance", w, "structgen", g)


def test_python_syntax_is_still_the_default():
    # [a-z&&b] in Python's re is the class {a-z, &} then the literal "b]"... here: a class and "]"
    m = sg.compile(sg.Grammar.from_lark("start: /[a&&b]]/"), BYTES).matcher()
    assert m.advance_bytes(b"&]") and m.is_accepting()
    r = sg.compile(sg.Grammar.from_lark("start: /[a&&[ab]]/", regex_syntax="rust"), BYTES).matcher()
    assert r.advance_bytes(b"a") and r.is_accepting() and not r.fork().advance_bytes(b"&")


@pytest.mark.parametrize("pattern, error, pos", [
    (r"a\bb", sg.Unsupported, 1), (r"(?R)a", sg.Unsupported, 0), (r"(a)\1", sg.Unsupported, 3),
    (r"\p{NoSuchProperty}", sg.Unsupported, 0), (r"[ab", sg.RegexError, 0), (r"a*+", sg.RegexError, None),
    (r"\N{DIGIT ONE}", sg.RegexError, 0), (r"(?a)x", sg.RegexError, 2), (r"\x{D800}", sg.RegexError, 0),
    (r"\q", sg.RegexError, 0),
])
def test_errors_name_the_position(pattern, error, pos):
    with pytest.raises(error) as e:
        sg.Grammar.from_regex(pattern, syntax="rust")
    if pos is not None:
        assert e.value.pos == pos, (pattern, e.value)


def test_bad_option():
    with pytest.raises(sg.OptionError, match="regex_syntax"):
        sg.Grammar.from_lark('start: "a"', regex_syntax="perl")
    with pytest.raises(sg.OptionError, match="syntax"):
        sg.Grammar.from_regex("a", syntax="perl")
