"""structgen.bench: engine-generic maskbench / testsuite / jsonschemabench runs.

Counts are checked against numbers computed by hand from the fixtures: the accept-all stub
must turn every invalid instance into an invalidation error, the reject-all stub every valid
one into a validation error; structgen (and the installed peers, on schemas they support)
must make none, as judged by the labels (which ``jsonschema`` confirms here).
"""
from __future__ import annotations

import gc
import importlib.util
import json
import os
from pathlib import Path

import jsonschema
import pytest

from structgen.bench import main as bench_main, suite_tasks
from structgen.bench.engines import BenchTokenizer, installed_engines
from structgen.bench.jsonschemabench import check_compliance, load_records
from structgen.bench.report import summarise
from structgen.bench.runner import Limits, RunConfig, read_results, run_tasks

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = str(ROOT / "tests" / "data" / "tokenizers" / "gpt2")
SUITE = ROOT / "tests" / "data" / "json-schema-test-suite"

OBJ = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "y"]}},
       "required": ["a"], "additionalProperties": False}
ARR = {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}
STR = {"type": "string", "maxLength": 3}
# subset -> [(unique_id, schema, [(data, valid), ...])]
FIXTURE = {
    "Alpha": [("o1", OBJ, [({"a": 1}, True), ({"a": 2, "b": "y"}, True), ({"b": "x"}, False),
                           ({"a": "1"}, False), ({"a": 1, "c": 0}, False)]),
              ("o2", ARR, [([], True), ([True, False], True), ([1], False), ([True, True, True], False)])],
    "Beta": [("o3", STR, [("abc", True), ("abcd", False)]),
             ("o4", {"type": "integer"}, [])],          # no tests: passes iff it compiles
}
N_VALID = sum(v for recs in FIXTURE.values() for _, _, ts in recs for _, v in ts)          # 5
N_INVALID = sum(not v for recs in FIXTURE.values() for _, _, ts in recs for _, v in ts)    # 6


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("jsb")
    for subset, recs in FIXTURE.items():
        with open(d / f"{subset}.jsonl", "w") as fh:
            for uid, schema, tests in recs:
                for data, valid in tests:   # the labels themselves are checked by the oracle
                    assert jsonschema.Draft202012Validator(schema).is_valid(data) == valid
                fh.write(json.dumps({"unique_id": uid, "subset": subset, "json_schema": json.dumps(schema),
                                     "tests": [{"description": "", "valid": v, "data": x} for x, v in tests]}) + "\n")
    return d


@pytest.fixture(scope="module")
def tok():
    return BenchTokenizer.load(TOKENIZER)


def _tokens(doc, tok):
    return len(tok.encode(json.dumps(doc)))


def test_fixture_counts_by_hand():
    assert (N_VALID, N_INVALID) == (5, 6)


def test_load_records_stratified_and_interleaved(data_dir):
    tasks = load_records(data_dir)
    assert [t["id"] for t in tasks] == ["Alpha/o1", "Beta/o3", "Alpha/o2", "Beta/o4"]
    one = load_records(data_dir, limit_per_subset=1)
    assert [t["id"] for t in one] == ["Alpha/o1", "Beta/o3"]
    assert one[0]["schema"] == OBJ


def test_maskbench_stubs_and_structgen(data_dir, tmp_path, tok):
    tasks = load_records(data_dir)
    cfg = RunConfig(mode="maskbench", tokenizer=TOKENIZER)
    res = run_tasks(cfg, ["accept-all", "reject-all", "structgen"], tasks, tmp_path / "maskbench.jsonl",
                    workers=0, progress=False)
    s = summarise("maskbench", res)["overall"]
    acc, rej, sg = s["accept-all"], s["reject-all"], s["structgen"]
    assert acc["invalidation_errors"] == N_INVALID and acc["validation_errors"] == 0
    assert rej["validation_errors"] == N_VALID and rej["invalidation_errors"] == 0
    # passed: accept-all only where no invalid test (o4); reject-all where no valid test (o4)
    assert (acc["compiled"], acc["passed"]) == (4, 1)
    assert (rej["compiled"], rej["passed"]) == (4, 1)
    assert sg["validation_errors"] == 0 and sg["invalidation_errors"] == 0 and sg["inconsistent"] == 0
    assert (sg["compiled"], sg["passed"]) == (4, 4)
    # masks by hand: accept-all times len(tokens)+1 masks per instance, reject-all one;
    # the very first mask of each schema is in its TTFM instead
    docs = [(x, v) for recs in FIXTURE.values() for _, _, ts in recs for x, v in ts]
    with_tests = sum(1 for recs in FIXTURE.values() for _, _, ts in recs if ts)
    assert acc["masks"] == sum(_tokens(x, tok) + 1 for x, _ in docs) - with_tests
    assert rej["masks"] == len(docs) - with_tests
    assert len(acc["ttfm_ms"]) == 5 and acc["ttfm_ms"]["p50"] is not None
    if os.path.exists("/proc/self/clear_refs"):  # Linux: the peak RSS of each compile is recorded
        assert sg["compile_rss_mb"]["max"] is not None and sg["compile_rss_mb"]["max"] >= 0
        assert sg["peak_rss_mb"]["max"] > 10  # MB: a Python process with numpy and structgen loaded
        assert all(r["peak_rss_mb"] >= r["compile_rss_mb"] for r in res if r.get("peak_rss_mb") is not None)
    per_subset = summarise("maskbench", res)["by_subset"]
    assert per_subset["Beta"]["accept-all"]["invalidation_errors"] == 1
    assert per_subset["Alpha"]["reject-all"]["validation_errors"] == 4


def test_structgen_any_order_engine(tmp_path):
    """``structgen-any`` compiles with property_order="any": keys out of declared order pass,
    a repeated key does not; plain ``structgen`` keeps declared order."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
              "required": ["a"]}
    tests = [({"b": "x", "a": 1}, True), ({"a": 1, "b": "x"}, True)]
    tasks = [{"id": "S/o1", "subset": "S", "schema": schema,
              "tests": [{"valid": v, "data": x} for x, v in tests]}]
    cfg = RunConfig(mode="maskbench", tokenizer=TOKENIZER)
    res = run_tasks(cfg, ["structgen", "structgen-any"], tasks, tmp_path / "m.jsonl", workers=0, progress=False)
    s = summarise("maskbench", res)["overall"]
    assert s["structgen-any"]["passed"] == 1 and s["structgen-any"]["validation_errors"] == 0
    assert s["structgen"]["validation_errors"] == 1  # {"b": .., "a": ..} is out of declared order
    # the heap frozen once the engines were up (as a server does) is given back to the collector
    assert gc.get_freeze_count() == 0


def test_resume_skips_done(data_dir, tmp_path):
    tasks = load_records(data_dir)
    cfg = RunConfig(mode="maskbench", tokenizer=TOKENIZER)
    out = tmp_path / "m.jsonl"
    run_tasks(cfg, ["accept-all"], tasks[:2], out, workers=0, progress=False)
    assert len(read_results(out)) == 2
    with open(out, "a") as fh:
        fh.write('{"engine": "accept-all", "id": "Alpha/o2", "cut')   # an interrupted write
    res = run_tasks(cfg, ["accept-all"], tasks, out, workers=0, progress=False)
    assert len(res) == 4 and sorted(r["id"] for r in res) == sorted(t["id"] for t in tasks)


def test_worker_isolation_hang_and_crash(data_dir, tmp_path):
    """A hang costs its schema (killed at the compile limit), a crash too; the pool goes on."""
    tasks = load_records(data_dir, limit_per_subset=1)
    cfg = RunConfig(mode="maskbench", tokenizer=TOKENIZER, limits=Limits(compile_s=1.0, grace_s=0.5))
    res = run_tasks(cfg, ["hang", "crash", "accept-all"], tasks, tmp_path / "iso.jsonl", workers=1, progress=False)
    by = {(r["engine"], r["id"]): r for r in res}
    assert len(by) == 6
    for t in tasks:
        assert by[("hang", t["id"])]["status"] == "compile_timeout"
        assert by[("crash", t["id"])]["status"] == "crash"
        assert by[("accept-all", t["id"])]["status"] == "ok"
    assert by[("accept-all", "Alpha/o1")]["invalid_accepted"] == 3


@pytest.mark.parametrize("engine", [e for e in ("llguidance", "xgrammar", "outlines") if e in installed_engines()])
def test_peer_adapters_exact_on_simple_schemas(engine, data_dir, tmp_path):
    tasks = [t for t in load_records(data_dir) if t["id"] in ("Alpha/o1", "Beta/o3")]
    cfg = RunConfig(mode="maskbench", tokenizer=TOKENIZER)
    res = run_tasks(cfg, [engine], tasks, tmp_path / "p.jsonl", workers=0, progress=False)
    s = summarise("maskbench", res)["overall"][engine]
    assert (s["compiled"], s["passed"], s["validation_errors"], s["invalidation_errors"], s["inconsistent"]) == \
        (2, 2, 0, 0, 0)


def test_testsuite_mode_counts(tmp_path):
    files = ["draft2020-12/const.json", "draft2020-12/maxLength.json"]
    tasks = suite_tasks(SUITE, ("draft2020-12",), optional=False, files=files)
    n_valid = sum(t["valid"] for task in tasks for t in task["tests"])
    n_all = sum(len(task["tests"]) for task in tasks)
    cfg = RunConfig(mode="testsuite", tokenizer=TOKENIZER)
    res = run_tasks(cfg, ["accept-all", "reject-all", "structgen"], tasks, tmp_path / "t.jsonl", workers=0,
                    progress=False)
    summ = summarise("testsuite", res)
    acc, rej = summ["overall"]["accept-all"], summ["overall"]["reject-all"]
    assert (acc["tests"], acc["passed"], acc["invalid_accepted"]) == (n_all, n_valid, n_all - n_valid)
    assert (rej["tests"], rej["passed"], rej["valid_rejected"]) == (n_all, n_all - n_valid, n_valid)
    assert set(summ["by_subset"]) == set(files)
    sg = summ["overall"]["structgen"]
    assert sg["invalid_accepted"] == 0   # the project's invariant; accuracy may be below 1
    ml = summ["by_subset"]["draft2020-12/maxLength.json"]["structgen"]
    assert ml["accuracy"] == 1.0


def test_testsuite_context_remote_refs_format_annotation_and_empty_schemas(tmp_path):
    """The side-by-side runner gives structgen what the suite's own runner does: its remotes,
    format annotation on the required format.json, and empty schemas as matchers taking nothing."""
    from structgen.bench.testsuite import formats_of, run_file

    files = ["draft2020-12/refRemote.json", "draft2020-12/format.json", "draft2020-12/not.json"]
    tasks = suite_tasks(SUITE, ("draft2020-12",), optional=False, files=files)
    assert {t["context"]["formats"] for t in tasks if t["subset"].endswith("format.json")} == {"annotate"}
    assert formats_of(SUITE / "draft2020-12" / "optional" / "format" / "format.json") == "assert"
    cfg = RunConfig(mode="testsuite", tokenizer=TOKENIZER)
    res = run_tasks(cfg, ["structgen"], tasks, tmp_path / "t.jsonl", workers=0, progress=False)
    by = summarise("testsuite", res)["by_subset"]
    for rel in files:
        own = run_file(SUITE / rel, "draft2020-12", modes=("flexible",))
        assert by[rel]["structgen"]["passed"] == own["passed"], rel
        assert by[rel]["structgen"]["invalid_accepted"] == 0
    assert by["draft2020-12/refRemote.json"]["structgen"]["accuracy"] == 1.0


def test_jsonschemabench_random_model(data_dir, tmp_path, capsys):
    out = tmp_path / "gen"
    rc = bench_main(["jsonschemabench", "--data", str(data_dir), "--tokenizer", TOKENIZER, "--engines",
                     "structgen,reject-all,accept-all", "--model", "random", "--workers", "0", "--out", str(out),
                     "--quiet", "--max-tokens", "256"])
    assert rc == 0
    res = read_results(out / "jsonschemabench.jsonl")
    assert len(res) == 12
    for r in res:   # the recorded verdict is the oracle's
        if r.get("finish") == "eos":
            assert r["compliant"] == check_compliance(r["text"], next(
                t["schema"] for t in load_records(data_dir) if t["id"] == r["id"]))[0]
    s = json.loads((out / "jsonschemabench_summary.json").read_text())["overall"]
    assert s["structgen"]["declared"] == 4 and s["structgen"]["compliant"] == 4
    assert s["structgen"]["compliance"] == 1.0
    assert s["reject-all"]["declared"] == 4 and s["reject-all"]["compliant"] == 0   # empty mask: dead end
    assert s["accept-all"]["compliance"] < 1.0        # random bytes: some outputs are not even JSON
    assert s["structgen"]["gct_ms"]["p50"] is not None and s["structgen"]["ttft_ms"]["p50"] is not None
    assert "declared cov." in capsys.readouterr().out
    if importlib.util.find_spec("matplotlib") is not None:
        assert (out / "jsonschemabench_coverage_by_subset.png").stat().st_size > 0


def test_report_regenerates_from_jsonl(data_dir, tmp_path, capsys):
    out = tmp_path / "mb"
    assert bench_main(["maskbench", "--data", str(data_dir), "--tokenizer", TOKENIZER, "--engines", "accept-all",
                       "--workers", "0", "--out", str(out), "--quiet", "--no-plots"]) == 0
    capsys.readouterr()
    assert bench_main(["report", "--out", str(out), "--no-plots"]) == 0
    text = capsys.readouterr().out
    assert "| **all** | accept-all | 4 | 4 | 0 / 0 / 0 | 1 |" in text
    s = json.loads((out / "maskbench_summary.json").read_text())
    assert s["overall"]["accept-all"]["invalidation_errors"] == N_INVALID
    assert s["meta"]["engines"] == {"accept-all": "-"}
