"""Engine adapters: one interface over structgen and its peers, for side-by-side benchmarks.

An :class:`Engine` is built once per worker process for a shared :class:`BenchTokenizer`
(every engine sees the same tokenizer and the same logits width).  ``engine.compile(schema)``
returns a compiled object whose ``matcher()`` gives fresh :class:`EngineMatcher` cursors with
three operations, the only ones the runners use:

- ``fill_mask(bitmask)``: write the allowed tokens into row 0 of an int32 ``[1, ceil(V/32)]``
  numpy array (bit ``i`` of word ``j`` = token ``32*j + i``, the layout all four engines share);
- ``advance(token) -> bool``: consume one token (False = rejected; the runners stop there);
- ``is_accepting() -> bool``: the text so far is a complete document (EOS would be allowed).

``compile`` raises :class:`EngineRefusal` when the engine declines a schema (unsupported
feature, invalid schema, its own limits); any other exception is counted as an engine error.

Adapters, with the options MaskBench used so that ``json.dumps`` output (``", "`` and
``": "``) is accepted when ``whitespace="flexible"``:

========== ===================================================================================
structgen  ``Grammar.from_json_schema(schema, whitespace=..., hygiene=...)`` + ``sg.compile`` (no
           cache; ``hygiene``: the generation restrictions, on for jsonschemabench, off where
           instances are forced; a schema named empty (``EmptyLanguage``) compiles to a matcher
           that takes no token, as the suite's own runner counts it)
llguidance ``LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": ...})``
xgrammar   ``GrammarCompiler(max_threads=1, cache_enabled=False).compile_json_schema(schema,
           any_whitespace=..., strict_mode=False)`` (strict mode would forbid extra properties,
           which JSON Schema allows)
outlines   ``build_regex_from_schema(schema, whitespace_pattern)`` + ``Index`` (outlines-core)
========== ===================================================================================

Stubs for tests: ``accept-all`` (every token, always accepting: must show invalidation
errors), ``reject-all`` (nothing: validation errors), ``hang`` and ``crash`` (to check that a
worker's hang or death costs one schema only).  ``module:Class`` names any other adapter.
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import os
import time

import numpy as np


class EngineRefusal(Exception):
    """The engine declined the schema (unsupported or invalid); not a crash."""


class EngineUnavailable(Exception):
    """The engine's package is not installed (or cannot load this tokenizer)."""


# ----------------------------------------------------------------------------- shared tokenizer
class BenchTokenizer:
    """The tokenizer every engine of a run shares: the Hugging Face tokenizer, its structgen
    :class:`~structgen.Vocabulary` (built on first use), the logits width and the EOS ids."""

    def __init__(self, hf_tokenizer, logits_width: int | None = None, source: str = ""):
        self.hf = hf_tokenizer
        self.source = source
        self.width = int(logits_width or len(hf_tokenizer))
        self._vocab = None

    @classmethod
    def load(cls, name_or_path: str, logits_width: int | None = None) -> "BenchTokenizer":
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        if os.path.exists(name_or_path):
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoTokenizer

        return cls(AutoTokenizer.from_pretrained(name_or_path), logits_width, source=str(name_or_path))

    @property
    def vocab(self):
        if self._vocab is None:
            import structgen as sg

            self._vocab = sg.Vocabulary.from_tokenizer(self.hf, logits_width=self.width)
        return self._vocab

    @property
    def eos_ids(self) -> list[int]:
        return [int(i) for i in self.vocab.eos_ids]

    @property
    def words(self) -> int:
        return (self.width + 31) // 32

    def encode(self, text: str) -> list[int]:
        return list(self.hf.encode(text, add_special_tokens=False))

    def decode(self, ids) -> str:
        return self.vocab.decode(ids).decode("utf-8", errors="replace")

    def allocate(self) -> np.ndarray:
        return np.zeros((1, self.words), dtype=np.int32)


def _version(dist: str) -> str:
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:
        return "?"


# ----------------------------------------------------------------------------- interface
class EngineMatcher:
    """Per-sequence cursor (see the module docstring)."""

    def fill_mask(self, bitmask: np.ndarray) -> None:
        raise NotImplementedError

    def advance(self, token: int) -> bool:
        raise NotImplementedError

    def is_accepting(self) -> bool:
        raise NotImplementedError


class Compiled:
    """A schema compiled by one engine; hands out fresh matchers."""

    def matcher(self) -> EngineMatcher:
        raise NotImplementedError


class Engine:
    """An engine bound to a tokenizer.  ``whitespace``: ``"flexible"`` (any JSON whitespace,
    as MaskBench forces ``json.dumps`` output) or ``"compact"`` (none, for generation)."""

    name = "engine"
    dist: str | None = None   # the distribution whose version is reported

    def __init__(self, tok: BenchTokenizer, *, whitespace: str = "flexible", compile_limit: float = 10.0,
                 hygiene: bool = False):
        if whitespace not in ("flexible", "compact"):
            raise ValueError("whitespace must be 'flexible' or 'compact'")
        self.tok = tok
        self.whitespace = whitespace
        self.compile_limit = compile_limit
        self.hygiene = bool(hygiene)   # structgen only: generation restrictions (peers keep their defaults)

    @property
    def version(self) -> str:
        return _version(self.dist) if self.dist else "-"

    def compile(self, schema, context: dict | None = None) -> Compiled:
        """``context``: what the task knows beyond the schema -- for the official suite, ``suite``
        (its folder, whose ``remotes/`` serve remote refs) and ``formats`` (``"annotate"`` for the
        required ``format.json`` files).  Peers have no remote registry nor format switch: they
        ignore it."""
        raise NotImplementedError

    def warm_up(self) -> None:
        """Load lazily initialised code once, so the first schema's TTFM is not the engine's
        start-up (structgen's Numba cache, the peers' tokenizer tables)."""
        schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}},
                                                   "b": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}}
        # and a closed object with many keys (structgen's any-order key checks)
        closed = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(12)},
                  "additionalProperties": False}
        bm = self.tok.allocate()
        for s, value in ((schema, {"a": ["x"], "b": 1}), (closed, {"k3": 1, "k1": 2})):
            m = self.compile(s).matcher()
            for t in self.tok.encode(json.dumps(value)):
                m.fill_mask(bm)
                if not m.advance(t):
                    break
            m.fill_mask(bm)


# ----------------------------------------------------------------------------- structgen
class _StructgenMatcher(EngineMatcher):
    __slots__ = ("m",)

    def __init__(self, m):
        self.m = m

    def fill_mask(self, bitmask):
        self.m.fill_bitmask(bitmask, 0)

    def advance(self, token):
        return self.m.advance(token)

    def is_accepting(self):
        return self.m.is_accepting()


class _StructgenCompiled(Compiled):
    def __init__(self, cg):
        self.cg = cg

    def matcher(self):
        return _StructgenMatcher(self.cg.matcher())


class StructgenEngine(Engine):
    name = "structgen"
    dist = "structgen"
    property_order = "declared"

    @property
    def version(self) -> str:
        import structgen

        return getattr(structgen, "__version__", "?")

    def compile(self, schema, context=None):
        import structgen as sg

        context = context or {}
        registry = None
        if context.get("suite"):
            from .testsuite import suite_registry

            registry = suite_registry(context["suite"])
        t0 = time.perf_counter()
        try:
            g = sg.Grammar.from_json_schema(schema, whitespace=self.whitespace, time_limit=self.compile_limit,
                                            property_order=self.property_order, hygiene=self.hygiene,
                                            registry=registry, formats=context.get("formats", "assert"))
            left = max(0.1, self.compile_limit - (time.perf_counter() - t0))
            cg = sg.compile(g, self.tok.vocab, time_limit=left, cache=False)
        except sg.EmptyLanguage:
            return _ConstCompiled(False)   # no instance is valid: a matcher that takes nothing is exact
        except sg.StructgenError as e:
            raise EngineRefusal(f"{type(e).__name__}: {e}") from None
        except RecursionError:
            raise EngineRefusal("RecursionError") from None
        return _StructgenCompiled(cg)


class StructgenAnyOrderEngine(StructgenEngine):
    """structgen with ``property_order="any"``: object members in any order, each key once."""

    name = "structgen-any"
    property_order = "any"


# ----------------------------------------------------------------------------- llguidance
class _LLGMatcher(EngineMatcher):
    __slots__ = ("m", "fill")

    def __init__(self, m, fill):
        self.m, self.fill = m, fill

    def fill_mask(self, bitmask):
        self.fill(self.m, bitmask, 0)

    def advance(self, token):
        return bool(self.m.consume_token(token)) and not self.m.is_error()

    def is_accepting(self):
        return bool(self.m.is_accepting())


class _LLGCompiled(Compiled):
    def __init__(self, engine, grammar, first):
        self.engine, self.grammar, self.first = engine, grammar, first

    def matcher(self):
        import llguidance
        from llguidance.numpy import fill_next_token_bitmask

        m, self.first = self.first, None
        if m is None:
            m = llguidance.LLMatcher(self.engine.lltok, self.grammar, log_level=0)
        return _LLGMatcher(m, fill_next_token_bitmask)


class LLGuidanceEngine(Engine):
    name = "llguidance"
    dist = "llguidance"

    def __init__(self, tok, **kw):
        super().__init__(tok, **kw)
        try:
            import llguidance
            import llguidance.hf
        except ImportError as e:
            raise EngineUnavailable(f"llguidance is not installed: {e}") from None
        self.lltok = llguidance.hf.from_tokenizer(tok.hf, n_vocab=tok.width, eos_token=tok.eos_ids[0])

    def compile(self, schema, context=None):
        import llguidance

        try:
            grammar = llguidance.LLMatcher.grammar_from_json_schema(
                schema, defaults={"whitespace_flexible": self.whitespace == "flexible"})
        except ValueError as e:
            raise EngineRefusal(str(e)) from None
        m = llguidance.LLMatcher(self.lltok, grammar, log_level=0)
        if m.is_error():
            raise EngineRefusal(m.get_error())
        return _LLGCompiled(self, grammar, m)


# ----------------------------------------------------------------------------- xgrammar
class _XGRMatcher(EngineMatcher):
    __slots__ = ("m",)

    def __init__(self, m):
        self.m = m

    def fill_mask(self, bitmask):
        self.m.fill_next_token_bitmask(bitmask, 0)

    def advance(self, token):
        return bool(self.m.accept_token(token))

    def is_accepting(self):
        return bool(self.m.is_completed())


class _XGRCompiled(Compiled):
    def __init__(self, cg):
        self.cg = cg

    def matcher(self):
        import xgrammar as xgr

        return _XGRMatcher(xgr.GrammarMatcher(self.cg))


class XGrammarEngine(Engine):
    name = "xgrammar"
    dist = "xgrammar"

    def __init__(self, tok, **kw):
        super().__init__(tok, **kw)
        try:
            import xgrammar as xgr
        except ImportError as e:
            raise EngineUnavailable(f"xgrammar is not installed: {e}") from None
        info = xgr.TokenizerInfo.from_huggingface(tok.hf, vocab_size=tok.width, stop_token_ids=tok.eos_ids)
        # one thread: each benchmark worker is one process on one core, for every engine alike
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    def compile(self, schema, context=None):
        flexible = self.whitespace == "flexible"
        try:
            cg = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=flexible,
                                                   separators=None if flexible else (",", ":"), strict_mode=False)
        except (RuntimeError, ValueError, TypeError) as e:
            raise EngineRefusal(f"{type(e).__name__}: {str(e)[:300]}") from None
        return _XGRCompiled(cg)


# ----------------------------------------------------------------------------- outlines-core
class _OutlinesMatcher(EngineMatcher):
    __slots__ = ("guide",)

    def __init__(self, guide):
        self.guide = guide

    def fill_mask(self, bitmask):
        row = bitmask[0]
        self.guide.write_mask_into(row.ctypes.data, row.size, 4)

    def advance(self, token):
        try:
            self.guide.advance(token, return_tokens=False)
        except ValueError:
            return False
        return True

    def is_accepting(self):
        return bool(self.guide.is_finished())


class _OutlinesCompiled(Compiled):
    def __init__(self, index):
        self.index = index

    def matcher(self):
        import outlines_core as oc

        return _OutlinesMatcher(oc.Guide(self.index))


class OutlinesEngine(Engine):
    """outlines-core: the schema becomes one regex, indexed against the whole vocabulary up
    front (its vocabulary is built from the exact token bytes structgen reads, EOS apart);
    masks come from ``Guide.write_mask_into``."""

    name = "outlines"
    dist = "outlines_core"
    WHITESPACE = r"[ \t\n\r]*"

    def __init__(self, tok, **kw):
        super().__init__(tok, **kw)
        try:
            import outlines_core as oc
        except ImportError as e:
            raise EngineUnavailable(f"outlines-core is not installed: {e}") from None
        v = tok.vocab
        normal = np.flatnonzero(v.is_normal[: v.size])
        table: dict = {}
        for i in normal.tolist():
            table.setdefault(v.token_bytes(i), []).append(i)
        self.eos = tok.eos_ids[0]
        self.ocvocab = oc.Vocabulary(self.eos, table)

    def compile(self, schema, context=None):
        import outlines_core as oc
        from outlines_core.json_schema import build_regex_from_schema

        ws = self.WHITESPACE if self.whitespace == "flexible" else ""
        try:
            regex = build_regex_from_schema(json.dumps(schema), whitespace_pattern=ws)
            index = oc.Index(regex, self.ocvocab)
        except (ValueError, TypeError, RuntimeError) as e:
            raise EngineRefusal(f"{type(e).__name__}: {str(e)[:300]}") from None
        return _OutlinesCompiled(index)


# ----------------------------------------------------------------------------- stubs
class _ConstMatcher(EngineMatcher):
    __slots__ = ("value",)

    def __init__(self, value: bool):
        self.value = value

    def fill_mask(self, bitmask):
        bitmask[0] = -1 if self.value else 0

    def advance(self, token):
        return self.value

    def is_accepting(self):
        return self.value


class _ConstCompiled(Compiled):
    def __init__(self, value):
        self.value = value

    def matcher(self):
        return _ConstMatcher(self.value)


class AcceptAllEngine(Engine):
    """Test stub: allows every token and always accepts (so every invalid instance is an
    invalidation error)."""

    name = "accept-all"

    def compile(self, schema, context=None):
        return _ConstCompiled(True)


class RejectAllEngine(Engine):
    """Test stub: compiles everything, allows nothing (every valid instance is a validation
    error)."""

    name = "reject-all"

    def compile(self, schema, context=None):
        return _ConstCompiled(False)


class HangEngine(Engine):
    """Test stub: never finishes compiling (the worker must be killed at the compile limit)."""

    name = "hang"

    def warm_up(self):
        pass

    def compile(self, schema, context=None):
        while True:
            time.sleep(1)


class CrashEngine(Engine):
    """Test stub: the process dies while compiling (as a segfault in a native engine would)."""

    name = "crash"

    def warm_up(self):
        pass

    def compile(self, schema, context=None):
        os._exit(3)


ENGINES = {
    "structgen": StructgenEngine, "structgen-any": StructgenAnyOrderEngine, "llguidance": LLGuidanceEngine, "xgrammar": XGrammarEngine,
    "outlines": OutlinesEngine, "accept-all": AcceptAllEngine, "reject-all": RejectAllEngine,
    "hang": HangEngine, "crash": CrashEngine,
}
PEERS = ("llguidance", "xgrammar", "outlines")
_MODULES = {"llguidance": "llguidance", "xgrammar": "xgrammar", "outlines": "outlines_core"}


def engine_class(name: str):
    """The adapter class for ``name`` (a key of :data:`ENGINES` or ``"module:Class"``)."""
    if name in ENGINES:
        return ENGINES[name]
    if ":" in name:
        mod, _, cls = name.partition(":")
        return getattr(importlib.import_module(mod), cls)
    raise ValueError(f"unknown engine {name!r} (known: {', '.join(ENGINES)}, or module:Class)")


def installed_engines() -> list[str]:
    """structgen plus every peer whose package imports here."""
    out = ["structgen"]
    for name in PEERS:
        if importlib.util.find_spec(_MODULES[name]) is not None:
            out.append(name)
    return out


def engine_version(name: str) -> str:
    """The version of ``name``'s package, without building the engine."""
    cls = engine_class(name)
    if issubclass(cls, StructgenEngine):
        import structgen

        return getattr(structgen, "__version__", "?")
    return _version(cls.dist) if cls.dist else "-"


def make_engine(name: str, tok: BenchTokenizer, **options) -> Engine:
    """An adapter for ``name`` bound to ``tok`` (options: ``whitespace``, ``compile_limit``,
    ``hygiene``)."""
    return engine_class(name)(tok, **options)

