"""Argument checks at the edge of the runtime: token ids and bitmasks.

Every matcher (and the batch helpers) calls these where user values enter, so a float
token id or a bitmask of the wrong dtype fails with the same named error everywhere
instead of being truncated, garbling words or surfacing as numpy's broadcast error:

- :func:`check_token` / :func:`check_tokens`: token ids are integers (Python ints, numpy
  or torch integer scalars and arrays).  Floats (even ``2.0``), bools, strings and
  ``None`` raise :class:`~structgen.errors.TokenError`.  Integers outside the vocabulary
  are *not* errors: matchers reject them (``advance`` returns False).
- :func:`check_bitmask` / :func:`check_bitmask_row`: a bitmask is an int32 2-D numpy
  array or torch tensor of ``ceil(V/32)`` words per row; otherwise
  :class:`~structgen.errors.BitmaskError` naming the expected dtype and shape.

This module imports nothing of structgen but :mod:`structgen.errors`.
"""
from __future__ import annotations

import operator

import numpy as np
import torch

from ..errors import BitmaskError, TokenError

__all__ = ["check_token", "check_tokens", "check_bitmask", "check_bitmask_row"]

_INT64_MAX = np.iinfo(np.int64).max


def check_token(token) -> int:
    """``token`` as a Python int; raises :class:`TokenError` unless it is an integer (a Python
    int, a numpy integer, a 0-d integer torch tensor).  Bools are refused: ``True`` as a token
    id is a bug, not token 1."""
    if type(token) is int:  # the hot path: one type test
        return token
    if isinstance(token, (bool, np.bool_)) or (isinstance(token, torch.Tensor) and token.dtype == torch.bool):
        raise TokenError(f"a token id must be an integer, got the bool {token!r}")
    try:
        return operator.index(token)
    except TypeError:
        raise TokenError(f"a token id must be an integer, got {token!r} ({type(token).__name__})") from None


def check_tokens(tokens) -> np.ndarray:
    """``tokens`` (a sequence, an iterable, a 1-D numpy array or torch tensor of integers) as a
    1-D int64 array.  Raises :class:`TokenError` for floats, bools, other non-integers or more
    than one dimension.  Python ints beyond int64 become -1 (an id no vocabulary has)."""
    if isinstance(tokens, torch.Tensor):
        if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
            raise TokenError(f"token ids must be integers, got a {tokens.dtype} tensor")
        tokens = tokens.detach().cpu().numpy()
    elif not isinstance(tokens, np.ndarray):
        if not hasattr(tokens, "__len__"):
            tokens = list(tokens)
        if len(tokens) == 0:
            return np.zeros(0, np.int64)
        arr = np.asarray(tokens) if not isinstance(tokens, (str, bytes)) else None
        if arr is not None and arr.dtype.kind in "iu" and any(isinstance(t, (bool, np.bool_)) for t in tokens):
            arr = np.asarray(tokens, dtype=object)  # numpy made [5, True] an int array: name the bool below
        if arr is None or arr.dtype.kind not in "iu":
            if arr is None or arr.ndim != 1:
                raise TokenError(f"token ids must be a 1-D sequence of integers, got {type(tokens).__name__}")
            # floats, bools, None, huge ints: name the first element that is not an int
            ids = [check_token(t) for t in tokens]
            return np.array([t if -1 <= t <= _INT64_MAX else -1 for t in ids], np.int64)
        tokens = arr
    if tokens.ndim != 1:
        raise TokenError(f"token ids must be 1-D, got an array of shape {list(tokens.shape)}")
    if tokens.dtype.kind not in "iu":
        raise TokenError(f"token ids must be integers, got a {tokens.dtype} array")
    if tokens.dtype == np.uint64:
        big = tokens > _INT64_MAX
        tokens = np.where(big, -1, tokens.astype(np.int64)) if big.any() else tokens
    return tokens.astype(np.int64, copy=False)


def _expected(vocab_size: int | None, rows, contiguous: bool) -> str:
    words = "ceil(V/32)" if vocab_size is None else f"{(int(vocab_size) + 31) // 32}"
    v = "" if vocab_size is None else f" for V = {int(vocab_size)} tokens"
    layout = "a C-contiguous" if contiguous else "an"
    return f"{layout} int32 bitmask of shape ({'rows' if rows is None else f'>= {rows}'}, {words}){v}"


def check_bitmask(bitmask, vocab_size: int | None, rows: int | None = None, *, contiguous: bool = False) -> None:
    """Raise :class:`BitmaskError` unless ``bitmask`` is an int32 2-D numpy array or torch
    tensor with ``ceil(vocab_size / 32)`` words per row (any width when ``vocab_size`` is
    None), at least ``rows`` rows (at least one when None) and, with ``contiguous``, C-contiguous.
    The message names the expected dtype and shape and what was given."""
    if isinstance(bitmask, torch.Tensor):
        ok_dtype = bitmask.dtype == torch.int32
        is_contiguous = bitmask.is_contiguous()
    elif isinstance(bitmask, np.ndarray):
        ok_dtype = bitmask.dtype == np.int32
        is_contiguous = bool(bitmask.flags.c_contiguous)
    else:
        raise BitmaskError(f"expected {_expected(vocab_size, rows, contiguous)} (a numpy array or torch tensor), "
                           f"got {type(bitmask).__name__}; allocate one with structgen.allocate_bitmask(rows, V)")
    shape = tuple(bitmask.shape)
    need = 1 if rows is None else int(rows)
    if ok_dtype and len(shape) == 2 and shape[0] >= need and (is_contiguous or not contiguous) and \
            (vocab_size is None or shape[1] == (int(vocab_size) + 31) // 32):
        return
    layout = "" if is_contiguous else "non-contiguous "
    raise BitmaskError(f"expected {_expected(vocab_size, rows, contiguous)}, got {layout}"
                       f"{str(bitmask.dtype).replace('torch.', '')} of shape {shape}; "
                       f"allocate one with structgen.allocate_bitmask(rows, V)")


_LAST_OK = (None, None, None, None)  # (bitmask, dtype, shape, vocab size) that passed check_bitmask last


def check_bitmask_row(bitmask, row, vocab_size: int) -> int:
    """Check ``bitmask`` (as :func:`check_bitmask`) and that ``row`` is an integer naming one of
    its rows (``0 <= row < rows``; None is refused: it would index every row at once).
    Returns the row as an int."""
    if row is None or isinstance(row, (bool, np.bool_)):
        raise BitmaskError(f"fill_bitmask(bitmask, row): row must be an integer row index, got {row!r}")
    try:
        r = operator.index(row)
    except TypeError:
        raise BitmaskError(f"fill_bitmask(bitmask, row): row must be an integer row index, "
                           f"got {row!r} ({type(row).__name__})") from None
    global _LAST_OK
    last, dtype, shape, width = _LAST_OK
    # the bitmask of the previous call, unchanged: every row of a batch is filled into it each step
    if not (bitmask is last and bitmask.dtype is dtype and bitmask.shape == shape and width == vocab_size):
        check_bitmask(bitmask, vocab_size)
        _LAST_OK = (bitmask, bitmask.dtype, bitmask.shape, vocab_size)
    if not 0 <= r < bitmask.shape[0]:
        raise BitmaskError(f"fill_bitmask(bitmask, row): row {r} is outside the bitmask's {bitmask.shape[0]} rows "
                           f"(shape {tuple(bitmask.shape)})")
    return r
