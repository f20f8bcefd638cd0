"""MaskBench runner over JSONSchemaBench-style JSONL files.

For each schema: TTFM = time to compile (``Grammar.from_json_schema`` with ``--engine``, then
``sg.compile``) plus the first mask.  Then every test instance is forced as ``json.dumps(data)`` token by token (the tokens of
``vocab.encode(text)``), timing each mask fill (TBM); an instance is accepted when every token
advances and the final state accepts.  A schema *passes* when it compiles and every valid instance
is accepted and every invalid one rejected.  Wrongly rejected valid instances are *validation
errors*, wrongly accepted invalid ones *invalidation errors*.

Without ``--tokenizer`` only byte-level acceptance on the regular DFA and its compile time are
measured.

    python -m structgen.bench.maskbench --data DIR --limit N --tokenizer tests/data/tokenizers/llama3 \
        [--engine auto|dfa|cfg] [--property-order declared|any] [--time-budget S] [--verbose]
"""
from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path

import numpy as np

from structgen.errors import StructgenError


def load_records(data: Path, limit: int | None = None, extra: bool = False) -> list:
    """Records of every ``*.jsonl`` under ``data`` (``maskbench_extra/`` too with ``extra``),
    thinned evenly to ``limit`` schemas (deterministic)."""
    files = sorted(Path(data).glob("*.jsonl"))
    if extra:
        files += sorted((Path(data) / "maskbench_extra").glob("*.jsonl"))
    recs = []
    for f in files:
        with open(f) as fh:
            recs += [json.loads(line) for line in fh if line.strip()]
    if limit is not None and limit < len(recs):
        step = len(recs) / limit
        recs = [recs[int(i * step)] for i in range(limit)]
    return recs


def run_record(rec: dict, vocab=None, *, whitespace="flexible", max_whitespace=4, time_limit=10.0,
               lenient=False, engine="auto", property_order="declared") -> dict:
    """Compile one schema and force its tests; a dict of counts and timings.

    With a vocabulary: ``Grammar.from_json_schema`` + ``sg.compile`` + first mask is the TTFM,
    and every instance is forced token by token through a fresh matcher.  Without one, only
    byte-level acceptance on the regular DFA (``engine="dfa"``) is available.
    """
    import structgen as sg

    out = {"id": f"{rec.get('subset')}/{rec.get('unique_id')}", "compiled": False, "error": None,
           "ttfm": None, "tbm": [], "valid_rejected": 0, "invalid_accepted": 0, "tests": len(rec.get("tests", [])),
           "engine": None}
    schema = json.loads(rec["json_schema"]) if isinstance(rec["json_schema"], str) else rec["json_schema"]
    t0 = time.perf_counter()
    try:
        if vocab is not None:
            g = sg.Grammar.from_json_schema(schema, engine=engine, whitespace=whitespace,
                                            max_whitespace=max_whitespace, time_limit=time_limit, lenient=lenient,
                                            property_order=property_order)
            out["engine"] = g.kind
            left = None if time_limit is None else max(0.1, time_limit - (time.perf_counter() - t0))
            cg = sg.compile(g, vocab, time_limit=left, cache=False)
            out["states"] = cg.stats.states if cg.is_regular else cg.engine.tables.n_lexer_states
            bm = sg.allocate_bitmask(1, vocab.logits_width)
            cg.matcher().fill_bitmask(bm, 0)
        else:
            from structgen.automaton.build import build_dfa
            from structgen.frontends.json_schema.regular import compile_json_schema

            report = compile_json_schema(schema, whitespace=whitespace, max_whitespace=max_whitespace,
                                         time_limit=time_limit, lenient=lenient, property_order=property_order)
            left = None if time_limit is None else max(0.1, time_limit - (time.perf_counter() - t0))
            dfa = build_dfa(report.grammar, time_limit=left)
        out["ttfm"] = time.perf_counter() - t0
    except StructgenError as e:
        out["error"] = f"{type(e).__name__}: {str(e)[:160]}"
        out["ttfm"] = time.perf_counter() - t0
        return out
    except RecursionError:
        out["error"] = "RecursionError"
        return out
    out["compiled"] = True
    for test in rec.get("tests", []):
        text = json.dumps(test["data"])
        if vocab is None:
            ok = dfa.fullmatch(text.encode("utf-8"))
        else:
            m = cg.matcher()
            ok = True
            for tok in vocab.encode(text):
                t = time.perf_counter()
                m.fill_bitmask(bm, 0)
                out["tbm"].append(time.perf_counter() - t)
                if not m.advance(int(tok)):
                    ok = False
                    break
            if ok:
                t = time.perf_counter()
                m.fill_bitmask(bm, 0)
                out["tbm"].append(time.perf_counter() - t)
                ok = m.is_accepting()
        if ok != bool(test["valid"]):
            out["invalid_accepted" if ok else "valid_rejected"] += 1
    return out


def warm_up(vocab, **options) -> None:
    """Load the JIT-compiled kernels once (Numba's on-disk cache still costs seconds on first
    use in a process), so that TTFM measures compilation of schemas, not of our code."""
    rec = {"json_schema": {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}},
                                                             "b": {"anyOf": [{"type": "integer"}, {}]}}},
           "tests": [{"valid": True, "data": {"a": ["x"], "b": {"c": [1.5, None]}}}]}
    # a closed object past the key-subset limit: under property_order="any", the key guard's
    # liveness check (its kernels and per-vocabulary tables)
    closed = {"json_schema": {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(12)},
                              "additionalProperties": False},
              "tests": [{"valid": True, "data": {"k3": 1, "k1": 2, "k0": 3}}]}
    for engine in ("dfa", "cfg"):
        for r in (rec, closed):
            run_record(r, vocab, engine=engine, whitespace=options.get("whitespace", "flexible"),
                       property_order=options.get("property_order", "declared"))


def _pct(xs, q):
    return float(np.percentile(np.asarray(xs), q)) if len(xs) else float("nan")


def summarise(results: list) -> dict:
    n = len(results)
    compiled = [r for r in results if r["compiled"]]
    passed = [r for r in compiled if r["valid_rejected"] == 0 and r["invalid_accepted"] == 0]
    ttfm = [r["ttfm"] for r in compiled]
    tbm = [x for r in compiled for x in r["tbm"]]
    errors: dict = {}
    for r in results:
        if r["error"]:
            k = r["error"].split(":")[0]
            errors[k] = errors.get(k, 0) + 1
    return {
        "schemas": n, "compiled": len(compiled), "passed": len(passed),
        "passed_pct": 100.0 * len(passed) / max(n, 1),
        "validation_errors": sum(r["valid_rejected"] for r in results),
        "invalidation_errors": sum(r["invalid_accepted"] for r in results),
        "ttfm_p50_ms": 1e3 * _pct(ttfm, 50), "ttfm_p99_ms": 1e3 * _pct(ttfm, 99),
        "ttfm_max_ms": 1e3 * max(ttfm) if ttfm else float("nan"),
        "tbm_p50_us": 1e6 * _pct(tbm, 50), "tbm_p99_us": 1e6 * _pct(tbm, 99),
        "tbm_max_us": 1e6 * max(tbm) if tbm else float("nan"), "masks": len(tbm),
        "errors": errors,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--extra", action="store_true", help="include maskbench_extra/")
    ap.add_argument("--whitespace", default="flexible", choices=["flexible", "compact"])
    ap.add_argument("--max-whitespace", type=int, default=4)
    ap.add_argument("--time-limit", type=float, default=10.0, help="per-schema compile limit (s)")
    ap.add_argument("--time-budget", type=float, default=None, help="stop after this many seconds")
    ap.add_argument("--lenient", action="store_true")
    ap.add_argument("--engine", default="auto", choices=["auto", "dfa", "cfg"])
    ap.add_argument("--property-order", default="declared", choices=["declared", "any"],
                    help="object members in declared order, or in any order (each key once)")
    ap.add_argument("--offset", type=int, default=0, help="skip this many schemas of the sample")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--json", default=None, help="write per-schema results here")
    args = ap.parse_args(argv)
    vocab = None
    if args.tokenizer:
        import structgen as sg

        vocab = sg.Vocabulary.from_tokenizer(args.tokenizer)
    recs = load_records(Path(args.data), args.limit, args.extra)[args.offset:]
    if vocab is not None:
        warm_up(vocab, engine=args.engine, whitespace=args.whitespace, property_order=args.property_order)
    # what a serving process does after start-up: move the long-lived objects (torch, numba,
    # the vocabulary) out of the collector's sight, so a full collection costs milliseconds,
    # not the 150-250 ms pauses that otherwise land on random schemas' timings
    gc.collect()
    gc.freeze()
    results = []
    t0 = time.perf_counter()
    for rec in recs:
        if args.time_budget and time.perf_counter() - t0 > args.time_budget:
            print(f"time budget reached after {len(results)} schemas")
            break
        r = run_record(rec, vocab, whitespace=args.whitespace, max_whitespace=args.max_whitespace,
                       time_limit=args.time_limit, lenient=args.lenient, engine=args.engine,
                       property_order=args.property_order)
        results.append(r)
        if args.verbose and (r["error"] or r["valid_rejected"] or r["invalid_accepted"]):
            print(r["id"], r["engine"], r["error"], r["valid_rejected"], r["invalid_accepted"], flush=True)
    s = summarise(results)
    print(json.dumps(s, indent=1))
    if args.json:
        # per schema: the slowest mask instead of every mask time
        Path(args.json).write_text(json.dumps([dict({k: v for k, v in r.items() if k != "tbm"},
                                                    tbm_max=max(r.get("tbm") or [], default=None)) for r in results]))


if __name__ == "__main__":
    main()
