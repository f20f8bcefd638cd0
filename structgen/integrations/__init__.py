"""Thin shims that plug matchers into other libraries' decoding loops."""
