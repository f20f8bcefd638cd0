"""Lookahead on a tiny random model over the GPT-2 vocabulary: ``--model bert`` (or ``modernbert``), a
BertForMaskedLM (ModernBertForMaskedLM) through ``sgd.generate(method="lookahead")``; ``--model
diffusiongemma``, a DiffusionGemmaForBlockDiffusion through its own ``generate`` with
``DiffusionLogitsProcessor(method="lookahead")`` (canvas = ``--block``, ``max_denoising_steps`` = ``--steps``
per canvas). Reported: validity per grammar (and the unconstrained share), per-step overhead against
unconstrained steps, rejections / recoveries per block, exact-check time (p50 / p99 / max), with the beam
(``beam_width=5``) and without (``beam_width=0``: every proposal the mask does not decide goes to the exact
check).

    python benchmarks/bench_diffusion_lookahead.py --n 200 --length 16 --out benchmarks/results/diffusion_lookahead/cpu.md
    python benchmarks/bench_diffusion_lookahead.py --model diffusiongemma --n 200 --length 12 --block 6 --steps 3

Per-step columns: ``bert``: the sampler's time between forward passes (``timings["step_dp"]``), the
unconstrained one beside; ``diffusiongemma``: the processor's time per call, beside the model's whole
unconstrained denoising step (its forward and its sampling over V).  With ``diffusiongemma`` the exact
checks also count those of the filler that writes the undecided positions of every step.

Grammars: the shipped json, arithmetic and sql Lark grammars, a recursive GBNF grammar and a
recursive JSON Schema; outputs are checked with Lark (the GBNF grammar through its Lark twin)
and jsonschema.  The random model is a worst case for the lookahead: its proposals away from the
prefix are nearly always invalid, so rejections, exact checks and recoveries are frequent.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jsonschema
import lark
import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import structgen as sg  # noqa: E402
import structgen.diffusion as sgd  # noqa: E402
from structgen.diffusion import lookahead as la  # noqa: E402

GBNF = 'root ::= list\nlist ::= "[" ( item ( "," item )* )? "]"\nitem ::= [0-9]+ | list\n'
GBNF_TWIN = 'start: list\nlist: "[" [item ("," item)*] "]"\nitem: /[0-9]+/ | list\n'
TREE = {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["v"], "additionalProperties": False}


def cases():
    out = {}
    for name in ("json", "arithmetic", "sql"):
        text = sg.grammars.load(name)
        out[name] = (dict(grammar=text), _lark_check(text))
    out["gbnf"] = (dict(grammar=GBNF), _lark_check(GBNF_TWIN))
    out["schema"] = (dict(schema=TREE), _schema_check(TREE))
    return out


def _lark_check(text):
    parser = lark.Lark(text, parser="earley", lexer="dynamic_complete")

    def ok(s):
        try:
            parser.parse(s)
            return True
        except lark.exceptions.LarkError:
            return False
    return ok


def _schema_check(schema):
    def ok(s):
        try:
            jsonschema.validate(json.loads(s), schema)
            return True
        except Exception:
            return False
    return ok


class CanvasBert(torch.nn.Module):
    """BertForMaskedLM with the LM head on the canvas only (the sampler accepts [B, length, V])."""

    def __init__(self, mlm, length):
        super().__init__()
        self.mlm, self.length = mlm, length

    def forward(self, input_ids, attention_mask=None):
        h = self.mlm.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.mlm.cls(h[:, -self.length:])


class CanvasMLM(torch.nn.Module):
    """Any masked LM of transformers (its logits on the canvas only)."""

    def __init__(self, mlm, length):
        super().__init__()
        self.mlm, self.length = mlm, length

    def forward(self, input_ids, attention_mask=None):
        return self.mlm(input_ids=input_ids, attention_mask=attention_mask).logits[:, -self.length:]


def model_and_tokenizer(length, kind="bert"):
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    tok = AutoTokenizer.from_pretrained(str(ROOT / "tests/data/tokenizers/gpt2"), local_files_only=True)
    tok.add_special_tokens({"mask_token": "<|mask|>"})
    torch.manual_seed(0)
    if kind == "modernbert":
        from transformers import ModernBertConfig, ModernBertForMaskedLM

        e = tok.eos_token_id
        cfg = ModernBertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64, max_position_embeddings=128, pad_token_id=e, bos_token_id=e,
                               eos_token_id=e, cls_token_id=e, sep_token_id=e)
        return CanvasMLM(ModernBertForMaskedLM(cfg).eval(), length), tok
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128)
    return CanvasBert(BertForMaskedLM(cfg).eval(), length), tok


def gemma_and_tokenizer(canvas):
    from transformers import AutoTokenizer

    from tests.helpers import tiny_diffusion_gemma

    tok = AutoTokenizer.from_pretrained(str(ROOT / "tests/data/tokenizers/gpt2"), local_files_only=True)
    tok.padding_side = "left"
    tok.pad_token = tok.eos_token
    return tiny_diffusion_gemma(len(tok), canvas, tok.eos_token_id), tok


class _Counter:
    """A no-op processor that counts denoising steps (the unconstrained baseline)."""

    def __init__(self):
        self.calls = 0

    def __call__(self, input_ids, scores, cur_step=None):
        self.calls += 1
        return scores


def run_gemma(model, tok, vocab, spec, n, length, steps, batch, seed, beam_width):
    """``(texts, processor stats dict, processor seconds per call, wall seconds per denoising step)``."""
    from transformers import LogitsProcessorList

    from structgen.constraints import resolve_constraint

    cg = sg.compile(resolve_constraint(**spec).grammar, vocab) if spec else None   # as sgd.generate reads spec
    texts, stats, per_call, calls, wall = [], {}, [], 0, 0.0
    for i in range(0, n, batch):
        prompts = [f"Q{j}:" for j in range(i, min(n, i + batch))]
        enc = tok(prompts, return_tensors="pt", padding=True)
        if cg is None:
            proc = _Counter()
        else:
            proc = sgd.DiffusionLogitsProcessor(cg, method="lookahead", max_new_tokens=length,
                                                lookahead={"beam_width": beam_width})
        torch.manual_seed(seed + i)
        t0 = time.perf_counter()
        out = model.generate(enc.input_ids, attention_mask=enc.attention_mask, max_new_tokens=length,
                             max_denoising_steps=steps, logits_processor=LogitsProcessorList([proc]))
        wall += time.perf_counter() - t0
        calls += proc.calls
        eos = tok.eos_token_id
        for s_ in out.sequences[:, enc.input_ids.shape[1]:].tolist():
            cut = next((k for k, t in enumerate(s_) if t == eos), len(s_))
            texts.append(vocab.decode(s_[:cut]).decode("utf-8", errors="replace"))
        if cg is not None:
            per_call += proc.step_seconds
            both = proc.stats
            both_d = both.as_dict()
            fill = proc.fill_stats.as_dict()
            both_d["exact_seconds"] = both_d["exact_seconds"] + fill["exact_seconds"]
            both_d["exact_checks"] += fill["exact_checks"]
            for k, v in both_d.items():
                stats[k] = stats.get(k, [] if isinstance(v, list) else 0) + v
    return texts, stats, per_call, wall / max(calls, 1)


def main_gemma(a, argv):
    model, tok = gemma_and_tokenizer(a.block)
    vocab = sg.Vocabulary.from_tokenizer(tok)
    blocks = a.length // a.block
    base, _, _, base_step = run_gemma(model, tok, vocab, {}, a.n, a.length, a.steps, a.batch, 0, 0)
    rows = []
    all_cases = cases()
    for name in a.grammars.split(","):
        spec, ok = all_cases[name]
        unconstrained = sum(ok(t) for t in base) / len(base)
        for bw in [int(x) for x in a.beams.split(",")]:
            t0 = time.perf_counter()
            texts, st, per_call, _ = run_gemma(model, tok, vocab, spec, a.n, a.length, a.steps, a.batch, 1, bw)
            wall = time.perf_counter() - t0
            valid = sum(ok(t) for t in texts) / len(texts)
            ex = st.get("exact_seconds", [])
            nb = len(texts) * blocks
            rows.append((name, bw, len(texts), valid, unconstrained, float(np.mean(per_call)) * 1e3, base_step * 1e3,
                         st.get("proposals", 0) / nb, st.get("rejections", 0) / nb, st.get("recoveries", 0) / nb,
                         st.get("beam_successes", 0) / nb, len(ex), _pct(ex, 50), _pct(ex, 99),
                         max(ex) * 1e3 if ex else float("nan"), st.get("exact_skipped", 0) / nb, wall))
            print(rows[-1], flush=True)
    return rows


def run(model, tok, spec, n, length, block, steps, batch, seed, method="lookahead"):
    outs = []
    for i in range(0, n, batch):
        prompts = [f"Q{j}:" for j in range(i, min(n, i + batch))]
        outs += sgd.generate(model, tok, prompts, length=length, block_length=block, steps=steps, method=method,
                             temperature=1.0, seed=seed + i, **spec)
    return outs


def _pct(xs, q):
    return float(np.percentile(xs, q)) * 1e3 if xs else float("nan")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=40, help="outputs per grammar and setting")
    ap.add_argument("--length", type=int, default=16)
    ap.add_argument("--block", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--grammars", default="json,arithmetic,sql,gbnf,schema")
    ap.add_argument("--beams", default="5,0", help="beam widths to compare")
    ap.add_argument("--out", default=None)
    ap.add_argument("--model", choices=("bert", "modernbert", "diffusiongemma"), default="bert")
    a = ap.parse_args(argv)
    if a.model == "diffusiongemma":
        write(a, argv, main_gemma(a, argv), "processor ms/step (batch)", "unconstrained model ms/step")
        return
    write(a, argv, main_bert(a), "lookahead ms/step (batch)", "unconstrained ms/step")


def main_bert(a):
    model, tok = model_and_tokenizer(a.length, a.model)
    blocks = a.length // a.block
    rows = []
    base = run(model, tok, {}, a.n, a.length, a.block, a.steps, a.batch, 0, method="map")
    base_step = np.mean([s for o in base[:1] for s in o.timings["step_dp"]]) * 1e3
    all_cases = cases()
    for name in a.grammars.split(","):
        spec, ok = all_cases[name]
        unconstrained = sum(ok(o.text) for o in base) / len(base)
        for bw in [int(x) for x in a.beams.split(",")]:
            la.DEFAULTS["beam_width"] = bw
            t0 = time.perf_counter()
            outs = run(model, tok, spec, a.n, a.length, a.block, a.steps, a.batch, 1)
            wall = time.perf_counter() - t0
            valid = sum(ok(o.text) for o in outs) / len(outs)
            st = {}
            for o in outs:
                for k, v in o.method_stats.items():
                    st[k] = st.get(k, [] if isinstance(v, list) else 0) + v
            ex = st.get("exact_seconds", [])
            step_ms = np.mean([s for i in range(0, len(outs), a.batch) for s in outs[i].timings["step_dp"]]) * 1e3
            nb = len(outs) * blocks
            rows.append((name, bw, len(outs), valid, unconstrained, step_ms, base_step, st.get("proposals", 0) / nb,
                         st.get("rejections", 0) / nb, st.get("recoveries", 0) / nb, st.get("beam_successes", 0) / nb,
                         len(ex), _pct(ex, 50), _pct(ex, 99), max(ex) * 1e3 if ex else float("nan"),
                         st.get("exact_skipped", 0) / nb, wall))
            print(rows[-1], flush=True)
    return rows


def write(a, argv, rows, step_col, base_col):
    head = (f"| grammar | beam | outputs | valid | unconstrained valid | {step_col} | {base_col} "
            "| proposals/block | rejections/block | recoveries/block | beam successes/block | exact checks "
            "| exact p50 ms | exact p99 ms | exact max ms | skipped/block | wall s |")
    lines = [head, "|" + "---|" * 17]
    for r in rows:
        lines.append("| " + " | ".join([r[0], str(r[1]), str(r[2]), f"{100 * r[3]:.1f} %", f"{100 * r[4]:.1f} %",
                                        f"{r[5]:.1f}", f"{r[6]:.2f}"] + [f"{x:.2f}" for x in r[7:11]]
                                       + [str(r[11])] + [f"{x:.1f}" for x in r[12:15]] + [f"{r[15]:.2f}", f"{r[16]:.0f}"])
                     + " |")
    text = "\n".join(lines)
    model_name = {"bert": "BertForMaskedLM (sgd.generate)", "modernbert": "ModernBertForMaskedLM (sgd.generate)",
                  "diffusiongemma": "DiffusionGemmaForBlockDiffusion (its generate + DiffusionLogitsProcessor)"}
    print(text)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(f"`python benchmarks/bench_diffusion_lookahead.py {' '.join(argv or sys.argv[1:])}` "
                               f"(length {a.length}, block {a.block}, steps {a.steps}; random {model_name[a.model]}, "
                               f"gpt2 vocabulary; a shared 2-core machine)\n\n{text}\n")


if __name__ == "__main__":
    main()
