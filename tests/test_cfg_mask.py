"""The mask kernels' argument records (structgen.cfg.mask): each kernel's parameter list is the
concatenation of the records its callers splat, and a record out of step is caught."""
from __future__ import annotations

import pytest

from structgen.cfg import mask as mk


def test_kernel_parameters_match_the_records():
    mk.check_kernel_orders()


def test_a_record_out_of_order_is_caught(monkeypatch):
    parts = list(mk.KERNEL_ORDERS["lex_fill"])
    parts[1], parts[2] = parts[2], parts[1]  # TrieArrays and CacheArrays swapped
    monkeypatch.setitem(mk.KERNEL_ORDERS, "lex_fill", tuple(parts))
    with pytest.raises(AssertionError, match="lex_fill"):
        mk.check_kernel_orders()
