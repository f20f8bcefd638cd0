"""Shared test helpers: the tokenizer fixtures in tests/data/tokenizers and cached vocabularies.

    from tests.helpers import load_vocab, load_tokenizer, ALL_TOKENIZERS, TOKENIZERS_DIR

``load_vocab(name)`` uses the model's real logits width (Qwen: 151,936 > len(tokenizer)), so
every test sees ids that have no token.  Results are cached per process: do not mutate them.
"""
from __future__ import annotations

import codecs
import json
import os
from functools import lru_cache
from pathlib import Path

import numpy as np

os.environ["HF_HUB_OFFLINE"] = "1"

TOKENIZERS_DIR = Path(__file__).resolve().parent / "data" / "tokenizers"
ALL_TOKENIZERS = ["gpt2", "llama3", "qwen2.5", "qwen3", "llama2", "mistral"]
BYTE_LEVEL_TOKENIZERS = ["gpt2", "llama3", "qwen2.5", "qwen3"]
SENTENCEPIECE_TOKENIZERS = ["llama2", "mistral"]
#: logits rows of the models that use each tokenizer (None = len(tokenizer))
MODEL_LOGITS_WIDTH = {"gpt2": None, "llama3": None, "qwen2.5": 151936, "qwen3": 151936,
                      "llama2": None, "mistral": None}


def tiny_llama(vocab_size: int, *, seed: int = 0, layers: int = 1, hidden: int = 32, max_positions: int = 512):
    """A random-weight Llama small enough for tests (eval mode, seeded): over a real vocabulary it
    picks among the allowed tokens almost uniformly."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=2,
                      max_position_embeddings=max_positions, bos_token_id=None, eos_token_id=None, pad_token_id=0)
    return LlamaForCausalLM(cfg).eval()


def tiny_diffusion_gemma(vocab_size: int, canvas: int, eos: int, *, bos: int | None = None, max_positions: int = 128,
                         seed: int = 0):
    """A random-weight ``DiffusionGemmaForBlockDiffusion`` small enough for tests (eval mode,
    seeded; one layer, two experts) decoding canvases of ``canvas`` tokens."""
    import torch
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion

    text = dict(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=1, head_dim=16, global_head_dim=16, max_position_embeddings=max_positions,
                pad_token_id=eos, eos_token_id=eos, bos_token_id=eos if bos is None else bos, sliding_window=16,
                num_experts=2, top_k_experts=1, moe_intermediate_size=32)
    vision = dict(model_type="gemma4_vision", hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=2, head_dim=8, position_embedding_size=64)
    torch.manual_seed(seed)
    cfg = DiffusionGemmaConfig(text_config=text, vision_config=vision, canvas_length=canvas)
    return DiffusionGemmaForBlockDiffusion(cfg).eval()


@lru_cache(maxsize=None)
def load_tokenizer(name: str):
    """The Hugging Face tokenizer of a fixture folder (loaded offline, cached)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(TOKENIZERS_DIR / name), local_files_only=True)


def load_vocab(name: str, logits_width: int | None = -1):
    """The structgen Vocabulary of a fixture tokenizer (cached per name and width).

    ``logits_width=-1`` (default) means the model's real width from MODEL_LOGITS_WIDTH;
    None means len(tokenizer).
    """
    width = MODEL_LOGITS_WIDTH[name] if logits_width == -1 else logits_width
    if width is None:
        width = len(load_tokenizer(name))
    return _load_vocab(name, int(width))


@lru_cache(maxsize=None)
def _load_vocab(name: str, width: int):
    from structgen.vocab import Vocabulary

    return Vocabulary.from_tokenizer(load_tokenizer(name), logits_width=width)


def load_golden(name: str) -> tuple[str, list[int]]:
    """(text, ids) of golden-mixed.json: ids from an independent reference encoder."""
    with open(TOKENIZERS_DIR / name / "golden-mixed.json", encoding="utf-8") as f:
        g = json.load(f)
    return g["text"], [int(i) for i in g["ids"]]


def load_llamacpp_vectors(name: str) -> list[tuple[str, list[int]]]:
    """llama.cpp's test strings and the ids the real HF tokenizer gave ([] when absent: mistral)."""
    inp = TOKENIZERS_DIR / name / "llamacpp-vectors.inp"
    if not inp.exists():
        return []
    with open(inp, encoding="utf-8", newline="") as f:
        texts = f.read().split("\n__ggml_vocab_test__\n")[:-1]
    with open(TOKENIZERS_DIR / name / "llamacpp-vectors.out", encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")[: len(texts)]
    assert len(lines) == len(texts), name
    return [(t, [int(x) for x in line.split()]) for t, line in zip(texts, lines)]


# ----------------------------------------------------------------- matchers: oracles and sampling
def cyclic_garbage(work) -> list:
    """The objects ``work()`` leaves in reference cycles (what only the cyclic collector would free),
    found with the collector off and ``gc.DEBUG_SAVEALL``; the collector's state is restored after."""
    import gc

    gc.collect()
    was = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        work()
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.set_debug(0)
        del gc.garbage[:]
        if was:
            gc.enable()


def brute_mask_check(m, vocab):
    """``allowed_tokens()`` equals the tokens ``advance`` takes (each one rolled back)."""
    allowed = set(m.allowed_tokens().tolist())
    brute = set()
    for t in range(vocab.logits_width):
        if m.advance(t):
            brute.add(t)
            m.rollback(1)
    assert allowed == brute, (sorted(allowed - brute)[:5], sorted(brute - allowed)[:5])


def sample(cg, vocab, rng, bias, max_steps=300):
    """Sample under the mask from random logits (``bias`` favours structure); the text, or None
    when the budget ran out.  An empty mask fails the test."""
    m = cg.matcher()
    out = []
    for _ in range(max_steps):
        allowed = m.allowed_tokens()
        assert allowed.size, f"dead end after {vocab.decode(out)!r}"
        logits = rng.standard_normal(allowed.size) + bias[allowed]
        p = np.exp(logits - logits.max())
        t = int(rng.choice(allowed, p=p / p.sum()))
        assert m.advance(t)
        if m.is_terminated():
            return vocab.decode(out).decode("utf-8")
        out.append(t)
    return None


def structure_bias(vocab, strength):
    """Logit bias for tokens with a quote or closing bracket (so strings and objects end)."""
    bias = np.zeros(vocab.logits_width)
    for t in range(vocab.logits_width):
        if vocab.is_normal[t]:
            b = vocab.token_bytes(t)
            if b'"' in b or b"}" in b or b"]" in b:
                bias[t] = strength
        elif t in set(int(e) for e in vocab.eos_ids):
            bias[t] = strength
    return bias


def segment(data: bytes, pieces, rng) -> list[int]:
    """A random segmentation of ``data`` into ``pieces`` (ids are their indices; every byte must
    be among them so that one always fits)."""
    out, pos = [], 0
    while pos < len(data):
        fits = [i for i, p in enumerate(pieces) if data.startswith(p, pos)]
        i = rng.choice(fits)
        out.append(i)
        pos += len(pieces[i])
    return out


#: Llama 3.1 renamed two of Llama 3's reserved special tokens (same ids, same BPE)
LLAMA31_RENAMES = {128008: "<|eom_id|>", 128010: "<|python_tag|>"}


@lru_cache(maxsize=None)
def load_llama31_tokenizer():
    """The llama3 fixture with Llama 3.1's names for two reserved special tokens (``<|eom_id|>``
    128008, ``<|python_tag|>`` 128010): what Llama 3.1 changed in the tokenizer.  Written once per
    process to a temporary folder."""
    import shutil
    import tempfile

    from transformers import AutoTokenizer

    dst = Path(tempfile.mkdtemp(prefix="structgen-llama31-"))
    src = TOKENIZERS_DIR / "llama3"
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(src / f, dst / f)
    tj = json.loads((dst / "tokenizer.json").read_text(encoding="utf-8"))
    for a in tj["added_tokens"]:
        a["content"] = LLAMA31_RENAMES.get(a["id"], a["content"])
    (dst / "tokenizer.json").write_text(json.dumps(tj), encoding="utf-8")
    tc = json.loads((dst / "tokenizer_config.json").read_text(encoding="utf-8"))
    for i, name in LLAMA31_RENAMES.items():
        tc["added_tokens_decoder"][str(i)]["content"] = name
    (dst / "tokenizer_config.json").write_text(json.dumps(tc), encoding="utf-8")
    return AutoTokenizer.from_pretrained(str(dst), local_files_only=True)


@lru_cache(maxsize=None)
def load_llama31_vocab():
    from structgen.vocab import Vocabulary

    return Vocabulary.from_tokenizer(load_llama31_tokenizer())


# ----------------------------------------------------------------- engine tests: xgrammar's masks
def utf8_prefix(data: bytes) -> bool:
    """Whether ``data`` is UTF-8 text, perhaps cut inside its last character."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
        return True
    except UnicodeDecodeError:
        return False


def xgrammar_departures(ours: np.ndarray, theirs: np.ndarray, vocab, whitespace: bool) -> list:
    """For structural tags, the tokens where xgrammar's mask departs from structgen's other than
    as it is known to: xgrammar's free text around triggered tags (its TagDispatch) takes any
    bytes, so it also allows tokens that are no UTF-8 text at all (a lone continuation byte,
    0xFF); with ``whitespace``, its JSON takes runs of any length.  structgen allows nothing
    xgrammar does not."""
    out = [int(t) for t in np.flatnonzero(ours & ~theirs)]
    for t in np.flatnonzero(theirs & ~ours):
        data = vocab.token_bytes(int(t))
        if utf8_prefix(data) and not (whitespace and data[:1] in (b" ", b"\t", b"\n", b"\r")):
            out.append(int(t))
    return out


def lark_accepts(parser, s: str) -> bool:
    """Whether a ``lark.Lark`` parser parses ``s`` (any LarkError: no)."""
    import lark

    try:
        parser.parse(s)
        return True
    except lark.exceptions.LarkError:
        return False


def bounded_language(cfg, n: int) -> set:
    """Every sentence of at most ``n`` terminals of a :class:`structgen.cfg.CFG` (its terminal
    names concatenated: single characters spell the text), by a least fixpoint over finite sets:
    exact, for tiny grammars."""
    lang = {a: set() for a in cfg.rules}
    changed = True
    while changed:
        changed = False
        for a, alts in cfg.rules.items():
            for rhs in alts:
                cur = {()}
                for s in rhs:
                    parts = {(s,)} if s not in cfg.rules else lang[s]
                    cur = {x + y for x in cur for y in parts if len(x) + len(y) <= n}
                    if not cur:
                        break
                new = cur - lang[a]
                if new:
                    lang[a] |= new
                    changed = True
    return {"".join(x) for x in lang[cfg.start]}
