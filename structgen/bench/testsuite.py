"""JSON-Schema-Test-Suite runner: is every instance accepted iff the suite says it is valid?

For each test case, the schema goes through ``Grammar.from_json_schema`` (``engine`` auto / dfa /
cfg) and ``sg.compile`` with a vocabulary (llama3 by default); each instance is serialised
compactly (``json.dumps(data, separators=(",", ":"))``) for the compact grammar and with
``json.dumps`` defaults for the ``whitespace="flexible"`` grammar, then forced token by token
through a matcher (the tokens of ``vocab.encode(text)``; accepted = every token advances and the
end state accepts).

Results are kept per keyword file: cases, cases compiled, tests run, passed, valid instances
rejected and invalid instances accepted (the latter must stay 0).

``format`` asserts (``formats="assert"``) except in the required ``format.json`` files, whose tests
are of the format-annotation vocabulary (``formats="annotate"``); the ``optional/format`` files
assume the assertion vocabulary, as the suite's README says.

    python -m structgen.bench.testsuite [--suite DIR] [--drafts draft2020-12 draft7] [--engine E]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from structgen import caching
from structgen.errors import StructgenError

from .paths import find_suite, find_tokenizer

DRAFT_OPTION = {"draft2020-12": "2020-12", "draft7": "draft7"}


_VOCABS = caching.LRU(4, name="bench.vocabularies")  # tokenizer path -> Vocabulary


def load_vocab(path=None):
    """The Vocabulary of a tokenizer folder (cached per path; default: the checkout's llama3)."""
    key = str(find_tokenizer(path, argument="tokenizer"))
    vocab = _VOCABS.get(key)
    if vocab is None:
        import structgen as sg

        vocab = sg.Vocabulary.from_tokenizer(key)
        _VOCABS.put(key, vocab)
    return vocab


def _empty(node) -> bool:
    from structgen.automaton.build import build_dfa

    return build_dfa(node).is_empty()


def _accepts_tokens(compiled, vocab, text: str) -> bool:
    m = compiled.matcher()
    for t in vocab.encode(text):
        if not m.advance(int(t)):
            return False
    return m.is_accepting()


def remotes_registry(suite) -> dict:
    """The suite's ``remotes/`` folder as a registry: ``{"http://localhost:1234/REL": schema}``
    (the URIs the suite serves them under)."""
    root = Path(suite) / "remotes"
    return {f"http://localhost:1234/{p.relative_to(root).as_posix()}": json.loads(p.read_text())
            for p in sorted(root.rglob("*.json"))}


_REGISTRIES = caching.LRU(4, name="bench.suite_remotes")  # suite folder -> remotes registry


def suite_registry(path) -> dict:
    """The remotes registry of the suite holding ``path`` (a keyword file or the suite folder
    itself; empty when none)."""
    p = Path(path).resolve()
    for up in (p, *p.parents):
        if (up / "remotes").is_dir():
            reg = _REGISTRIES.get(str(up))
            if reg is None:
                reg = remotes_registry(up)
                _REGISTRIES.put(str(up), reg)
            return reg
    return {}


def formats_of(path) -> str:
    """``"annotate"`` for a required ``format.json`` (format-annotation tests), else ``"assert"``."""
    path = Path(path)
    return "annotate" if path.name == "format.json" and "optional" not in path.parts else "assert"


def run_file(path: Path, draft: str, *, vocab=None, modes=("compact", "flexible"), time_limit: float = 10.0,
             engine: str = "auto", registry=None) -> dict:
    """Results for one keyword file (see the module docstring); ``vocab`` defaults to llama3;
    ``registry`` (default: the ``remotes/`` of the suite the file is in) resolves remote refs."""
    import structgen as sg

    vocab = load_vocab() if vocab is None else vocab
    if registry is None:
        registry = suite_registry(path)
    cases = json.loads(path.read_text())
    formats = formats_of(path)
    res = {"cases": len(cases), "compiled": 0, "tests": 0, "passed": 0, "valid_rejected": 0,
           "invalid_accepted": 0, "errors": {}}
    failures = []
    for case in cases:
        checkers = []
        try:
            for mode in modes:
                try:
                    g = sg.Grammar.from_json_schema(case["schema"], engine=engine, whitespace=mode,
                                                    draft=DRAFT_OPTION[draft], time_limit=time_limit,
                                                    registry=registry, formats=formats)
                except sg.EmptyLanguage:   # named as empty: no instance is valid
                    checkers.append((mode, lambda text: False))
                    continue
                if g.is_regular and _empty(g.node):
                    # an empty language has no token automaton: nothing is accepted
                    checkers.append((mode, lambda text: False))
                    continue
                cg = sg.compile(g, vocab, time_limit=time_limit, cache=False)
                checkers.append((mode, lambda text, cg=cg: _accepts_tokens(cg, vocab, text)))
        except StructgenError as e:
            name = type(e).__name__
            res["errors"][name] = res["errors"].get(name, 0) + 1
            continue
        res["compiled"] += 1
        for test in case["tests"]:
            res["tests"] += 1
            ok = True
            for mode, check in checkers:
                text = (json.dumps(test["data"], separators=(",", ":")) if mode == "compact"
                        else json.dumps(test["data"]))
                got = check(text)
                if got != test["valid"]:
                    ok = False
                    if got:
                        res["invalid_accepted"] += 1
                    else:
                        res["valid_rejected"] += 1
                    failures.append((case["description"], test["description"], mode, text[:80], got))
                    break
            res["passed"] += ok
    res["failures"] = failures
    return res


def suite_files(suite, draft: str, *, optional: bool = True) -> list:
    """``[("draft/file.json", path), ...]``: the keyword files of one draft of the official
    suite (with ``optional/`` and ``optional/format/`` when ``optional``)."""
    root = Path(suite) / draft
    paths = sorted(root.glob("*.json"))
    if optional:
        paths += sorted((root / "optional").glob("*.json")) + sorted((root / "optional" / "format").glob("*.json"))
    return [(f"{draft}/{p.relative_to(root)}", p) for p in paths]


def run_suite(suite: Path | None = None, drafts=("draft2020-12", "draft7"), *, vocab=None, optional=True,
              files=None, modes=("compact", "flexible"), engine: str = "auto") -> dict:
    """``{"draft/file.json": result}`` for every keyword file of the given drafts (``suite``:
    the suite folder, default the checkout's copy)."""
    suite = find_suite(suite, "suite")
    out = {}
    for draft in drafts:
        for rel, p in suite_files(suite, draft, optional=optional):
            if files is not None and rel not in files:
                continue
            out[rel] = run_file(p, draft, vocab=vocab, modes=modes, engine=engine)
    return out


def summary(results: dict) -> dict:
    keys = ("cases", "compiled", "tests", "passed", "valid_rejected", "invalid_accepted")
    return {k: sum(r[k] for r in results.values()) for k in keys}


def baseline_of(results: dict) -> dict:
    """The committed form: per file, the counts only."""
    keys = ("cases", "compiled", "tests", "passed", "valid_rejected", "invalid_accepted")
    return {f: {k: r[k] for k in keys} for f, r in sorted(results.items())}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default=None, help="the suite folder (default: tests/data/json-schema-test-suite "
                                                  "of a source checkout)")
    ap.add_argument("--drafts", nargs="+", default=["draft2020-12", "draft7"])
    ap.add_argument("--tokenizer", default=None,
                    help="tokenizer folder (default: tests/data/tokenizers/llama3 of a source checkout)")
    ap.add_argument("--engine", default="auto", choices=["auto", "dfa", "cfg"])
    ap.add_argument("--write-baseline", default=None, help="write the per-file counts to this JSON file")
    ap.add_argument("--show-failures", action="store_true")
    args = ap.parse_args(argv)
    try:
        vocab = load_vocab(find_tokenizer(args.tokenizer))
        suite = find_suite(args.suite)
    except StructgenError as e:
        raise SystemExit(f"structgen testsuite: {e}") from None
    t0 = time.perf_counter()
    results = run_suite(suite, args.drafts, vocab=vocab, engine=args.engine)
    for f, r in results.items():
        print(f"{f:55s} compiled {r['compiled']:3d}/{r['cases']:3d}  passed {r['passed']:4d}/{r['tests']:4d}"
              f"  valid-rejected {r['valid_rejected']:3d}  invalid-accepted {r['invalid_accepted']}  {r['errors']}")
        if args.show_failures:
            for fl in r["failures"]:
                print("      ", fl)
    s = summary(results)
    print(f"TOTAL {s}  ({time.perf_counter() - t0:.1f} s)")
    if args.write_baseline:
        Path(args.write_baseline).write_text(json.dumps(baseline_of(results), indent=1) + "\n")


if __name__ == "__main__":
    main()
