"""The model plumbing decoders share: a transformers causal LM behind one call, and a
:class:`Lane` — one model's KV cache over a batch whose rows grow, and shrink, independently.

A lane never copies or compacts its cache.  Each call appends one block of columns for every
row (right-aligned chunks, left padding); a token a decoder takes back (a rejected draft) is
not cropped but turned into a hole: its attention-mask column is cleared and the next token
reuses its position id.  Attention and rotary positions then see exactly the sequence the
row holds, so a row's logits do not depend on what its neighbours or its own past drafts did.
"""
from __future__ import annotations

import inspect

import torch

__all__ = ["CausalLM", "Lane"]


class CausalLM:
    """The few facts about a transformers causal LM that the decoders need."""

    def __init__(self, model):
        self.model = model
        params = inspect.signature(model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"
        self.keep_last = "logits_to_keep" in params
        self.device = next(model.parameters()).device

    @property
    def dtype(self):
        return next(self.model.parameters()).dtype

    def forward(self, ids, attention_mask, position_ids, cache, keep: int = 1):
        """Float logits ``[B, keep, V]`` of the last ``keep`` positions, and the new cache."""
        kw = {"input_ids": ids, "attention_mask": attention_mask, "position_ids": position_ids,
              "use_cache": True}
        if cache is not None:
            kw[self.cache_kw] = cache
        if self.keep_last:
            kw["logits_to_keep"] = int(keep)
        with torch.inference_mode():
            out = self.model(**kw)
        new_cache = out.get("cache")
        if new_cache is None:
            new_cache = out.get("past_key_values")
        return out.logits[:, -keep:, :].float(), new_cache


class Lane:
    """One model's KV cache over ``n`` rows.

    ``tokens(i)`` is what row ``i`` holds; :meth:`feed` appends chunks and returns their
    logits, :meth:`truncate` takes tokens back, :meth:`sync` makes a row hold a prefix of a
    given context and returns the rest, which the next :meth:`feed` must append.
    """

    def __init__(self, model, n: int, pad_id: int):
        self.lm = model if isinstance(model, CausalLM) else CausalLM(model)
        self.n = n
        self.pad = int(pad_id)
        self.cache = None
        self.attn = torch.zeros((n, 0), dtype=torch.long)
        self.toks: list[list[int]] = [[] for _ in range(n)]
        self.cols: list[list[int]] = [[] for _ in range(n)]
        self.passes = 0

    def tokens(self, i: int) -> list[int]:
        return self.toks[i]

    def truncate(self, i: int, length: int) -> None:
        """Keep the first ``length`` tokens of row ``i``; the rest become holes."""
        if length < len(self.toks[i]):
            self.attn[i, self.cols[i][length:]] = 0
            del self.toks[i][length:]
            del self.cols[i][length:]

    def sync(self, i: int, context) -> list[int]:
        """Truncate row ``i`` to its longest common prefix with ``context``; return the tail of
        ``context`` it still lacks."""
        held = self.toks[i]
        k = 0
        limit = min(len(held), len(context))
        while k < limit and held[k] == context[k]:
            k += 1
        self.truncate(i, k)
        return list(context[k:])

    def feed(self, chunks: dict[int, list[int]], keep: int | dict[int, int] = 1) -> dict[int, torch.Tensor]:
        """Append ``chunks[i]`` to row ``i`` (rows not named get padding) in one forward pass.

        ``keep`` (per row or for all): how many of a chunk's last positions to return logits
        for.  Returns ``{i: logits [min(keep_i, len(chunk)), V]}``; the last row of each is the
        distribution of the token after the chunk.
        """
        chunks = {i: list(c) for i, c in chunks.items() if c}
        if not chunks:
            return {}
        width = max(len(c) for c in chunks.values())
        per = {i: min(len(c), keep[i] if isinstance(keep, dict) else keep) for i, c in chunks.items()}
        k_all = max(per.values())
        n = self.n
        ids = torch.full((n, width), self.pad, dtype=torch.long)
        step = torch.zeros((n, width), dtype=torch.long)
        pos = torch.zeros((n, width), dtype=torch.long)
        base = self.attn.shape[1]
        for i, c in chunks.items():
            k = len(c)
            start = len(self.toks[i])
            ids[i, width - k:] = torch.tensor(c, dtype=torch.long)
            step[i, width - k:] = 1
            pos[i, width - k:] = torch.arange(start, start + k)
            self.toks[i].extend(c)
            self.cols[i].extend(range(base + width - k, base + width))
        self.attn = torch.cat([self.attn, step], dim=1)
        dev = self.lm.device
        logits, self.cache = self.lm.forward(ids.to(dev), self.attn.to(dev), pos.to(dev), self.cache, keep=k_all)
        self.passes += 1
        return {i: logits[i, k_all - per[i]:] for i in chunks}

    def feed_tree(self, chunks: dict[int, tuple[list[int], list[int], list[int]]]) -> dict[int, torch.Tensor]:
        """One pass over ``chunks[i] = (tail, tree_tokens, parents)``: the tail is appended to row
        ``i`` as by :meth:`feed`; the tree's tokens attend to the row, the tail and their own
        ancestors only (``parents[k]``: block index of token k's predecessor, -1 = the tail's
        last), with positions by depth.  Tree tokens are held as holes until :meth:`keep_path`.
        Returns ``{i: logits [1 + len(tree_tokens), V]}``: the tail's last position, then each
        tree token's.  Needs a model taking 4-D float attention masks (eager or SDPA attention)."""
        chunks = {i: c for i, c in chunks.items() if c[0] or c[1]}
        width = max(len(t) + len(tr) for t, tr, _ in chunks.values())
        n, base = self.n, self.attn.shape[1]
        ids = torch.full((n, width), self.pad, dtype=torch.long)
        step = torch.zeros((n, width), dtype=torch.long)
        pos = torch.zeros((n, width), dtype=torch.long)
        block = torch.eye(width, dtype=torch.bool).unsqueeze(0).repeat(n, 1, 1)   # padding sees itself
        past = torch.zeros((n, width, base), dtype=torch.bool)
        self.tree_cols = {}
        for i, (tail, tree, parents) in chunks.items():
            L = len(tail) + len(tree)
            off = width - L
            start = len(self.toks[i])
            ids[i, off:] = torch.tensor(list(tail) + list(tree), dtype=torch.long)
            step[i, off:off + len(tail)] = 1
            past[i, off:, :] = self.attn[i].bool().unsqueeze(0)
            for j in range(len(tail)):
                pos[i, off + j] = start + j
                block[i, off + j, off:off + j + 1] = True
            depth = []
            for k, p in enumerate(parents):
                d = 0 if p < 0 else depth[p] + 1
                depth.append(d)
                q = off + len(tail) + k
                pos[i, q] = start + len(tail) + d
                block[i, q, off:off + len(tail)] = True
                a = k
                while a >= 0:   # the token itself and its ancestors
                    block[i, q, off + len(tail) + a] = True
                    a = parents[a]
            self.toks[i].extend(tail)
            self.cols[i].extend(range(base + off, base + off + len(tail)))
            self.tree_cols[i] = (base + off + len(tail), list(tree))
        self.attn = torch.cat([self.attn, step], dim=1)
        full = torch.cat([past, block], dim=2).unsqueeze(1)
        dtype = self.lm.dtype
        mask = torch.zeros(full.shape, dtype=dtype).masked_fill(~full, torch.finfo(dtype).min)
        dev = self.lm.device
        logits, self.cache = self.lm.forward(ids.to(dev), mask.to(dev), pos.to(dev), self.cache, keep=width)
        self.passes += 1
        out = {}
        for i, (tail, tree, _) in chunks.items():
            k = len(tree) + 1
            out[i] = logits[i, width - k:]
        return out

    def keep_path(self, i: int, path: list[int]) -> None:
        """After :meth:`feed_tree`: row ``i`` holds the tree tokens at block indices ``path``
        (root to leaf, in order); the other tree tokens stay holes."""
        first, tree = self.tree_cols.get(i, (0, []))
        for k in path:
            self.attn[i, first + k] = 1
            self.toks[i].append(tree[k])
            self.cols[i].append(first + k)
