"""paths: where the benchmarks find their data when no path is given.

Data sets and tokenizers are never package data (they are large): every runner takes them as
arguments (``--tokenizer``, ``--suite`` / ``--data``).  Without one, the defaults are looked up at
run time, never at import: ``tests/data/...`` of the source checkout this module sits in (an
editable install or ``PYTHONPATH=checkout``), then of the current working directory, and for
JSONSchemaBench ``../shared/data/jsonschemabench`` beside either.  When nothing is found a
:class:`~structgen.errors.StructgenError` names the argument to pass, so an installed
``structgen bench ... --help`` works anywhere and a run fails clearly.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import StructgenError

__all__ = ["find_tokenizer", "find_suite", "find_jsonschemabench", "checkout_roots"]


def checkout_roots() -> list[Path]:
    """Candidate source checkouts: the one holding this module (when it is one), then the
    working directory."""
    roots = []
    here = Path(__file__).resolve().parents[2]
    if (here / "pyproject.toml").is_file() and (here / "tests").is_dir():
        roots.append(here)
    cwd = Path.cwd()
    if cwd not in roots:
        roots.append(cwd)
    return roots


def _find(given, rel: str, what: str, argument: str) -> Path:
    if given is not None:
        p = Path(given)
        if not p.exists():
            raise StructgenError(f"{argument} {p}: no such {what}")
        return p
    tried = [root / rel for root in checkout_roots()]
    for p in tried:
        if p.exists():
            return p
    raise StructgenError(f"no {what} found (looked for {', '.join(map(str, tried))}): pass {argument}")


def find_tokenizer(given=None, name: str = "llama3", argument: str = "--tokenizer") -> Path | str:
    """``given`` (a folder, or a Hugging Face name that is not a local path, passed through), else
    the checkout's ``tests/data/tokenizers/<name>``."""
    if given is not None and not Path(given).exists():
        return str(given)  # a hub name such as "gpt2": the tokenizer loader decides (and says why not)
    return _find(given, f"tests/data/tokenizers/{name}", "tokenizer folder", argument)


def find_suite(given=None, argument: str = "--suite") -> Path:
    """``given``, else the checkout's copy of the official JSON-Schema-Test-Suite."""
    return _find(given, "tests/data/json-schema-test-suite", "JSON-Schema-Test-Suite folder", argument)


def find_jsonschemabench(given=None, argument: str = "--data") -> Path:
    """``given``, else ``../shared/data/jsonschemabench`` beside the checkout."""
    return _find(given, "../shared/data/jsonschemabench", "JSONSchemaBench folder", argument)
