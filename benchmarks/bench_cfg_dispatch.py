"""Per-mask cost of the grammar engine at cached states: p50 / p90 of ``fill_bitmask`` on a
CFGMatcher (llama3 vocabulary) for a JSON Schema grammar and the shipped Lark SQL grammar.

Walks a document's tokens, computing each prefix's mask once (so every cache entry exists),
then times ``rounds`` further ``fill_bitmask`` calls at every prefix (cached states only).

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
                  "address": {"city": "London", "zip": "W1"}})
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
    return np.percentile(a, 50), np.percentile(a, 90), len(ids)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    vocab = load_vocab("llama3")
    from structgen.grammars import load as load_grammar

    cases = [("JSON Schema (cfg)", sg.Grammar.from_json_schema(SCHEMA, engine="cfg"), DOC),
             ("Lark json", sg.Grammar.from_lark(load_grammar("json")), DOC),
             ("Lark sql", sg.Grammar.from_lark(load_grammar("sql")), SQL)]
    for name, g, text in cases:
        p50, p90, n = run(g, text, vocab, rounds)
        print(f"{name:20s} {n:3d} prefixes x {rounds}: fill_bitmask p50 {p50:7.2f} us  p90 {p90:7.2f} us")


if __name__ == "__main__":
    main()
