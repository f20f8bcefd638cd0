"""Bitmask rows: the batch entry :func:`fill_bitmasks` and the row writers matchers share.

The layout is the architecture's: int32 ``[batch, ceil(V/32)]``, bit ``t % 32`` of word
``t // 32`` set = token ``t`` allowed (``V`` the model's logits width), numpy or torch on
any device.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

__all__ = ["fill_bitmasks", "check_bitmask", "write_row", "cpu_view"]


def check_bitmask(bitmask, rows: int, width: int | None) -> None:
    """Raise ``ValueError``/``TypeError`` naming the expected shape and dtype unless ``bitmask``
    is an int32 2-D numpy array or torch tensor with at least ``rows`` rows and, when ``width``
    (the logits width ``V``) is given, ``ceil(V/32)`` words per row."""
    words = None if width is None else (int(width) + 31) // 32
    want = f"an int32 bitmask of shape [>= {rows}, {'ceil(V/32)' if words is None else words}]" + \
        ("" if words is None else f" (V = {width})")
    if isinstance(bitmask, torch.Tensor):
        ok_dtype = bitmask.dtype == torch.int32
    elif isinstance(bitmask, np.ndarray):
        ok_dtype = bitmask.dtype == np.int32
    else:
        raise TypeError(f"expected {want} (numpy array or torch tensor), got {type(bitmask).__name__}")
    shape = tuple(bitmask.shape)
    if not ok_dtype or len(shape) != 2 or shape[0] < rows or (words is not None and shape[1] != words):
        raise ValueError(f"expected {want}, got {bitmask.dtype} of shape {list(shape)}; "
                         f"allocate one with structgen.allocate_bitmask(batch, V)")


def fill_bitmasks(matchers: Sequence, bitmask) -> None:
    """Fill rows ``0..len(matchers)-1`` of ``bitmask``, one per matcher.

    Args:
        matchers: :class:`~structgen.Matcher` objects; a ``None`` entry allows every token
            (its row becomes all ones: an unconstrained sequence of the batch).
        bitmask: int32 ``[>= len(matchers), ceil(V/32)]``, numpy or torch (any device);
            ``V`` is the first matcher's ``vocab.logits_width``.
    Raises:
        TypeError / ValueError: the bitmask has the wrong type, dtype, rank, rows or width
            (the message names the expected shape and dtype).
    """
    width = next((m.vocab.logits_width for m in matchers if m is not None), None)
    check_bitmask(bitmask, len(matchers), width)
    for i, m in enumerate(matchers):
        if m is None:
            bitmask[i] = -1
        else:
            m.fill_bitmask(bitmask, i)


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
