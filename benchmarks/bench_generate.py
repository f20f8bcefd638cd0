"""End-to-end generation speed on the demo model (SmolLM2-135M-Instruct, CPU).

The same extraction task (text -> {"name", "age", "city"}) decoded greedily five ways:
constrained with fast-forward, constrained without it (three JSON layouts: dumps — json.dumps'
", " and ": " —, compact and flexible whitespace), and unconstrained.  Reported per mode: wall time per output, output
tokens per second, forward passes per output, the mask's share of decode time (filling,
applying masks and advancing matchers), valid outputs and outputs equal to the expected value.
Each mode runs ``--repeat`` times and the fastest run is kept (shared CPUs are noisy); CPU
seconds per output are reported next to wall time because they suffer less from contention.

    python benchmarks/bench_generate.py                  # batch 1, then batch 10
    python benchmarks/bench_generate.py --batch 1 --threads 1 --json out.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch
from pydantic import ValidationError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import structgen as sg  # noqa: E402
from structgen.models import load_model  # noqa: E402


from tests.extraction_cases import CASES, PROMPT, Person  # noqa: E402


MODES = {
    "constrained+ff (dumps)": dict(schema=Person, whitespace="dumps", fast_forward=True),
    "constrained (dumps)": dict(schema=Person, whitespace="dumps", fast_forward=False),
    "constrained+ff (compact)": dict(schema=Person, whitespace="compact", fast_forward=True),
    "constrained (compact)": dict(schema=Person, whitespace="compact", fast_forward=False),
    "constrained+ff (flexible)": dict(schema=Person, whitespace="flexible", fast_forward=True),
    "constrained (flexible)": dict(schema=Person, whitespace="flexible", fast_forward=False),
    "unconstrained": dict(),
}


def _valid(text: str):
    try:
        return Person.model_validate_json(text)
    except ValidationError:
        return None


def run_mode(gen, prompts, expected, batch: int, max_new_tokens: int, **kw) -> dict:
    wall, cpu, outputs = 0.0, 0.0, []
    decode_s = mask_s = 0.0
    passes = 0
    for i in range(0, len(prompts), batch):
        t0, c0 = time.perf_counter(), time.process_time()
        rs = gen(prompts[i:i + batch], max_new_tokens=max_new_tokens, **kw)
        wall += time.perf_counter() - t0
        cpu += time.process_time() - c0
        outputs += rs
        decode_s += rs[0].timings["decode"]
        mask_s += rs[0].timings["mask"]
        passes += rs[0].timings["batch_forward_passes"]
    values = [_valid(r.text) for r in outputs]
    tokens = sum(len(r.token_ids) for r in outputs)
    return {
        "outputs": len(outputs),
        "wall_s_per_output": wall / len(outputs),
        "cpu_s_per_output": cpu / len(outputs),
        "output_tokens_per_s": tokens / wall,
        "tokens_per_output": tokens / len(outputs),
        "forward_passes_per_output": statistics.mean(r.forward_passes for r in outputs),
        "batch_forward_passes": passes,
        "mask_share_of_decode": mask_s / decode_s if decode_s else 0.0,
        "mask_ms_per_pass": 1e3 * mask_s / max(passes, 1),
        "valid": sum(v is not None for v in values),
        "equal_expected": sum(v is not None and (v.name, v.age, v.city) == e for v, e in zip(values, expected)),
        "projection_tax_mean": statistics.mean(r.projection_tax for r in outputs),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="model path or name (default: the demo model)")
    p.add_argument("--batch", type=int, nargs="*", default=[1, 10], help="batch sizes (default: 1 10)")
    p.add_argument("--max-new-tokens", type=int, default=80)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: shared CPUs)")
    p.add_argument("--repeat", type=int, default=2, help="runs per mode; the fastest is kept (default 2)")
    p.add_argument("--json", default=None, help="write the numbers to this file")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    model, tok = load_model(args.model)
    print(f"model loaded in {time.perf_counter() - t0:.1f} s; torch threads = {torch.get_num_threads()}")
    gen = sg.Generator(model, tok, chat=True)
    prompts = [PROMPT.format(t) for t, _ in CASES]
    expected = [e for _, e in CASES]
    # warm up: compile the constraints, JIT the kernels, touch the mask rows once
    for kw in MODES.values():
        gen(prompts[:2], max_new_tokens=8, **kw)
    report = {}
    header = (f"{'mode':<27}{'batch':>6}{'s/output':>10}{'cpu s/out':>10}{'tok/s':>8}{'tok/out':>9}{'passes/out':>11}"
              f"{'mask %':>8}{'mask ms/pass':>13}{'valid':>7}{'equal':>7}")
    print(header)
    print("-" * len(header))
    for batch in args.batch:
        for name, kw in MODES.items():
            runs = [run_mode(gen, prompts, expected, batch, args.max_new_tokens, **kw) for _ in range(args.repeat)]
            r = min(runs, key=lambda x: x["wall_s_per_output"])
            r["cpu_s_per_output"] = min(x["cpu_s_per_output"] for x in runs)
            report[f"{name} / batch {batch}"] = r
            print(f"{name:<27}{batch:>6}{r['wall_s_per_output']:>10.3f}{r['cpu_s_per_output']:>10.3f}"
                  f"{r['output_tokens_per_s']:>8.1f}"
                  f"{r['tokens_per_output']:>9.1f}{r['forward_passes_per_output']:>11.1f}"
                  f"{100 * r['mask_share_of_decode']:>7.1f}%{r['mask_ms_per_pass']:>13.2f}"
                  f"{r['valid']:>5}/{r['outputs']}{r['equal_expected']:>5}/{r['outputs']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
