"""Benchmark runners: MaskBench / JSONSchemaBench (:mod:`.maskbench`) and the official
JSON-Schema-Test-Suite (:mod:`.testsuite`).

Side by side with peer engines (:mod:`.engines`, :mod:`.runner`, :mod:`.report`,
:mod:`.jsonschemabench`)::

    python -m structgen.bench maskbench|jsonschemabench|testsuite --data DIR --tokenizer DIR_OR_NAME \\
        [--engines structgen,llguidance,xgrammar,outlines] [--model random|NAME] \\
        [--limit-per-subset N] [--workers N] --out DIR
    python -m structgen.bench report --out DIR [--mode maskbench]    # table + plots from the JSONL

:func:`main` is the entry point (``structgen bench ...`` calls it with the arguments after
``bench``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from ..errors import StructgenError
from .paths import find_jsonschemabench, find_suite, find_tokenizer

_DRAFT_URI = {"draft7": "http://json-schema.org/draft-07/schema#",
              "draft2020-12": "https://json-schema.org/draft/2020-12/schema"}

__all__ = ["main", "suite_tasks"]


def suite_tasks(suite=None, drafts=("draft2020-12", "draft7"), *, optional: bool = True,
                files=None) -> list[dict]:
    """One task per test case of the official suite: id ``draft/file.json#k``, subset
    ``draft/file.json``.  A draft-7 schema without ``$schema`` gets one, so that every engine
    knows the draft.  ``suite``: the suite folder (default: the checkout's copy)."""
    tasks = []
    from .testsuite import formats_of, suite_files

    suite = find_suite(suite, "suite")

    for draft in drafts:
        for rel, p in suite_files(suite, draft, optional=optional):
            if files is not None and rel not in files and p.stem not in files:
                continue
            for k, case in enumerate(json.loads(p.read_text())):
                schema = case["schema"]
                if isinstance(schema, dict) and "$schema" not in schema and draft in _DRAFT_URI:
                    schema = {"$schema": _DRAFT_URI[draft], **schema}
                tasks.append({"id": f"{rel}#{k}", "subset": rel, "schema": schema, "tests": case["tests"],
                              "description": case.get("description", ""),
                              "context": {"suite": str(suite), "formats": formats_of(p)}})
    return tasks


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="structgen bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["maskbench", "jsonschemabench", "testsuite", "report"])
    ap.add_argument("--data", default=None, help="JSONSchemaBench folder (default ../shared/data/jsonschemabench) "
                                                 "or, for testsuite, the suite folder")
    ap.add_argument("--tokenizer", default=None,
                    help="tokenizer folder or name (default: tests/data/tokenizers/llama3 of a source checkout)")
    ap.add_argument("--engines", default=None, help="comma-separated (default: structgen and every installed peer)")
    ap.add_argument("--model", default="random", help="jsonschemabench: random, smollm2, or a model name/path")
    ap.add_argument("--limit-per-subset", type=int, default=None, help="stratified sample: N schemas per subset")
    ap.add_argument("--subsets", default=None, help="comma-separated subsets (or testsuite keyword files)")
    ap.add_argument("--extra", action="store_true", help="include maskbench_extra/")
    ap.add_argument("--drafts", default="draft2020-12,draft7", help="testsuite drafts")
    ap.add_argument("--workers", type=int, default=1, help="worker processes (0 = in-process, no isolation)")
    ap.add_argument("--whitespace", choices=["flexible", "compact"], default=None,
                    help="default: flexible (maskbench, testsuite), compact (jsonschemabench)")
    ap.add_argument("--hygiene", choices=["on", "off"], default=None,
                    help="structgen's generation restrictions (integer literals, bounded digits, extra keys "
                         "last: structgen.JsonHygiene); default: on for jsonschemabench, off where test "
                         "instances are forced (maskbench, testsuite: exact semantics)")
    ap.add_argument("--compile-limit", type=float, default=10.0, help="seconds (compile + first mask)")
    ap.add_argument("--run-limit", type=float, default=60.0, help="seconds (forcing tests / generation)")
    ap.add_argument("--max-tokens", type=int, default=2048)
    ap.add_argument("--out", required=True, help="results folder (resumable: existing results are skipped)")
    ap.add_argument("--mode", dest="report_mode", default=None, help="report: which mode's results")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    return ap


def _meta(args, engines, elapsed) -> dict:
    from .engines import engine_version

    versions = {e: engine_version(e) for e in engines}
    return {"command": "python -m structgen.bench " + " ".join(sys.argv[1:]) if sys.argv else "",
            "engines": versions, "tokenizer": args.tokenizer, "model": args.model if args.mode == "jsonschemabench"
            else None, "workers": args.workers, "whitespace": args.whitespace, "hygiene": args.hygiene,
            "limits": {"compile_s": args.compile_limit, "run_s": args.run_limit, "max_tokens": args.max_tokens},
            "machine": {"platform": platform.platform(), "python": platform.python_version(),
                        "cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                        "load_average_at_end": [round(x, 2) for x in os.getloadavg()]},
            "elapsed_s": round(elapsed, 1), "date": time.strftime("%Y-%m-%d %H:%M:%S")}


def main(argv=None) -> int:
    """``structgen bench`` / ``python -m structgen.bench`` (see the module docstring)."""

    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except StructgenError as e:  # a missing data folder or tokenizer: say which argument
        print(f"structgen bench: {e}", file=sys.stderr)
        return 2


def _run(args) -> int:
    from . import report
    from .engines import installed_engines
    from .runner import Limits, RunConfig, read_results, run_tasks

    out = Path(args.out)
    if args.mode == "report":
        modes = [args.report_mode] if args.report_mode else [m for m in ("maskbench", "jsonschemabench", "testsuite")
                                                             if (out / f"{m}.jsonl").exists()]
        for m in modes:
            results = read_results(out / f"{m}.jsonl")
            meta_path = out / f"{m}_summary.json"
            meta = json.loads(meta_path.read_text()).get("meta") if meta_path.exists() else None
            s = report.write_report(m, results, out, meta=meta, plot=not args.no_plots)
            print(report.table(s))
        return 0

    args.tokenizer = str(find_tokenizer(args.tokenizer))
    engines = [e.strip() for e in args.engines.split(",")] if args.engines else installed_engines()
    subsets = [s.strip() for s in args.subsets.split(",")] if args.subsets else None
    if args.mode == "testsuite":
        tasks = suite_tasks(find_suite(args.data, "--data"), tuple(args.drafts.split(",")), files=subsets)
    else:
        from .jsonschemabench import load_records

        data = find_jsonschemabench(args.data)
        tasks = load_records(data, limit_per_subset=args.limit_per_subset, subsets=subsets, extra=args.extra)
    if args.whitespace is None:
        args.whitespace = "compact" if args.mode == "jsonschemabench" else "flexible"
    limits = Limits(compile_s=args.compile_limit, run_s=args.run_limit, max_tokens=args.max_tokens)
    if args.hygiene is None:
        args.hygiene = "on" if args.mode == "jsonschemabench" else "off"
    config = RunConfig(mode=args.mode, tokenizer=args.tokenizer, whitespace=args.whitespace, limits=limits,
                       model=args.model, hygiene=args.hygiene == "on")
    t0 = time.perf_counter()
    results = run_tasks(config, engines, tasks, out / f"{args.mode}.jsonl", workers=args.workers,
                        progress=not args.quiet)
    s = report.write_report(args.mode, results, out, engines=engines,
                            meta=_meta(args, engines, time.perf_counter() - t0), plot=not args.no_plots)
    print(report.table(s))
    return 0
