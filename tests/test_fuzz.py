"""The fuzz suite of issue 14: every hostile input ends in a result or a named structgen error,
within its limit (``limit * 1.1 + 1`` s) and under an RSS bound, in a worker process.

- The seed corpus: every case of ``tests/data/fuzz_seeds*.json`` (``fuzz_seeds.json`` holds every
  case the issue names; other files are added by the fixes of the front ends).  A case also
  checks the outcome its ``expect`` names (see tests/fuzz_worker.py for the format).
- Hypothesis: hostile regexes, JSON Schemas, Lark and GBNF grammars and API calls
  (tests/fuzz_strategies.py), derandomized, a few dozen each, no shrinking (a hang would make
  shrinking slow): the failing case is printed as drawn.
- The harness itself: a hang, a memory bust, a crash and an internal exception are caught.

benchmarks/fuzz_campaign.py runs the same strategies at a larger scale and prints the counts.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests import fuzz_strategies as fs
from tests.fuzz_worker import FuzzRunner, load_seeds, verdict

SEEDS = load_seeds()
EXAMPLES = 20


@pytest.fixture(scope="module")
def runner():
    r = FuzzRunner()
    yield r
    r.close()


def check(runner, case):
    res = runner.run(case)
    why = verdict(case, res)
    assert why is None, f"{case.get('id', '')}: {why}\ncase: {str(case)[:600]}"
    return res


@pytest.mark.parametrize("case", SEEDS, ids=[c["id"] for c in SEEDS])
def test_seed(runner, case):
    check(runner, case)


def test_the_seed_corpus_covers_every_kind():
    kinds = {c["kind"] for c in SEEDS}
    assert kinds == {"regex", "json_schema", "gbnf", "lark", "api"}
    assert len([c for c in SEEDS if c["id"].startswith("api-")]) >= 40


def _fuzz(strategy):
    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def run(runner, case):
        case = dict(case, expect=["ok", "StructgenError"])
        check(runner, case)

    return run


test_fuzz_regex = _fuzz(fs.regexes())
test_fuzz_json_schema = _fuzz(fs.schemas())
test_fuzz_lark = _fuzz(fs.larks())
test_fuzz_gbnf = _fuzz(fs.gbnfs())
test_fuzz_api = _fuzz(fs.api_calls())


def test_the_harness_catches_what_it_should():
    """A test of the test: each failure mode is seen as one (and the worker comes back)."""
    runner = FuzzRunner(bare=True)
    cases = {
        "hang": {"kind": "api", "input": {"call": "selftest.sleep", "seconds": 30}, "options": {"limit": 0.5}},
        "memory": {"kind": "api", "input": {"call": "selftest.alloc", "mb": 1500}, "options": {"rss_mb": 1200}},
        "crash": {"kind": "api", "input": {"call": "selftest.crash"}},
        "internal": {"kind": "api", "input": {"call": "selftest.raise"}},
    }
    for what, case in cases.items():
        res = runner.run(case)
        why = verdict(case, res)
        assert why is not None, what
        assert (what in why) if what != "internal" else ("RecursionError" in why), why
    res = runner.run({"kind": "api", "input": {"call": "selftest.alloc", "mb": 300, "hold": 0.2}})
    assert res["outcome"] == "ok" and res["peak_rss"] > 300 << 20
    assert runner.restarts == 3
    runner.close()


def test_the_expected_outcome_is_checked(runner):
    wrong = {"kind": "regex", "input": "a(", "expect": "SchemaError"}
    assert "RegexError" in verdict(wrong, runner.run(wrong))
    assert "compiled" in verdict({"kind": "regex", "input": "a", "expect": "RegexError"},
                                 runner.run({"kind": "regex", "input": "a"}))
    nomatch = {"kind": "regex", "input": "a(", "expect": "RegexError", "match": "no such words"}
    assert "does not match" in verdict(nomatch, runner.run(nomatch))
