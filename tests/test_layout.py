"""The package's shape: imports point down the line the data walks, no cycles, no hidden imports.

Layers, lowest first (a module may import its own package and the packages of lower layers only):

    errors, caching, kernels -> vocab -> automaton -> index -> runtime -> cfg -> frontends
    -> grammar, compiler, grammars -> decoding -> integrations, models -> api -> cli, bench

Function-level imports are for optional dependencies only (and for the command line, which keeps
``structgen --help`` from loading torch).  The graph is read from the source with ``ast``, so a
function-level import counts like any other.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "structgen"

LAYERS = [
    {"errors", "caching", "collector", "kernels"},
    {"vocab"},
    {"automaton"},
    {"index"},
    {"runtime"},
    {"cfg"},
    {"frontends"},
    {"grammar", "compiler", "grammars", "constraints", "composition", "tags", "tools"},
    {"decoding", "diffusion"},
    {"integrations", "models"},
    {"api"},
    {"cli", "bench", "__main__"},
]
LEVEL = {name: i for i, names in enumerate(LAYERS) for name in names}

# Imported inside functions on purpose: optional or heavy third-party packages.
OPTIONAL = {"transformers", "pydantic", "llguidance", "xgrammar", "outlines_core", "matplotlib", "gguf",
            "accelerate", "vllm", "sglang", "tokenizers", "torch", "lark", "jsonschema", "referencing",
            "regex", "psutil", "resource", "traceback", "argparse", "subprocess", "multiprocessing",
            "concurrent", "importlib", "pickle", "tempfile", "platform", "bisect", "_sre", "time"}
# Entry points that import the rest of the package lazily so that ``--help`` stays fast.
LAZY_ENTRY_POINTS = {"cli", "bench", "__main__"}


def _modules():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports(module: str, path: Path):
    """(imported module, inside a function?) for every import of ``path``."""
    is_pkg = path.name == "__init__.py"
    pkg = module if is_pkg else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nested = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nested.update(id(n) for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, id(node) in nested
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod == "__future__":
                continue
            yield mod, id(node) in nested
            for a in node.names:  # ``from . import earley`` imports the module structgen.cfg.earley
                yield f"{mod}.{a.name}", id(node) in nested


MODULES = dict(_modules())


def test_every_package_has_a_layer():
    missing = sorted({_package(m) for m in MODULES} - set(LEVEL) - {""})
    assert not missing, f"packages with no layer in tests/test_layout.py: {missing}"


def test_imports_point_down():
    wrong = []
    for module, path in MODULES.items():
        here = _package(module)
        if here == "":  # structgen/__init__.py re-exports the public names
            continue
        for target, _ in _imports(module, path):
            if not target.startswith("structgen.") or target not in MODULES:
                continue
            there = _package(target)
            if there in ("", here):
                if there == "" and here not in LAZY_ENTRY_POINTS:
                    wrong.append(f"{module} imports the top-level package")
                continue
            if LEVEL[there] > LEVEL[here]:
                wrong.append(f"{module} ({here}) imports {target} ({there}), a higher layer")
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_no_import_cycles():
    graph = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for target, _ in _imports(module, path):
            if target in MODULES and target != module:
                if path.name == "__init__.py" and target.startswith(module + "."):
                    continue  # a package re-exporting its own children
                graph[module].add(target)
    # iterative Tarjan (no recursion limit to hit)
    index, low, on, stack, cycles, counter = {}, {}, set(), [], [], 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        cycles.append(sorted(comp))
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_function_level_imports_are_for_optional_dependencies():
    hidden = []
    for module, path in MODULES.items():
        if _package(module) in LAZY_ENTRY_POINTS:
            continue
        for target, nested in _imports(module, path):
            if nested and target.split(".")[0] not in OPTIONAL and target.split(".")[0] != "structgen":
                continue  # standard-library module imported late: harmless
            if nested and target.startswith("structgen"):
                hidden.append(f"{module} imports {target} inside a function")
    assert not hidden, "\n".join(sorted(set(hidden)))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size(module):
    n = sum(1 for _ in MODULES[module].open(encoding="utf-8"))
    assert n <= 800, f"{module} has {n} lines; split it along its nouns"


def test_package_docstrings_say_what_they_hold():
    for module, path in MODULES.items():
        if path.name == "__init__.py":
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
            assert doc and len(doc) > 40, f"{module}/__init__.py needs a docstring saying what it holds"
