"""Bitmask rows: the batch entry :func:`fill_bitmasks` and the row writers matchers share.

The layout is the architecture's: int32 ``[batch, ceil(V/32)]``, bit ``t % 32`` of word
``t // 32`` set = token ``t`` allowed (``V`` the model's logits width), numpy or torch on
any device.

Parallel filling: the mask kernels of both engines are Numba ``nogil`` functions, so rows
are filled by a small thread pool (the calling thread plus ``num_threads - 1`` workers,
created on first use and reused) that pulls rows from one shared queue: a slow row (a
grammar-engine mask) holds one thread while the others go on with the rest.  Only slow
rows go to the pool: those of matchers that compute (``fills_from_cache`` false: the grammar
engine, the key guard) whose last fill took over :data:`SLOW_ROW_S` (or that were never
filled); the calling thread then fills the quick ones and the regular matchers' cached rows (a
copy each).  What each matcher does under the GIL (argument unboxing, Python glue) does not
overlap; the kernels do.

Quick rows of matchers that offer *mask jobs* (``mask_job`` / ``finish_job`` / ``JOB``: the
grammar engine, :mod:`structgen.cfg.jobs`) do not call their matchers one by one: the calling
thread gathers every job (a table of array addresses and a few scalars each), then all threads run
the jobs' kernel on slices of them at once, with no Python between rows -- a quick grammar mask
is as much glue as kernel, and a thread per row only took turns at the glue.  A job reports a
status per row, 0 when its row is filled; the matcher fills any other row itself.

Every row gets the bits its matcher's own ``fill_bitmask`` writes, whatever the thread count (the
matchers of one compiled grammar share only caches built for concurrent readers).
"""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np
import torch

from ..errors import OptionError
from ..kernels.packed import ADDR, CODE, DIM0, DIM1, DIM2, type_code
from .checks import check_bitmask, check_bitmask_row

__all__ = ["fill_bitmasks", "write_row", "cpu_view", "set_num_threads", "get_num_threads"]


# ----------------------------------------------------------------------------- threads
_LOCK = threading.Lock()
_POOL: list = [None, 0]   # [ThreadPoolExecutor or None, its number of workers]
_THREADS = [0]            # 0: the default (the cores this process may run on)
_DEFAULT = [0]            # that default, once worked out (0: not yet)


def _default_threads() -> int:
    """The default thread count, worked out on first use (an affinity query per batch cost
    more than a one-row batch's own bookkeeping)."""
    if _DEFAULT[0]:
        return _DEFAULT[0]
    env = os.environ.get("STRUCTGEN_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        n = int(env)
    else:
        try:
            n = max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not Linux
            n = max(1, os.cpu_count() or 1)
    _DEFAULT[0] = n
    return n


def set_num_threads(n: int | None) -> None:
    """Threads :func:`fill_bitmasks` uses by default (the calling thread included): ``n >= 1``,
    or ``None`` for the default, the cores this process may run on (``$STRUCTGEN_NUM_THREADS``
    overrides it; both are read on first use, and again after ``set_num_threads(None)``).  1 fills
    every row on the calling thread, one after another."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise OptionError(f"num_threads must be an int >= 1 or None, got {n!r}")
    _THREADS[0] = 0 if n is None else int(n)
    _DEFAULT[0] = 0


def get_num_threads() -> int:
    """The thread count :func:`fill_bitmasks` uses when not given one."""
    return _THREADS[0] or _default_threads()


def _pool(workers: int) -> ThreadPoolExecutor:
    """The shared pool, with at least ``workers`` threads (made on first use, remade larger)."""
    with _LOCK:
        pool, n = _POOL
        if pool is None or n < workers:
            if pool is not None:
                pool.shutdown(wait=False)
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="structgen-fill")
            _POOL[0], _POOL[1] = pool, workers
        return pool


#: a row whose last fill took more CPU time than this (seconds) goes to the pool; quicker rows are
#: mostly GIL-held glue (kernel dispatch, copies) that threads only slow down by handing the GIL
#: back and forth, so the calling thread does them itself
SLOW_ROW_S = 100e-6
_LAST: dict = {}   # id(matcher) -> seconds its last fill took (a scheduling hint only)
#: fewer quick rows with mask jobs than this are filled one by one: handing a few jobs to other
#: threads costs more than it saves
MIN_JOBS = 24


def _drain(tasks, dst, errors, timed: bool = True) -> None:
    """Fill rows from the shared iterator ``tasks`` until it is empty; record failures and, when
    ``timed``, each row's time (the thread's CPU time: waiting for the GIL or for a core must not
    make a row look slow)."""
    clock = time.thread_time
    for row, m in tasks:  # next() on a list iterator is atomic: each row is taken once
        t0 = clock() if timed else 0.0
        try:
            m.fill_bitmask(dst, row)
        except BaseException as e:  # re-raised by the caller, in row order
            errors.append((row, e))
        if timed:
            _LAST[id(m)] = clock() - t0


def fill_bitmasks(matchers: Sequence, bitmask, *, num_threads: int | None = None) -> None:
    """Fill rows ``0..len(matchers)-1`` of ``bitmask``, one per matcher, in parallel.

    Args:
        matchers: :class:`~structgen.Matcher` objects; a ``None`` entry allows every token
            (its row becomes all ones: an unconstrained sequence of the batch).  The same
            matcher object may appear in several rows (it is asked once).
        bitmask: C-contiguous int32 ``[>= len(matchers), ceil(V/32)]``, numpy or torch (any
            device: a bitmask off the CPU is filled on the host and copied once); ``V`` is the
            first matcher's ``vocab.logits_width``.
        num_threads: threads to use, the calling one included (default
            :func:`get_num_threads`); 1 fills the rows one after another on this thread.
    Rows get exactly the bits each matcher's ``fill_bitmask`` writes; rows past
    ``len(matchers)`` are untouched.  Matchers must not be advanced by other threads meanwhile.
    Raises:
        TypeError / ValueError: the bitmask has the wrong type, dtype, rank, rows, width or
            layout (the message names the expected shape and dtype); ``num_threads`` < 1.
        Whatever a matcher's ``fill_bitmask`` raises: the exception of the lowest failing row
            (as a loop over the rows would raise it; rows before it are filled, later rows may be).
    """
    matchers = list(matchers)
    width = next((m.vocab.logits_width for m in matchers if m is not None), None)
    check_bitmask(bitmask, width, len(matchers), contiguous=True)
    if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int)
                                    or num_threads < 1):
        raise OptionError(f"num_threads must be an int >= 1, got {num_threads!r}")
    threads = get_num_threads() if num_threads is None else num_threads
    n = len(matchers)
    if n == 0:
        return
    if n == 1 and matchers[0] is not None:  # one row: its matcher's own fill, without the batch bookkeeping
        matchers[0].fill_bitmask(bitmask, 0)
        return
    dst, staged = _host_rows(bitmask, n)
    if dst is None:  # e.g. a read-only numpy array: the matchers' own writes (and errors)
        _sequential(matchers, bitmask)
        return
    first: dict = {}   # id(matcher) -> the first row it fills
    dups, heavy, light = [], [], []
    for i, m in enumerate(matchers):
        if m is None:
            dst[i] = -1
            continue
        j = first.setdefault(id(m), i)
        if j != i:
            dups.append((i, j))
        elif getattr(m, "fills_from_cache", False):
            light.append((i, m))
        else:
            heavy.append((i, m))
    errors: list = []
    if len(_LAST) > 1 << 16:
        _LAST.clear()
    slow, quick, jobbed = [], [], []
    for t in heavy:  # unknown (a first mask): likely slow
        if _LAST.get(id(t[1]), 1.0) > SLOW_ROW_S:
            slow.append(t)
        else:
            (jobbed if hasattr(t[1], "mask_job") else quick).append(t)
    if threads < 2 or len(jobbed) < MIN_JOBS:
        quick += jobbed
        jobbed = []
    k = min(threads, len(slow))
    if k <= 1 and not jobbed:
        _drain(iter(heavy), dst, errors)
        _drain(iter(light), dst, errors, timed=False)
    else:
        it = iter(slow)
        futures = [_pool(threads - 1).submit(_drain, it, dst, errors) for _ in range(k - 1)]
        _drain(it, dst, errors)
        if jobbed:
            _run_jobs(jobbed, dst, threads, errors)
        _drain(iter(quick), dst, errors)  # while the workers finish their slow rows
        _drain(iter(light), dst, errors, timed=False)
        for f in futures:
            f.result()
    bad = min((r for r, _ in errors), default=n)
    for i, j in dups:
        if i < bad and j < bad:
            dst[i] = dst[j]
    if staged:
        _copy_back(bitmask, dst, bad)
    if errors:
        raise min(errors, key=lambda e: e[0])[1]


_WORDS_CODE = type_code(np.uint32, 1)


def _run_jobs(rows, dst, threads: int, errors) -> None:
    """Fill the rows of matchers with mask jobs (``mask_job`` / ``finish_job`` / ``JOB``, see
    :mod:`structgen.cfg.jobs`): the calling thread gathers every job, then all threads run the
    jobs' kernel on slices of them (a few per thread, taken in turn, so that a slow row does not
    hold the others), and a job that did not finish is filled by its matcher.  (Gathering the
    jobs of a slice in the thread that computes it was slower: a thread back from its kernel
    waits for the GIL while another gathers.)"""
    out = dst.view(np.uint32)
    groups: dict = {}
    for row, m in rows:
        try:
            job = m.mask_job(out[row])
        except BaseException as e:
            errors.append((row, e))
            continue
        if job is not None:  # (None: the row is filled already)
            groups.setdefault(m.JOB, []).append((row, m, job))
    base, stride = dst.ctypes.data, dst.strides[0]
    for (kernel, n_rows, n_scalars), got in groups.items():
        n = len(got)
        jobs = np.empty((n, n_rows, 5), np.int64)
        scal = np.empty((n, n_scalars), np.int64)
        for i, (_, _, (table, sc)) in enumerate(got):
            jobs[i] = table
            scal[i] = sc
        w = jobs[:, 0]
        w[:, ADDR] = base + np.fromiter((g[0] for g in got), np.int64, n) * stride
        w[:, DIM0] = dst.shape[1]
        w[:, DIM1] = w[:, DIM2] = 1
        w[:, CODE] = _WORDS_CODE
        status = np.zeros(n, np.int64)
        step = -(-n // (2 * threads))
        slices = iter(range(0, n, step))

        def work(kernel=kernel, jobs=jobs, scal=scal, status=status, slices=slices, step=step, n=n):
            for lo in slices:  # next() on a range iterator is atomic: each slice is taken once
                kernel(jobs, scal, status, lo, min(n, lo + step))

        helpers = [_pool(threads - 1).submit(work) for _ in range(threads - 1)]
        work()
        for f in helpers:
            if not f.cancel():  # (one still queued behind a slow row has nothing left to do)
                f.result()
        for i in np.flatnonzero(status).tolist():
            row, m, _ = got[i]
            t0 = time.thread_time()
            try:
                m.finish_job(out[row], int(status[i]))
            except BaseException as e:
                errors.append((row, e))
            _LAST[id(m)] = time.thread_time() - t0


def _sequential(matchers, bitmask) -> None:
    for i, m in enumerate(matchers):
        if m is None:
            bitmask[i] = -1
        else:
            m.fill_bitmask(bitmask, i)


def _host_rows(bitmask, n: int):
    """``(rows, staged)``: a writable int32 numpy array whose rows ``0..n-1`` the matchers fill
    -- ``bitmask`` itself or a view of its memory (staged False), or a host array to copy to
    its device afterwards (staged True) -- or ``(None, False)`` when neither applies."""
    if isinstance(bitmask, torch.Tensor):
        if bitmask.device.type != "cpu":
            return np.empty((n, bitmask.shape[1]), np.int32), True
        view = cpu_view(bitmask)
        return (view, False) if view is not None and view.flags.writeable else (None, False)
    return (bitmask, False) if bitmask.flags.writeable else (None, False)


def _copy_back(bitmask: torch.Tensor, host: np.ndarray, rows: int) -> None:
    """Rows ``0..rows-1`` of ``host`` into the device bitmask, in one copy."""
    if rows:
        bitmask[:rows].copy_(torch.from_numpy(host[:rows]).to(bitmask.device, non_blocking=False))


def row_words(bitmask, row: int):
    """``bitmask[row]`` as a contiguous uint32 numpy view a mask can be computed into in place
    (a numpy array or a CPU int32 tensor), or None (then compute, then :func:`write_row`)."""
    view = cpu_view(bitmask) if isinstance(bitmask, torch.Tensor) else bitmask
    if view is None:
        return None
    out = view[row]
    return out.view(np.uint32) if out.flags.c_contiguous else None


_HOST = (None, 0, None, None, 0, None)  # (bitmask, data pointer, shape, dtype, vocab width, its rows): host_row


def host_row(bitmask, row, vocab_size: int):
    """:func:`~structgen.runtime.checks.check_bitmask_row`, then :func:`row_words`: ``(row,
    uint32 view of bitmask[row] or None)``.  The last bitmask's row views are kept while it stays
    the same array with the same shape and storage: a batch's bitmask takes every row each step,
    and its checks and views cost as much as a cached mask's copy."""
    global _HOST
    b, ptr, shape, dtype, width, rows = _HOST
    if b is bitmask and width == vocab_size and type(row) is int and bitmask.dtype is dtype:
        if isinstance(bitmask, np.ndarray):  # (its shape, dtype or flags can be set in place)
            same = bitmask.shape == shape and bitmask.flags.writeable
        else:
            same = bitmask.data_ptr() == ptr and bitmask.shape == shape
        if same and 0 <= row < len(rows):
            return row, rows[row]
    row = check_bitmask_row(bitmask, row, vocab_size)
    view = cpu_view(bitmask) if isinstance(bitmask, torch.Tensor) else bitmask
    if view is None or not view.flags.c_contiguous or not view.flags.writeable:
        return row, row_words(bitmask, row)
    _HOST = (bitmask, bitmask.data_ptr() if isinstance(bitmask, torch.Tensor) else 0, bitmask.shape, bitmask.dtype,
             vocab_size, list(view.view(np.uint32)))
    return row, _HOST[5][row]


def write_row(bitmask, row: int, words: np.ndarray) -> None:
    """Copy one int32 mask row into ``bitmask[row]`` (numpy array or torch tensor)."""
    if isinstance(bitmask, torch.Tensor):
        view = cpu_view(bitmask)
        if view is not None:
            view[row] = words
            return
        src = torch.from_numpy(np.ascontiguousarray(words))
        if bitmask.device.type != "cpu":
            src = src.to(bitmask.device, non_blocking=True)
        bitmask[row].copy_(src)
    else:
        bitmask[row] = words


_VIEW = (None, 0, None, None)  # (tensor, data pointer, shape, numpy view) of the last CPU bitmask


def cpu_view(bitmask: torch.Tensor):
    """A numpy view sharing the memory of a CPU int32 tensor (None for others).  Kept for the
    last tensor while its storage and shape stay the same: a numpy row copy costs a third of
    torch's indexing and ``copy_`` for one 128k-token row, paid at every mask."""
    global _VIEW
    t, ptr, shape, view = _VIEW
    if t is bitmask and bitmask.data_ptr() == ptr and bitmask.shape == shape:
        return view
    if bitmask.device.type != "cpu" or bitmask.dtype != torch.int32 or bitmask.requires_grad:
        return None
    try:
        view = bitmask.numpy()
    except (RuntimeError, TypeError, ValueError):  # e.g. a conjugated or negated view
        return None
    _VIEW = (bitmask, bitmask.data_ptr(), bitmask.shape, view)
    return view
