"""JSON Schema (draft 2020-12, draft-07 spellings) -> regular-language IR.

:func:`schema_to_ir` returns the IR of every JSON text that is valid under the schema, laid out as
``whitespace`` says; :func:`compile_json_schema` returns it with a :class:`SchemaReport`.

Exactness.  Every language built here is *sound* (it only holds valid instances).  Most are also
*exact* within the universe ``U`` of texts we model -- JSON texts in the chosen layout, numbers
written without an exponent, object keys written as ``json.dumps`` writes them, free-form values
nested at most ``any_depth`` deep.  Languages that are exact within ``U`` can be complemented, which
is how ``not``, ``oneOf`` (when the branches are not provably disjoint) and ``if``/``then``/``else``
are compiled exactly, by intersection and complement.  Sound-but-not-exact languages: objects
whose declared properties are fixed in declared order (>= 2 of them), enum/const objects with >= 2
keys, formats outside :data:`.formats.EXACT`, recursion cut at ``max_recursion_depth``.
Negating one of those raises :class:`Unsupported` (``lenient=True`` ignores the keyword instead and
reports it).

What is enforced, keyword by keyword (all exact unless said):
- ``type`` (lists, ``integer`` = integral value, ``1.0`` included), ``enum``/``const`` (value
  equality: ``1 == 1.0``, any string escaping; object keys in the given order).
- numbers: the RFC 8259 grammar; bounds and ``multipleOf`` on exponent-free numerals (see
  :mod:`.numbers`); draft-04 boolean ``exclusiveMinimum``/``exclusiveMaximum`` too.
- strings: ``minLength``/``maxLength`` in code points (an escape is one code point), ``pattern``
  (ECMA syntax, search semantics) and ``format`` on the *decoded* string (see :mod:`.strings`).
- objects: ``properties`` in declared order (optional ones optional), ``required``,
  ``additionalProperties``, ``patternProperties`` (up to 4 patterns), ``propertyNames``,
  ``min/maxProperties``, ``dependentRequired``, ``dependentSchemas``, draft-07 ``dependencies``.
  Additional properties may appear anywhere between the declared ones.  Duplicate keys are
  treated occurrence by occurrence (RFC 8259 leaves their meaning open).
- arrays: ``items``, ``prefixItems`` (and draft-07 array ``items``/``additionalItems``),
  ``min/maxItems``, ``contains`` with ``minContains``/``maxContains``; ``uniqueItems`` exactly when
  the items range over at most ``unique_items_limit`` distinct values (enum/const/boolean/null),
  else :class:`Unsupported` (lenient: ignored and reported).
- ``anyOf``, ``allOf`` (intersection), ``oneOf``, ``not``, ``if``/``then``/``else``, ``$ref`` (local:
  JSON pointers, ``$anchor``, ``$id``-relative), ``$defs``/``definitions``, boolean schemas.
- recursion: a ``$ref`` cycle is unrolled ``max_recursion_depth`` times, then cut (instances
  nesting deeper are rejected; ``SchemaReport.truncated`` lists the refs); with
  ``recursion="error"`` the cut raises :class:`LimitExceeded` instead.
- free-form values (``{}``, ``true``, ``additionalProperties`` absent...) nest at most
  ``any_depth`` levels: the set of all JSON values is not regular.

Layout: this module holds :class:`RegularCompiler` (dispatch, ``$ref`` unrolling, scalars,
enum/const, applicators); objects are :mod:`.regular_objects`, arrays :mod:`.regular_arrays`;
the document (draft, ``$id`` index, ``$ref`` resolution) comes from :mod:`.reader`, keyword
groups as :mod:`.records`, the keyword table from :mod:`.keywords`, the report from :mod:`.report`.
"""
from __future__ import annotations

import re
import time

from structgen import caching
from structgen.automaton import ir
from structgen.automaton.build import build_dfa, embedded, recording, replay
from structgen.errors import LimitExceeded, SchemaError, Unsupported

from . import formats as json_formats
from . import numbers as json_numbers
from .checks import MAX_SCHEMA_DEPTH, check_once
from .content import CONTENT_KEYWORDS, content_as_keywords, has_content, refused_keyword
from .hygiene import lexical_node, resolve_hygiene, with_hygiene
from .keywords import APPLICATORS, TYPE_KEYWORDS, TYPES, UNSUPPORTED
from .language import NOTHING, WS_CHARS, Lang, and_langs, any_string, lit, pattern_search_ir
from ..deep import call_deep
from .options import parse_json_text, regular_options
from .property_order import check_order
from .reader import SchemaDocument, always_false, has_applicator
from .records import Combinators, EnumConst, NumberFacets, StringFacets
from .regular_arrays import ArrayLanguages
from .regular_objects import ObjectLanguages
from .report import SchemaReport
from .strings import encode, literal_set_node
from .values import canon, is_number, json_type

# (depth, exponent-free numbers, whitespace node, dumps, dfa blocks) -> (IR, work)
_ANY_CACHE = caching.LRU(256, name="json_schema.any_values")
_PLAIN_KEY = re.compile(r'[\x20\x21\x23-\x5b\x5d-\x7e]*')


class RegularCompiler(ObjectLanguages, ArrayLanguages):
    """Compiles sub-schemas of one document to :class:`Lang` (see the module docstring).

    ``root``: the schema, or a :class:`SchemaDocument` already read (then ``draft`` must be the
    one it was read with); options as :func:`compile_json_schema`."""

    def __init__(self, root, *, whitespace="compact", max_whitespace=16, lenient=False, max_recursion_depth=3,
                 recursion="unroll", any_depth=3, unique_items_limit=6, draft=None, max_multiple_of_states=100_000,
                 max_properties_unroll=64, max_states=100_000, time_limit=10.0, dfa_blocks=True,
                 extra_properties="end", property_order="declared", any_order_limit=1024,
                 any_order_max_states=50_000, max_schema_depth=MAX_SCHEMA_DEPTH, hygiene=None):
        if whitespace not in ("compact", "flexible", "dumps"):
            raise ValueError("whitespace must be 'compact', 'flexible' or 'dumps'")
        if recursion not in ("unroll", "error"):
            raise ValueError("recursion must be 'unroll' or 'error'")
        doc = root if isinstance(root, SchemaDocument) else SchemaDocument(root, draft)
        check_once(doc, None if max_schema_depth is None else int(max_schema_depth))
        self.doc = doc
        self.root = doc.root
        # "dumps": exactly json.dumps' default separators ", " and ": ", no other whitespace.
        self.ws = ir.Repeat(WS_CHARS, 0, int(max_whitespace)) if whitespace == "flexible" else ir.EMPTY
        self.dumps = whitespace == "dumps"
        self.lenient = lenient
        self.max_rec = int(max_recursion_depth)
        self.recursion = recursion
        self.any_depth = int(any_depth)
        self.unique_limit = int(unique_items_limit)
        self.max_mult_states = max_multiple_of_states
        self.max_props_unroll = max_properties_unroll
        self.report = SchemaReport()
        self.max_states = int(max_states)
        self.deadline = None if time_limit is None else time.monotonic() + float(time_limit)
        self.time_limit = time_limit
        self.dfa_blocks = dfa_blocks
        if extra_properties not in ("end", "anywhere"):
            raise ValueError("extra_properties must be 'end' or 'anywhere'")
        self.extra_anywhere = extra_properties == "anywhere"
        # property_order="any": members in any order, each key at most once (see .property_order)
        self.any_order = check_order(property_order) == "any"
        self.any_order_limit = int(any_order_limit)
        self.any_order_max_states = int(any_order_max_states)
        self.report.unique_keys = self.any_order
        self.draft = doc.draft
        self.plain_integers = doc.plain_integers
        # generation hygiene: taken by compile_json_schema on the whole document (see .hygiene)
        self.hygiene = resolve_hygiene(hygiene)
        # the document's $id / $anchor index (shared with the grammar compiler and the combiner)
        self.by_uri, self.base_of, self.root_base = doc.by_uri, doc.base_of, doc.root_base
        self.resolve = doc.resolve
        self._ref_stack: list = []
        self._memo: dict = {}
        self._any: dict = {}
        self.sep = ir.seq(self.ws, lit(", " if self.dumps else ","), self.ws)
        self.colon = ir.seq(self.ws, lit(": " if self.dumps else ":"), self.ws)

    # ---------------------------------------------------------------- errors and lenient mode
    def unsupported(self, keyword: str, ptr: str, why: str) -> None:
        """Raise Unsupported, or record the keyword as ignored in lenient mode."""
        if not self.lenient:
            raise Unsupported(f"JSON Schema keyword '{keyword}': {why}", f"#{ptr}/{keyword}")
        self.report.ignored.append((keyword, f"#{ptr}", why))
        self.report.exact = False

    # ---------------------------------------------------------------- building blocks
    def check_time(self) -> float | None:
        """The seconds left before ``time_limit`` (None: no limit); raises :class:`LimitExceeded`
        past it."""
        if self.deadline is None:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise LimitExceeded("JSON Schema compilation ran out of time", "time_limit", self.time_limit)
        return left

    def block(self, node: ir.Node) -> ir.Node:
        """``node`` built into a minimal DFA now and embedded.

        Containers repeat their member languages (``m (, m)*``), so a tree-shaped IR doubles per
        nesting level before minimisation; building each container level on its own keeps every
        subset construction within a small factor of the minimal automaton.
        """
        if not self.dfa_blocks or isinstance(node, ir.Embed) or node == ir.NOTHING:
            return node
        left = self.check_time()
        dfa = build_dfa(node, max_states=self.max_states, time_limit=left)
        if dfa.is_empty():
            return ir.NOTHING
        return embedded(dfa)  # one node per language: the IR around it stays a cache key

    def any_value(self, depth: int | None = None) -> ir.Node:
        """Every JSON value nested at most ``depth`` levels (numbers with exponents included)."""
        return self.any_value_at(self.any_depth if depth is None else depth, False)

    def universe(self) -> ir.Node:
        """The universe complements are taken in: as :meth:`any_value`, numbers exponent-free."""
        return self.any_value_at(self.any_depth, True)

    def any_value_at(self, depth: int, plain: bool) -> ir.Node:
        key = (depth, plain, self.ws, self.dumps, self.dfa_blocks)
        hit = _ANY_CACHE.get(key)
        if hit is not None:
            replay(hit[1])  # charge a work budget as building it would (deterministic engine choice)
            return hit[0]
        with recording() as rec:
            scalars = [lit("null"), lit("true"), lit("false"),
                       json_numbers.PLAIN_NUMBER if plain else json_numbers.NUMBER, self.string_node()]
            if depth > 0:
                inner = self.any_value_at(depth - 1, plain)
                member = ir.seq(self.key_node(), self.colon, inner)
                scalars.append(self.container("{", "}", ir.seq(member, ir.Repeat(ir.seq(self.sep, member), 0, None)),
                                              True))
                scalars.append(self.container("[", "]", ir.seq(inner, ir.Repeat(ir.seq(self.sep, inner), 0, None)),
                                              True))
            node = self.block(ir.alt(*scalars))
        _ANY_CACHE.put(key, (node, rec.tree))
        return node

    def string_node(self) -> ir.Node:
        return any_string("value")

    def key_node(self) -> ir.Node:
        return any_string("key")

    def container(self, open_: str, close: str, nonempty: ir.Node, allow_empty: bool) -> ir.Node:
        """``open ws close`` and/or ``open ws nonempty ws close``, with no doubled whitespace run."""
        parts = []
        if allow_empty:
            parts.append(ir.seq(lit(open_), self.ws, lit(close)))
        if nonempty != ir.NOTHING:
            parts.append(ir.seq(lit(open_), self.ws, nonempty, self.ws, lit(close)))
        return ir.alt(*parts)

    def compile_exact(self, schema, ptr: str, base: str) -> Lang:
        """Compile a sub-schema that will be complemented: extra properties allowed anywhere, so
        that objects with one declared property stay exact."""
        saved = self.extra_anywhere
        self.extra_anywhere = True
        try:
            return self.compile(schema, ptr, base)
        finally:
            self.extra_anywhere = saved

    def negate(self, lang: Lang, keyword: str, ptr: str):
        """The complement of ``lang`` within the universe, or None (lenient) when it is not exact."""
        if not lang.exact:
            self.unsupported(keyword, ptr, "needs the complement of a sub-schema that can only be matched "
                                           "approximately (properties in declared order, a format, a cut recursion)")
            return None
        return Lang(ir.And((self.universe(), ir.Not(lang.node))))

    # ---------------------------------------------------------------- main entry
    def compile(self, schema, ptr: str = "", base: str | None = None) -> Lang:
        if base is None:
            base = self.base_of.get(id(schema), self.root_base) if isinstance(schema, dict) else self.root_base
        if schema is True or schema == {}:
            return Lang(self.any_value())
        if schema is False:
            return NOTHING
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(schema).__name__}", ptr)
        key = (id(schema), self.extra_anywhere)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is schema:
            return hit[1]
        n_trunc = len(self.report.truncated)
        base = self.base_of.get(id(schema), base)
        result = self._compile_dict(schema, ptr, base)
        if len(self.report.truncated) == n_trunc:
            self._memo[key] = (schema, result)
        return result

    def _compile_dict(self, s: dict, ptr: str, base: str) -> Lang:
        if always_false(s, self.draft):
            return NOTHING
        # Object languages that get intersected must not fix where extra properties go (each
        # would force its own keys first): under a conjunction, extras may appear anywhere.
        conj = ("allOf" in s or "if" in s or "dependentSchemas" in s or "dependencies" in s
                or ("$ref" in s and self.draft != "draft7" and any(k in TYPE_KEYWORDS or k in APPLICATORS
                                                                   for k in s)))
        if conj and not self.extra_anywhere:
            return self.compile_exact(s, ptr, base)
        if self.draft == "draft7" and has_content(s):  # draft-07 may assert content (see .content)
            plain = content_as_keywords(s)
            if not isinstance(plain, dict):
                self.unsupported(refused_keyword(s), ptr,
                                 "decoded content other than base64 alone is not a regular constraint")
                plain = {k: v for k, v in s.items() if k not in CONTENT_KEYWORDS}  # lenient: ignored
            return self._compile_dict(plain, ptr, base)
        for k in s:
            if k in UNSUPPORTED:
                if k == "unevaluatedProperties" and s[k] is True or k == "unevaluatedItems" and s[k] is True:
                    continue
                self.unsupported(k, ptr, "not supported")
        parts: list[Lang] = []
        if "$ref" in s:
            parts.append(self.ref(s["$ref"], ptr, base))
            if self.draft == "draft7":  # draft-07: $ref overrides its siblings
                return parts[0]
        if "enum" in s or "const" in s:
            # the values are concrete: filter them by ``type`` and only intersect with the
            # type-directed language when other type-specific keywords are present
            parts.append(self.enum_const(s, ptr))
            if any(k in TYPE_KEYWORDS for k in s):
                parts.append(self.typed(s, ptr, base))
        elif "type" in s or any(k in TYPE_KEYWORDS for k in s) or not has_applicator(s):
            parts.append(self.typed(s, ptr, base))
        # else: no type keyword, so the type-directed part is every value: an intersection with it
        # costs a product and only cut the other parts' nesting at the free-form depth
        comb = Combinators.read(s, ptr)
        for i, sub in enumerate(comb.all_of):
            parts.append(self.compile(sub, f"{ptr}/allOf/{i}", base))
        if comb.any_of is not None:
            subs = [self.compile(x, f"{ptr}/anyOf/{i}", base) for i, x in enumerate(comb.any_of)]
            parts.append(Lang(ir.alt(*[x.node for x in subs]), all(x.exact for x in subs)))
        if comb.one_of is not None:
            parts.append(self.one_of(comb.one_of, ptr, base))
        if comb.has_not:
            inner = self.compile_exact(comb.not_, f"{ptr}/not", base)
            neg = self.negate(inner, "not", ptr)
            if neg is not None:
                parts.append(neg)
        if comb.has_if:
            parts.append(self.if_then_else(comb, ptr, base))
        if not parts:  # only a `not` ignored (lenient): every value
            parts.append(self.typed(s, ptr, base))
        return and_langs(parts)

    def ref(self, ref, ptr: str, base: str) -> Lang:
        if not isinstance(ref, str):
            raise SchemaError("$ref must be a string", ptr)
        target, tbase = self.resolve(ref, base, ptr)
        depth = sum(1 for t in self._ref_stack if t is target)
        if depth >= self.max_rec:
            if self.recursion == "error":
                raise LimitExceeded(f"recursive $ref {ref!r} at {ptr or '#'} nests deeper than the bound",
                                    "max_recursion_depth", self.max_rec)
            self.report.truncated.append(ptr or "#")
            self.report.exact = False
            return Lang(ir.NOTHING, False)
        self._ref_stack.append(target)
        try:
            if isinstance(target, dict) and any(t is target for t in self._ref_stack[:-1]):
                # inside a cycle: results depend on the unrolling depth, so bypass the memo
                mk = (id(target), self.extra_anywhere)
                saved = self._memo.pop(mk, None)
                out = self.compile(target, f"{ptr}/$ref", tbase)
                self._memo.pop(mk, None)
                if saved is not None:
                    self._memo[mk] = saved
                return out
            return self.compile(target, f"{ptr}/$ref", tbase)
        finally:
            self._ref_stack.pop()

    # ---------------------------------------------------------------- type-directed part
    def typed(self, s: dict, ptr: str, base: str) -> Lang:
        t = s.get("type")
        if t is None:
            types = set(TYPES)
            types.add("integer")
        else:
            tl = t if isinstance(t, list) else [t]
            for x in tl:
                if x not in TYPES and x != "integer":
                    if x == "any":
                        return Lang(self.any_value())
                    raise SchemaError(f"unknown type {x!r}", f"{ptr}/type")
            types = set(tl)
        parts = []
        if "null" in types:
            parts.append(Lang(lit("null")))
        if "boolean" in types:
            parts.append(Lang(ir.alt(lit("true"), lit("false"))))
        if "number" in types or "integer" in types:
            parts.append(self.number(s, ptr, integer="number" not in types))
        if "string" in types:
            parts.append(self.string(s, ptr, base))
        if "object" in types:
            parts.append(self.object(s, ptr, base))
        if "array" in types:
            parts.append(self.array(s, ptr, base))
        return Lang(ir.alt(*[p.node for p in parts]), all(p.exact for p in parts))

    def number(self, s: dict, ptr: str, integer: bool) -> Lang:
        f = NumberFacets.read(s, ptr)
        if f.unbounded:
            if integer and self.plain_integers:
                return Lang(json_numbers.PLAIN_INTEGER)
            return Lang(json_numbers.INTEGER if integer else json_numbers.NUMBER)
        signed = None if integer or f.multiple_of is not None else \
            json_numbers.sign_interval(f.lo, f.lo_x, f.hi, f.hi_x)
        if signed is not None:
            return Lang(signed)
        node = json_numbers.number_interval(f.lo, f.lo_x, f.hi, f.hi_x, integer=integer)
        if integer and self.plain_integers:
            node = ir.And((node, json_numbers.PLAIN_INTEGER))
        if f.multiple_of is not None:
            node = ir.And((node, json_numbers.multiple_of_node(f.multiple_of, self.max_mult_states,
                                                               f"{ptr}/multipleOf")))
        return Lang(node)

    def string(self, s: dict, ptr: str, base: str) -> Lang:
        f = StringFacets.read(s, ptr)
        conds = []
        exact = True
        lo, hi = f.min_length, f.max_length
        if lo or hi is not None:
            conds.append(ir.Repeat(ir.ANY_CHAR, int(lo), None if hi is None else int(hi)))
        if f.has_pattern:
            conds.append(self.pattern(f.pattern, f"{ptr}/pattern"))
        fmt = f.format
        if isinstance(fmt, str):
            if fmt in json_formats.NOT_REGULAR:
                self.unsupported("format", ptr, f"format {fmt!r} is not a regular language")
            else:
                f = json_formats.format_ir(fmt)
                if f is not None:
                    conds.append(f)
                    exact = fmt in json_formats.EXACT
        if not conds:
            return Lang(self.string_node())
        body = conds[0] if len(conds) == 1 else ir.And(tuple(conds))
        return Lang(ir.seq(lit('"'), encode(body, "value"), lit('"')), exact)

    def pattern(self, pattern, ptr: str) -> ir.Node:
        """Decoded-text IR of the strings in which ECMA regex ``pattern`` finds a match."""
        if not isinstance(pattern, str):
            raise SchemaError("pattern must be a string", ptr)
        return pattern_search_ir(pattern, ptr)

    # ---------------------------------------------------------------- enum / const
    def enum_const(self, s: dict, ptr: str) -> Lang:
        values = EnumConst.read(s, ptr).values
        strings = [v for v in values if isinstance(v, str)]
        numbers = [v if isinstance(v, int) else json_numbers.to_decimal(v) for v in values if is_number(v)]
        langs = [self.value_literal(v) for v in values if not isinstance(v, str) and not is_number(v)]
        nodes = [x.node for x in langs]
        if numbers:
            # one trie automaton for all the numbers too (an interval automaton per number took
            # milliseconds each)
            nodes.insert(0, json_numbers.number_constants(numbers))
        if strings:
            longest = max(map(len, strings))
            if longest > self.max_states:  # a state per code point at least: refused before building
                raise LimitExceeded(f"a string of {longest} code points in enum/const at #{ptr} needs more "
                                    f"DFA states than allowed", "max_states", self.max_states)
            # one trie automaton for all the strings (exact, and far cheaper than an NFA
            # alternative per escaped character for long enums)
            nodes.insert(0, literal_set_node(strings, "value"))
        return Lang(ir.alt(*nodes), all(x.exact for x in langs))

    def value_literal(self, v) -> Lang:
        """Every serialisation (within the universe) of the JSON value ``v``."""
        if v is None:
            return Lang(lit("null"))
        if v is True:
            return Lang(lit("true"))
        if v is False:
            return Lang(lit("false"))
        if is_number(v):
            d = json_numbers.to_decimal(v)
            return Lang(json_numbers.number_constant(d))
        if isinstance(v, str):
            return Lang(ir.seq(lit('"'), encode(ir.literal(v) if v else ir.EMPTY, "value"), lit('"')))
        if isinstance(v, list):
            items = [self.value_literal(x) for x in v]
            if not items:
                return Lang(self.container("[", "]", ir.NOTHING, True))
            body = [items[0].node]
            for x in items[1:]:
                body += [self.sep, x.node]
            return Lang(self.container("[", "]", ir.seq(*body), False), all(x.exact for x in items))
        if isinstance(v, dict):
            if not v:
                return Lang(self.container("{", "}", ir.NOTHING, True))
            members = []
            exact = len(v) <= 1
            for k, x in v.items():
                xl = self.value_literal(x)
                exact = exact and xl.exact
                if members:
                    members.append(self.sep)
                members += [self.key_literal(k), self.colon, xl.node]
            return Lang(self.container("{", "}", ir.seq(*members), False), exact)
        raise SchemaError(f"not a JSON value: {v!r}")

    def key_literal(self, k: str) -> ir.Node:
        if _PLAIN_KEY.fullmatch(k):  # printable ASCII: written only raw in "key" mode
            return ir.literal(f'"{k}"')
        return ir.seq(lit('"'), encode(ir.literal(k) if k else ir.EMPTY, "key"), lit('"'))

    # ---------------------------------------------------------------- applicators
    def one_of(self, subs: list, ptr: str, base: str) -> Lang:
        langs = [self.compile(x, f"{ptr}/oneOf/{i}", base) for i, x in enumerate(subs)]
        if len(langs) == 1:
            return langs[0]
        shapes = [self.shape(x, base) for x in subs]
        disjoint = all(shapes_disjoint(shapes[i], shapes[j]) for i in range(len(subs)) for j in range(i + 1, len(subs)))
        if disjoint:
            return Lang(ir.alt(*[x.node for x in langs]), all(x.exact for x in langs))
        negs = []
        for i, x in enumerate(langs):
            x = self.compile_exact(subs[i], f"{ptr}/oneOf/{i}", base)
            neg = self.negate(x, "oneOf", ptr)
            if neg is None:  # lenient: oneOf treated as anyOf
                return Lang(ir.alt(*[x.node for x in langs]), False)
            negs.append(neg)
        branches = []
        for i, x in enumerate(langs):
            others = [negs[j].node for j in range(len(langs)) if j != i and not shapes_disjoint(shapes[i], shapes[j])]
            branches.append(ir.And((x.node, *others)) if others else x.node)
        return Lang(ir.alt(*branches), True)

    def if_then_else(self, comb: Combinators, ptr: str, base: str) -> Lang:
        cond = self.compile_exact(comb.if_, f"{ptr}/if", base)
        then = self.compile_exact(comb.then, f"{ptr}/then", base)
        els = self.compile_exact(comb.else_, f"{ptr}/else", base)
        neg = self.negate(cond, "if", ptr)
        if neg is None:
            return Lang(self.any_value(), False)
        node = ir.alt(ir.And((cond.node, then.node)), ir.And((neg.node, els.node)))
        return Lang(node, then.exact and els.exact)

    def shape(self, s, base: str, depth: int = 0):
        """A cheap semantic summary for disjointness: (possible types, {required key: const values})."""
        if s is True or s == {}:
            return (frozenset(TYPES) | {"integer"}, {})
        if always_false(s, self.draft):
            return (frozenset(), {})
        if not isinstance(s, dict):
            return (frozenset(TYPES) | {"integer"}, {})
        if "$ref" in s and depth < 8:
            try:
                target, tbase = self.resolve(s["$ref"], self.base_of.get(id(s), base), "")
                inner = self.shape(target, tbase, depth + 1)
            except Exception:
                inner = (frozenset(TYPES) | {"integer"}, {})
        else:
            inner = (frozenset(TYPES) | {"integer"}, {})
        types = set(inner[0])
        t = s.get("type")
        if t is not None:
            tl = set(t if isinstance(t, list) else [t])
            if "number" in tl:
                tl.add("integer")
            types &= tl
        if "const" in s or "enum" in s:
            vals = [s["const"]] if "const" in s else (s["enum"] if isinstance(s["enum"], list) else [])
            types &= {json_type(v) for v in vals} | ({"number"} if any(json_type(v) == "integer" for v in vals) else set())
        discr = dict(inner[1])
        props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
        req = s.get("required") if isinstance(s.get("required"), list) else []
        for k in req:
            vals = self._finite_values(props.get(k), base, depth)
            if vals is not None:
                discr[k] = vals
        return (frozenset(types), discr)

    def _finite_values(self, s, base: str, depth: int):
        """A finite set of canonical values holding every value ``s`` accepts (its ``const`` /
        ``enum``, intersected across ``allOf`` members and through ``$ref``), or None."""
        if not isinstance(s, dict) or depth >= 8:
            return None
        sets = []
        if "const" in s:
            sets.append({canon(s["const"])})
        elif isinstance(s.get("enum"), list):
            sets.append({canon(v) for v in s["enum"]})
        parts = list(s["allOf"]) if isinstance(s.get("allOf"), list) else []
        if "$ref" in s:
            try:
                parts.append(self.resolve(s["$ref"], self.base_of.get(id(s), base), "")[0])
            except Exception:
                pass
        for x in parts:
            v = self._finite_values(x, base, depth + 1)
            if v is not None:
                sets.append(set(v))
        if not sets:
            return None
        return list(set.intersection(*sets))


def shapes_disjoint(a, b) -> bool:
    """Can no value have both shapes (see :meth:`RegularCompiler.shape`)?"""
    ta, da = a
    tb, db = b
    ta = set(ta) | ({"integer"} if "number" in ta else set())
    tb = set(tb) | ({"integer"} if "number" in tb else set())
    if not (ta & tb):
        return True
    if ta & tb <= {"object"} or not (ta & tb - {"object"}):
        for k in set(da) & set(db):
            if not set(da[k]) & set(db[k]):
                return True
    return False


# ---------------------------------------------------------------- public API
def compile_json_schema(schema, **options) -> SchemaReport:
    """Compile ``schema`` (dict, bool, JSON text or a :class:`SchemaDocument`); the IR is
    ``report.grammar``.

    Options: ``whitespace="compact"|"flexible"|"dumps"`` (dumps: exactly ``json.dumps``' ", " and ": "), ``max_whitespace=16`` (longest whitespace run in
    flexible mode), ``lenient=False``, ``max_recursion_depth=3``, ``recursion="unroll"|"error"``,
    ``any_depth=3`` (nesting bound of free-form values), ``unique_items_limit=6``,
    ``draft=None|"2020-12"|"draft7"`` (default: from ``$schema``), ``max_schema_depth=10000``
    (sub-schema nesting, ``$ref`` hops included; deeper raises :class:`LimitExceeded`, see
    :mod:`.checks`), ``hygiene=None`` (generation restrictions: True, a dict or a
    :class:`.hygiene.JsonHygiene`; the language is then the exact one intersected with them, and
    ``report.hygiene`` lists them).  Keyword values of the wrong type raise :class:`SchemaError` at
    their pointer.
    """
    return call_deep(_compile_json_schema, schema, options)


def _compile_json_schema(schema, options) -> SchemaReport:
    schema = parse_json_text(schema)
    options = with_hygiene(regular_options(options))
    if options.get("hygiene") is not None:
        options.setdefault("extra_properties", options["hygiene"].extra_properties)
    c = RegularCompiler(schema, **options)
    lang = c.compile(c.root, "")
    c.report.grammar = lang.node
    if c.hygiene is not None:
        # exact language ∩ H, on the whole document: after every complement (see .hygiene)
        h = c.hygiene.for_schema(c.root)
        c.report.hygiene = h.describe()
        if lang.node != ir.NOTHING:
            c.report.grammar = ir.And((lang.node, lexical_node(h)))
    c.report.exact = c.report.exact and lang.exact
    return c.report


def schema_to_ir(schema, **options) -> ir.Node:
    """The IR of the JSON texts valid under ``schema``; see :func:`compile_json_schema` for options."""
    return compile_json_schema(schema, **options).grammar
