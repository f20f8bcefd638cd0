"""The ``structgen`` command: generate under a constraint, check a constraint, show the disk cache,
run benchmarks.

Exit codes (stable, for scripts):
    0  success
    1  the output is incomplete (max tokens reached) or does not validate
    2  usage error (bad arguments, unreadable file)
    3  the constraint is invalid or uses an unsupported feature
    4  the model or tokenizer cannot be loaded
    5  internal error (a bug: please report it, with --debug output)
No traceback is printed unless ``--debug`` is given.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time

EXIT_OK, EXIT_INCOMPLETE, EXIT_USAGE, EXIT_SPEC, EXIT_MODEL, EXIT_INTERNAL = 0, 1, 2, 3, 4, 5

_EXAMPLES = """\
examples:
  # the embedded demo model (install once: python -m structgen.models install-demo)
  structgen generate --schema person.json "Ann Lee is 31 and lives in Oslo."
  echo "Ann Lee is 31." | structgen generate --pydantic myapp.models:Person
  structgen generate --regex '\\d{4}-\\d{2}-\\d{2}' "When did Apollo 11 land?"
  structgen generate --choices positive,negative,neutral "Sentiment of: I loved it"
  structgen generate --grammar expr.lark --model ./my-model "Write an arithmetic expression"
  structgen generate --schema person.json --lines < texts.txt > people.jsonl

  # check a constraint: what it compiles to, how long it takes, what is unsupported
  structgen compile --schema person.json
  structgen compile --grammar sql.lark --tokenizer ./my-model

exit codes: 0 ok, 1 incomplete/invalid output, 2 usage, 3 bad or unsupported constraint,
            4 model cannot be loaded, 5 internal error (rerun with --debug)
"""


class UsageError(Exception):
    """Bad command-line input (exit code 2)."""


def _add_constraint_args(p: argparse.ArgumentParser, required: bool) -> None:
    g = p.add_argument_group("constraint (one of)")
    x = g.add_mutually_exclusive_group(required=required)
    x.add_argument("--schema", metavar="FILE", help="a JSON Schema file ('-' reads stdin)")
    x.add_argument("--regex", metavar="REGEX", help="a regular expression the whole output must match")
    x.add_argument("--grammar", metavar="FILE", help="a grammar file: Lark (.lark) or GBNF (.gbnf)")
    x.add_argument("--pydantic", metavar="MODULE:CLASS", help="a Pydantic model (or any type), e.g. app.models:Person")
    x.add_argument("--choices", metavar="A,B,...", help="comma-separated strings; the output is exactly one")
    g.add_argument("--whitespace", choices=["compact", "flexible", "dumps"], default=None,
                   help="JSON layout: compact (no whitespace), dumps (exactly json.dumps: ', ' and ': ') or flexible (the model chooses; bounded). "
                        "generate defaults to dumps, compile to compact")
    g.add_argument("--lenient", action="store_true",
                   help="ignore unsupported JSON Schema keywords (and report them) instead of failing")
    g.add_argument("--open-objects", action="store_true",
                   help="keep objects that do not declare additionalProperties open to extra keys "
                        "(by default generation closes them, so the model fills the declared fields)")
    g.add_argument("--exact", action="store_true",
                   help="exact JSON Schema semantics: no generation hygiene (by default integers are integer "
                        "literals in the 64-bit range, numbers have bounded digits and exponents, whitespace runs "
                        "are short and extra keys come after the declared ones)")
    g.add_argument("--any-order", action="store_true",
                   help="let object members come in any order, each key at most once (default: the order "
                        "the schema declares)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="structgen", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Generate text that is guaranteed to match a JSON Schema, a Pydantic model, a regex or "
                    "a grammar, by masking a language model's choices token by token.",
        epilog=_EXAMPLES)
    p.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    g = sub.add_parser("generate", help="generate constrained output and print it as JSON",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Generate with a language model under a constraint; print JSON on stdout.\n"
                                   "Without a constraint the output is free text (printed as a JSON string).",
                       epilog=_EXAMPLES)
    g.add_argument("prompt", nargs="?", help="the prompt (default: read stdin)")
    _add_constraint_args(g, required=False)
    m = g.add_argument_group("model")
    m.add_argument("--model", metavar="PATH_OR_NAME",
                   help="a transformers model folder, a .gguf file or a hub name "
                        "(default: the embedded SmolLM2-135M-Instruct demo)")
    m.add_argument("--chat", dest="chat", action="store_true", default=None,
                   help="wrap the prompt in the tokenizer's chat template (default: when it has one)")
    m.add_argument("--no-chat", dest="chat", action="store_false", help="use the prompt as raw text")
    m.add_argument("--system", metavar="TEXT", help="a system message (with the chat template)")
    s = g.add_argument_group("decoding")
    s.add_argument("--max-new-tokens", type=int, default=256, metavar="N", help="token budget (default 256)")
    s.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    s.add_argument("--top-p", type=float, default=1.0)
    s.add_argument("--top-k", type=int, default=0)
    s.add_argument("--seed", type=int, default=None)
    s.add_argument("--no-fast-forward", dest="fast_forward", action="store_false",
                   help="sample forced text token by token instead of feeding it in one pass")
    s.add_argument("--token-healing", action="store_true", help="re-generate the prompt's last token")
    s.add_argument("--speculative", action="store_true",
                   help="speculative decoding from grammar and prompt-lookup drafts (same output distribution)")
    s.add_argument("--draft-model", metavar="PATH_OR_LAYERS",
                   help="with --speculative: a draft model sharing the tokenizer, or N for the model's first "
                        "N layers")
    s.add_argument("--num-draft-tokens", type=int, default=4, metavar="K", help="drafts per step to start with")
    o = g.add_argument_group("output")
    o.add_argument("--lines", action="store_true",
                   help="each line of stdin is one prompt; print one JSON result per line (JSON Lines)")
    o.add_argument("--batch-size", type=int, default=8, metavar="N", help="prompts decoded together with --lines")
    o.add_argument("--full", action="store_true",
                   help="print the whole result (value, text, token counts, timings) instead of the value")

    c = sub.add_parser("compile", help="check a constraint and show what it compiles to",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Compile a constraint and print its automaton size, compile time and any "
                                   "unsupported keywords (with their JSON pointers).")
    _add_constraint_args(c, required=True)
    c.add_argument("--tokenizer", metavar="PATH_OR_NAME",
                   help="compile against this tokenizer's vocabulary too (default: the demo model's, if "
                        "installed; 'none' to check the byte-level automaton only)")
    c.add_argument("--json", action="store_true", help="print the report as JSON")

    k = sub.add_parser("cache", help="show (or clear) the disk cache",
                       description="The disk cache's directory ($STRUCTGEN_CACHE_DIR), files and bytes per namespace.")
    k.add_argument("--clear", action="store_true", help="delete the disk cache's files")
    k.add_argument("--json", action="store_true", help="print the report as JSON")

    b = sub.add_parser("bench", help="run a benchmark suite (see `structgen bench --help`)", add_help=False)
    b.add_argument("args", nargs=argparse.REMAINDER)
    return p


# ----------------------------------------------------------------------------- helpers
def _read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None


def _import_object(spec: str):
    if ":" not in spec:
        raise UsageError(f"--pydantic takes MODULE:CLASS (e.g. app.models:Person), not {spec!r}")
    mod_name, _, attr = spec.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj = importlib.import_module(mod_name)
    except ImportError as e:
        raise UsageError(f"cannot import module {mod_name!r}: {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UsageError(f"module {mod_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def _constraint_kwargs(args, default_whitespace: str | None) -> dict:
    """generate()-style constraint keywords from the arguments."""
    ws = args.whitespace or default_whitespace
    options = {"lenient": True} if args.lenient else {}
    if getattr(args, "open_objects", False):
        options["strict"] = False
    if getattr(args, "any_order", False):
        options["property_order"] = "any"
    if getattr(args, "exact", False):
        options["hygiene"] = False
    if args.schema is not None:
        text = _read_text(args.schema)
        try:
            schema = json.loads(text)
        except ValueError as e:
            from .errors import SchemaError

            raise SchemaError(f"{args.schema} is not JSON: {e}", "") from None
        return {"schema": schema, "whitespace": ws, "schema_options": options}
    if args.pydantic is not None:
        return {"schema": _import_object(args.pydantic), "whitespace": ws, "schema_options": options}
    if args.regex is not None:
        return {"regex": args.regex}
    if args.choices is not None:
        opts = [c for c in args.choices.split(",")]
        if not any(opts):
            raise UsageError("--choices needs at least one non-empty string")
        return {"choices": opts}
    if args.grammar is not None:
        from .grammar import Grammar

        text = _read_text(args.grammar)
        gbnf = args.grammar.endswith(".gbnf") or ("::=" in text and not args.grammar.endswith(".lark"))
        return {"grammar": Grammar.from_gbnf(text) if gbnf else Grammar.from_lark(text)}
    return {}


def _progress(done: int, total: int, t0: float) -> None:
    if not sys.stderr.isatty() and total < 2:
        return
    width = 30
    fill = int(width * done / max(total, 1))
    rate = done / max(time.perf_counter() - t0, 1e-9)
    sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} prompts, {rate:.2f}/s")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _load(model_name):
    from .models import load_model

    if model_name is None:
        sys.stderr.write("loading the demo model (SmolLM2-135M-Instruct)...\n")
    return load_model(model_name)


def _speculative(args, model):
    """The ``Speculative`` the flags ask for, or None."""
    from .decoding.speculative import Speculative
    from .models import load_model, truncated_copy

    if args.draft_model is not None and not args.speculative:
        raise UsageError("--draft-model needs --speculative")
    if not args.speculative:
        return None
    draft = None
    if args.draft_model is not None:
        if args.draft_model.isdigit():
            draft = truncated_copy(model, int(args.draft_model))
        else:
            draft = load_model(args.draft_model)[0]
    return Speculative(draft_model=draft, num_draft_tokens=args.num_draft_tokens)


# ----------------------------------------------------------------------------- commands
def cmd_generate(args) -> int:
    from .api import Generator

    kw = _constraint_kwargs(args, default_whitespace="dumps")
    if args.lines:
        prompts = [line.rstrip("\n") for line in sys.stdin if line.strip()]
        if not prompts:
            raise UsageError("--lines: stdin has no prompts")
    else:
        prompt = args.prompt
        if prompt is None or prompt == "-":
            if sys.stdin.isatty():
                raise UsageError("give a prompt argument or pipe one on stdin")
            prompt = sys.stdin.read()
        if not prompt.strip():
            raise UsageError("the prompt is empty")
        prompts = [prompt]
    if args.max_new_tokens < 1:
        raise UsageError("--max-new-tokens must be at least 1")
    model, tok = _load(args.model)
    chat = args.chat
    if chat is None:
        chat = bool(getattr(tok, "chat_template", None))
    gen = Generator(model, tok)
    opts = dict(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
                top_k=args.top_k, seed=args.seed, chat=chat, system=args.system,
                fast_forward=args.fast_forward, token_healing=args.token_healing,
                speculative=_speculative(args, model), **kw)
    status = EXIT_OK
    t0 = time.perf_counter()
    done = 0
    step = max(1, args.batch_size) if args.lines else 1
    for start in range(0, len(prompts), step):
        chunk = prompts[start:start + step]
        results = gen(chunk, **opts)
        for r in results:
            d = r.to_dict()
            if "error" in d:
                status = EXIT_INCOMPLETE
                sys.stderr.write(f"error: {d['error']}\n")
            out = d if args.full else d["value"]
            sys.stdout.write(json.dumps(out, ensure_ascii=False, indent=None if args.lines else 2) + "\n")
        sys.stdout.flush()
        done += len(chunk)
        if args.lines:
            _progress(done, len(prompts), t0)
    return status


def cmd_compile(args) -> int:
    from .compiler import compile as compile_grammar
    from .errors import Unsupported

    kw = _constraint_kwargs(args, default_whitespace=None)
    from .api import resolve_constraint

    t0 = time.perf_counter()
    try:
        constraint = resolve_constraint(**kw)
    except Unsupported as e:
        if "schema" in kw and not args.lenient:
            _report_unsupported(kw, e)
        raise
    grammar = constraint.grammar
    front_s = time.perf_counter() - t0
    report = {"constraint": constraint.description, "kind": grammar.kind, "frontend_seconds": round(front_s, 4)}
    rep = grammar.report
    if rep is not None:
        report["exact"] = bool(getattr(rep, "exact", True))
        report["ignored_keywords"] = [{"keyword": k, "pointer": p or "#", "why": w}
                                      for k, p, w in getattr(rep, "ignored", [])]
        report["truncated_refs"] = list(getattr(rep, "truncated", []))
        report["hygiene"] = getattr(rep, "hygiene", None)   # generation restrictions (None: exact)
        if getattr(rep, "unique_keys", False) or getattr(rep, "notes", None):
            report["property_order"] = "any" if getattr(rep, "unique_keys", False) else "declared"
            report["notes"] = list(getattr(rep, "notes", []))
            report["live_keys"] = bool(getattr(rep, "live_keys", False))
    vocab = _compile_vocab(args.tokenizer)
    if vocab is not None:
        cg = compile_grammar(grammar, vocab)
        s = cg.stats
        report.update(tokenizer=repr(vocab), states=s.states, byte_classes=s.byte_classes,
                      dfa_seconds=round(s.dfa_seconds, 4), index_seconds=round(s.index_seconds, 4),
                      compile_seconds=round(s.seconds, 4))
        if s.extra:
            report["extra"] = {k: v for k, v in s.extra.items() if isinstance(v, (int, float, str, bool))}
        m = cg.matcher()
        forced = vocab.decode(m.forced_tokens())
        report["forced_prefix"] = forced.decode("utf-8", errors="replace")
    elif grammar.is_regular:
        from .automaton.build import build_dfa

        t1 = time.perf_counter()
        dfa = build_dfa(grammar.node)
        report.update(states=dfa.n_states, byte_classes=dfa.n_classes,
                      dfa_seconds=round(time.perf_counter() - t1, 4))
    elif grammar.cfg is not None:  # grammar engine: the lexer's states (terminal DFAs) and rules
        from .cfg.engine import normalise

        t1 = time.perf_counter()
        norm, dfas = normalise(grammar.cfg)
        report.update(states=sum(d.n_states for d in dfas.values()), nonterminals=len(norm.rules),
                      terminals=len(dfas), dfa_seconds=round(time.perf_counter() - t1, 4))
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        for k, v in report.items():
            if k == "ignored_keywords":
                print(f"{'ignored keywords':>18}: {len(v)}")
                for item in v:
                    print(f"{'':>20}{item['keyword']} at {item['pointer']}: {item['why']}")
            elif k == "notes":
                print(f"{'notes':>18}: {len(v)}")
                for line in v:
                    print(f"{'':>20}{line}")
            else:
                print(f"{k.replace('_', ' '):>18}: {v}")
    return EXIT_OK


def _report_unsupported(kw, err) -> None:
    """On an unsupported schema, list every unsupported keyword (a lenient recompile finds them all)."""
    from .grammar import Grammar

    try:
        opts = dict(kw.get("schema_options") or {}, lenient=True)
        if kw.get("whitespace"):
            opts["whitespace"] = kw["whitespace"]
        schema = kw["schema"]
        if isinstance(schema, (dict, bool)):
            g = Grammar.from_json_schema(schema, **opts)
        else:
            g = Grammar.from_pydantic(schema, **opts)
        ignored = getattr(g.report, "ignored", [])
    except Exception:
        return
    if ignored:
        sys.stderr.write("unsupported keywords (rerun with --lenient to ignore them):\n")
        for k, p, w in ignored:
            sys.stderr.write(f"  {k} at {p or '#'}: {w}\n")


def _compile_vocab(tokenizer_arg):
    from .models import ModelNotAvailable, demo_available, demo_folder

    if tokenizer_arg is not None and tokenizer_arg.lower() == "none":
        return None
    from .vocab import Vocabulary

    if tokenizer_arg is None:
        if not demo_available():
            sys.stderr.write("note: no --tokenizer and no demo model: checking the byte-level automaton only\n")
            return None
        from .models import _demo_tokenizer

        return Vocabulary.from_tokenizer(_demo_tokenizer(demo_folder()))
    try:
        if os.path.exists(tokenizer_arg):
            return Vocabulary.from_tokenizer(tokenizer_arg)
        from transformers import AutoTokenizer

        return Vocabulary.from_tokenizer(AutoTokenizer.from_pretrained(tokenizer_arg))
    except Exception as e:
        raise ModelNotAvailable(f"cannot load the tokenizer {tokenizer_arg!r}: {e}") from None


def cmd_cache(args) -> int:
    """``structgen cache [--clear] [--json]``: the disk cache's size (see :mod:`structgen.caching`)."""
    from . import caching

    if args.clear:
        caching.clear_caches(disk=True)
    info = caching.disk_info()
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    print(f"{info['dir'] or '(disk cache disabled: STRUCTGEN_CACHE_DIR is empty)'}: "
          f"{info['files']} files, {info['bytes']} bytes")
    for ns, v in info["namespaces"].items():
        print(f"  {ns:20s} {v['files']:6d} files {v['bytes']:12d} bytes")
    return 0


def cmd_bench(args) -> int:
    """Dispatch to :func:`structgen.bench.main` (maskbench, jsonschemabench, testsuite, report)."""
    from .bench import main as bench_main

    return int(bench_main(list(args.args)) or 0)


# ----------------------------------------------------------------------------- entry point
def _exit_code_for(err: BaseException) -> int:
    from .errors import GrammarError, LimitExceeded, RegexError, SchemaError, StructgenError, Unsupported, \
        VocabularyError
    from .api import GenerationError
    from .models import ModelNotAvailable

    if isinstance(err, UsageError):
        return EXIT_USAGE
    if isinstance(err, (ModelNotAvailable, VocabularyError)):
        return EXIT_MODEL
    if isinstance(err, GenerationError):
        return EXIT_INCOMPLETE
    if isinstance(err, (SchemaError, RegexError, GrammarError, Unsupported, LimitExceeded)):
        return EXIT_SPEC
    if isinstance(err, StructgenError):
        return EXIT_SPEC
    return EXIT_INTERNAL


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:  # the benchmark has its own parser (and --help)
        from .bench import main as bench_main

        try:
            return int(bench_main(argv[1:]) or 0)
        except SystemExit as e:  # argparse's usage errors: an exit code, not an exception
            return e.code if isinstance(e.code, int) else EXIT_USAGE
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        if args.command == "generate":
            return cmd_generate(args)
        if args.command == "compile":
            return cmd_compile(args)
        if args.command == "cache":
            return cmd_cache(args)
        return cmd_bench(args)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BaseException as e:  # noqa: BLE001 - the CLI's job is to turn errors into exit codes
        if isinstance(e, SystemExit):
            raise
        code = _exit_code_for(e)
        if args.debug:
            import traceback

            traceback.print_exc()
        kind = {EXIT_SPEC: "invalid constraint", EXIT_MODEL: "model", EXIT_INCOMPLETE: "incomplete output",
                EXIT_USAGE: "usage", EXIT_INTERNAL: "internal error"}[code]
        msg = str(e) or type(e).__name__
        sys.stderr.write(f"structgen: {kind}: {msg}\n")
        if code == EXIT_INTERNAL and not args.debug:
            sys.stderr.write(f"({type(e).__name__}; rerun with --debug for the traceback)\n")
        return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
