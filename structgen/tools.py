"""Tool calls in the formats models are trained on, and reading them back out of an output.

    g = sg.tool_calls([GetWeather, {"title": "search", "type": "object", ...}], format="hermes")
    out = sg.generate(model, tokenizer, prompt, grammar=g)     # or tools=[...], tool_format="hermes"
    out.tool_calls       # [ToolCall(name="GetWeather", arguments=GetWeather(city="Oslo"), text=...)]
    out.content          # the free text around the calls

Formats (:data:`FORMATS`), each a :meth:`~structgen.Grammar.tags` grammar with free text around
the calls; the delimiters are markers, so a vocabulary that has them as special tokens gets the
tokens (Qwen's ``<tool_call>``, Llama 3.1's ``<|python_tag|>``, Mistral v3's ``[TOOL_CALLS]``) and
any other gets the text:

- ``"hermes"`` (Hermes, Qwen 2.5 / 3): ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``;
- ``"llama3"`` (Llama 3.1 / 3.2 / 3.3): ``<|python_tag|>{"name": ..., "parameters": {...}}``;
- ``"mistral"``: ``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`` (one or more calls per tag).

Tools are Pydantic models (named by their JSON Schema title, which is the class name unless the
model sets one), JSON Schemas with a ``title``, OpenAI function specs (``{"type": "function",
"function": {"name", "parameters"}}``) or ``{"name", "parameters"}`` dicts, or a mapping of name to
any of those.  Arguments come back validated: a Pydantic instance, or the parsed JSON after
``jsonschema`` validation.

:func:`parse_output` cuts token ids into free text, reasoning and calls using the grammar's
``structure`` (see :mod:`structgen.tags`).
"""
from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

from .compiler import compile as compile_grammar
from .composition import split_specials
from .errors import GrammarError, SchemaError, StructgenError
from .grammar import Grammar
from .tags import Reasoning, Tag, TagSet, ToolCall
from .vocab.vocabulary import special_token_bytes

__all__ = ["tool_calls", "ToolCall", "parse_output", "ParsedOutput", "FORMATS"]

FORMATS = ("hermes", "llama3", "mistral")


@dataclasses.dataclass
class _Tool:
    name: str
    schema: dict
    model: Any  # a Pydantic model class, or None


def _is_model(x) -> bool:
    try:
        from pydantic import BaseModel
    except ImportError:  # pragma: no cover
        return False
    return isinstance(x, type) and issubclass(x, BaseModel)


def _tool(spec, name: str | None = None) -> _Tool:
    if _is_model(spec):
        schema = spec.model_json_schema(mode="validation")
        return _Tool(name or schema.get("title") or spec.__name__, schema, spec)
    if not isinstance(spec, dict):
        raise TypeError(f"a tool is a Pydantic model or a JSON Schema / function spec dict, not {type(spec).__name__}")
    if spec.get("type") == "function" and isinstance(spec.get("function"), dict):
        spec = spec["function"]
    if "parameters" in spec and "name" in spec and not ("properties" in spec and "type" in spec):
        return _Tool(name or str(spec["name"]), spec.get("parameters") or {"type": "object"}, None)
    n = name or spec.get("title")
    if not n:
        raise SchemaError("a tool's JSON Schema needs a \"title\" (its name), or pass tools as {name: schema}", "")
    return _Tool(str(n), spec, None)


def _tools(tools) -> list:
    if isinstance(tools, dict) and not ("type" in tools or "properties" in tools or "function" in tools):
        out = [_tool(v, str(k)) for k, v in tools.items()]
    else:
        out = [_tool(t) for t in (tools if isinstance(tools, (list, tuple)) else [tools])]
    if not out:
        raise GrammarError("tool_calls() needs at least one tool")
    names = [t.name for t in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise GrammarError(f"tool names must differ: {dup} given twice")
    return out


def _nest(schema: dict, pointer: str) -> dict:
    """``schema`` to be placed at JSON pointer ``pointer`` of a larger schema: its local ``$ref``s
    (``#/$defs/X``) are rewritten to point below ``pointer``."""
    def walk(node):
        if isinstance(node, dict):
            out = {k: walk(v) for k, v in node.items()}
            ref = out.get("$ref")
            if isinstance(ref, str) and ref.startswith("#"):
                out["$ref"] = "#" + pointer + ref[1:]
            return out
        if isinstance(node, list):
            return [walk(x) for x in node]
        return node
    try:
        return walk(copy.deepcopy(schema))
    finally:
        walk = None  # a recursive closure is a reference cycle: break it, so refcounting frees what it holds


def _wrapper(tool: _Tool, key: str, pointer: str) -> dict:
    return {"type": "object", "properties": {"name": {"const": tool.name}, key: _nest(tool.schema, pointer + f"/properties/{key}")},
            "required": ["name", key], "additionalProperties": False}


def _arguments(tool: _Tool, value):
    if tool.model is not None:
        return tool.model.model_validate(value)
    import jsonschema

    jsonschema.validate(value, tool.schema)
    return value


def tool_calls(tools, format: str = "hermes", *, free_text=True, max_calls: int | None = None, min_calls: int = 0,
               max_parallel: int | None = None, whitespace: str = "dumps", strict: bool = True,
               engine: str = "auto") -> Grammar:
    """A grammar of free text and tool calls in ``format`` (see the module docstring).
    ``max_parallel``: the most calls in one ``[TOOL_CALLS]`` list (mistral; None: no bound).
    ``min_calls`` / ``max_calls`` count tags (for mistral, lists); the other options are
    :meth:`~structgen.Grammar.tags`'s."""
    if format not in FORMATS:
        raise GrammarError(f"tool_calls(format=...) is one of {', '.join(map(repr, FORMATS))}, not {format!r}")
    ts = _tools(tools)
    by_name = {t.name: t for t in ts}

    def call(key):
        def to_calls(value, text):
            t = by_name[value["name"]]
            return [ToolCall(t.name, _arguments(t, value[key]), text)]
        return to_calls

    if format == "hermes":
        tags = [Tag("<tool_call>\n", _wrapper(t, "arguments", ""), "\n</tool_call>", t.name, call("arguments"))
                for t in ts]
        triggers = ["<tool_call>"]
    elif format == "llama3":
        tags = [Tag("<|python_tag|>", _wrapper(t, "parameters", ""), "", t.name, call("parameters")) for t in ts]
        triggers = ["<|python_tag|>"]
    else:
        items = [_wrapper(t, "arguments", f"/items/anyOf/{i}") for i, t in enumerate(ts)]

        def to_calls(value, text):
            return [ToolCall(v["name"], _arguments(by_name[v["name"]], v["arguments"]), json.dumps(v)) for v in value]

        array = {"type": "array", "items": {"anyOf": items}, "minItems": 1}
        if max_parallel is not None:
            array["maxItems"] = int(max_parallel)
        tags = [Tag("[TOOL_CALLS]", array, "", "tool_calls", to_calls)]
        triggers = ["[TOOL_CALLS]"]
    g = Grammar.tags(tags, triggers, free_text=free_text, max_calls=max_calls, min_calls=min_calls,
                     whitespace=whitespace, strict=strict, engine=engine)
    g.source = f"{format} tool calls ({', '.join(by_name)})"
    return g


# ----------------------------------------------------------------------------- reading outputs
@dataclasses.dataclass
class ParsedOutput:
    """An output cut into its parts: ``segments`` (free text strings and :class:`ToolCall`s in
    order), ``reasoning`` (the thoughts, or None) and ``answer`` (the value after the reasoning when
    the answer has no tags)."""

    segments: list
    reasoning: str | None = None
    answer: Any = None

    @property
    def tool_calls(self) -> list:
        return [s for s in self.segments if isinstance(s, ToolCall)]

    @property
    def content(self) -> str:
        return "".join(s for s in self.segments if isinstance(s, str))


def _marker_bytes(marker, vocab) -> bytes:
    if isinstance(marker, Grammar):
        raise StructgenError("an output with a Grammar delimiter cannot be cut into parts (give delimiters as strings)")
    return b"".join(special_token_bytes(vocab.special_token_id(p)) if special else p.encode("utf-8")
                    for p, special in split_specials(marker, vocab))


def _text(data: bytes, vocab) -> str:
    """Bytes with special-token spellings back to their text."""
    out, i = [], 0
    while True:
        j = data.find(b"\xff", i)
        if j < 0 or j + 4 > len(data):
            out.append(data[i:].decode("utf-8", errors="replace"))
            return "".join(out)
        out.append(data[i:j].decode("utf-8", errors="replace"))
        tid = int.from_bytes(data[j + 1:j + 4], "big")
        out.append(vocab.special_tokens.get(tid, f"<[{tid}]>"))
        i = j + 4


class _Cutter:
    def __init__(self, vocab):
        self.vocab = vocab.with_special_tokens()

    def content_end(self, spec, data: bytes, start: int, end: bytes) -> int:
        """The first position ``e`` where ``data[start:e]`` is a whole content and ``end`` follows."""
        m = compile_grammar(spec.grammar, self.vocab).matcher()
        for e in range(start, len(data) + 1):
            if e > start and not m.advance_bytes(data[e - 1:e]):
                break
            if m.is_accepting() and data.startswith(end, e):
                return e
        raise StructgenError("the output does not hold a whole tag content here (was it complete?)")

    def tags(self, meta: TagSet, data: bytes) -> list:
        v = self.vocab
        trig = [_marker_bytes(t, v) for t in meta.triggers]
        segments, pos = [], 0
        while True:
            hits = [(data.find(t, pos), k) for k, t in enumerate(trig)]
            hits = [(i, k) for i, k in hits if i >= 0]
            if not hits:
                break
            i, k = min(hits, key=lambda h: (h[0], -len(trig[h[1]])))
            if i > pos:
                segments.append(_text(data[pos:i], v))
            done = False
            for tag, spec, kt in meta.tags:
                if kt != k:
                    continue
                begin = _marker_bytes(tag.begin, v)
                end = _marker_bytes(tag.end, v)
                if not data.startswith(begin, i):
                    continue
                a = i + len(begin)
                try:
                    e = self.content_end(spec, data, a, end)
                except StructgenError:
                    continue
                text = _text(data[a:e], v)
                value = spec.parse(text)
                if tag.to_calls is not None:
                    segments.extend(tag.to_calls(value, text))
                else:
                    segments.append(ToolCall(tag.name or (tag.begin if isinstance(tag.begin, str) else "tag"), value,
                                             text))
                pos = e + len(end)
                done = True
                break
            if not done:
                raise StructgenError(f"no tag of trigger {meta.triggers[k]!r} matches the output at byte {i}")
        if pos < len(data):
            segments.append(_text(data[pos:], v))
        return segments


def parse_output(grammar: Grammar, vocab, token_ids) -> ParsedOutput:
    """``token_ids`` (an output of ``grammar``, which has a ``structure``: made by
    ``Grammar.tags``, ``Grammar.reasoning`` or :func:`tool_calls`) cut into free text, reasoning
    and calls.  EOS ids are left out.  Raises :class:`~structgen.errors.StructgenError` when the
    output is not a whole sentence of the grammar."""
    meta = grammar.structure
    if meta is None:
        raise StructgenError(f"{grammar.source} has no tags to read (build it with Grammar.tags, Grammar.reasoning "
                             f"or tool_calls)")
    cut = _Cutter(vocab)
    eos = set(vocab.eos_ids.tolist())
    data = cut.vocab.decode([int(t) for t in token_ids if int(t) not in eos])
    reasoning = None
    if isinstance(meta, Reasoning):
        pos = 0
        if meta.begin is not None:
            b = _marker_bytes(meta.begin, cut.vocab)
            if not data.startswith(b):
                raise StructgenError("the output does not start with the reasoning's begin marker")
            pos = len(b)
        end = _marker_bytes(meta.end, cut.vocab)
        j = data.find(end, pos)
        if j < 0:
            raise StructgenError("the output has no end of reasoning")
        reasoning = _text(data[pos:j], cut.vocab)
        rest = data[j + len(end):]
        k = len(rest) - len(rest.lstrip(b" \t\r\n"))
        inner = meta.answer_tags
        if isinstance(inner, TagSet):
            return ParsedOutput(_tags_from(cut, inner, rest, k), reasoning)
        return ParsedOutput([], reasoning, meta.answer.parse(_text(rest[k:], cut.vocab)))
    return ParsedOutput(cut.tags(meta, data), reasoning)


def _tags_from(cut: _Cutter, meta: TagSet, rest: bytes, k: int) -> list:
    """The answer's tags after the separator (``k`` bytes of whitespace, some of which may be free text)."""
    try:
        return cut.tags(meta, rest[k:])
    except StructgenError:
        return cut.tags(meta, rest)
