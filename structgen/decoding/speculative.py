"""Speculative decoding under constraints, lossless.

Each step, every live row builds a :class:`~structgen.decoding.drafts.Plan`: a chain of draft
tokens walked from its current point with the row's matcher, which also yields the mask at
every position of the chain.  Drafts come from three sources, tried in this order at each
position:

* **grammar** — the canonical tokens of the text the constraint forces that fast-forward did
  not take (its boundary back-off; all of the forced text when fast-forward is off);
* **prompt lookup** — the token that followed the latest earlier occurrence of the last
  n-gram of the prompt and output so far;
* **draft model** — a smaller causal LM with the same tokenizer, sampled from *its masked*
  distribution (it never proposes a token the constraint refuses).

With ``fast_forward`` on, the tokens the constraint forces after a draft ride along for free,
exactly as the autoregressive loop appends them after a sampled token.  One target forward
pass then scores the whole chain (the row's new tokens, the drafts, the forced tokens), and
the chain is verified position by position with the standard rule applied to the **masked**
distributions: with p′ the target's masked, temperature / top-k / top-p processed distribution
and q′ the draft's (one-hot for deterministic sources), a draft ``d`` is accepted with
probability ``min(1, p′(d) / q′(d))``; the first rejection is replaced by a draw from
``norm(max(0, p′ − q′))``, and when every draft is accepted the target's next distribution
gives a bonus token.  Greedy decoding accepts a draft exactly when it is p′'s argmax.

**Guarantee.**  The output has exactly the distribution of non-speculative masked sampling
from the target with the same options (:func:`structgen.decoding.autoregressive.decode`,
fast-forward setting included) — the locally projected distribution, not the grammar-
conditional one (arXiv 2605.07698) — and greedy speculative output equals greedy constrained
output token for token (up to float ties in the model's logits).  Drafts only change speed.

KV caches of the target and the draft are :class:`~structgen.decoding.model.Lane` s: rejected
drafts become holes, never recomputed context.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..errors import OptionError, StructgenError
from ..kernels.bitmask import apply_bitmask_, bitmask_words, set_bits
from .autoregressive import DecodeStats, Row, sampling_probs
from .draft_tree import DraftTree
from .drafts import SOURCES, Plan, lookup_continuation, lookup_firsts
from .model import Lane

__all__ = ["Speculative", "speculative_decode", "speculative_decode_steps", "exact_acceptance"]


@dataclass(frozen=True)
class Speculative:
    """What to draft from and how much.

    ``draft_model``: a transformers causal LM sharing the target's tokenizer (None: no model
    drafts).  ``prompt_lookup`` / ``grammar``: the deterministic sources.  ``num_draft_tokens``:
    drafts per step to start with; with ``adaptive`` the count grows by 2 after a step whose
    drafts were all accepted and shrinks by 1 after a rejection, within 1..``max_draft_tokens``.
    ``tree_width``: candidate branches per step: 1 verifies one chain; more adds branches opened
    by other prompt-lookup continuations, merged into a token tree that one tree-attention pass
    verifies (the model must take 4-D attention masks: eager or SDPA attention).  ``max_ngram`` / ``min_ngram``: n-gram lengths prompt lookup matches.
    """

    draft_model: Any = None
    prompt_lookup: bool = True
    grammar: bool = True
    num_draft_tokens: int = 4
    tree_width: int = 1
    adaptive: bool = True
    max_draft_tokens: int = 16
    max_ngram: int = 3
    min_ngram: int = 1

    def __post_init__(self):
        for name in ("num_draft_tokens", "tree_width", "max_draft_tokens", "max_ngram", "min_ngram"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise OptionError(f"Speculative({name}=...) must be an integer >= 1, not {v!r}")
        if self.min_ngram > self.max_ngram:
            raise OptionError(f"Speculative: min_ngram={self.min_ngram} > max_ngram={self.max_ngram}")
        if self.draft_model is not None and not callable(getattr(self.draft_model, "forward", None)):
            raise OptionError(f"Speculative(draft_model=...) must be a causal LM (a torch module), "
                              f"not {type(self.draft_model).__name__}")


def exact_acceptance(p: torch.Tensor, q: torch.Tensor | None, token: int, generator) -> bool:
    """The speculative-sampling test: accept ``token`` with probability min(1, p[token]/q[token])
    (``q`` None: one-hot on ``token``)."""
    qt = 1.0 if q is None else float(q[token])
    pt = float(p[token])
    if pt >= qt:
        return True
    u = float(torch.rand((), generator=generator))
    return u * qt < pt


def _residual(p: torch.Tensor, q: torch.Tensor | None, token: int) -> torch.Tensor:
    """norm(max(0, p − q)): what to sample after rejecting ``token``."""
    if q is None:
        r = p.clone()
        r[token] = 0.0
    else:
        r = (p - q).clamp_min(0.0)
    s = float(r.sum())
    return p if s <= 0.0 else r / s


def _width(logits: torch.Tensor, width: int) -> torch.Tensor:
    """Logits cut or padded (with -inf) to the vocabulary's logits width."""
    v = logits.shape[-1]
    if v == width:
        return logits
    if v > width:
        return logits[..., :width]
    pad = torch.full((*logits.shape[:-1], width - v), float("-inf"), dtype=logits.dtype, device=logits.device)
    return torch.cat([logits, pad], dim=-1)


_MODEL_FLOOR = 0.15
_PROBE_EVERY = 8


class _Decoder:
    """State of one speculative decode over a batch (see the module docstring)."""

    def __init__(self, model, rows, vocab, spec: Speculative, max_new_tokens, temperature, top_k, top_p,
                 generator, fast_forward, pad_id, stats, accept):
        self.rows, self.vocab, self.spec = rows, vocab, spec
        self.max_new = max_new_tokens
        self.temperature, self.top_k, self.top_p = temperature, top_k, top_p
        self.greedy = temperature is None or temperature <= 0
        self.generator, self.fast_forward = generator, fast_forward
        self.stats = stats
        self.accept = accept
        self.eos = [int(e) for e in vocab.eos_ids]
        self.eos_set = set(self.eos)
        pad = int(pad_id if pad_id is not None else self.eos[0])
        n = len(rows)
        self.width = vocab.logits_width
        self.words = bitmask_words(self.width)
        self.eos_row = torch.from_numpy(set_bits(np.zeros(self.words, dtype=np.uint32), self.eos).view(np.int32))
        self.target = Lane(model, n, pad)
        self.draft = Lane(spec.draft_model, n, pad) if spec.draft_model is not None else None
        self.k = [spec.num_draft_tokens] * n
        # adaptive: a running acceptance rate of the draft model per row; below _MODEL_FLOOR the
        # model drafts only every _PROBE_EVERY steps (a policy fixed before each pass: lossless)
        self.model_rate = [0.5] * n
        self.step_no = 0

    # ---------------------------------------------------------------- helpers
    def context(self, r: Row) -> list[int]:
        return r.prompt_ids + r.output_ids

    def room(self, r: Row, plan: Plan | None = None) -> int:
        """Output tokens the row may still add (beyond the plan's chain)."""
        used = len(r.output_ids) + (len(plan.chain()) if plan is not None else 0)
        return max(0, self.max_new - used)

    def forced_after(self, r: Row) -> list[int]:
        """Fast-forward after a sampled token, as the autoregressive loop does."""
        m = r.matcher
        budget = self.max_new - len(r.output_ids)
        if not self.fast_forward or m is None or budget <= 0:
            return []
        out = []
        for f in list(m.forced_tokens())[:budget]:
            if not m.advance(int(f)):
                raise StructgenError(f"internal error: the matcher rejected its own forced token {f}")
            out.append(int(f))
        return out

    def target_tail(self, i: int) -> list[int]:
        """What the target lane lacks of row ``i``'s context (never empty: the last token's
        logits are needed)."""
        ctx = self.context(self.rows[i])
        tail = self.target.sync(i, ctx)
        if not tail:   # never after a step, which always adds a token; kept for safety
            self.target.truncate(i, len(ctx) - 1)
            tail = ctx[-1:]
        return tail

    def count_pass(self, rows, t0: float) -> None:
        for i in rows:
            self.rows[i].forward_passes += 1
        self.stats.forward_passes += 1
        self.stats.steps += 1
        self.stats.forward_seconds += time.perf_counter() - t0

    def masked(self, rows_lg, rows_bm):
        """``(best, probs, log_z)`` of the target logits ``rows_lg`` under the mask rows
        ``rows_bm`` (None: unconstrained): argmaxes when greedy, else processed distributions,
        and the log of the probability mass each mask keeps."""
        ones = torch.full((self.words,), -1, dtype=torch.int32)
        z = _width(torch.stack(rows_lg).to("cpu"), self.width)
        lse_all = torch.logsumexp(z, dim=-1)
        apply_bitmask_(z, torch.stack([ones if b is None else b for b in rows_bm]))
        log_z = (torch.logsumexp(z, dim=-1) - lse_all).tolist()
        if self.greedy:
            return z.argmax(-1).tolist(), None, log_z
        return None, sampling_probs(z, self.temperature, self.top_k, self.top_p), log_z

    # ---------------------------------------------------------------- plans
    def plan(self, i: int) -> Plan | None:
        r = self.rows[i]
        m = r.matcher
        if m is not None and m.is_terminated():
            r.finish_reason = "stop"
            return None
        bm = torch.zeros((self.k[i] + 2, self.words), dtype=torch.int32) if m is not None else None
        plan = Plan(m, bm, self.eos, self.fast_forward)
        if m is not None and torch.equal(plan.bitmask[0], self.eos_row):
            r.finish_reason = "stop"   # only EOS is left: done without another pass
            return None
        self.extend(i, plan)
        return plan

    def extend(self, i: int, plan: Plan) -> None:
        """Add deterministic drafts (grammar, prompt lookup) to ``plan`` up to the row's budget."""
        r = self.rows[i]
        m = r.matcher
        budget = min(self.k[i], self.room(r) - 1)
        ctx = self.context(r)
        while plan.drafts < budget and not plan.closed:
            room = self.room(r, plan)
            if self.spec.grammar and m is not None:
                extra = m.forced_tokens(max_back_off=0)
                if extra and plan.propose(int(extra[0]), "grammar", max_forced=room - 1):
                    continue
            if self.spec.prompt_lookup:
                cont = lookup_continuation(ctx + plan.chain(), self.spec.max_ngram, self.spec.min_ngram, 1)
                if cont and cont[0] not in self.eos_set and plan.propose(int(cont[0]), "prompt_lookup",
                                                                         max_forced=room - 1):
                    continue
            break

    def model_drafts(self, plans: dict[int, Plan]) -> None:
        """Extend the plans with draft-model tokens, one batched draft pass per token."""
        lane = self.draft
        while True:
            active = [i for i, p in plans.items()
                      if not p.closed and p.drafts < min(self.k[i], self.room(self.rows[i]) - 1)
                      and (not self.spec.adaptive or self.model_rate[i] >= _MODEL_FLOOR
                           or self.step_no % _PROBE_EVERY == 0)]
            if not active:
                return
            chunks = {}
            for i in active:
                want = self.context(self.rows[i]) + plans[i].chain()
                tail = lane.sync(i, want)
                if not tail:   # already holds it all: re-feed the last token for its logits
                    lane.truncate(i, len(want) - 1)
                    tail = want[-1:]
                chunks[i] = tail
            out = lane.feed(chunks, keep=1)
            self.stats.draft_forward_passes += 1
            lg = _width(torch.stack([out[i][-1] for i in active]).to("cpu"), self.width)
            masks = torch.stack([plans[i].bitmask[plans[i].slots[-1].mask] if plans[i].matcher is not None
                                 else torch.full((self.words,), -1, dtype=torch.int32) for i in active])
            apply_bitmask_(lg, masks)
            if self.greedy:
                toks, qs = lg.argmax(-1).tolist(), [None] * len(active)
            else:
                probs = sampling_probs(lg, self.temperature, self.top_k, self.top_p)
                toks = torch.multinomial(probs, 1, generator=self.generator).squeeze(-1).tolist()
                qs = list(probs)
            for i, t, q in zip(active, toks, qs):
                self.rows[i].draft_forward_passes += 1
                plan = plans[i]
                if not plan.propose(int(t), "draft_model", q, max_forced=self.room(self.rows[i], plan) - 1):
                    raise StructgenError(f"internal error: the matcher rejected masked draft token {t} (row {i})")

    # ---------------------------------------------------------------- one step
    def step(self):
        self.step_no += 1
        t0 = time.perf_counter()
        plans = {}
        for i, r in enumerate(self.rows):
            if r.finish_reason is None:
                p = self.plan(i)
                if p is not None:
                    plans[i] = p
        if not plans:
            return None
        if self.draft is not None:
            self.model_drafts(plans)
        self.stats.mask_seconds += time.perf_counter() - t0
        if self.spec.tree_width > 1:
            return self.step_tree(plans)
        # one target pass over every row's new tokens and chain
        t0 = time.perf_counter()
        chains = {i: p.chain() for i, p in plans.items()}
        olds = {i: len(self.context(self.rows[i])) for i in plans}
        chunks = {i: self.target_tail(i) + chains[i] for i in plans}
        out = self.target.feed(chunks, keep={i: len(c) + 1 for i, c in chains.items()})
        self.count_pass(plans, t0)
        # masked target distributions at every slot
        t0 = time.perf_counter()
        index, rows_lg, rows_bm = {}, [], []
        for i, p in plans.items():
            lg, off = out[i], 0
            for s, slot in enumerate(p.slots):
                index[(i, s)] = len(rows_lg)
                rows_lg.append(lg[off])
                rows_bm.append(None if slot.mask is None else p.bitmask[slot.mask])
                if slot.token is not None:
                    off += 1 + len(slot.after)
        best, probs, log_z = self.masked(rows_lg, rows_bm)
        t1 = time.perf_counter()
        self.stats.mask_seconds += t1 - t0
        events = []
        for i, p in plans.items():
            new = self.verify(i, p, index, best, probs, log_z, olds[i])
            if new:
                events.append((i, new))
        self.stats.sample_seconds += time.perf_counter() - t1
        return events

    def alternatives(self, i: int, main: Plan) -> list[Plan]:
        """Up to ``tree_width - 1`` more plans for row ``i``, each opened by another token that
        followed an earlier occurrence of the context's last n-gram (then extended as usual)."""
        r = self.rows[i]
        taken = {main.slots[0].token}
        out = []
        for t in lookup_firsts(self.context(r), self.spec.max_ngram, self.spec.min_ngram, self.spec.tree_width + 1):
            if len(out) >= self.spec.tree_width - 1:
                break
            if t in taken or t in self.eos_set:
                continue
            taken.add(t)
            bm = torch.zeros((self.k[i] + 2, self.words), dtype=torch.int32) if r.matcher is not None else None
            p = Plan(r.matcher, bm, self.eos, self.fast_forward)
            if p.propose(int(t), "prompt_lookup", max_forced=self.room(r) - 1):
                self.extend(i, p)
                out.append(p)
            p.rewind(0)
        return out

    def step_tree(self, plans: dict[int, Plan]):
        """Verify each row's plans merged into a token tree, in one tree-attention pass."""
        t0 = time.perf_counter()
        trees = {}
        for i, p in plans.items():
            p.rewind(0)
            trees[i] = DraftTree([p] + self.alternatives(i, p), self.eos)
        self.stats.mask_seconds += time.perf_counter() - t0
        t0 = time.perf_counter()
        chunks = {i: (self.target_tail(i), *tree.flatten()) for i, tree in trees.items()}
        out = self.target.feed_tree(chunks)
        self.count_pass(trees, t0)
        t0 = time.perf_counter()
        index, rows_lg, rows_bm = {}, [], []
        for i, tree in trees.items():
            for node in tree.nodes():
                if node.ends:
                    continue
                index[(i, id(node))] = len(rows_lg)
                rows_lg.append(out[i][node.pos + 1])
                rows_bm.append(node.mask)
        best, probs, log_z = self.masked(rows_lg, rows_bm)
        self.stats.mask_seconds += time.perf_counter() - t0
        events = []
        for i, tree in trees.items():
            new = self.verify_tree(i, tree, index, best, probs, log_z)
            if new:
                events.append((i, new))
        return events

    def verify_tree(self, i: int, tree: DraftTree, index, best, probs, log_z) -> list[int]:
        r = self.rows[i]
        m = r.matcher
        for e in tree.edges():
            r.draft_proposed[e.source] = r.draft_proposed.get(e.source, 0) + 1
        node, path, taken, new, ended, accepted = tree.root, [], [], None, False, 0
        while True:
            g = index[(i, id(node))]
            if m is not None:
                r.log_kept_mass.append(log_z[g])
            chosen = None
            if self.greedy:
                chosen = next((e for e in node.edges if e.token == best[g]), None)
                if chosen is None:
                    new = best[g]
            else:
                rest = probs[g]
                for e in node.edges:
                    if self.accept(rest, e.q, e.token, self.generator):
                        chosen = e
                        break
                    rest = _residual(rest, e.q, e.token)
                if chosen is None:
                    new = int(torch.multinomial(rest, 1, generator=self.generator))
            if chosen is None:
                break
            accepted += 1
            r.draft_accepted[chosen.source] = r.draft_accepted.get(chosen.source, 0) + 1
            path.extend(range(chosen.first, chosen.first + 1 + len(chosen.after)))
            for t in [chosen.token] + chosen.after:
                if m is not None and not m.advance(t):
                    raise StructgenError(f"internal error: the matcher rejected accepted draft token {t} (row {i})")
            if chosen.token in self.eos_set:
                ended = True
                break
            taken.append(chosen.token)
            taken.extend(chosen.after)
            r.forced += len(chosen.after)
            node = chosen.child
        r.sampled += accepted + (1 if new is not None else 0)
        self.target.keep_path(i, path)
        self.adapt(i, tree.depth(), accepted)
        return self.commit(i, taken, new, ended)

    def verify(self, i: int, plan: Plan, index, best, probs, log_z, old_len: int) -> list[int]:
        """Accept a prefix of row ``i``'s chain, add the target's token, commit; returns what
        the row's output gained."""
        r = self.rows[i]
        taken, keep_steps, fed = [], 0, 0
        new, ended = None, False
        drafts = plan.drafts
        accepted = 0
        for s, slot in enumerate(plan.slots):
            g = index[(i, s)]
            if slot.token is None:                      # bonus
                new = best[g] if self.greedy else int(torch.multinomial(probs[g], 1, generator=self.generator))
                if r.matcher is not None:
                    r.log_kept_mass.append(log_z[g])
                break
            r.draft_proposed[slot.source] = r.draft_proposed.get(slot.source, 0) + 1
            d = slot.token
            ok = (best[g] == d) if self.greedy else self.accept(probs[g], slot.q, d, self.generator)
            if r.matcher is not None:
                r.log_kept_mass.append(log_z[g])
            if not ok:
                if self.greedy:
                    new = best[g]
                else:
                    new = int(torch.multinomial(_residual(probs[g], slot.q, d), 1, generator=self.generator))
                # the remaining drafts were proposed but never reached
                for later in plan.slots[s + 1:]:
                    if later.token is not None:
                        r.draft_proposed[later.source] = r.draft_proposed.get(later.source, 0) + 1
                break
            accepted += 1
            r.draft_accepted[slot.source] = r.draft_accepted.get(slot.source, 0) + 1
            keep_steps += 1 + len(slot.after)
            fed += 1 + len(slot.after)
            if d in self.eos_set:
                ended = True
                break
            taken.append(d)
            taken.extend(slot.after)
            r.forced += len(slot.after)
        r.sampled += accepted + (1 if new is not None else 0)
        plan.rewind(keep_steps)
        self.target.truncate(i, old_len + fed)
        model_prop = sum(1 for x in plan.slots if x.source == "draft_model")
        if model_prop:
            model_acc = sum(1 for x in plan.slots[:accepted] if x.source == "draft_model")
            self.model_rate[i] = 0.7 * self.model_rate[i] + 0.3 * model_acc / model_prop
        self.adapt(i, drafts, accepted)
        return self.commit(i, taken, new, ended)

    def adapt(self, i: int, drafts: int, accepted: int) -> None:
        if self.spec.adaptive and drafts:
            if accepted == drafts:
                self.k[i] = min(self.k[i] + 2, self.spec.max_draft_tokens)
            else:
                self.k[i] = max(1, self.k[i] - 1)

    def commit(self, i: int, taken: list[int], new, ended: bool) -> list[int]:
        """Row ``i``'s matcher already holds ``taken`` (accepted drafts, with EOS when ``ended``):
        add them and the target's token ``new`` (with fast-forward) to the output, apply
        ``max_new_tokens``; returns what the output gained."""
        r = self.rows[i]
        m = r.matcher
        r.output_ids.extend(taken)
        gained = list(taken)
        if new is not None:
            new = int(new)
            if m is not None and not m.advance(new):
                raise StructgenError(f"internal error: the matcher rejected masked token {new} (row {i})")
            if new in self.eos_set:
                ended = True
            else:
                r.output_ids.append(new)
                forced = self.forced_after(r)
                r.forced += len(forced)
                r.output_ids.extend(forced)
                gained += [new] + forced
        if len(r.output_ids) >= self.max_new:
            extra = len(r.output_ids) - self.max_new
            if m is not None and (extra or ended):
                m.rollback(extra + (1 if ended else 0))
            if extra:
                del r.output_ids[self.max_new:]
                gained = gained[:len(gained) - extra]
            r.finish_reason = "length"
        elif ended:
            r.finish_reason = "stop"
        return gained


def speculative_decode_steps(model, rows: list[Row], vocab, spec: Speculative, *, max_new_tokens: int = 256,
                             temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                             generator: torch.Generator | None = None, fast_forward: bool = True,
                             pad_id: int | None = None, stats: DecodeStats | None = None, accept=None):
    """Decode ``rows`` speculatively in one batch; yields ``[(row_index, new_token_ids), ...]``
    after each target pass (the same contract as
    :func:`~structgen.decoding.autoregressive.decode_steps`).

    ``accept(p, q, token, generator) -> bool`` replaces the acceptance test (default
    :func:`exact_acceptance`; tests pass a wrong one as a control).  Token healing is not
    supported here.  Rows gain ``draft_proposed`` / ``draft_accepted`` (per source) and
    ``draft_forward_passes``.
    """
    if not isinstance(spec, Speculative):
        raise OptionError(f"speculative= takes a structgen.Speculative, not {type(spec).__name__}")
    if max_new_tokens < 1:
        raise OptionError(f"max_new_tokens must be >= 1, not {max_new_tokens}")
    if any(r.heal for r in rows):
        raise OptionError("token healing is not supported with speculative decoding")
    stats = stats if stats is not None else DecodeStats()
    t_start = time.perf_counter()
    dec = _Decoder(model, rows, vocab, spec, max_new_tokens, temperature, top_k, top_p, generator, fast_forward,
                   pad_id, stats, accept or exact_acceptance)
    for i, r in enumerate(rows):
        if not r.prompt_ids:
            raise OptionError(f"prompt {i} is empty: a causal LM needs at least one token to condition on")
        r.draft_proposed = {s: 0 for s in SOURCES}
        r.draft_accepted = {s: 0 for s in SOURCES}
        forced = dec.forced_after(r)
        if forced:
            r.output_ids.extend(forced)
            r.forced += len(forced)
            yield [(i, forced)]
            if len(r.output_ids) >= max_new_tokens:
                r.finish_reason = "length"
    while True:
        events = dec.step()
        if events is None:
            break
        if stats.first_token_seconds is None:
            stats.first_token_seconds = time.perf_counter() - t_start
        if events:
            yield events
    stats.total_seconds += time.perf_counter() - t_start


def speculative_decode(model, rows: list[Row], vocab, spec: Speculative, **options) -> DecodeStats:
    """Run :func:`speculative_decode_steps` to the end; the rows hold the results."""
    stats = options.pop("stats", None) or DecodeStats()
    for _ in speculative_decode_steps(model, rows, vocab, spec, stats=stats, **options):
        pass
    return stats

