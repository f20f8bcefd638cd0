"""Engine-generic benchmark runs, one schema per task, isolated in worker processes.

A *task* is one schema (a JSONSchemaBench record or one case of the official test suite) with
its test instances; each (engine, task) pair runs in a worker process that keeps its engines
loaded between tasks.  The parent enforces the benchmark's limits by phase and kills the worker
when one is exceeded, so an engine's hang or crash costs exactly that schema:

- ``compile``: compile + first mask (TTFM), default 10 s (a TTFM above it is a timeout too);
- ``run``: forcing the test instances (maskbench, testsuite) or generating (jsonschemabench),
  default 60 s; generation stops at 2048 tokens.

Modes (``run_tasks(mode, ...)``):

- ``maskbench``: every test instance is forced as ``json.dumps(data)``, token by token, with the
  tokens of the shared tokenizer; a token is accepted when the mask allows it *and* the
  matcher's ``advance`` takes it (a disagreement is counted as ``inconsistent``), and an
  instance when after its last token the matcher accepts and EOS is in the mask.  Every mask is
  timed (TBM, µs); the first mask of a schema is part of its TTFM instead.
- ``testsuite``: the same forcing, over the official suite's cases.
- ``jsonschemabench``: generation with a model (see :mod:`.jsonschemabench`).

Results are appended as JSON lines to ``OUT/<mode>.jsonl`` as they arrive; a rerun skips every
(engine, id) already there, so an interrupted run resumes.  ``workers=0`` runs in-process
(no isolation; for tests and debugging).  In-process, the structgen engines share structgen's
caches: the second one to compile a schema reuses the automata the first built for it (measured on a
300-schema sample: any order's TTFM p50 6.2 ms after declared order's, 9.6 ms alone), so time
each structgen engine in a process of its own (``--engines structgen,llguidance``, then
``--engines structgen-any,llguidance``).  A worker freezes the garbage collector's heap once an
engine is loaded, as a serving process does after start-up.
"""
from __future__ import annotations

import gc
import json
import multiprocessing as mp
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path

import numpy as np


@dataclass
class Limits:
    """The benchmark's limits (seconds, tokens)."""

    compile_s: float = 10.0
    run_s: float = 60.0
    max_tokens: int = 2048
    load_s: float = 900.0   # engine / model start-up in a fresh worker
    grace_s: float = 2.0    # slack before the parent kills a worker in the compile phase


@dataclass
class RunConfig:
    """What a worker needs to rebuild its context (picklable)."""

    mode: str
    tokenizer: str
    whitespace: str = "flexible"
    limits: Limits = field(default_factory=Limits)
    model: str = "random"             # jsonschemabench: "random", "smollm2" (the demo) or a model name/path
    seed: int = 0
    logits_width: int | None = None
    hygiene: bool = False             # structgen's generation restrictions (jsonschemabench: on by default)


# ----------------------------------------------------------------------------- worker side
class WorkerContext:
    """Per-process state: the shared tokenizer, engines built on first use, the model."""

    def __init__(self, config: RunConfig):
        self.config = config
        self._tok = None
        self._engines: dict = {}
        self._model = None

    @property
    def tok(self):
        if self._tok is None:
            from .engines import BenchTokenizer

            if self.config.mode == "jsonschemabench" and self.config.model != "random":
                from .jsonschemabench import load_model

                model, hf = load_model(self.config.model)
                self._model = model
                self._tok = BenchTokenizer(hf, _logits_width(model), source=str(self.config.model))
            else:
                self._tok = BenchTokenizer.load(self.config.tokenizer, self.config.logits_width)
        return self._tok

    @property
    def model(self):
        if self._model is None:
            from .jsonschemabench import RandomModel

            tok = self.tok  # may load the real model
            if self._model is None:
                self._model = RandomModel(tok)
        return self._model

    def engine(self, name: str):
        if name not in self._engines:
            from .engines import make_engine

            e = make_engine(name, self.tok, whitespace=self.config.whitespace,
                            compile_limit=self.config.limits.compile_s, hygiene=self.config.hygiene)
            e.warm_up()
            self._engines[name] = e
            # what a serving process does once it is up (vLLM's freeze_gc_heap): the start-up
            # objects (torch, numba's dispatchers, tokenizers: 320,000 of them) leave the
            # collector's sight, so a full collection walks only what the schemas added instead of
            # pausing a random mask for 130 ms and more.  Every engine is measured the same way.
            gc.collect()
            gc.freeze()
        return self._engines[name]


def _logits_width(model) -> int:
    from structgen.models import model_logits_width

    return model_logits_width(model)


def _short(e: BaseException, n: int = 300) -> str:
    s = f"{type(e).__name__}: {e}"
    return s if len(s) <= n else s[:n] + "..."


def _status_kb(field: str):
    """``field`` (``VmRSS``, ``VmHWM``) of /proc/self/status in kB, or None off Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak_rss():
    """Reset this process's peak RSS (``VmHWM``) to its current RSS; the RSS in kB, or None where
    the peak cannot be reset (then no memory figures are recorded)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    return _status_kb("VmRSS")


def execute(engine_name: str, task: dict, ctx: WorkerContext, phase=lambda p: None) -> dict:
    """Run one (engine, task) pair in this process and return its result record."""
    from .engines import EngineRefusal

    cfg, lim = ctx.config, ctx.config.limits
    res = {"mode": cfg.mode, "engine": engine_name, "id": task["id"], "subset": task.get("subset"),
           "status": "ok", "error": None, "ttfm_ms": None, "tests": len(task.get("tests", []))}
    phase("load")
    try:
        eng = ctx.engine(engine_name)
        if cfg.mode == "jsonschemabench":
            ctx.model  # noqa: B018 - load it outside the timed phases
    except Exception as e:
        res.update(status="load_error", error=_short(e))
        return res
    tok = ctx.tok
    if cfg.mode == "jsonschemabench":
        from .jsonschemabench import generate_task

        phase("compile")
        res.update(generate_task(eng, task, ctx.model, tok, lim, phase))
        return res
    phase("compile")
    bm = tok.allocate()
    rss0 = _reset_peak_rss()
    t0 = time.perf_counter()
    try:
        compiled = eng.compile(task["schema"], task.get("context"))
        m = compiled.matcher()
        m.fill_mask(bm)
    except EngineRefusal as e:
        res.update(status="refused", error=str(e)[:300])
        return res
    except Exception as e:  # an engine bug, not a refusal: keep it visible
        res.update(status="error", error=_short(e))
        return res
    ttfm = time.perf_counter() - t0
    res["ttfm_ms"] = round(1e3 * ttfm, 4)
    peak = _status_kb("VmHWM")
    if rss0 is not None and peak is not None:
        # the process's peak during compile + first mask, and its growth over the RSS before
        res["peak_rss_mb"] = round(peak / 1024, 1)
        res["compile_rss_mb"] = round(max(0, peak - rss0) / 1024, 1)
    if ttfm > lim.compile_s:
        res.update(status="compile_timeout", error=f"TTFM {ttfm:.1f} s > {lim.compile_s:g} s")
        return res
    phase("run")
    try:
        res.update(force_tests(compiled, m, bm, tok, task.get("tests", []), lim, keep_tbm=cfg.mode == "maskbench"))
    except Exception as e:
        res.update(status="error", error=_short(e) + " | " + traceback.format_exc(limit=-2)[-300:])
    return res


def force_tests(compiled, first, bm, tok, tests, lim: Limits, keep_tbm: bool = True) -> dict:
    """Force every instance as ``json.dumps(data)`` (see the module docstring)."""
    eos = np.asarray(tok.eos_ids, dtype=np.int64)
    out = {"tests": len(tests), "valid": 0, "invalid": 0, "valid_rejected": 0, "invalid_accepted": 0,
           "inconsistent": 0, "masks": 0}
    tbm: list[float] = []
    verdicts = []
    perf = time.perf_counter
    t_start = perf()
    m = first
    skip_first = True  # the schema's first mask was timed in TTFM
    for test in tests:
        if perf() - t_start > lim.run_s:
            out["status"], out["error"] = "run_timeout", f"forcing took over {lim.run_s:g} s"
            break
        if m is None:
            m = compiled.matcher()
        ok = True
        for t in tok.encode(json.dumps(test["data"])):
            if skip_first:
                skip_first = False
            else:
                a = perf()
                m.fill_mask(bm)
                tbm.append(perf() - a)
            allowed = bool((int(bm[0, t >> 5]) >> (t & 31)) & 1)
            took = m.advance(t)
            if allowed != took:
                out["inconsistent"] += 1
            if not (allowed and took):
                ok = False
                break
        if ok:
            a = perf()
            m.fill_mask(bm)
            tbm.append(perf() - a)
            eos_ok = bool(np.any((bm[0, eos >> 5] >> (eos & 31)) & 1))
            acc = m.is_accepting()
            if acc != eos_ok:
                out["inconsistent"] += 1
            ok = acc and eos_ok
        m = None
        valid = bool(test["valid"])
        out["valid" if valid else "invalid"] += 1
        if ok != valid:
            out["invalid_accepted" if ok else "valid_rejected"] += 1
        verdicts.append(int(ok))
    out["masks"] = len(tbm)
    out["accepted"] = verdicts
    if keep_tbm:
        out["tbm_us"] = [round(1e6 * x, 2) for x in tbm]
    return out


def _worker_main(conn, config: RunConfig) -> None:
    """A worker: loads the tokenizer and engines once, then forks one child per task.

    The child inherits the loaded engines (copy-on-write, so no start-up cost per task), runs
    the task and reports straight to the parent: ``("pid", pid)``, ``("phase", p)``,
    ``("result", record)``.  When the child has exited, the worker sends ``("exit", status)``.
    The parent kills a child that overruns a limit; the worker survives and takes the next
    task.  (Nothing here starts threads that a fork could orphan: each engine runs with one
    thread, see ``_SINGLE_THREAD``.)"""
    try:
        import torch

        torch.set_num_threads(1)
    except Exception:
        pass
    ctx = WorkerContext(config)
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        engine_name, task = msg
        try:   # load in the worker, so the loaded state outlives a killed child
            ctx.engine(engine_name)
            if config.mode == "jsonschemabench":
                ctx.model  # noqa: B018
        except Exception:
            pass  # execute() reports the load error in the child
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                conn.send(("pid", os.getpid()))
                res = execute(engine_name, task, ctx, lambda p: conn.send(("phase", p)))
                conn.send(("result", res))
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        conn.send(("exit", status))


# ----------------------------------------------------------------------------- parent side
_SINGLE_THREAD = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                  "OPENBLAS_NUM_THREADS": "1", "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


class _Slot:
    """One worker process and the task its current child is running."""

    def __init__(self, ctx, config):
        self.ctx, self.config = ctx, config
        self.proc = self.conn = None
        self.job = None
        self.child = None         # pid of the child running the job
        self.answered = False     # a record was emitted for the job (result or kill)
        self.phase, self.since = None, 0.0

    def start(self):
        parent, child = self.ctx.Pipe()
        saved = {k: os.environ.get(k) for k in _SINGLE_THREAD}
        os.environ.update(_SINGLE_THREAD)  # one core per worker, for every engine alike
        try:
            self.proc = self.ctx.Process(target=_worker_main, args=(child, self.config), daemon=True)
            self.proc.start()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        child.close()
        self.conn = parent

    def submit(self, job):
        if self.proc is None or not self.proc.is_alive():
            self.start()
        self.job, self.child, self.answered = job, None, False
        self.phase, self.since = "load", time.monotonic()
        self.conn.send(job)

    def deadline(self) -> float:
        lim = self.config.limits
        budget = {"load": lim.load_s, "compile": lim.compile_s + lim.grace_s, "run": lim.run_s + lim.grace_s}
        return self.since + budget.get(self.phase, lim.load_s)

    def kill_child(self):
        if self.child is not None:
            try:
                os.kill(self.child, 9)
            except ProcessLookupError:
                pass

    def kill(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.join(5)
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None

    def stop(self):
        self.kill_child()
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(None)
                self.proc.join(5)
            except (OSError, BrokenPipeError):
                pass
        self.kill()


def load_done(path: Path) -> set:
    """(engine, id) pairs already in a results file."""
    done = set()
    if path.exists():
        with open(path) as fh:
            for line in fh:
                line = line.strip()
                if line:
                    try:
                        r = json.loads(line)
                    except json.JSONDecodeError:  # a line cut by an interrupted run
                        continue
                    done.add((r["engine"], r["id"]))
    return done


def read_results(path: Path) -> list[dict]:
    out = []
    if Path(path).exists():
        with open(path) as fh:
            for line in fh:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError:
                        continue
    return out


class Progress:
    """A one-line progress bar on stderr (a line per 5 % when stderr is not a terminal)."""

    def __init__(self, total: int, label: str, enabled: bool = True):
        self.total, self.label, self.enabled = total, label, enabled
        self.n, self.t0, self.last = 0, time.monotonic(), -1
        self.tty = sys.stderr.isatty()

    def update(self, note: str = ""):
        self.n += 1
        if not self.enabled or not self.total:
            return
        pct = int(100 * self.n / self.total)
        if not self.tty and pct // 5 == self.last and self.n != self.total:
            return
        self.last = pct // 5
        el = time.monotonic() - self.t0
        eta = el / self.n * (self.total - self.n)
        bar = "#" * (pct // 4) + "." * (25 - pct // 4)
        line = f"{self.label} [{bar}] {self.n}/{self.total} {el:5.0f}s eta {eta:5.0f}s {note[:40]}"
        sys.stderr.write(("\r" + line + "\033[K") if self.tty else line + "\n")
        if self.tty and self.n == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def run_tasks(config: RunConfig, engines: list[str], tasks: list[dict], out_path: Path, *, workers: int = 1,
              progress: bool = True) -> list[dict]:
    """Run every (engine, task) pair not yet in ``out_path``; returns all results in the file
    for these engines and tasks (old and new)."""
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    done = load_done(out_path)
    jobs = [(e, t) for t in tasks for e in engines if (e, t["id"]) not in done]
    bar = Progress(len(jobs), config.mode, progress)
    if out_path.exists() and out_path.stat().st_size:
        with open(out_path, "rb+") as fh:   # a line cut by an interrupted run stays on its own
            fh.seek(-1, 2)
            if fh.read(1) != b"\n":
                fh.write(b"\n")
    with open(out_path, "a") as fh:
        def emit(res):
            fh.write(json.dumps(res, separators=(",", ":")) + "\n")
            fh.flush()
            bar.update(f"{res['engine']} {res['status']}")

        if workers <= 0:
            if sum(e.startswith("structgen") for e in engines) > 1:
                print("note: structgen engines in one process share their automaton caches: each reuses what "
                      "the others built for the same schema, which shortens its TTFM; run one structgen "
                      "engine per process to time them apart", file=sys.stderr)
            ctx = WorkerContext(config)
            try:
                for e, t in jobs:
                    emit(execute(e, t, ctx))
            finally:
                gc.unfreeze()  # this process goes on: what it froze may become garbage later
        else:
            _run_pool(config, jobs, workers, emit)
    want = {(e, t["id"]) for t in tasks for e in engines}
    return [r for r in read_results(out_path) if (r["engine"], r["id"]) in want]


def _run_pool(config: RunConfig, jobs: list, workers: int, emit) -> None:
    ctx = mp.get_context("spawn")   # a fresh interpreter: no inherited threads or JIT state
    slots = [_Slot(ctx, config) for _ in range(min(workers, len(jobs)))]
    queue = list(reversed(jobs))
    try:
        while queue or any(s.job for s in slots):
            for s in slots:
                if s.job is None and queue:
                    s.submit(queue.pop())
            busy = [s for s in slots if s.job is not None]
            ready = wait([s.conn for s in busy], timeout=0.25)
            now = time.monotonic()
            for s in busy:
                if s.conn in ready:
                    try:
                        kind, payload = s.conn.recv()
                    except Exception:   # the worker died (or a killed child cut a message)
                        if not s.answered:
                            code = s.proc.exitcode if s.proc is not None else None
                            emit(_failure(config, s, "crash", f"worker died (exit code {code}) in phase {s.phase}"))
                        s.kill_child()
                        s.kill()
                        s.job = None
                        continue
                    if kind == "pid":
                        s.child = payload
                    elif kind == "phase":
                        s.phase, s.since = payload, now
                    elif kind == "result":
                        if not s.answered:
                            emit(payload)
                            s.answered = True
                    elif kind == "exit":   # the child is gone; the worker is ready for more
                        if not s.answered:
                            emit(_failure(config, s, "crash", f"engine process died (status {payload}) "
                                                              f"in phase {s.phase}"))
                        s.job = None
                elif not s.answered and now > s.deadline():
                    status = {"compile": "compile_timeout", "run": "run_timeout"}.get(s.phase, "load_timeout")
                    emit(_failure(config, s, status, f"killed after {now - s.since:.1f} s in phase {s.phase}"))
                    s.answered = True
                    if s.child is not None and s.phase != "load":
                        s.kill_child()   # the worker reports ("exit", ...) and stays
                    else:
                        s.kill()
                        s.job = None
    finally:
        for s in slots:
            s.stop()


def _failure(config: RunConfig, slot: _Slot, status: str, error: str) -> dict:
    engine, task = slot.job
    return {"mode": config.mode, "engine": engine, "id": task["id"], "subset": task.get("subset"),
            "status": status, "error": error, "ttfm_ms": None, "tests": len(task.get("tests", []))}
