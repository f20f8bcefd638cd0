"""TTFM and TBM on the JSON Schemas every engine compiles: a stratified sample of the
JSONSchemaBench dev split, the engines one after another in this process, llama3 vocabulary.

    python benchmarks/bench_schema_sample.py [--per-subset 6] [--offset 0] \
        [--engines structgen,structgen-any,llguidance]

For each schema an engine compiles: TTFM = compile + first mask; then every valid instance is
forced as ``json.dumps(data)`` token by token, timing each mask fill (TBM).  Prints per engine the
percentiles over all the schemas it compiled, then over the schemas every engine compiled (the
fair comparison: ``structgen bench maskbench`` pools each engine's own schemas), and the schemas
with the slowest single masks.  No file is written.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))


def run_engine(name, tok, sample):
    """``{schema id: (ttfm seconds, [mask seconds])}`` for the schemas ``name`` compiles."""
    from structgen.bench.engines import make_engine

    eng = make_engine(name, tok)
    eng.warm_up()
    bm = tok.allocate()
    out = {}
    for r in sample:
        schema = json.loads(r["json_schema"]) if isinstance(r["json_schema"], str) else r["json_schema"]
        t0 = time.perf_counter()
        try:
            c = eng.compile(schema)
            c.matcher().fill_mask(bm)
        except Exception:  # refused: not counted
            continue
        ttfm = time.perf_counter() - t0
        masks = []
        for test in r.get("tests", []):
            if not test.get("valid", True):
                continue
            m = c.matcher()
            for t in tok.encode(json.dumps(test["data"])):
                t1 = time.perf_counter()
                m.fill_mask(bm)
                masks.append(time.perf_counter() - t1)
                if not m.advance(t):
                    break
        out[f"{r['subset']}/{r['unique_id']}"] = (ttfm, masks)
    return out


def line(label, res, ids):
    tt = np.array([res[k][0] for k in ids]) * 1e3
    tb = np.concatenate([np.asarray(res[k][1]) for k in ids] or [np.zeros(1)]) * 1e6
    return (f"{label:<26} n={len(ids):<4} TTFM p50 {np.percentile(tt, 50):7.2f} p99 {np.percentile(tt, 99):8.1f} ms | "
            f"TBM p50 {np.percentile(tb, 50):6.1f} p90 {np.percentile(tb, 90):7.1f} p99 {np.percentile(tb, 99):8.1f} "
            f"max {tb.max():9.0f} us")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data", "jsonschemabench"))
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "..", "..", "shared", "tokenizers", "llama3"))
    ap.add_argument("--per-subset", type=int, default=6)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--engines", default="structgen,structgen-any,llguidance")
    args = ap.parse_args()

    from pathlib import Path

    from structgen.bench.engines import BenchTokenizer
    from structgen.bench.maskbench import load_records

    by = collections.defaultdict(list)
    for r in load_records(Path(args.data)):
        by[r["subset"]].append(r)
    sample = [r for s in sorted(by) for r in by[s][args.offset:args.offset + args.per_subset]]
    tok = BenchTokenizer.load(args.tokenizer)
    res = {name: run_engine(name, tok, sample) for name in args.engines.split(",")}
    print(f"{len(sample)} schemas")
    for name, r in res.items():
        print(line(name, r, list(r)))
    common = sorted(set.intersection(*(set(r) for r in res.values())))
    print("on the schemas every engine compiled:")
    for name, r in res.items():
        print(line(name, r, common))
    for name, r in res.items():
        worst = sorted(r, key=lambda k: -max(r[k][1], default=0))[:3]
        print(name, "slowest masks:", ", ".join(f"{k} {max(r[k][1]) * 1e3:.1f} ms" for k in worst))


if __name__ == "__main__":
    main()
