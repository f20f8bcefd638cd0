"""Structural tags: free text with constrained parts that start at triggers, and reasoning.

``Grammar`` gets :meth:`TagsMixin.tags` and :meth:`TagsMixin.reasoning` from here (a mixin, so
this module needs no import of :mod:`structgen.grammar`):

    g = sg.Grammar.tags(tags=[sg.Tag("<tool_call>\\n", Weather, "\\n</tool_call>")],
                        triggers=["<tool_call>"], free_text=True, max_calls=None)
    g = sg.Grammar.reasoning(answer, begin="<think>", end="</think>")

Language of ``tags``: free text, then any number of calls (``min_calls`` .. ``max_calls``), each
followed by free text again.  A call starts at the first occurrence of a trigger in the text: the
trigger, the rest of one of its tags' ``begin``, the tag's content, its ``end``.  Free text is any
text (or the language of ``free_text`` when it is a regular Grammar or a regex) holding no trigger
written as text; a trigger that is a special token of the vocabulary (``<|python_tag|>`` on Llama
3.1, ``<tool_call>`` on Qwen) is that token, and the same text spelled by ordinary tokens stays
free text.  Strings in ``begin``, ``end`` and ``triggers`` are *markers*
(:meth:`~structgen.composition.GrammarAlgebra.marker`): the vocabulary's special tokens among
them are tokens, the rest is text.  ``free_text=False``: calls only, back to back (at least one).
``trailing_text=False``: no free text after the last call.

A tag's ``content`` is a JSON Schema (dict), a Pydantic model (or any type Pydantic describes), a
regex (str) or a Grammar; JSON contents are compiled with ``whitespace`` (default ``"dumps"``, the
layout :func:`structgen.generate` uses) and, with ``strict=True``, objects closed where they say
nothing of extra keys (as ``generate(schema=...)`` does).

The grammar keeps what its parts are in ``grammar.structure`` (a :class:`TagSet` or
:class:`Reasoning`), which :func:`structgen.tools.parse_output` uses to cut an output into free
text and calls.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable

from .automaton import ir
from .cfg.compose import lazy
from .composition import split_specials
from .errors import GrammarError, StructgenError
from .frontends.pydantic import close_objects, pydantic_to_schema

__all__ = ["Tag", "ToolCall", "TagSet", "Reasoning", "TagsMixin"]

ANY_TEXT = ir.repeat(ir.ANY_CHAR, 0, None)


@dataclasses.dataclass(frozen=True)
class Tag:
    """A constrained part of the output: ``begin`` (a marker), the ``content`` (JSON Schema,
    Pydantic model, regex or Grammar), ``end`` (a marker).  ``name`` names its calls in parsed
    outputs (default: the begin text)."""

    begin: Any
    content: Any
    end: Any = ""
    name: str | None = None
    to_calls: Callable | None = dataclasses.field(default=None, repr=False, compare=False)  # value -> [ToolCall]


@dataclasses.dataclass
class ToolCall:
    """One call in an output: the tool's ``name``, its ``arguments`` (a validated object: a Pydantic
    instance for a Pydantic tool, the parsed JSON otherwise) and the ``text`` of its content."""

    name: str
    arguments: Any
    text: str = ""


@dataclasses.dataclass
class ContentSpec:
    """A tag's content, resolved: its Grammar and how its text becomes a value."""

    grammar: Any
    parse: Callable[[str], Any]
    is_json: bool


@dataclasses.dataclass
class TagSet:
    """What ``Grammar.tags`` built: the tags (content resolved), their triggers, the options."""

    tags: list          # [(Tag, ContentSpec, trigger index)]
    triggers: list      # markers (str or Grammar)
    free_text: Any
    min_calls: int
    max_calls: int | None
    trailing_text: bool = True


@dataclasses.dataclass
class Reasoning:
    """What ``Grammar.reasoning`` built: its delimiters and the answer's own parts."""

    begin: Any
    end: Any
    answer: Any          # ContentSpec
    answer_tags: Any     # the answer grammar's TagSet / Reasoning, or None


def _text_of(marker) -> str | None:
    return marker if isinstance(marker, str) else None


def content_spec(cls, content, whitespace: str, strict: bool, engine: str = "auto") -> ContentSpec:
    """The Grammar of a tag's content and how to read its text."""
    if isinstance(content, cls):
        return ContentSpec(content, lambda t: t, False)
    if isinstance(content, str):
        return ContentSpec(cls.from_regex(content), lambda t: t, False)
    if isinstance(content, (dict, bool)):
        schema = close_objects(content) if strict else content
        return ContentSpec(cls.from_json_schema(schema, whitespace=whitespace, engine=engine), json.loads, True)
    try:
        from pydantic import BaseModel, TypeAdapter
    except ImportError:  # pragma: no cover
        raise StructgenError(f"a tag's content is a JSON Schema, a regex, a Grammar or a Pydantic type, not "
                             f"{type(content).__name__}") from None
    schema = pydantic_to_schema(content)
    schema = close_objects(schema) if strict else schema
    if isinstance(content, type) and issubclass(content, BaseModel):
        parse = content.model_validate_json
    else:
        parse = TypeAdapter(content).validate_json
    return ContentSpec(cls.from_json_schema(schema, whitespace=whitespace, engine=engine), parse, True)


class TagsMixin:
    """``Grammar.tags`` and ``Grammar.reasoning`` (see the module docstring)."""

    __slots__ = ()

    @classmethod
    def tags(cls, tags, triggers=None, free_text=True, max_calls: int | None = None, *, min_calls: int = 0,
             trailing_text: bool = True, whitespace: str = "dumps", strict: bool = True, engine: str = "auto"):
        """Free text with calls (see the module docstring).  ``triggers``: markers that start a
        call (default: each tag's ``begin``); every tag's ``begin`` must start with one of them
        (as text).  ``free_text``: True (any text), False (no free text), or a regular Grammar /
        regex for each free-text stretch.  ``trailing_text=False``: the output ends with its last
        call (free text only when there is no call; with ``max_calls=1`` this is xgrammar's
        ``stop_after_first``).  ``engine``: the JSON Schema engine of JSON contents
        (``"auto"``, ``"dfa"``: one automaton, the fastest masks, ``"cfg"``)."""
        tags = list(tags)
        if not tags:
            raise GrammarError("Grammar.tags() needs at least one Tag")
        for t in tags:
            if not isinstance(t, Tag):
                raise TypeError(f"Grammar.tags() takes sg.Tag objects, not {type(t).__name__}")
            for what in ("begin", "end"):
                v = getattr(t, what)
                if not isinstance(v, (str, cls)):
                    raise TypeError(f"Tag {what} is a string or a Grammar, not {type(v).__name__}")
        if min_calls < 0 or (max_calls is not None and max_calls < max(min_calls, 0 if free_text is not False else 1)):
            raise GrammarError(f"Grammar.tags(): need 0 <= min_calls <= max_calls, got {min_calls}, {max_calls}")
        if triggers is None:
            triggers = list(dict.fromkeys(t.begin if isinstance(t.begin, str) else t.begin for t in tags))
        triggers = list(triggers)
        if not triggers:
            raise GrammarError("Grammar.tags(): triggers is empty")
        for tr in triggers:
            if not isinstance(tr, (str, cls)) or (isinstance(tr, str) and not tr):
                raise GrammarError(f"a trigger is a non-empty string or a Grammar, not {tr!r}")
        placed = []
        for t in tags:
            k = _trigger_of(t, triggers, cls)
            placed.append((t, content_spec(cls, t.content, whitespace, strict, engine), k))
        if isinstance(free_text, str):
            free_text = cls.from_regex(free_text)
        if isinstance(free_text, cls) and free_text.kind != "regular":
            raise GrammarError("Grammar.tags(free_text=...) takes a regular grammar (a regex): free text must "
                               "exclude the triggers")
        meta = TagSet(placed, triggers, free_text, min_calls, max_calls, bool(trailing_text))
        key = ("tags", tuple((repr(t.begin) if isinstance(t.begin, str) else t.begin.key, spec.grammar.key,
                              repr(t.end) if isinstance(t.end, str) else t.end.key, k) for t, spec, k in placed),
               tuple(tr if isinstance(tr, str) else tr.key for tr in triggers),
               free_text if isinstance(free_text, bool) else free_text.key, min_calls, max_calls, bool(trailing_text))
        g = cls.deferred(lambda vocab: _build_tags(cls, meta, vocab), key, f"{len(tags)} tags")
        g.structure = meta
        return g

    @classmethod
    def reasoning(cls, answer, begin="<think>", end="</think>", *, thinking=None, separator: str = r"[ \t\r\n]{0,4}",
                  whitespace: str = "dumps", strict: bool = True, engine: str = "auto"):
        """A reasoning prefix, then the answer: ``begin`` (a marker; None when the prompt ends with
        it already), the thoughts (any text, or the regex / regular Grammar ``thinking``, holding
        no ``end`` written as text), ``end`` (a marker), ``separator`` (a regex; by default up to
        four whitespace characters, as models write ``</think>\n\n``, so that a weak model cannot
        run away in whitespace), then ``answer``
        (a JSON Schema, Pydantic model, regex or Grammar, tags included)."""
        spec = content_spec(cls, answer, whitespace, strict, engine)
        if isinstance(thinking, str):
            thinking = cls.from_regex(thinking)
        if thinking is not None and (not isinstance(thinking, cls) or thinking.kind != "regular"):
            raise GrammarError("Grammar.reasoning(thinking=...) takes a regex or a regular Grammar")
        if not isinstance(end, (str, cls)) or (isinstance(end, str) and not end):
            raise GrammarError("Grammar.reasoning() needs a non-empty end marker")
        meta = Reasoning(begin, end, spec, getattr(spec.grammar, "structure", None))

        def build(vocab):
            stop = _text_of(end)
            body = thinking.node if thinking is not None else ANY_TEXT
            if stop is not None and all(not special for _, special in split_specials(stop, vocab)):
                # thoughts end at the first end marker written as text
                body = lazy(ir.seq(ir.And((body, ir.Not(_containing(ir.literal(stop))))), ir.literal(stop)))
                tkey = None if thinking is None else thinking.key
                parts = [cls("regular", node=body, key=("thoughts", tkey, stop))]
            else:
                tkey = None if thinking is None else thinking.key
                parts = [cls("regular", node=body, key=("thoughts", tkey, None)), cls.marker(end)]
            head = [cls.marker(begin)] if begin is not None else []
            return cls.sequence(*head, *parts, cls.from_regex(separator), spec.grammar)

        key = ("reasoning", begin if not isinstance(begin, cls) else begin.key,
               end if isinstance(end, str) else end.key, None if thinking is None else thinking.key, separator,
               spec.grammar.key)
        g = cls.deferred(build, key, "reasoning, then an answer")
        g.structure = meta
        return g


def _containing(node: ir.Node) -> ir.Node:
    return ir.seq(ANY_TEXT, node, ANY_TEXT)


def _trigger_of(tag: Tag, triggers: list, cls) -> int:
    """The index of the trigger ``tag.begin`` starts with (the longest one, as text), or of a
    Grammar trigger that is ``tag.begin`` itself."""
    best = None
    for k, tr in enumerate(triggers):
        if isinstance(tr, cls):
            if tr is tag.begin or (isinstance(tag.begin, cls) and tr.key == tag.begin.key):
                return k
            continue
        if isinstance(tag.begin, str) and tag.begin.startswith(tr) and (best is None or len(tr) > len(triggers[best])):
            best = k
    if best is None:
        raise GrammarError(f"the begin {tag.begin!r} of a tag starts with none of the triggers {triggers!r}")
    return best


def _build_tags(cls, meta: TagSet, vocab):
    """The grammar of a TagSet for one vocabulary."""
    text_triggers, heads = [], []
    for tr in meta.triggers:
        text = _text_of(tr)
        pieces = split_specials(text, vocab) if text is not None else None
        if pieces is not None and all(not special for _, special in pieces):
            text_triggers.append(text)
    free = meta.free_text.node if isinstance(meta.free_text, cls) else ANY_TEXT
    fkey = meta.free_text.key if isinstance(meta.free_text, cls) else meta.free_text
    if text_triggers:
        free = ir.And((free, ir.Not(ir.alt(*[_containing(ir.literal(t)) for t in text_triggers]))))
    free_g = cls("regular", node=free, key=("free text", fkey, tuple(text_triggers)))
    any_trigger = ir.alt(*[ir.literal(t) for t in text_triggers]) if text_triggers else None
    for k, tr in enumerate(meta.triggers):
        text = _text_of(tr)
        if meta.free_text is False:
            heads.append(cls.marker(tr))
        elif text is not None and text in text_triggers:
            # free text up to the first trigger of all: never a later one
            node = ir.And((lazy(ir.seq(free, any_trigger)), ir.seq(ANY_TEXT, ir.literal(text))))
            heads.append(cls("regular", node=node, key=("free text then", fkey, text, tuple(text_triggers))))
        else:
            heads.append(cls.sequence(free_g, cls.marker(tr)))
    calls = []
    for k, tr in enumerate(meta.triggers):
        bodies = []
        for tag, spec, kt in meta.tags:
            if kt != k:
                continue
            rest = tag.begin[len(tr):] if isinstance(tag.begin, str) and isinstance(tr, str) else ""
            bodies.append(cls.sequence(cls.marker(rest), spec.grammar, cls.marker(tag.end)))
        if bodies:
            calls.append(cls.sequence(heads[k], cls.alternatives(*bodies)))
    call = cls.alternatives(*calls)
    if meta.free_text is False:
        return cls.repeat(call, max(meta.min_calls, 1), meta.max_calls)
    if meta.trailing_text:
        return cls.sequence(cls.repeat(call, meta.min_calls, meta.max_calls), free_g)
    if meta.min_calls:   # each call is preceded by its free text, and the last one ends the output
        return cls.repeat(call, meta.min_calls, meta.max_calls)
    if meta.max_calls == 0:
        return free_g
    return cls.alternatives(free_g, cls.repeat(call, 1, meta.max_calls))
