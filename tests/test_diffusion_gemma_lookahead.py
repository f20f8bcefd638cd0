"""DiffusionLogitsProcessor(method="lookahead"): a tiny random DiffusionGemma over a tiny
vocabulary, through its own ``generate``; every output parses (Lark / Python re), every commit
(of the committing engine and of the filler that writes the undecided positions) leaves a canvas
that an independent ``completable`` call accepts, and bad arguments are structgen errors.  The
gpt2-vocabulary run (200 outputs per grammar) is ``benchmarks/bench_diffusion_lookahead.py
--model diffusiongemma``."""
from __future__ import annotations

import lark
import numpy as np
import pytest
import regex
import torch

import structgen as sg
import structgen.diffusion as sgd
from structgen.diffusion import completable
from tests.helpers import tiny_diffusion_gemma

transformers = pytest.importorskip("transformers")
from transformers import LogitsProcessorList  # noqa: E402

ARITH = 'start: e\ne: e "+" t | t\nt: t "*" f | f\nf: "(" e ")" | NUM\nNUM: /[0-9]+/'
TOKS = ["1", "2", "+", "*", "(", ")", "12", "+1", "1*", ")+", "a", "b", "ab", "c"]
EOS = len(TOKS)          # then a BOS id for the prompts
CANVAS = 4


@pytest.fixture(scope="module")
def setup(one_torch_thread):
    vocab = sg.Vocabulary.from_bytes([t.encode() for t in TOKS] + [None, None], eos_ids=[EOS],
                                     special_ids=[EOS + 1])
    return tiny_diffusion_gemma(EOS + 2, CANVAS, EOS, bos=EOS + 1, max_positions=64), vocab


def _generate(model, proc, rows, new, steps, seed, with_ids=False):
    torch.manual_seed(seed)
    prompts = torch.tensor([[EOS + 1, (i % EOS), ((3 * i) % EOS)] for i in range(rows)])
    out = model.generate(prompts, max_new_tokens=new, max_denoising_steps=steps,
                         logits_processor=LogitsProcessorList([proc]))
    texts, ids = [], []
    for s in out.sequences[:, prompts.shape[1]:].tolist():
        k = next((i for i, t in enumerate(s) if t == EOS), len(s))
        texts.append("".join(TOKS[t] for t in s[:k]))
        ids.append(s[:k])
    return (texts, ids) if with_ids else texts


def _checked(cg, seen):
    def on_commit(row, canvas, state):
        seen.append(row)
        assert completable(cg, canvas, mask_token_id=-1, state=state, final=True), (row, canvas)
    return on_commit


@pytest.mark.parametrize("beam_width", [3, 0])
def test_grammar_outputs_parse_and_invariant_holds(setup, beam_width):
    model, vocab = setup
    cg = sg.compile(sg.Grammar.from_lark(ARITH), vocab)
    parser = lark.Lark(ARITH, parser="earley", lexer="dynamic_complete")
    seen = []
    proc = sgd.DiffusionLogitsProcessor(cg, method="lookahead", max_new_tokens=2 * CANVAS,
                                        lookahead={"beam_width": beam_width, "tau": 2}, on_commit=_checked(cg, seen))
    texts = []
    for seed in range(3):
        proc.reset()
        texts += _generate(model, proc, 6, 2 * CANVAS, 3, seed)
    for t in texts:
        parser.parse(t)
    st = proc.stats
    assert seen and st.commits > 0 and st.proposals >= st.rejections
    assert st.rejections > 0 and st.recoveries > 0 and proc.fill_stats.commits > 0   # every path ran
    assert len(st.exact_seconds) == st.exact_checks
    assert proc.calls == len(proc.step_seconds) >= 3


def test_grammar_without_max_new_tokens_keeps_prefixes(setup):
    model, vocab = setup
    cg = sg.compile(sg.Grammar.from_lark(ARITH), vocab)
    proc = sgd.DiffusionLogitsProcessor(cg, method="lookahead")      # final=False: each canvas a valid prefix
    _, ids = _generate(model, proc, 4, 2 * CANVAS, 2, 7, with_ids=True)
    for s in ids:
        assert cg.matcher().validate(s) == len(s), s


def test_regex_outputs_match_and_invariant_holds(setup):
    model, vocab = setup
    pattern = r"(ab|c)*b"
    cg = sg.compile(sg.Grammar.from_regex(pattern), vocab)
    seen = []
    proc = sgd.DiffusionLogitsProcessor(cg, method="lookahead", max_new_tokens=2 * CANVAS,
                                        on_commit=_checked(cg, seen))
    texts = _generate(model, proc, 8, 2 * CANVAS, 2, 1)
    assert all(regex.fullmatch(pattern, t) for t in texts), texts
    assert seen


def test_bad_arguments_are_structgen_errors(setup):
    _, vocab = setup
    cg = sg.compile(sg.Grammar.from_lark(ARITH), vocab)
    with pytest.raises(sg.Unsupported):
        sgd.DiffusionLogitsProcessor(cg)                          # map: regular constraints only
    for bad in (dict(method="lookahead", lookahead={"beam": 3}), dict(method="lookahead", lookahead={"tau": 0}),
                dict(method="lookahead", lookahead={"beam_width": -1}), dict(method="lookahead", lookahead=[1]),
                dict(method="lookahead", lookahead={"limits": {"max_nodez": 5}}),
                dict(method="lookahead", on_commit=3), dict(method="lookahead", max_new_tokens=-1),
                dict(method="greedy")):
        with pytest.raises(sg.OptionError):
            sgd.DiffusionLogitsProcessor(cg, **bad)
    with pytest.raises(sg.OptionError):
        sgd.DiffusionLogitsProcessor("start: e", method="lookahead")
    proc = sgd.DiffusionLogitsProcessor(cg, method="lookahead")
    with pytest.raises(sg.OptionError):
        proc(torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, CANVAS))   # scores must be [B, L, V]
