"""The official JSON-Schema-Test-Suite, ratcheted against tests/data/json_schema_suite_baseline.json.

Every file's ``passed`` count may only go up and ``invalid_accepted`` must stay 0.  By default a
quick subset of keyword files runs; ``STRUCTGEN_FULL_SUITE=1`` runs all of them (several minutes).
Regenerate the baseline with
``python -m structgen.bench.testsuite --write-baseline tests/data/json_schema_suite_baseline.json``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from structgen.bench.testsuite import run_suite

BASELINE = Path(__file__).resolve().parent / "data" / "json_schema_suite_baseline.json"
QUICK = [
    "draft2020-12/additionalProperties.json", "draft2020-12/allOf.json", "draft2020-12/anyOf.json",
    "draft2020-12/const.json", "draft2020-12/enum.json", "draft2020-12/items.json",
    "draft2020-12/maxLength.json", "draft2020-12/minimum.json", "draft2020-12/multipleOf.json",
    "draft2020-12/oneOf.json", "draft2020-12/pattern.json", "draft2020-12/properties.json",
    "draft2020-12/required.json", "draft2020-12/type.json", "draft2020-12/ref.json",
    "draft7/items.json", "draft7/dependencies.json", "draft2020-12/optional/format/date.json",
    "draft2020-12/optional/format/ipv6.json", "draft2020-12/unevaluatedItems.json",
    "draft2020-12/refRemote.json", "draft2020-12/dynamicRef.json",
]


def test_suite_ratchet():
    baseline = json.loads(BASELINE.read_text())
    files = None if os.environ.get("STRUCTGEN_FULL_SUITE") else QUICK
    results = run_suite(files=files)
    assert results, "no suite files found"
    problems = []
    for f, r in results.items():
        b = baseline.get(f)
        if r["invalid_accepted"]:
            problems.append(f"{f}: {r['invalid_accepted']} invalid instances accepted: {r['failures'][:3]}")
        if b is not None and r["passed"] < b["passed"]:
            problems.append(f"{f}: passed {r['passed']} < baseline {b['passed']}: {r['failures'][:3]}")
    assert not problems, "\n".join(problems)
