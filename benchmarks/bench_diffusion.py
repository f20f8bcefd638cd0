"""The diffusion DPs of structgen.diffusion: time per block, and the sampler's overhead per step.

1. ``dingo`` / ``sample`` / ``marginals`` on one block of random log-probs (every position visible,
   the worst case: each reads all of V), against the block length (8 … 256) and the vocabulary
   (gpt2 50k, llama3 128k, qwen2.5 152k), Numba vs torch (CPU; CUDA too when available), for a
   few constraints.  Reported: milliseconds per block (median of ``--repeat``), and the grouped
   structure (states, edges, token classes) with its build time.
2. ``sgd.generate`` with a tiny random BertForMaskedLM over gpt2: seconds per step, constrained
   vs unconstrained (same model, same canvas), i.e. the DP's share of a step.

    python benchmarks/bench_diffusion.py                     # the full grid (minutes)
    python benchmarks/bench_diffusion.py --quick             # a few points
    python benchmarks/bench_diffusion.py --json benchmarks/results/bench_diffusion.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import structgen as sg  # noqa: E402
import structgen.diffusion as sgd  # noqa: E402

TOKENIZERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "tokenizers")
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 24},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 150},
                                           "email": {"type": "string", "format": "email"}},
          "required": ["name", "age"], "additionalProperties": False}
CONSTRAINTS = {
    "email-regex": lambda: sg.Grammar.from_regex(r"[a-z0-9._]{1,20}@[a-z0-9]{1,15}\.(com|org|net)"),
    "date-regex": lambda: sg.Grammar.from_regex(r"\d{4}-\d{2}-\d{2}"),
    "json-person": lambda: sg.Grammar.from_json_schema(PERSON, engine="dfa"),
    "json-free-strings": lambda: sg.Grammar.from_json_schema(
        {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"},
                                          "c": {"type": "array", "items": {"type": "integer"}, "maxItems": 4}},
         "required": ["a", "b"], "additionalProperties": False}, engine="dfa"),
}


def _median_ms(fn, repeat):
    fn()                                   # warm up (Numba compile, device copies)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def bench_dp(vocabs, lengths, constraints, backends, repeat, ops):
    from transformers import AutoTokenizer

    rows = []
    for vname in vocabs:
        tok = AutoTokenizer.from_pretrained(os.path.join(TOKENIZERS, vname), local_files_only=True)
        vocab = sg.Vocabulary.from_tokenizer(tok)
        for cname in constraints:
            cg = sg.compile(CONSTRAINTS[cname](), vocab)
            t0 = time.perf_counter()
            trans = sgd.transitions_of(cg)
            build = time.perf_counter() - t0
            print(f"{vname:8s} {cname:18s} {trans}  built in {build:.2f} s", flush=True)
            for L in lengths:
                gen = torch.Generator().manual_seed(L)
                lp = torch.log_softmax(3 * torch.randn(L, vocab.logits_width, generator=gen), dim=-1)
                for backend in backends:
                    dev = "cuda" if backend == "torch-cuda" else "cpu"
                    x = lp.to(dev) if backend.startswith("torch") else lp.numpy()
                    be = "torch" if backend.startswith("torch") else "numba"
                    res = {"vocab": vname, "V": vocab.logits_width, "constraint": cname, "L": L, "backend": backend,
                           "states": trans.n, "edges": int(trans.esrc.size), "classes": trans.n_classes,
                           "build_s": round(build, 3)}
                    for op in ops:
                        if op == "dingo":
                            f = lambda: sgd.dingo(x, cg, backend=be)  # noqa: E731
                        elif op == "sample":
                            f = lambda: sgd.sample(x, cg, backend=be)  # noqa: E731
                        else:
                            f = lambda: sgd.marginals(x, cg, backend=be)  # noqa: E731
                        res[f"{op}_ms"] = round(_median_ms(f, repeat), 2)
                    rows.append(res)
                    print("   L={L:4d} {backend:10s} ".format(**res)
                          + "  ".join(f"{op} {res[op + '_ms']:8.2f} ms" for op in ops), flush=True)
    return rows


def bench_sampler(rows_per_batch, length, block, steps, repeat):
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    tok = AutoTokenizer.from_pretrained(os.path.join(TOKENIZERS, "gpt2"), local_files_only=True)
    tok.add_special_tokens({"mask_token": "<|mask|>"})
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1,
                                       num_attention_heads=2, intermediate_size=64,
                                       max_position_embeddings=128)).eval()
    prompts = [f"Q{i}:" for i in range(rows_per_batch)]
    out = []
    for label, kw in [("unconstrained", {}), ("email-regex map", dict(regex=r"[a-z]{2,8}@[a-z]{2,8}\.(com|org)")),
                      ("email-regex sample", dict(regex=r"[a-z]{2,8}@[a-z]{2,8}\.(com|org)", method="sample",
                                                  temperature=1.0)),
                      ("json-person map", dict(schema=PERSON)),
                      ("json-person map+marginal", dict(schema=PERSON, unmask="marginal"))]:
        sgd.generate(model, tok, prompts[:2], length=length, block_length=block, steps=steps, seed=0, **kw)  # warm-up
        best = None
        for _ in range(repeat):
            res = sgd.generate(model, tok, prompts, length=length, block_length=block, steps=steps, seed=0, **kw)
            t = res[0].timings
            if best is None or t["decode"] < best["decode"]:
                best = t
        n = len(best["step_dp"])
        row = {"mode": label, "rows": rows_per_batch, "length": length, "steps": n,
               "step_ms": round(1e3 * best["decode"] / n, 2),
               "forward_ms_per_step": round(1e3 * best["forward"] / n, 2),
               "dp_ms_per_step": round(1e3 * best["dp"] / n, 2)}
        out.append(row)
        print("   {mode:26s} step {step_ms:8.2f} ms   forward {forward_ms_per_step:8.2f} ms   "
              "token choice (DP + softmax) {dp_ms_per_step:8.2f} ms".format(**row), flush=True)
    base = out[0]["step_ms"]
    for row in out[1:]:
        row["overhead_vs_unconstrained"] = round(row["step_ms"] / base, 3)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="gpt2 and llama3, L in {8, 32, 128}, two constraints")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch threads")
    ap.add_argument("--ops", default="dingo,sample,marginals")
    ap.add_argument("--vocabs", default=None, help="comma-separated, e.g. gpt2,llama3,qwen2.5")
    ap.add_argument("--lengths", default=None, help="comma-separated block lengths, e.g. 8,32,256")
    ap.add_argument("--constraints", default=None, help=f"comma-separated, of {','.join(CONSTRAINTS)}")
    ap.add_argument("--backends", default=None, help="comma-separated, of numba,torch-cpu,torch-cuda")
    ap.add_argument("--no-sampler", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    backends = ["numba", "torch-cpu"] + (["torch-cuda"] if torch.cuda.is_available() else [])
    if args.quick:
        vocabs, lengths, constraints = ["gpt2", "llama3"], [8, 32, 128], ["email-regex", "json-person"]
    else:
        vocabs, lengths = ["gpt2", "llama3", "qwen2.5"], [8, 16, 32, 64, 128, 256]
        constraints = list(CONSTRAINTS)
    vocabs = args.vocabs.split(",") if args.vocabs else vocabs
    lengths = [int(x) for x in args.lengths.split(",")] if args.lengths else lengths
    constraints = args.constraints.split(",") if args.constraints else constraints
    backends = args.backends.split(",") if args.backends else backends
    report = {"torch": torch.__version__, "threads": torch.get_num_threads(),
              "dp": bench_dp(vocabs, lengths, constraints, backends, args.repeat, args.ops.split(","))}
    if not args.no_sampler:
        print("sampler (BertForMaskedLM hidden 32, gpt2, 16 rows, length 32, block 16, 16 steps):")
        report["sampler"] = bench_sampler(16, 32, 16, 16, max(1, args.repeat // 2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
