"""generate(), Generator, @function and the batched decode loop, end to end with tiny random
Llama models over real vocabularies.  Oracles: a full (uncached, unpadded) forward pass for the
logits the loop sees; re.fullmatch, jsonschema (with formats), Pydantic, Lark and a replay through
a fresh matcher for the outputs; a brute-force allowed set for the kept probability mass."""
import dataclasses
import enum
import json
import math
import re
from typing import Literal

from typing_extensions import TypedDict  # Pydantic needs this one on Python < 3.12

import jsonschema
import lark
import pytest
import torch
from pydantic import BaseModel, Field
from transformers import LlamaConfig, LlamaForCausalLM

import structgen as sg
from structgen.api import GenerationError, vocabulary_for
from structgen.decoding.autoregressive import Row, decode
from tests.helpers import load_tokenizer, load_vocab


def tiny_llama(vocab_size, seed=0, layers=1):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                      bos_token_id=None, eos_token_id=None, pad_token_id=0)
    return LlamaForCausalLM(cfg).eval()


class Biased(torch.nn.Module):
    """A model whose logits get a fixed bias (to make a random model finish quickly)."""

    def __init__(self, model, bias):
        super().__init__()
        self.inner = model
        self.config = model.config
        self.register_buffer("bias", bias)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, cache=None, use_cache=True,
                logits_to_keep=0):
        out = self.inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         cache=cache, use_cache=use_cache, logits_to_keep=logits_to_keep)
        out.logits = out.logits + self.bias
        return out


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def llama3():
    tok = load_tokenizer("llama3")
    vocab = load_vocab("llama3")
    model = tiny_llama(vocab.logits_width, layers=2)
    return model, tok, sg.Generator(model, tok, vocab=vocab)


# ----------------------------------------------------------------------------- the decode loop
def test_logits_match_unpadded_full_forward(llama3):
    """Left padding, holes from fast-forward chunks of different lengths, finished rows and
    the KV cache must not change what the model sees: compare with a plain forward pass."""
    model, _, gen = llama3
    vocab = gen.vocab
    cg = gen.compile(sg.Grammar.choice(['{"name": "Alice", "age": 30}', '{"name": "Bob"}', '{"city": "Oslo"}',
                                        "[1, 2, 3]"]))
    errs = []

    def check(i, ids, logits):
        with torch.no_grad():
            ref = model(torch.tensor([ids])).logits[0, -1].float()
        errs.append(float((logits - ref).abs().max()))

    rows = [Row([1, 2, 3], cg.matcher()), Row(list(range(10, 19)), cg.matcher()), Row([7], None),
            Row([5, 6], cg.matcher())]
    stats = decode(model, rows, vocab, max_new_tokens=12, temperature=1.0,
                   generator=torch.Generator().manual_seed(3), on_logits=check)
    assert len(errs) >= stats.forward_passes >= 2
    assert max(errs) < 1e-4, errs
    assert any(r.forced >= 2 for r in rows)          # fast-forward fed multi-token chunks
    assert rows[2].finish_reason == "length" and len(rows[2].output_ids) == 12


def test_batch_equals_single(llama3):
    _, _, gen = llama3
    prompts = ["The IP is", "Write one address, please:", "x", "A longer prompt with more tokens in it:"]
    pat = r"(\d{1,3}\.){3}\d{1,3}|[a-z]{2,6}@[a-z]{2,5}\.(com|net)"
    batch = gen(prompts, regex=pat, max_new_tokens=40)
    singles = [gen(p, regex=pat, max_new_tokens=40) for p in prompts]
    assert [r.token_ids for r in batch] == [r.token_ids for r in singles]


def test_sampling_is_reproducible_with_a_seed(llama3):
    _, _, gen = llama3
    kw = dict(regex=r"[a-z]{3,8}", temperature=1.3, top_k=50, top_p=0.9, max_new_tokens=20)
    a = gen(["p", "q r"], seed=7, **kw)
    b = gen(["p", "q r"], seed=7, **kw)
    assert [r.token_ids for r in a] == [r.token_ids for r in b]
    for r in a:
        assert re.fullmatch(r"[a-z]{3,8}", r.value)


def test_sample_respects_top_k_and_top_p():
    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0, float("-inf")]])
    g = torch.Generator().manual_seed(0)
    from structgen.decoding.autoregressive import sample

    draws = {int(sample(logits, 1.0, top_k=2, generator=g)) for _ in range(200)}
    assert draws == {2, 3}
    draws = {int(sample(logits, 1.0, top_p=0.5, generator=g)) for _ in range(200)}
    assert draws == {3}   # p(3) = 0.64 >= 0.5
    assert int(sample(logits, 0.0)) == 3


# ----------------------------------------------------------------------------- every constraint kind
PATTERN = r"(\d{1,3}\.){3}\d{1,3}|[a-z]{2,6}@[a-z]{2,5}\.(com|net)"
SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 0, "maximum": 999},
        "tag": {"enum": ["a", "b", "c"]},
        "name": {"type": "string", "maxLength": 5},
        "when": {"type": "string", "format": "date"},
        "xs": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3},
    },
    "required": ["id", "tag", "name"],
    "additionalProperties": False,
}
LARK = r"""
start: "[" item ("," item)~0..3 "]"
item: NUMBER | WORD | start2
start2: "(" NUMBER ")"
NUMBER: /[0-9]{1,3}/
WORD: /[a-z]{1,4}/
"""


class Point(BaseModel, extra="forbid"):
    x: int = Field(ge=-50, le=50)
    label: Literal["p", "q"]
    ok: bool


def _check(kind, result, vocab, cg):
    assert result.complete and result.finish_reason == "stop", result
    text = result.text
    if kind == "regex":
        assert re.fullmatch(PATTERN, text)
        assert result.value == text
    elif kind == "choices":
        assert text in ("red", "green", "blue", "dark green")
    elif kind == "json_schema":
        jsonschema.validate(json.loads(text), SCHEMA, format_checker=jsonschema.FormatChecker())
        assert result.value == json.loads(text)
    elif kind == "pydantic":
        assert isinstance(result.value, Point)
        jsonschema.validate(json.loads(text), Point.model_json_schema())
    elif kind == "lark":
        lark.Lark(LARK, start="start").parse(text)
    # replay through a fresh matcher: every token and the EOS are accepted
    m = cg.matcher()
    eos = int(vocab.eos_ids[0])
    assert m.validate(result.token_ids + [eos]) == len(result.token_ids) + 1
    assert vocab.decode(result.token_ids).decode("utf-8") == text


SPECS = {
    "regex": dict(regex=PATTERN),
    "choices": dict(choices=["red", "green", "blue", "dark green"]),
    "json_schema": dict(schema=SCHEMA),
    "pydantic": dict(schema=Point),
    "lark": dict(grammar=LARK),
}


@pytest.mark.parametrize("kind", list(SPECS))
@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("mode", ["greedy", "sample"])
def test_every_output_validates(llama3, kind, batch, mode):
    _, _, gen = llama3
    spec = SPECS[kind]
    prompts = ["Give me one:", "another", "Some longer prompt text here", "z"][:batch]
    kw = dict(max_new_tokens=160, **spec)
    if mode == "sample":
        kw.update(temperature=1.0, seed=batch)
    out = gen(prompts if batch > 1 else prompts[0], **kw)
    results = out if batch > 1 else [out]
    assert len(results) == batch
    cg = gen.compile(gen.constraint(**spec).grammar)
    for r in results:
        _check(kind, r, gen.vocab, cg)
        assert r.sampled_tokens + r.forced_tokens == len(r.token_ids)


@pytest.mark.parametrize("name", ["mistral", "qwen2.5"])
def test_other_vocabularies(name):
    """SentencePiece (mistral) and a logits width above len(tokenizer) (qwen2.5)."""
    tok, vocab = load_tokenizer(name), load_vocab(name)
    model = tiny_llama(vocab.logits_width, seed=1)
    gen = sg.Generator(model, tok, vocab=vocab)
    assert vocabulary_for(model, tok).logits_width == vocab.logits_width
    for kind in ("regex", "json_schema"):
        out = gen(["a", "b c d"], max_new_tokens=160, temperature=1.0, seed=0, **SPECS[kind])
        cg = gen.compile(gen.constraint(**SPECS[kind]).grammar)
        for r in out:
            _check(kind, r, vocab, cg)


# ----------------------------------------------------------------------------- fast-forward, tax, stream
def test_fast_forward_saves_forward_passes(llama3):
    _, _, gen = llama3
    kw = dict(schema=Point, max_new_tokens=160)
    on = gen(["a", "b"], **kw)
    off = gen(["a", "b"], fast_forward=False, **kw)
    for r_on, r_off in zip(on, off):
        assert r_on.ok and r_off.ok
        assert r_on.forced_tokens >= 3 and r_off.forced_tokens == 0
        assert r_on.forward_passes < r_off.forward_passes
        assert r_off.forward_passes == r_off.sampled_tokens
    assert on[0].timings["batch_forward_passes"] < off[0].timings["batch_forward_passes"]


def test_kept_mass_is_the_allowed_probability(llama3):
    model, tok, gen = llama3
    vocab = gen.vocab
    choices = ["red", "green", "blue"]
    r = gen("Colour:", choices=choices, max_new_tokens=10)
    assert r.kept_mass and all(0 < z <= 1 for z in r.kept_mass)
    assert math.isclose(r.projection_tax, -sum(math.log(z) for z in r.kept_mass), rel_tol=1e-6)
    # first step, independently: tokens whose bytes are a prefix of a choice
    allowed = [t for t in range(vocab.size) if vocab.is_normal[t]
               and any(c.encode().startswith(vocab.token_bytes(t)) for c in choices)]
    ids = tok("Colour:")["input_ids"]
    with torch.no_grad():
        p = torch.softmax(model(torch.tensor([ids])).logits[0, -1].double(), -1)
    assert math.isclose(r.kept_mass[0], float(p[allowed].sum()), rel_tol=1e-4)


def test_unconstrained_rows_have_no_tax(llama3):
    _, _, gen = llama3
    r = gen("hello", max_new_tokens=6)
    assert r.constraint == "unconstrained" and r.projection_tax == 0 and r.finish_reason == "length"
    assert not r.complete
    with pytest.raises(GenerationError, match="max_new_tokens"):
        r.value


def test_stream_yields_the_text(llama3):
    _, _, gen = llama3
    s = gen.stream("Say something:", schema=SCHEMA, max_new_tokens=160, temperature=1.0, seed=5)
    chunks = list(s)
    assert len(chunks) >= 2
    assert "".join(chunks) == s.result.text
    jsonschema.validate(s.result.value, SCHEMA)


def test_token_healing(llama3):
    _, tok, gen = llama3
    prompt = "hello world"
    last = tok(prompt)["input_ids"][-1]
    healed = gen.vocab.token_bytes(last)
    assert healed == b" world"
    for mode in ({}, {"temperature": 1.0, "seed": 2}):
        r = gen(prompt, choices=["ly", "s", " peace"], token_healing=True, **mode)
        assert r.value in ("ly", "s", " peace")
        assert gen.vocab.token_bytes(r.token_ids[0]).startswith(healed)
        assert gen.vocab.decode(r.token_ids) == healed + r.text.encode()


def test_chat_template_and_messages(llama3):
    _, _, gen = llama3
    msgs = [{"role": "user", "content": "Pick one"}]
    r1 = gen(msgs, choices=["yes", "no"])
    r2 = gen("Pick one", chat=True, choices=["yes", "no"])
    assert "<|start_header_id|>user" in r1.prompt and r1.prompt == r2.prompt and r1.value == r2.value
    r3 = gen("Pick one", chat=True, system="Be brief.", choices=["yes", "no"])
    assert "Be brief." in r3.prompt


def test_compiled_constraints_are_cached_in_memory_and_on_disk(llama3, tmp_path):
    model, tok, gen = llama3
    g1 = gen.constraint(regex=r"[0-9]{2,4}-[a-z]+").grammar
    assert gen.compile(g1) is gen.compile(sg.Grammar.from_regex(r"[0-9]{2,4}-[a-z]+"))
    a = sg.Generator(model, tok, vocab=gen.vocab, cache_dir=tmp_path)
    ra = a("n", regex=r"[0-9]{2,4}-[a-z]{1,3}", temperature=1.0, seed=1)
    assert len(list(tmp_path.glob("dfa/*.pkl"))) == 1
    b = sg.Generator(model, tok, vocab=gen.vocab, cache_dir=tmp_path)
    cg = b.compile(sg.Grammar.from_regex(r"[0-9]{2,4}-[a-z]{1,3}"))
    assert "disk_cache" in cg.stats.extra
    rb = b("n", regex=r"[0-9]{2,4}-[a-z]{1,3}", temperature=1.0, seed=1)
    assert ra.token_ids == rb.token_ids and re.fullmatch(r"[0-9]{2,4}-[a-z]{1,3}", rb.value)


def test_generate_function_reuses_the_vocabulary(llama3):
    model, tok, gen = llama3
    r = sg.generate(model, tok, ["a", "b"], regex=r"[ab]{1,3}")
    assert [re.fullmatch(r"[ab]{1,3}", x.value) is not None for x in r] == [True, True]


# ----------------------------------------------------------------------------- errors
def test_bad_input_errors(llama3):
    model, tok, gen = llama3
    with pytest.raises(TypeError, match="at most one"):
        gen("x", regex="a", choices=["a"])
    with pytest.raises(sg.RegexError):
        gen("x", regex="a(")
    with pytest.raises(sg.SchemaError):
        gen("x", schema={"type": "object", "properties": {"a": {"type": "strin"}}})
    with pytest.raises(sg.SchemaError):
        gen("x", schema="{not json")
    with pytest.raises(sg.GrammarError):
        gen("x", grammar="start: foo\n")
    class Opaque:
        pass

    with pytest.raises(sg.Unsupported, match="Opaque"):
        gen("x", schema=Opaque)
    with pytest.raises(ValueError, match="empty"):
        gen([], regex="a")
    with pytest.raises(TypeError, match="prompt"):
        gen(42, regex="a")
    with pytest.raises(TypeError, match="unknown"):
        gen("x", temprature=1.0)
    with pytest.raises(sg.StructgenError, match="chat template"):
        sg.Generator(tiny_llama(50257), load_tokenizer("gpt2"), vocab=load_vocab("gpt2"))("x", chat=True)


def test_tokenizer_without_eos_is_rejected():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE({"a": 0, "b": 1, "ab": 2}, [("a", "b")]))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw)
    with pytest.raises(sg.VocabularyError, match="EOS"):
        sg.Generator(tiny_llama(3), tok)


# ----------------------------------------------------------------------------- @function
class Person(BaseModel):
    name: str = Field(max_length=8)
    age: int = Field(ge=0, le=120)


class PersonTD(TypedDict):
    name: str
    n: int


@dataclasses.dataclass
class Pair:
    a: int
    b: bool


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@pytest.fixture(scope="module")
def eager():
    """A random model nudged to finish: EOS, quotes and closing brackets get a bonus."""
    tok = load_tokenizer("llama3")
    vocab = load_vocab("llama3")
    bias = torch.zeros(vocab.logits_width)
    for t in list(vocab.eos_ids):
        bias[int(t)] = 30.0
    for s, b in (('"', 12.0), ("}", 10.0), ("]", 10.0), ('"}', 10.0), (",", 8.0), (".", -20.0), ("e", -20.0)):
        for t in tok(s, add_special_tokens=False)["input_ids"]:
            bias[t] = b
    model = Biased(tiny_llama(vocab.logits_width, seed=2), bias).eval()
    return model, tok, sg.Generator(model, tok, vocab=vocab)


@pytest.mark.parametrize("ann, check", [
    (Person, lambda v: isinstance(v, Person)),
    (PersonTD, lambda v: isinstance(v, dict) and set(v) == {"name", "n"} and isinstance(v["n"], int)),
    (Pair, lambda v: isinstance(v, Pair) and isinstance(v.b, bool)),
    (Literal["yes", "no"], lambda v: v in ("yes", "no")),
    (Colour, lambda v: isinstance(v, Colour)),
    (list[int], lambda v: isinstance(v, list) and all(isinstance(x, int) for x in v)),
    (int, lambda v: type(v) is int),
    (float, lambda v: isinstance(v, float)),
    (bool, lambda v: isinstance(v, bool)),
    (str, lambda v: isinstance(v, str)),
])
def test_function_decorator_return_types(eager, ann, check):
    _, _, gen = eager

    def f(text: str, n: int = 3):
        """Read {text} carefully."""

    f.__annotations__["return"] = ann
    fn = sg.function(generator=gen, max_new_tokens=96, chat=False)(f)
    v = fn("Ann is 31")
    assert check(v), v
    assert fn.last_result.complete
    p = fn.prompt("Ann is 31")
    assert p.startswith("Read Ann is 31 carefully.") and "n: 3" in p


def test_function_decorator_errors(eager):
    _, _, gen = eager
    with pytest.raises(sg.Unsupported, match="missing"):
        @sg.function(generator=gen)
        def no_annotation(x: str):
            """{x}"""

    class Opaque:
        pass

    with pytest.raises(sg.Unsupported, match="Opaque"):
        @sg.function(generator=gen)
        def bad(x: str) -> Opaque:
            """{x}"""

    @sg.function(generator=gen, max_new_tokens=2, chat=False)
    def short(x: str) -> Person:
        """{x}"""

    with pytest.raises(GenerationError, match="max_new_tokens=2"):
        short("Ann is 31")


class Open(BaseModel):   # Pydantic's default: unknown keys are ignored
    a: int


def test_pydantic_objects_are_closed_unless_asked(llama3):
    _, _, gen = llama3
    vocab = gen.vocab
    eos = int(vocab.eos_ids[0])

    def accepts(constraint, text):
        ids = vocab.encode(text) + [eos]
        return gen.compile(constraint.grammar).matcher().validate(ids) == len(ids)

    closed = gen.constraint(schema=Open)
    opened = gen.constraint(schema=Open, schema_options={"strict": False})
    # (the default layout is json.dumps': ", " and ": ")
    assert accepts(closed, '{"a": 1}') and accepts(opened, '{"a": 1}')
    assert not accepts(closed, '{"a": 1, "b": 2}') and accepts(opened, '{"a": 1, "b": 2}')
    # JSON Schemas too: closed for generation unless strict=False (then exactly as written)
    raw = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert not accepts(gen.constraint(schema=raw), '{"a": 1, "b": 2}')
    assert accepts(gen.constraint(schema=raw, schema_options={"strict": False}), '{"a": 1, "b": 2}')


class Tricky(BaseModel):   # a field named like a JSON Schema keyword
    properties: int


def test_closing_objects_leaves_property_names_alone(llama3):
    _, _, gen = llama3
    ids = gen.vocab.encode('{"properties": 7}') + [int(gen.vocab.eos_ids[0])]
    assert gen.compile(gen.constraint(schema=Tricky).grammar).matcher().validate(ids) == len(ids)
