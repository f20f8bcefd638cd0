"""Speculative decoding under constraints: lossless against enumerated masked sampling (chi-square,
with a control that must fail), greedy equality with the autoregressive loop, validity of every
output, and the bookkeeping (draft counts, forward passes, KV holes)."""
import json
import re
from typing import Literal

import jsonschema
import lark
import numpy as np
import pytest
import torch
from scipy.stats import chisquare
from transformers import LlamaConfig, LlamaForCausalLM

import structgen as sg
from structgen.decoding.autoregressive import Row, decode, sampling_probs
from structgen.decoding.drafts import lookup_continuation, lookup_firsts
from structgen.decoding.speculative import Speculative, speculative_decode
from structgen.errors import OptionError
from structgen.kernels.bitmask import allocate_bitmask, apply_bitmask_

PIECES = [b"a", b"b", b"ab", b"ba", b"x", b",", b"[", b"]", b'"', b" ", b"y", b"1"]
EOS = len(PIECES)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Sharp(torch.nn.Module):
    """A random Llama whose logits are scaled up, so target and draft disagree clearly."""

    def __init__(self, vocab_size, seed, scale=4.0, layers=1):
        super().__init__()
        torch.manual_seed(seed)
        cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                          num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                          bos_token_id=None, eos_token_id=None, pad_token_id=0)
        self.inner = LlamaForCausalLM(cfg).eval()
        self.config = self.inner.config
        self.scale = scale

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, cache=None, use_cache=True,
                logits_to_keep=0):
        out = self.inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         cache=cache, use_cache=use_cache, logits_to_keep=logits_to_keep)
        out.logits = out.logits * self.scale
        return out


@pytest.fixture(scope="module")
def tiny():
    return sg.Vocabulary.from_bytes(PIECES + [b""], eos_ids=[EOS])


@pytest.fixture(scope="module")
def models(tiny):
    return Sharp(tiny.logits_width, 0), Sharp(tiny.logits_width, 1)


CONSTRAINTS = {
    "regex": (lambda: sg.Grammar.from_regex(r"(a|b|ab|x){1,3}"), lambda s: re.fullmatch(r"(a|b|ab|x){1,3}", s)),
    "json": (lambda: sg.Grammar.from_json_schema({"type": "array", "items": {"enum": ["a", "ab", "b"]},
                                                   "minItems": 1, "maxItems": 2}),
             lambda s: jsonschema.validate(json.loads(s), {"type": "array", "items": {"enum": ["a", "ab", "b"]},
                                                           "minItems": 1, "maxItems": 2}) is None),
    "lark": (lambda: sg.Grammar.from_lark('start: item ("," item)~0..1\nitem: "a" | "b" "a"? | "xy"\n'),
             lambda s: lark.Lark('start: item ("," item)~0..1\nitem: "a" | "b" "a"? | "xy"\n').parse(s)),
}
PROMPT = [0, 1, 5, 2, 6, 8, 0, 8, 5, 4, 10, 3]   # "a b , ab [ " a " , x y ba": lookup has material


def exact_distribution(model, vocab, cg, prompt, temperature, max_new, fast_forward, top_k=0):
    """{token tuple: probability} of masked autoregressive sampling, by enumeration (full
    uncached forward passes; fast-forwarded tokens have probability 1)."""
    eos = set(vocab.eos_ids)
    out = {}

    def logits_of(ids):
        with torch.no_grad():
            return model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1].float()

    def visit(m, seq, p):
        if len(seq) >= max_new:
            out[tuple(seq)] = out.get(tuple(seq), 0.0) + p
            return
        bm = allocate_bitmask(1, vocab.logits_width)
        m.fill_bitmask(bm, 0)
        allowed = np.flatnonzero(sg.kernels.bitmask.unpack_bitmask(bm, vocab.logits_width)[0].numpy())
        if set(allowed.tolist()) <= eos:        # only EOS: finished without sampling
            out[tuple(seq)] = out.get(tuple(seq), 0.0) + p
            return
        z = logits_of(prompt + seq).unsqueeze(0)
        apply_bitmask_(z, bm)
        probs = sampling_probs(z, temperature, top_k)[0]
        for t in allowed.tolist():
            pt = float(probs[t])
            if pt <= 0.0:
                continue
            if t in eos:
                out[tuple(seq)] = out.get(tuple(seq), 0.0) + p * pt
                continue
            f = m.fork()
            assert f.advance(t)
            new = [t]
            if fast_forward:
                for x in list(f.forced_tokens())[:max_new - len(seq) - 1]:
                    assert f.advance(int(x))
                    new.append(int(x))
            visit(f, seq + new, p * pt)

    visit(cg.matcher(), [], 1.0)
    return out


def speculative_samples(model, vocab, cg, spec, n, temperature, max_new, fast_forward, seed, top_k=0,
                        accept=None, batch=1250):
    counts = {}
    g = torch.Generator().manual_seed(seed)
    for start in range(0, n, batch):
        rows = [Row(list(PROMPT), cg.matcher()) for _ in range(min(batch, n - start))]
        speculative_decode(model, rows, vocab, spec, max_new_tokens=max_new, temperature=temperature, top_k=top_k,
                           generator=g, fast_forward=fast_forward, accept=accept)
        for r in rows:
            counts[tuple(r.output_ids)] = counts.get(tuple(r.output_ids), 0) + 1
    return counts


def chi_square_p(counts, dist):
    """The chi-square p-value of ``counts`` against ``dist`` (0 when a sample is outside its support)."""
    n = sum(counts.values())
    if not set(counts) <= {k for k, v in dist.items() if v > 0}:
        return 0.0
    keys = sorted(dist, key=lambda k: -dist[k])
    obs, exp, rest_o, rest_e = [], [], 0, 0.0
    for k in keys:
        e = dist[k] * n
        if e >= 5:
            obs.append(counts.get(k, 0))
            exp.append(e)
        else:
            rest_o += counts.get(k, 0)
            rest_e += e
    if rest_e > 0:
        obs.append(rest_o)
        exp.append(rest_e)
    exp = np.array(exp) * (n / sum(exp))
    return chisquare(obs, exp).pvalue


CASES = [("regex", True, 0, False, 1), ("regex", False, 0, True, 3), ("json", True, 0, False, 1),
         ("lark", False, 2, True, 2)]


@pytest.mark.parametrize("kind,ff,top_k,adaptive,width", CASES)
def test_lossless_against_enumeration(tiny, models, kind, ff, top_k, adaptive, width):
    """≥ 5,000 speculative samples (draft model + prompt lookup + grammar drafts) follow the exact
    masked-sampling distribution; accepting every valid draft without the correction does not."""
    target, draft = models
    cg = sg.compile(CONSTRAINTS[kind][0](), tiny)
    dist = exact_distribution(target, tiny, cg, PROMPT, 1.0, 8, ff, top_k)
    assert abs(sum(dist.values()) - 1.0) < 1e-4
    spec = Speculative(draft_model=draft, num_draft_tokens=3, adaptive=adaptive, tree_width=width)
    counts = speculative_samples(target, tiny, cg, spec, 5000, 1.0, 8, ff, seed=1, top_k=top_k)
    assert set(counts) <= {k for k, v in dist.items() if v > 0}, "a sample outside the support"
    p = chi_square_p(counts, dist)
    assert p > 0.01, (kind, ff, p)
    control = speculative_samples(target, tiny, cg, spec, 2000, 1.0, 8, ff, seed=2, top_k=top_k,
                                  accept=lambda p, q, t, g: True)
    assert chi_square_p(control, dist) < 0.01


def test_outputs_valid_in_every_mode(tiny, models):
    target, draft = models
    for kind, (build, check) in CONSTRAINTS.items():
        cg = sg.compile(build(), tiny)
        for spec in (Speculative(), Speculative(draft_model=draft), Speculative(prompt_lookup=False, grammar=False,
                                                                                draft_model=draft)):
            for temperature in (0.0, 1.0):
                rows = [Row(list(PROMPT), cg.matcher()) for _ in range(20)]
                speculative_decode(target, rows, tiny, spec, max_new_tokens=40, temperature=temperature,
                                   generator=torch.Generator().manual_seed(0))
                for r in rows:
                    assert r.finish_reason == "stop"
                    assert check(tiny.decode(r.output_ids).decode())


def test_draft_equal_to_target_accepts_everything(tiny, models):
    target, _ = models
    cg = sg.compile(CONSTRAINTS["regex"][0](), tiny)
    rows = [Row(list(PROMPT), cg.matcher()) for _ in range(8)]
    speculative_decode(target, rows, tiny, Speculative(draft_model=target, prompt_lookup=False, grammar=False),
                       max_new_tokens=8, temperature=0.0)
    proposed = sum(r.draft_proposed["draft_model"] for r in rows)
    assert proposed > 0 and sum(r.draft_accepted["draft_model"] for r in rows) == proposed


@pytest.mark.parametrize("ff", [True, False])
def test_greedy_equals_autoregressive_tiny(tiny, models, ff):
    target, draft = models
    for kind, (build, _) in CONSTRAINTS.items():
        cg = sg.compile(build(), tiny)
        for spec in (Speculative(), Speculative(draft_model=draft), Speculative(draft_model=draft, adaptive=False,
                                                                                num_draft_tokens=2),
                     Speculative(tree_width=3), Speculative(tree_width=2, draft_model=draft)):
            for max_new in (1, 3, 40):
                ar = [Row(list(PROMPT[:n]), cg.matcher()) for n in range(1, len(PROMPT) + 1)]
                decode(target, ar, tiny, max_new_tokens=max_new, fast_forward=ff)
                sp = [Row(list(PROMPT[:n]), cg.matcher()) for n in range(1, len(PROMPT) + 1)]
                speculative_decode(target, sp, tiny, spec, max_new_tokens=max_new, fast_forward=ff)
                for a, s in zip(ar, sp):
                    assert a.output_ids == s.output_ids and a.finish_reason == s.finish_reason, (kind, spec, max_new)
                    # the matcher is where the output says (EOS consumed or not: both finished)
                    assert s.matcher.accepted_tokens() - s.matcher.is_terminated() == len(s.output_ids)


def test_counts_and_passes(tiny, models):
    """Prompt lookup on a prompt that contains the answer: fewer target passes, accepted drafts
    counted per source, and the matcher / output agree."""
    target, _ = models
    cg = sg.compile(sg.Grammar.from_regex(r"(a|b|x|y|,)+"), tiny)
    ar = [Row(list(PROMPT), cg.matcher())]
    decode(target, ar, tiny, max_new_tokens=30)
    sp = [Row(list(PROMPT), cg.matcher())]
    speculative_decode(target, sp, tiny, Speculative(), max_new_tokens=30)
    assert sp[0].output_ids == ar[0].output_ids
    assert sp[0].draft_accepted["prompt_lookup"] > 0
    assert sp[0].forward_passes < ar[0].forward_passes
    assert sp[0].draft_accepted["prompt_lookup"] <= sp[0].draft_proposed["prompt_lookup"]


def test_tree_uses_fewer_passes(tiny, models):
    """A prompt with several continuations of the same n-gram: a tree of width 3 tries them
    together and needs fewer target passes than a chain, with the same greedy output."""
    target, _ = models
    cg = sg.compile(sg.Grammar.from_regex(r"(a|b|x|y|,)+"), tiny)
    prompt = [0, 1, 5, 0, 4, 5, 0, 10, 5, 0, 1, 5, 0]
    outs = {}
    for w in (1, 3):
        rows = [Row(list(prompt), cg.matcher())]
        speculative_decode(target, rows, tiny, Speculative(tree_width=w), max_new_tokens=30)
        outs[w] = rows[0]
    assert outs[1].output_ids == outs[3].output_ids
    assert outs[3].forward_passes <= outs[1].forward_passes


def test_lookup_firsts():
    assert lookup_firsts([1, 2, 1, 3, 1, 2, 1], 2, 1, 4) == [3, 2]
    assert lookup_firsts([5, 6, 7], 3, 1, 2) == []


def test_lookup_continuation():
    assert lookup_continuation([1, 2, 3, 9, 1, 2], 3, 1, 4) == [3, 9, 1, 2]
    assert lookup_continuation([5, 6, 7], 3, 1, 2) == []
    assert lookup_continuation([1, 4, 1, 5, 1], 2, 1, 1) == [5]       # the latest occurrence wins
    assert lookup_continuation([7, 8, 7, 8], 2, 2, 3) == [7, 8]


def test_options_refused():
    for bad in ({"num_draft_tokens": 0}, {"tree_width": 0}, {"max_ngram": 1, "min_ngram": 2},
                {"draft_model": "llama"}, {"num_draft_tokens": 2.5}):
        with pytest.raises(OptionError):
            Speculative(**bad)


# ----------------------------------------------------------------------------- a real vocabulary
LLAMA_CONSTRAINTS = [
    lambda: sg.Grammar.from_regex(r"[A-Z][a-z]{2,8}( [A-Z][a-z]{2,8})?"),
    lambda: sg.Grammar.from_regex(r"(Oslo|Paris|Berlin|Lima), [0-9]{1,4}"),
    lambda: sg.Grammar.from_json_schema({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                                                          "age": {"type": "integer"}},
                                         "required": ["name", "age"]}),
    lambda: sg.Grammar.from_json_schema({"type": "array", "items": {"enum": ["red", "green", "blue"]},
                                         "maxItems": 4}),
    lambda: sg.Grammar.from_lark('start: WORD ("," " "? WORD)*\nWORD: /[a-z]{1,6}/\n'),
]
LLAMA_PROMPTS = ["Name: Alice Smith, city: Oslo, age 30.", "Colors: red, green, blue, red.", "Paris, 1789 and Lima, 42",
                 '{"name": "Bob", "age": 41}', "copy: alpha, beta, gamma, delta", "Hello", "Berlin Berlin Berlin",
                 "The quick brown fox jumps over the lazy dog.", '["red", "blue"]', "x"]


@pytest.fixture(scope="module")
def llama3_setup():
    from tests.helpers import load_tokenizer, load_vocab
    tok = load_tokenizer("llama3")
    vocab = load_vocab("llama3")
    return tok, vocab, Sharp(vocab.logits_width, 0, scale=1.0, layers=2), Sharp(vocab.logits_width, 1, scale=1.0)


def test_greedy_equals_autoregressive_llama3(llama3_setup):
    """50 (prompt, constraint) pairs on llama3: speculative greedy ids == constrained greedy ids,
    with each draft source alone, all of them, and none."""
    tok, vocab, target, draft = llama3_setup
    prompts = [tok.encode(p) for p in LLAMA_PROMPTS]
    configs = [Speculative(prompt_lookup=False, grammar=False), Speculative(grammar=False),
               Speculative(prompt_lookup=False), Speculative(prompt_lookup=False, grammar=False, draft_model=draft),
               Speculative(draft_model=draft), Speculative(draft_model=draft, tree_width=3)]
    pairs = 0
    for build in LLAMA_CONSTRAINTS:
        cg = sg.compile(build(), vocab)
        for ff in (True, False):
            ar = [Row(list(p), cg.matcher()) for p in prompts]
            decode(target, ar, vocab, max_new_tokens=20, fast_forward=ff)
            pairs += len(ar) if ff else 0
            for spec in configs:
                sp = [Row(list(p), cg.matcher()) for p in prompts]
                speculative_decode(target, sp, vocab, spec, max_new_tokens=20, fast_forward=ff)
                for a, s in zip(ar, sp):
                    assert a.output_ids == s.output_ids, (build, spec, ff, vocab.decode(a.output_ids),
                                                          vocab.decode(s.output_ids))
                    assert a.finish_reason == s.finish_reason
    assert pairs >= 50


def test_generate_api_and_function(llama3_setup):
    """sg.generate / Generator / @sg.function take speculative=; results report the drafts; a
    truncated copy of the target drafts too; greedy output equals plain generate's."""
    from structgen.models import truncated_copy
    tok, vocab, target, _ = llama3_setup
    gen = sg.Generator(target, tok, vocab=vocab)
    prompt = "Colors: red, green, blue, red. Again: red, green, blue, red."
    schema = {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 6}
    plain = gen(prompt, schema=schema, max_new_tokens=40)
    draft = truncated_copy(target.inner, 1)
    assert len(draft.model.layers) == 1 and draft.model.embed_tokens.weight.data_ptr() == target.inner.model.embed_tokens.weight.data_ptr()
    for spec in (True, Speculative(), Speculative(draft_model=draft, num_draft_tokens=3)):
        res = gen(prompt, schema=schema, max_new_tokens=40, speculative=spec)
        assert res.token_ids == plain.token_ids and res.text == plain.text
        assert set(res.draft_proposed) == {"draft_model", "prompt_lookup", "grammar"}
        assert res.forward_passes <= plain.forward_passes
        assert "draft_accepted" in res.to_dict()
    batch = gen([prompt, "x"], schema=schema, max_new_tokens=20, temperature=0.8, seed=3,
                speculative=Speculative(draft_model=draft))
    for r in batch:
        jsonschema.validate(json.loads(r.text), schema) if r.complete else None
    def pick(text: str) -> Literal["red", "green", "blue"]:
        """Pick a colour from: {text}"""

    f = sg.function(pick, generator=gen, speculative=Speculative(), chat=False, max_new_tokens=8)
    assert f("red green") in {"red", "green", "blue"}
    with pytest.raises(OptionError):
        gen(prompt, schema=schema, speculative=Speculative(), token_healing=True)
    with pytest.raises(OptionError):
        gen(prompt, schema=schema, speculative="yes")
