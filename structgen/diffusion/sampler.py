"""A LLaDA / Dream-style masked-diffusion sampler under a constraint.

    out = sgd.generate(model, tokenizer, prompt, regex=r"\\d{3}-\\d{4}", length=64, block_length=32,
                       steps=None, method="map", unmask="confidence", mask_token_id=None,
                       temperature=0.0, seed=None)

``model`` is any callable or ``torch.nn.Module`` that maps ids ``[B, T]`` (mask tokens where
nothing is decided yet) to logits ``[B, T, V]`` (or an output with ``.logits``; ``[B, length, V]``,
the canvas positions only, is accepted too).  It is called with ``attention_mask=`` when its
``forward`` takes one (prompts of a batch are left-padded).  The canvas is the
prompt followed by ``length`` mask tokens, decoded in semi-autoregressive blocks of
``block_length``; each block takes ``steps / (length / block_length)`` steps (``steps=None``: one
token per step), each step one forward pass.  In each step a row

1. picks positions of the current block to unmask (``unmask=``): ``"confidence"`` — the model's
   largest probability there (LLaDA's low-confidence remasking); ``"marginal"`` — the largest
   *constrained* marginal (:func:`~structgen.diffusion.marginals`, Dang & Ermon); ``"random"``;
2. chooses their tokens (``method=``): ``"map"`` — DINGO (:func:`~structgen.diffusion.dingo`) with
   the block's other masked positions as holes; ``"sample"`` — an exact sample of every masked
   position of the block from the product distribution restricted to the constraint
   (:func:`~structgen.diffusion.sample`), of which the picked positions are kept.

Either way the later blocks count as holes and the canvas ends accepting, so after every step the
canvas can still be completed into a valid answer in the positions left, and the final one is
valid: 100 % by construction.  EOS pads a short answer (the vocabulary's EOS ids plus the
tokenizer's pad id when it is a special token).  ``temperature`` > 0 adds Gumbel noise to the
scores for ``"map"`` (LLaDA) and scales the logits for ``"sample"`` (where 0 means 1).

Other methods plug in with :func:`register_method` (``method="lookahead"`` for context-free
grammars is one): ``grammar=`` constraints are accepted only by a method registered with
``grammars=True``.  Results are :class:`~structgen.decoding.result.GenerationResult` with
``forward_passes`` (steps), ``log_kept_mass`` (per step: Σ over the positions unmasked in that step
of log Σ p_i(t) over the tokens t that keep the canvas completable there, the other free positions
counting as holes — the diffusion analogue of an autoregressive step's Z_t, see
:func:`~structgen.diffusion.dp.local_log_mass`) and ``timings`` (``forward`` / ``dp`` totals and
``step_forward`` / ``step_dp`` lists, seconds; ``dp`` covers everything between forward passes).
"""
from __future__ import annotations

import dataclasses
import inspect
import time
from typing import Any, Callable

import numpy as np
import torch

from .. import caching
from ..compiler import compile as compile_grammar
from ..constraints import resolve_constraint
from ..decoding.result import GenerationResult
from ..errors import OptionError, Unsupported
from ..vocab import Vocabulary
from .dp import dingo, local_log_mass, marginals, sample

__all__ = ["generate", "register_method", "BlockStep", "METHODS"]

UNMASK = ("confidence", "marginal", "random")


@dataclasses.dataclass
class BlockStep:
    """What a method sees at one step, for every row of the batch.

    ``log_probs[B, Lb, V]`` (numpy float32, temperature applied) of the current block;
    ``block[B, Lb]`` its tokens (-1 = still masked); ``pick[B, Lb]`` the positions to unmask now;
    ``states``: per row, the matcher after the earlier blocks (None when unconstrained);
    ``compiled`` (None when unconstrained); ``tail``: positions after the block; ``final``:
    the canvas must end accepting; ``eos_ids``; ``rng`` (numpy Generator).  A method returns the
    ``[B, Lb]`` tokens of the picked positions (other entries ignored) and, per row, the log of
    the kept probability mass (or NaN when it does not compute it).
    """

    log_probs: np.ndarray
    block: np.ndarray
    pick: np.ndarray
    states: list
    compiled: Any
    tail: int
    final: bool
    eos_ids: tuple
    rng: np.random.Generator
    temperature: float
    unmask: str
    clean_log_probs: np.ndarray | None = None   # without the Gumbel noise of ``map`` at temperature > 0
    written: np.ndarray | None = None   # a method may set it: [B, Lb] positions it decided (default ``pick``)
    row_stats: list | None = None       # per row a dict the method may fill (-> GenerationResult.method_stats)


#: methods that choose by (Gumbel-perturbed) argmax: ``temperature`` is the noise scale, not a logit scale
_GUMBEL = {"map", "lookahead"}

#: name -> (step function, accepts context-free grammars)
METHODS: dict[str, tuple[Callable[[BlockStep], tuple[np.ndarray, np.ndarray]], bool]] = {}


def register_method(name: str, step: Callable, *, grammars: bool = False) -> None:
    """Make ``method=name`` available; ``step(BlockStep) -> (tokens [B, Lb], log_kept [B])``.
    ``grammars=True``: it handles context-free constraints (``grammar=``)."""
    METHODS[str(name)] = (step, bool(grammars))


# ----------------------------------------------------------------------------- built-in methods
def _fixed_and_masked(st: BlockStep, visible: np.ndarray):
    fixed = np.where(st.block >= 0, st.block, -1)
    masked = (st.block < 0) & ~visible
    return fixed, masked


def _kept(st: BlockStep, fixed: np.ndarray) -> np.ndarray:
    """Per row: Σ over the picked positions of log (mass of the tokens that keep the canvas completable)."""
    lp = st.log_probs if st.clean_log_probs is None else st.clean_log_probs
    per = local_log_mass(lp, st.compiled, st.pick, fixed=fixed, state=st.states, final=st.final, eos_ids=st.eos_ids,
                         tail_holes=st.tail)
    return np.where(st.pick, per, 0.0).sum(axis=1)


def _map_step(st: BlockStep):
    lp = st.log_probs
    if st.compiled is None:
        return lp.argmax(axis=-1), np.zeros(lp.shape[0])
    fixed, masked = _fixed_and_masked(st, st.pick)
    tokens, _ = dingo(lp, st.compiled, masked=masked, fixed=fixed, state=st.states, final=st.final,
                      eos_ids=st.eos_ids, tail_holes=st.tail)
    return tokens, _kept(st, fixed)


def _sample_step(st: BlockStep):
    lp = st.log_probs
    if st.compiled is None:
        p = np.exp(lp - lp.max(axis=-1, keepdims=True))
        cdf = np.cumsum(p / p.sum(axis=-1, keepdims=True), axis=-1)
        u = st.rng.random(cdf.shape[:-1] + (1,))
        return np.minimum((cdf < u).sum(axis=-1), lp.shape[-1] - 1), np.zeros(lp.shape[0])
    fixed, _ = _fixed_and_masked(st, np.ones_like(st.pick))
    tokens = sample(lp, st.compiled, fixed=fixed, state=st.states, final=st.final, eos_ids=st.eos_ids,
                    tail_holes=st.tail, generator=st.rng)
    return tokens[:, 0], _kept(st, fixed)


register_method("map", _map_step)
register_method("sample", _sample_step)


# ----------------------------------------------------------------------------- plumbing
_VOCABS = caching.LRU(8, name="diffusion.vocabularies")  # (id(tokenizer), width) -> (tokenizer, vocab)


def _vocabulary(tokenizer, width: int) -> Vocabulary:
    key = (id(tokenizer), int(width))
    hit = _VOCABS.get(key)
    if hit is not None and hit[0] is tokenizer:
        return hit[1]
    vocab = Vocabulary.from_tokenizer(tokenizer, logits_width=int(width))
    _VOCABS.put(key, (tokenizer, vocab))
    return vocab


def _logits(model, ids: torch.Tensor, attention_mask: torch.Tensor, length: int) -> torch.Tensor:
    fwd = getattr(model, "forward", model)
    try:
        takes_mask = "attention_mask" in inspect.signature(fwd).parameters
    except (TypeError, ValueError):
        takes_mask = False
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=attention_mask) if takes_mask else model(ids)
    logits = getattr(out, "logits", out)
    if isinstance(logits, (tuple, list)):
        logits = logits[0]
    if (not isinstance(logits, torch.Tensor) or logits.dim() != 3 or logits.shape[0] != ids.shape[0]
            or logits.shape[1] not in (ids.shape[1], length)):
        raise OptionError(f"the model must return logits [B, T, V] (or [B, length, V]: the canvas only) for ids "
                          f"{tuple(ids.shape)}, got {getattr(logits, 'shape', type(logits).__name__)}")
    return logits[:, logits.shape[1] - length:]


def _device(model):
    try:
        return next(model.parameters()).device
    except (AttributeError, StopIteration, TypeError):
        return torch.device("cpu")


def _check(length, block_length, steps, method, unmask, temperature):
    for name, v in (("length", length), ("block_length", block_length)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise OptionError(f"{name} must be an integer >= 1, got {v!r}")
    if length % block_length:
        raise OptionError(f"length={length} must be a multiple of block_length={block_length}")
    blocks = length // block_length
    if steps is None:
        steps = length
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < blocks:
        raise OptionError(f"steps must be None or an integer >= the number of blocks ({blocks}), got {steps!r}")
    if steps % blocks:
        raise OptionError(f"steps={steps} must be a multiple of the number of blocks ({blocks})")
    if unmask not in UNMASK:
        raise OptionError(f"unmask must be one of {UNMASK}, got {unmask!r}")
    if method not in METHODS:
        if method == "lookahead":
            raise Unsupported("method='lookahead' is not available in this build (structgen.diffusion.lookahead "
                              "registers it)", where="generate(method=...)")
        raise OptionError(f"method must be one of {sorted(METHODS)}, got {method!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature < float("inf"):
        raise OptionError(f"temperature must be a finite real >= 0, got {temperature!r}")
    return blocks, int(steps) // blocks


def _transfer_counts(block_length: int, steps: int) -> list[int]:
    base, extra = divmod(block_length, steps)
    return [base + (1 if j < extra else 0) for j in range(steps)]


def _pick_positions(conf: np.ndarray, masked: np.ndarray, k: int) -> np.ndarray:
    """[B, Lb] bool: the ``k`` masked positions of largest ``conf`` per row (ties: leftmost)."""
    B, Lb = masked.shape
    score = np.where(masked, conf, -np.inf)
    order = np.argsort(-score, axis=1, kind="stable")
    pick = np.zeros((B, Lb), dtype=bool)
    n = np.minimum(masked.sum(axis=1), k)
    for b in range(B):
        pick[b, order[b, :n[b]]] = True
    return pick


def generate(model, tokenizer, prompt, *, schema=None, regex=None, choices=None, grammar=None, length: int = 64,
             block_length: int = 32, steps: int | None = None, method: str = "map", unmask: str = "confidence",
             mask_token_id: int | None = None, temperature: float = 0.0, seed: int | None = None,
             whitespace: str | None = None, schema_options: dict | None = None, eos_ids=None):
    """Masked-diffusion generation under a constraint (see the module docstring).

    ``prompt``: a string or a list of strings (a batch: returns a list).  Constraint: one of
    ``schema`` (JSON Schemas compile to one automaton here: ``engine="dfa"``), ``regex``,
    ``choices``, or ``grammar`` (only with a method that handles grammars); none = unconstrained.
    ``mask_token_id``: default ``tokenizer.mask_token_id``.  ``eos_ids``: extra ids that may pad
    the answer (special tokens).  Returns :class:`~structgen.decoding.result.GenerationResult`.
    """
    blocks, steps_per_block = _check(length, block_length, steps, method, unmask, temperature)
    step_fn, takes_grammars = METHODS[method]
    if grammar is not None and not takes_grammars:
        raise Unsupported(f"method={method!r} takes regular constraints (schema=, regex=, choices=); grammar= needs "
                          "method='lookahead'", where="generate(grammar=...)")
    mask_id = mask_token_id if mask_token_id is not None else getattr(tokenizer, "mask_token_id", None)
    if mask_id is None:
        raise OptionError("no mask token: pass mask_token_id= (the tokenizer has no mask_token_id)")
    prompts = [prompt] if isinstance(prompt, str) else list(prompt)
    if not prompts or not all(isinstance(p, str) for p in prompts):
        raise TypeError("prompt must be a string or a non-empty list of strings")
    t_start = time.perf_counter()
    dev = _device(model)
    encoded = [[int(i) for i in tokenizer(p)["input_ids"]] for p in prompts]
    B = len(prompts)
    P = max(len(e) for e in encoded)
    pad = getattr(tokenizer, "pad_token_id", None)
    pad = int(mask_id) if pad is None else int(pad)
    ids = torch.full((B, P + length), int(mask_id), dtype=torch.long)
    attn = torch.ones((B, P + length), dtype=torch.long)
    for b, e in enumerate(encoded):            # left padding: the canvas starts at column P for every row
        ids[b, :P - len(e)] = pad
        attn[b, :P - len(e)] = 0
        ids[b, P - len(e):P] = torch.tensor(e, dtype=torch.long)
    ids, attn = ids.to(dev), attn.to(dev)

    spec = {k: v for k, v in (("schema", schema), ("regex", regex), ("choices", choices), ("grammar", grammar))
            if v is not None}
    opts = dict(schema_options or {})
    if schema is not None and not takes_grammars:
        opts.setdefault("engine", "dfa")
    constraint = resolve_constraint(**spec, whitespace=whitespace, schema_options=opts)
    t0 = time.perf_counter()
    first = _logits(model, ids, attn, length)
    first_forward = time.perf_counter() - t0
    width = int(first.shape[-1])
    vocab = _vocabulary(tokenizer, width)
    extra_eos = [int(t) for t in (eos_ids or ())]
    if getattr(tokenizer, "pad_token_id", None) is not None:
        tp = int(tokenizer.pad_token_id)
        if tp < vocab.size and not vocab.is_normal[tp] and tp != int(mask_id):
            extra_eos.append(tp)
    eos = tuple(sorted(set(extra_eos) | {int(t) for t in vocab.eos_ids}))
    compiled = compile_grammar(constraint.grammar, vocab) if constraint.grammar is not None else None
    compile_s = time.perf_counter() - t0 - first_forward
    states = [compiled.matcher() for _ in range(B)] if compiled is not None else [None] * B
    rng = np.random.default_rng(seed)
    gen = torch.Generator(device=dev)
    gen.manual_seed(int(rng.integers(2 ** 62)))
    step_forward, step_dp, kept = [], [], [[] for _ in range(B)]
    row_stats = [{} for _ in range(B)]
    logits = first
    counts = _transfer_counts(block_length, steps_per_block)
    for k in range(blocks):
        lo, hi = P + k * block_length, P + (k + 1) * block_length
        block = np.full((B, block_length), -1, dtype=np.int64)
        for j in range(steps_per_block):
            if logits is None:
                tf = time.perf_counter()
                logits = _logits(model, ids, attn, length)
                step_forward.append(time.perf_counter() - tf)
            else:
                step_forward.append(first_forward)
            td = time.perf_counter()
            noisy = method in _GUMBEL and temperature > 0       # temperature enters as Gumbel noise there
            raw = logits[:, lo - P:hi - P].float()
            if method != "map" and not noisy and temperature > 0 and temperature != 1:
                raw = raw / temperature
            clean = torch.log_softmax(raw, dim=-1)
            if int(mask_id) < clean.shape[-1]:
                clean[..., int(mask_id)] = float("-inf")      # the model never writes a mask token
            lp = clean
            if noisy:                                        # LLaDA: Gumbel-perturbed scores
                u = torch.rand(clean.shape, generator=gen, device=clean.device).clamp_(1e-20, 1.0)
                lp = clean - temperature * torch.log(-torch.log(u))
            lp_np = lp.cpu().numpy()
            masked_now = block < 0
            if j == steps_per_block - 1:
                pick = masked_now.copy()
            else:
                pick = _choose(unmask, clean, masked_now, block, counts[j], compiled, states, eos,
                               (blocks - k - 1) * block_length, rng)
            st = BlockStep(lp_np, block.copy(), pick, states, compiled, (blocks - k - 1) * block_length, True,
                           eos, rng, float(temperature), unmask,
                           clean.cpu().numpy() if noisy else None,
                           row_stats=row_stats)
            tokens, lk = step_fn(st)
            tokens = np.asarray(tokens)
            block = np.where(pick if st.written is None else st.written, tokens, block)
            for b in range(B):
                kept[b].append(float(lk[b]))
            ids[:, lo:hi] = torch.from_numpy(np.where(block >= 0, block, int(mask_id))).to(dev)
            step_dp.append(time.perf_counter() - td)
            logits = None
        if compiled is not None:
            for b in range(B):
                for t in block[b].tolist():
                    if states[b].is_terminated():
                        break
                    states[b].advance(int(t))
    total = time.perf_counter() - t_start
    timings = {"compile": compile_s, "decode": total, "forward": float(sum(step_forward)), "dp": float(sum(step_dp)),
               "step_forward": step_forward, "step_dp": step_dp}
    out_ids = ids[:, P:].cpu().tolist()
    results = []
    for b in range(B):
        toks = out_ids[b]
        cut = next((i for i, t in enumerate(toks) if t in eos), len(toks))
        body = toks[:cut]
        text = vocab.decode(body).decode("utf-8", errors="replace")
        if compiled is not None:
            complete = states[b].is_terminated() or states[b].is_accepting()
        else:
            complete = cut < len(toks)
        results.append(GenerationResult(
            text=text, token_ids=body, prompt=prompts[b], prompt_tokens=len(encoded[b]),
            finish_reason="stop" if cut < len(toks) else "length", complete=complete, sampled_tokens=len(body),
            forced_tokens=0, forward_passes=blocks * steps_per_block, log_kept_mass=kept[b], timings=dict(timings),
            constraint=constraint.description, method_stats=row_stats[b], _parse=constraint.parse))
    return results if not isinstance(prompt, str) else results[0]


def _choose(unmask, clean, masked_now, block, k, compiled, states, eos, tail, rng) -> np.ndarray:
    """Which masked positions of the block to unmask now (see the module docstring)."""
    if unmask == "random":
        return _pick_positions(rng.random(masked_now.shape), masked_now, k)
    if unmask == "marginal" and compiled is not None:
        lp = clean.cpu().numpy()
        conf = np.empty(masked_now.shape)
        fixed = np.where(block >= 0, block, -1)
        for b in range(lp.shape[0]):
            probs, _ = marginals(lp[b], compiled, fixed=fixed[b], state=states[b], final=True, eos_ids=eos,
                                 tail_holes=tail)
            conf[b] = probs.max(axis=-1)
        return _pick_positions(conf, masked_now, k)
    conf = clean.max(dim=-1).values.exp().cpu().numpy()
    return _pick_positions(conf, masked_now, k)
