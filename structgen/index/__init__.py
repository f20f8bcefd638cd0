"""Automaton × vocabulary: token-level transitions and masks."""
from .token_dfa import TokenDFA, DeviceTokenDFA

__all__ = ["TokenDFA", "DeviceTokenDFA"]
