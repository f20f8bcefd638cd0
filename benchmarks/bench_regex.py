"""Regex → TokenDFA build and mask times on a real vocabulary, beside outlines-core.

    python benchmarks/bench_regex.py [--tokenizer tests/data/tokenizers/llama3] [--repeat 3]

For each regex: structgen's time to first mask (byte DFA + index + the start
state's mask — structgen's TokenDFA is built lazily, so this is its build), its eager build (every token-reachable state's mask, the same
work outlines-core's Index does), and the mask time per step while forcing a
matching string: first visit of a state and cached visits (p50/p99).
outlines-core (if installed) builds its Index over the same token bytes in the
same process; its mask time is Guide.write_mask_into on the same steps.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

import structgen as sg
from structgen.automaton.build import build_dfa
from structgen.index import TokenDFA

WORDS_RNG = np.random.default_rng(7)
_SYL = ["ka", "to", "ri", "men", "sul", "bra", "vo", "ne", "qui", "zor", "la", "fen", "dri", "po", "shu", "wex"]
WORDS = sorted({"".join(WORDS_RNG.choice(_SYL, size=WORDS_RNG.integers(2, 4))) for _ in range(400)})[:200]

REGEXES = {
    "date": (r"\d{4}-\d{2}-\d{2}", "2024-11-30"),
    "email": (r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}", "jane.doe+news@example-mail.org"),
    "uuid": (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "123e4567-e89b-12d3-a456-426614174000"),
    "iso_datetime": (r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)",
                     "2024-11-30T05:24:38.123+01:00"),
    "ipv4": (r"((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)", "192.168.100.254"),
    "words200": ("(" + "|".join(WORDS) + ")", WORDS[137]),
    "json_string": (r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"', '"Hello, wörld! \\"quoted\\" \\u00e9 and more text here"'),
    "fixed64": (r"[a-z0-9]{64}", "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2"),
    "phone": (r"\+?1?[ -]?\(?\d{3}\)?[ -]?\d{3}-\d{4}", "+1 (555) 123-4567"),
}


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def bench_structgen(pattern, text, vocab, repeat):
    ttfm, eager = [], []
    for _ in range(repeat):
        node = sg.Grammar.from_regex(pattern).node
        t0 = time.perf_counter()
        dfa = build_dfa(node)
        tdfa = TokenDFA(dfa, vocab)
        tdfa.mask_row(tdfa.start)
        t1 = time.perf_counter()
        tdfa.csr()  # every token-reachable state
        t2 = time.perf_counter()
        ttfm.append(t1 - t0)
        eager.append(t2 - t0)
    # Mask times along a forced matching string: fresh matcher (first visits), then cached.
    ids = vocab.encode(text)
    first, cached = [], []
    tdfa = TokenDFA(build_dfa(sg.Grammar.from_regex(pattern).node), vocab)
    bm = sg.allocate_bitmask(1, vocab.logits_width)
    for sink in (first, cached):
        m = sg.TokenDFAMatcher(tdfa)
        for t in ids:
            t0 = time.perf_counter()
            m.fill_bitmask(bm, 0)
            sink.append(time.perf_counter() - t0)
            assert m.advance(t), (pattern, text)
    return dict(states=dfa.n_states, ttfm=statistics.median(ttfm), eager=statistics.median(eager),
                first_p50=pct(first, 50), p50=pct(cached, 50), p99=pct(cached, 99))


def outlines_vocab(vocab):
    import outlines_core as oc

    by_bytes: dict[bytes, list[int]] = {}
    for i in np.flatnonzero(vocab.is_normal):
        by_bytes.setdefault(vocab.token_bytes(int(i)), []).append(int(i))
    return oc.Vocabulary(int(vocab.eos_ids[0]), by_bytes)


def bench_outlines(pattern, text, vocab, ovocab, repeat):
    import outlines_core as oc

    builds = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        index = oc.Index(pattern, ovocab)
        builds.append(time.perf_counter() - t0)
    guide = oc.Guide(index)
    mask = torch.zeros((vocab.logits_width + 31) // 32, dtype=torch.int32)
    times = []
    for t in vocab.encode(text):
        t0 = time.perf_counter()
        guide.write_mask_into(mask.data_ptr(), mask.numel(), 4)
        times.append(time.perf_counter() - t0)
        guide.advance(t)
    return dict(build=statistics.median(builds), p50=pct(times, 50), p99=pct(times, 99))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--tokenizer", default=os.path.join(here, "..", "tests", "data", "tokenizers", "llama3"))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    vocab = sg.Vocabulary.from_tokenizer(args.tokenizer)
    # Warm the JIT so compile times measure work, not Numba's first-call compilation.
    bench_structgen(r"ab?", "ab", vocab, 1)
    try:
        ovocab = outlines_vocab(vocab)
    except ImportError:
        ovocab = None
    print(f"vocabulary: {args.tokenizer} ({vocab.logits_width} ids); times in ms, mask times in µs")
    head = (f"{'regex':13} {'states':>6} {'sg TTFM':>8} {'sg eager':>9} {'oc build':>9} {'x TTFM':>7} {'x eager':>7} "
            f"{'sg 1st':>7} {'sg p50':>7} {'sg p99':>7} {'oc p50':>7} {'oc p99':>7}")
    print(head)
    for name, (pattern, text) in REGEXES.items():
        s = bench_structgen(pattern, text, vocab, args.repeat)
        o = bench_outlines(pattern, text, vocab, ovocab, args.repeat) if ovocab else None
        ob = f"{o['build'] * 1e3:9.1f}" if o else f"{'-':>9}"
        ratio = (f"{o['build'] / s['ttfm']:6.0f}x {o['build'] / s['eager']:6.1f}x" if o
                 else f"{'-':>7} {'-':>7}")
        op50 = f"{o['p50'] * 1e6:7.1f}" if o else f"{'-':>7}"
        op99 = f"{o['p99'] * 1e6:7.1f}" if o else f"{'-':>7}"
        print(f"{name:13} {s['states']:6d} {s['ttfm'] * 1e3:8.2f} {s['eager'] * 1e3:9.2f} {ob} {ratio} "
              f"{s['first_p50'] * 1e6:7.0f} {s['p50'] * 1e6:7.1f} {s['p99'] * 1e6:7.1f} {op50} {op99}")


if __name__ == "__main__":
    main()
