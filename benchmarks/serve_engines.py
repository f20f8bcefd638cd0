#!/usr/bin/env python
"""Serve a small model with structgen as the structured-output backend of vLLM and SGLang, and
check that JSON-Schema requests come back valid, with and without n-gram speculative decoding.

NOT RUN ON A GPU YET: written for a GPU machine with vLLM 0.33.0 / SGLang 0.5.23 installed
(``bash .ci/install_engines``, plus the engines' own GPU dependencies: torch with CUDA,
flashinfer, ...).  The model is built here from a config (random weights, the Llama-3 tokenizer
of tests/data/tokenizers/llama3), so nothing is downloaded; its text is noise, but every answer
must still be valid JSON under the schema, since the constraint decides the syntax.

    python benchmarks/serve_engines.py build-model /tmp/sg-tiny-llama     # once, CPU is enough
    python benchmarks/serve_engines.py run vllm   /tmp/sg-tiny-llama      # no speculation, then n-gram
    python benchmarks/serve_engines.py run sglang /tmp/sg-tiny-llama
    python benchmarks/serve_engines.py run all    /tmp/sg-tiny-llama --out results.json

Each ``run`` starts the server on 127.0.0.1 (``--port``, default 8321), waits for it, sends
``--requests`` JSON-Schema requests (the OpenAI ``response_format`` and the engine's own form),
validates every answer with ``jsonschema``, prints one line per configuration and stops the
server.  The commands it runs are printed first (``--dry-run`` prints them only).  Exit status 1
when any answer is invalid or a server did not come up.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = ROOT / "tests" / "data" / "tokenizers" / "llama3"

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "age", "tags", "ok"],
    "additionalProperties": False,
}
# the prompt repeats a valid answer, so n-gram (prompt lookup) speculation has something to propose
PROMPT = ('Return a JSON object. Example: {"name": "Ada", "age": 36, "tags": ["a", "b"], "ok": true}\n'
          'Another: {"name": "Bob", "age": 7, "tags": [], "ok": false}\nAnswer: ')


def build_model(out: Path) -> None:
    """A 2-layer Llama with random weights (bf16) and the Llama-3 tokenizer, saved to ``out``."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(str(TOKENIZER), local_files_only=True)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, tie_word_embeddings=True,
                      torch_dtype="bfloat16")
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (TOKENIZER / name).exists():
            shutil.copy(TOKENIZER / name, out / name)
    print(f"model written to {out} ({sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters)")


def server_command(engine: str, model: Path, port: int, ngram: bool) -> list[str]:
    """The command line that serves ``model`` with structgen as the backend."""
    if engine == "vllm":
        # `vllm serve` (vllm.entrypoints.cli.main); api_server's own __main__ is deprecated in 0.33
        cmd = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", str(model),
               "--port", str(port), "--host", "127.0.0.1", "--max-model-len", "2048",
               "--gpu-memory-utilization", "0.3", "--enforce-eager",
               "--structured-outputs-config.backend", "structgen"]
        if ngram:
            cmd += ["--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 4,
                                                        "prompt_lookup_max": 4, "prompt_lookup_min": 2})]
        return cmd
    if engine == "sglang":
        cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model), "--port", str(port),
               "--host", "127.0.0.1", "--grammar-backend", "structgen", "--mem-fraction-static", "0.3",
               "--context-length", "2048"]
        if ngram:
            cmd += ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "4"]
        return cmd
    raise SystemExit(f"unknown engine {engine!r}")


def _post(url: str, body: dict, timeout: float = 120.0) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def _wait_ready(base: str, proc: subprocess.Popen, limit: float) -> bool:
    t0 = time.time()
    while time.time() - t0 < limit:
        if proc.poll() is not None:
            return False
        for path in ("/health", "/v1/models"):
            try:
                with urllib.request.urlopen(base + path, timeout=5) as r:
                    if r.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
        time.sleep(2)
    return False


def _requests(engine: str, base: str, model: str, n: int):
    """``(form, text)`` for ``n`` requests alternating the OpenAI form and the engine's own."""
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}
    for i in range(n):
        common = {"max_tokens": 200, "temperature": 1.0, "seed": i}
        if i % 2 == 0:
            body = {"model": model, "prompt": PROMPT, "response_format": fmt, **common}
            out = _post(base + "/v1/completions", body)
            yield "openai response_format", out["choices"][0]["text"]
        elif engine == "vllm":
            body = {"model": model, "prompt": PROMPT, "structured_outputs": {"json": SCHEMA}, **common}
            out = _post(base + "/v1/completions", body)
            yield "vllm structured_outputs.json", out["choices"][0]["text"]
        else:
            body = {"text": PROMPT, "sampling_params": {"json_schema": json.dumps(SCHEMA), "max_new_tokens": 200,
                                                        "temperature": 1.0}}
            out = _post(base + "/generate", body)
            yield "sglang sampling_params.json_schema", out["text"]


def run(engine: str, model: Path, port: int, n: int, ngram: bool, dry_run: bool, limit: float) -> dict:
    cmd = server_command(engine, model, port, ngram)
    label = f"{engine}{' + n-gram speculation' if ngram else ''}"
    print(f"$ {' '.join(cmd)}", flush=True)
    if dry_run:
        return {"config": label, "command": cmd}
    import jsonschema

    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    log = open(f"serve-{engine}{'-ngram' if ngram else ''}.log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    result = {"config": label, "command": cmd, "valid": 0, "invalid": [], "seconds": None}
    try:
        if not _wait_ready(base, proc, limit):
            result["error"] = f"server did not come up in {limit:.0f} s (see {log.name})"
            print(f"{label}: {result['error']}")
            return result
        t0 = time.time()
        for form, text in _requests(engine, base, str(model), n):
            try:
                jsonschema.validate(json.loads(text), SCHEMA)
                result["valid"] += 1
            except (ValueError, jsonschema.ValidationError) as e:
                result["invalid"].append({"form": form, "text": text, "error": str(e)[:200]})
        result["seconds"] = round(time.time() - t0, 2)
        print(f"{label}: {result['valid']}/{n} valid JSON under the schema in {result['seconds']} s", flush=True)
        for bad in result["invalid"]:
            print(f"  INVALID ({bad['form']}): {bad['text']!r}: {bad['error']}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # the server's own process group only
            proc.wait(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build-model", help="write the small random-weight model")
    b.add_argument("out", type=Path)
    r = sub.add_parser("run", help="serve and query")
    r.add_argument("engine", choices=["vllm", "sglang", "all"])
    r.add_argument("model", type=Path)
    r.add_argument("--port", type=int, default=8321)
    r.add_argument("--requests", type=int, default=8)
    r.add_argument("--no-ngram", action="store_true", help="skip the n-gram speculative run")
    r.add_argument("--startup-timeout", type=float, default=600.0)
    r.add_argument("--dry-run", action="store_true", help="print the server commands only")
    r.add_argument("--out", type=Path, help="write the results as JSON")
    args = ap.parse_args(argv)
    if args.cmd == "build-model":
        build_model(args.out)
        return 0
    if not args.dry_run and not (args.model / "config.json").exists():
        raise SystemExit(f"{args.model} has no config.json: run `build-model {args.model}` first")
    engines = ["vllm", "sglang"] if args.engine == "all" else [args.engine]
    results = []
    for engine in engines:
        for ngram in ([False] if args.no_ngram else [False, True]):
            results.append(run(engine, args.model, args.port, args.requests, ngram, args.dry_run,
                               args.startup_timeout))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    bad = [r for r in results if r.get("error") or r.get("invalid")]
    return 1 if bad and not args.dry_run else 0


if __name__ == "__main__":
    sys.exit(main())
