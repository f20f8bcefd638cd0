"""How far past its time limit a hostile regex's compilation runs, and its peak memory.

    python benchmarks/limits_overshoot.py [--limit 5] [--kill-rss-gb 4] [PATTERN ...]

Each case runs ``sg.compile(sg.Grammar.from_regex(pattern), vocab, time_limit=limit)`` in a
fresh process (after importing structgen and warming its kernels on a tiny regex, so Numba's
loading is not counted), on a small byte vocabulary.  Printed per case: the outcome (``ok`` or
the error class and limit name), the seconds from ``from_regex`` to the outcome, the allowed
``limit x 1.1 + 1`` and the child's peak RSS (``wait4``'s ``ru_maxrss``).  A child past
``--kill-rss-gb`` or ``3 x limit + 30`` seconds is killed and reported as such.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CASES = [
    "(x{1,1000}){1,1000}",
    "(?:a{0,1000}){0,1000}",
    "(x{1,300}){1,300}",
    "(?:a{0,300}){0,300}",
    "(a|b)*a(a|b){20}",
]

_CHILD = r"""
import json, sys, time
import structgen as sg
from structgen.errors import StructgenError
pattern, limit = sys.argv[1], float(sys.argv[2])
vocab = sg.Vocabulary.from_bytes([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
sg.compile(sg.Grammar.from_regex("ab*"), vocab, time_limit=limit)   # warm-up
t0 = time.perf_counter()
try:
    try:
        g = sg.Grammar.from_regex(pattern, time_limit=limit)
    except TypeError:  # a structgen without from_regex(time_limit=)
        g = sg.Grammar.from_regex(pattern)
    sg.compile(g, vocab, time_limit=limit, cache=False)
    out = "ok"
except StructgenError as e:
    out = f"{type(e).__name__}({getattr(e, 'limit', None)})"
print(json.dumps({"outcome": out, "seconds": time.perf_counter() - t0}))
"""


def run_case(pattern: str, limit: float, kill_rss: int, env=None) -> dict:
    """Run one case in a child process; returns outcome, seconds, peak RSS (bytes)."""
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, pattern, str(limit)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    hard = 3 * limit + 30
    t0 = time.monotonic()
    killed = None
    while True:  # wait4, not poll(): poll would reap the child and lose its rusage
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        try:
            with open(f"/proc/{proc.pid}/statm") as f:
                rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            rss = 0
        if killed is None and rss > kill_rss:
            killed = "killed: RSS"
            proc.kill()
        elif killed is None and time.monotonic() - t0 > hard:
            killed = "killed: time"
            proc.kill()
        time.sleep(0.05)
    proc.returncode = status
    out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
    res = {"pattern": pattern, "limit": limit, "peak_rss_mb": ru.ru_maxrss / 1024}
    if killed:
        res.update(outcome=killed, seconds=time.monotonic() - t0)
    elif out.strip():
        res.update(json.loads(out.strip().splitlines()[-1]))
    else:
        res.update(outcome="crashed: " + err.strip().splitlines()[-1] if err.strip() else "crashed", seconds=None)
    return res


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("patterns", nargs="*")
    ap.add_argument("--limit", type=float, default=5.0)
    ap.add_argument("--kill-rss-gb", type=float, default=4.0)
    args = ap.parse_args(argv)
    for p in args.patterns or CASES:
        r = run_case(p, args.limit, int(args.kill_rss_gb * (1 << 30)))
        sec = "-" if r["seconds"] is None else f"{r['seconds']:.2f}"
        print(f"{p!r:28} limit {r['limit']:5.1f} s (allowed {r['limit'] * 1.1 + 1:.1f})  {r['outcome']:28} "
              f"{sec:>7} s  peak RSS {r['peak_rss_mb']:7.0f} MB", flush=True)


if __name__ == "__main__":
    main()
