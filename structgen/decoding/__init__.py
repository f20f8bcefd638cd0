"""Decoders: autoregressive (batched, fast-forward); others may join (speculative, diffusion)."""
