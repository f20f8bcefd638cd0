"""Grammar engine benchmark: compile time and per-token mask time (p50/p99/max) for the
shipped JSON and SQL grammars on the llama3 vocabulary, with llguidance and xgrammar
side by side when installed (same Lark text, same token sequences).

    python benchmarks/bench_grammar.py [--tokenizer llama3] [--grammars json,sql,c_subset] [--repeat 3]

structgen's mask caches are per compiled grammar, so the first pass over the
sentences ("cold") includes filling them; later passes are reported as "warm".  A Lark
grammar's cache is also filled ahead of use for up to 50 ms in all
(``structgen.cfg.engine.PREFILL_SECONDS``): the first 15 ms inside compile (counted in its
time), the rest, if any, by a background thread that the first cold pass races; a second cold
pass (on a second compile) starts once that thread has finished.
Compile time is the first compile in the process (Lark loading and lexer DFAs come
from the disk cache when it holds them: run with ``STRUCTGEN_CACHE_DIR=`` to
disable it, or point it at an empty folder for a cold start) and a second compile
of the same text in the same process.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

SENTENCES = {
    "json": [
        '{"name": "Alice Smith", "age": 31, "email": "alice@example.com", "tags": ["admin", "dev"], '
        '"address": {"street": "1 Main St", "city": "Springfield", "zip": "12345"}, "active": true, '
        '"score": 97.5, "manager": null}',
        '[{"id": 1, "values": [1.5, -2, 3e10], "label": "first\\nline"}, {"id": 2, "values": [], '
        '"label": "caf\\u00e9", "meta": {"k": [true, false, null]}}]',
        '{"query": "SELECT * FROM t", "results": [{"x": 0, "y": 0.25}, {"x": 1, "y": 0.5}], "count": 2}',
    ],
    "sql": [
        "SELECT a.name, COUNT(*) AS n FROM users AS a JOIN orders o ON a.id = o.user_id "
        "WHERE a.age >= 18 AND o.total > 100.5 GROUP BY a.name ORDER BY n DESC LIMIT 10;",
        "SELECT DISTINCT city, AVG(price) FROM listings WHERE city IN ('Paris', 'Rome') "
        "AND price BETWEEN 10 AND 500 GROUP BY city HAVING AVG(price) > 50 ORDER BY city;",
        "SELECT id, title FROM books WHERE author LIKE 'A%' OR year IS NOT NULL LIMIT 5",
    ],
    "c_subset": [
        "int add(int a, int b) {\n    return a + b;\n}",
        "int main(int argc, char **argv) {\n    // count the arguments\n    int total = 0;\n"
        "    for (i = 0; i < argc; i++) {\n        if (argv[i][0] == '-') continue;\n"
        "        total += add(total, i * 2);\n    }\n    while (total > 100) total = total / 2;\n"
        "    return total;\n}",
        "float mean(float *xs, int n) {\n    float s = 0.0;\n    int i = 0;\n"
        "    while (i < n) { s += xs[i]; i++; }\n    if (n == 0) { return 0.0; } else { return s / n; }\n}",
    ],
}


def pct(xs):
    a = np.asarray(xs) * 1e6
    return f"p50 {np.percentile(a, 50):7.1f} us  p99 {np.percentile(a, 99):8.1f} us  max {a.max():8.1f} us"


def bench_structgen(text, vocab, seqs, repeat):
    import structgen as sg

    def one_pass(m, check=True):
        times = []
        for ids in seqs:
            m.reset()
            for t in ids:
                t0 = time.perf_counter()
                w = m.mask_words()
                times.append(time.perf_counter() - t0)
                if check:
                    assert (w[t >> 5] >> (t & 31)) & 1, "structgen masked a token of the sentence"
                assert m.advance(t)
            assert m.is_accepting()
        return times

    t0 = time.perf_counter()
    cg = sg.compile(sg.Grammar.from_lark(text), vocab, cache=False)
    compile_s = time.perf_counter() - t0
    background = cg.engine.prefill_thread is not None
    m = cg.matcher()
    t0 = time.perf_counter()
    m.mask_words()
    ttfm = time.perf_counter() - t0
    passes = [one_pass(m) for _ in range(repeat)]  # the first races the background prefill
    t0 = time.perf_counter()
    again = sg.compile(sg.Grammar.from_lark(text), vocab, cache=False)
    recompile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    if again.engine.prefill_thread is not None:
        again.engine.prefill_thread.join()
    prefill_s = time.perf_counter() - t0
    after = one_pass(again.matcher(), check=False)
    return compile_s, recompile_s, ttfm, passes, (background, prefill_s, after)


def bench_llguidance(text, tok, seqs, repeat):
    import llguidance
    import llguidance.hf
    import llguidance.numpy as lln

    lltok = llguidance.hf.from_tokenizer(tok)
    t0 = time.perf_counter()
    grammar = llguidance.LLMatcher.grammar_from_lark(text)
    m = llguidance.LLMatcher(lltok, grammar)
    compile_s = time.perf_counter() - t0
    if m.is_error():
        raise RuntimeError(m.get_error())
    bm = lln.allocate_token_bitmask(1, lltok.vocab_size)
    passes = []
    for _ in range(repeat):
        times = []
        for ids in seqs:
            m.reset()
            for t in ids:
                t0 = time.perf_counter()
                lln.fill_next_token_bitmask(m, bm, 0)
                times.append(time.perf_counter() - t0)
                if not m.consume_token(t):
                    raise RuntimeError(f"llguidance rejected a token: {m.get_error()}")
        passes.append(times)
    return compile_s, passes


def bench_xgrammar(text, tok, seqs, repeat, width):
    import torch
    import xgrammar as xgr

    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=width)
    compiler = xgr.GrammarCompiler(info, cache_enabled=False)
    t0 = time.perf_counter()
    cg = compiler.compile_lark(text) if hasattr(compiler, "compile_lark") else None
    compile_s = time.perf_counter() - t0
    bm = xgr.allocate_token_bitmask(1, info.vocab_size)
    passes = []
    for _ in range(repeat):
        times = []
        for ids in seqs:
            m = xgr.GrammarMatcher(cg)
            for t in ids:
                t0 = time.perf_counter()
                m.fill_next_token_bitmask(bm)
                times.append(time.perf_counter() - t0)
                if not m.accept_token(t):
                    raise RuntimeError("xgrammar rejected a token")
        passes.append(times)
    return compile_s, passes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--grammars", default="json,sql,c_subset")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from structgen import grammars
    from tests.helpers import load_tokenizer, load_vocab

    vocab = load_vocab(args.tokenizer)
    t0 = time.perf_counter()
    _ = vocab.trie
    print(f"vocabulary {args.tokenizer}: {vocab.logits_width} tokens, trie {time.perf_counter() - t0:.2f} s (once per vocabulary)")
    tok = load_tokenizer(args.tokenizer)
    # Process warm-up (Lark import, Numba kernels loaded from cache), so the first grammar's
    # compile time is not charged with one-time costs.
    import structgen as sg

    warm = sg.compile(sg.Grammar.from_lark('start: "a" /[0-9]+/ "b"?'), vocab, cache=False).matcher()
    warm.fill_bitmask(sg.allocate_bitmask(1, vocab.logits_width), 0)
    # as a serving process would (and structgen.bench.maskbench does): the objects loaded so far
    # (tokenizers, torch) leave the garbage collector's generations, so that no full collection
    # over them lands inside a timed compile
    gc.collect()
    gc.freeze()
    for name in args.grammars.split(","):
        text = grammars.load(name)
        seqs = [vocab.encode(s) for s in SENTENCES[name]]
        n = sum(len(s) for s in seqs)
        print(f"\n== {name} grammar: {len(seqs)} sentences, {n} tokens, {args.repeat} passes")
        comp, recomp, ttfm, passes, (background, prefill_s, after) = bench_structgen(text, vocab, seqs, args.repeat)
        print(f"structgen   compile {comp * 1e3:7.1f} ms  again in-process {recomp * 1e3:5.1f} ms  "
              f"first mask {ttfm * 1e3:6.1f} ms")
        print(f"  cold pass  {pct(passes[0])}   (right after compile, "
              f"{'racing the background prefill' if background else 'prefill done within compile'})")
        print(f"  cold pass  {pct(after)}   (second compile, prefill done {prefill_s * 1e3:.0f} ms after it)")
        if len(passes) > 1:
            print(f"  warm       {pct([x for p in passes[1:] for x in p])}")
        for label, fn in (("llguidance", lambda: bench_llguidance(text, tok, seqs, args.repeat)),
                          ("xgrammar", lambda: bench_xgrammar(text, tok, seqs, args.repeat, vocab.logits_width))):
            try:
                comp, passes = fn()
            except ImportError as e:
                print(f"{label:<11} not installed ({e})")
                continue
            except Exception as e:  # a peer that cannot read the grammar or rejects a token
                print(f"{label:<11} failed: {type(e).__name__}: {str(e)[:200]}")
                continue
            print(f"{label:<11} compile {comp * 1e3:7.1f} ms")
            print(f"  cold pass  {pct(passes[0])}")
            if len(passes) > 1:
                print(f"  warm       {pct([x for p in passes[1:] for x in p])}")


if __name__ == "__main__":
    main()
