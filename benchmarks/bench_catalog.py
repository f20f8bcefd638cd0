"""ItemCatalog changes on a 1M-item index: removals, additions, queries with a delta, the merge.

    PYTHONPATH=. python benchmarks/bench_catalog.py
"""
import time, numpy as np
from structgen.index.items import ItemIndex
from structgen.index.catalog import ItemCatalog
rng = np.random.default_rng(0)
n = 1_000_000
arr = rng.integers(0, 8192, size=(n, 6))
t = time.perf_counter(); ix = ItemIndex.from_token_ids(arr, 8192, 8192); tb = time.perf_counter() - t
cat = ItemCatalog(ix, merge_fraction=None)
rem = arr[:10000]
t = time.perf_counter(); cat.remove(rem.tolist()); tr = time.perf_counter() - t
add = rng.integers(0, 8192, size=(1000, 7))
t = time.perf_counter(); cat.add(add.tolist()); ta = time.perf_counter() - t
t = time.perf_counter()
for row in arr[10000:11000]:
    cat.next_tokens(row[:3].tolist())
tq = (time.perf_counter() - t) / 1000
t = time.perf_counter(); cat.merge(); tm = time.perf_counter() - t
print(f"build 1M {tb:.2f}s; remove 10k {tr*1e3:.0f} ms; add 1k {ta*1e3:.0f} ms; next_tokens with delta {tq*1e6:.0f} us; merge {tm:.2f}s")
