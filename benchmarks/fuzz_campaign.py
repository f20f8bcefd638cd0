"""A fuzz campaign: N random hostile cases (the strategies of tests/fuzz_strategies.py), each in
the worker of tests/fuzz_worker.py under a wall clock (limit x 1.1 + 1 s) and an RSS bound, and the
counts issue 14's closing note asks for.

    python benchmarks/fuzz_campaign.py --n 200 [--scale 2] [--seed 1] [--kinds regex,api]
                                       [--seeds] [--rss-mb 3072] [--json out.json]

Prints: cases, ok, named errors (StructgenError subclasses), other exceptions, hangs, memory
busts, crashes, peak RSS (the worker's high-water mark over all cases), and per kind; then the
first failures (other exceptions, hangs, memory, crashes) as drawn.  ``--seeds`` runs the seed
corpus (tests/data/fuzz_seeds*.json) too, counted separately, with its expectations checked.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import seed as hyp_seed  # noqa: E402

from tests import fuzz_strategies as fs  # noqa: E402
from tests.fuzz_worker import FuzzRunner, load_seeds, verdict  # noqa: E402

KINDS = {"regex": fs.regexes, "json_schema": fs.schemas, "lark": fs.larks, "gbnf": fs.gbnfs, "api": fs.api_calls}


def category(res) -> str:
    if res["outcome"] in ("hang", "memory", "crash"):
        return res["outcome"]
    if res["wall"] > res["limit"]:
        return "hang"
    if res["outcome"] == "ok":
        return "ok"
    return "named" if res["named"] else "other"


def summarize(title, rows) -> dict:
    counts = collections.Counter(cat for _, _, cat in rows)
    by_kind = collections.defaultdict(collections.Counter)
    for case, _, cat in rows:
        by_kind[case["kind"]][cat] += 1
    peak = max((r["peak_rss"] for _, r, _ in rows), default=0)
    print(f"== {title}: cases {len(rows)}, ok {counts['ok']}, named errors {counts['named']}, "
          f"other exceptions {counts['other']}, hangs {counts['hang']}, memory {counts['memory']}, "
          f"crashes {counts['crash']}, peak RSS {peak / 2**20:.0f} MB")
    for kind, c in sorted(by_kind.items()):
        print(f"   {kind:12s} " + ", ".join(f"{k} {c[k]}" for k in ("ok", "named", "other", "hang", "memory", "crash")))
    return {"cases": len(rows), **{k: counts[k] for k in ("ok", "named", "other", "hang", "memory", "crash")},
            "peak_rss_mb": round(peak / 2**20)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100, help="random cases in all (split over the kinds)")
    ap.add_argument("--scale", type=int, default=2, help="sizes, depths and limits of the strategies")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--seeds", action="store_true", help="run the seed corpus too")
    ap.add_argument("--rss-mb", type=int, default=3072)
    ap.add_argument("--json", help="write the counts here")
    a = ap.parse_args(argv)
    runner = FuzzRunner(rss_bound=a.rss_mb << 20)
    t0 = time.time()
    rows = []
    kinds = [k for k in a.kinds.split(",") if k]
    for i, kind in enumerate(kinds):
        n = a.n // len(kinds) + (1 if i < a.n % len(kinds) else 0)
        if n == 0:
            continue

        @hyp_seed(a.seed)
        @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(case=KINDS[kind](a.scale))
        def one(case):
            res = runner.run(case)
            rows.append((case, res, category(res)))

        one()
    report = {"random": summarize(f"random cases (scale {a.scale}, seed {a.seed})", rows)}
    bad = [(c, r, cat) for c, r, cat in rows if cat not in ("ok", "named")]
    if a.seeds:
        srows = []
        for case in load_seeds():
            res = runner.run(case)
            srows.append((case, res, category(res)))
            why = verdict(case, res)
            if why:
                print(f"   seed {case['id']}: FAIL {why.splitlines()[0][:200]}")
        report["seeds"] = summarize("seed corpus", srows)
        report["seeds"]["failing"] = sum(verdict(c, r) is not None for c, r, _ in srows)
        print(f"   seed cases failing their expectation: {report['seeds']['failing']}")
    for case, res, cat in bad[:15]:
        detail = res.get("error", "") + ": " + res.get("message", "")[:160] if cat == "other" else \
            f"{res['wall']:.1f} s (bound {res['limit']:.1f} s)"
        print(f"   {cat}: {case['kind']} {str(case['input'])[:120]!r} -> {detail}")
    runner.close()
    print(f"   {time.time() - t0:.0f} s, worker restarts {runner.restarts}")
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
