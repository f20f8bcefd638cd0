"""Graph kernels on dense transition tables (``trans[s, c]``, -1 for no edge)."""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["reverse_csr"]


@njit(cache=True, nogil=True)
def reverse_csr(trans):
    """The predecessors of a dense transition table ``trans[s, c]`` (-1: none) as a CSR:
    ``(ptr, src)``, the states with an edge into ``t`` being ``src[ptr[t]:ptr[t + 1]]``
    (one entry per edge, ascending source)."""
    n = trans.shape[0]
    k = trans.shape[1]
    ptr = np.zeros(n + 1, np.int64)
    for s in range(n):
        for c in range(k):
            t = trans[s, c]
            if t >= 0:
                ptr[t + 1] += 1
    for i in range(n):
        ptr[i + 1] += ptr[i]
    src = np.empty(ptr[n], np.int64)
    fill = ptr[:-1].copy()
    for s in range(n):
        for c in range(k):
            t = trans[s, c]
            if t >= 0:
                src[fill[t]] = s
                fill[t] += 1
    return ptr, src
