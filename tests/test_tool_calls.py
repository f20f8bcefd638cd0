"""Tool calls end to end with tiny random Llama models on real vocabularies: 200 generations per
format (hermes on Qwen 2.5, whose ``<tool_call>`` is a special token, llama3 on the Llama 3.1
tokenizer, whose ``<|python_tag|>`` is one, mistral on Llama 3, and every format on Mistral 7B
v0.1, where the triggers are text), every one parsed into calls whose arguments validate (Pydantic, ``jsonschema``), with free
text between them; the special-token triggers are the token ids in the output, never their text.
A random model picks among the allowed tokens almost uniformly, the harshest case.  Free text and
strings are bounded so that every generation ends within ``max_new_tokens``."""
from __future__ import annotations

import functools
from typing import Literal

import jsonschema
import pytest
import torch
from pydantic import BaseModel, Field

import structgen as sg
from tests.helpers import load_llama31_tokenizer, load_llama31_vocab, load_tokenizer, load_vocab, tiny_llama


class GetWeather(BaseModel):
    city: str = Field(max_length=2)
    unit: Literal["c", "f"]


class SearchWeb(BaseModel):
    exact: bool
    pages: Literal[1, 2]


LOOKUP = {"title": "lookup", "type": "object", "properties": {"id": {"enum": ["x1", "y22"]}}, "required": ["id"]}
TOOLS = {"wx": GetWeather, "web": SearchWeb, "id": LOOKUP}  # short names: fewer tokens to generate
N = 200


class Gumbel(torch.nn.Module):
    """A model whose next-token logits get Gumbel noise: greedy decoding of it draws from the
    softmax of the model's logits (the Gumbel-max trick), the distribution of sampling at
    temperature 1, without a multinomial over 150,000 ids per row (the cost of these tests).
    The noise rows come from a pool drawn once (per row and step, a random pool row)."""

    def __init__(self, model, seed, pool=32):
        super().__init__()
        self.inner = model
        self.config = model.config
        self.gen = torch.Generator().manual_seed(seed)
        u = torch.rand((pool, model.config.vocab_size), generator=self.gen).clamp_(1e-12, 1.0)
        self.pool = -torch.log(-torch.log(u))

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, cache=None, use_cache=True,
                logits_to_keep=0):
        out = self.inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         cache=cache, use_cache=use_cache, logits_to_keep=logits_to_keep)
        pick = torch.randint(self.pool.shape[0], (out.logits.shape[0],), generator=self.gen)
        out.logits[:, -1].add_(self.pool.index_select(0, pick))
        return out


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def setup(name):
    if name == "llama31":
        return load_llama31_tokenizer(), load_llama31_vocab()
    return load_tokenizer(name), load_vocab(name)


def check_calls(out, fmt, vocab, calls_per_output):
    assert out.complete, out.text
    calls = out.tool_calls
    assert len(calls) >= calls_per_output, out.text
    for c in calls:
        if c.name == "wx":
            assert isinstance(c.arguments, GetWeather)
        elif c.name == "web":
            assert isinstance(c.arguments, SearchWeb)
        else:
            assert c.name == "id"
            jsonschema.validate(c.arguments, LOOKUP)
    segs = out.parts.segments
    # free text, a call, free text, ... (mistral: a tag holds one call or more)
    texts = [s for s in segs if isinstance(s, str)]
    assert len(texts) == 3 and all(texts), segs


#: per format: its home vocabulary (with the trigger as a special token where it has one), and
#: the other vocabularies its 200 generations run on (triggers as text there)
RUNS = {"hermes": [("qwen2.5", "<tool_call>", 8), ("mistral", None, 192)],
        "llama3": [("llama31", "<|python_tag|>", 8), ("mistral", None, 192)],
        "mistral": [("llama3", None, 8), ("mistral", None, 192)]}


@functools.lru_cache(maxsize=None)
def generator(name):
    """A Generator of a tiny random model (Gumbel-noised) for a fixture vocabulary, shared by the tests."""
    tok, vocab = setup(name)
    return sg.Generator(Gumbel(tiny_llama(vocab.logits_width, seed=len(name), max_positions=256), seed=1), tok, vocab=vocab)


@pytest.mark.parametrize("fmt", sorted(RUNS))
def test_200_generations_parse_into_valid_calls(fmt):
    """200 generations per format (Mistral's 32,000-token vocabulary for most of them: the cost of
    a step is the logits width), each exactly two calls with free text around them."""
    total, names = 0, set()
    for vocab_name, trigger, n in RUNS[fmt]:
        gen = generator(vocab_name)
        vocab = gen.vocab
        g = sg.tool_calls(TOOLS, format=fmt, free_text=r"[a-z]", min_calls=2, max_calls=2, max_parallel=2,
                          engine="dfa")
        outs = gen([f"Request {i}:" for i in range(n)], grammar=g, max_new_tokens=200)  # greedy: a draw (Gumbel)
        tid = vocab.special_token_id(trigger) if trigger else None
        assert (tid is not None) == (trigger is not None)
        for out in outs:
            check_calls(out, fmt, vocab, 2)
            if tid is not None:  # the trigger is the special token, twice, and shows as its text
                assert out.token_ids.count(tid) == 2 and out.text.count(trigger) == 2
        assert len({o.text for o in outs}) >= n // 2
        names |= {c.name for o in outs for c in o.tool_calls}
        total += len(outs)
    assert total >= 200 and names == {"wx", "web", "id"}


@pytest.mark.parametrize("fmt", sorted(RUNS))
def test_sampled_generations(fmt):
    """The decoder's own sampler (temperature 1)."""
    tok, vocab = setup("mistral")
    gen = sg.Generator(tiny_llama(vocab.logits_width, seed=3, max_positions=256), tok, vocab=vocab)
    g = sg.tool_calls(TOOLS, format=fmt, free_text=r"[a-z]", min_calls=2, max_calls=2, max_parallel=2,
                      engine="dfa")
    outs = gen([f"Request {i}:" for i in range(8)], grammar=g, max_new_tokens=200, temperature=1.0, seed=5)
    for out in outs:
        check_calls(out, fmt, vocab, 2)


def test_generate_tools_keyword_and_reasoning():
    gen = generator("qwen2.5")
    out = sg.generate(gen.model, gen.tokenizer, "Weather in Oslo?", tools=[GetWeather], tool_format="hermes",
                      max_new_tokens=160)
    assert out.complete, out.text
    assert all(isinstance(c.arguments, GetWeather) for c in out.tool_calls) and out.value == out.tool_calls
    assert out.content == "".join(s for s in out.parts.segments if isinstance(s, str))
    tok3, vocab3 = setup("qwen3")
    gen = sg.Generator(tiny_llama(vocab3.logits_width, seed=2, max_positions=256), tok3, vocab=vocab3)
    g = sg.Grammar.reasoning(GetWeather, thinking=r"[a-z ]{0,6}", engine="dfa")
    outs = gen([f"q{i}" for i in range(4)], grammar=g, max_new_tokens=64)
    for o in outs:
        assert o.complete and o.token_ids[0] == vocab3.special_token_id("<think>")
        assert vocab3.special_token_id("</think>") in o.token_ids
        assert isinstance(o.value, GetWeather) and o.reasoning is not None


def test_tool_specs_and_errors():
    spec = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties":
                                                                                 {"tz": {"enum": ["utc"]}}}}}
    g = sg.tool_calls([spec, {"name": "ping", "parameters": {"type": "object"}}, GetWeather])
    assert "get_time" in g.source and "ping" in g.source
    g = sg.tool_calls([LOOKUP, SearchWeb], format="mistral")
    assert "lookup" in g.source and "SearchWeb" in g.source  # a schema's title, a model's class name
    with pytest.raises(sg.GrammarError, match="format"):
        sg.tool_calls(TOOLS, format="xml")
    with pytest.raises(sg.GrammarError, match="differ"):
        sg.tool_calls([GetWeather, GetWeather])
    with pytest.raises(sg.SchemaError, match="title"):
        sg.tool_calls([{"type": "object"}])


def test_special_token_grammar_with_disk_cache(tmp_path):
    """A regular grammar naming a special token compiles against the vocabulary's special-token
    view, also through a Generator with a disk cache (which keeps only plain regular grammars)."""
    tok, vocab = setup("qwen2.5")
    gen = sg.Generator(generator("qwen2.5").model, tok, vocab=vocab, cache_dir=tmp_path)
    tid = vocab.special_token_id("<tool_call>")
    g = sg.Grammar.sequence("a", sg.Grammar.special(tid), "b")  # by id: a plain regular grammar
    assert g.is_regular
    for _ in range(2):
        m = gen.compile(g).matcher()
        assert m.advance(vocab.encode("a")[0]) and list(m.allowed_tokens()) == [tid]
        assert m.advance(tid) and m.advance(vocab.encode("b")[0]) and m.is_accepting()
        sg.clear_caches()  # the second compile may come from the disk cache (it must not)
