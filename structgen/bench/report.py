"""Summaries of benchmark results: a terminal table, a JSON file and PNG plots.

Everything here reads the result records of :mod:`.runner` (one per engine and schema), so a
report can be regenerated from ``OUT/<mode>.jsonl`` alone (``python -m structgen.bench report
--out OUT``).  Counting rules:

- a schema is *compiled* when its status is ``ok`` or ``run_timeout`` (it compiled in time but
  forcing its instances did not finish), and *passed* when its status is ``ok`` with no
  validation error (valid instance rejected), no invalidation error (invalid instance accepted)
  and no mask/advance inconsistency;
- TTFM percentiles are over compiled schemas; TBM percentiles over every timed mask;
- testsuite accuracy = tests answered correctly / tests, a test of a schema that did not
  compile counting as wrong;
- jsonschemabench: see :mod:`.jsonschemabench`.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

PCTS = (50, 90, 99, 99.9)


def _pct(xs, q):
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q)) if len(xs) else None


def _percentiles(xs, unit_scale=1.0) -> dict:
    d = {f"p{q:g}": (None if not len(xs) else round(_pct(xs, q) * unit_scale, 4)) for q in PCTS}
    d["max"] = round(float(np.max(xs)) * unit_scale, 4) if len(xs) else None
    return d


def _group(results, key):
    out: dict = {}
    for r in results:
        out.setdefault(key(r), []).append(r)
    return out


PREFERRED = ("structgen", "structgen-any", "llguidance", "xgrammar", "outlines")


def _engines_in_order(results, engines=None):
    seen = list(dict.fromkeys(r["engine"] for r in results))
    engines = engines or [e for e in PREFERRED if e in seen]
    if engines:
        return [e for e in engines if e in seen] + [e for e in seen if e not in engines]
    return seen


# ----------------------------------------------------------------------------- maskbench
def maskbench_stats(rs: list[dict]) -> dict:
    n = len(rs)
    ok = [r for r in rs if r["status"] in ("ok", "run_timeout") and r.get("ttfm_ms") is not None]
    passed = [r for r in ok if r["status"] == "ok" and not (r.get("valid_rejected") or r.get("invalid_accepted") or r.get("inconsistent"))]
    statuses: dict = {}
    for r in rs:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    tbm = [x for r in ok for x in r.get("tbm_us", [])]
    return {
        "schemas": n, "compiled": len(ok), "passed": len(passed),
        "passed_pct": round(100.0 * len(passed) / n, 2) if n else None,
        "validation_errors": sum(r.get("valid_rejected", 0) for r in rs),
        "invalidation_errors": sum(r.get("invalid_accepted", 0) for r in rs),
        "inconsistent": sum(r.get("inconsistent", 0) for r in rs),
        "instances": sum(r.get("valid", 0) + r.get("invalid", 0) for r in rs),
        "status": statuses,
        "ttfm_ms": _percentiles([r["ttfm_ms"] for r in ok if r.get("ttfm_ms") is not None]),
        "tbm_us": _percentiles(tbm), "masks": len(tbm),
        # RSS growth during compile + first mask (MB), and the worker's peak RSS then
        "compile_rss_mb": _percentiles([r["compile_rss_mb"] for r in ok if r.get("compile_rss_mb") is not None]),
        "peak_rss_mb": _percentiles([r["peak_rss_mb"] for r in ok if r.get("peak_rss_mb") is not None]),
    }


def summarise(mode: str, results: list[dict], engines=None) -> dict:
    """``{"overall": {engine: stats}, "by_subset": {subset: {engine: stats}}}`` for a mode."""
    stats = {"maskbench": maskbench_stats, "testsuite": testsuite_stats,
             "jsonschemabench": jsonschemabench_stats}[mode]
    order = _engines_in_order(results, engines)
    by_engine = _group(results, lambda r: r["engine"])
    out = {"mode": mode, "engines": order, "overall": {e: stats(by_engine[e]) for e in order}, "by_subset": {}}
    for subset, rs in sorted(_group(results, lambda r: r.get("subset") or "-").items()):
        be = _group(rs, lambda r: r["engine"])
        out["by_subset"][subset] = {e: stats(be[e]) for e in order if e in be}
    return out


# ----------------------------------------------------------------------------- testsuite
def testsuite_stats(rs: list[dict]) -> dict:
    tests = passed = compiled = vr = ia = 0
    for r in rs:
        n = r.get("tests", 0)
        tests += n
        if r["status"] == "ok":
            compiled += 1
            wrong = r.get("valid_rejected", 0) + r.get("invalid_accepted", 0)
            passed += n - wrong
            vr += r.get("valid_rejected", 0)
            ia += r.get("invalid_accepted", 0)
    return {"cases": len(rs), "compiled": compiled, "tests": tests, "passed": passed,
            "accuracy": round(passed / tests, 4) if tests else None, "valid_rejected": vr, "invalid_accepted": ia}


# ----------------------------------------------------------------------------- jsonschemabench
def jsonschemabench_stats(rs: list[dict]) -> dict:
    n = len(rs)
    declared = [r for r in rs if r.get("declared")]
    compliant = [r for r in rs if r.get("compliant")]
    finished = [r for r in declared if r.get("finish") == "eos"]
    statuses: dict = {}
    for r in rs:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    return {
        "schemas": n, "declared": len(declared), "compliant": len(compliant),
        "declared_coverage": round(len(declared) / n, 4) if n else None,
        "empirical_coverage": round(len(compliant) / n, 4) if n else None,
        "compliance": round(len(compliant) / len(declared), 4) if declared else None,
        "finished": len(finished),
        "compliance_at_eos": round(sum(1 for r in finished if r.get("compliant")) / len(finished), 4)
        if finished else None,
        "status": statuses,
        "gct_ms": _percentiles([r["gct_ms"] for r in declared if r.get("gct_ms") is not None]),
        "ttft_ms": _percentiles([r["ttft_ms"] for r in declared if r.get("ttft_ms") is not None]),
        "tpot_ms": _percentiles([r["tpot_ms"] for r in declared if r.get("tpot_ms") is not None]),
        "tokens": int(sum(r.get("tokens", 0) for r in rs)),
    }


# ----------------------------------------------------------------------------- table
def _f(x, nd=2):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{nd}f}" if abs(x) < 1e5 else f"{x:.3g}"
    return str(x)


def table(summary: dict, per_subset: bool = True) -> str:
    """A Markdown table (readable on a terminal too)."""
    mode = summary["mode"]
    lines = []
    if mode == "maskbench":
        head = ("| subset | engine | schemas | compiled | refused / timeout / crash | passed | passed % | valid rej. | "
                "invalid acc. | TTFM p50 / p90 / p99 / p99.9 / max (ms) | TBM p50 / p90 / p99 / p99.9 / max (µs) | "
                "compile RSS p50 / p99 / max (MB) | peak RSS max (MB) |")

        def row(sub, e, s):
            t, b, st = s["ttfm_ms"], s["tbm_us"], s["status"]
            ttfm = " / ".join(_f(t[k]) for k in ("p50", "p90", "p99", "p99.9", "max"))
            tbm = " / ".join(_f(b[k], 1) for k in ("p50", "p90", "p99", "p99.9", "max"))
            fails = (f"{st.get('refused', 0) + st.get('error', 0)} / "
                     f"{st.get('compile_timeout', 0) + st.get('run_timeout', 0) + st.get('load_timeout', 0)} / "
                     f"{st.get('crash', 0) + st.get('load_error', 0)}")
            mem, peak = s.get("compile_rss_mb") or {}, s.get("peak_rss_mb") or {}
            rss = " / ".join(_f(mem.get(k), 1) for k in ("p50", "p99", "max"))
            return (f"| {sub} | {e} | {s['schemas']} | {s['compiled']} | {fails} | {s['passed']} | "
                    f"{_f(s['passed_pct'], 1)} | {s['validation_errors']} | {s['invalidation_errors']} | {ttfm} | {tbm} | "
                    f"{rss} | {_f(peak.get('max'), 1)} |")
    elif mode == "testsuite":
        head = "| keyword file | engine | cases | compiled | tests | passed | accuracy | valid rej. | invalid acc. |"

        def row(sub, e, s):
            return (f"| {sub} | {e} | {s['cases']} | {s['compiled']} | {s['tests']} | {s['passed']} | "
                    f"{_f(s['accuracy'], 3)} | {s['valid_rejected']} | {s['invalid_accepted']} |")
    else:
        head = ("| subset | engine | schemas | declared cov. | empirical cov. | compliance | ended (EOS) | "
                "compliant at EOS | GCT p50 (ms) | TTFT p50 (ms) | TPOT p50 (ms) |")

        def row(sub, e, s):
            return (f"| {sub} | {e} | {s['schemas']} | {_f(s['declared_coverage'], 3)} | "
                    f"{_f(s['empirical_coverage'], 3)} | {_f(s['compliance'], 3)} | {s['finished']} | "
                    f"{_f(s['compliance_at_eos'], 3)} | {_f(s['gct_ms']['p50'])} | "
                    f"{_f(s['ttft_ms']['p50'])} | {_f(s['tpot_ms']['p50'], 3)} |")
    lines.append(head)
    lines.append("|" + "---|" * (head.count("|") - 1))
    if per_subset:
        for sub, per in summary["by_subset"].items():
            for e, s in per.items():
                lines.append(row(sub, e, s))
    for e, s in summary["overall"].items():
        lines.append(row("**all**", e, s))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- plots
def plots(mode: str, results: list[dict], summary: dict, out_dir: Path) -> list[Path]:
    """PNG files: maskbench TTFM and TBM distributions (empirical CDFs, log x) and passed %
    per subset; jsonschemabench coverage per subset; testsuite accuracy per engine."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    engines = summary["engines"]
    written = []

    def cdf(ax, values, label):
        v = np.sort(np.asarray(values, dtype=np.float64))
        v = v[v > 0]
        if v.size:
            ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=f"{label} (n={v.size})")

    def save(fig, name):
        p = out_dir / name
        fig.tight_layout()
        fig.savefig(p, dpi=110)
        plt.close(fig)
        written.append(p)

    if mode == "maskbench":
        for key, unit, name, title in (("ttfm_ms", "ms", f"{mode}_ttfm.png", "Time to first mask (compiled schemas)"),
                                       ("tbm_us", "µs", f"{mode}_tbm.png", "Time between masks (every mask)")):
            fig, ax = plt.subplots(figsize=(7, 4.2))
            for e in engines:
                rs = [r for r in results if r["engine"] == e and r["status"] == "ok"]
                vals = [x for r in rs for x in r.get(key, [])] if key == "tbm_us" else \
                    [r[key] for r in rs if r.get(key) is not None]
                cdf(ax, vals, e)
            ax.set_xscale("log")
            ax.set_xlabel(unit)
            ax.set_ylabel("fraction ≤ x")
            ax.set_title(title)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
            save(fig, name)
        _bars(plt, summary, "passed_pct", "schemas passed (%)", f"{mode}_passed_by_subset.png", save, scale=1.0)
    elif mode == "jsonschemabench":
        _bars(plt, summary, "empirical_coverage", "empirical coverage (%)", f"{mode}_coverage_by_subset.png",
              save, scale=100.0)
        _bars(plt, summary, "declared_coverage", "declared coverage (%)", f"{mode}_declared_by_subset.png",
              save, scale=100.0)
    else:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        vals = [100 * (summary["overall"][e]["accuracy"] or 0) for e in engines]
        ax.bar(engines, vals, color=[f"C{i}" for i in range(len(engines))])
        ax.set_ylabel("tests answered correctly (%)")
        ax.set_title("JSON-Schema-Test-Suite")
        save(fig, f"{mode}_accuracy.png")
    return written


def _bars(plt, summary, key, ylabel, name, save, scale):
    subsets = list(summary["by_subset"])
    engines = summary["engines"]
    fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(subsets) + 2), 4.2))
    width = 0.8 / max(1, len(engines))
    x = np.arange(len(subsets))
    for i, e in enumerate(engines):
        vals = [scale * (summary["by_subset"][s].get(e, {}).get(key) or 0) for s in subsets]
        ax.bar(x + i * width - 0.4 + width / 2, vals, width, label=e)
    ax.set_xticks(x)
    ax.set_xticklabels(subsets, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 118)
    ax.legend(fontsize=8, ncol=min(4, len(engines)), loc="upper center")
    ax.grid(True, axis="y", alpha=0.3)
    save(fig, name)


def write_report(mode: str, results: list[dict], out_dir: Path, *, engines=None, meta: dict | None = None,
                 plot: bool = True) -> dict:
    """Summary JSON (``OUT/<mode>_summary.json``), Markdown table (``OUT/<mode>_table.md``) and
    plots; returns the summary."""
    out_dir = Path(out_dir)
    summary = summarise(mode, results, engines)
    if meta:
        summary["meta"] = meta
    (out_dir / f"{mode}_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out_dir / f"{mode}_table.md").write_text(table(summary) + "\n")
    if plot and results:
        try:
            summary["plots"] = [p.name for p in plots(mode, results, summary, out_dir)]
        except ImportError:
            summary["plots"] = []   # matplotlib missing: pip install structgen[bench]
    return summary
