#!/usr/bin/env python
"""Per-step cost of a structured-output step inside vLLM 0.33's ``StructuredOutputManager``:
structgen's backend beside vLLM's xgrammar backend, on the CPU, one request, no speculation.

A step is what the scheduler does per generated token: ``grammar_bitmask`` (fill the request's
row) then ``accept_tokens`` (one token).  Each backend walks the same token sequence (a JSON
document, or free text around a Hermes ``<tool_call>``) ``--repeats`` times after a warm-up
walk; the grammar is compiled before timing (compile time is not a step).  The engine config is
the stand-in the contract tests use (tests/test_vllm_backend.py).

    python benchmarks/bench_engine_step.py --tokenizer tests/data/tokenizers/llama3 --repeats 20
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from types import SimpleNamespace as NS

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                           "tags": {"type": "array", "items": {"type": "string"}},
                                           "ok": {"type": "boolean"}},
          "required": ["name", "age", "tags", "ok"]}
DOC = '{"name":"Ada Lovelace","age":36,"tags":["math","poetry","engines"],"ok":true}'
TOOL_TAG = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
    {"type": "tag", "begin": "<tool_call>\n", "content": {"type": "json_schema", "json_schema": SCHEMA,
                                                          "max_whitespace_cnt": 4}, "end": "\n</tool_call>"}]}}
TAGGED = "I will look that up for you now. <tool_call>\n" + DOC + "\n</tool_call> Here it is."


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default=str(ROOT / "tests" / "data" / "tokenizers" / "llama3"))
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    os.environ["STRUCTGEN_WHITESPACE"] = "compact"   # vLLM's xgrammar runs with disable_any_whitespace here

    from structgen.integrations import vllm as sgv

    sgv.register()
    import vllm.v1.structured_output as so_module
    from vllm.config.structured_outputs import StructuredOutputsConfig
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams
    from vllm.tokenizers.hf import CachedHfTokenizer
    from vllm.v1.request import Request

    tok = CachedHfTokenizer.from_pretrained(args.tokenizer)
    so_module.cached_tokenizer_from_config = lambda model_config: tok
    eos = tok.eos_token_id

    def manager(backend):
        so = StructuredOutputsConfig(backend=backend, disable_any_whitespace=(backend == "xgrammar"))
        model = NS(skip_tokenizer_init=False, tokenizer=args.tokenizer, hf_config=NS(model_type="llama"),
                   is_diffusion=False, get_vocab_size=lambda: len(tok))
        cfg = NS(parallel_config=NS(distributed_executor_backend="mp"), scheduler_config=NS(max_num_seqs=4),
                 model_config=model, structured_outputs_config=so, num_speculative_tokens=0, speculative_config=None)
        return so_module.StructuredOutputManager(cfg)

    def request(m, rid, params):
        sp = SamplingParams(max_tokens=500, structured_outputs=params)
        sp.update_from_generation_config({}, eos_token_id=eos)
        sp._validate_structured_outputs(m.vllm_config.model_config, m.vllm_config.structured_outputs_config, tok)
        req = Request(rid, [1, 2, 3], sp, None)
        m.grammar_init(req)
        while not req.structured_output_request.is_grammar_ready:
            time.sleep(0.005)
        return req

    cases = {"json": (lambda: StructuredOutputsParams(json=SCHEMA), DOC),
             "structural_tag": (lambda: StructuredOutputsParams(structural_tag=json.dumps(TOOL_TAG)), TAGGED)}
    print(f"tokenizer {Path(args.tokenizer).name} ({len(tok)} tokens), {args.repeats} walks per backend")
    print("| case | backend | tokens | step p50 (µs) | step mean (µs) | of which fill p50 (µs) |")
    print("|---|---|---|---|---|---|")
    for case, (params, text) in cases.items():
        ids = tok.encode(text, add_special_tokens=False) + [eos]
        for backend in ("structgen", "xgrammar"):
            m = manager(backend)
            steps, fills = [], []
            for walk in range(args.repeats + 1):
                req = request(m, f"{backend}-{walk}", params())
                rid = req.request_id
                for t in ids:
                    t0 = time.perf_counter()
                    m.grammar_bitmask({rid: req}, [rid], {})
                    t1 = time.perf_counter()
                    assert m.accept_tokens(req, [t]), (backend, case, t)
                    t2 = time.perf_counter()
                    if walk:
                        steps.append(t2 - t0)
                        fills.append(t1 - t0)
            print(f"| {case} | {backend} | {len(ids)} | {statistics.median(steps) * 1e6:.0f} | "
                  f"{statistics.fmean(steps) * 1e6:.0f} | {statistics.median(fills) * 1e6:.0f} |", flush=True)


if __name__ == "__main__":
    main()
