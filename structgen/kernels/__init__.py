"""Numba kernels and torch ops on flat arrays: bitmask allocation, application and unpacking
(:mod:`.bitmask`), token-trie walks (:mod:`.trie_walk`), graph kernels on dense tables
(:mod:`.graph`).  Imports only numpy, numba and torch.
"""
