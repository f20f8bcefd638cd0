"""Beam search constrained to an item set (:class:`~structgen.ItemIndex`), batch × beams
vectorised with torch (STATIC, algorithms.md §1).

Every live beam of a step sits at the same trie depth, so one step is:

1. one forward pass for all ``B × K`` beams (KV cache reordered to the surviving beams);
2. ``log_softmax`` of each beam's logits, gathered at the beam's children only: the row of
   its node, read as ``W = max_branch[depth]`` consecutive CSR entries (padding ``-inf``) --
   no ``V``-wide mask;
3. a beam at a terminal node also offers EOS: that candidate (beam score + log p(EOS)) goes
   to the *finished pool* of its batch row (the best ``num_beams`` kept), never competing
   with the children;
4. the next live beams: top ``K`` of the ``K × W`` child candidates.

With ``length_penalty=0.0`` scores are plain sums of log-probabilities (EOS included), which
only fall as a beam grows, so the search stops as soon as no live beam can beat the worst
kept finished one.  With ``num_beams`` at least the number of distinct prefixes at every
depth nothing is pruned, every item is scored and the result is exactly the top items of
exhaustive scoring.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import StructgenError
from ..index.catalog import ItemCatalog
from ..index.items import DeviceItemIndex, ItemIndex, ItemSubset

__all__ = ["beam_search", "BeamSearchOutput"]


@dataclass
class BeamSearchOutput:
    """``sequences``: the finished items, best first (token ids, EOS not included);
    ``scores``: their scores (sum of log-probabilities incl. EOS, divided by
    ``(len + 1) ** length_penalty``).  For a batch of prompts both are lists per prompt."""

    sequences: list
    scores: list
    forward_passes: int = 0


class _Forward:
    """A causal LM called with an attention mask, position ids and a reorderable KV cache."""

    def __init__(self, model):
        self.model = model
        params = inspect.signature(model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"
        self.keep_last = "logits_to_keep" in params
        self.device = next(model.parameters()).device

    def __call__(self, ids, attn, pos, cache):
        kw = {"input_ids": ids, "attention_mask": attn, "position_ids": pos, "use_cache": True}
        if cache is not None:
            kw[self.cache_kw] = cache
        if self.keep_last:
            kw["logits_to_keep"] = 1
        with torch.inference_mode():
            out = self.model(**kw)
        new_cache = out.get("cache")
        if new_cache is None:
            new_cache = out.get("past_key_values")
        return out.logits[:, -1, :].float(), new_cache


def _reorder(cache, idx: torch.Tensor):
    if cache is None:
        return None
    if hasattr(cache, "reorder_cache"):
        res = cache.reorder_cache(idx)
        return cache if res is None else res
    return tuple(tuple(t.index_select(0, idx) for t in layer) for layer in cache)


def _prompts(tokenizer_or_input_ids, prompt):
    """(list of prompt id lists, whether one prompt was given)."""
    src = tokenizer_or_input_ids
    if hasattr(src, "encode") and not isinstance(src, (list, tuple, np.ndarray, torch.Tensor)):
        if prompt is None:
            raise StructgenError("beam_search: with a tokenizer, pass prompt= (a string or a list of strings)")
        texts = [prompt] if isinstance(prompt, str) else list(prompt)
        ids = [list(src(t)["input_ids"]) if callable(src) else list(src.encode(t)) for t in texts]
        return ids, isinstance(prompt, str)
    if isinstance(src, torch.Tensor):
        src = src.tolist()
    elif isinstance(src, np.ndarray):
        src = src.tolist()
    src = list(src)
    if src and not isinstance(src[0], (list, tuple)):
        return [[int(t) for t in src]], True
    return [[int(t) for t in row] for row in src], False


def beam_search(model, tokenizer_or_input_ids, index, num_beams: int = 8, max_new_tokens: int | None = None,
                length_penalty: float = 0.0, *, prompt=None, eos_id: int | None = None,
                pad_id: int | None = None, subset=None) -> BeamSearchOutput:
    """Beam search whose every finished beam is an item of ``index``.

    Args:
        model: a transformers causal LM (or anything with the same forward signature).
        tokenizer_or_input_ids: prompt ids (a list of ints, a list of lists, a 1-D or 2-D
            tensor; prompts may differ in length) or a tokenizer, with ``prompt=`` text.
        index: an :class:`~structgen.ItemIndex` (or its :meth:`~structgen.ItemIndex.to`
            copy on the model's device), an :class:`~structgen.index.items.ItemSubset` or an
            :class:`~structgen.ItemCatalog` (its pending additions are merged first).
        num_beams: live beams per prompt and finished items returned.
        max_new_tokens: most tokens per item, EOS included (default: the longest item + 1).
        length_penalty: 0.0 for plain sums of log-probabilities.
        eos_id: the EOS id scored where an item ends (default ``index.eos_id``).
        subset: restrict to some items (an :class:`~structgen.index.items.ItemSubset`, a
            bool mask over item ids or a list of item ids; ids are ranks in sorted order),
            the same for every prompt; ``index`` may also be an ``ItemSubset``.
    Returns:
        :class:`BeamSearchOutput`, best first.
    Raises:
        StructgenError: no EOS id, or an empty prompt.
    """
    fwd = _Forward(model)
    dev = fwd.device
    if isinstance(index, ItemCatalog):
        index = index.view()
    if isinstance(index, ItemSubset):
        index, subset = index.index, index if subset is None else subset
    host = index.host if isinstance(index, DeviceItemIndex) else index
    if not isinstance(host, ItemIndex):
        raise StructgenError(f"beam_search: expected an ItemIndex, got {type(index).__name__}")
    dix = index if isinstance(index, DeviceItemIndex) and index.device == dev else host.to(dev)
    eos = host.eos_id if eos_id is None else int(eos_id)
    if eos is None:
        raise StructgenError("beam_search: the index has no eos_id; pass eos_id=")
    prompts, single = _prompts(tokenizer_or_input_ids, prompt)
    if any(len(p) == 0 for p in prompts):
        raise StructgenError("beam_search: empty prompt (a causal LM needs at least one token)")
    B, K = len(prompts), int(num_beams)
    if K < 1:
        raise StructgenError(f"beam_search: num_beams must be >= 1, not {num_beams}")
    steps = host.max_depth + 1 if max_new_tokens is None else min(int(max_new_tokens), host.max_depth + 1)
    pad = int(pad_id if pad_id is not None else eos)
    lp = float(length_penalty)
    neg = float("-inf")

    # prompt pass (left padded), then every row's cache copied to its K beams
    P = max(len(p) for p in prompts)
    ids = torch.full((B, P), pad, dtype=torch.long)
    attn = torch.zeros((B, P), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, P - len(p):] = torch.tensor(p)
        attn[i, P - len(p):] = 1
    pos = (attn.cumsum(1) - 1).clamp(min=0)
    ids, attn, pos = ids.to(dev), attn.to(dev), pos.to(dev)
    logits, cache = fwd(ids, attn, pos, None)
    passes = 1
    rep = torch.arange(B, device=dev).repeat_interleave(K)
    cache = _reorder(cache, rep)
    attn = attn.index_select(0, rep)
    last_pos = pos[:, -1].index_select(0, rep)
    logp = torch.log_softmax(logits.index_select(0, rep), dim=-1)          # [B*K, V]

    nodes = torch.full((B, K), -1, dtype=torch.long, device=dev)
    nodes[:, 0] = 0
    score = torch.full((B, K), neg, device=dev)
    score[:, 0] = 0.0
    hist = torch.zeros((B, K, 0), dtype=torch.long, device=dev)
    fin_score = torch.full((B, K), neg, device=dev)                        # finished pool
    fin_seq = torch.full((B, K, steps), -1, dtype=torch.long, device=dev)
    terminal = dix.terminal
    sub = None
    if subset is not None:
        if not isinstance(subset, ItemSubset):
            subset = host.subset(subset)
        sub = tuple(torch.tensor(a, device=dev) for a in (subset.cum, host.item_lo, host.item_hi, subset.mask))
        if host.num_items == 0:
            sub = None
    batch_off = (torch.arange(B, device=dev) * K)[:, None]

    for depth in range(steps):
        live = nodes >= 0
        # 3. EOS at terminal nodes -> finished pool
        term = live & terminal[nodes.clamp(min=0)]
        if sub is not None:   # the item ending at a node is the first of its range
            term &= sub[3][sub[1][nodes.clamp(min=0)].clamp(max=host.num_items - 1)]
        eos_sc = torch.where(term, score + logp[:, eos].view(B, K), torch.full_like(score, neg))
        if lp != 0.0:
            eos_sc = eos_sc / float(depth + 1) ** lp
        seq_now = torch.full((B, K, steps), -1, dtype=torch.long, device=dev)
        seq_now[:, :, :depth] = hist
        all_sc = torch.cat([fin_score, eos_sc], 1)
        all_seq = torch.cat([fin_seq, seq_now], 1)
        fin_score, pick = all_sc.topk(K, dim=1)
        fin_seq = all_seq.gather(1, pick[:, :, None].expand(-1, -1, steps))
        if depth == steps - 1 or depth >= len(host.max_branch):
            break
        W = int(host.max_branch[depth])
        if W == 0:
            break
        # 2. gather each beam's children, score them
        tok, child = dix.gather(nodes.view(-1), W)                        # [B*K, W]
        valid = tok >= 0
        if sub is not None:   # some allowed item below the child: prefix sums over its range
            c = child.clamp(min=0)
            valid &= sub[0][sub[2][c]] > sub[0][sub[1][c]]
        cand = logp.gather(1, tok.clamp(min=0)) + score.view(-1, 1)
        cand = torch.where(valid, cand, torch.full_like(cand, neg)).view(B, K * W)
        k_take = min(K, K * W)
        top, arg = cand.topk(k_take, dim=1)
        src_beam = arg // W                                                # [B, k]
        flat = (src_beam + batch_off).view(-1)
        new_tok = tok.view(B, K * W).gather(1, arg)
        new_node = child.view(B, K * W).gather(1, arg)
        alive = top > neg
        new_node = torch.where(alive, new_node, torch.full_like(new_node, -1))
        if k_take < K:
            fill = K - k_take
            top = torch.cat([top, torch.full((B, fill), neg, device=dev)], 1)
            new_node = torch.cat([new_node, torch.full((B, fill), -1, dtype=torch.long, device=dev)], 1)
            new_tok = torch.cat([new_tok, torch.full((B, fill), pad, dtype=torch.long, device=dev)], 1)
            src_beam = torch.cat([src_beam, torch.zeros((B, fill), dtype=torch.long, device=dev)], 1)
            flat = (src_beam + batch_off).view(-1)
        hist = torch.cat([hist.view(B * K, -1).index_select(0, flat).view(B, K, -1), new_tok[:, :, None]], 2)
        nodes, score = new_node, top
        if not bool((nodes >= 0).any()):
            break
        # sums of log-probs only fall: stop once no live beam can beat a full pool's worst
        if lp == 0.0 and bool((score.max(1).values <= fin_score[:, -1]).all()):
            break
        # 1. forward pass of the chosen tokens, cache reordered to their source beams
        cache = _reorder(cache, flat)
        attn = torch.cat([attn.index_select(0, flat), torch.ones((B * K, 1), dtype=torch.long, device=dev)], 1)
        last_pos = last_pos.index_select(0, flat) + 1
        feed = torch.where(nodes >= 0, new_tok, torch.full_like(new_tok, pad)).view(-1, 1)
        logits, cache = fwd(feed, attn, last_pos[:, None], cache)
        passes += 1
        logp = torch.log_softmax(logits, dim=-1)

    sc = fin_score.cpu().tolist()
    sq = fin_seq.cpu().tolist()
    seqs, scores = [], []
    for b in range(B):
        row_s, row_q = [], []
        for s, q in zip(sc[b], sq[b]):
            if s == neg:
                continue
            row_s.append(float(s))
            row_q.append([t for t in q if t >= 0])
        seqs.append(row_q)
        scores.append(row_s)
    if single:
        return BeamSearchOutput(seqs[0], scores[0], passes)
    return BeamSearchOutput(seqs, scores, passes)
