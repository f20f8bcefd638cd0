"""structgen as a grammar backend of SGLang 0.5.23 (``--grammar-backend structgen``).

- :class:`StructgenGrammarBackend` (a ``BaseGrammarBackend``): one per scheduler process; reads
  the tokenizer once into a :class:`~structgen.Vocabulary` of the model's logits width, with the
  model's EOS ids (``eos_token_ids``) as its EOS set.  ``dispatch_json`` (a JSON Schema, or
  ``"$$ANY$$"`` for any JSON value), ``dispatch_regex``, ``dispatch_ebnf`` (GBNF, or Lark when
  the text has no ``::=`` rule) and ``dispatch_structural_tag`` (the legacy and ``format`` JSON:
  :mod:`structgen.integrations.structural_tag`) compile with :func:`structgen.compile`; a
  constraint structgen refuses is an ``InvalidGrammarObject`` with structgen's message (SGLang
  then aborts that request with it).
- :class:`StructgenGrammarObject` (a ``BaseGrammarObject``): one per request, over a
  :class:`~structgen.Matcher`, with the whole contract SGLang calls: ``accept_token`` (ignored
  once terminated; a rejected token raises :class:`~structgen.errors.TokenRejected`, a
  ``ValueError``, which SGLang turns into an abort), ``rollback(k)`` (O(1) per token, EOS
  included: the speculative tree walk accepts, fills and rolls back one token at a time),
  ``is_terminated``, ``allocate_vocab_mask`` / ``fill_vocab_mask`` / ``move_vocab_mask`` /
  ``apply_vocab_mask`` / ``reset_vocab_mask`` on int32 ``[rows, ceil(V/32)]`` bitmasks (bit
  ``t % 32`` of word ``t // 32`` = token ``t``; -1 = every token), ``copy`` (a fresh cursor at
  the start of the same compiled grammar: SGLang caches one object per constraint and copies
  it for each request), and jump-forward from structgen's forced text: ``try_jump_forward``
  gives the forced characters, ``jump_forward_str_state`` the string, ``jump_and_retokenize``
  rolls back to the common prefix of the old and re-tokenized output and accepts the rest.

:func:`register` is the ``sglang.srt.plugins`` entry point (SGLang runs general plugins in the
server, scheduler and detokenizer processes before parsing its arguments): it registers
``"structgen"`` with ``register_grammar_backend`` and adds it to ``--grammar-backend``'s choices
with ``add_grammar_backend_choices``.  Any other SGLang release is refused with
:class:`~structgen.errors.EngineError` naming it.  Options: ``$STRUCTGEN_WHITESPACE`` and
``$STRUCTGEN_REGEX_SYNTAX`` (:func:`~structgen.integrations.serving.engine_options`).
"""
from __future__ import annotations

import re
import threading
from typing import List, Optional, Tuple

import torch

from ..compiler import compile as compile_grammar_for
from ..errors import EngineError, StructgenError, TokenRejected
from ..kernels.bitmask import apply_bitmask_, bitmask_words
from ..runtime.protocol import Matcher
from .serving import engine_options, engine_vocabulary, forced_text, grammar_for

try:
    import sglang
    from sglang.srt.constrained.base_grammar_backend import (BaseGrammarBackend, BaseGrammarObject, GrammarStats,
                                                             InvalidGrammarObject, register_grammar_backend)
except ImportError as e:  # pragma: no cover - only without SGLang
    raise EngineError(f"structgen.integrations.sglang needs SGLang 0.5.23 ({e}): install it with "
                      "`pip install --no-deps sglang==0.5.23` and the extra `structgen[sglang]`") from e

__all__ = ["StructgenGrammarBackend", "StructgenGrammarObject", "init_backend", "register", "SUPPORTED_SGLANG",
           "BACKEND_NAME"]

#: the SGLang release this module implements the interface of
SUPPORTED_SGLANG = "0.5.23"
#: the value of ``--grammar-backend``
BACKEND_NAME = "structgen"


class StructgenGrammarObject(BaseGrammarObject):
    """One request's cursor: SGLang's ``BaseGrammarObject`` over a structgen matcher."""

    def __init__(self, compiled, matcher: Matcher | None = None, key_string: str | None = None,
                 grammar_stats: GrammarStats | None = None):
        super().__init__()
        self.compiled = compiled
        self.matcher = compiled.matcher() if matcher is None else matcher
        self.key_string = key_string
        self.grammar_stats = grammar_stats

    # ------------------------------------------------------------------ steps
    def accept_token(self, token: int) -> None:
        """Advance by one token (ignored once terminated, as SGLang's xgrammar backend does).

        Raises:
            TokenRejected: the constraint does not allow ``token`` here (nothing moved)."""
        if self.matcher.is_terminated():
            return
        self.current_token = token
        if not self.matcher.advance(int(token)):
            raise TokenRejected(f"token {int(token)} is not allowed here by the constraint "
                                f"{_clip(self.key_string)} after {self.matcher.accepted_tokens()} tokens")

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` accepted tokens (EOS included)."""
        self.matcher.rollback(int(k))

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    # ------------------------------------------------------------------ masks
    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device) -> torch.Tensor:
        """An int32 ``[batch_size, ceil(vocab_size/32)]`` host tensor, every token allowed
        (pinned when CUDA is there, so the copy to the device can overlap)."""
        return allocate_mask(vocab_size, batch_size)

    def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
        """Overwrite row ``idx`` with the allowed tokens (EOS where the output is complete)."""
        self.matcher.fill_bitmask(vocab_mask, idx)

    @staticmethod
    def move_vocab_mask(vocab_mask: torch.Tensor, device) -> torch.Tensor:
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        """Disallowed logits to -inf in place, on the logits' device (one mask row per logits
        row; columns past the mask's width are disallowed)."""
        apply_bitmask_(logits, vocab_mask)

    @staticmethod
    def reset_vocab_mask(vocab_mask: torch.Tensor) -> None:
        """Every row back to "every token allowed"."""
        vocab_mask.fill_(-1)

    # ------------------------------------------------------------------ copies and jump-forward
    def copy(self) -> "StructgenGrammarObject":
        """A fresh cursor at the start of the same compiled grammar (not a fork of this one's
        point: SGLang copies its cached object for each new request)."""
        stats = None
        if self.grammar_stats is not None:
            stats = GrammarStats(compilation_time=self.grammar_stats.compilation_time,
                                 dispatch_type=self.grammar_stats.dispatch_type, is_cache_hit=True)
        return StructgenGrammarObject(self.compiled, key_string=self.key_string, grammar_stats=stats)

    def try_jump_forward(self, tokenizer) -> Optional[Tuple[List[int], str]]:
        """``([], text)`` when the constraint forces ``text`` next (whole characters), else None."""
        text = forced_text(self.matcher)
        return ([], text) if text else None

    def jump_forward_str_state(self, helper: Tuple[List[int], str]) -> Tuple[str, int]:
        """The forced string of ``helper`` and ``-1`` (structgen needs no state number: the
        matcher follows the re-tokenized ids in :meth:`jump_and_retokenize`)."""
        return helper[1], -1

    def jump_and_retokenize(self, old_output_ids: List[int], new_output_ids: List[int], next_state: int) -> None:
        """The output was re-tokenized after a jump: roll back to the longest common prefix of
        ``old_output_ids`` (what was accepted) and ``new_output_ids``, then accept the rest.

        Raises:
            TokenRejected: a re-tokenized id the constraint refuses."""
        k = 0
        for a, b in zip(old_output_ids, new_output_ids):
            if int(a) != int(b):
                break
            k += 1
        if k < len(old_output_ids):
            self.matcher.rollback(len(old_output_ids) - k)
        for i in range(k, len(new_output_ids)):
            if not self.matcher.advance(int(new_output_ids[i])):
                raise TokenRejected(f"re-tokenized id {int(new_output_ids[i])} at position {i} is not allowed by "
                                    f"the constraint {_clip(self.key_string)}")

    def __repr__(self) -> str:
        return f"StructgenGrammarObject({_clip(self.key_string)}, {self.matcher!r})"


def allocate_mask(vocab_size: int, batch_size: int) -> torch.Tensor:
    """An int32 ``[batch_size, ceil(vocab_size/32)]`` CPU tensor of -1 (every token allowed)."""
    pin = torch.cuda.is_available()
    return torch.full((int(batch_size), bitmask_words(vocab_size)), -1, dtype=torch.int32, pin_memory=pin)


def _clip(text, n: int = 80) -> str:
    text = "" if text is None else str(text)
    return repr(text if len(text) <= n else text[:n] + "...")


class StructgenGrammarBackend(BaseGrammarBackend):
    """SGLang's grammar backend: one vocabulary, a compiled grammar per constraint (SGLang's
    own cache keeps one object per key and copies it per request)."""

    def __init__(self, tokenizer, vocab_size: int, eos_token_ids=None):
        super().__init__()
        self.vocab = engine_vocabulary(tokenizer, vocab_size, eos_token_ids)
        self.vocab_size = int(vocab_size)
        self.options = engine_options()

    @staticmethod
    def allocate_vocab_mask(vocab_size: int, batch_size: int, device) -> torch.Tensor:
        return allocate_mask(vocab_size, batch_size)

    move_vocab_mask = StructgenGrammarObject.move_vocab_mask
    apply_vocab_mask = StructgenGrammarObject.apply_vocab_mask

    def _compile(self, kind: str, key_string: str, spec=None) -> BaseGrammarObject:
        try:
            grammar = grammar_for(kind, key_string if spec is None else spec, **self.options)
            compiled = compile_grammar_for(grammar, self.vocab)
        except StructgenError as e:
            return InvalidGrammarObject(f"structgen: {e}")
        return StructgenGrammarObject(compiled, key_string=key_string,
                                      grammar_stats=GrammarStats(dispatch_type=kind))

    def dispatch_json(self, key_string: str) -> BaseGrammarObject:
        if key_string == "$$ANY$$":  # SGLang's "any JSON value" (response_format json_object)
            return self._compile("json", key_string, spec={})
        return self._compile("json", key_string)

    def dispatch_regex(self, key_string: str) -> BaseGrammarObject:
        return self._compile("regex", key_string)

    def dispatch_ebnf(self, key_string: str) -> BaseGrammarObject:
        return self._compile("grammar", key_string)

    def dispatch_structural_tag(self, key_string: str) -> BaseGrammarObject:
        return self._compile("structural_tag", key_string)


def init_backend(server_args, tokenizer, vocab_size: int, eos_token_ids=None) -> StructgenGrammarBackend:
    """The ``init_func`` SGLang calls (``create_grammar_backend``) for ``--grammar-backend structgen``."""
    return StructgenGrammarBackend(tokenizer, vocab_size, eos_token_ids)


_LOCK = threading.Lock()


def _version_of(text: str) -> tuple:
    m = re.match(r"\s*(\d+)\.(\d+)\.(\d+)", str(text))
    return tuple(int(x) for x in m.groups()) if m else ()


def check_version(version: str | None = None) -> None:
    """Raise :class:`~structgen.errors.EngineError` unless ``version`` (default: the installed
    SGLang's) is :data:`SUPPORTED_SGLANG`."""
    version = getattr(sglang, "__version__", "unknown") if version is None else version
    if _version_of(version) != _version_of(SUPPORTED_SGLANG):
        raise EngineError(f"structgen's SGLang backend supports SGLang {SUPPORTED_SGLANG}, but SGLang {version} is "
                          f"installed: install `sglang=={SUPPORTED_SGLANG}` (with --no-deps, see structgen's README), "
                          "or keep structgen's plugin out with SGLANG_PLUGINS=<the plugins you want>")


def register() -> None:
    """Register ``"structgen"`` as an SGLang grammar backend (idempotent): the
    ``sglang.srt.plugins`` entry point.  Raises :class:`~structgen.errors.EngineError` for an
    SGLang other than :data:`SUPPORTED_SGLANG`."""
    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices

    check_version()
    with _LOCK:
        register_grammar_backend(BACKEND_NAME, init_backend)
        if BACKEND_NAME not in GRAMMAR_BACKEND_CHOICES:
            add_grammar_backend_choices([BACKEND_NAME])
