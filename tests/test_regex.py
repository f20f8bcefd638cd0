"""Regex front-end + DFA builder against independent oracles.

Oracles: ``re.fullmatch`` / ``re.search`` for membership, the ``regex`` module's partial
matching for "is this a prefix of some match", hypothesis' ``from_regex`` for members.
"""
from __future__ import annotations

import itertools
import re

import pytest
import regex as regex_mod
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structgen.automaton import ir
from structgen.automaton.build import build_dfa
from structgen.errors import LimitExceeded, RegexError, Unsupported
from structgen.frontends.regex import dfa_from_regex, parse_regex, search_to_full

SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ---------------------------------------------------------------- random regex trees

POOL = ["a", "b", "c", "é", "中", "😀", "1", "_", " ", "\n", "٣", "Z"]
LITERALS = ["a", "b", "c", "é", "中", "😀", r"\.", "1", "-"]
CLASSES = [".", r"\d", r"\w", r"\s", r"\D", r"\W", "[abc]", "[^a]", "[a-cé]", "[^\n中]",
           "[à-ö😀]", r"[\dZ]", r"[^\w]", "[b-z]"]


def leaves():
    return st.one_of(st.sampled_from(LITERALS).map(lambda s: ("lit", s)),
                     st.sampled_from(CLASSES).map(lambda s: ("cls", s)))


QUANTS = ["*", "+", "?", "{2}", "{1,3}", "{2,}", "{,2}", "{0}", "*?", "+?", "??", "{1,2}?"]


def trees():
    return st.recursive(
        leaves(),
        lambda kids: st.one_of(
            st.lists(kids, min_size=2, max_size=3).map(lambda xs: ("seq", xs)),
            st.lists(kids, min_size=2, max_size=3).map(lambda xs: ("alt", xs)),
            st.tuples(kids, st.sampled_from(["(", "(?:", "(?P<{}>"])).map(lambda t: ("grp", *t)),
            st.tuples(kids, st.sampled_from(QUANTS)).map(lambda t: ("rep", *t)),
        ),
        max_leaves=7,
    )


def render(t, names=None, lazy=True) -> str:
    """Pattern text of a tree; ``lazy=False`` drops lazy marks (same language) because
    the ``regex`` module's partial matching mishandles them (e.g. ``a*?a`` on "ab")."""
    names = names if names is not None else [0]
    kind = t[0]
    if kind in ("lit", "cls"):
        return t[1]
    if kind == "seq":
        return "".join(_atomish(x, names, True, lazy) for x in t[1])
    if kind == "alt":
        return "|".join(render(x, names, lazy) for x in t[1])
    if kind == "grp":
        opener = t[2]
        if "{}" in opener:
            names[0] += 1
            opener = opener.format(f"g{names[0]}")
        return opener + render(t[1], names, lazy) + ")"
    if kind == "rep":
        q = t[2] if lazy else _strip_lazy(t[2])
        return _atomish(t[1], names, False, lazy) + q
    raise AssertionError(kind)


def _strip_lazy(q):
    return q[:-1] if len(q) > 1 and q.endswith("?") else q


def _atomish(t, names, in_seq, lazy):
    s = render(t, names, lazy)
    if t[0] in ("lit", "cls", "grp") or (in_seq and t[0] in ("seq", "rep")):
        return s
    return "(?:" + s + ")"


def _leaf_members(pattern):
    c = re.compile(pattern)
    return [ch for ch in POOL if c.fullmatch(ch)]


def sample(t, draw):
    """A string built to match tree ``t`` (None when a leaf has no member in POOL)."""
    kind = t[0]
    if kind in ("lit", "cls"):
        ms = _leaf_members(t[1])
        return draw(st.sampled_from(ms)) if ms else None
    if kind == "seq":
        parts = [sample(x, draw) for x in t[1]]
        return None if None in parts else "".join(parts)
    if kind == "alt":
        return sample(draw(st.sampled_from(t[1])), draw)
    if kind == "grp":
        return sample(t[1], draw)
    q = _strip_lazy(t[2])
    lo, hi = {"*": (0, 3), "+": (1, 3), "?": (0, 1), "{2}": (2, 2), "{1,3}": (1, 3),
              "{2,}": (2, 4), "{,2}": (0, 2), "{0}": (0, 0), "{1,2}": (1, 2)}[q]
    n = draw(st.integers(lo, hi))
    parts = [sample(t[1], draw) for _ in range(n)]
    return None if None in parts else "".join(parts)


def check_prefixes(dfa, pattern, s, flags=0):  # pattern without lazy quantifiers
    """Every char prefix: fullmatch <=> re, is_prefix <=> regex partial match; byte
    prefixes inside a multi-byte character: the implications that hold exactly."""
    comp = regex_mod.compile(pattern, flags)
    full = re.compile(pattern, flags)
    for i in range(len(s) + 1):
        pre = s[:i]
        assert dfa.fullmatch(pre.encode()) == (full.fullmatch(pre) is not None), (pattern, pre)
        exp = comp.fullmatch(pre, partial=True) is not None
        got = dfa.is_prefix(pre.encode())
        assert got == exp, (pattern, pre)
        if i < len(s):
            enc = s[i].encode()
            nxt = comp.fullmatch(s[:i + 1], partial=True) is not None
            for j in range(1, len(enc)):
                mid = dfa.is_prefix(pre.encode() + enc[:j])
                if nxt:
                    assert mid, (pattern, s[:i + 1], j)
                if mid:
                    assert exp, (pattern, pre, j)


@SETTINGS
@given(trees(), st.data())
def test_random_regex_fullmatch_and_prefixes(tree, data):
    pattern = render(tree)
    dfa = dfa_from_regex(pattern)
    comp = re.compile(pattern)
    strings = [data.draw(st.text(st.sampled_from(POOL), max_size=6)) for _ in range(4)]
    for _ in range(3):
        m = sample(tree, data.draw)
        if m is not None:
            strings.append(m)
            k = data.draw(st.integers(0, len(m)))
            strings.append(m[:k] + data.draw(st.sampled_from(POOL)) + m[k:])
            strings.append(m[:k] + m[k + 1:])
            strings.append(m + m)
    for s in strings:
        assert dfa.fullmatch(s.encode()) == (comp.fullmatch(s) is not None), (pattern, s)
        check_prefixes(dfa, render(tree, lazy=False), s)


SMALL_LEAVES = ["a", "b", "c", "[ab]", "[^a]", "(?:)"]
SMALL_WORDS = ["".join(t) for n in range(6) for t in itertools.product("abc", repeat=n)]


def small_trees():
    leaf = st.sampled_from(SMALL_LEAVES).map(lambda s: ("lit", s))
    return st.recursive(
        leaf,
        lambda kids: st.one_of(
            st.lists(kids, min_size=2, max_size=3).map(lambda xs: ("seq", xs)),
            st.lists(kids, min_size=2, max_size=3).map(lambda xs: ("alt", xs)),
            st.tuples(kids, st.sampled_from(QUANTS)).map(lambda t: ("rep", *t)),
        ),
        max_leaves=6,
    )


@SETTINGS
@given(small_trees())
def test_random_regex_exhaustive_small_alphabet(tree):
    """All strings up to length 5 over {a, b, c}: fullmatch <=> re.fullmatch."""
    pattern = render(tree)
    dfa = dfa_from_regex(pattern)
    comp = re.compile(pattern)
    for w in SMALL_WORDS:
        assert dfa.fullmatch(w.encode()) == (comp.fullmatch(w) is not None), (pattern, w)


def enumerate_patterns(size):
    """Every regex tree with exactly ``size`` nodes over leaves a, b, unary * ? {1,2}
    and binary concatenation / alternation (as pattern text, fully parenthesised)."""
    if size == 1:
        return ["a", "b"]
    out = [f"(?:{p}){q}" for p in enumerate_patterns(size - 1) for q in ("*", "?", "{1,2}")]
    for left in range(1, size - 1):
        for p in enumerate_patterns(left):
            for q in enumerate_patterns(size - 1 - left):
                out += [f"(?:{p})(?:{q})", f"(?:{p}|{q})"]
    return out


def test_every_small_regex_exhaustively():
    """Systematic, not random: all 800+ trees of up to 5 nodes, all strings up to
    length 5 over {a, b}.  Catches composition bugs random trees rarely reach."""
    words = ["".join(t) for n in range(6) for t in itertools.product("ab", repeat=n)]
    n = 0
    for size in range(1, 6):
        for pattern in enumerate_patterns(size):
            dfa = dfa_from_regex(pattern)
            comp = re.compile(pattern)
            for w in words:
                assert dfa.fullmatch(w.encode()) == (comp.fullmatch(w) is not None), (pattern, w)
            n += 1
    assert n > 800


@SETTINGS
@given(trees(), st.sampled_from(["", "^", r"\A"]), st.sampled_from(["", "$", r"\Z"]),
       st.lists(st.text(st.sampled_from(POOL), max_size=7), min_size=4, max_size=4))
def test_random_regex_search_semantics(tree, head, tail, strings):
    pattern = head + render(tree) + tail
    node = parse_regex(pattern, anchored=False)
    dfa = build_dfa(node)
    comp = re.compile(pattern)
    for s in strings + [s + "\n" for s in strings]:
        assert dfa.fullmatch(s.encode()) == (comp.search(s) is not None), (pattern, s)


@SETTINGS
@given(trees(), st.lists(st.text(st.sampled_from(POOL + ["A", "B", "C", "É"]), max_size=5),
                         min_size=5, max_size=5))
def test_random_regex_ignorecase(tree, strings):
    pattern = render(tree)
    dfa = dfa_from_regex(pattern, flags=re.I)
    comp = re.compile(pattern, re.I)
    for s in strings:
        assert dfa.fullmatch(s.encode()) == (comp.fullmatch(s) is not None), (pattern, s)


# --------------------------------------------------------------------- named patterns

NAMED = {
    "date": r"\d{4}-\d{2}-\d{2}",
    "email": r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}",
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "datetime": r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d"
                r"(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)",
    "ipv4": r"((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)",
    "json_string": r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"',
    "phone": r"\+?1?[ -]?\(?\d{3}\)?[ -]?\d{3}[ -]?\d{4}",
    "lower64": r"[a-z]{64}",
    "words": r"(?i)(hello|world)(, ?\w+)*!",
}


@pytest.mark.parametrize("name", sorted(NAMED))
def test_named_patterns(name):
    pattern = NAMED[name]
    dfa = dfa_from_regex(pattern)
    comp = re.compile(pattern)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.from_regex(pattern, fullmatch=True), st.integers(0, 70), st.sampled_from("a1-\"\\é:Z"))
    def run(s, k, ch):
        assert dfa.fullmatch(s.encode())
        t = s[:k] + ch + s[k + 1:]
        assert dfa.fullmatch(t.encode()) == (comp.fullmatch(t) is not None), t
        for i in (0, len(s) // 2, len(s)):
            assert dfa.is_prefix(s[:i].encode())

    run()


# ------------------------------------------------------------------- syntax details


@pytest.mark.parametrize("pattern,yes,no", [
    (r"a{,2}", ["", "a", "aa"], ["aaa"]),
    (r"a{2,}", ["aa", "aaaa"], ["a"]),
    (r"x{", ["x{"], ["x"]),
    (r"x{a}", ["x{a}"], ["x"]),
    (r"[]a]", ["]", "a"], ["[]"]),
    (r"[^]a]", ["b"], ["]", "a"]),
    (r"[\b]", ["\b"], ["b"]),
    (r"[a\-z]", ["-", "a", "z"], ["b"]),
    (r"[a-]", ["-", "a"], ["b"]),
    (r"\x41\u00e9\U0001F600\N{LATIN SMALL LETTER A}\101\0", ["Aé😀aA\0"], []),
    (r"(?x) a b  # comment", ["ab"], ["a b"]),
    (r"(?i:a)b", ["Ab", "ab"], ["AB"]),
    (r"(?i)a(?-i:b)", ["Ab"], ["AB"]),
    (r"(?s)a.b", ["a\nb"], []),
    (r"a.b", ["a\rb"], ["a\nb"]),
    (r"(?a)\w+", ["ab_1"], ["é"]),
    (r"\w+", ["é中_1"], [" "]),
    (r"(?P<x>a)(?P<y>b)(?:c)(?#note)", ["abc"], ["ab"]),
    (r"a*?b+?c??", ["abc", "bb"], ["ac"]),
    (r"^a|b$", ["a", "b"], ["ab"]),
    (r"^$", [""], ["a"]),
    (r"\Aab\Z", ["ab"], ["ab\n"]),
    (r"(^a|^b)c$", ["ac", "bc"], ["c"]),
    (r"😀{2}", ["😀😀"], ["😀"]),
])
def test_python_syntax(pattern, yes, no):
    dfa = dfa_from_regex(pattern)
    for s in yes:
        assert re.fullmatch(pattern, s) and dfa.fullmatch(s.encode()), s
    for s in no:
        assert not re.fullmatch(pattern, s) and not dfa.fullmatch(s.encode()), s


def test_digit_property_is_decimal_number_in_both_syntaxes():
    import sys
    import unicodedata

    nd = parse_regex(r"\p{Nd}", syntax="ecma")
    assert parse_regex(r"\p{digit}", syntax="ecma") == nd
    sample = [chr(c) for c in range(0, sys.maxunicode, 97) if not 0xD800 <= c <= 0xDFFF]
    dfa = dfa_from_regex(r"\p{digit}", syntax="ecma")
    for ch in sample + ["٣", "৪", "7", "½", "Ⅳ"]:
        assert dfa.fullmatch(ch.encode()) == (unicodedata.category(ch) == "Nd"), hex(ord(ch))


def test_angle_named_group_accepted():
    # ``(?<name>...)`` is ECMA (and Python 3.12+) syntax; accepted in both modes.
    for syntax in ("python", "ecma"):
        dfa = dfa_from_regex(r"(?<y>b)+", syntax=syntax)
        assert dfa.fullmatch(b"bb") and not dfa.fullmatch(b"")
    with pytest.raises(RegexError):
        parse_regex(r"(?<y>a)(?<y>b)")


def test_ecma_semantics():
    def m(p, s, **kw):
        return dfa_from_regex(p, syntax="ecma", **kw).fullmatch(s.encode())

    assert m(r"\d", "7") and not m(r"\d", "٣")            # ASCII digits only
    assert m(r"\w", "_") and not m(r"\w", "é")
    assert m(r"\s", "\ufeff") and m(r"\s", "\u00a0") and not m(r"\s", "\x1c")
    assert not m(r".", "\r") and not m(r".", "\u2028") and m(r".", "é")
    assert m(r"[^]", "\n") and not m(r"[]", "a") and not m(r"[]", "")
    assert m(r"x{,2}", "x{,2}") and not m(r"x{,2}", "x")    # not a quantifier in ECMA
    assert m(r"\cJ", "\n") and m(r"\u{1F600}", "😀")
    assert m(r"\uD83D\uDE00", "😀") and m(r"[\uD83D\uDE00-\uD83D\uDE4F]", "🙂")  # surrogate pairs
    assert m(r"\p{Lu}+", "ABÉ") and not m(r"\p{Lu}", "a") and m(r"\P{L}", "1")
    assert m(r"\p{Letter}", "中") and m(r"\p{gc=Nd}", "٣")
    assert m(r"\p{digit}+", "৪২42") and not m(r"\p{digit}", "½") and m(r"\P{digit}", "a")  # UTS #18: Nd
    # Python-only syntax is rejected in ECMA mode.
    with pytest.raises(RegexError):
        parse_regex(r"\Z", syntax="ecma")
    with pytest.raises(RegexError):
        parse_regex(r"a*+", syntax="ecma")
    # Search semantics: ECMA '$' is the end of input, Python's also matches before a final "\n".
    assert not build_dfa(parse_regex("a$", syntax="ecma", anchored=False)).fullmatch(b"xa\n")
    assert build_dfa(parse_regex("a$", anchored=False)).fullmatch(b"xa\n")


def test_python_unicode_classes_match_re():
    # Exhaustive over a broad sample of code points (every 7th, plus the BMP edges).
    cps = list(range(0, 0x3000)) + list(range(0x3000, 0x110000, 97))
    for cls in (r"\d", r"\w", r"\s", r"\W"):
        dfa = dfa_from_regex(cls)
        comp = re.compile(cls)
        for cp in cps:
            if 0xD800 <= cp <= 0xDFFF:
                continue
            c = chr(cp)
            assert dfa.fullmatch(c.encode()) == (comp.fullmatch(c) is not None), (cls, hex(cp))


def test_multiline_search():
    node = parse_regex(r"^ab$", flags=re.M, anchored=False)
    dfa = build_dfa(node)
    for s in ["ab", "x\nab", "ab\ny", "x\nab\ny", "xab", "abx", "\nab\n", "a\nb"]:
        assert dfa.fullmatch(s.encode()) == (re.search(r"^ab$", s, re.M) is not None), s


def test_search_to_full():
    dfa = build_dfa(search_to_full(parse_regex(r"\d{3}")))
    for s in ["123", "ab1234", "12a3", "", "x\n999\n"]:
        assert dfa.fullmatch(s.encode()) == (re.search(r"\d{3}", s) is not None)


# -------------------------------------------------------------- possessive and atomic

POSSESSIVE = [r"a*+a", r"a*+b", r"a++", r"[ab]*+b", r"a{1,3}+a", r"a{1,3}+b?", r"(?:ab)*+a",
              r"(?:ab)*+c", r"(?>a*)b", r"(?>ab|c)d", r"x(?:a?+)b", r"(a|b)*+", r"a?+a",
              r"(?:a{2})++a", r"(?>a+)a"]


@pytest.mark.parametrize("pattern", POSSESSIVE)
def test_possessive_exact(pattern):
    try:
        dfa = dfa_from_regex(pattern)
    except Unsupported:
        pytest.skip("reported as unsupported")
    search = build_dfa(parse_regex(pattern, anchored=False))
    comp = re.compile(pattern)
    for n in range(6):
        for tup in itertools.product("abcdx", repeat=n):
            s = "".join(tup)
            assert dfa.fullmatch(s.encode()) == (comp.fullmatch(s) is not None), (pattern, s)
            assert search.fullmatch(s.encode()) == (comp.search(s) is not None), (pattern, s)


def test_possessive_supported_where_claimed():
    for p in [r"a*+a", r"[ab]*+b", r"(?:ab)*+a", r"(?>a*)b", r"(?>ab|c)d", r"a{1,3}+a"]:
        dfa_from_regex(p)  # must not raise
    with pytest.raises(Unsupported):
        parse_regex(r"(?>a|ab)c")       # priority-dependent choice
    with pytest.raises(Unsupported):
        parse_regex(r"(?:a*+b)*")       # possessive inside a repetition


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("pattern,exc,pos", [
    (r"(?=a)b", Unsupported, 0),
    (r"ab(?!c)", Unsupported, 2),
    (r"x(?<=a)", Unsupported, 1),
    (r"(?<!a)", Unsupported, 0),
    (r"(a)\1", Unsupported, 3),
    (r"(?P<n>a)(?P=n)", Unsupported, 8),
    (r"a\bc", Unsupported, 1),
    (r"a^b", Unsupported, 1),
    (r"a$b", Unsupported, 1),
    (r"(?:a|^b)*", Unsupported, 5),
    (r"(?(1)a|b)", Unsupported, 0),
    (r"ab)", RegexError, 2),
    (r"(ab", RegexError, 0),
    (r"a(b(c)", RegexError, 1),
    (r"[abc", RegexError, 0),
    (r"\q", RegexError, 0),
    (r"ab\ ", None, None),
    (r"\x4", RegexError, 0),
    (r"\u12", RegexError, 0),
    (r"*a", RegexError, 0),
    (r"a**", RegexError, 2),
    (r"a|*", RegexError, 2),
    (r"^*", RegexError, 1),
    (r"a{3,2}", RegexError, 2),
    (r"[z-a]", RegexError, 1),
    (r"[a-\d]", RegexError, 1),
    (r"\8", RegexError, 1),
    (r"a(?i)b", RegexError, 1),
    (r"(?Q)", RegexError, 1),
    (r"\N{NOT A REAL NAME}", RegexError, 0),
    ("a\\", RegexError, 1),
    (r"\400", RegexError, 0),
])
def test_errors_name_the_position(pattern, exc, pos):
    if exc is None:
        parse_regex(pattern)
        return
    with pytest.raises(exc) as info:
        parse_regex(pattern)
    assert info.value.pos == pos, str(info.value)
    if exc is RegexError:
        # Python's own parser rejects the same patterns at the same place.
        with pytest.raises(re.error) as py:
            re.compile(pattern)
        assert py.value.pos == pos
    else:
        assert f"position {pos}" in str(info.value)


def test_limits_from_a_regex():
    with pytest.raises(LimitExceeded) as info:
        dfa_from_regex(r"(a|b)*a(a|b){20}", max_states=1000)
    assert info.value.limit == "max_states" and info.value.value == 1000
    with pytest.raises(LimitExceeded) as info:
        build_dfa(parse_regex(r"(a|b)*a(a|b){14}c"), time_limit=0.0)
    assert info.value.limit == "time_limit"


def test_ir_shape_of_simple_patterns():
    assert parse_regex("abc") == ir.seq(ir.literal("a"), ir.literal("b"), ir.literal("c"))
    assert parse_regex("a|b") == ir.alt(ir.literal("a"), ir.literal("b"))
    assert parse_regex("[a-c]{2,5}") == ir.Repeat(ir.CharSet(((97, 99),)), 2, 5)
