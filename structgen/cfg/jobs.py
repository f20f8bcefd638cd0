"""Mask jobs: the read-only masks of many grammar matchers in one nogil kernel call.

A batch (:func:`structgen.runtime.batch.fill_bitmasks`) asks each quick grammar row for a *job*
(:meth:`structgen.cfg.matcher.CFGMatcher.mask_job`): the arrays of its mask computation as one
small address table (:mod:`structgen.kernels.packed`) and a few scalars.  :func:`run_jobs` then
computes a slice of the jobs with no Python between rows, so several threads compute slices at
once -- one row's mask otherwise costs as much Python glue (dispatch, argument tables, holding the
GIL) as kernel time, and threads only took turns at the glue.

Each job runs the read-only pass of :func:`structgen.cfg.mask.expand_mask` from the frontier's
root bits, which the matcher copied into the row (cached per set of lexer states by the grammar's
cache; when they are not, from empty words, the kernel OR-ing the frontier's own entries too),
then sets the EOS bits when the matcher is accepting: the words its ``fill_bitmask`` would write.  A job whose pass does not finish (a cache
entry to compute, a buffer to grow) reports the status and its matcher fills the row itself.

Table rows: ``WORDS`` (the output row, described by the batch), ``FRONT`` (the frontier), the
four tables of :func:`~structgen.cfg.mask.expand_mask_packed` (``MTAB`` the matcher's, ``GTAB``
the grammar's, ``CTAB`` the cache snapshot's, ``STAB`` the fill scratch's), ``EOS`` (the EOS
ids).  Scalars: ``NFRONT``, ``NSETS``, ``NN``, ``U0``, ``ACC`` (accepting: set the EOS bits),
``HAS_ROOT`` (the row holds the root bits already).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..kernels.packed import view1, view2
from . import mask as mk

WORDS, FRONT, MTAB, GTAB, CTAB, STAB, EOS = range(7)
TABLE_ROWS = 7
NFRONT, NSETS, NN, U0, ACC, HAS_ROOT = range(6)
SCALARS = 6


@njit(cache=True, nogil=True)
def run_jobs(jobs, scal, status, lo, hi):
    """Compute jobs ``lo..hi-1`` (``jobs[r]`` a table, ``scal[r]`` its scalars); ``status[r]`` gets
    :func:`~structgen.cfg.mask.expand_mask`'s status (``OK``: the row is filled)."""
    i4, i8, u4 = np.int32, np.int64, np.uint32
    for r in range(lo, hi):
        t = jobs[r]
        words = view1(t, WORDS, u4)
        root = scal[r, HAS_ROOT] != 0
        if not root:
            words[:] = 0
        st = mk.expand_mask_packed(view2(t, FRONT, i4), scal[r, NFRONT], scal[r, NSETS], False, root, words,
                                   view2(t, MTAB, i8), scal[r, NN], scal[r, U0], view2(t, GTAB, i8),
                                   view2(t, CTAB, i8), view2(t, STAB, i8))
        if st == mk.OK and scal[r, ACC] != 0:
            eos = view1(t, EOS, i8)
            for q in range(eos.shape[0]):
                words[eos[q] >> 5] |= u4(1) << u4(eos[q] & 31)
        status[r] = st
