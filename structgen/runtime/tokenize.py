"""Text to tokens for forced text: the helpers behind every matcher's ``forced_tokens``.

- :func:`tokenize_exact`: tokens whose bytes concatenate to exactly the given bytes, the
  tokenizer's own (canonical) encoding when it round-trips, else greedy longest match.
- :func:`allowed_token_crosses`: whether an allowed token starts with some bytes and runs
  past them (the boundary rule that decides how many forced tokens to back off).

Only the vocabulary's public arrays are read (``encode``/``decode``, the token trie).
"""
from __future__ import annotations

import numpy as np

__all__ = ["tokenize_exact", "greedy_tokenize", "allowed_token_crosses"]


def tokenize_exact(vocab, data: bytes) -> list[int]:
    """Tokens whose bytes concatenate to ``data``: the tokenizer's own encoding when it
    round-trips exactly (and uses normal tokens only), else :func:`greedy_tokenize`;
    ``[]`` when no segmentation exists."""
    try:
        ids = vocab.encode(data.decode("utf-8"))
        if vocab.decode(ids) == data and all(vocab.is_normal[i] for i in ids):
            return [int(i) for i in ids]
    except Exception:  # a tokenizer that cannot encode this text: fall back to the trie
        pass
    return greedy_tokenize(vocab, data)


def greedy_tokenize(vocab, data: bytes) -> list[int]:
    """Greedy longest-match segmentation of ``data`` over the token trie (``[]`` if stuck)."""
    trie = vocab.trie
    out, pos = [], 0
    while pos < len(data):
        node, best, best_len, depth = 0, -1, 0, 0
        while pos + depth < len(data):
            found = trie.child(node, data[pos + depth])
            if found < 0:
                break
            node, depth = found, depth + 1
            if trie.tok_ptr[node + 1] > trie.tok_ptr[node]:
                best, best_len = int(trie.tok_ids[trie.tok_ptr[node]]), depth
        if best < 0:
            return []
        out.append(best)
        pos += best_len
    return out


def allowed_token_crosses(words: np.ndarray, vocab, rest: bytes) -> bool:
    """True when a token allowed by ``words`` (uint32 mask words) starts with ``rest`` and
    runs past its end: the tokens below ``rest``'s trie node, that node's own excluded."""
    trie = vocab.trie
    node = 0
    for b in rest:
        found = trie.child(node, b)
        if found < 0:
            return False
        node = found
    lo, hi = trie.tok_ptr[node + 1], trie.tok_ptr[trie.node_end[node]]
    if hi <= lo:
        return False
    ids = trie.tok_ids[lo:hi]
    return bool(((words[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1).any())
