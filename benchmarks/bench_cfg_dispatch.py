"""Per-mask cost of the grammar engine at cached states: p50 / p90 of ``fill_bitmask`` on a
CFGMatcher (llama3 vocabulary) for a JSON Schema grammar and the shipped Lark SQL grammar.

Walks a document's tokens, computing each prefix's mask once (so every cache entry exists),
then times ``rounds`` further ``fill_bitmask`` calls at every prefix (cached states only), and
``20 * rounds`` calls of the mask kernel alone (``CFGMatcher._run``) at the final state.  p10 is
shown beside p50: on a loaded machine it is the steadier of the two.

    PYTHONPATH=. python benchmarks/bench_cfg_dispatch.py [rounds]
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np

import structgen as sg
from tests.helpers import load_vocab

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 40}, "age": {"type": "integer", "minimum": 0},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
    "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                "required": ["city"]}},
    "required": ["name", "age"]}
DOC = json.dumps({"name": "Ada Lovelace", "age": 36, "tags": ["math", "poetry", "engines"],
                  "address": {"city": "London", "zip": "W1"}}, separators=(",", ":"))
SQL = "SELECT name, age FROM people WHERE age > 30 AND city = 'London' ORDER BY name LIMIT 10"


def run(grammar, text, vocab, rounds):
    cg = sg.compile(grammar, vocab)
    m = cg.matcher()
    ids = vocab.encode(text)
    bm = sg.allocate_bitmask(1, vocab.logits_width)
    # first pass: fill the cache at every prefix
    for t in ids:
        m.fill_bitmask(bm, 0)
        assert m.advance(t), "document rejected"
    m.fill_bitmask(bm, 0)
    m.rollback(len(ids))
    times = []
    for t in ids:
        for _ in range(rounds):
            t0 = time.perf_counter_ns()
            m.fill_bitmask(bm, 0)
            times.append(time.perf_counter_ns() - t0)
        m.advance(t)
    a = np.array(times) / 1e3
    # the kernel call alone (``_run``: argument splat, dispatch, kernel) at the last state
    e = m.engine
    snap = e.cache.snap
    words = np.zeros(e.words, np.uint32)
    ks = []
    for _ in range(20 * rounds):
        t0 = time.perf_counter_ns()
        m._run(e, snap, words, False, False)
        ks.append(time.perf_counter_ns() - t0)
    k = np.array(ks) / 1e3
    return np.percentile(a, 50), np.percentile(a, 10), np.percentile(k, 50), np.percentile(k, 10), len(ids)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    vocab = load_vocab("llama3")
    from structgen.grammars import load as load_grammar

    cases = [("JSON Schema (cfg)", sg.Grammar.from_json_schema(SCHEMA, engine="cfg", time_limit=600), DOC),
             ("Lark json", sg.Grammar.from_lark(load_grammar("json")), DOC),
             ("Lark sql", sg.Grammar.from_lark(load_grammar("sql")), SQL)]
    for name, g, text in cases:
        p50, p10, k50, k10, n = run(g, text, vocab, rounds)
        print(f"{name:18s} {n:3d} prefixes x {rounds}: fill_bitmask p50 {p50:6.2f} p10 {p10:6.2f} us;"
              f"  kernel call p50 {k50:6.2f} p10 {k10:6.2f} us")


if __name__ == "__main__":
    main()
