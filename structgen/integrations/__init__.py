"""Thin shims that plug matchers into other libraries' decoding loops (the transformers
``LogitsProcessor``).  They use only the :class:`~structgen.Matcher` protocol and a compiled
grammar's ``matcher()`` and ``vocab``; they may import ``kernels``, ``runtime`` and
``decoding``, never ``api``.
"""
