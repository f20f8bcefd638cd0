"""Front-ends: specifications (regex, JSON Schema, grammars) -> IR."""
from .regex import dfa_from_regex, parse_regex, search_to_full

__all__ = ["parse_regex", "search_to_full", "dfa_from_regex"]
