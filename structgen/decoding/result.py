"""The result of one generation: :class:`GenerationResult` (shared by the autoregressive API in
:mod:`structgen.api` and the diffusion sampler in :mod:`structgen.diffusion`)."""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

from ..errors import GenerationError

__all__ = ["GenerationResult", "clip_text"]


def identity(text: str) -> str:
    return text


@dataclasses.dataclass
class GenerationResult:
    """One output.  ``value`` parses ``text`` for the constraint (a Pydantic instance, a
    Python object for a JSON Schema, a string otherwise) and raises
    :class:`GenerationError` when the output is incomplete (``max_new_tokens`` reached)."""

    text: str
    token_ids: list[int]
    prompt: str
    prompt_tokens: int
    finish_reason: str            # "stop" or "length"
    complete: bool                # the constraint accepts the output (EOS reached or allowed)
    sampled_tokens: int
    forced_tokens: int
    forward_passes: int           # passes this row took part in
    log_kept_mass: list[float]    # log Z_t per sampled step (mass the mask kept, temperature 1)
    timings: dict                 # seconds: compile, decode (whole batch), forward, mask, sample, first_token
    constraint: str
    draft_forward_passes: int = 0     # speculative decoding: draft-model passes of this row
    draft_proposed: dict = dataclasses.field(default_factory=dict)   # speculative: drafts per source
    draft_accepted: dict = dataclasses.field(default_factory=dict)   # speculative: accepted per source
    method_stats: dict = dataclasses.field(default_factory=dict)     # diffusion: the method's counters (lookahead)
    _parse: Callable[[str], Any] = dataclasses.field(default=identity, repr=False)
    _value: Any = dataclasses.field(default=None, repr=False)
    _parsed: bool = dataclasses.field(default=False, repr=False)
    _cut: Callable | None = dataclasses.field(default=None, repr=False)  # token ids -> tools.ParsedOutput
    _parts: Any = dataclasses.field(default=None, repr=False)

    @property
    def generated_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def kept_mass(self) -> list[float]:
        """Z_t per sampled step: the share of the model's probability the mask kept."""
        return [math.exp(z) for z in self.log_kept_mass]

    @property
    def projection_tax(self) -> float:
        """Σ_t −log Z_t (nats): how hard the constraint pushed against the model (0 = never)."""
        return float(-sum(self.log_kept_mass))

    def _require_complete(self) -> None:
        if not self.complete:
            raise GenerationError(
                f"the output is incomplete: generation stopped at max_new_tokens after {len(self.token_ids)} "
                f"tokens ({self.constraint}); raise max_new_tokens. Text so far: {clip_text(self.text)}", self)

    @property
    def parts(self):
        """The output cut into free text, reasoning and calls (:class:`structgen.tools.ParsedOutput`):
        for grammars made by ``Grammar.tags``, ``Grammar.reasoning`` and ``tool_calls`` (``tools=``).
        Raises :class:`GenerationError` when the output is incomplete or has no such parts."""
        if self._parts is None:
            if self._cut is None:
                raise GenerationError(f"the constraint ({self.constraint}) has no tags or tool calls to read", self)
            self._require_complete()
            try:
                self._parts = self._cut(self.token_ids)
            except Exception as e:
                raise GenerationError(f"cannot read the parts of the output: {type(e).__name__}: {e}. "
                                      f"Text: {clip_text(self.text)}", self) from None
        return self._parts

    @property
    def tool_calls(self) -> list:
        """The calls in the output (``ToolCall(name, arguments, text)``, arguments validated)."""
        return self.parts.tool_calls

    @property
    def content(self) -> str:
        """The free text around the calls."""
        return self.parts.content

    @property
    def reasoning(self):
        """The thoughts of a ``Grammar.reasoning`` output (None for other grammars with parts)."""
        return self.parts.reasoning

    @property
    def value(self):
        if not self._parsed and self._cut is not None:
            p = self.parts
            self._value = p.answer if p.reasoning is not None and not p.segments else p.tool_calls
            self._parsed = True
        if not self._parsed:
            self._require_complete()
            try:
                self._value = self._parse(self.text)
            except Exception as e:
                raise GenerationError(f"the output does not validate as {self.constraint}: "
                                      f"{type(e).__name__}: {e}. Text: {clip_text(self.text)}", self) from None
            self._parsed = True
        return self._value

    @property
    def ok(self) -> bool:
        """True when ``value`` is available (complete and it parses)."""
        try:
            self.value
        except GenerationError:
            return False
        return True

    def to_dict(self) -> dict:
        """A JSON-friendly summary (what the CLI prints)."""
        d = {"text": self.text, "finish_reason": self.finish_reason, "complete": self.complete,
             "prompt_tokens": self.prompt_tokens, "generated_tokens": self.generated_tokens,
             "sampled_tokens": self.sampled_tokens, "forced_tokens": self.forced_tokens,
             "forward_passes": self.forward_passes, "projection_tax": round(self.projection_tax, 4),
             **({"draft_proposed": self.draft_proposed, "draft_accepted": self.draft_accepted,
                 "draft_forward_passes": self.draft_forward_passes} if self.draft_proposed else {}),
             "timings": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.timings.items()},
             "constraint": self.constraint}
        try:
            v = self.value
            d["value"] = v.model_dump(mode="json") if hasattr(v, "model_dump") else _jsonable(v)
        except GenerationError as e:
            d["value"] = None
            d["error"] = str(e)
        return d

    def __str__(self) -> str:
        return self.text


def _jsonable(v):
    try:
        from pydantic import TypeAdapter

        return TypeAdapter(type(v)).dump_python(v, mode="json")
    except Exception:
        return v


def clip_text(text: str, n: int = 200) -> str:
    return repr(text if len(text) <= n else text[:n] + "...")


