"""The package works from a non-editable install: installed into a temporary target with pip
(from a copy of the sources, so the checkout gets no build folders), then run from another
working directory with only that target on the path.  Checks that the installed copy is the one
imported, that the shipped grammars came along, and that ``structgen bench ... --help`` and
``structgen compile`` work there."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(importlib.util.find_spec("pip") is None
                                or importlib.util.find_spec("setuptools") is None,
                                reason="pip and setuptools are needed to install the package")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "structgen", src / "structgen", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    target = tmp_path_factory.mktemp("target")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                        "--quiet", "--target", str(target), str(src)], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    return target


def _run(target: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    env["STRUCTGEN_CACHE_DIR"] = str(cwd / "cache")
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=240)


def test_installed_copy_is_imported_and_has_its_data(installed, tmp_path):
    code = ("import structgen, structgen.grammars as g, pathlib; print(structgen.__file__);"
            "print(sorted(p.name for p in pathlib.Path(g.__file__).parent.glob('*.lark')))")
    r = _run(installed, tmp_path, "-c", code)
    assert r.returncode == 0, r.stderr
    where, names = r.stdout.splitlines()[:2]
    assert Path(where).resolve().is_relative_to(installed.resolve()), where
    shipped = sorted(p.name for p in (ROOT / "structgen" / "grammars").glob("*.lark"))
    assert shipped and names == repr(shipped)
    for pattern in ("grammars/*.lark", "grammars/*.gbnf", "data/**/*"):
        for p in (ROOT / "structgen").glob(pattern):
            if p.is_file():
                assert (installed / "structgen" / p.relative_to(ROOT / "structgen")).is_file(), p


@pytest.mark.parametrize("mode", ["testsuite", "maskbench"])
def test_bench_help_from_an_install(installed, tmp_path, mode):
    r = _run(installed, tmp_path, "-m", "structgen", "bench", mode, "--help")
    assert r.returncode == 0, r.stderr
    assert "--tokenizer" in r.stdout


def test_bench_without_data_names_the_argument(installed, tmp_path):
    r = _run(installed, tmp_path, "-m", "structgen", "bench", "testsuite", "--out", str(tmp_path / "out"),
             "--tokenizer", str(ROOT / "tests" / "data" / "tokenizers" / "gpt2"), "--engines", "structgen")
    assert r.returncode != 0
    assert "--data" in r.stderr and "Traceback" not in r.stderr


def test_compile_from_an_install(installed, tmp_path):
    tok = ROOT / "tests" / "data" / "tokenizers" / "gpt2"
    r = _run(installed, tmp_path, "-c", "import sys; from structgen.cli import main; sys.exit(main())",
             "compile", "--regex", "[0-9]{2}-[a-z]+", "--tokenizer", str(tok), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert '"states"' in r.stdout or "states" in r.stdout
