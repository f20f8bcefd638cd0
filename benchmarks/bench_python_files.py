"""python.lark (``file_input``, Lark's PythonIndenter) forced along real Python files.

    python benchmarks/bench_python_files.py [--files utils.py,lexer.py] [--chars 6000]

Each file of the installed ``lark`` package is cut to its first ``--chars`` characters, tokenized
with llama3, and forced token by token through one matcher of the compiled grammar: every token
must be allowed by the mask before it and accepted by ``advance``.  Prints the mask times per file
(p50 / p90 / p99 / max) and the total.  The files share the grammar's cache, as requests do.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", default="utils.py,lexer.py", help="files of the lark package")
    ap.add_argument("--chars", type=int, default=6000)
    args = ap.parse_args()

    import lark

    import structgen as sg
    from bench_grammar import corpus_text, lark_options
    from tests.helpers import load_tokenizer, load_vocab

    vocab, tok = load_vocab("llama3"), load_tokenizer("llama3")
    text, _, start, opts = corpus_text("lark-python")
    t0 = time.perf_counter()
    cg = sg.compile(sg.Grammar.from_lark(text, start=start, **lark_options(opts)), vocab, cache=False)
    print(f"compile {time.perf_counter() - t0:.2f} s")
    bm = sg.allocate_bitmask(1, vocab.logits_width)
    gc.collect()
    gc.freeze()   # as servers do: no full collection walks the start-up heap mid-mask
    every = []
    for name in args.files.split(","):
        src = open(os.path.join(os.path.dirname(lark.__file__), name), encoding="utf-8").read()[:args.chars]
        ids = tok.encode(src, add_special_tokens=False)
        m = cg.matcher()
        times = []
        t0 = time.perf_counter()
        for i, t in enumerate(ids):
            t1 = time.perf_counter()
            m.fill_bitmask(bm, 0)
            times.append(time.perf_counter() - t1)
            row = bm[0].numpy() if hasattr(bm, "numpy") else bm[0]
            if not (int(row[t >> 5]) >> (t & 31)) & 1 or not m.advance(t):
                raise SystemExit(f"{name}: token {i} ({tok.decode(ids[max(0, i - 5):i + 1])!r}) refused")
        total = time.perf_counter() - t0
        a = np.array(times) * 1e3
        every += times
        print(f"{name}: {len(ids)} tokens, mask p50 {np.percentile(a, 50):.2f} p90 {np.percentile(a, 90):.2f} "
              f"p99 {np.percentile(a, 99):.2f} max {a.max():.1f} ms (at token {int(a.argmax())}); {total:.2f} s")
    a = np.array(every) * 1e3
    print(f"all: mask p50 {np.percentile(a, 50):.2f} p90 {np.percentile(a, 90):.2f} p99 {np.percentile(a, 99):.2f} "
          f"max {a.max():.1f} ms")


if __name__ == "__main__":
    main()
