"""Per-sequence cursors over compiled constraints."""
from .matcher import Matcher, TokenDFAMatcher, fill_bitmasks

__all__ = ["Matcher", "TokenDFAMatcher", "fill_bitmasks"]
