"""Diffusion decoding under constraints.

``completable`` (:mod:`.completable`): whether a canvas with holes can still become a
sentence, exactly, for regular constraints and grammars; ``Lookahead`` (:mod:`.lookahead`):
the propose / look ahead / verify acceptance engine of ``method="lookahead"``.

May import everything up to ``grammar``/``compiler`` (``cfg`` and ``runtime`` included); never
``integrations``, ``models`` or ``api``.
"""
from .completable import completable

__all__ = ["completable"]
