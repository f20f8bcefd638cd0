"""Numba kernels and torch ops on flat arrays.  Imports only numpy, numba and torch."""
