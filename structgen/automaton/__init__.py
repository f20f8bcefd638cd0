"""Byte-level automata: the regular-language IR, ByteDFA, and the builder.

``build_dfa(node)`` turns an IR node (:mod:`.ir`) into a minimal, trimmed
:class:`ByteDFA`; :mod:`.ops` combines ByteDFAs (intersection, union, complement
relative to UTF-8, concatenation, emptiness, equivalence).  Regex text is the front end's
(:func:`structgen.frontends.regex.dfa_from_regex`): nothing here parses a specification.
:mod:`.limits` holds the size / time limits and work budgets, :mod:`.product` the product
constructions.  May import ``errors``, ``caching`` and ``kernels`` only.
"""
from .build import build_dfa, clear_caches
from .dfa import ByteDFA
from .ops import complement, concat, difference, equivalent, intersect, is_empty, union, utf8_star

__all__ = [
    "ByteDFA", "build_dfa", "clear_caches",
    "intersect", "union", "difference", "complement", "concat", "is_empty", "equivalent",
    "utf8_star",
]
