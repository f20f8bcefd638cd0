"""Packed token bitmasks and applying them to logits.

Layout (shared with xgrammar and llguidance): int32 ``[batch, ceil(V / 32)]``,
bit ``i`` of word ``j`` stands for token ``32 * j + i``; 1 means allowed.  ``V``
is the model's logits width.  Everything here is torch ops only, so the same
code runs on CPU and CUDA tensors without a host round-trip.
"""
from __future__ import annotations

import numpy as np
import torch

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

    ``logits`` is ``[batch, V]`` (or ``[V]`` with a one-row mask); ``bitmask`` is
    ``[batch, ceil(V'/32)]`` int32 on the same device.  Tokens beyond the mask's
    width are disallowed; mask bits beyond ``V`` are ignored.  ``indices``
    optionally selects the logits rows (and mask rows) to touch.
    """
    squeeze = logits.dim() == 1
    if squeeze:
        logits = logits.unsqueeze(0)
    if bitmask.device != logits.device:
        bitmask = bitmask.to(logits.device, non_blocking=True)
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


def set_bits(words: np.ndarray, ids) -> np.ndarray:
    """Set the bits of token ``ids`` in the uint32 mask row ``words`` (in place); returns it."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size:
        np.bitwise_or.at(words, ids >> 5, np.uint32(1) << (ids & 31).astype(np.uint32))
    return words


def clear_bits(words: np.ndarray, ids) -> np.ndarray:
    """Clear the bits of token ``ids`` in the uint32 mask row ``words`` (in place); returns it."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size:
        np.bitwise_and.at(words, ids >> 5, ~(np.uint32(1) << (ids & 31).astype(np.uint32)))
    return words


def bitmask_to_ids(row) -> np.ndarray:
    """Token ids allowed by one mask row (numpy or torch), sorted ascending."""
    if isinstance(row, torch.Tensor):
        row = row.detach().cpu().numpy()
    bits = np.unpackbits(np.ascontiguousarray(row, dtype=np.int32).view(np.uint8), bitorder="little")
    return np.flatnonzero(bits).astype(np.int64)
