"""The fuzz harness: cases run in a reusable worker process under a wall clock and an RSS bound.

A *case* is a dict ``{"kind": "regex"|"json_schema"|"gbnf"|"lark"|"api", "input": ...,
"options": {...}, "expect": ...}`` (the format of ``tests/data/fuzz_seeds*.json``):

- ``input``: the regex / schema / grammar text, or for ``api`` a call description (see
  :func:`run_api`).  Values that JSON cannot hold are written as one-key objects:
  ``{"$float": "nan"}``, ``{"$bytes": "<hex>"}``, ``{"$decimal": "1.5"}``,
  ``{"$array": [...], "dtype": "float64"}`` (a numpy array), ``{"$tensor": {"shape": [2, 100],
  "dtype": "float32", "fill": 0}}``, ``{"$bitmask": {"shape": [1, "W"], "dtype": "uint8",
  "lib": "numpy"}}`` (``W`` = ``ceil(V/32)`` of the case's vocabulary; ``"W+1"`` works too)
  and ``{"$gen": NAME, ...}`` for inputs too big or too deep to write (see :data:`GENERATORS`).
- ``options``: ``vocab`` (``"tiny"``, the default: 256 bytes + a few pieces, or a fixture
  tokenizer such as ``"llama3"``), ``limit`` (seconds; default ``time_limit`` or 10),
  ``time_limit`` / ``max_states`` / ``max_nfa_states`` / ``max_memory`` (given to ``compile()`` and to the front end when it takes
  them), ``compile`` / ``front`` (explicit keyword dicts), ``parse_float: "Decimal"`` (a
  schema text loaded with Decimal floats); any other key goes to the front end.
- ``expect``: ``"ok"``, the name of an error class (the raised error must be a
  ``StructgenError`` with that class in its MRO; ``"StructgenError"`` = any named error), or a
  list of those.  Optional ``match`` / ``no_match``: regexes the error message must / must not
  contain.

Whatever ``expect`` says, every case must end (result or ``StructgenError``) within
``limit * 1.1 + 1`` seconds with the worker's RSS under the bound; a worker that hangs, dies or
outgrows the bound is killed and restarted for the next case.

Run as ``python -m tests.fuzz_worker`` it is the worker: length-prefixed pickles on stdin /
stdout.  :class:`FuzzRunner` is the parent side (tests/test_fuzz.py, benchmarks/fuzz_campaign.py).
"""
from __future__ import annotations

import glob
import json
import os
import pickle
import select
import struct
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEEDS = sorted(glob.glob(str(ROOT / "tests" / "data" / "fuzz_seeds*.json")))
DEFAULT_LIMIT = 10.0
DEFAULT_RSS_BOUND = 3 << 30  # bytes
PIECES = [bytes([b]) for b in range(256)] + [b'{"', b'":', b'": ', b'true', b'false', b', "', b'ab', b'12', b'"a"',
                                             b'null', b'[1', b'],']


# ----------------------------------------------------------------------------- generators
def _nested_groups(depth, inner="a", open="(", close=")"):
    return open * depth + inner + close * depth


def _nested_schema(depth, via="items"):
    node: dict = {"type": "integer"}
    for _ in range(depth):
        node = {"type": "array", "items": node} if via == "items" else \
            {"type": "object", "properties": {"a": node}, "required": ["a"]}
    return node


def _ref_chain(n):
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
    defs[f"d{n}"] = {"type": "integer"}
    return {"$defs": defs, "$ref": "#/$defs/d0"}


def _gbnf_chain(n):
    return "root ::= r0\n" + "".join(f"r{i} ::= r{i + 1}\n" for i in range(n)) + f'r{n} ::= "a"\n'


GENERATORS = {
    "nested_groups": _nested_groups,                  # depth, inner, open, close -> regex / grammar text
    "nested_schema": _nested_schema,                  # depth, via ("items" | "properties")
    "ref_chain": _ref_chain,                          # n: a chain of n $refs
    "enum_range": lambda n: {"enum": list(range(n))},
    "const_string": lambda n, ch="x": {"const": ch * n},
    "gbnf_chain": _gbnf_chain,                        # n chained rules
    "gbnf_parens": lambda depth: "root ::= " + _nested_groups(depth, '"a"') + "\n",
    "lark_parens": lambda depth: "start: " + _nested_groups(depth, '"a"') + "\n",
    "repeat": lambda text, n: text * n,
}


def decode(v, ctx=None):
    """A case value with its ``$`` escapes resolved (see the module docstring)."""
    if isinstance(v, list):
        return [decode(x, ctx) for x in v]
    if not isinstance(v, dict):
        return v
    if "$float" in v:
        return float(v["$float"])
    if "$bytes" in v:
        return bytes.fromhex(v["$bytes"])
    if "$decimal" in v:
        from decimal import Decimal

        return Decimal(v["$decimal"])
    if "$gen" in v:
        args = {k: decode(x, ctx) for k, x in v.items() if k != "$gen"}
        return GENERATORS[v["$gen"]](**args)
    if "$array" in v:
        import numpy as np

        return np.array(decode(v["$array"], ctx), dtype=v.get("dtype"))
    if "$tensor" in v or "$bitmask" in v:
        return _buffer(v.get("$tensor") or v["$bitmask"], ctx, bitmask="$bitmask" in v)
    return {k: decode(x, ctx) for k, x in v.items()}


def _buffer(spec, ctx, bitmask):
    import numpy as np
    import torch

    words = (ctx["vocab"].logits_width + 31) // 32 if ctx else 1
    shape = [int(eval(str(d), {"__builtins__": {}}, {"W": words, "V": words * 32})) for d in spec["shape"]]
    dtype = spec.get("dtype", "int32")
    fill = spec.get("fill", -1 if bitmask else 0)
    if spec.get("lib", "torch" if not bitmask else "numpy") == "numpy":
        return np.full(shape, fill, dtype=np.int64).astype(dtype)  # -1 wraps in unsigned dtypes
    return torch.full(shape, fill, dtype=torch.int64).to(getattr(torch, dtype))


# ----------------------------------------------------------------------------- the worker side
_VOCABS: dict = {}
_MODEL: dict = {}


def vocab(name):
    if name not in _VOCABS:
        import structgen as sg

        if name == "tiny":
            _VOCABS[name] = sg.Vocabulary.from_bytes(PIECES + [b""], eos_ids=[len(PIECES)])
        else:
            from tests.helpers import load_vocab

            _VOCABS[name] = load_vocab(name)
    return _VOCABS[name]


def tiny_model():
    """A random 1-layer Llama over gpt2's vocabulary and gpt2's tokenizer (for api cases)."""
    if not _MODEL:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        from tests.helpers import load_tokenizer

        v = vocab("gpt2")
        torch.manual_seed(0)
        cfg = LlamaConfig(vocab_size=v.logits_width, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                          num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                          bos_token_id=None, eos_token_id=None, pad_token_id=0)
        _MODEL["model"], _MODEL["tokenizer"] = LlamaForCausalLM(cfg).eval(), load_tokenizer("gpt2")
    return _MODEL["model"], _MODEL["tokenizer"]


_COMPILE_KEYS = ("time_limit", "max_states", "max_nfa_states", "max_memory")
_FRONT_SKIP = ("vocab", "limit", "compile", "front", "parse_float") + _COMPILE_KEYS


def grammar_of(kind, data, options):
    """``Grammar.from_*`` for a case (front-end options routed as the module docstring says)."""
    import inspect

    import structgen as sg

    build = {"regex": sg.Grammar.from_regex, "json_schema": sg.Grammar.from_json_schema,
             "gbnf": sg.Grammar.from_gbnf, "lark": sg.Grammar.from_lark}[kind]
    front = {k: decode(v) for k, v in options.items() if k not in _FRONT_SKIP}
    front.update(decode(options.get("front", {})))
    params = inspect.signature(build).parameters
    for k in _COMPILE_KEYS:
        if k in options and k in params:
            front[k] = decode(options[k])
    if kind == "json_schema" and options.get("parse_float") == "Decimal" and isinstance(data, str):
        from decimal import Decimal

        data = json.loads(data, parse_float=Decimal)
    return build(data, **front)


def run_grammar_case(kind, data, options):
    import numpy as np

    import structgen as sg

    v = vocab(options.get("vocab", "tiny"))
    g = grammar_of(kind, data, options)
    kw = {k: decode(options[k]) for k in _COMPILE_KEYS if k in options}
    kw.update(decode(options.get("compile", {})))
    m = sg.compile(g, v, **kw).matcher()
    bm = sg.allocate_bitmask(1, v.logits_width)
    steps = 0
    for _ in range(8):  # a short walk: the mask, then the first allowed normal token
        m.fill_bitmask(bm, 0)
        ids = [t for t in sg.bitmask_to_ids(bm[0]).tolist() if t not in set(v.eos_ids)]
        if not ids or not m.advance(int(ids[0])):
            break
        steps += 1
    m.forced_tokens()
    return {"steps": steps, "accepting": bool(m.is_accepting()), "allowed": int(np.size(ids))}


def run_api(spec, options):
    """An API call: ``{"call": "generate", "model": "tiny"|None, "tokenizer": "gpt2"|None,
    "prompt": ..., "kwargs": {...}}``; ``{"call": "matcher", "grammar": {"kind", "input"},
    "method": NAME, "args": [...]}`` (a method of a fresh matcher on the case's vocabulary;
    ``"$prefix": [ids]`` advances first); ``{"call": "apply_bitmask_" | "fill_bitmasks" |
    "grammars.load", "args": [...]}``."""
    call = spec["call"]
    if call.startswith("selftest."):  # the harness's own checks (tests/test_fuzz.py)
        return _selftest(call.split(".", 1)[1], spec)
    import structgen as sg

    v = vocab(options.get("vocab", "tiny"))
    ctx = {"vocab": v}
    args = decode(spec.get("args", []), ctx)
    kwargs = decode(spec.get("kwargs", {}), ctx)
    if call == "generate":
        model, tok = tiny_model()
        model = model if spec.get("model", "tiny") else None
        tok = tok if spec.get("tokenizer", "gpt2") else None
        r = sg.generate(model, tok, spec.get("prompt", "x"), **{"max_new_tokens": 8, **kwargs})
        return {"text": r.text}
    if call in ("matcher", "fill_bitmasks"):
        gspec = spec["grammar"]
        m = sg.compile(grammar_of(gspec["kind"], decode(gspec["input"]), gspec.get("options", {})), v).matcher()
        for t in spec.get("$prefix", []):
            assert m.advance(t), f"prefix token {t} refused"
        if call == "fill_bitmasks":
            return {"result": repr(sg.fill_bitmasks([m], *args))}
        return {"result": repr(getattr(m, spec["method"])(*args, **kwargs))}
    if call == "apply_bitmask_":
        sg.apply_bitmask_(*args, **kwargs)
        return {}
    if call == "grammars.load":
        return {"chars": len(sg.grammars.load(*args))}
    raise ValueError(f"unknown api call {call!r}")


def _selftest(what, spec):
    if what == "sleep":
        time.sleep(spec["seconds"])
    elif what == "alloc":
        hold = b"x" * (spec["mb"] << 20)
        time.sleep(spec.get("hold", 3.0))
        return {"held": len(hold)}
    elif what == "raise":
        raise RecursionError("maximum recursion depth exceeded (selftest)")
    elif what == "crash":
        os._exit(3)
    return {}


def run_case(case):
    """Run one case here; a dict with ``outcome`` ("ok" / "error"), the error's class and MRO names."""
    t0 = time.perf_counter()
    try:
        options = case.get("options", {}) or {}
        if case["kind"] == "api":
            out = run_api(case["input"], options)
        else:
            out = run_grammar_case(case["kind"], decode(case["input"]), options)
        res = {"outcome": "ok", "result": out}
    except BaseException as e:  # noqa: BLE001 -- reporting it is the point
        if isinstance(e, KeyboardInterrupt):
            raise
        sg = sys.modules.get("structgen")
        res = {"outcome": "error", "error": type(e).__name__, "mro": [c.__name__ for c in type(e).__mro__],
               "named": sg is not None and isinstance(e, sg.StructgenError), "message": str(e)[:2000],
               "traceback": "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])[-3000:]}
    res["seconds"] = time.perf_counter() - t0
    return res


def _write_all(fd, data):
    buf = struct.pack("<Q", len(data)) + data
    while buf:
        n = os.write(fd, buf)
        buf = buf[n:]


def _read_exact(f, n):
    data = b""
    while len(data) < n:
        chunk = f.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def worker_main():
    out_fd = os.dup(1)
    os.dup2(2, 1)  # anything the library prints goes to stderr, not into the protocol
    sys.stdout = sys.stderr
    sys.path.insert(0, str(ROOT))
    if not os.environ.get("STRUCTGEN_FUZZ_BARE"):  # bare: the harness's self-test, no structgen
        import structgen  # noqa: F401  -- the imports and JIT loads are paid before the first case

    _write_all(out_fd, pickle.dumps({"ready": True, "pid": os.getpid()}))
    inp = sys.stdin.buffer
    while True:
        head = _read_exact(inp, 8)
        if head is None:
            return
        req = pickle.loads(_read_exact(inp, struct.unpack("<Q", head)[0]))
        if "preload" in req:
            for name in req["preload"]:
                if name == "model":
                    tiny_model()
                else:
                    vocab(name)
            # one-time costs of a process (numba cache loads, the Unicode tables of \d \s \w),
            # not of any input: paid here, before the clock of the first case starts
            run_case({"kind": "regex", "input": "[\\d\\s\\w]"})
            run_case({"kind": "lark", "input": 'start: "a" start | "b"\n'})
            run_case({"kind": "json_schema", "input": {"type": "object", "properties": {"a": {"type": "integer"}}}})
            res = {"ready": True}
        else:
            res = run_case(req["case"])
        _write_all(out_fd, pickle.dumps(res))


# ----------------------------------------------------------------------------- the parent side
def _rss(pid, field="VmRSS"):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


class FuzzRunner:
    """Runs cases in a worker process, restarting it after a hang, a crash or a memory bust.

    ``run(case)`` returns the worker's result plus ``wall`` (seconds), ``limit`` (the wall-clock
    bound ``limit * 1.1 + 1``) and ``peak_rss`` (bytes, the worker's high-water mark during the
    case), with ``outcome`` one of ``ok``, ``error``, ``hang``, ``memory``, ``crash``."""

    def __init__(self, rss_bound: int = DEFAULT_RSS_BOUND, preload=("tiny",), bare: bool = False):
        self.rss_bound = rss_bound
        self.bare = bare  # a worker without structgen (starts in a blink: selftest.* calls only)
        self.preload = list(preload)
        self.proc = None
        self.loaded: set = set()
        self.restarts = 0
        self.peak_rss = 0

    def _start(self):
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        if self.bare:
            env["STRUCTGEN_FUZZ_BARE"] = "1"
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fuzz_worker"], cwd=str(ROOT), env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._buf = b""
        first = self._recv(300.0)
        if not isinstance(first, dict) or not first.get("ready"):
            raise RuntimeError(f"the fuzz worker did not start: {first!r}")
        self.loaded = set()
        if not self.bare:
            self._send({"preload": self.preload})
            if not isinstance(self._recv(600.0), dict):
                raise RuntimeError("the fuzz worker died while loading its vocabularies")
            self.loaded = set(self.preload)

    def _send(self, obj):
        data = pickle.dumps(obj)
        self.proc.stdin.write(struct.pack("<Q", len(data)) + data)
        self.proc.stdin.flush()

    def _recv(self, timeout, watch=None):
        """The next message, or "hang" / "memory" / "crash" (then the worker is killed)."""
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while True:
            if len(self._buf) >= 8:
                n = struct.unpack("<Q", self._buf[:8])[0]
                if len(self._buf) >= 8 + n:
                    msg = pickle.loads(self._buf[8:8 + n])
                    self._buf = self._buf[8 + n:]
                    return msg
            left = deadline - time.monotonic()
            if left <= 0:
                if watch is not None:
                    watch["peak_rss"] = _rss(self.proc.pid, "VmHWM")
                self.kill()
                return "hang"
            if watch is not None and _rss(self.proc.pid) > watch["bound"]:
                watch["peak_rss"] = max(watch.get("peak_rss", 0), _rss(self.proc.pid, "VmHWM"))
                self.kill()
                return "memory"
            r, _, _ = select.select([fd], [], [], min(left, 0.02))
            if r:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    self.kill()
                    return "crash"
                self._buf += chunk

    def kill(self):
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(10)
            except Exception:
                pass
            self.proc = None

    def close(self):
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(5)
            except Exception:
                self.kill()
            self.proc = None

    def run(self, case) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                self.restarts += 1
            self._start()
        opts = case.get("options", {}) or {}
        need = [] if self.bare else [n for n in (opts.get("vocab", "tiny"),) + (("model",) if case["kind"] == "api" and
                isinstance(case.get("input"), dict) and case["input"].get("call") == "generate" else ())
                if n not in self.loaded]
        if need:  # vocabularies and the model are loaded before the clock starts
            self._send({"preload": need})
            if not isinstance(self._recv(600.0), dict):
                raise RuntimeError(f"the fuzz worker died while loading {need}")
            self.loaded.update(need)
        rss_bound = min(self.rss_bound, int(opts.get("rss_mb", 1 << 40)) << 20)
        tl = decode(opts.get("time_limit"))
        limit = float(opts.get("limit") or (tl if isinstance(tl, (int, float)) and 0 < tl < 1e6 else DEFAULT_LIMIT))
        bound = limit * 1.1 + 1.0
        try:  # reset the high-water mark so VmHWM is this case's peak
            with open(f"/proc/{self.proc.pid}/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass
        t0 = time.monotonic()
        watch: dict = {"bound": rss_bound}
        self._send({"case": case})
        msg = self._recv(bound, watch)
        wall = time.monotonic() - t0
        if isinstance(msg, str):
            res = {"outcome": msg, "peak_rss": watch.get("peak_rss", 0)}
            self.restarts += 1
        else:
            res = dict(msg)
            res["peak_rss"] = _rss(self.proc.pid, "VmHWM")
        res.update(wall=wall, limit=bound)
        self.peak_rss = max(self.peak_rss, res["peak_rss"])
        return res


def verdict(case, res) -> str | None:
    """None when ``res`` satisfies the case (see the module docstring), else why not."""
    import re

    out = res["outcome"]
    if out in ("hang", "memory", "crash"):
        return f"{out} after {res['wall']:.1f} s (bound {res['limit']:.1f} s, peak RSS {res['peak_rss'] >> 20} MB)"
    if res["wall"] > res["limit"]:
        return f"took {res['wall']:.1f} s > bound {res['limit']:.1f} s"
    if out == "error" and not res["named"]:
        return f"internal exception {res['error']}: {res['message'][:300]}\n{res['traceback']}"
    expect = case.get("expect", ["ok", "StructgenError"])
    expect = [expect] if isinstance(expect, str) else list(expect)
    if out == "ok":
        return None if "ok" in expect else f"compiled, but {expect} was expected"
    if not any(e in res["mro"] for e in expect if e != "ok"):
        return f"{res['error']} ({res['message'][:300]}), but {expect} was expected"
    if case.get("match") and not re.search(case["match"], res["message"]):
        return f"{res['error']} message {res['message'][:300]!r} does not match {case['match']!r}"
    if case.get("no_match") and re.search(case["no_match"], res["message"]):
        return f"{res['error']} message {res['message'][:300]!r} matches {case['no_match']!r}"
    return None


def load_seeds(paths=None) -> list[dict]:
    """Every case of ``tests/data/fuzz_seeds*.json`` (a list of cases, or ``{"cases": [...]}``),
    each with ``id`` (``file:index`` unless it has one) added."""
    cases = []
    for p in paths or SEEDS:
        with open(p, encoding="utf-8") as f:
            data = json.load(f)
        items = data["cases"] if isinstance(data, dict) else data
        for i, c in enumerate(items):
            c = dict(c)
            c.setdefault("id", f"{Path(p).stem}:{i}")
            cases.append(c)
    return cases


if __name__ == "__main__":
    worker_main()
