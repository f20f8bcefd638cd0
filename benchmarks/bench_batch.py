"""Batch mask filling: structgen ``sg.fill_bitmasks`` (one thread and the thread pool) beside
llguidance's parallel fill (``llguidance.torch.fill_next_token_bitmask_par`` with an
``LLExecutor``) and xgrammar's ``BatchGrammarMatcher.batch_fill_next_token_bitmask``.

For each batch size B, B matchers per engine over JSONSchemaBench schemas (row ``b`` uses schema
``b % S``, its first valid test instance as ``json.dumps`` writes it, flexible whitespace), each
advanced by a random prefix of that instance's tokens.  Then a decode-like loop: ``steps`` times,
every engine fills the whole batch (timed), then every matcher advances by its instance's next
token (not timed; a row at its instance's end stays); after the window every matcher rolls back
to its start and the window is repeated.  Repeat 0 is *cold* (every state seen for the first
time: structgen's lazily built rows and mask caches, llguidance's lexer, xgrammar's non-cached
tokens), repeats 1.. are *warm*.  Engines are interleaved step by step in the same process
(the machine is shared: ratios are what to read).  structgen's parallel rows are checked
bit-identical to its sequential ones at every step.

Only schemas every engine compiles and whose instance every engine accepts token by token are
used, so all engines sit at the same points.

    PYTHONPATH=. python benchmarks/bench_batch.py                      # B = 1,16,64,256, 12 schemas
    PYTHONPATH=. python benchmarks/bench_batch.py --batch 16,64 --schemas 8 --property-order any

Writes ``benchmarks/results/bench_batch.json`` (``--out``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

import structgen as sg
from structgen.bench.engines import BenchTokenizer, make_engine
from structgen.bench.jsonschemabench import load_records

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "jsonschemabench"
TOKENIZER = ROOT.parent / "shared" / "tokenizers" / "llama3"
ENGINES = ("structgen-seq", "structgen-par", "llguidance-par", "xgrammar-batch")


def pick_schemas(tok, records, want, engines, property_order, compile_limit, max_bytes):
    """Up to ``want`` (record id, instance tokens, {engine: compiled}) that every engine
    compiles and whose first valid instance every engine accepts token by token.  Schemas over
    ``max_bytes`` of JSON are skipped (xgrammar's compile of some large ones takes minutes)."""
    import llguidance
    import xgrammar as xgr

    sgx = make_engine("structgen-any" if property_order == "any" else "structgen", tok, compile_limit=compile_limit)
    out = []
    for rec in records:
        if len(out) >= want:
            break
        valid = [t["data"] for t in rec["tests"] if t.get("valid")]
        if not valid or len(json.dumps(rec["schema"])) > max_bytes:
            continue
        toks = tok.encode(json.dumps(valid[0]))
        if len(toks) < 4 or len(toks) > 400:
            continue
        try:
            cg = sgx.compile(rec["schema"]).cg
            lg = engines["llguidance"].compile(rec["schema"]).grammar
            xc = engines["xgrammar"].compile(rec["schema"]).cg
        except Exception:  # a refusal of any engine: not a common point
            continue
        m, lm, xm = cg.matcher(), llguidance.LLMatcher(engines["llguidance"].lltok, lg, log_level=0), \
            xgr.GrammarMatcher(xc)
        if all(m.advance(t) and lm.consume_token(t) and not lm.is_error() and xm.accept_token(t) for t in toks):
            out.append((rec["id"], toks, {"structgen": cg, "llguidance": lg, "xgrammar": xc}))
    return out


class Rows:
    """B rows: per row its schema, start offset and current offset; a matcher per engine, and
    structgen's sequential fill its own (a mask just filled at the same state would come from the
    other's memo)."""

    def __init__(self, schemas, B, steps, rng, lltok):
        import llguidance
        import xgrammar as xgr

        self.toks, self.start, self.pos = [], [], []
        self.sg, self.sg_seq, self.llg, self.xgr = [], [], [], []
        for b in range(B):
            _, toks, comp = schemas[b % len(schemas)]
            p = int(rng.integers(0, max(1, len(toks) - steps) + 1))
            m, ms = comp["structgen"].matcher(), comp["structgen"].matcher()
            lm = llguidance.LLMatcher(lltok, comp["llguidance"], log_level=0)
            xm = xgr.GrammarMatcher(comp["xgrammar"])
            for t in toks[:p]:
                assert m.advance(t) and ms.advance(t) and lm.consume_token(t) and xm.accept_token(t)
            self.toks.append(toks)
            self.start.append(p)
            self.pos.append(p)
            self.sg.append(m)
            self.sg_seq.append(ms)
            self.llg.append(lm)
            self.xgr.append(xm)

    def advance(self):
        for b, toks in enumerate(self.toks):
            p = self.pos[b]
            if p < len(toks):
                t = toks[p]
                ok = (self.sg[b].advance(t) and self.sg_seq[b].advance(t) and self.llg[b].consume_token(t)
                      and self.xgr[b].accept_token(t))
                assert ok, f"row {b}: token {p} refused"
                self.pos[b] = p + 1

    def rewind(self):
        for b in range(len(self.toks)):
            n = self.pos[b] - self.start[b]
            if n:
                self.sg[b].rollback(n)
                self.sg_seq[b].rollback(n)
                self.llg[b].rollback(n)
                self.xgr[b].rollback(n)
            self.pos[b] = self.start[b]


def run_batch(schemas, B, steps, repeats, threads, tok, lltok, rng, selected=ENGINES):
    import llguidance
    import llguidance.torch as llt
    import xgrammar as xgr

    rows = Rows(schemas, B, steps, rng, lltok)
    words = tok.words
    bm_seq = np.zeros((B, words), np.int32)
    bm_par = np.zeros((B, words), np.int32)
    bm_llg = torch.zeros((B, words), dtype=torch.int32)
    bm_xgr = torch.zeros((B, words), dtype=torch.int32)
    executor = llguidance.LLExecutor(num_threads=threads)
    batcher = xgr.BatchGrammarMatcher(max_threads=threads)
    ll_pairs = [(m, i) for i, m in enumerate(rows.llg)]

    fills = {
        "structgen-seq": lambda: sg.fill_bitmasks(rows.sg_seq, bm_seq, num_threads=1),
        "structgen-par": lambda: sg.fill_bitmasks(rows.sg, bm_par, num_threads=threads),
        "llguidance-par": lambda: llt.fill_next_token_bitmask_par(executor, ll_pairs, bm_llg),
        "xgrammar-batch": lambda: batcher.batch_fill_next_token_bitmask(rows.xgr, bm_xgr),
    }
    cold = {e: 0.0 for e in ENGINES}
    warm = {e: 0.0 for e in ENGINES}
    worst = {e: 0.0 for e in ENGINES}
    order = [e for e in ("structgen-par", "llguidance-par", "xgrammar-batch", "structgen-seq")  # par first when cold
             if e in selected]
    for rep in range(repeats):
        for step in range(steps):
            for e in order:
                t0 = time.perf_counter()
                fills[e]()
                dt = time.perf_counter() - t0
                (cold if rep == 0 else warm)[e] += dt
                worst[e] = max(worst[e], dt)
            if "structgen-seq" in order and "structgen-par" in order and not np.array_equal(bm_seq, bm_par):
                raise AssertionError(f"B={B}: parallel rows differ from sequential ones")
            order = order[1:] + order[:1] if rep else order
            rows.advance()
        rows.rewind()
    n_cold = B * steps
    n_warm = B * steps * max(repeats - 1, 0)
    res = {"B": B, "steps": steps, "repeats": repeats, "threads": threads, "engines": {}}
    for e in ENGINES:
        res["engines"][e] = {
            "cold_masks_per_s": n_cold / cold[e] if cold[e] else None,
            "warm_masks_per_s": n_warm / warm[e] if warm[e] else None,
            "worst_batch_ms": worst[e] * 1e3,
        }
    return res


def table(results) -> str:
    cols = ENGINES
    head = f"{'B':>4} {'':5} " + " ".join(f"{c:>15}" for c in cols) + f" {'sg-par/llg':>10} {'sg-par/xgr':>10}"
    lines = [head, "-" * len(head)]
    for r in results:
        for kind in ("warm", "cold"):
            v = {c: r["engines"][c][f"{kind}_masks_per_s"] for c in cols}
            cells = " ".join(f"{(v[c] or 0):>15,.0f}" for c in cols)
            ratio = lambda a, b: f"{v[a] / v[b]:>10.2f}" if v[a] and v[b] else f"{'-':>10}"
            lines.append(f"{r['B']:>4} {kind:5} {cells} {ratio('structgen-par', 'llguidance-par')} "
                         f"{ratio('structgen-par', 'xgrammar-batch')}")
    return "\n".join(lines) + "\n(masks per second; 'cold' = first visit of each state, structgen-seq cold " \
                              "is after structgen-par filled the same grammars' caches)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", default="1,16,64,256", help="comma-separated batch sizes")
    ap.add_argument("--schemas", type=int, default=12, help="how many schemas (rows cycle through them)")
    ap.add_argument("--steps", type=int, default=8, help="fills per window (a token advanced after each)")
    ap.add_argument("--repeats", type=int, default=4, help="windows (the first is cold)")
    ap.add_argument("--threads", type=int, default=None, help="threads for every engine (default: the cores)")
    ap.add_argument("--property-order", choices=("declared", "any"), default="declared")
    ap.add_argument("--max-schema-bytes", type=int, default=3000, help="skip larger schemas (compile time)")
    ap.add_argument("--subsets", default="Github_easy,Github_medium,Github_trivial,Glaiveai2K,Kubernetes,Snowplow,"
                                          "JsonSchemaStore,WashingtonPost,Github_hard",
                    help="JSONSchemaBench subsets (Github_ultra's schemas take xgrammar minutes to compile)")
    ap.add_argument("--engines", default=",".join(ENGINES), help=f"a subset of {','.join(ENGINES)}")
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--tokenizer", default=str(TOKENIZER))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_batch.json"))
    args = ap.parse_args(argv)
    threads = args.threads or sg.get_num_threads()
    t_start = time.perf_counter()
    tok = BenchTokenizer.load(args.tokenizer)
    engines = {"llguidance": make_engine("llguidance", tok), "xgrammar": make_engine("xgrammar", tok)}
    per = max(2, -(-args.schemas * 3 // 9))  # some refusals: read a few more than needed, all subsets
    records = load_records(args.data, limit_per_subset=per, subsets=set(args.subsets.split(",")))
    rng = np.random.default_rng(args.seed)
    schemas = pick_schemas(tok, records, args.schemas, engines, args.property_order, 10.0, args.max_schema_bytes)
    if not schemas:
        print("no schema compiled by every engine", file=sys.stderr)
        return 1
    print(f"{len(schemas)} schemas, llama3 (V = {tok.width}), {threads} threads, "
          f"property order {args.property_order}; setup {time.perf_counter() - t_start:.1f} s", flush=True)
    results = []
    for B in [int(x) for x in args.batch.split(",") if x.strip()]:
        results.append(run_batch(schemas, B, args.steps, args.repeats, threads, tok, engines["llguidance"].lltok,
                                 rng, selected=args.engines.split(",")))
        print(f"  B={B} done ({time.perf_counter() - t_start:.1f} s)", flush=True)
    print(table(results))
    from importlib.metadata import version

    out = {"machine": {"cpus": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)), "python": platform.python_version(),
                       "platform": platform.platform()},
           "versions": {"structgen": sg.__version__, "llguidance": version("llguidance"), "xgrammar": version("xgrammar")},
           "args": vars(args), "threads": threads, "schemas": [s[0] for s in schemas], "results": results,
           "wall_s": time.perf_counter() - t_start}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out} ({out['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
