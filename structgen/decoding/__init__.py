"""Decoders: the autoregressive loop (batched, KV cache, fast-forward, token healing); others
may join (speculative, diffusion, beam).

Decoders drive constraints only through the :class:`~structgen.Matcher` protocol
(:mod:`structgen.runtime.protocol`), never an implementation's attributes.  May import
``errors``, ``kernels``, ``vocab``, ``runtime`` and, for model plumbing, torch and
transformers; never ``cfg``, ``frontends``, ``integrations`` or ``api``.
"""
