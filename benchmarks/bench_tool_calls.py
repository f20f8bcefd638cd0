"""Compile time and mask latency of sg.tool_calls grammars (three small tools) on real vocabularies.

    python benchmarks/bench_tool_calls.py

Per (vocabulary, format, JSON engine): the first compile in the process after the vocabulary's
special-token view is built, and the p50 / max time of ``fill_bitmask`` along one random walk.
"""
import time

import numpy as np

import structgen as sg
from tests.helpers import load_llama31_vocab, load_vocab
from tests.test_tool_calls import TOOLS

for name, fmt in (("qwen2.5", "hermes"), ("llama31", "llama3"), ("mistral", "mistral")):
    v = load_llama31_vocab() if name == "llama31" else load_vocab(name)
    v.with_special_tokens().trie  # (built once per vocabulary, outside the timing)
    for engine in ("auto", "dfa"):
        sg.clear_caches()
        g = sg.tool_calls(TOOLS, format=fmt, engine=engine)
        t = time.perf_counter()
        cg = sg.compile(g, v)
        tc = time.perf_counter() - t
        m, bm, rng, ts = cg.matcher(), sg.allocate_bitmask(1, v.logits_width), np.random.default_rng(0), []
        eos = set(v.eos_ids.tolist())
        for _ in range(60):
            t = time.perf_counter()
            m.fill_bitmask(bm, 0)
            ts.append(time.perf_counter() - t)
            a = m.allowed_tokens()
            tok = int(a[rng.integers(a.size)])
            if tok in eos:
                break
            m.advance(tok)
        print(f"{name:8} {fmt:8} {engine:5} compile {tc * 1e3:6.0f} ms ({cg.stats.kind:7})  "
              f"mask p50 {np.median(ts) * 1e6:5.0f} us  max {max(ts) * 1e3:5.1f} ms")
