"""Structural tags of the serving engines (vLLM, SGLang) as structgen grammars.

:func:`structural_tag_grammar` reads the two formats xgrammar 0.2.9 (and so vLLM 0.33 and SGLang
0.5.23) accept, as JSON text or a dict:

- the legacy one: ``{"type": "structural_tag", "structures": [{"begin", "schema", "end"}, ...],
  "triggers": [...]}`` (SGLang also reads ``"at_least_one"``): xgrammar's ``triggered_tags`` of
  JSON Schema contents;
- ``{"type": "structural_tag", "format": {...}}`` with these format types (xgrammar's
  ``python/xgrammar/structural_tag.py``):

  ==========================  ==============================================================
  ``const_string``            the text ``value`` (:meth:`~structgen.Grammar.literal`)
  ``json_schema``             ``style="json"`` only; compiled as the engines' JSON requests are
                              (objects closed as xgrammar's strict mode, structgen's JSON hygiene)
  ``regex``, ``grammar``      ``from_regex`` (``regex_syntax``); EBNF (GBNF) or Lark
  ``any_text``                any text (``excludes``, ``max_chars``); inside a tag, text holding
                              none of that tag's end strings, as xgrammar reads it
  ``sequence``, ``or``        :meth:`~structgen.Grammar.sequence`, ``alternatives``
  ``optional``, ``plus``,     :meth:`~structgen.Grammar.repeat`
  ``star``, ``repeat``
  ``tag``                     begin, content, end (a string, a list of strings or a ``token``)
  ``token``                   one special token (:meth:`~structgen.Grammar.special`)
  ``triggered_tags``          :meth:`~structgen.Grammar.tags` with free text: ``at_least_one``
                              (a tag first, no text before it), ``stop_after_first`` (the
                              output ends after the first tag), ``excludes``
  ``tags_with_separator``     tags separated by ``separator``, no other text
  ==========================  ==============================================================

Anything else -- another format type (``token_triggered_tags``, ``dispatch``, ``any_tokens``,
``exclude_token``, ``qwen_xml_parameter``, ...), a JSON style other than ``"json"``,
``any_order``, JSON ``excludes``, ``any_text.max_tokens``, a key xgrammar does not define --
raises :class:`~structgen.errors.Unsupported` naming the place (``format.tags[0].content``); a
malformed tag raises :class:`~structgen.errors.SchemaError`.  Nothing is approximated.

Two deliberate readings: ``begin``, ``end`` and ``triggers`` are markers, as in
:meth:`~structgen.Grammar.tags` (a special token of the vocabulary named there is that token; on
vocabularies where they are plain text, which is where xgrammar reads them, nothing differs); and
a JSON content's layout is the engine option ``whitespace`` (see
:func:`~structgen.integrations.serving.engine_options`) unless the format sets
``max_whitespace_cnt`` = n (then up to n JSON whitespace characters between lexemes, exactly
xgrammar's), where xgrammar would allow whitespace runs of any length.  Free text is UTF-8 text:
xgrammar's around triggered tags and inside a tag (its ``TagDispatch``) also takes tokens that
are no UTF-8 at all (a lone continuation byte, ``0xFF``); structgen's masks leave those out.
"""
from __future__ import annotations

import json

from ..automaton import ir
from ..constraints import resolve_constraint
from ..errors import SchemaError, Unsupported
from ..grammar import Grammar
from ..tags import ANY_TEXT, Tag

__all__ = ["structural_tag_grammar", "FORMAT_TYPES"]

#: the ``format`` types :func:`structural_tag_grammar` reads
FORMAT_TYPES = ("const_string", "json_schema", "regex", "grammar", "any_text", "sequence", "or", "optional",
                "plus", "star", "repeat", "tag", "token", "triggered_tags", "tags_with_separator")

# each type's keys in xgrammar 0.2.9 (a model_dump of its pydantic models writes them all)
_KEYS = {
    "const_string": {"value"},
    "json_schema": {"json_schema", "style", "any_order", "max_whitespace_cnt", "excludes"},
    "regex": {"pattern"},
    "grammar": {"grammar", "syntax"},
    "any_text": {"excludes", "max_tokens", "max_chars"},
    "sequence": {"elements"}, "or": {"elements"},
    "optional": {"content"}, "plus": {"content"}, "star": {"content"}, "repeat": {"content", "min", "max"},
    "tag": {"begin", "content", "end"},
    "token": {"token"},
    "triggered_tags": {"triggers", "tags", "at_least_one", "stop_after_first", "excludes"},
    "tags_with_separator": {"tags", "separator", "at_least_one", "stop_after_first"},
}


def structural_tag_grammar(spec, *, whitespace: str = "dumps", regex_syntax: str = "ecma") -> Grammar:
    """The :class:`~structgen.Grammar` of a structural tag (JSON text, bytes or a dict; see the
    module docstring for what is read and how).

    Raises:
        SchemaError: not JSON, not a structural tag, a field of the wrong type.
        Unsupported: a format type or option structgen does not express (named by its place).
        RegexError, GrammarError: a ``regex`` or ``grammar`` format's own text is bad.
    """
    if isinstance(spec, (bytes, bytearray)):
        spec = bytes(spec).decode("utf-8", "replace")
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except ValueError as e:
            raise SchemaError(f"a structural tag is a JSON object; this is not JSON: {e}", "") from None
    if not isinstance(spec, dict):
        raise SchemaError(f"a structural tag is a JSON object, not {type(spec).__name__}", "")
    reader = _Reader(whitespace, regex_syntax)
    if spec.get("structures") is not None:
        return reader.legacy(spec)
    reader.keys(spec, {"type", "format"}, "structural_tag")
    if spec.get("type", "structural_tag") != "structural_tag":
        raise SchemaError(f"a structural tag has type 'structural_tag', not {spec.get('type')!r}", "type")
    if "format" not in spec:
        raise SchemaError("a structural tag has 'format' (or the legacy 'structures' and 'triggers')", "")
    return reader.format(spec["format"], "format", ())


def _without(texts) -> ir.Node:
    """Any text holding none of ``texts``."""
    texts = [t for t in texts if t]
    if not texts:
        return ANY_TEXT
    return ir.And((ANY_TEXT, ir.Not(ir.seq(ANY_TEXT, ir.alt(*[ir.literal(t) for t in texts]), ANY_TEXT))))


class _Reader:
    """One structural tag's conversion; ``ends`` (an argument of each step) are the end strings
    of the innermost enclosing tag, which xgrammar keeps out of free text inside it."""

    def __init__(self, whitespace: str, regex_syntax: str):
        self.whitespace = whitespace
        self.regex_syntax = regex_syntax

    # ------------------------------------------------------------------ checks
    @staticmethod
    def keys(obj: dict, allowed: set, where: str) -> None:
        extra = sorted(set(obj) - allowed - {"type"})
        if extra:
            raise Unsupported(f"structural tag {where}: unknown key(s) {', '.join(map(repr, extra))}", where=where)

    @staticmethod
    def field(obj: dict, key: str, types, where: str, default=None, required: bool = False):
        if key not in obj or (obj[key] is None and not required):
            if required:
                raise SchemaError(f"structural tag {where} needs {key!r}", f"{where}.{key}")
            return default
        value = obj[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in _tuple(types)):
            names = "/".join(t.__name__ for t in _tuple(types))
            raise SchemaError(f"structural tag {where}.{key} is a {names}, not {type(value).__name__}",
                              f"{where}.{key}")
        return value

    def strings(self, obj: dict, key: str, where: str, required: bool = False) -> list:
        values = self.field(obj, key, list, where, [], required)
        for i, v in enumerate(values):
            if not isinstance(v, str):
                raise SchemaError(f"structural tag {where}.{key}[{i}] is a string, not {type(v).__name__}",
                                  f"{where}.{key}[{i}]")
        return values

    # ------------------------------------------------------------------ formats
    def legacy(self, spec: dict) -> Grammar:
        self.keys(spec, {"structures", "triggers", "at_least_one"}, "structural_tag")
        structures = self.field(spec, "structures", list, "structural_tag", required=True)
        triggers = self.strings(spec, "triggers", "structural_tag", required=True)
        tags = []
        for i, s in enumerate(structures):
            where = f"structures[{i}]"
            if not isinstance(s, dict):
                raise SchemaError(f"structural tag {where} is an object", where)
            self.keys(s, {"begin", "schema", "end"}, where)
            schema = s.get("schema")
            tags.append({"type": "tag", "begin": self.field(s, "begin", str, where, required=True),
                         "content": {"type": "json_schema", "json_schema": {} if schema is None else schema},
                         "end": self.field(s, "end", str, where, required=True)})
        fmt = {"type": "triggered_tags", "triggers": triggers, "tags": tags,
               "at_least_one": self.field(spec, "at_least_one", bool, "structural_tag", False)}
        return self.format(fmt, "legacy", ())

    def format(self, fmt, where: str, ends: tuple) -> Grammar:
        if not isinstance(fmt, dict):
            raise SchemaError(f"structural tag {where} is a format object, not {type(fmt).__name__}", where)
        kind = fmt.get("type")
        if kind not in _KEYS:
            raise Unsupported(f"structgen does not support the structural tag format type {kind!r} (at {where}); "
                              f"it reads {', '.join(FORMAT_TYPES)}", where=where)
        self.keys(fmt, _KEYS[kind], where)
        return getattr(self, "read_" + kind)(fmt, where, ends)

    def read_const_string(self, fmt, where, ends):
        return Grammar.literal(self.field(fmt, "value", str, where, required=True))

    def read_json_schema(self, fmt, where, ends):
        schema = self.field(fmt, "json_schema", (dict, bool), where, required=True)
        style = self.field(fmt, "style", str, where, "json")
        if style != "json":
            raise Unsupported(f"structgen does not support the JSON style {style!r} of structural tags (at {where}); "
                              "it reads style 'json'", where=f"{where}.style")
        if self.field(fmt, "any_order", bool, where, False):
            raise Unsupported(f"structgen does not support any_order JSON in structural tags (at {where}): "
                              "xgrammar's any_order checks neither required nor repeated keys", where=f"{where}.any_order")
        if self.strings(fmt, "excludes", where):
            raise Unsupported(f"structgen does not support excludes in a structural tag's JSON (at {where})",
                              where=f"{where}.excludes")
        n = self.field(fmt, "max_whitespace_cnt", int, where)
        if n is None:
            return resolve_constraint(schema=schema, whitespace=self.whitespace).grammar
        if n < 0:
            raise SchemaError(f"structural tag {where}.max_whitespace_cnt is >= 0", f"{where}.max_whitespace_cnt")
        if n == 0:
            return resolve_constraint(schema=schema, whitespace="compact").grammar
        # between lexemes only: xgrammar puts no whitespace around the document
        return resolve_constraint(schema=schema, whitespace="flexible",
                                  schema_options={"max_whitespace": n, "edge_whitespace": False}).grammar

    def read_regex(self, fmt, where, ends):
        return Grammar.from_regex(self.field(fmt, "pattern", str, where, required=True), syntax=self.regex_syntax)

    def read_grammar(self, fmt, where, ends):
        text = self.field(fmt, "grammar", str, where, required=True)
        syntax = self.field(fmt, "syntax", str, where, "ebnf")
        if syntax == "ebnf":
            return Grammar.from_gbnf(text)
        if syntax == "lark":
            return Grammar.from_lark(text)
        raise SchemaError(f"structural tag {where}.syntax is 'ebnf' or 'lark', not {syntax!r}", f"{where}.syntax")

    def read_any_text(self, fmt, where, ends):
        if self.field(fmt, "max_tokens", int, where) is not None:
            raise Unsupported(f"structgen does not support any_text.max_tokens (a token budget) in structural tags "
                              f"(at {where})", where=f"{where}.max_tokens")
        node = _without(self.strings(fmt, "excludes", where) + list(ends))
        chars = self.field(fmt, "max_chars", int, where)
        if chars is not None:
            node = ir.And((node, ir.repeat(ir.ANY_CHAR, 0, max(int(chars), 0))))
        return Grammar.from_ir(node, key=("any_text", tuple(sorted(set(ends) | set(fmt.get("excludes") or ()))),
                                          chars))

    def elements(self, fmt, where, ends) -> list:
        elements = self.field(fmt, "elements", list, where, required=True)
        if not elements:
            raise SchemaError(f"structural tag {where}.elements is empty", f"{where}.elements")
        return [self.format(e, f"{where}.elements[{i}]", ends) for i, e in enumerate(elements)]

    def read_sequence(self, fmt, where, ends):
        return Grammar.sequence(*self.elements(fmt, where, ends))

    def read_or(self, fmt, where, ends):
        return Grammar.alternatives(*self.elements(fmt, where, ends))

    def repeated(self, fmt, where, ends, lo, hi):
        return Grammar.repeat(self.format(fmt.get("content"), f"{where}.content", ends), lo, hi)

    def read_optional(self, fmt, where, ends):
        return self.repeated(fmt, where, ends, 0, 1)

    def read_plus(self, fmt, where, ends):
        return self.repeated(fmt, where, ends, 1, None)

    def read_star(self, fmt, where, ends):
        return self.repeated(fmt, where, ends, 0, None)

    def read_repeat(self, fmt, where, ends):
        lo = self.field(fmt, "min", int, where, required=True)
        hi = self.field(fmt, "max", int, where, required=True)
        if lo < 0 or (hi != -1 and hi < lo):
            raise SchemaError(f"structural tag {where}: need 0 <= min <= max (max -1: unbounded), got {lo}, {hi}",
                              where)
        return self.repeated(fmt, where, ends, lo, None if hi == -1 else hi)

    def read_token(self, fmt, where, ends):
        return Grammar.special(self.field(fmt, "token", (int, str), where, required=True))

    def delimiter(self, value, where: str, lists: bool):
        """A tag's begin or end: a marker, a ``token`` format, or (an end) a list of strings."""
        if isinstance(value, str):
            return Grammar.marker(value), (value,)
        if lists and isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return Grammar.alternatives(*[Grammar.marker(v) for v in value]), tuple(value)
        if isinstance(value, dict) and value.get("type") == "token":
            self.keys(value, _KEYS["token"], where)
            return self.read_token(value, where, ()), ()
        raise SchemaError(f"structural tag {where} is a string{', a list of strings' if lists else ''} or a token "
                          f"format, not {value!r}", where)

    def tag_parts(self, fmt, where):
        """(begin text or None, begin grammar, content grammar, end grammar) of a ``tag``."""
        if not isinstance(fmt, dict) or fmt.get("type", "tag") != "tag":
            raise SchemaError(f"structural tag {where} is a tag format", where)
        self.keys(fmt, _KEYS["tag"], where)
        for key in ("begin", "content", "end"):
            if key not in fmt:
                raise SchemaError(f"structural tag {where} needs {key!r}", f"{where}.{key}")
        begin, _ = self.delimiter(fmt["begin"], f"{where}.begin", False)
        end, end_texts = self.delimiter(fmt["end"], f"{where}.end", True)
        content = self.format(fmt["content"], f"{where}.content", tuple(t for t in end_texts if t))
        return (fmt["begin"] if isinstance(fmt["begin"], str) else None), begin, content, end

    def read_tag(self, fmt, where, ends):
        _, begin, content, end = self.tag_parts(fmt, where)
        return Grammar.sequence(begin, content, end)

    def tag_list(self, fmt, where) -> list:
        tags = self.field(fmt, "tags", list, where, required=True)
        if not tags:
            raise SchemaError(f"structural tag {where}.tags is empty", f"{where}.tags")
        return [self.tag_parts(t, f"{where}.tags[{i}]") for i, t in enumerate(tags)]

    def read_triggered_tags(self, fmt, where, ends):
        triggers = self.strings(fmt, "triggers", where, required=True)
        if not triggers or not all(triggers):
            raise SchemaError(f"structural tag {where}.triggers are non-empty strings, at least one",
                              f"{where}.triggers")
        parts = self.tag_list(fmt, where)
        tags = []
        for i, (text, begin, content, end) in enumerate(parts):
            if text is None:
                raise Unsupported(f"structural tag {where}.tags[{i}]: a triggered tag's begin is a string "
                                  "(token begins are token_triggered_tags, which structgen does not support)",
                                  where=f"{where}.tags[{i}].begin")
            hits = [t for t in triggers if text.startswith(t)]
            if len(hits) != 1:   # xgrammar's rule: exactly one trigger per tag
                raise SchemaError(f"structural tag {where}.tags[{i}]: its begin {text!r} must start with exactly one "
                                  f"trigger, it starts with {len(hits)} of {triggers!r}", f"{where}.tags[{i}]")
            tags.append(Tag(text, content, end))
        at_least_one = self.field(fmt, "at_least_one", bool, where, False)
        stop = self.field(fmt, "stop_after_first", bool, where, False)
        excludes = self.strings(fmt, "excludes", where) + list(ends)
        free = Grammar.from_ir(_without(excludes), key=("free text", tuple(sorted(set(excludes))))) \
            if excludes else True
        first = Grammar.alternatives(*[Grammar.sequence(b, c, e) for _, b, c, e in parts])
        if at_least_one and stop:
            return first
        rest = Grammar.tags(tags, triggers=triggers, free_text=free, max_calls=1 if stop else None,
                            trailing_text=not stop, whitespace=self.whitespace)
        # xgrammar's at_least_one: the output starts with a tag (no text before it), then as usual
        return Grammar.sequence(first, rest) if at_least_one else rest

    def read_tags_with_separator(self, fmt, where, ends):
        sep = self.field(fmt, "separator", str, where, required=True)
        tag = Grammar.alternatives(*[Grammar.sequence(b, c, e) for _, b, c, e in self.tag_list(fmt, where)])
        if self.field(fmt, "stop_after_first", bool, where, False):
            some = tag
        else:
            some = Grammar.sequence(tag, Grammar.repeat(Grammar.sequence(Grammar.literal(sep), tag), 0, None))
        return some if self.field(fmt, "at_least_one", bool, where, False) else Grammar.optional(some)


def _tuple(types) -> tuple:
    return types if isinstance(types, tuple) else (types,)
