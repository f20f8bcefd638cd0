"""Batched autoregressive decoding under constraints, with a KV cache and fast-forward.

One loop serves every constraint kind and unconstrained rows (matcher ``None``).  It
talks to a matcher only through the :class:`~structgen.Matcher` protocol (``fill_bitmask``,
``advance``, ``advance_many``, ``advance_bytes``, ``rollback``, ``forced_tokens``,
``is_terminated``), so any implementation of it works here.  Per step:

1. *Masks first.*  A row's mask depends only on its matcher, which has already
   consumed every token the row will feed, so masks are filled before the forward
   pass.  A constrained row whose mask allows only EOS is finished here: it needs
   no forward pass at all.
2. *One forward pass* feeds each live row's pending tokens: the prompt on the
   first step, afterwards the sampled token plus any fast-forwarded tokens.  Rows
   feed different numbers of tokens, so each step's input is left-padded; padding
   (anywhere in the sequence) is masked out by the attention mask and skipped by
   the position ids, so the cache never needs compaction.
3. From the last position's logits: record log Z_t, the log of the probability
   mass (at temperature 1) the mask keeps, apply the mask, sample.
4. Advance the matcher.  With ``fast_forward`` the matcher's ``forced_tokens()``
   (canonical tokens of the text the constraint forces, backed off at the
   boundary, algorithms.md §6) are appended at once and fed in the next pass
   instead of being sampled one pass each.

Token healing (algorithms.md §9): the caller drops the prompt's last token and
passes its bytes as ``heal``; the first sampled token must start with them, and
the rest of its bytes must be a valid start of the constrained output (checked with
``advance_bytes`` and ``rollback``; the sampled token's rest is then fed with
``advance_bytes``, one step).

``decode_steps`` is a generator yielding after each step, which streaming uses;
``decode`` runs it to the end.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import StructgenError
from ..kernels.bitmask import allocate_bitmask, apply_bitmask_, bitmask_words, set_bits
from ..runtime.protocol import Matcher
from .model import CausalLM
from .options import check_sampling

__all__ = ["Row", "DecodeStats", "decode", "decode_steps", "sample", "sampling_probs", "advance_bytes"]


@dataclass
class Row:
    """One sequence of the batch: its inputs, constraint cursor and what it produced."""

    prompt_ids: list[int]
    matcher: Matcher | None = None   # None: unconstrained
    heal: bytes = b""                # bytes the first token must start with (token healing)
    output_ids: list[int] = field(default_factory=list)   # generated tokens, EOS excluded
    finish_reason: str | None = None  # "stop" (EOS / constraint complete) or "length"
    log_kept_mass: list[float] = field(default_factory=list)  # log Z_t per sampled step
    sampled: int = 0
    forced: int = 0
    forward_passes: int = 0
    healed_prefix_len: int = 0       # bytes of output_ids[0] that belong to the prompt
    draft_forward_passes: int = 0    # speculative decoding: draft-model passes of this row
    draft_proposed: dict = field(default_factory=dict)   # speculative: draft tokens per source
    draft_accepted: dict = field(default_factory=dict)   # speculative: accepted drafts per source
    _pending: list[int] = field(default_factory=list)
    _fed: int = 0                    # real tokens already in the KV cache


@dataclass
class DecodeStats:
    """Batch-level counters and timings (seconds) of one decode call."""

    forward_passes: int = 0
    draft_forward_passes: int = 0    # speculative decoding only
    steps: int = 0
    forward_seconds: float = 0.0
    mask_seconds: float = 0.0
    sample_seconds: float = 0.0
    total_seconds: float = 0.0
    first_token_seconds: float | None = None


def sampling_probs(logits: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """The distribution :func:`sample` draws from for (already masked) float logits ``[n, V]``
    at ``temperature > 0``: logits divided by the temperature, cut to the ``top_k`` best
    (0 = no cut) and to the smallest set whose probability reaches ``top_p``, softmaxed."""
    # shifted by the maximum first (the softmax is the same) and the temperature kept above the
    # dtype's smallest normal: a tiny temperature then gives 0 and -inf (greedy), not NaN
    t = max(float(temperature), torch.finfo(logits.dtype).tiny)
    x = (logits - logits.max(dim=-1, keepdim=True).values) / t
    if top_k and 0 < top_k < x.shape[-1]:
        kth = torch.topk(x, int(top_k), dim=-1).values[:, -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        srt, idx = torch.sort(x, dim=-1, descending=True)
        probs = torch.softmax(srt, dim=-1)
        # drop a token when the mass before it already reaches top_p (the best always stays)
        drop = (probs.cumsum(dim=-1) - probs) >= float(top_p)
        drop[..., 0] = False   # even when top_p underflows the dtype
        srt = srt.masked_fill(drop, float("-inf"))
        x = torch.full_like(x, float("-inf")).scatter(-1, idx, srt)
    return torch.softmax(x, dim=-1)


def sample(logits: torch.Tensor, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
           generator: torch.Generator | None = None) -> torch.Tensor:
    """Token ids ``[n]`` from (already masked) float logits ``[n, V]``.

    ``temperature == 0`` is greedy (argmax); otherwise a draw from :func:`sampling_probs`.
    Options out of their domain (a negative or non-finite temperature, ``top_p`` outside
    (0, 1], ...) raise :class:`~structgen.errors.OptionError`.
    """
    _, temperature, top_k, top_p = check_sampling(1, temperature, top_k, top_p)
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = sampling_probs(logits, temperature, top_k, top_p)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def advance_bytes(matcher: Matcher, data: bytes) -> Matcher | None:
    """A fork of ``matcher`` advanced through raw ``data`` (not token-aligned), or None
    when ``data`` cannot start a valid continuation."""
    m = matcher.fork()
    if not data:
        return m
    return m if m.advance_bytes(data) else None


def _takes_bytes(matcher: Matcher, data: bytes) -> bool:
    """Whether ``matcher`` accepts the raw bytes ``data`` now (its point unchanged)."""
    if not data:
        return True
    if not matcher.advance_bytes(data):
        return False
    matcher.rollback(1)
    return True


def _tokens_starting_with(vocab, prefix: bytes) -> np.ndarray:
    """Ids of normal tokens whose bytes start with ``prefix`` (vectorised over the vocabulary)."""
    lengths = vocab.token_lengths
    ok = vocab.is_normal & (lengths >= len(prefix))
    starts = vocab.token_offsets[:-1]
    data = vocab.token_data
    for j, b in enumerate(prefix):
        idx = np.flatnonzero(ok)
        ok[idx] = data[starts[idx] + j] == b
    return np.flatnonzero(ok)


def _set_bits(row: torch.Tensor, ids) -> None:
    words = set_bits(np.zeros(row.shape[-1], dtype=np.uint32), ids)
    row.copy_(torch.from_numpy(words.view(np.int32)))


def decode_steps(model, rows: list[Row], vocab, *, max_new_tokens: int = 256, temperature: float = 0.0,
                 top_k: int = 0, top_p: float = 1.0, generator: torch.Generator | None = None,
                 fast_forward: bool = True, pad_id: int | None = None, stats: DecodeStats | None = None,
                 on_logits=None):
    """Decode ``rows`` in one batch; yields ``[(row_index, new_token_ids), ...]`` after each step.

    ``vocab`` gives EOS ids and token bytes (and the mask width).  ``on_logits(i, ids, logits)``
    is called (for tests) with each row's fed sequence and its raw next-token logits.
    Raises :class:`~structgen.errors.OptionError` (before any forward pass) for sampling options
    out of their domain (see :mod:`structgen.decoding.options`).
    """
    max_new_tokens, temperature, top_k, top_p = check_sampling(max_new_tokens, temperature, top_k, top_p)
    m = CausalLM(model)
    stats = stats if stats is not None else DecodeStats()
    t_start = time.perf_counter()
    eos = [int(e) for e in vocab.eos_ids]
    eos_set = set(eos)
    pad = int(pad_id if pad_id is not None else eos[0])
    n = len(rows)
    width = vocab.logits_width
    bitmask = allocate_bitmask(n, width)
    eos_row = torch.zeros(bitmask_words(width), dtype=torch.int32)
    _set_bits(eos_row, eos)
    healing = {}   # row -> {token: the bytes of it after the healed prefix}
    for i, r in enumerate(rows):
        r._pending = list(r.prompt_ids)
        if not r._pending:
            raise ValueError(f"prompt {i} is empty: a causal LM needs at least one token to condition on")
        if r.heal:
            cand = _tokens_starting_with(vocab, r.heal)
            rests = {int(t): vocab.token_bytes(int(t))[len(r.heal):] for t in cand.tolist()}
            if r.matcher is None:
                healing[i] = rests
            else:
                table = {t: rest for t, rest in rests.items() if _takes_bytes(r.matcher, rest)}
                if not table:
                    raise StructgenError(f"token healing: no token starts with the prompt's last bytes "
                                         f"{r.heal!r} and continues into the constraint")
                healing[i] = table
        elif r.matcher is not None and fast_forward:
            forced = [int(f) for f in r.matcher.forced_tokens()][:max_new_tokens]
            if forced:
                if r.matcher.advance_many(forced) != len(forced):
                    raise StructgenError(f"internal error: the matcher rejected its own forced tokens {forced}")
                r.output_ids.extend(forced)
                r._pending.extend(forced)
                r.forced += len(forced)
                yield [(i, forced)]
                if len(r.output_ids) >= max_new_tokens:
                    r.finish_reason = "length"
    cache = None
    attn = torch.zeros((n, 0), dtype=torch.long)
    fed_ids: list[list[int]] = [[] for _ in range(n)]   # real tokens per row (for on_logits)

    while True:
        # 1. masks (and rows the constraint has finished)
        t0 = time.perf_counter()
        live = [i for i, r in enumerate(rows) if r.finish_reason is None]
        masked_rows = []
        for i in live:
            r = rows[i]
            if i in healing:
                _set_bits(bitmask[i], list(healing[i]))
                masked_rows.append(i)
            elif r.matcher is not None:
                if r.matcher.is_terminated():
                    r.finish_reason = "stop"
                    continue
                r.matcher.fill_bitmask(bitmask, i)
                if torch.equal(bitmask[i], eos_row):
                    r.finish_reason = "stop"   # only EOS is left: done without another pass
                    continue
                masked_rows.append(i)
        live = [i for i in live if rows[i].finish_reason is None]
        stats.mask_seconds += time.perf_counter() - t0
        if not live:
            break
        # 2. one forward pass over every live row's pending tokens
        t0 = time.perf_counter()
        width_step = max(len(rows[i]._pending) for i in live)
        ids = torch.full((n, width_step), pad, dtype=torch.long)
        step_mask = torch.zeros((n, width_step), dtype=torch.long)
        pos = torch.zeros((n, width_step), dtype=torch.long)
        for i in live:
            r = rows[i]
            k = len(r._pending)
            ids[i, width_step - k:] = torch.tensor(r._pending, dtype=torch.long)
            step_mask[i, width_step - k:] = 1
            pos[i, width_step - k:] = torch.arange(r._fed, r._fed + k)
            r._fed += k
            r.forward_passes += 1
            fed_ids[i].extend(r._pending)
            r._pending = []
        attn = torch.cat([attn, step_mask], dim=1)
        logits, cache = m.forward(ids.to(m.device), attn.to(m.device), pos.to(m.device), cache)
        logits = logits[:, -1, :]
        stats.forward_passes += 1
        stats.steps += 1
        stats.forward_seconds += time.perf_counter() - t0
        # 3. kept mass, mask, sample
        t0 = time.perf_counter()
        lg = logits.index_select(0, torch.tensor(live, dtype=torch.long, device=logits.device))
        if on_logits is not None:
            for j, i in enumerate(live):
                on_logits(i, list(fed_ids[i]), lg[j].detach().clone())
        masked_set = set(masked_rows)
        log_z = None
        if masked_rows:
            sel = [j for j, i in enumerate(live) if i in masked_set]
            sel_t = torch.tensor(sel, dtype=torch.long, device=lg.device)
            sub = lg.index_select(0, sel_t)
            lse_all = torch.logsumexp(sub, dim=-1)
            apply_bitmask_(sub, bitmask.index_select(0, torch.tensor(masked_rows)).to(lg.device))
            log_z = (torch.logsumexp(sub, dim=-1) - lse_all).tolist()
            if float("-inf") in log_z:
                bad = [live[j] for j, z in zip(sel, log_z) if z == float("-inf")]
                raise StructgenError(f"internal error: the constraint allows no token for rows {bad}")
            lg.index_copy_(0, sel_t, sub)
            log_z = dict(zip((live[j] for j in sel), log_z))
        t1 = time.perf_counter()
        stats.mask_seconds += t1 - t0
        toks = sample(lg, temperature, top_k, top_p, generator).tolist()
        stats.sample_seconds += time.perf_counter() - t1
        if stats.first_token_seconds is None:
            stats.first_token_seconds = time.perf_counter() - t_start
        # 4. advance matchers, fast-forward
        t0 = time.perf_counter()
        events = []
        for j, i in enumerate(live):
            r, tok = rows[i], int(toks[j])
            r.sampled += 1
            if log_z is not None and i in log_z:
                r.log_kept_mass.append(float(log_z[i]))
            if i in healing:
                rest = healing.pop(i)[tok]
                r.healed_prefix_len = len(r.heal)
                if r.matcher is not None and rest and not r.matcher.advance_bytes(rest):
                    raise StructgenError(f"internal error: the matcher rejected the healed token {tok} (row {i})")
                new = [tok]
            elif tok in eos_set:
                if r.matcher is not None and not r.matcher.advance(tok):
                    raise StructgenError(f"internal error: EOS sampled outside an accepting state (row {i})")
                r.finish_reason = "stop"
                continue
            else:
                if r.matcher is not None and not r.matcher.advance(tok):
                    raise StructgenError(f"internal error: the matcher rejected masked token {tok} (row {i})")
                new = [tok]
            budget = max_new_tokens - len(r.output_ids) - 1
            if fast_forward and r.matcher is not None and budget > 0:
                forced = list(r.matcher.forced_tokens())[:budget]
                for f in forced:
                    if not r.matcher.advance(int(f)):
                        raise StructgenError(f"internal error: the matcher rejected its own forced token {f}")
                r.forced += len(forced)
                new += [int(f) for f in forced]
            r.output_ids.extend(new)
            r._pending = list(new)
            events.append((i, new))
            if len(r.output_ids) >= max_new_tokens:
                r.finish_reason = "length"
        stats.mask_seconds += time.perf_counter() - t0
        if events:
            yield events
    stats.total_seconds += time.perf_counter() - t_start


def decode(model, rows: list[Row], vocab, **options) -> DecodeStats:
    """Run :func:`decode_steps` to the end; the rows hold the results."""
    stats = options.pop("stats", None) or DecodeStats()
    for _ in decode_steps(model, rows, vocab, stats=stats, **options):
        pass
    return stats
