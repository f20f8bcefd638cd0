"""JSONSchemaBench: generate under each engine's mask and check what comes out.

For every schema, an engine *declares* coverage when it compiles the schema; its output is
*compliant* when generation ended with EOS and the text parses as JSON and validates with
``jsonschema`` (the draft named by ``$schema``, format checks on).  Per engine and subset:

- declared coverage = compiled / schemas, empirical coverage = compliant / schemas,
  compliance = compliant / compiled;
- GCT (grammar compile time), TTFT (time to first token, from the request, so GCT included)
  and TPOT (time per output token after the first).

Models (``--model``):

- ``random``: :class:`RandomModel`, random logits with no language model: it samples among the
  tokens the mask allows (EOS with probability 1/2 once allowed), then after 96 tokens heads
  for the end, so it checks that masked paths end compliant, cheaply and for every engine
  alike.  ``compliance_at_eos`` in the summary separates outputs cut at the token limit from
  outputs that ended and are invalid;
- a transformers model name or folder, or ``smollm2`` (default: the embedded SmolLM2-135M
  demo): greedy decoding of the benchmark's prompt (a system instruction and the schema as the
  user message).  structgen decodes with ``sg.generate``; the peers with one shared
  KV-cached loop that masks the logits with the engine's bitmask.

Generation stops at EOS, at ``max_tokens`` (2048) or at the run limit (60 s).
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np

SYSTEM_PROMPT = ("You need to generate a JSON object that matches the schema below. "
                 "Answer with the JSON object only.")


# ----------------------------------------------------------------------------- data
def load_records(data, *, limit_per_subset: int | None = None, subsets=None, extra: bool = False) -> list[dict]:
    """JSONSchemaBench records from ``DATA/<Subset>.jsonl`` (the dev split; ``extra`` adds
    ``maskbench_extra/``), as tasks ``{"id", "subset", "schema", "tests"}``.

    ``limit_per_subset`` takes that many records from each subset, evenly spaced through the
    file (a deterministic stratified sample).  Subsets are interleaved round-robin, so any
    prefix of the list (an interrupted run) is still stratified."""
    data = Path(data)
    files = sorted(data.glob("*.jsonl"))
    if extra:
        files += sorted((data / "maskbench_extra").glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"no *.jsonl files under {data}")
    per_file = []
    for f in files:
        if subsets and f.stem not in subsets:
            continue
        with open(f) as fh:
            recs = [json.loads(line) for line in fh if line.strip()]
        if limit_per_subset is not None and limit_per_subset < len(recs):
            step = len(recs) / limit_per_subset
            recs = [recs[int(i * step)] for i in range(limit_per_subset)]
        per_file.append([{"id": f"{r.get('subset', f.stem)}/{r['unique_id']}", "subset": r.get("subset", f.stem),
                          "schema": json.loads(r["json_schema"]) if isinstance(r["json_schema"], str)
                          else r["json_schema"], "tests": r.get("tests", [])} for r in recs])
    tasks = []
    for k in range(max((len(x) for x in per_file), default=0)):
        tasks += [x[k] for x in per_file if k < len(x)]
    return tasks


def check_compliance(text: str, schema) -> tuple[bool, str | None]:
    """(valid, reason): ``text`` parses as JSON and validates under ``schema`` with format checks."""
    import jsonschema

    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        return False, f"not JSON: {str(e)[:120]}"
    try:
        cls = jsonschema.validators.validator_for(schema)
        err = jsonschema.exceptions.best_match(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(value))
    except Exception as e:  # unresolvable $ref, invalid schema...
        return False, f"validator: {type(e).__name__}: {str(e)[:120]}"
    if err is not None:
        return False, f"invalid: {err.message[:160]}"
    return True, None


# ----------------------------------------------------------------------------- models
class RandomModel:
    """Random logits, no language model (see the module docstring).

    ``sample(bitmask, rng, step)`` picks an allowed token id, or ``None`` when the mask is
    empty.  For the first ``budget`` steps it samples with tokens that start by closing a
    string, object or array (``"``, ``}``, ``]``) weighted up; after that it heads for the end
    (EOS when allowed, else a token starting with ``"``, else with ``}`` or ``]``, else any),
    so that free-form strings, keys and numbers do not run into the token limit."""

    def __init__(self, tok, closer_weight: float = 20.0, stop_probability: float = 0.5, budget: int = 96):
        v = tok.vocab
        self.width = tok.width
        self.eos = np.asarray(tok.eos_ids, dtype=np.int64)
        first = np.zeros(self.width, dtype=np.uint8)
        for i in np.flatnonzero(v.is_normal[: v.size]).tolist():
            first[i] = v.token_bytes(i)[0]
        self.quote = first == ord('"')
        self.bracket = (first == ord("}")) | (first == ord("]"))
        weight = np.where(self.quote | self.bracket, closer_weight, 1.0)
        weight[self.eos] = 0.0
        self.weight = weight
        self.stop_probability = stop_probability
        self.budget = budget

    def sample(self, bitmask, rng, step: int = 0) -> int | None:
        bits = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")[: self.width].astype(bool)
        eos_allowed = self.eos[bits[self.eos]]
        finishing = step >= self.budget
        if eos_allowed.size and (finishing or rng.random() < self.stop_probability):
            return int(eos_allowed[0])
        if finishing:
            for pref in (self.quote, self.bracket):
                ids = np.flatnonzero(bits & pref)
                if ids.size:
                    return int(ids[rng.integers(ids.size)])
        ids = np.flatnonzero(bits)
        w = self.weight[ids]
        total = w.sum()
        if total <= 0:
            return int(eos_allowed[0]) if eos_allowed.size else None
        return int(ids[np.searchsorted(np.cumsum(w), rng.random() * total, side="right").clip(0, ids.size - 1)])


def load_model(name: str | None):
    """(model, tokenizer) for ``name`` (``None`` / ``"smollm2"`` = the embedded demo model)."""
    from structgen.models import load_demo, load_model as _load

    if name in (None, "smollm2", "demo"):
        return load_demo()
    return _load(name)


def _seed(task_id: str, seed: int = 0) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{task_id}".encode()).digest()[:8], "little")


# ----------------------------------------------------------------------------- one task
def generate_task(engine, task: dict, model, tok, lim, phase=lambda p: None) -> dict:
    """Compile ``task["schema"]`` with ``engine``, generate, check: a dict of fields for the
    result record (status, declared, compliant, gct_ms, ttft_ms, tpot_ms, tokens, finish, text)."""
    from .engines import EngineRefusal, StructgenEngine

    schema = task["schema"]
    out = {"declared": False, "compliant": False, "gct_ms": None, "ttft_ms": None, "tpot_ms": None,
           "tokens": 0, "finish": None, "text": None, "reason": None}
    if not isinstance(model, RandomModel) and isinstance(engine, StructgenEngine):
        return _structgen_generate(engine, schema, model, tok, lim, out, phase)
    t0 = time.perf_counter()
    try:
        compiled = engine.compile(schema)
    except EngineRefusal as e:
        out.update(status="refused", error=str(e)[:300])
        return out
    except Exception as e:
        out.update(status="error", error=f"{type(e).__name__}: {str(e)[:300]}")
        return out
    gct = time.perf_counter() - t0
    out["gct_ms"] = round(1e3 * gct, 4)
    if gct > lim.compile_s:
        out.update(status="compile_timeout", error=f"GCT {gct:.1f} s > {lim.compile_s:g} s")
        return out
    out["declared"] = True
    phase("run")
    m = compiled.matcher()
    if isinstance(model, RandomModel):
        ids, finish, t_first, t_end = _random_loop(m, model, tok, lim, np.random.default_rng(_seed(task["id"])))
    else:
        ids, finish, t_first, t_end = _hf_loop(m, model, tok, schema, lim)
    _timings(out, t0, t_first, t_end, len(ids) + (finish == "eos"))
    text = tok.decode(ids)
    out.update(tokens=len(ids), finish=finish, text=text[:4000])
    if finish == "eos":
        out["compliant"], out["reason"] = check_compliance(text, schema)
    else:
        out["reason"] = f"stopped: {finish}"
    if finish == "timeout":
        out.update(status="run_timeout", error=f"generation took over {lim.run_s:g} s")
    return out


def _timings(out, t0, t_first, t_end, n):
    if t_first is not None:
        out["ttft_ms"] = round(1e3 * (t_first - t0), 4)
        if n > 1:
            out["tpot_ms"] = round(1e3 * (t_end - t_first) / (n - 1), 4)


def _random_loop(m, model: RandomModel, tok, lim, rng):
    bm = tok.allocate()
    eos = set(tok.eos_ids)
    ids: list[int] = []
    t_first = None
    t_start = time.perf_counter()
    finish = "length"
    for step in range(lim.max_tokens + 1):
        m.fill_mask(bm)
        t = model.sample(bm, rng, step)
        if t_first is None:
            t_first = time.perf_counter()
        if t is None:
            finish = "dead_end"
            break
        if t in eos:
            finish = "eos" if m.is_accepting() else "rejected"
            break
        if len(ids) >= lim.max_tokens:
            break
        if not m.advance(t):
            finish = "rejected"   # the mask allowed a token the matcher refused
            break
        ids.append(t)
        if time.perf_counter() - t_start > lim.run_s:
            finish = "timeout"
            break
    return ids, finish, t_first, time.perf_counter()


def _messages(schema) -> list[dict]:
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": json.dumps(schema, ensure_ascii=False)}]


def _hf_loop(m, model, tok, schema, lim):
    """Greedy decoding with a KV cache; the engine's bitmask masks the logits."""
    import torch

    hf = tok.hf
    prompt = hf.apply_chat_template(_messages(schema), add_generation_prompt=True, tokenize=True)
    if isinstance(prompt, dict) or hasattr(prompt, "input_ids"):
        prompt = prompt["input_ids"]
    input_ids = torch.tensor([list(prompt)], dtype=torch.long)
    bm = tok.allocate()
    eos = set(tok.eos_ids)
    bit = torch.arange(32, dtype=torch.int32)
    ids: list[int] = []
    past, t_first, finish = None, None, "length"
    t_start = time.perf_counter()
    with torch.no_grad():
        for _ in range(lim.max_tokens + 1):
            outp = model(input_ids=input_ids, past_key_values=past, use_cache=True)
            past = outp.past_key_values
            logits = outp.logits[0, -1].float()
            m.fill_mask(bm)
            allowed = ((torch.from_numpy(bm[0]).unsqueeze(1) >> bit) & 1).reshape(-1)[: logits.shape[0]].bool()
            if not bool(allowed.any()):
                finish = "dead_end"
                break
            t = int(torch.where(allowed, logits, torch.tensor(float("-inf"))).argmax())
            if t_first is None:
                t_first = time.perf_counter()
            if t in eos:
                finish = "eos" if m.is_accepting() else "rejected"
                break
            if len(ids) >= lim.max_tokens:
                break
            if not m.advance(t):
                finish = "rejected"
                break
            ids.append(t)
            input_ids = torch.tensor([[t]], dtype=torch.long)
            if time.perf_counter() - t_start > lim.run_s:
                finish = "timeout"
                break
    return ids, finish, t_first, time.perf_counter()


def _structgen_generate(engine, schema, model, tok, lim, out, phase):
    """structgen with a real model: ``sg.generate`` (compile included in its timings)."""
    import structgen as sg

    phase("run")
    t0 = time.perf_counter()
    try:
        r = sg.generate(model, tok.hf, _messages(schema), schema=schema, max_new_tokens=lim.max_tokens,
                        whitespace=engine.whitespace, schema_options={"hygiene": engine.hygiene})
    except sg.StructgenError as e:
        out.update(status="refused", error=f"{type(e).__name__}: {str(e)[:300]}")
        return out
    except Exception as e:
        out.update(status="error", error=f"{type(e).__name__}: {str(e)[:300]}")
        return out
    wall = time.perf_counter() - t0
    tm = r.timings or {}
    gct = float(tm.get("compile") or 0.0)
    out["declared"] = True
    out["gct_ms"] = round(1e3 * gct, 4)
    if tm.get("first_token") is not None:
        out["ttft_ms"] = round(1e3 * (gct + float(tm["first_token"])), 4)
        n = len(r.token_ids)
        if n > 1:
            out["tpot_ms"] = round(1e3 * (float(tm.get("decode", wall)) - float(tm["first_token"])) / (n - 1), 4)
    finish = "eos" if r.complete and r.finish_reason == "stop" else ("length" if r.finish_reason == "length"
                                                                       else str(r.finish_reason))
    out.update(tokens=len(r.token_ids), finish=finish, text=r.text[:4000])
    if r.complete:
        out["compliant"], out["reason"] = check_compliance(r.text, schema)
    else:
        out["reason"] = f"stopped: {finish}"
    if wall > lim.run_s:
        out.update(status="run_timeout", error=f"generation took {wall:.1f} s > {lim.run_s:g} s")
    return out
