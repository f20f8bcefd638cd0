"""Automaton × vocabulary: token-level transitions and masks.

:class:`TokenDFA` (:mod:`.token_dfa`) turns a byte DFA into per-state token masks (bitmask rows,
built lazily by a trie walk and cached) and CSR rows ``(indptr, token_ids, next_state)``;
:class:`DeviceTokenDFA` holds them on an accelerator.  :class:`ItemIndex` (:mod:`.items`, its Numba kernels in :mod:`.item_kernels`) is a set of token
sequences as a CSR trie; :mod:`.catalog` adds and removes items.  :mod:`.slices` holds generic vocabulary
slices (tokens made only of a character set, configured by the front end that compiles).

May import: ``errors``, ``kernels``, ``vocab``, ``automaton``.  Knows nothing of JSON.
"""
from .token_dfa import TokenDFA, DeviceTokenDFA
from .items import ItemIndex, DeviceItemIndex

__all__ = ["TokenDFA", "DeviceTokenDFA", "ItemIndex", "DeviceItemIndex"]
