"""What the serving-engine backends (:mod:`.vllm`, :mod:`.sglang`) share.

- :func:`grammar_for`: an engine's constraint request (a kind and its text) as a
  :class:`~structgen.Grammar`: JSON Schema, any JSON object, regex, a choice of strings, a Lark
  or GBNF grammar (told apart by :func:`is_gbnf`, the rule vLLM uses), a structural tag
  (:func:`~structgen.integrations.structural_tag.structural_tag_grammar`: xgrammar's legacy and
  ``format`` JSON, as both engines pass it).
- :func:`engine_vocabulary`: the :class:`~structgen.Vocabulary` of an engine's tokenizer at the
  model's logits width, built once per tokenizer and width.
- :class:`StopTokenMatcher`: a matcher whose end of sequence is one request's own stop-token
  ids (vLLM passes ``SamplingParams.all_stop_token_ids`` per request) instead of the
  vocabulary's EOS ids, without recompiling anything.
- :func:`engine_options`: the layout options read from the environment (an engine passes no
  per-backend options through its request path).

Nothing here imports an engine; the engine modules import this one.
"""
from __future__ import annotations

import json
import os
import re
from typing import Iterable

import numpy as np
import torch

from .. import caching
from ..constraints import resolve_constraint
from ..errors import OptionError, SchemaError, StructgenError, Unsupported, VocabularyError
from ..grammar import Grammar
from ..kernels.bitmask import clear_bits, set_bits
from ..runtime.batch import cpu_view
from ..runtime.checks import check_bitmask_row, check_token
from ..runtime.protocol import Matcher, Snapshot
from ..vocab import Vocabulary
from .structural_tag import structural_tag_grammar

__all__ = ["KINDS", "grammar_for", "is_gbnf", "engine_vocabulary", "engine_options", "StopTokenMatcher",
           "forced_text"]

#: the constraint kinds :func:`grammar_for` reads
KINDS = ("json", "json_object", "regex", "choice", "grammar", "lark", "gbnf", "structural_tag")
_WHITESPACE = ("dumps", "compact", "flexible")
_SYNTAX = ("ecma", "python", "rust")


def engine_options(environ=None) -> dict:
    """The options the engine backends compile with, from the environment:

    - ``STRUCTGEN_WHITESPACE``: the JSON layout, ``"dumps"`` (default: exactly ``json.dumps``'
      ``", "`` and ``": "``, which models have seen most and fast-forward can force),
      ``"compact"`` (no whitespace) or ``"flexible"`` (up to 16 whitespace characters between
      lexemes);
    - ``STRUCTGEN_REGEX_SYNTAX``: ``"ecma"`` (default: ``\\d`` is ``[0-9]``, as xgrammar and JSON
      Schema read it), ``"python"`` (Python ``re``) or ``"rust"`` (the Rust ``regex`` crate's, as
      llguidance reads them; Lark grammars' ``/.../`` terminals too).

    Raises :class:`~structgen.errors.OptionError` naming the variable for any other value."""
    env = os.environ if environ is None else environ
    out = {}
    for var, key, allowed in (("STRUCTGEN_WHITESPACE", "whitespace", _WHITESPACE),
                              ("STRUCTGEN_REGEX_SYNTAX", "regex_syntax", _SYNTAX)):
        value = (env.get(var) or allowed[0]).strip().lower()
        if value not in allowed:
            raise OptionError(f"${var}={env.get(var)!r}: expected one of {', '.join(allowed)}")
        out[key] = value
    return out


_RULE_COMMENT = re.compile(r"(#|//).*$")


def is_gbnf(text: str) -> bool:
    """Whether grammar text is GBNF rather than Lark: some line, comments (``#``, ``//``)
    removed, defines a rule with ``::=`` (vLLM's own test, so both read a request alike)."""
    return any("::=" in _RULE_COMMENT.sub("", line) for line in str(text).split("\n"))


def _choices(spec) -> list[str]:
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except ValueError as e:
            raise SchemaError(f"a choice constraint is a JSON list of strings; this is not JSON: {e}", "") from None
    if not isinstance(spec, (list, tuple)) or not spec or not all(isinstance(c, str) for c in spec):
        raise SchemaError("a choice constraint is a non-empty list of strings", "")
    return list(spec)


def grammar_for(kind: str, spec, *, whitespace: str = "dumps", regex_syntax: str = "ecma") -> Grammar:
    """The grammar of one engine request.

    Args:
        kind: one of :data:`KINDS`: ``"json"`` (a JSON Schema, text or dict; objects that list
            ``properties`` and say nothing of other keys are closed, as xgrammar's strict mode
            does), ``"json_object"`` (any JSON object; ``spec`` ignored), ``"regex"``,
            ``"choice"`` (a JSON list of strings, or a list), ``"grammar"`` (Lark or GBNF, see
            :func:`is_gbnf`), ``"lark"``, ``"gbnf"``, ``"structural_tag"`` (xgrammar's JSON, see
            :mod:`structgen.integrations.structural_tag`).
        spec: the request's text.
        whitespace: the JSON layout (see :func:`engine_options`).
        regex_syntax: ``"ecma"``, ``"python"`` or ``"rust"`` (regex requests; for Lark terminals
            ``"rust"`` reads them in Rust's syntax, the others in Lark's own, Python's).
    Raises:
        Unsupported: ``kind`` is unknown, or a structural tag holds a format structgen does
            not express (the message names its place).
        SchemaError, RegexError, GrammarError, LimitExceeded: the spec itself is bad (the
            message names the fragment).
    """
    if kind == "structural_tag":
        return structural_tag_grammar(spec, whitespace=whitespace, regex_syntax=regex_syntax)
    if kind == "json":
        if isinstance(spec, bytes):
            spec = spec.decode("utf-8")
        return resolve_constraint(schema=spec, whitespace=whitespace).grammar
    if kind == "json_object":
        return resolve_constraint(schema={"type": "object"}, whitespace=whitespace).grammar
    if kind == "regex":
        if not isinstance(spec, str):
            raise SchemaError(f"a regex constraint is a string, got {type(spec).__name__}", "")
        return Grammar.from_regex(spec, syntax=regex_syntax)
    if kind == "choice":
        return Grammar.choice(_choices(spec))
    if kind in ("grammar", "lark", "gbnf"):
        if not isinstance(spec, str) or not spec.strip():
            raise StructgenError("a grammar constraint is non-empty grammar text (Lark or GBNF)")
        if kind == "gbnf" or (kind == "grammar" and is_gbnf(spec)):
            return Grammar.from_gbnf(spec)
        return Grammar.from_lark(spec, regex_syntax="rust" if regex_syntax == "rust" else "python")
    raise Unsupported(f"unknown constraint kind {kind!r}; expected one of {', '.join(KINDS)}", where=str(kind))


# ----------------------------------------------------------------------------- vocabularies
_VOCABS = caching.LRU(8, name="integrations.vocab")   # (id(tokenizer), width, eos) -> (tokenizer, Vocabulary)


def engine_vocabulary(tokenizer, vocab_size: int, eos_ids: Iterable[int] | None = None) -> Vocabulary:
    """The vocabulary of an engine's tokenizer (a Hugging Face tokenizer or vLLM's cached proxy
    of one), ``vocab_size`` wide (the model's logits rows), built once per tokenizer object.

    ``eos_ids``: the model's EOS ids when the engine knows them (SGLang's ``eos_token_ids``); they
    are then the whole EOS set besides the tokenizer's own ``eos_token_id``.  None: the tokenizer's
    EOS and the chat end markers structgen recognises (see :class:`~structgen.Vocabulary`).

    Raises:
        VocabularyError: the tokenizer has more tokens than the model has logits, or cannot be
            read (a Mistral ``tekken`` tokenizer, a tokenizer without a Hugging Face backend).
    """
    if isinstance(eos_ids, (int, np.integer)):
        eos_ids = [int(eos_ids)]
    eos = tuple(sorted({int(i) for i in eos_ids})) if eos_ids else None
    width = int(vocab_size)
    key = (id(tokenizer), width, eos)
    hit = _VOCABS.get(key)
    if hit is not None and hit[0] is tokenizer:
        return hit[1]
    try:
        size = len(tokenizer)
    except TypeError:
        size = None
    if size is not None and size > width:
        raise VocabularyError(f"the tokenizer has {size} tokens but the model only {width} logits; structgen "
                              "masks one bit per logit and cannot drop tokens the tokenizer may produce")
    try:
        vocab = Vocabulary.from_tokenizer(tokenizer, logits_width=width, eos_ids=eos, auto_eos=eos is None)
    except VocabularyError:
        raise
    except Exception as e:  # e.g. a Mistral tokenizer object: no Hugging Face backend to read
        raise VocabularyError(f"cannot read the engine's tokenizer {type(tokenizer).__name__} as a vocabulary "
                              f"({type(e).__name__}: {e}); structgen reads Hugging Face tokenizers") from e
    _VOCABS.put(key, (tokenizer, vocab))
    return vocab


# ----------------------------------------------------------------------------- per-request stop tokens
class StopTokenMatcher(Matcher):
    """A :class:`~structgen.Matcher` whose end of sequence is a request's own stop tokens.

    ``inner`` is a matcher of the compiled grammar; ``stop_ids`` the request's stop-token ids
    (vLLM: ``SamplingParams.all_stop_token_ids``, its EOS and ``stop_token_ids``).  Then:

    - a stop id is allowed exactly where ``inner`` would allow EOS (the output is complete) and
      accepting it terminates, one step, as EOS does; a stop id that is also a text token is a
      stop token only;
    - the vocabulary's EOS ids that are not stop ids are never allowed;
    - everything else is ``inner``'s: masks, steps, rollback, snapshots, forced text.

    The compiled grammar is shared untouched: requests with different stop sets cost nothing
    more.  (xgrammar's ``override_stop_tokens`` gives the same masks for special-token stops.)
    """

    __slots__ = ("inner", "_stop", "_stop_set", "_eos_set", "_clear", "_eos")

    def __init__(self, inner: Matcher, stop_ids: Iterable[int]):
        v = inner.vocab
        stop = sorted({int(t) for t in stop_ids if 0 <= int(t) < v.logits_width})
        if not stop:
            raise OptionError("StopTokenMatcher needs at least one stop-token id inside the vocabulary")
        self.inner = inner
        self._stop = np.asarray(stop, np.int64)
        self._stop_set = frozenset(stop)
        self._eos_set = frozenset(int(e) for e in v.eos_ids)
        self._clear = np.asarray(sorted(self._stop_set | self._eos_set), np.int64)
        self._eos = int(v.eos_ids[0])

    @property
    def vocab(self):
        return self.inner.vocab

    @property
    def stop_ids(self) -> frozenset:
        """The request's stop-token ids."""
        return self._stop_set

    def advance(self, token: int) -> bool:
        token = check_token(token)
        if token in self._stop_set:
            return self.inner.is_accepting() and self.inner.advance(self._eos)
        if token in self._eos_set:
            return False
        return self.inner.advance(token)

    def advance_bytes(self, data: bytes) -> bool:
        return self.inner.advance_bytes(data)

    def rollback(self, n: int = 1) -> None:
        self.inner.rollback(n)

    def accepted_tokens(self) -> int:
        return self.inner.accepted_tokens()

    def reset(self) -> None:
        self.inner.reset()

    def fork(self) -> "StopTokenMatcher":
        m = StopTokenMatcher.__new__(StopTokenMatcher)
        m.inner = self.inner.fork()
        m._stop, m._stop_set, m._eos_set, m._clear, m._eos = \
            self._stop, self._stop_set, self._eos_set, self._clear, self._eos
        return m

    def snapshot(self) -> Snapshot:
        return self.inner.snapshot()

    def restore(self, snapshot: Snapshot) -> None:
        self.inner.restore(snapshot)

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        row = check_bitmask_row(bitmask, row, self.inner.vocab.logits_width)
        done = self.inner.is_terminated()
        ends = done or self.inner.is_accepting()
        words = _row_words(bitmask, row)
        if done:
            words = np.zeros(bitmask.shape[1], np.uint32)
        elif words is not None:
            self.inner.fill_bitmask(bitmask, row)   # in place: ``words`` views this row
        else:  # a device bitmask: the row is made on the host and copied once
            words = np.array(self.inner.mask_words(), np.uint32)
        clear_bits(words, self._clear)
        if ends:
            set_bits(words, self._stop)
        _write_words(bitmask, row, words)

    def validate(self, tokens) -> int:
        return Matcher.validate(self, tokens)

    def is_accepting(self) -> bool:
        return self.inner.is_accepting()

    def is_terminated(self) -> bool:
        return self.inner.is_terminated()

    def forced_bytes(self) -> bytes:
        return self.inner.forced_bytes()

    def forced_tokens(self, max_back_off: int = 4) -> list[int]:
        out = []
        for t in self.inner.forced_tokens(max_back_off):
            if int(t) in self._stop_set:  # a stop id spelled as text: it would end the request here
                break
            out.append(int(t))
        return out

    def __repr__(self) -> str:
        return f"StopTokenMatcher({self.inner!r}, stop={sorted(self._stop_set)})"


def _row_words(bitmask, row: int):
    """A writable uint32 view of ``bitmask[row]`` when it lives in host memory (else None)."""
    if isinstance(bitmask, torch.Tensor):
        view = cpu_view(bitmask)
        return None if view is None or not view.flags.writeable else view[row].view(np.uint32)
    return bitmask[row].view(np.uint32) if bitmask.flags.writeable else None


def _write_words(bitmask, row: int, words: np.ndarray) -> None:
    dst = _row_words(bitmask, row)
    if dst is not None:
        if dst is not words and not np.shares_memory(dst, words):
            dst[:] = words
        return
    src = torch.from_numpy(np.ascontiguousarray(words).view(np.int32))
    bitmask[row].copy_(src.to(bitmask.device) if isinstance(bitmask, torch.Tensor) else src)


# ----------------------------------------------------------------------------- jump-forward text
def forced_text(matcher: Matcher) -> str:
    """The text every valid continuation starts with, cut to whole UTF-8 characters (``""`` when
    none is forced or the matcher is terminated): what an engine's jump-forward appends."""
    if matcher.is_terminated():
        return ""
    data = matcher.forced_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        return data[:e.start].decode("utf-8")
