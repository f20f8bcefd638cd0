"""Speculative decoding under constraints on the demo model (SmolLM2-135M-Instruct, CPU).

Extraction and JSON tasks whose answers copy long spans of the prompt, decoded greedily
(so every speculative mode must give exactly the constrained output — checked) in these modes:

* constrained AR with fast-forward (the baseline), and unconstrained AR beside it;
* speculative from prompt lookup alone, from grammar drafts alone, from both (no draft model);
* speculative from a layer-truncated copy of SmolLM2 (``--draft-layers``), and from everything;
* transformers' own ``model.generate`` with structgen's ``StructgenLogitsProcessor`` (the same
  compiled constraint): plain, with its prompt-lookup decoding (``prompt_lookup_num_tokens``) and
  with assisted generation (``assistant_model``: the truncated copy).  These mask the target only
  and cannot fast-forward; their outputs are checked for validity (greedy, but without
  fast-forward, so the token ids may differ from structgen's).

Per mode: wall seconds for the whole task set (best of ``--repeat``), speedup over constrained
AR, target forward passes, output tokens per target pass, draft acceptance (accepted /
proposed) per source, draft passes.  Run at 1 and 2 torch threads by default.

    python benchmarks/bench_speculative.py
    python benchmarks/bench_speculative.py --threads 1 --repeat 3 --json benchmarks/results/bench_speculative.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import structgen as sg  # noqa: E402
from structgen.models import load_model, truncated_copy  # noqa: E402

DOCS = [
    "Dr. Margaret Elizabeth Thornton-Hughes, chief cardiologist at St. Bartholomew's Hospital in London, "
    "published her findings on 14 March 2024 in the European Heart Journal.",
    "The Northern Lights Festival will take place at Harborview Convention Center, 1250 Pacific Avenue, "
    "Tacoma, Washington, from June 7 to June 9, organised by the Puget Sound Arts Council.",
    "Customer complaint: 'My order #A-99812 of the Sony WH-1000XM5 wireless headphones arrived with a "
    "cracked left ear cup and no charging cable.' Filed by Rahul Venkataraman.",
    "Professor Ingrid Sørensen-Larsen of the Copenhagen Institute for Advanced Linguistics will give the "
    "keynote 'Syntax Beyond Borders' at the Nordic Language Summit in Reykjavík.",
]
EXTRACT = {"type": "object", "properties": {"person": {"type": "string"}, "organisation": {"type": "string"},
                                            "place": {"type": "string"}, "quote": {"type": "string"}},
           "required": ["person", "organisation", "place", "quote"]}
TASKS = [(f"Extract the main person, organisation, place and the longest quoted or titled phrase, copying "
          f"the exact words, as JSON.\nText: {d}", EXTRACT) for d in DOCS] + [
    (f"Copy this sentence exactly into the JSON field 'text'.\nSentence: {d}",
     {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}) for d in DOCS[:2]]


def modes(draft):
    out = {"constrained AR (ff)": None,
           "spec: prompt lookup": sg.Speculative(grammar=False),
           "spec: grammar": sg.Speculative(prompt_lookup=False),
           "spec: lookup + grammar": sg.Speculative()}
    if draft is not None:
        out["spec: draft model"] = sg.Speculative(draft_model=draft, prompt_lookup=False, grammar=False)
        out["spec: all sources"] = sg.Speculative(draft_model=draft)
    return out


def run_transformers(gen, model, tok, max_new, **extra):
    """transformers' ``generate`` over the tasks with structgen's processor; (seconds, results
    as (new ids, valid?), passes unknown)."""
    from transformers import LogitsProcessorList

    from structgen.integrations.transformers import StructgenLogitsProcessor

    t0 = time.perf_counter()
    res = []
    for prompt, schema in TASKS:
        cg = gen.compile(gen.constraint(schema=schema).grammar)
        text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
        ids = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])
        proc = StructgenLogitsProcessor(cg, prompt_length=ids.shape[1])
        out = model.generate(ids, attention_mask=torch.ones_like(ids), logits_processor=LogitsProcessorList([proc]),
                             max_new_tokens=max_new, do_sample=False, pad_token_id=tok.eos_token_id, **extra)
        new = out[0, ids.shape[1]:].tolist()
        m = cg.matcher()
        valid = m.advance_many(new) == len(new) and (m.is_terminated() or m.is_accepting())
        res.append((new, valid))
    return time.perf_counter() - t0, res


def run(gen, spec, max_new, constrained=True):
    t0 = time.perf_counter()
    res = []
    for prompt, schema in TASKS:
        kw = {"schema": schema} if constrained else {}
        res.append(gen(prompt, max_new_tokens=max_new, chat=True, speculative=spec, **kw))
    return time.perf_counter() - t0, res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--draft-layers", type=int, default=6, help="layers of the truncated draft (0: none)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    model, tok = load_model(None)
    draft = truncated_copy(model, args.draft_layers) if args.draft_layers else None
    gen = sg.Generator(model, tok)
    report = {}
    for threads in args.threads:
        torch.set_num_threads(threads)
        run(gen, None, 8)   # warm up (compile, caches)
        rows = {}
        base_ids = None
        for name, spec in list(modes(draft).items()) + [("unconstrained AR", "free")]:
            best, res = None, None
            for _ in range(args.repeat):
                if spec == "free":
                    t, r = run(gen, None, args.max_new_tokens, constrained=False)
                else:
                    t, r = run(gen, spec, args.max_new_tokens)
                if best is None or t < best:
                    best, res = t, r
            toks = sum(len(x.token_ids) for x in res)
            passes = sum(x.forward_passes for x in res)
            prop = {k: sum(x.draft_proposed.get(k, 0) for x in res) for k in ("prompt_lookup", "grammar", "draft_model")}
            acc = {k: sum(x.draft_accepted.get(k, 0) for x in res) for k in prop}
            ids = [x.token_ids for x in res]
            if name == "constrained AR (ff)":
                base_ids = ids
            same = spec == "free" or ids == base_ids
            rows[name] = {"seconds": round(best, 3), "tokens": toks, "target_passes": passes,
                          "tokens_per_pass": round(toks / max(passes, 1), 2),
                          "draft_passes": sum(x.draft_forward_passes for x in res),
                          "proposed": prop, "accepted": acc, "equal_to_constrained_ar": same}
        hf_modes = {"hf generate + processor": {}, "hf prompt lookup + proc.": {"prompt_lookup_num_tokens": 10}}
        if draft is not None:
            hf_modes["hf assisted + processor"] = {"assistant_model": draft}
        for name, extra in hf_modes.items():
            best, res = None, None
            for _ in range(args.repeat):
                t, r = run_transformers(gen, model, tok, args.max_new_tokens, **extra)
                if best is None or t < best:
                    best, res = t, r
            toks = sum(len(ids) for ids, _ in res)
            rows[name] = {"seconds": round(best, 3), "tokens": toks, "target_passes": None, "tokens_per_pass": None,
                          "draft_passes": None, "proposed": {}, "accepted": {},
                          "valid": sum(ok for _, ok in res), "equal_to_constrained_ar": None}
        base = rows["constrained AR (ff)"]["seconds"]
        print(f"\ntorch threads = {threads}; {len(TASKS)} tasks, greedy, max_new_tokens={args.max_new_tokens}")
        print(f"{'mode':26s} {'seconds':>8s} {'speedup':>8s} {'passes':>7s} {'tok/pass':>8s}  acceptance (acc/prop)")
        for name, r in rows.items():
            r["speedup"] = round(base / r["seconds"], 2)
            accs = ", ".join(f"{k} {r['accepted'][k]}/{r['proposed'][k]}" for k in r["proposed"] if r["proposed"][k])
            if r["target_passes"] is None:   # transformers' generate: valid outputs instead of pass counts
                print(f"{name:26s} {r['seconds']:8.2f} {r['speedup']:7.2f}x {'-':>7s} {'-':>8s}  "
                      f"{r['valid']}/{len(TASKS)} valid, {r['tokens']} tokens")
                continue
            flag = "" if r["equal_to_constrained_ar"] else "  OUTPUT DIFFERS"
            print(f"{name:26s} {r['seconds']:8.2f} {r['speedup']:7.2f}x {r['target_passes']:7d} "
                  f"{r['tokens_per_pass']:8.2f}  {accs}{flag}")
        report[f"threads={threads}"] = rows
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
