"""structgen as a structured-output backend of vLLM 0.33 (``--structured-outputs-config.backend structgen``).

Two classes implement vLLM's interface (``vllm/v1/structured_output/backend_types.py``):

- :class:`StructgenBackend` (a ``StructuredOutputBackend``): one per engine; reads the engine's
  tokenizer once into a :class:`~structgen.Vocabulary` of the model's logits width and compiles
  each request's constraint (JSON Schema, any JSON object, regex, choice, Lark or GBNF grammar,
  structural tag: :mod:`structgen.integrations.structural_tag`) with :func:`structgen.compile`
  (cached per grammar).
- :class:`StructgenGrammar` (a ``StructuredOutputGrammar``): one per request, over a
  :class:`~structgen.Matcher`.  ``accept_tokens`` advances (tokens after termination are
  ignored, as vLLM's xgrammar backend does), ``validate_tokens`` returns the longest accepted
  prefix of a draft without moving, ``rollback(n)`` undoes ``n`` accepted tokens (a walk up the
  matcher's history: O(1) per token, termination included), ``fill_bitmask`` writes one int32
  row of ``ceil(V/32)`` words, bit ``t % 32`` of word ``t // 32`` = token ``t`` allowed: the
  layout of xgrammar's ``apply_token_bitmask_inplace``, which vLLM applies for every backend.
  The request's stop tokens (``SamplingParams.all_stop_token_ids``, given to ``compile_grammar``)
  are allowed exactly where the constraint is complete, and end it (see
  :class:`~structgen.integrations.serving.StopTokenMatcher`).

:func:`register` (the ``vllm.general_plugins`` entry point, run by vLLM in every process) adds
``"structgen"`` with three small touches, since vLLM 0.33 has no backend registry (RFC #50966):
the ``backend`` ``Literal`` of ``StructuredOutputsConfig`` gains ``"structgen"`` (its pydantic
validator rebuilt), ``StructuredOutputManager.grammar_init`` creates a :class:`StructgenBackend`
before vLLM's own if/elif runs when a request resolved to ``"structgen"``, and
``SamplingParams._validate_structured_outputs`` checks a request's constraint with structgen
(a bad one is a ``VLLMValidationError``, HTTP 400) instead of sending it to xgrammar's checks.
Any other vLLM version is refused with :class:`~structgen.errors.EngineError` naming it.

Options (the request path carries none to a backend): ``$STRUCTGEN_WHITESPACE`` and
``$STRUCTGEN_REGEX_SYNTAX`` (see :func:`~structgen.integrations.serving.engine_options`).
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Literal, get_args

import torch

from ..compiler import compile as compile_grammar_for
from ..errors import EngineError, StructgenError
from ..kernels.bitmask import bitmask_words
from ..runtime.protocol import Matcher
from .serving import StopTokenMatcher, engine_options, engine_vocabulary, grammar_for

try:
    import vllm
    from vllm.v1.structured_output.backend_types import (StructuredOutputBackend, StructuredOutputGrammar,
                                                         StructuredOutputOptions)
except ImportError as e:  # pragma: no cover - only without vLLM
    raise EngineError(f"structgen.integrations.vllm needs vLLM 0.33.0 ({e}): install it with "
                      "`pip install --no-deps vllm==0.33.0` and the extra `structgen[vllm]`") from e

__all__ = ["StructgenBackend", "StructgenGrammar", "register", "SUPPORTED_VLLM", "BACKEND_NAME", "request_kind"]

#: the vLLM release this module implements the interface of
SUPPORTED_VLLM = "0.33.0"
#: the backend's name in ``--structured-outputs-config``
BACKEND_NAME = "structgen"

_KIND = {
    StructuredOutputOptions.JSON: "json",
    StructuredOutputOptions.JSON_OBJECT: "json_object",
    StructuredOutputOptions.REGEX: "regex",
    StructuredOutputOptions.GRAMMAR: "grammar",
    StructuredOutputOptions.CHOICE: "choice",
    StructuredOutputOptions.STRUCTURAL_TAG: "structural_tag",
}


def request_kind(request_type: StructuredOutputOptions) -> str:
    """structgen's name (:data:`~structgen.integrations.serving.KINDS`) of a vLLM request type."""
    try:
        return _KIND[request_type]
    except KeyError:
        raise StructgenError(f"unknown vLLM structured-output request type {request_type!r}") from None


class StructgenGrammar(StructuredOutputGrammar):
    """One request's cursor, vLLM's ``StructuredOutputGrammar`` over a structgen matcher."""

    def __init__(self, matcher: Matcher):
        self.matcher = matcher

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        """Advance through ``tokens``; True when all were accepted or the constraint had ended
        (tokens after termination are ignored).  On a rejected token, False: the tokens before
        it stay accepted (vLLM then ends the request with an error)."""
        m = self.matcher
        for t in tokens:
            if m.is_terminated():
                return True
            if not m.advance(t):
                return False
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        """The longest prefix of ``tokens`` the constraint accepts one after another (a stop
        token ends it); the state is unchanged."""
        if self.matcher.is_terminated():
            return []
        return list(tokens[:self.matcher.validate(tokens)])

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted tokens (a stop token included)."""
        self.matcher.rollback(int(num_tokens))

    def fill_bitmask(self, bitmask: torch.Tensor, idx: int) -> None:
        """Overwrite row ``idx`` of the int32 ``[rows, ceil(V/32)]`` bitmask with the allowed
        tokens (the stop tokens where the constraint is complete)."""
        self.matcher.fill_bitmask(bitmask, idx)

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def reset(self) -> None:
        self.matcher.reset()

    def __repr__(self) -> str:
        return f"StructgenGrammar({self.matcher!r})"


@dataclass
class StructgenBackend(StructuredOutputBackend):
    """vLLM's engine-level backend: the vocabulary once, a compiled grammar per constraint."""

    def __post_init__(self):
        self.vocab = engine_vocabulary(self.tokenizer, self.vocab_size)
        self.options = engine_options()

    def compile_grammar(self, request_type: StructuredOutputOptions, grammar_spec: str,
                        stop_token_ids: set[int] | None = None) -> StructuredOutputGrammar:
        """A fresh :class:`StructgenGrammar` for one request.  ``stop_token_ids`` (the request's
        EOS and stop ids) end the constraint where it is complete; empty or None: the
        vocabulary's EOS ids.  Raises the :class:`~structgen.errors.StructgenError` of a bad
        spec (vLLM fails that request only)."""
        grammar = grammar_for(request_kind(request_type), grammar_spec, **self.options)
        matcher = compile_grammar_for(grammar, self.vocab).matcher()
        if stop_token_ids and set(int(t) for t in stop_token_ids) != set(int(e) for e in self.vocab.eos_ids):
            matcher = StopTokenMatcher(matcher, stop_token_ids)
        return StructgenGrammar(matcher)

    def allocate_token_bitmask(self, max_num_seqs: int) -> torch.Tensor:
        """An int32 ``[max_num_seqs, ceil(vocab_size/32)]`` CPU tensor, every token allowed (what
        xgrammar's ``allocate_token_bitmask`` returns; vLLM reads it with ``.numpy()``)."""
        return torch.full((int(max_num_seqs), bitmask_words(self.vocab_size)), -1, dtype=torch.int32)

    def destroy(self):
        self.vocab = None


# ----------------------------------------------------------------------------- registration
_LOCK = threading.Lock()
_DONE = [False]


def _version_of(text: str) -> tuple:
    m = re.match(r"\s*(\d+)\.(\d+)\.(\d+)", str(text))
    return tuple(int(x) for x in m.groups()) if m else ()


def check_version(version: str | None = None) -> None:
    """Raise :class:`~structgen.errors.EngineError` unless ``version`` (default: the installed
    vLLM's) is the release this module implements, :data:`SUPPORTED_VLLM`."""
    version = getattr(vllm, "__version__", "unknown") if version is None else version
    if _version_of(version) != _version_of(SUPPORTED_VLLM):
        raise EngineError(f"structgen's vLLM backend supports vLLM {SUPPORTED_VLLM}, but vLLM {version} is "
                          f"installed: install `vllm=={SUPPORTED_VLLM}` (with --no-deps, see structgen's README), "
                          "or keep structgen's plugin out with VLLM_PLUGINS=<the plugins you want>")


def register() -> None:
    """Make ``"structgen"`` a structured-output backend of this process's vLLM (idempotent).

    Run by vLLM through the ``vllm.general_plugins`` entry point; call it yourself before
    building an ``LLM``/``EngineArgs`` when structgen is not installed as a package.
    Raises :class:`~structgen.errors.EngineError` for a vLLM other than :data:`SUPPORTED_VLLM`."""
    check_version()
    with _LOCK:
        if _DONE[0]:
            return
        _extend_backend_literal()
        _wrap_grammar_init()
        _wrap_request_validation()
        _DONE[0] = True


def _extend_backend_literal() -> None:
    """``StructuredOutputsConfig.backend`` accepts ``"structgen"`` (the Literal and pydantic's
    validator of the config dataclass, rebuilt)."""
    from pydantic.dataclasses import rebuild_dataclass
    from vllm.config import structured_outputs as so_config

    names = get_args(so_config.StructuredOutputsBackend)
    if BACKEND_NAME in names:
        return
    extended = Literal[names + (BACKEND_NAME,)]  # type: ignore[valid-type]
    cls = so_config.StructuredOutputsConfig
    so_config.StructuredOutputsBackend = extended
    cls.__annotations__["backend"] = extended
    cls.__dataclass_fields__["backend"].type = extended
    rebuild_dataclass(cls, force=True)


def _wrap_grammar_init() -> None:
    """``StructuredOutputManager.grammar_init`` builds a :class:`StructgenBackend` first when the
    request resolved to ``"structgen"``; vLLM's own code then finds a backend and compiles."""
    from vllm.v1.structured_output import StructuredOutputManager

    original = StructuredOutputManager.grammar_init
    if getattr(original, "structgen_wrapped", False):
        return

    def grammar_init(self, request):
        so_request = request.structured_output_request
        if so_request is not None and self.backend is None:
            params = request.sampling_params.structured_outputs if request.sampling_params else None
            if params is not None and getattr(params, "_backend", None) == BACKEND_NAME:
                self.backend = StructgenBackend(self.vllm_config, tokenizer=self.tokenizer,
                                                vocab_size=self.vllm_config.model_config.get_vocab_size())
                self.backend_name = BACKEND_NAME
        return original(self, request)

    grammar_init.structgen_wrapped = True
    grammar_init.__wrapped__ = original
    grammar_init.__doc__ = original.__doc__
    StructuredOutputManager.grammar_init = grammar_init


def _wrap_request_validation() -> None:
    """``SamplingParams._validate_structured_outputs`` checks requests of the ``"structgen"``
    backend with structgen (and leaves every other backend to vLLM)."""
    from vllm.sampling_params import SamplingParams

    original = SamplingParams._validate_structured_outputs
    if getattr(original, "structgen_wrapped", False):
        return

    def _validate_structured_outputs(self, model_config, structured_outputs_config, tokenizer):
        if structured_outputs_config is None or self.structured_outputs is None \
                or structured_outputs_config.backend != BACKEND_NAME:
            return original(self, model_config, structured_outputs_config, tokenizer)
        validate_request(self, model_config, tokenizer)

    _validate_structured_outputs.structgen_wrapped = True
    _validate_structured_outputs.__wrapped__ = original
    SamplingParams._validate_structured_outputs = _validate_structured_outputs


def validate_request(sampling_params, model_config=None, tokenizer=None) -> None:
    """vLLM's request checks for the ``"structgen"`` backend, run in the API server before a
    request is queued: the constraint is read (not compiled: no vocabulary there) and a bad one
    raises ``VLLMValidationError`` with structgen's message naming the fragment; the request is
    bound to the ``"structgen"`` backend."""
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import check_json_nesting
    from vllm.v1.structured_output.request import get_structured_output_key

    params = sampling_params.structured_outputs
    if model_config is not None and getattr(model_config, "is_diffusion", False):
        raise VLLMValidationError("Structured outputs are not supported for diffusion language models")
    if tokenizer is None:
        raise VLLMValidationError("Structured outputs need a tokenizer, so they cannot be used with "
                                  "skip_tokenizer_init")
    chosen = params._backend
    if chosen and chosen != BACKEND_NAME:
        raise VLLMValidationError(f"Request-level structured output backend selection is not supported: the "
                                  f"request asked for {chosen!r} but the engine runs {BACKEND_NAME!r}")
    if params.json_object is False:
        raise VLLMValidationError("structured_outputs.json_object must be True if set")
    for name in ("grammar", "json", "structural_tag"):
        value = getattr(params, name)
        if isinstance(value, str) and not value.strip():
            raise VLLMValidationError(f"structured_outputs.{name} cannot be an empty string")
    if isinstance(params.choice, list) and not params.choice:
        raise VLLMValidationError("structured_outputs.choice cannot be an empty list")
    check_json_nesting(params.json)
    check_json_nesting(params.structural_tag, structural_tag=True)
    try:
        request_type, spec = get_structured_output_key(params)
        grammar_for(request_kind(request_type), spec, **engine_options())
    except StructgenError as e:
        raise VLLMValidationError(f"structgen cannot use this constraint: {e}") from e
    except ValueError as e:  # no constraint at all
        raise VLLMValidationError(str(e)) from e
    params._backend = BACKEND_NAME
    params._backend_was_auto = False
    params.__post_init__()
