"""ItemIndex benchmark: build time and bytes per item, and per-step latency of the batched
next-token gather against a Python dict trie and a sorted-array binary search.

    PYTHONPATH=. python benchmarks/bench_items.py --sizes 10000,100000,1000000 --vocab 2048,32768

Items are random semantic IDs (length 4-8, uniform tokens).  A "step" is: for B beams at
depth ``d`` (prefixes of random items), produce the allowed next tokens and the children of
every beam as padded ``[B, W]`` arrays (what one beam-search step consumes):

- ``csr``: ``ItemIndex.next_tokens_batch`` (one Numba call); ``csr unpadded``:
  ``ItemIndex.next_tokens_ragged`` (rows of their own length, buffers reused);
- ``torch``: ``DeviceItemIndex.gather`` on the CPU (the beam-search path);
- ``dict``: a dict-of-dicts trie, each beam holding its dict node, keys copied into the array;
  ``dict unpadded``: the same, each beam's sorted keys and children as lists;
- ``hf``: transformers' ``PrefixConstrainedLogitsProcessor`` with a ``prefix_allowed_tokens_fn``
  over the dict trie (it gets each beam's tokens, so it walks from the root; the processor
  builds the ``[B, V]`` mask and adds it to the scores: what ``model.generate`` runs);
- ``bsearch``: the sorted item matrix, each beam holding its row range ``[lo, hi)``; the next
  tokens and child ranges by binary search (``searchsorted``) in column ``d``.

The dict trie is built only up to ``--dict-max`` items (memory).  Each latency is the best of
at least ``--reps`` calls, repeated for at least 50 ms (microsecond steps on a shared machine).
"""
from __future__ import annotations

import argparse
import gc
import time

import numpy as np
import torch
from transformers import PrefixConstrainedLogitsProcessor

from structgen.index.items import ItemIndex


def semantic_ids(n, vocab, rng, lo=4, hi=8):
    lengths = rng.integers(lo, hi + 1, size=n)
    arr = rng.integers(0, vocab, size=(n, hi))
    arr[np.arange(hi)[None, :] >= lengths[:, None]] = -1
    return arr


def best_of(fn, reps, min_seconds=0.05):
    """The fastest of at least ``reps`` calls, repeated until ``min_seconds`` have passed (so
    microsecond steps get as many tries as a loaded machine needs; at most 20,000)."""
    best = float("inf")
    start = time.perf_counter()
    k = 0
    while k < reps or (time.perf_counter() - start < min_seconds and k < 20000):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
        k += 1
    return best


def dict_trie(ix: ItemIndex):
    root = {}
    for it in ix.items():
        node = root
        for t in it:
            node = node.setdefault(t, {})
        node[-1] = None
    return root


def random_titles(n, words, rng, lo=3, hi=8):
    """``n`` distinct product-like titles: ``lo``-``hi`` words from ``words``, sometimes a model number."""
    out, seen = [], set()
    while len(out) < n:
        k = int(rng.integers(lo, hi + 1))
        t = " ".join(words[i] for i in rng.integers(0, len(words), size=k))
        if rng.random() < 0.3:
            t += f" {chr(65 + int(rng.integers(0, 26)))}{int(rng.integers(1, 1000))}"
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def title_words(vocab, limit=20000):
    """Whole lower/title-case words of the vocabulary (tokens spelled ' word'), for random titles."""
    words = []
    for i in range(vocab.logits_width):
        b = vocab.token_bytes(i) if vocab.is_normal[i] else b""
        if len(b) >= 4 and b[:1] == b" " and b[1:].isalpha() and b[1:].isascii():
            words.append(b[1:].decode())
        if len(words) >= limit:
            break
    return words


def padded(ix):
    """The index's items as a ``[n, longest]`` matrix padded with -1, in sorted order."""
    data, off = ix.flat_items()
    lens = np.diff(off)
    arr = np.full((lens.size, int(lens.max())), -1, np.int64)
    cols = np.arange(arr.shape[1])[None, :] < lens[:, None]
    arr[cols] = data
    return arr


def bench_titles(n, vocab, words, rng, batches, depth, dict_max, reps):
    titles = random_titles(n, words, rng)
    gc.collect()
    t = time.perf_counter()
    ix = ItemIndex.from_strings(titles, vocab)
    build = time.perf_counter() - t
    row = bench_index(ix, padded(ix), vocab.logits_width, build, rng, batches, depth, dict_max, reps)
    row["title_bytes"] = sum(len(x.encode()) for x in titles) / n
    return row


def bench_size(n, vocab, rng, batches, depth, dict_max, reps):
    arr = semantic_ids(n, vocab, rng)
    gc.collect()
    t = time.perf_counter()
    ix = ItemIndex.from_token_ids(arr, vocab, eos_id=vocab)
    build = time.perf_counter() - t
    return bench_index(ix, arr, vocab, build, rng, batches, depth, dict_max, reps)


def bench_index(ix, arr, vocab, build, rng, batches, depth, dict_max, reps):  # noqa: C901
    n = arr.shape[0]
    sorted_items = ix.items() if n <= dict_max else None
    row = {"n": n, "V": vocab, "items": ix.num_items, "nodes": ix.num_nodes, "build_s": build,
           "bytes_per_item": ix.nbytes / ix.num_items, "MB_per_1M": ix.nbytes / ix.num_items * 1e6 / 2 ** 20}
    # prefixes of random items at `depth`
    dev = ix.to("cpu")
    W = int(ix.max_branch[depth]) + 1
    # the sorted matrix for binary search
    mat = arr[np.lexsort(arr[:, ::-1].T)]
    steps = {}
    dtrie = dict_trie(ix) if sorted_items is not None else None
    for B in batches:
        picks = arr[rng.integers(0, n, size=B), :depth]
        nodes = np.array([ix.walk(p) for p in picks], np.int64)
        tn = torch.from_numpy(nodes)
        bufs = (np.empty((B, W), np.int64), np.empty((B, W), np.int64))
        rag = (np.empty(B + 1, np.int64), np.empty(B * W, np.int64), np.empty(B * W, np.int64))
        res = {"csr": best_of(lambda: ix.next_tokens_batch(nodes, W, out=bufs), reps),
               "csr_ragged": best_of(lambda: ix.next_tokens_ragged(nodes, out=rag), reps),
               "torch": best_of(lambda: dev.gather(tn, W - 1), reps)}
        # binary search: ranges of each beam's prefix
        ranges = []
        for p in picks:
            lo, hi = 0, mat.shape[0]
            for d, t in enumerate(p):
                col = mat[lo:hi, d]
                lo, hi = lo + int(np.searchsorted(col, t, "left")), lo + int(np.searchsorted(col, t, "right"))
            ranges.append((lo, hi))
        col_d = np.ascontiguousarray(mat[:, depth])

        def bsearch():
            out_t = np.full((B, W), -1, np.int64)
            out_lo = np.full((B, W), -1, np.int64)
            for b, (lo, hi) in enumerate(ranges):
                seg = col_d[lo:hi]
                k, pos = 0, 0
                while pos < seg.size and k < W:
                    t = seg[pos]
                    if t < 0:   # an item ends here
                        pos = int(np.searchsorted(seg, t, "right"))
                        continue
                    out_t[b, k] = t
                    out_lo[b, k] = lo + pos
                    pos = int(np.searchsorted(seg, t, "right"))
                    k += 1
            return out_t, out_lo
        res["bsearch"] = best_of(bsearch, reps)
        if dtrie is not None:
            dnodes = []
            for p in picks:
                node = dtrie
                for t in p:
                    node = node[int(t)]
                dnodes.append(node)

            def dict_step():
                out_t = np.full((B, W), -1, np.int64)
                kids = []
                for b, node in enumerate(dnodes):
                    ks = sorted(node)
                    out_t[b, :len(ks)] = ks
                    kids.append([node[k] for k in ks])
                return out_t, kids
            res["dict"] = best_of(dict_step, reps)

            def dict_ragged():   # the same without padding: each beam's sorted keys and children
                toks, kids = [], []
                for node in dnodes:
                    ks = sorted(node)
                    toks.append(ks)
                    kids.append([node[k] for k in ks])
                return toks, kids
            res["dict_ragged"] = best_of(dict_ragged, reps)

            # transformers' prefix_allowed_tokens_fn: it sees each beam's whole sequence, so it
            # walks the dict trie from the root, and the processor builds a [B, V] mask
            def allowed_fn(batch_id, sent):
                node = dtrie
                for t in sent.tolist():
                    node = node[t]
                return [vocab if k == -1 else k for k in node]
            hf = PrefixConstrainedLogitsProcessor(allowed_fn, num_beams=B)
            ids_t = torch.from_numpy(np.ascontiguousarray(picks))
            scores = torch.zeros(B, vocab + 1)
            res["hf"] = best_of(lambda: hf(ids_t, scores), reps)
        steps[B] = res
    row["steps"] = steps
    return row


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--vocab", default="2048,32768")
    ap.add_argument("--batches", default="1,16,64,256")
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--dict-max", type=int, default=1000000)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--build-sizes", default="", help="extra sizes timed for the build only (e.g. 10000000)")
    ap.add_argument("--titles", default="", help="sizes of random-title item sets on --tokenizer (e.g. 10000,1000000)")
    ap.add_argument("--tokenizer", default="tests/data/tokenizers/llama3")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    ItemIndex.from_token_ids(semantic_ids(100, 50, rng), 50).next_tokens_batch([0])   # JIT warm-up
    batches = [int(x) for x in a.batches.split(",")]
    print("| items | V | nodes | build s | bytes/item | MB per 1M |")
    print("|---|---|---|---|---|---|")
    rows = []
    for V in [int(x) for x in a.vocab.split(",") if x]:
        for n in [int(x) for x in a.sizes.split(",") if x]:
            r = bench_size(n, V, rng, batches, a.depth, a.dict_max, a.reps)
            rows.append(r)
            print(f"| {r['items']:,} | {V} | {r['nodes']:,} | {r['build_s']:.2f} | {r['bytes_per_item']:.1f} | "
                  f"{r['MB_per_1M']:.1f} |", flush=True)
        for n in [int(x) for x in a.build_sizes.split(",") if x]:
            arr = semantic_ids(n, V, rng)
            gc.collect()
            t = time.perf_counter()
            ix = ItemIndex.from_token_ids(arr, V, eos_id=V)
            build = time.perf_counter() - t
            print(f"| {ix.num_items:,} | {V} | {ix.num_nodes:,} | {build:.2f} | {ix.nbytes / ix.num_items:.1f} | "
                  f"{ix.nbytes / ix.num_items * 1e6 / 2 ** 20:.1f} |", flush=True)
            del arr, ix
    if a.titles:
        import structgen as sg

        tv = sg.Vocabulary.from_tokenizer(a.tokenizer)
        words = title_words(tv)
        print()
        print(f"random titles ({len(words):,} words of {a.tokenizer}); build s = from_strings, tokenization included")
        print("| titles | V | nodes | build s | bytes/item | MB per 1M | title bytes |")
        print("|---|---|---|---|---|---|---|")
        for n in [int(x) for x in a.titles.split(",") if x]:
            r = bench_titles(n, tv, words, rng, batches, a.depth, a.dict_max, a.reps)
            r["kind"] = "titles"
            rows.append(r)
            print(f"| {r['items']:,} | {r['V']} | {r['nodes']:,} | {r['build_s']:.2f} | {r['bytes_per_item']:.1f} | "
                  f"{r['MB_per_1M']:.1f} | {r['title_bytes']:.0f} |", flush=True)
    print()
    print(f"per-step latency (µs, best of {a.reps}) at depth {a.depth}; dict/csr = speed-up over the dict trie; "
          "unpadded: rows of their own length (next_tokens_ragged; the dict trie's lists)")
    print("| items | V | B×beams | csr | torch cpu | bsearch | dict | hf pafn | dict/csr | hf/csr | bsearch/csr "
          "| csr unpadded | dict unpadded | ratio unpadded |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        for B, s in r["steps"].items():
            d, h, c = s.get("dict"), s.get("hf"), s["csr"]
            cr, dr = s["csr_ragged"], s.get("dict_ragged")
            us = ["-" if x is None else f"{x * 1e6:.1f}" for x in (d, h, dr)]
            ratio = ["-" if x is None else f"{x / c:.0f}x" for x in (d, h)]
            name = f"{r['items']:,}" + (" titles" if r.get("kind") == "titles" else "")
            print(f"| {name} | {r['V']} | {B} | {c * 1e6:.1f} | {s['torch'] * 1e6:.1f} | "
                  f"{s['bsearch'] * 1e6:.1f} | {us[0]} | {us[1]} | {ratio[0]} | {ratio[1]} | {s['bsearch'] / c:.0f}x "
                  f"| {cr * 1e6:.1f} | {us[2]} | {'-' if dr is None else f'{dr / cr:.{0 if dr >= 10 * cr else 1}f}x'} |")

if __name__ == "__main__":
    main()
