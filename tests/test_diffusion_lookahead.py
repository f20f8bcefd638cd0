"""Lookahead: every commit keeps the canvas completable (checked by an independent
completable() call), every finished canvas is a sentence (Lark / Python re), and the counters
add up.  Random per-position distributions stand in for the model (its proposals are mostly
invalid, so rejections, exact checks and recoveries all happen)."""
from __future__ import annotations

import zlib

import lark
import numpy as np
import pytest
import regex
import torch

import structgen as sg
from structgen.diffusion import completable
from structgen.diffusion.lookahead import Lookahead

JSON = ('start: value\n?value: obj | arr | STR | NUM\nobj: "{" [pair ("," pair)*] "}"\n'
        'pair: STR ":" value\narr: "[" [value ("," value)*] "]"\nSTR: /"[ab]*"/\nNUM: /[0-9]+/')
CASES = {
    "json": (JSON, ['{', '}', '[', ']', '"', 'a', ':', ',', '1', '"a', '":', '],', '{"']),
    "arith": ('start: e\ne: e "+" t | t\nt: t "*" f | f\nf: "(" e ")" | NUM\nNUM: /[0-9]+/',
              ["1", "2", "+", "*", "(", ")", "12", "+1", "1*", ")+"]),
    "brackets": ('start: | "(" start ")" start', ["(", ")", "()", ")(", "(((", "(()"]),
}


def _setup(toks, grammar):
    # ids: the tokens, then EOS, then the mask (a special id)
    vocab = sg.Vocabulary.from_bytes([t.encode() for t in toks] + [None, None], eos_ids=[len(toks)],
                                     special_ids=[len(toks) + 1])
    return sg.compile(grammar, vocab), len(toks), len(toks) + 1


def _run(cg, M, L, block, rng, check=True, **kw):
    canvas = np.full(L, M)
    V = cg.vocab.logits_width
    seen = []

    def invariant(c):
        seen.append(c.copy())
        if check:
            assert completable(cg, c, mask_token_id=M, final=kw.get("final", True)), c

    la = Lookahead(cg, M, on_commit=invariant, **kw)
    for b0 in range(0, L, block):
        steps = 0
        while (canvas[b0:b0 + block] == M).any():
            lp = np.log(rng.dirichlet(np.full(V, 0.3), size=L)).astype(np.float32)
            lp[:, M] = -np.inf
            steps += 1
            if steps == 3:
                canvas = la.finish_block(canvas, lp, (b0, b0 + block))
            else:
                canvas = la.step(canvas, torch.from_numpy(lp) if steps % 2 else lp, (b0, b0 + block), n=2)
    return canvas, la, seen


def _text(toks, canvas):
    eos = len(toks)
    k = next((i for i, t in enumerate(canvas) if t == eos), len(canvas))
    assert all(t == eos for t in canvas[k:])
    return "".join(toks[t] for t in canvas[:k])


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("beam_width", [3, 0])
def test_grammar_outputs_valid_and_invariant(name, beam_width):
    text, toks = CASES[name]
    cg, eos, M = _setup(toks, sg.Grammar.from_lark(text))
    parser = lark.Lark(text, parser="earley", lexer="dynamic_complete")
    rng = np.random.default_rng(zlib.crc32(f"{name}{beam_width}".encode()))
    total = None
    for _ in range(8):
        canvas, la, seen = _run(cg, M, 10, 4, rng, beam_width=beam_width, tau=3)
        assert not (canvas == M).any()
        parser.parse(_text(toks, canvas))
        assert len(seen) >= 1
        s = la.stats
        assert s.commits == 10 and 1 <= len(seen) <= 10  # every position written once (EOS padding at once)
        assert s.proposals >= s.rejections
        assert s.exact_checks >= s.rejections - s.exact_skipped
        total = s if total is None else (total.merge(s) or total)
    assert total.rejections > 0 and total.exact_checks > 0 and total.recoveries > 0
    assert len(total.exact_seconds) == total.exact_checks
    if beam_width:
        assert total.beam_successes > 0


def test_regex_outputs_valid():
    toks = ["a", "b", "c", "ab", "ba", "cc"]
    pattern = r"(ab|c)*b"
    cg, eos, M = _setup(toks, sg.Grammar.from_regex(pattern))
    rng = np.random.default_rng(5)
    for _ in range(10):
        canvas, la, _ = _run(cg, M, 9, 3, rng, beam_width=2, tau=2)
        assert regex.fullmatch(pattern, _text(toks, canvas)), canvas


def test_prefix_mode():
    text, toks = CASES["brackets"]
    cg, eos, M = _setup(toks, sg.Grammar.from_lark(text))
    rng = np.random.default_rng(6)
    for _ in range(5):
        canvas, la, _ = _run(cg, M, 8, 4, rng, beam_width=2, tau=2, final=False)
        m = cg.matcher()
        assert m.validate(canvas[:next((i for i, t in enumerate(canvas) if t == eos), 8)]) >= 0


def test_invariant_check_has_teeth():
    """Without the check (every proposal accepted) the invariant callback fails at once."""
    text, toks = CASES["json"]
    cg, eos, M = _setup(toks, sg.Grammar.from_lark(text))

    class NoCheck(Lookahead):
        def check(self, canvas, j, t, lp):
            return True

    rng = np.random.default_rng(7)
    canvas = np.full(10, M)
    V = cg.vocab.logits_width

    def invariant(c):
        assert completable(cg, c, mask_token_id=M, final=True)

    la = NoCheck(cg, M, on_commit=invariant)
    with pytest.raises(AssertionError):
        for _ in range(10):
            lp = np.log(rng.dirichlet(np.full(V, 0.3), size=10)).astype(np.float32)
            lp[:, M] = -np.inf
            canvas = la.step(canvas, lp, (0, 10), n=1)


def test_eos_pads_the_rest():
    text, toks = CASES["brackets"]
    cg, eos, M = _setup(toks, sg.Grammar.from_lark(text))
    V = cg.vocab.logits_width
    lp = np.full((6, V), -10.0, np.float32)
    lp[:, eos] = 0.0  # the model wants to stop everywhere: the empty sentence
    la = Lookahead(cg, M)
    out = la.step(np.full(6, M), lp, (0, 6), n=1)
    assert out.tolist() == [eos] * 6
    assert la.stats.rejections == 0
