"""Generation hygiene with tiny random Llama models: how many generations close their object
before ``max_new_tokens``, with the generation defaults (``hygiene`` on) and with exact JSON
Schema semantics (``schema_options={"hygiene": False}``).

A random-weight model picks among the allowed tokens almost uniformly, the harshest case for
runaway digits (``23.000...``), fraction and exponent digits and whitespace.  The model is a
transformers ``LlamaForCausalLM`` from a tiny config (hidden size 32, one layer) over the real
llama3 vocabulary, sampled at temperature 1; the constraint is a Pydantic model with ``int``,
``float``, bounded ``list[int]`` and bounded ``str`` fields.

    PYTHONPATH=. python benchmarks/bench_hygiene.py --n 500 --max-new-tokens 256
    PYTHONPATH=. python benchmarks/bench_hygiene.py --n 60 --max-new-tokens 128 --exact

Prints, per whitespace layout, how many generations finished (EOS) and the longest output.
Measured 2026-12-02 (shared 2-core machine): before hygiene (``--baseline`` on the previous
commit's code, ``--n 60 --max-new-tokens 128``) compact 2 / 60, dumps 6 / 60, flexible 60 / 60
finished; with hygiene ``--n 500 --max-new-tokens 256`` compact 500 / 500 (longest 66 tokens),
flexible 500 / 500 (longest 85), and at 128 tokens 60 / 60 in all three layouts.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from pydantic import BaseModel, Field
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

import structgen as sg

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER = ROOT / "tests" / "data" / "tokenizers" / "llama3"


class Order(BaseModel):
    name: str = Field(max_length=12)
    qty: int = Field(ge=1, le=99)
    price: float
    sizes: list[int] = Field(max_length=4)
    note: str = Field(max_length=20)


def tiny_llama(vocab_size: int, seed: int = 0):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                      bos_token_id=None, eos_token_id=None, pad_token_id=0)
    return LlamaForCausalLM(cfg).eval()


def run(gen, n: int, batch: int, whitespace: str, max_new_tokens: int, exact: bool, seed: int = 0) -> dict:
    options = {"hygiene": False} if exact else None
    finished, longest, tokens, bad = 0, 0, 0, []
    for start in range(0, n, batch):
        prompts = [f"order {i}:" for i in range(start, min(n, start + batch))]
        outs = gen(prompts, schema=Order, whitespace=whitespace, temperature=1.0, seed=seed + start,
                   max_new_tokens=max_new_tokens, schema_options=options)
        for r in outs:
            tokens += len(r.token_ids)
            longest = max(longest, len(r.token_ids))
            if r.complete and r.finish_reason == "stop":
                finished += 1
                Order.model_validate_json(r.text)  # every finished output validates
            elif len(bad) < 3:
                bad.append(r.text[:160])
    return {"whitespace": whitespace, "n": n, "finished": finished, "longest_tokens": longest,
            "mean_tokens": round(tokens / max(n, 1), 1), "unfinished_examples": bad}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=500, help="generations per whitespace layout")
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--whitespace", nargs="+", default=["compact", "flexible"])
    ap.add_argument("--exact", action="store_true", help="exact JSON Schema semantics (hygiene off)")
    ap.add_argument("--baseline", action="store_true", help="pass no schema options at all (code before hygiene)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: fastest on a shared machine)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    tok = AutoTokenizer.from_pretrained(str(TOKENIZER), local_files_only=True)
    vocab = sg.Vocabulary.from_tokenizer(tok)
    gen = sg.Generator(tiny_llama(vocab.logits_width), tok, vocab=vocab, chat=False)
    for ws in args.whitespace:
        t0 = time.perf_counter()
        if args.baseline:
            res = run_baseline(gen, args.n, args.batch, ws, args.max_new_tokens)
        else:
            res = run(gen, args.n, args.batch, ws, args.max_new_tokens, args.exact)
        res["seconds"] = round(time.perf_counter() - t0, 1)
        res["mode"] = "baseline" if args.baseline else "exact" if args.exact else "hygiene"
        print(json.dumps(res))


def run_baseline(gen, n, batch, whitespace, max_new_tokens):
    finished, longest, bad = 0, 0, []
    for start in range(0, n, batch):
        prompts = [f"order {i}:" for i in range(start, min(n, start + batch))]
        outs = gen(prompts, schema=Order, whitespace=whitespace, temperature=1.0, seed=start,
                   max_new_tokens=max_new_tokens)
        for r in outs:
            longest = max(longest, len(r.token_ids))
            if r.complete and r.finish_reason == "stop":
                finished += 1
            elif len(bad) < 3:
                bad.append(r.text[:160])
    return {"whitespace": whitespace, "n": n, "finished": finished, "longest_tokens": longest,
            "unfinished_examples": bad}


if __name__ == "__main__":
    main()
