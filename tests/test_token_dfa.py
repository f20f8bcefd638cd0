"""TokenDFA and Matcher against independent oracles, on all six real vocabularies.

Oracles: ``regex`` partial matching for "this prefix can still match",
``re.fullmatch`` for EOS, brute-force enumeration on tiny vocabularies.
"""
import re

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import structgen as sg
from structgen.kernels.bitmask import bitmask_to_ids
from tests.helpers import ALL_TOKENIZERS, load_vocab

PATTERNS = [
    r"\d{4}-\d{2}-\d{2}",
    r"[a-z]+@[a-z]+\.(com|org)",
    r"(yes|no|maybe)",
    r"-?(0|[1-9]\d*)(\.\d+)?",
    r'"([^"\\]|\\.)*"',
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    r"(héllo|wörld|日本語)+ ?",
    r"[A-Za-zé_]+( [a-z0-9]+){0,3}",  # not \w: `re` and `regex` disagree on it outside ASCII
    r"(ab|a)*b?c{2,3}",
    r"[^\n]{1,5}",
]


def oracle_live(pattern: str, data: bytes) -> bool:
    """Can ``data`` be extended to a full match?  None when the bytes end inside
    a UTF-8 character (the char-level oracle cannot say)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # The backtracking oracle is exponential on some nested quantifiers: a
    # TimeoutError propagates and the caller gives up on that pattern.
    return regex.fullmatch(pattern, text, partial=True, timeout=0.05) is not None


def oracle_full(pattern: str, text: str):
    """re.fullmatch semantics (TimeoutError when the backtracking oracle gives up)."""
    return regex.fullmatch(pattern, text, timeout=0.05) is not None


def compiled(pattern, name):
    return sg.compile(sg.Grammar.from_regex(pattern), load_vocab(name))


def allowed_ids(m, width):
    bm = sg.allocate_bitmask(1, width)
    m.fill_bitmask(bm, 0)
    return bitmask_to_ids(bm[0])


def check_prefixes(pattern, vocab, cg, ids, rng, n_probe=40):
    """At every prefix of ``ids``: mask bit ⇔ advance ⇔ oracle, for the next
    token and a random probe of other tokens; EOS ⇔ fullmatch.  Returns False
    when the oracle timed out (pathological backtracking) and the check stopped."""
    try:
        _check_prefixes(pattern, vocab, cg, ids, rng, n_probe)
    except TimeoutError:
        return False
    return True


def _check_prefixes(pattern, vocab, cg, ids, rng, n_probe):
    m = cg.matcher()
    eos = int(vocab.eos_ids[0])
    normal = np.flatnonzero(vocab.is_normal)
    prefix = b""
    for i in range(len(ids) + 1):
        allowed = set(allowed_ids(m, vocab.logits_width).tolist())
        text = prefix.decode("utf-8", errors="strict") if oracle_live(pattern, prefix) is not None else None
        if text is not None:
            assert (eos in allowed) == oracle_full(pattern, text), (pattern, text)
        probe = list(rng.choice(normal, size=n_probe)) + list(rng.choice(sorted(allowed), size=min(n_probe, len(allowed))))
        if i < len(ids):
            probe.append(ids[i])
        for t in probe:
            t = int(t)
            verdict = oracle_live(pattern, prefix + vocab.token_bytes(t))
            ok = m.advance(t)
            assert ok == (t in allowed), (pattern, prefix, t)
            if ok:
                m.rollback(1)
            if verdict is not None:
                assert (t in allowed) == verdict, (pattern, prefix, vocab.token_bytes(t))
        if i == len(ids):
            break
        if not m.advance(int(ids[i])):
            break
        prefix += vocab.token_bytes(int(ids[i]))


@pytest.mark.parametrize("name", ALL_TOKENIZERS)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_matching_strings_walk(name, pattern):
    vocab = load_vocab(name)
    cg = compiled(pattern, name)
    rng = np.random.default_rng(0)
    samples = [s for s in _examples(pattern, 4)]
    for s in samples:
        ids = encode_exact(vocab, s)
        if ids is None:
            continue
        assert check_prefixes(pattern, vocab, cg, ids, rng, n_probe=10)
        m = cg.matcher()
        assert m.validate(ids + [int(vocab.eos_ids[0])]) == len(ids) + 1


def encode_exact(vocab, text):
    """Token ids whose bytes are exactly ``text``'s UTF-8, or None.

    SentencePiece tokenizers prepend a dummy space to the first word, so encode
    after a newline and drop the tokens that cover the newline."""
    target = text.encode()
    for prefix in ("", "\n"):
        ids = list(vocab.encode(prefix + text))
        for k in range(len(ids) + 1):
            if b"".join(vocab.token_bytes(i) for i in ids[k:]) == target:
                return ids[k:]
    return None


def _examples(pattern, n):
    out = []

    @settings(max_examples=n, database=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.from_regex(pattern, fullmatch=True))
    def collect(s):
        out.append(s)

    collect()
    return out


@pytest.mark.parametrize("name", ALL_TOKENIZERS)
def test_sampling_under_mask_always_fullmatches(name):
    vocab = load_vocab(name)
    rng = np.random.default_rng(1)
    for pattern in PATTERNS:
        cg = compiled(pattern, name)
        for _ in range(5):
            out = sample(cg, vocab, rng, max_tokens=60)
            if out is None:  # hit the length bound before EOS
                continue
            assert re.fullmatch(pattern, out.decode("utf-8")), (pattern, out)


def sample(cg, vocab, rng, max_tokens=60, eos_bias=0.0):
    m = cg.matcher()
    bm = sg.allocate_bitmask(1, vocab.logits_width)
    out = b""
    for _ in range(max_tokens):
        m.fill_bitmask(bm, 0)
        ids = bitmask_to_ids(bm[0])
        assert ids.size > 0, "a matcher must never get stuck"
        logits = rng.standard_normal(ids.size)
        is_eos = np.isin(ids, vocab.eos_ids)
        logits[is_eos] += eos_bias + 3.0  # finish reasonably often
        t = int(ids[np.argmax(logits + rng.gumbel(size=ids.size))])
        assert m.advance(t)
        if m.is_terminated():
            return out
        out += vocab.token_bytes(t)
    return None


@settings(max_examples=25, deadline=None, database=None, derandomize=True)
@given(data=st.data())
def test_hypothesis_regexes_against_oracle(data):
    """Random regexes from a small grammar, random strings, on every vocabulary."""
    pattern = data.draw(_regex_strategy())
    name = data.draw(st.sampled_from(ALL_TOKENIZERS))
    vocab = load_vocab(name)
    try:
        cg = compiled(pattern, name)
    except sg.StructgenError:
        return  # e.g. an empty language
    rng = np.random.default_rng(abs(hash(pattern)) % 2**32)
    text = data.draw(st.one_of(st.from_regex(pattern, fullmatch=True), st.text("abc01 -", max_size=8)))
    ids = encode_exact(vocab, text)
    if ids is None:
        return
    check_prefixes(pattern, vocab, cg, ids, rng, n_probe=15)


def _regex_strategy():
    atoms = st.sampled_from(["a", "b", "c", "0", "1", " ", "-", "[ab]", "[^a]", "\\d", "[a-c_]", ".", "é", "[a-c0-1]"])

    def extend(inner):
        return st.one_of(
            st.tuples(inner, inner).map(lambda t: t[0] + t[1]),
            st.tuples(inner, inner).map(lambda t: f"({t[0]}|{t[1]})"),
            inner.map(lambda s: f"({s})*"),
            inner.map(lambda s: f"({s})+"),
            inner.map(lambda s: f"({s})?"),
            st.tuples(inner, st.integers(0, 3), st.integers(0, 2)).map(lambda t: f"({t[0]}){{{t[1]},{t[1] + t[2]}}}"),
        )

    return st.recursive(atoms, extend, max_leaves=6)


def test_tiny_vocabulary_brute_force():
    """Every token at every reachable prefix, exhaustively, on a vocabulary
    that lacks single-byte tokens (the eager token-level pruning case)."""
    toks = [b"a", b"ab", b"abc", b"b", b"ca", b"cab", b"x", b"bb", b"c"]
    eos = len(toks)
    vocab = sg.Vocabulary.from_bytes(toks + [b""], eos_ids=[eos], special_ids=[])
    for pattern in [r"(ab|c)+", r"a(bc)*", r"(ab)+x", r"c?a*b{2}", r"b|cab|abcab"]:
        cg = sg.compile(sg.Grammar.from_regex(pattern), vocab)
        # Brute force: token strings up to length 4, which prefixes can be
        # completed *by tokens* within 4 more tokens.
        def completable(data, depth=4):
            if re.fullmatch(pattern, data.decode()):
                return True
            if depth == 0 or regex.fullmatch(pattern, data.decode(), partial=True) is None:
                return False
            return any(completable(data + t, depth - 1) for t in toks)

        frontier = [([], b"")]
        for _ in range(3):
            nxt = []
            for ids, data in frontier:
                m = cg.matcher()
                assert m.validate(ids) == len(ids)
                for i in ids:
                    assert m.advance(i)
                allowed = set(allowed_ids(m, vocab.logits_width).tolist())
                for t, tb in enumerate(toks):
                    expect = completable(data + tb)
                    assert (t in allowed) == expect, (pattern, data, tb)
                    if expect:
                        nxt.append((ids + [t], data + tb))
                assert (eos in allowed) == (re.fullmatch(pattern, data.decode()) is not None)
            frontier = nxt[:40]


def test_logits_width_beyond_tokenizer_never_allowed():
    vocab = load_vocab("qwen2.5", logits_width=151936)
    cg = sg.compile(sg.Grammar.from_regex(r".{0,3}"), vocab)
    ids = allowed_ids(cg.matcher(), vocab.logits_width)
    assert ids.max() < 151936
    assert not np.any((ids >= 151665) & ~np.isin(ids, vocab.eos_ids))
    assert not np.any(np.isin(ids, vocab.special_ids))


@pytest.mark.parametrize("name", ["llama3", "qwen3", "mistral", "gpt2"])
def test_slice_masks_equal_full_walks(name):
    """States that loop on every JSON-string character take the precomputed
    slice plus a walk of the remaining trie: the rows must equal full walks."""
    from structgen.automaton.build import build_dfa
    from structgen.frontends.json_schema.slicing import json_slicing
    from structgen.index import TokenDFA

    vocab = load_vocab(name)
    pattern = (r'\{"a": "([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*", '
               r'"b": "[^"\\\x00-\x1f]{0,3}", "c": "[^"]*", "d": ".*"\}')
    dfa = build_dfa(sg.Grammar.from_regex(pattern).node)
    sliced, full = TokenDFA(dfa, vocab, slicing=json_slicing()), TokenDFA(dfa, vocab)
    assert full._slice is None  # no slicing asked for: none used
    used = 0
    for s in range(dfa.n_states):
        used += sliced._uses_slice(s)
        assert np.array_equal(sliced.mask_row(s), full.mask_row(s)), s
        a, b = sliced.row(s), full.row(s)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), s
    assert used >= 1  # the string body of "a" loops on the slice


def test_generic_slice_masks_equal_full_walks():
    """A slice is any character set the compiler configures (here the ASCII digits, kept however
    small): states looping on it take its bits, masks equal full walks; a DFA where no state
    loops on it builds none."""
    from structgen.automaton import ir
    from structgen.automaton.build import build_dfa
    from structgen.index import TokenDFA
    from structgen.index.slices import SliceDef, Slicing

    vocab = load_vocab("llama3")
    digits = Slicing((SliceDef(ir.CharSet.of([(0x30, 0x39)]), 0.0, "digits"),))
    dfa = build_dfa(sg.Grammar.from_regex(r"x[0-9]*(y[0-9a-f]*)?").node)
    sliced, full = TokenDFA(dfa, vocab, slicing=digits), TokenDFA(dfa, vocab)
    assert sliced._slice is not None and full._slice is None
    used = 0
    for s in range(dfa.n_states):
        used += sliced._uses_slice(s)
        assert np.array_equal(sliced.mask_row(s), full.mask_row(s)), s
        a, b = sliced.row(s), full.row(s)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), s
    assert used >= 1
    assert TokenDFA(build_dfa(sg.Grammar.from_regex(r"[a-c]+").node), vocab, slicing=digits)._slice is None
