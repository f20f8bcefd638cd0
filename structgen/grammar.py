"""Grammar: what a constraint is, before it meets a vocabulary.

A ``Grammar`` is either *regular* (an IR node from :mod:`structgen.automaton.ir`,
compiled to a byte DFA and then a :class:`~structgen.index.TokenDFA`) or a
*context-free* grammar for the grammar engine (:mod:`structgen.cfg`).  The
front-ends below only translate; :func:`structgen.compile` does the work and
caches it per (grammar, vocabulary).
"""
from __future__ import annotations

import json
from typing import Any, Iterable

from .automaton import ir
from .collector import pausing
from .cfg.compose import trim_edges
from .cfg.indent import Indenter
from .automaton.build import limit_scope, warm_up
from .automaton.limits import check_count, check_known, check_seconds
from .composition import GrammarAlgebra, check_specials
from .tags import TagsMixin
from .errors import GrammarError, LimitExceeded, OptionError, StructgenError, Unsupported
from .frontends.deep import call_deep
from .frontends.gbnf import gbnf_to_cfg
from .frontends.json_schema.hygiene import resolve_hygiene
from .frontends.json_schema.options import parse_json_text
from .frontends.json_schema.property_order import check_order
from .frontends.json_schema.reader import without_keywords
from .frontends.json_schema.registry import bundle_remote
from .frontends.json_schema.select import compile_with
from .frontends.json_schema.slicing import json_slicing
from .frontends.lark import lark_to_cfg
from .frontends.lark_extensions import extension_cfg, has_extensions, read_extensions
from .frontends.pydantic import pydantic_to_schema
from .frontends.regex import DEFAULT_MAX_DEPTH, parse_regex


def _clip(text: str, n: int = 80) -> str:
    return repr(text) if len(text) <= n else repr(text[:n]) + f"... ({len(text)} characters)"


def _schema_and_text(engine: str, schema, options: dict):
    """``(engine, report, canonical JSON text of schema, schema value)``: deep schemas need the room
    of :func:`structgen.frontends.deep.call_deep` for all three (reading JSON text too)."""
    schema = parse_json_text(schema)
    # time_limit bounds every automaton built while reading the schema, not only compile()'s
    with limit_scope(options.get("time_limit")):
        engine, result = compile_with(engine, schema, **options)
    return engine, result, json.dumps(schema, sort_keys=True, default=str), schema


class Grammar(TagsMixin, GrammarAlgebra):
    """A constraint specification.  Build one with the ``from_*`` constructors, or compose
    grammars (:class:`~structgen.composition.GrammarAlgebra`: ``sequence``, ``|``, ``optional``,
    ``repeat``, ``special``, ``marker``; :class:`~structgen.tags.TagsMixin`: ``tags``,
    ``reasoning``)."""

    __slots__ = ("kind", "node", "cfg", "key", "source", "report", "slicing", "specials", "builder", "structure")

    def __init__(self, kind: str, *, node=None, cfg=None, key=None, source: str = "", report=None,
                 slicing=None, specials=frozenset(), builder=None, structure=None):
        self.kind = kind          # "regular", "cfg" or "deferred" (built per vocabulary: see resolve())
        self.node = node          # ir.Node when regular
        self.cfg = cfg            # structgen.cfg grammar when context-free
        self.key = key if key is not None else (kind, id(self))
        self.source = source      # short human description
        self.report = report      # front-end report (e.g. ignored schema keywords in lenient mode)
        self.slicing = slicing    # vocabulary slices the front end asks for (index.slices.Slicing; None: default)
        self.specials = frozenset(specials)  # ids of the special tokens the grammar names (see composition)
        self.builder = builder    # deferred: vocabulary -> Grammar
        self.structure = structure  # Grammar.tags() / reasoning(): the output's parts (structgen.tags)

    @property
    def is_regular(self) -> bool:
        return self.kind == "regular"

    # -- regular front-ends -----------------------------------------------------
    @classmethod
    @pausing
    def from_regex(cls, pattern: str, *, syntax: str = "python", time_limit: float | None = 10.0,
                   max_states: int = 100_000, max_depth: int = DEFAULT_MAX_DEPTH, **unknown) -> "Grammar":
        """Outputs that fully match ``pattern`` (Python ``re`` syntax by default;
        ``syntax="ecma"`` for JavaScript / JSON Schema semantics of ``\\d \\w \\s``).

        ``time_limit`` (seconds) and ``max_states`` bound the automata built while reading the
        pattern (possessive quantifiers and atomic groups are decided on DFAs), ``max_depth`` the
        nesting of groups; past any, :class:`~structgen.errors.LimitExceeded`.  Bad options raise
        :class:`~structgen.errors.OptionError`."""
        who = "Grammar.from_regex()"
        check_known(unknown, ("syntax", "time_limit", "max_states", "max_depth"), who)
        time_limit = check_seconds(time_limit, who=who)
        max_states = check_count(max_states, "max_states", who)
        max_depth = check_count(max_depth, "max_depth", who)
        if time_limit is not None:
            warm_up()  # before the clock starts
        try:
            with limit_scope(time_limit):
                node = parse_regex(pattern, syntax=syntax, max_depth=max_depth, max_states=max_states,
                                   lookahead=True)
        except LimitExceeded as e:
            if e.limit == "max_depth":  # the message names the pattern and the position already
                raise LimitExceeded(e.message, e.limit, e.value, "Grammar.from_regex(max_depth=...)") from e
            raise e.within(f"reading regex {_clip(pattern)}", ("time_limit", "max_states"), "Grammar.from_regex") from e
        return cls("regular", node=node, key=("regex", pattern, syntax), source=f"regex {_clip(pattern)}")

    @classmethod
    def choice(cls, options: Iterable[str], **unknown) -> "Grammar":
        """Exactly one of the given strings."""
        check_known(unknown, (), "Grammar.choice()")
        opts = tuple(dict.fromkeys(str(o) for o in options))
        if not opts:
            raise StructgenError("Grammar.choice needs at least one option")
        node = ir.alt(*(ir.literal(o) if o else ir.EMPTY for o in opts))
        return cls("regular", node=node, key=("choice", opts), source=f"choice of {len(opts)} strings")

    @classmethod
    def from_ir(cls, node: ir.Node, *, key=None) -> "Grammar":
        """A regular grammar from an IR node built by hand."""
        return cls("regular", node=node, key=key or ("ir", node), source="IR")

    # -- JSON Schema / Pydantic ---------------------------------------------------
    @classmethod
    @pausing
    def from_json_schema(cls, schema: Any, *, engine: str = "auto", property_order: str = "declared",
                         registry: Any = None, hygiene: Any = None, formats: str = "assert",
                         **options) -> "Grammar":
        """JSON documents valid under ``schema`` (a dict, bool or JSON text).

        ``engine``: ``"dfa"`` compiles the whole schema to one regular language
        (:func:`structgen.frontends.json_schema.regular.compile_json_schema`: free-form values and recursion
        bounded), ``"cfg"`` to a grammar for the grammar engine
        (:func:`structgen.frontends.json_schema.cfg.compile_json_schema_cfg`: exact recursion, linear
        size), ``"auto"`` picks per schema (see :mod:`structgen.frontends.json_schema.select`).
        ``property_order``: ``"declared"`` (object members in the order ``properties`` lists
        them) or ``"any"`` (any order, each key at most once: see
        :mod:`structgen.frontends.json_schema.property_order`; matchers then reject duplicate keys at run time,
        and, with ``report.live_keys``, tokens after which only used keys could follow).
        ``registry``: where remote ``$ref`` URIs are looked up -- a ``referencing.Registry`` (what
        ``jsonschema`` uses) or a mapping of URI to schema; never a network fetch (see
        :mod:`structgen.frontends.json_schema.registry`).
        ``hygiene``: generation restrictions on top of the exact language -- ``True`` (the
        defaults of :class:`structgen.JsonHygiene`: integer literals in the 64-bit range, bounded
        number digits and exponents, short whitespace runs, extra members after the declared
        ones), a dict of its settings or an instance; ``None``/``False`` (the default here): exact
        JSON Schema semantics.  ``sg.generate`` and friends turn it on (see
        :mod:`structgen.frontends.json_schema.hygiene`); ``report.hygiene`` lists what was used.
        ``formats``: ``"assert"`` (the default: ``format`` constrains strings, as the format-assertion
        vocabulary says; see :mod:`structgen.frontends.json_schema.formats` for how closely) or
        ``"annotate"`` (``format`` constrains nothing: 2020-12's default format-annotation vocabulary).
        Other options are the compilers', e.g. ``whitespace="compact"|"flexible"``, ``lenient=False``.
        """
        if engine not in ("auto", "dfa", "cfg"):
            raise OptionError(f"Grammar.from_json_schema(): engine must be 'auto', 'dfa' or 'cfg', not {engine!r}")
        if formats not in ("assert", "annotate"):
            raise OptionError(f"Grammar.from_json_schema(): formats must be 'assert' or 'annotate', not {formats!r}")
        if "time_limit" in options:
            options["time_limit"] = check_seconds(options["time_limit"], who="Grammar.from_json_schema()")
        if check_order(property_order) == "any":
            options["property_order"] = "any"
        hygiene = resolve_hygiene(hygiene)
        if hygiene is not None:
            options["hygiene"] = hygiene
        # remote resources (and the official meta-schemas, needing no registry) embedded
        schema = bundle_remote(call_deep(parse_json_text, schema), registry, options.get("draft"))
        if formats == "annotate":
            schema = call_deep(without_keywords, call_deep(parse_json_text, schema), ("format",))
        engine, result, text, schema = call_deep(_schema_and_text, engine, schema, options)
        key = ("json_schema", engine, text, tuple(sorted((k, repr(v)) for k, v in options.items())))
        src = f"JSON Schema ({engine})"
        if isinstance(result.grammar, ir.Node):
            return cls("regular", node=result.grammar, key=key, source=src, report=result, slicing=json_slicing())
        return cls("cfg", cfg=result.grammar, key=key, source=src, report=result, slicing=json_slicing())

    @classmethod
    def from_pydantic(cls, model, *, property_order: str = "declared", **options) -> "Grammar":
        """JSON documents that validate as ``model`` (a Pydantic model or any type
        Pydantic's TypeAdapter accepts); options as :meth:`from_json_schema`."""
        g = cls.from_json_schema(pydantic_to_schema(model), property_order=property_order, **options)
        g.source = f"Pydantic {getattr(model, '__name__', model)!s}"
        return g

    # -- context-free front-ends --------------------------------------------------
    @classmethod
    @pausing
    def from_lark(cls, text: str, start: str = "start", import_paths=None, source_path=None,
                  time_limit: float | None = None, regex_syntax: str = "python", postlex=None,
                  lexer: str = "dynamic_complete", max_follow_rules: int | None = None, **unknown) -> "Grammar":
        """A grammar in Lark's syntax (rules, terminals, ``%import``, ``%ignore``), with
        llguidance's extensions (:mod:`structgen.frontends.lark_extensions`: ``%json {...}``
        inline JSON Schemas, special tokens ``<|name|>`` / ``<[id]>``, ``x{m,n}``, ``[lazy]``).  ``import_paths``
        (folders searched for ``%import``ed grammar files, as ``lark.Lark``'s) and ``source_path``
        (the grammar's own file: relative imports such as ``%import .csv.start`` look beside it).
        ``time_limit`` (seconds) bounds the automata built while reading it.  ``regex_syntax``:
        ``"python"`` (Lark's) or ``"rust"`` (the Rust ``regex`` crate's, which llguidance's Lark
        grammars use: ``\\p{L}``, ``[[:alpha:]]``, ``[a-z&&[^aeiou]]``, ``\\x{..}``, ``\\z``; see
        :mod:`structgen.frontends.regex`) for the ``/.../`` terminals.  ``postlex``: an indenter, as
        ``lark.Lark``'s -- an instance of a ``lark.indenter.Indenter`` subclass (``PythonIndenter``)
        or a :class:`structgen.Indenter` (which also sets the deepest column accepted,
        ``max_column``, 40 by default); its ``%declare``d indent and dedent terminals are compiled
        into the grammar (:mod:`structgen.cfg.indent`).  ``lexer``: ``"dynamic_complete"`` (default: every
        lexing of rule terminals, Lark's Earley ``dynamic_complete``), ``"dynamic"`` (Lark's Earley
        default: each rule terminal's lexeme is its longest match at its position) or ``"basic"``
        (Lark's basic lexer, what its ``lalr`` parser uses: the first terminal in Lark's order with
        its longest match, keywords reclassified from names; :mod:`structgen.frontends.lark_lexer`).
        ``max_follow_rules``: the most
        grammar rules that lookahead, longest-match and indentation conditions may write (default
        500,000; past it :class:`LimitExceeded`)."""
        who = "Grammar.from_lark()"
        check_known(unknown, ("start", "import_paths", "source_path", "time_limit", "regex_syntax", "postlex", "lexer",
                              "max_follow_rules"), who)
        indenter = Indenter.of(postlex) if postlex is not None else None
        max_follow_rules = check_count(max_follow_rules, "max_follow_rules", who, optional=True)
        if regex_syntax not in ("python", "rust"):
            raise OptionError(f"{who}: regex_syntax must be 'python' or 'rust', not {regex_syntax!r}")
        ext = read_extensions(text, regex_syntax) if has_extensions(text) else None
        with limit_scope(check_seconds(time_limit, who=who)):
            if ext is None or not ext.any:
                cfg = lark_to_cfg(ext.text if ext is not None else text, start=start, import_paths=import_paths,
                                  source_path=source_path, regex_syntax=regex_syntax, indenter=indenter, lexer=lexer,
                                  max_follow_rules=max_follow_rules)
            elif indenter is not None or lexer != "dynamic_complete" or max_follow_rules is not None:
                raise OptionError(f"{who}: postlex, lexer and max_follow_rules with llguidance's extensions "
                                  f"are not supported")
            else:
                cfg = extension_cfg(ext, start=start, import_paths=import_paths, source_path=source_path)
        key = (("lark", text, start, regex_syntax) + ((indenter.key(),) if indenter is not None else ())
               + ((lexer,) if lexer != "dynamic_complete" else ()) + ((max_follow_rules,) if max_follow_rules else ())
               if not (import_paths or source_path) else ("lark-cfg", cfg.key()))
        if ext is None or not (ext.json or ext.tokens):
            return cls("cfg", cfg=cfg, key=key, source="Lark grammar")
        parts = {n: _lark_json(schema, line, col) for n, (schema, line, col) in ext.json.items() if n in cfg.terminals}
        parts.update({n: _lark_token(spec, line, col) for n, (spec, line, col) in ext.tokens.items()
                      if n in cfg.terminals})
        return cls.embedding(cfg, parts, key, "Lark grammar")

    @classmethod
    @pausing
    def from_gbnf(cls, text: str, start: str = "root", time_limit: float | None = None, **unknown) -> "Grammar":
        """A grammar in llama.cpp's GBNF syntax; ``time_limit`` (seconds) bounds the automata built
        while reading it."""
        who = "Grammar.from_gbnf()"
        check_known(unknown, ("start", "time_limit"), who)
        with limit_scope(check_seconds(time_limit, who=who)):
            cfg = gbnf_to_cfg(text, start=start)
        return cls("cfg", cfg=cfg, key=("gbnf", text, start), source="GBNF grammar")

    def __repr__(self) -> str:
        return f"Grammar({self.kind}, {self.source})"


#: llguidance's ``x-guidance`` options of an inline ``%json`` schema that structgen reads
_X_GUIDANCE = ("whitespace_flexible", "lenient", "coerce_one_of")


def _lark_json(schema, line: int, col: int) -> Grammar:
    """The grammar of a Lark grammar's ``%json { ... }``, with llguidance's defaults: flexible
    whitespace inside, none around (``x-guidance``: ``whitespace_flexible``, ``lenient``)."""
    options = {"whitespace": "flexible"}
    if isinstance(schema, dict) and "x-guidance" in schema:
        schema = dict(schema)
        xg = schema.pop("x-guidance")
        bad = sorted(set(xg) - set(_X_GUIDANCE)) if isinstance(xg, dict) else ["(not an object)"]
        if bad:
            raise Unsupported(f"x-guidance options {bad} of the %json at line {line}, column {col}",
                              f"line {line}, column {col}")
        if xg.get("whitespace_flexible") is False:
            options["whitespace"] = "compact"
        if xg.get("lenient"):
            options["lenient"] = True
        if xg.get("coerce_one_of") and not xg.get("lenient"):
            raise Unsupported(f"x-guidance coerce_one_of (oneOf read as anyOf) of the %json at line {line}, "
                              f"column {col}", f"line {line}, column {col}")
    g = Grammar.from_json_schema(schema, **options)
    if options["whitespace"] != "flexible":
        return g
    # llguidance allows whitespace inside a %json value, never around it
    if g.kind == "regular":
        anything = ir.repeat(ir.ANY_CHAR, 0, None)
        g.node = ir.And((g.node, ir.seq(_NOT_WS, anything), ir.seq(anything, _NOT_WS)))
    else:
        g.cfg = trim_edges(g.cfg, _JSON_WS)
    g.key = ("lark-json", g.key)
    return g


_JSON_WS = ir.CharSet.of([(9, 10), (13, 13), (32, 32)])
_NOT_WS = _JSON_WS.negate()


def _lark_token(spec, line: int, col: int) -> Grammar:
    """The grammar of a Lark grammar's special-token reference (``<|name|>``, ``<[id,lo-hi]>``)."""
    kind, value = spec
    if kind == "text":
        part = Grammar.special(value)
    else:
        ids = [i for lo, hi in value for i in range(lo, hi + 1)]
        if len(ids) > 4096:
            raise Unsupported(f"token set of {len(ids)} ids at line {line}, column {col} (at most 4096)",
                              f"line {line}, column {col}")
        part = Grammar.alternatives(*[Grammar.special(i) for i in dict.fromkeys(ids)])

    def build(vocab):  # the vocabulary's errors name the token's place in the grammar text
        try:
            g = part.resolve(vocab)
            check_specials(g, vocab)
            return g
        except GrammarError as e:
            raise GrammarError(f"Lark grammar: {e.message}", line, col) from None
        except Unsupported as e:
            raise Unsupported(e.message, f"line {line}, column {col}") from None

    return Grammar.deferred(build, ("lark-token", spec[0], repr(value), line, col), f"special token {value}")
