"""The grammar engine's compile-time fast paths, each against an independent construction.

- whitespace-prefixed terminals composed as a chain in front of the body's DFA
  (``engine._prefixed_build``) vs the builder's subset construction of the same IR;
- ``Tables``' lexer table (Numba ``_place``) vs the numpy formula;
- masks of JSON Schema grammars, with and without the byte-pair free lexer's skips, vs advancing
  every token.
"""
from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from structgen.automaton import ir
from structgen.cfg import compile_cfg
from structgen.cfg import engine as E
from structgen.cfg.terminals import build
from structgen.frontends.lark import regex_to_ir
from structgen.frontends.json_schema.language import WS_CHARS as _WS_CHARS
from structgen.frontends.json_schema.cfg import compile_json_schema_cfg
from structgen.frontends.json_schema.slicing import json_slicing
from structgen.vocab.vocabulary import Vocabulary

BODIES = [r'"[a-z]*"', r'-?(0|[1-9][0-9]*)(\.[0-9]+)?', r'true|false', r'x*', r'"(a|b\n)*"', r'(ab)+|a',
          r'\s*x',  # starts with a blank: no chain, the builder's DFA
          r'null|"\s*"']
ALPHA = [b" ", b"\n", b"\t", b"a", b"b", b'"', b"1", b"-", b".", b"0", b"true", b"null", b"x", b"\xc3\xa9"]


def _agree(a, b, rng, n=1500):
    for _ in range(n):
        s = b"".join(rng.choice(ALPHA) for _ in range(rng.randint(0, 7)))
        assert a.fullmatch(s) == b.fullmatch(s), s
        assert (a.walk(s) >= 0) == (b.walk(s) >= 0), s


@pytest.mark.parametrize("body,k", itertools.product(BODIES, [1, 2, 4]))
def test_prefixed_build_matches_builder(body, k):
    node = ir.seq(ir.Repeat(_WS_CHARS, 0, k), regex_to_ir(body))
    a, b = E._prefixed_build(node, 10 ** 5), build(node)
    assert a.n_states == b.n_states  # both minimal
    _agree(a, b, random.Random(k))
    # an embedded body DFA takes the same path, and the result is shared by identity
    e = ir.Embed(build(regex_to_ir(body)))
    c = E._prefixed_build(ir.seq(ir.Repeat(_WS_CHARS, 0, k), e), 10 ** 5)
    assert c is E._prefixed_build(ir.seq(ir.Repeat(_WS_CHARS, 0, k), ir.Embed(e.dfa)), 10 ** 5)
    _agree(c, b, random.Random(k + 10), 300)


@pytest.mark.parametrize("text", ["{", '"name"', '"caf\u00e9 \u20ac"', ": ", "true"])
def test_prefixed_literal(text):
    node = ir.seq(ir.Repeat(_WS_CHARS, 0, 3), ir.literal(text))
    a = E._prefixed_build(node, 10 ** 5)
    for pre in ["", " ", "\t\n", "   ", "    "]:
        for s in [text, text[:-1], text + " ", "x" + text]:
            data = (pre + s).encode()
            assert a.fullmatch(data) == (len(pre) <= 3 and s == text), data
    # cached under the literal's text and the prefix: an equal node built afresh shares the DFA,
    # another bound or another prefix class does not
    assert E._prefixed_build(ir.seq(ir.Repeat(_WS_CHARS, 0, 3), ir.literal(text)), 10 ** 5) is a
    b = E._prefixed_build(ir.seq(ir.Repeat(_WS_CHARS, 0, 2), ir.literal(text)), 10 ** 5)
    assert b is not a and not b.fullmatch(("   " + text).encode()) and b.fullmatch(("  " + text).encode())
    tabs = E._prefixed_build(ir.seq(ir.Repeat(ir.CharSet.of([(9, 9)]), 0, 3), ir.literal(text)), 10 ** 5)
    assert not tabs.fullmatch((" " + text).encode()) and tabs.fullmatch(("\t" + text).encode())


@pytest.mark.parametrize("seed", range(6))
def test_chain_terminals_match_builder(seed):
    """Literals and chains of ASCII sets ("select"i) take ``literal_dfa``: same language and
    size as the builder's minimal DFA; anything else is left to the builder."""
    from structgen.automaton.build import build_dfa
    from structgen.cfg.terminals import literal_dfa

    rng = random.Random(seed)
    pool = ["a", "b", "\u00e9", "[ab]", "[a-c0]", "[Ss]", "x", "[^a]", "\u20ac", "[a\u00e9]"]
    for _ in range(40):
        pattern = "".join(rng.choice(pool) for _ in range(rng.randint(1, 6)))
        node = regex_to_ir(pattern)
        fast, ref = build(node), build_dfa(node)
        chain = literal_dfa(node.items if isinstance(node, ir.Seq) else (node,))
        non_ascii_set = "[^a]" in pattern or "[a\u00e9]" in pattern
        assert (chain is None) == non_ascii_set, pattern
        assert fast.n_states == ref.n_states, pattern
        for _ in range(300):
            s = "".join(rng.choice("abcSsx0\u00e9\u20ac") for _ in range(rng.randint(0, 7))).encode()
            assert fast.fullmatch(s) == ref.fullmatch(s), (pattern, s)
            assert (fast.walk(s) >= 0) == (ref.walk(s) >= 0), (pattern, s)


def test_prefixed_build_state_limit():
    node = ir.seq(ir.Repeat(_WS_CHARS, 0, 4), ir.literal("abcdefgh"))
    with pytest.raises(Exception):
        E._prefixed_build(node, 5)


VOCAB = Vocabulary.from_bytes([bytes([b]) for b in range(256)] + [b'{"', b'": ', b'", "', b'true', b' 1', b'"}'] +
                              [b""], eos_ids=[262])
SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}, "b": {"type": "integer"}},
     "required": ["a"]},
    {"type": "array", "items": {"enum": [1, "x", None, True]}, "maxItems": 3},
    {"anyOf": [{"type": "number", "minimum": 0}, {"type": "boolean"}, {"const": "caf\u00e9"}]},
]


def test_tables_lexer_matches_numpy():
    cfg = compile_json_schema_cfg(SCHEMAS[0], whitespace="flexible", max_whitespace=2).grammar
    norm, dfas = E.normalise(cfg)
    tb = E.Tables(norm, dfas, 10 ** 6)
    for i, t in enumerate(tb.term_names):
        d, o = dfas[t], tb.tstart[i]
        full = d.transitions[:, d.byte_class]
        assert np.array_equal(tb.trans[o:o + d.n_states], np.where(full >= 0, full + o, -1))
        assert np.array_equal(tb.gout[o:o + d.n_states], (full >= 0).any(axis=1))


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("skip_covered", [False, True])
def test_json_masks_match_brute_force(schema, skip_covered):
    """Along random walks, the mask (cached parts, the byte-pair free lexer's skips) equals
    advancing every token on a fork of the matcher."""
    cg = compile_cfg(compile_json_schema_cfg(schema, whitespace="flexible", max_whitespace=2).grammar, VOCAB,
                     slicing=json_slicing(), skip_covered=skip_covered)
    rng = random.Random(1)
    for _ in range(4):
        m = cg.matcher()
        for _ in range(12):
            got = set(m.allowed_tokens().tolist())
            want = {t for t in range(VOCAB.logits_width) if m.fork().advance(t)}
            assert got == want
            normal = sorted(t for t in got if t != 262)
            if not normal:
                break
            assert m.advance(rng.choice(normal))
