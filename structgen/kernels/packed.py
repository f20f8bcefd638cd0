"""Many arrays handed to a Numba kernel as one table of addresses.

Numba unboxes every array argument of a call, about 55 ns each: a kernel with sixty array
parameters pays ~4 us per call before it does any work, which is most of a cached grammar mask.
:func:`describe` writes the arrays' addresses, shapes and types into one int64 table, a row per
array; a *packed* kernel rebuilds each array with :func:`view1` / :func:`view2` / :func:`view3`
(no copy, no reference count) and calls the real kernel, Numba function to Numba function.

Contract: whoever calls a packed kernel keeps every described array alive and in place (not
resized, not replaced) while the table is in use; :class:`Packed` holds the arrays beside
their table for that.  Each view checks its row's dtype and rank against what the kernel
declares and raises ``TypeError`` on a mismatch, so a caller that packs its records in the
wrong order fails loudly instead of reading memory as the wrong type.
"""
from __future__ import annotations

import numpy as np
from numba import carray, literal_unroll, njit, types
from numba.extending import intrinsic, overload

#: Columns of a table row: address, the three dimensions (1 past the rank), type code (see :func:`_code`).
ADDR, DIM0, DIM1, DIM2, CODE = 0, 1, 2, 3, 4


def _typenum(numba_dtype) -> int:
    return np.dtype(str(numba_dtype)).num


@intrinsic
def _pointer(typingctx, addr, dtype):
    """``addr`` (int64) as a pointer to ``dtype`` (a NumPy scalar class such as ``np.int32``)."""
    sig = types.CPointer(dtype.instance_type)(addr, dtype)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(signature.return_type))

    return sig, codegen


@intrinsic
def _code(typingctx, dtype, ndim):
    """The type code of a ``dtype`` array of rank ``ndim`` (a literal), as a constant."""
    if not isinstance(ndim, types.IntegerLiteral):
        return None
    value = _typenum(dtype.instance_type) * 8 + ndim.literal_value
    sig = types.int64(dtype, ndim)

    def codegen(context, builder, signature, args):
        return context.get_constant(types.int64, value)

    return sig, codegen


@intrinsic
def _array_code(typingctx, arr):
    """The type code of the array ``arr``, as a constant (-1: not C-contiguous of rank 1 to 3)."""
    value = _typenum(arr.dtype) * 8 + arr.ndim if arr.layout == "C" and 1 <= arr.ndim <= 3 else -1
    sig = types.int64(arr)

    def codegen(context, builder, signature, args):
        return context.get_constant(types.int64, value)

    return sig, codegen


def _dim(a, i):
    """``a.shape[i]``, or 1 past ``a``'s rank (``i`` a literal)."""


@overload(_dim)
def _dim_impl(a, i):
    if not isinstance(i, types.IntegerLiteral):
        return None
    if i.literal_value < a.ndim:
        return lambda a, i: a.shape[i]
    return lambda a, i: 1


@njit(cache=True, nogil=True, inline="always")
def view1(table, k, dtype):
    """Row ``k`` of ``table`` as a 1-D array of ``dtype``."""
    if table[k, CODE] != _code(dtype, 1):
        raise TypeError("packed kernel argument of the wrong dtype or rank")
    return carray(_pointer(table[k, ADDR], dtype), (table[k, DIM0],))


@njit(cache=True, nogil=True, inline="always")
def view2(table, k, dtype):
    """Row ``k`` of ``table`` as a 2-D array of ``dtype``."""
    if table[k, CODE] != _code(dtype, 2):
        raise TypeError("packed kernel argument of the wrong dtype or rank")
    return carray(_pointer(table[k, ADDR], dtype), (table[k, DIM0], table[k, DIM1]))


@njit(cache=True, nogil=True, inline="always")
def view3(table, k, dtype):
    """Row ``k`` of ``table`` as a 3-D array of ``dtype``."""
    if table[k, CODE] != _code(dtype, 3):
        raise TypeError("packed kernel argument of the wrong dtype or rank")
    return carray(_pointer(table[k, ADDR], dtype), (table[k, DIM0], table[k, DIM1], table[k, DIM2]))


@njit(cache=True, nogil=True)
def _describe(arrays, table):
    k = 0
    for a in literal_unroll(arrays):
        table[k, ADDR] = a.ctypes.data
        table[k, DIM0] = a.shape[0]
        table[k, DIM1] = _dim(a, 1)
        table[k, DIM2] = _dim(a, 2)
        table[k, CODE] = _array_code(a)
        k += 1


def type_code(dtype, ndim: int) -> int:
    """The type code :func:`describe` writes for a C-contiguous ``dtype`` array of rank ``ndim``
    (for callers that write a table row themselves)."""
    return np.dtype(dtype).num * 8 + ndim


def describe(arrays: tuple) -> np.ndarray:
    """The ``(len(arrays), 5)`` int64 table of ``arrays`` (C-contiguous, rank 1 to 3)."""
    table = np.empty((len(arrays), 5), np.int64)
    _describe(arrays, table)
    if table[:, CODE].min() < 0:
        raise ValueError("packed kernel arguments must be C-contiguous arrays of rank 1 to 3")
    return table


class Packed:
    """A table of ``arrays`` (:func:`describe`) and the arrays it points into, kept alive together."""

    __slots__ = ("table", "arrays")

    def __init__(self, arrays: tuple):
        self.arrays = tuple(arrays)
        self.table = describe(self.arrays)
