"""Packed kernel arguments (structgen.kernels.packed): a table of addresses rebuilt into arrays
inside a kernel must read and write the very arrays it describes, and refuse a row of the wrong
type."""
import numpy as np
import pytest
from numba import njit

from structgen.kernels.packed import Packed, describe, view1, view2


@njit(cache=False)
def _sum_and_mark(t):
    a = view1(t, 0, np.int32)
    b = view2(t, 1, np.uint8)
    c = view1(t, 2, np.int64)
    s = 0
    for i in range(a.shape[0]):
        s += a[i]
    for i in range(b.shape[0]):
        for j in range(b.shape[1]):
            s += b[i, j] * (j + 1)
    c[0] = s
    a[0] = -1
    return b.shape[0] * 100 + b.shape[1]


def test_views_read_and_write_the_described_arrays():
    a = np.arange(7, dtype=np.int32)
    b = np.arange(12, dtype=np.uint8).reshape(3, 4)
    c = np.zeros(2, np.int64)
    p = Packed((a, b, c))
    assert p.table.shape == (3, 5)
    assert _sum_and_mark(p.table) == 304
    assert c[0] == a[1:].sum() + 0 + (b * np.arange(1, 5)).sum()   # a[0] was 0 when summed
    assert a[0] == -1  # written through the view, no copy


def test_a_row_of_another_type_is_refused():
    a = np.arange(7, dtype=np.int64)  # int64 where the kernel views int32
    with pytest.raises(TypeError):
        _sum_and_mark(describe((a, np.zeros((3, 4), np.uint8), np.zeros(2, np.int64))))
    with pytest.raises(TypeError):  # rank 1 where the kernel views rank 2
        _sum_and_mark(describe((np.zeros(3, np.int32), np.zeros(12, np.uint8), np.zeros(2, np.int64))))


def test_non_contiguous_arrays_are_refused():
    with pytest.raises(ValueError):
        describe((np.zeros((4, 4), np.int32)[:, 1],))
