"""Packed token bitmasks and applying them to logits.

Layout (shared with xgrammar and llguidance): int32 ``[batch, ceil(V / 32)]``,
bit ``i`` of word ``j`` stands for token ``32 * j + i``; 1 means allowed.  ``V``
is the model's logits width.  Everything here is torch ops only, so the same
code runs on CPU and CUDA tensors without a host round-trip.
"""
from __future__ import annotations

import numpy as np
import torch
from numba import njit

from ..errors import BitmaskError

_SHIFTS_CACHE: dict = {}


def bitmask_words(vocab_width: int) -> int:
    """Number of int32 words a mask row needs for ``vocab_width`` tokens."""
    return (int(vocab_width) + 31) // 32


def allocate_bitmask(batch: int, vocab_width: int, device="cpu") -> torch.Tensor:
    """A ``[batch, ceil(vocab_width/32)]`` int32 tensor with every token allowed.

    Fill rows with ``Matcher.fill_bitmask(bitmask, row)``.
    """
    return torch.full((int(batch), bitmask_words(vocab_width)), -1, dtype=torch.int32, device=device)


def _shifts(device) -> torch.Tensor:
    key = str(device)
    t = _SHIFTS_CACHE.get(key)
    if t is None:
        t = torch.arange(32, dtype=torch.int32, device=device)
        _SHIFTS_CACHE[key] = t
    return t


def unpack_bitmask(bitmask: torch.Tensor, vocab_width: int) -> torch.Tensor:
    """Bool tensor ``[..., vocab_width]``: True where the bitmask allows the token."""
    bits = (bitmask.unsqueeze(-1) >> _shifts(bitmask.device)) & 1
    return bits.reshape(*bitmask.shape[:-1], -1)[..., :vocab_width].bool()


def apply_bitmask_(logits: torch.Tensor, bitmask: torch.Tensor, indices=None) -> torch.Tensor:
    """Set disallowed logits to -inf in place and return ``logits``.

    ``logits`` is a floating tensor ``[batch, V]`` (or ``[V]`` with a one-row mask);
    ``bitmask`` is an int32 tensor ``[batch, ceil(V'/32)]`` on the **same device** with
    the **same batch** (a one-row mask is not broadcast over a larger batch).  ``V'`` may
    be smaller than ``V``: tokens beyond the mask's width are disallowed (a tokenizer
    shorter than the model's logits); mask words beyond ``ceil(V/32)`` are refused (a mask
    of a larger vocabulary).  ``indices`` optionally selects the rows (of logits and mask
    alike) to touch.

    Raises:
        BitmaskError: a wrong type, dtype, rank, batch, width or device, naming the expected
            shape and dtype; nothing is modified.
    """
    _check_apply(logits, bitmask, indices)
    squeeze = logits.dim() == 1
    if squeeze:
        logits = logits.unsqueeze(0)
        if bitmask.dim() == 1:
            bitmask = bitmask.unsqueeze(0)
    v = logits.shape[-1]
    rows = bitmask if indices is None else bitmask[indices]
    allowed = unpack_bitmask(rows, min(v, rows.shape[-1] * 32))
    target = logits if indices is None else logits[indices]
    if allowed.shape[-1] < v:
        pad = torch.zeros(*allowed.shape[:-1], v - allowed.shape[-1], dtype=torch.bool, device=allowed.device)
        allowed = torch.cat([allowed, pad], dim=-1)
    target.masked_fill_(~allowed, float("-inf"))
    if indices is not None:
        logits[indices] = target
    return logits.squeeze(0) if squeeze else logits


def _check_apply(logits, bitmask, indices) -> None:
    """The argument checks of :func:`apply_bitmask_` (messages name the expected shape and dtype)."""
    if not isinstance(logits, torch.Tensor) or not (logits.dtype.is_floating_point and logits.dim() in (1, 2)):
        got = f"{logits.dtype} of shape {tuple(logits.shape)}" if isinstance(logits, torch.Tensor) \
            else type(logits).__name__
        raise BitmaskError(f"apply_bitmask_: logits must be a floating torch tensor of shape (batch, V) or (V,), "
                           f"got {got}")
    batch = 1 if logits.dim() == 1 else logits.shape[0]
    v = logits.shape[-1]
    want = f"an int32 torch tensor of shape ({batch}, <= {bitmask_words(v)}) on {logits.device} " \
           f"(ceil(V/32) words for V = {v}; one row per logits row)"
    if not isinstance(bitmask, torch.Tensor):
        raise BitmaskError(f"apply_bitmask_: the bitmask must be {want}, got {type(bitmask).__name__}")
    shape = tuple(bitmask.shape)
    ok_rank = bitmask.dim() == 2 or (bitmask.dim() == 1 and logits.dim() == 1)
    rows = shape[0] if bitmask.dim() == 2 else 1
    if bitmask.dtype != torch.int32 or not ok_rank or rows != batch or shape[-1] > bitmask_words(v) \
            or shape[-1] == 0:
        raise BitmaskError(f"apply_bitmask_: the bitmask must be {want}, got "
                           f"{str(bitmask.dtype).replace('torch.', '')} of shape {shape}")
    if bitmask.device != logits.device:
        raise BitmaskError(f"apply_bitmask_: the bitmask is on {bitmask.device} and the logits on {logits.device}; "
                           f"move it first (bitmask.to(logits.device)): expected {want}")
    if indices is not None and isinstance(indices, torch.Tensor) and indices.device != logits.device \
            and indices.device.type != "cpu":
        raise BitmaskError(f"apply_bitmask_: indices are on {indices.device}, the logits on {logits.device}")


@njit(cache=True, nogil=True)
def _or_bits(words, ids):
    for q in range(ids.shape[0]):
        words[ids[q] >> 5] |= np.uint32(1) << np.uint32(ids[q] & 31)


@njit(cache=True, nogil=True)
def _and_not_bits(words, ids):
    for q in range(ids.shape[0]):
        words[ids[q] >> 5] &= ~(np.uint32(1) << np.uint32(ids[q] & 31))


def set_bits(words: np.ndarray, ids) -> np.ndarray:
    """Set the bits of token ``ids`` in the uint32 mask row ``words`` (in place); returns it.
    (A kernel: ``np.bitwise_or.at`` costs ~6 us even for the one or two EOS ids of an accepting mask.)"""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size:
        _or_bits(words, ids)
    return words


def clear_bits(words: np.ndarray, ids) -> np.ndarray:
    """Clear the bits of token ``ids`` in the uint32 mask row ``words`` (in place); returns it."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size:
        _and_not_bits(words, ids)
    return words


def bitmask_to_ids(row) -> np.ndarray:
    """Token ids allowed by one mask row (numpy or torch), sorted ascending."""
    if isinstance(row, torch.Tensor):
        row = row.detach().cpu().numpy()
    bits = np.unpackbits(np.ascontiguousarray(row, dtype=np.int32).view(np.uint8), bitorder="little")
    return np.flatnonzero(bits).astype(np.int64)
