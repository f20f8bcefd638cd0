"""JSON Schema -> context-free grammar (:class:`structgen.cfg.CFG`) for the grammar engine.

Why: one DFA per schema blows up (optional properties in declared order, free-form values nested
``any_depth`` deep, recursion unrolled).  Here the *structure* of a schema becomes rules and only
its *leaves* become regular terminals, compiled by the regular compiler
(:class:`structgen.frontends.json_schema.regular.RegularCompiler`), so every leaf keeps its exact language.

What becomes what:
- terminals: strings / numbers / booleans / null with all their keywords, ``enum``/``const``, keys,
  punctuation;
- a sub-schema using a keyword that needs intersection or complement (``not``, non-disjoint
  ``oneOf``, ``if``/``then``/``else``, ``allOf`` that does not merge, ``dependentSchemas``,
  ``propertyNames``, ``contains``, counted ``min/maxProperties``...) becomes a Boolean formula over
  its parts, compiled by :mod:`.combine`: scalars as small automata, objects and arrays
  as automata over members / elements whose values are formulas again (any depth, recursion
  included).  Where that does not apply (``uniqueItems``, too many value classes...) and the
  sub-schema does not recurse, it is compiled whole, exactly as the regular path does, and becomes
  one terminal (free-form values in it nest at most ``any_depth`` deep);
- rules: objects (declared properties in declared order, optional ones optional, required ones
  enforced, required keys that ``properties`` does not place in any order (up to 3 of them), extra properties -- ``additionalProperties`` / ``patternProperties`` with key
  terminals that exclude the declared names -- allowed in any gap), arrays (``prefixItems`` /
  ``items`` / ``min/maxItems`` as rule chains, unbounded tails as recursion), ``anyOf``, disjoint
  ``oneOf``, ``type`` lists, free-form values (the unbounded JSON grammar) and ``$ref``: one
  nonterminal per referenced schema, so recursion is exact;
- ``allOf`` and ``$ref`` with sibling keywords are merged into one schema where the merge is exact
  (see :func:`Merger`), else the sub-schema goes the regular way (if it does not recurse).

The object rules are linear in the number of properties and unambiguous: with members
``m_1..m_n`` and extra members ``X``::

    OBJ -> "{" S "}"        S   -> X T_1 | Q_1         Q_i -> m_i T_{i+1} | Q_{i+1} (m_i optional)
    T_i -> "," X T_i | R_i   R_i -> "," m_i T_{i+1} | R_{i+1} (m_i optional)      Q/R_{n+1} -> ε

Layout: ``whitespace="compact"`` puts nothing between lexemes; ``"flexible"`` prefixes every
terminal with a run of at most ``max_whitespace`` JSON whitespace characters and allows one after
the value, so whitespace goes exactly where JSON allows it (never inside a string or a number, which
are single lexemes), and a run stays bounded (an ignore terminal could repeat without bound).

Recursive sub-schemas under ``not``/``oneOf``/``if``... that :mod:`.combine` does
not take raise :class:`Unsupported` naming the keyword and its JSON pointer (``lenient=True``: the
keyword is ignored and reported).

Layout: object rules are :mod:`.cfg_objects`, schema rewriting and merging :mod:`.merge`, the
"other keys" automaton :mod:`.keys`; the document (draft, ``$ref``, recursion) is the reader's
(:mod:`.reader`), shared with the leaf compiler.
"""
from __future__ import annotations

import itertools

from structgen.automaton import ir
from structgen.cfg.grammar import CFG, nullable, trim
from structgen.errors import GrammarError, LimitExceeded, SchemaError, Unsupported

from . import numbers as json_numbers
from .cfg_objects import ObjectRules
from .combine import Combiner, Fallback
from .content import (CONTENT_KEYWORDS, content_as_keywords, has_content, json_text_pieces, json_text_split,
                      refused_keyword)

from .hygiene import lexical_node, resolve_hygiene, with_hygiene
from .keywords import ALL_TYPES, UNSUPPORTED
from .language import WS_CHARS
from .merge import (SCALAR_ALLOF, SCALAR_KEYWORDS, NOT_CONSTRAINING, Merger, NotMergeable, objects_disjoint,
                    regular_only, rewrite, wholesale_types)
from ..deep import call_deep
from .options import grammar_options, parse_json_text
from .reader import always_false, as_list
from .records import ArrayFacets
from .regular import RegularCompiler, shapes_disjoint
from .report import SchemaReport
from .strings import encode
from .values import is_count

_SCALARS = ("null", "boolean", "number", "integer", "string")
#: terminal hints of pieces that are not whole values: keys (never capped), long-string chunks
PIECES = frozenset({"key", "xkey", "chunk", "tail", "'\"'"})


def _inline_units(rules: dict, start: str) -> dict:
    """Rules with unit nonterminals (``A -> B`` as the only alternative) replaced by ``B``: fewer
    Earley items per lexeme, the same language."""
    alias = {a: alts[0][0] for a, alts in rules.items() if a != start and len(alts) == 1 and len(alts[0]) == 1}

    memo: dict = {}  # x -> the end of its alias chain, for chains without a cycle

    def final(x):
        r = memo.get(x)
        if r is not None:
            return r
        if x not in alias:
            return x
        path, seen, y = [], set(), x
        while y in alias and y not in seen:
            r = memo.get(y)
            if r is not None:
                break
            seen.add(y)
            path.append(y)
            y = alias[y]
        else:
            if y in seen:  # on a unit cycle: some member of it (the cycle derives nothing; trim drops it)
                return y
            r = y
        for z in path:
            memo[z] = r
        return r

    out = {}
    for a, alts in rules.items():
        if a in alias:
            f = final(a)
            if f != a and (a in memo or f not in _unit_cycle(alias, a)):
                continue  # (a memoised chain has no cycle)
        out[a] = [tuple([final(s) for s in rhs]) for rhs in alts]
    return out


def _unit_cycle(alias: dict, a: str) -> set:
    """The aliases on a unit cycle through ``a`` (empty when there is none)."""
    path, x = [], a
    while x in alias and x not in path:
        path.append(x)
        x = alias[x]
    return set(path) if x == a else set()


def _is_literal(node) -> bool:
    return isinstance(node, ir.Seq) and all(isinstance(x, ir.CharSet) and len(x.ranges) == 1
                                            and x.ranges[0][0] == x.ranges[0][1] for x in node.items)


class LeafCompiler(RegularCompiler):
    """The regular compiler with string lengths capped: ``maxLength`` above ``max_string_length``
    counts as ``max_string_length`` (sound, not exact: a counted repetition costs ~20 DFA states
    per code point, so ``maxLength: 65535`` has no practical automaton).  Plain long strings do
    not get here: :meth:`CfgSchemaCompiler.long_string` counts them in chunks."""

    max_string_length = 256

    def string(self, s: dict, ptr: str, base: str):
        hi = s.get("maxLength")
        if isinstance(hi, (int, float)) and not isinstance(hi, bool) and hi > self.max_string_length \
                and s.get("minLength", 0) <= self.max_string_length:
            s = dict(s, maxLength=self.max_string_length)
            self.report.exact = False
            self.report.truncated.append(f"#{ptr}/maxLength")
        return super().string(s, ptr, base)


def empty_language() -> Exception:
    """The grammar compiler's error for a schema that allows no value (exactly: recursion is not
    cut here); :mod:`.select` names the sub-schema that empties it."""
    e = grammar_only(Unsupported("the schema allows no value (the grammar engine needs a non-empty language)", "#"))
    e.empty_language = True
    return e


def grammar_only(e: Exception) -> Exception:
    """Mark ``e`` as a limit of the grammar compiler itself (recursion under a combinator, an empty
    language, a long array unrolled), one the regular compiler may not share.  Every other error
    of :func:`compile_json_schema_cfg` comes from the regular compiler on a sub-schema, which the
    regular compilation of the whole schema meets again (see :mod:`.select`)."""
    e.grammar_only = True
    return e


class CfgSchemaCompiler(ObjectRules):
    """Builds the :class:`CFG` of a schema; see the module docstring.  Options as
    :func:`compile_json_schema_cfg`."""

    def __init__(self, root, *, whitespace="compact", max_whitespace=16, lenient=False, draft=None,
                 time_limit=10.0, max_states=100_000, max_array_unroll=2048, max_string_length=256,
                 max_floating_permutations=3, property_order="declared", any_order_limit=1024, hygiene=None,
                 edge_whitespace=True, **regular_options):
        h = resolve_hygiene(hygiene)
        # hygiene: extra members after the declared ones, in the rules and in the regular leaves
        self.extras_last = h is not None and h.extra_properties == "end"
        self.rc = LeafCompiler(root, whitespace=whitespace, max_whitespace=max_whitespace, lenient=lenient,
                               draft=draft, time_limit=time_limit, max_states=max_states, recursion="error",
                               extra_properties="end" if self.extras_last else "anywhere",
                               property_order=property_order, any_order_limit=any_order_limit, **regular_options)
        self.any_order = self.rc.any_order      # members in any order (see structgen.frontends.json_schema.property_order)
        self.any_order_limit = int(any_order_limit)
        self.rc.max_string_length = int(max_string_length)
        self.doc = self.rc.doc      # the document read once, shared with the leaf compiler
        self.root = self.doc.root
        self.lenient = lenient
        self.report = self.rc.report
        # hygiene: every value terminal is intersected with H (see .hygiene), string values capped
        self.hygiene = h.for_schema(self.root) if h is not None else None
        self.lexical = lexical_node(self.hygiene) if h is not None else None
        self.string_cap = self.hygiene.max_string_length if h is not None else None
        if h is not None:
            self.report.hygiene = self.hygiene.describe()
        self.flexible = whitespace == "flexible"
        self.dumps = whitespace == "dumps"
        self.ws = ir.Repeat(WS_CHARS, 0, int(max_whitespace)) if self.flexible else None
        self.max_whitespace = int(max_whitespace)
        self.edge_whitespace = bool(edge_whitespace)
        self._raw_of: dict = {}     # terminal name -> its language without the whitespace run before it
        self.max_array_unroll = int(max_array_unroll)
        self.max_floating_permutations = int(max_floating_permutations)
        self.rules: dict = {}
        self.terminals: dict = {}
        self._term_by_node: dict = {}
        self._memo: dict = {}       # id(schema dict) -> (schema, symbol)
        self.kept: list = []       # merged dicts kept alive (their ids are memo keys)
        self._conjunctions: dict = {}  # ids of the parts -> (parts, {"allOf": parts}), see conjunction
        self._n = 0
        self._any = None
        self._combiner = None       # combine.Combiner, made on first use
        self._json_text = None      # the symbol of JSON text in a string (draft-07 content)

    # ------------------------------------------------------------------ symbols
    def fresh(self, hint: str) -> str:
        self._n += 1
        return f"{hint}#{self._n}"

    def term(self, node: ir.Node, hint: str = "t", ws: bool = True) -> str:
        """The terminal name of a regular language (deduplicated); ``None`` for the empty language.
        ``ws=False``: no whitespace before it (a piece of a longer lexical unit).  Under hygiene
        the language is intersected with ``H`` unless ``hint`` names a piece (:data:`PIECES`)."""
        if node == ir.NOTHING:
            return None
        if self.lexical is not None and hint not in PIECES and not _is_literal(node):
            node = ir.And((node, self.lexical))  # whole lexemes: numbers and strings as H allows
        raw = (node, ws)
        if raw in self._term_by_node:  # the same IR again: skip building its DFA
            return self._term_by_node[raw]
        if not isinstance(node, (ir.CharSet, ir.Embed)) and not _is_literal(node):
            # built now: an empty language (a contradiction inside a leaf) is found here, and
            # the engine then starts from a minimal DFA
            node = self.rc.block(node)
            if node == ir.NOTHING:
                return None
        lead = self.ws if ws else None
        key = node if lead is not None or self.ws is None else ("raw", node)
        name = self._term_by_node.get(key)
        if name is None:
            name = self.fresh(hint.upper())
            self._term_by_node[key] = name
            self.terminals[name] = ir.seq(lead, node) if lead is not None else node
            if lead is not None:
                self._raw_of[name] = node
        self._term_by_node[raw] = name
        return name

    def _without_lead(self, sym: str, memo: dict, empty: set) -> str:
        """A symbol for the language of ``sym`` without the whitespace run before its first
        lexeme (``edge_whitespace=False``): the first terminal of each left edge, raw.  A JSON
        value never derives the empty text, so the left edge is the first symbol of each
        alternative."""
        if sym in self.terminals:
            node = self._raw_of.get(sym)
            if node is None:
                return sym
            raw = self._term_by_node.get(("raw", node))
            if raw is None:
                raw = self.fresh(sym.split("#")[0])
                self._term_by_node[("raw", node)] = raw
                self.terminals[raw] = node
            return raw
        if sym in memo:
            return memo[sym]
        new = memo[sym] = self.fresh(sym.split("#")[0] + "^")
        alts = []
        for alt in self.rules[sym]:
            if not alt or alt[0] in empty:   # not met in the rules built here
                raise Unsupported(f"edge_whitespace=False: rule {sym} may start with an empty part", where="")
            alts.append((self._without_lead(alt[0], memo, empty),) + tuple(alt[1:]))
        self.rules[new] = alts
        return new

    def conjunction(self, parts) -> dict:
        """``{"allOf": parts}``, the same dict for the same sub-schema objects within one
        compilation: a value memoised by its dict then meets itself again where a recursive schema
        makes the same conjunction one level down (a property that also matches a pattern, or is
        merged from two conjuncts), instead of unrolling the recursion until the time limit."""
        key = tuple(id(p) for p in parts)
        hit = self._conjunctions.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], parts)):
            return hit[1]
        combo = {"allOf": list(parts)}
        self._conjunctions[key] = (tuple(parts), combo)  # the parts kept alive with their ids
        return combo

    def lit(self, s: str) -> str:
        if self.dumps and s in (",", ":"):
            s += " "  # json.dumps' separators
        return self.term(ir.literal(s), f"'{s}'")

    def rule(self, hint: str, alts) -> str:
        name = self.fresh(hint)
        self.rules[name] = [tuple(a) for a in alts if a is not None and None not in a]
        return name

    # ------------------------------------------------------------------ errors
    def unsupported(self, keyword: str, ptr: str, why: str) -> None:
        try:
            self.rc.unsupported(keyword, ptr, why)
        except Unsupported as e:
            raise grammar_only(e) from None

    # ------------------------------------------------------------------ entry
    def build(self) -> CFG:
        top = self.value(self.root, "", None)
        if top is None:
            raise empty_language()
        if self.ws is not None and not self.edge_whitespace:
            top = self._without_lead(top, {}, nullable(self.rules))
        alts = [(top,)]
        if self.ws is not None and self.edge_whitespace:
            # the trailing run is its own lexeme (no whitespace prefix of its own)
            self.terminals["WS$trail"] = ir.Repeat(WS_CHARS, 1, self.max_whitespace)
            alts.append((top, "WS$trail"))
        self.rules["$json"] = alts
        cfg = CFG("$json", _inline_units(self.rules, "$json"), self.terminals, [])
        cfg.validate()
        try:
            trim(cfg, validate=False, check_only=True)  # the language is not empty
        except GrammarError:
            # the grammar engine needs a non-empty language; the regular path represents this one
            raise empty_language() from None
        return cfg

    # ------------------------------------------------------------------ values
    def value(self, s, ptr: str, base) -> str | None:
        """The symbol of the values valid under ``s`` (None: no value is)."""
        if base is None:
            base = self.rc.base_of.get(id(s), self.rc.root_base) if isinstance(s, dict) else self.rc.root_base
        if s is True:
            return self.any_value()
        if always_false(s, self.rc.draft):
            return None
        if not isinstance(s, dict):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(s).__name__}", ptr)
        hit = self._memo.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        self.rc.check_time()
        base = self.rc.base_of.get(id(s), base)
        name = self.fresh("v")
        self._memo[id(s)] = (s, name)
        alts = self._dict_alts(s, ptr, base)
        self.rules[name] = [a for a in alts if a is not None and None not in a]
        return name

    def regular_terminal(self, s, ptr: str, base, keyword: str | None = None) -> list:
        """``s`` compiled whole the regular way, as one terminal (it must not recurse)."""
        if self.recursive(s, base):
            if keyword is None:
                keyword = next((k for k in s if regular_only(s, k)), "$ref")
            self.unsupported(keyword, ptr, "needs intersection or complement of a recursive sub-schema "
                                           "(only regular sub-schemas can be combined this way)")
            return self._dict_alts({k: v for k, v in s.items() if k != keyword}, ptr, base, regular_ok=False)
        try:
            lang = self.rc.compile(s, ptr, base)
        except LimitExceeded as e:
            if e.limit == "max_recursion_depth":
                self.unsupported(keyword or "$ref", ptr, "recursive sub-schema under a combinator")
                return []
            raise
        self.report.exact = self.report.exact and lang.exact
        return [(self.term(lang.node, "sub"),)]

    def combined(self, s, ptr: str, base, keyword: str | None = None) -> list:
        """``s`` through :mod:`.combine` (Boolean combinations of sub-schemas as
        grammar rules, objects and arrays as automata over members / elements); where that does
        not apply, the regular way (:meth:`_regular`).  A failed attempt leaves nothing behind."""
        if self._combiner is None:
            self._combiner = Combiner(self)
        cb = self._combiner
        marks = [(d, len(d)) for d in (self.rules, self._memo, self.terminals, self._term_by_node, cb.memo)]
        spent = cb.transitions
        try:
            sym = cb.schema_value(s, ptr, base)
        except (Fallback, Unsupported, LimitExceeded) as e:
            if isinstance(e, LimitExceeded) and e.limit == "time_limit":
                raise
            for d, n in marks:
                for k in list(itertools.islice(d, n, None)):
                    del d[k]
            if self._any is not None and self._any not in self.rules:
                self._any = None
            cb.transitions = spent
            return self.regular_terminal(s, ptr, base, keyword)
        # members in any order: the key guard removes duplicate keys, and its liveness check the
        # key prefixes that only used keys complete (else a model can start one: a dead end)
        self.report.unique_keys = True
        self.report.live_keys = True
        return [(sym,)] if sym is not None else []

    def _dict_alts(self, s: dict, ptr: str, base, regular_ok: bool = True) -> list:
        rc = self.rc
        if rc.draft == "draft7" and "$ref" in s:
            t, tb, _ = self.resolve_ref(s["$ref"], base, ptr)
            return [(self.value(t, f"{ptr}/$ref", tb),)]
        for k in s:
            if k in UNSUPPORTED and s[k] is not True:
                rc.unsupported(k, ptr, "not supported")
        if rc.draft == "draft7" and has_content(s):
            return self._content(s, ptr, base, regular_ok)
        s2 = rewrite(s)
        if s2 is not s:
            self.kept.append(s2)
            s = s2
        constraining = {k: v for k, v in s.items() if k not in NOT_CONSTRAINING}
        if set(constraining) == {"$ref"}:
            t, tb, _ = self.resolve_ref(s["$ref"], base, ptr)
            return [(self.value(t, f"{ptr}/$ref", tb),)]
        if "allOf" in s or "$ref" in s:
            try:
                merged = Merger(self, base, ptr).merge(s)
            except NotMergeable:
                merged = None
            if merged is not None:
                self.kept.append(merged)
                return self._dict_alts(merged, ptr, base, regular_ok)
            if regular_ok:
                return self.combined(s, ptr, base, "allOf" if "allOf" in s else "$ref")
        if any(regular_only(s, k) for k in s):
            if regular_ok:
                return self.combined(s, ptr, base)
            s = {k: v for k, v in s.items() if not regular_only(s, k)}  # lenient: reported already
        if "oneOf" in s:
            subs = as_list(s["oneOf"], "oneOf", ptr)
            rest = {k: v for k, v in s.items() if k != "oneOf"}
            narrowed = self.disjoint_rest(rest, subs, base, ptr)
            if narrowed is None:
                if regular_ok:
                    return self.combined(s, ptr, base, "oneOf")
                self.unsupported("oneOf", ptr, "branches that may overlap over a recursive sub-schema")
                narrowed = rest
            return self._distribute(narrowed, subs, "oneOf", ptr, base, regular_ok)
        if "anyOf" in s:
            subs = as_list(s["anyOf"], "anyOf", ptr)
            rest = {k: v for k, v in s.items() if k != "anyOf"}
            return self._distribute(rest, subs, "anyOf", ptr, base, regular_ok)
        if "enum" in s or "const" in s:
            # concrete values: a finite language, compiled whole (with any sibling keywords)
            return self.regular_terminal(s, ptr, base, "enum" if "enum" in s else "const")
        return self._typed(s, ptr, base)

    def _content(self, s: dict, ptr: str, base, regular_ok: bool) -> list:
        """Draft-07 ``contentEncoding`` / ``contentMediaType`` (see :mod:`.content`)."""
        plain = content_as_keywords(s)
        if isinstance(plain, dict):
            self.kept.append(plain)
            return self._dict_alts(plain, ptr, base, regular_ok)
        split = json_text_split(s) if plain == "json" else None
        if split is None:
            self.unsupported(refused_keyword(s), ptr, "only base64 alone or application/json alone (beside "
                                                      "no other string keyword) is decoded")
            split = ({k: v for k, v in s.items() if k not in CONTENT_KEYWORDS}, False)  # lenient: ignored
        others, strings = split
        alts = []
        if others is not None:
            self.kept.append(others)
            alts += self._dict_alts(others, ptr, base, regular_ok)
        if strings:
            alts.append((self.json_text(),))
        return alts

    def json_text(self) -> str:
        """The symbol of the JSON strings whose decoded text is a JSON text (RFC 8259)."""
        if self._json_text is not None:
            return self._json_text
        pieces = json_text_pieces()
        end = pieces.pop("end")
        t = {k: self.term(node, "chunk", ws=False) for k, node in pieces.items()}
        val, members, elems = self.fresh("jval"), self.fresh("jmembers"), self.fresh("jelems")
        self.rules[members] = [(t["string"], t[":"], val), (members, t[","], t["string"], t[":"], val)]
        self.rules[elems] = [(val,), (elems, t[","], val)]
        self.rules[val] = [(t["string"],), (t["number"],), (t["literal"],), (t["{"], t["}"]),
                           (t["{"], members, t["}"]), (t["["], t["]"]), (t["["], elems, t["]"])]
        # the outer quotes: whitespace may come before the opening one, the text's own after the value
        close = self.term(ir.seq(end, ir.literal('"')), "chunk", ws=False)
        v = self._json_text = self.rule("jtext", [(self.term(ir.literal('"'), "'\"'"), val, close)])
        return v

    def disjoint_rest(self, rest: dict, subs: list, base, ptr: str):
        """``rest`` (maybe narrowed by type) when no value can satisfy two branches taken together
        with it, else None.  Types that two branches accept wholesale (no keyword of theirs
        applies to them) satisfy both, so oneOf excludes them: they are cut from ``rest``."""
        if len(subs) < 2:
            return rest
        rc = self.rc
        shapes = [rc.shape(x, base) for x in subs]
        if all(shapes_disjoint(shapes[i], shapes[j]) for i in range(len(subs)) for j in range(i + 1, len(subs))):
            return rest
        for attempt in range(2):
            merged = []
            for b in subs:
                combo = {"allOf": [rest, b]}
                self.kept.append(combo)
                try:
                    merged.append(Merger(self, base, ptr).merge(combo))
                except NotMergeable:
                    return None
            self.kept += merged
            shapes = [rc.shape(m, base) for m in merged]
            if all(shapes_disjoint(shapes[i], shapes[j]) or objects_disjoint(merged[i], merged[j])
                   or self._values_disjoint(merged[i], merged[j], base)
                   for i in range(len(subs)) for j in range(i + 1, len(subs))):
                return rest
            if attempt:
                return None
            wholesale = [wholesale_types(m) for m in merged]
            cut = {t for t in ALL_TYPES if sum(t in w for w in wholesale) >= 2}
            if "number" in cut:
                cut.add("integer")
            if not cut:
                return None
            keep = sorted(ALL_TYPES - cut - ({"integer"} if "number" in cut else set()))
            rest = {"allOf": [rest, {"type": keep}]}
            self.kept.append(rest)
        return None

    def _values_disjoint(self, a: dict, b: dict, base) -> bool:
        """Object-only schemas that both require a key whose value schemas have no type in common."""
        ta, tb = a.get("type"), b.get("type")
        if ta is None or tb is None or not ({*(ta if isinstance(ta, list) else [ta])}
                                            | {*(tb if isinstance(tb, list) else [tb])}) <= {"object"}:
            return False
        pa, pb = a.get("properties") or {}, b.get("properties") or {}
        for k in set(a.get("required") or []) & set(b.get("required") or []):
            if k in pa and k in pb and shapes_disjoint(self.rc.shape(pa[k], base), self.rc.shape(pb[k], base)):
                return True
        return False

    def _distribute(self, rest: dict, subs: list, kw: str, ptr: str, base, regular_ok: bool) -> list:
        """rest ∩ (b_1 ∪ ... ∪ b_n) = (rest ∩ b_1) ∪ ... : one alternative per branch."""
        trivial = all(k in NOT_CONSTRAINING for k in rest)
        alts = []
        for i, b in enumerate(subs):
            where = f"{ptr}/{kw}/{i}"
            if trivial:
                alts.append((self.value(b, where, base),))
                continue
            combo = {"allOf": [rest, b]}
            self.kept.append(combo)
            try:
                merged = Merger(self, base, where).merge(combo)
            except NotMergeable:
                merged = None
            if merged is None:
                if regular_ok:
                    combo = {kw: subs, **rest}
                    self.kept.append(combo)
                    return self.combined(combo, ptr, base, kw)
                self.unsupported(kw, ptr, "a branch that cannot be merged with its sibling keywords "
                                          "over a recursive sub-schema")
                alts.append((self.value(b, where, base),))
                continue
            self.kept.append(merged)
            alts.append((self.value(merged, where, base),))
        return alts

    def _typed(self, s: dict, ptr: str, base) -> list:
        t = s.get("type")
        if t is None:
            types = set(ALL_TYPES)
            # keywords of one type do not make the others invalid
        else:
            tl = t if isinstance(t, list) else [t]
            for x in tl:
                if x not in ALL_TYPES:
                    if x == "any":
                        return [(self.any_value(),)]
                    raise SchemaError(f"unknown type {x!r}", f"{ptr}/type")
            types = set(tl)
        alts = []
        scalars = [x for x in _SCALARS if x in types]
        if "string" in scalars and SCALAR_ALLOF not in s:
            long = self.long_string(s, ptr)
            if long is not None:
                alts.append((long,))
                scalars.remove("string")
        if scalars:
            if t is None and not any(k in s for k in SCALAR_KEYWORDS) and SCALAR_ALLOF not in s:
                alts.append((self.scalar_any(),))
            elif SCALAR_ALLOF in s:
                sub = {"type": scalars, "allOf": s[SCALAR_ALLOF]}
                self.kept.append(sub)
                lang = self.rc.compile(sub, ptr, base)
                self.report.exact = self.report.exact and lang.exact
                alts.append((self.term(lang.node, "scalar"),))
            else:
                sub = {k: v for k, v in s.items() if k in SCALAR_KEYWORDS}
                sub["type"] = scalars
                self.kept.append(sub)
                lang = self.rc.typed(sub, ptr, base)
                self.report.exact = self.report.exact and lang.exact
                alts.append((self.term(lang.node, "scalar"),))
        if "object" in types:
            alts += self.object(s, ptr, base)
        if "array" in types:
            alts += self.array(s, ptr, base)
        return alts

    def long_string(self, s: dict, ptr: str):
        """Strings whose ``maxLength`` is past ``max_string_length`` (and no ``pattern`` or
        ``format``): the symbol of an exact grammar, or None (the regular compiler's string).

        One automaton counting to ``maxLength`` code points needs about 20 states per code point
        (65535: over a million), so the body is cut into chunks of exactly ``max_string_length``
        code points, counted by rules: ``B_k -> tail_k | CHUNK B_{k+1}`` with ``k`` chunks read,
        ``tail_k`` the last ``max(minLength - kC, 0)`` to ``min(C - 1, maxLength - kC)`` code points
        and the closing quote.  Chunks are exact-length lexemes, so every string has one parse."""
        cap = int(self.rc.max_string_length)
        lo, hi = s.get("minLength", 0), s.get("maxLength")
        if any(k in s for k in ("pattern", "format", "enum", "const")):
            return None
        if hi is None and self.string_cap is None:
            return None
        for kw, v in (("minLength", lo), ("maxLength", hi)):
            if v is not None and not is_count(v):
                raise SchemaError(f"{kw} must be a non-negative integer", f"{ptr}/{kw}")
        lo = int(lo)
        hi = self.string_cap if hi is None else int(hi)
        if self.string_cap is not None:
            hi = min(hi, self.string_cap)  # hygiene: rules are positive, so a lower bound is sound
        if hi <= cap or lo > hi:
            return None
        if hi // cap > 4096:
            return None  # the regular compiler caps it (reported)
        char = encode(ir.ANY_CHAR, "value")
        quote = ir.literal('"')
        chunk = self.term(ir.Repeat(char, cap, cap), "chunk", ws=False)
        name = self.fresh("longstr")
        body = [self.fresh("B") for _ in range(hi // cap + 1)]
        for k, b in enumerate(body):
            alts = []
            t_lo, t_hi = max(lo - k * cap, 0), min(cap - 1, hi - k * cap)
            if t_lo <= t_hi:
                alts.append((self.term(ir.seq(ir.Repeat(char, t_lo, t_hi), quote), "tail", ws=False),))
            if k + 1 < len(body) and hi - (k + 1) * cap >= 0:
                alts.append((chunk, body[k + 1]))
            self.rules[b] = alts
        self.rules[name] = [(self.term(quote, "'\"'"), body[0])]
        return name

    # ------------------------------------------------------------------ free-form values
    def scalar_any(self) -> str:
        return self.term(ir.alt(ir.literal("null"), ir.literal("true"), ir.literal("false"),
                                json_numbers.NUMBER, self.rc.string_node()), "scalar")

    def any_value(self) -> str:
        """Every JSON value, any depth."""
        if self._any is not None:
            return self._any
        v = self._any = "$any"
        key, colon, comma = self.term(self.rc.key_node(), "key"), self.lit(":"), self.lit(",")
        self.rules["$members"] = [(key, colon, v), ("$members", comma, key, colon, v)]
        self.rules["$elements"] = [(v,), ("$elements", comma, v)]
        self.rules[v] = [(self.scalar_any(),),
                         (self.lit("{"), self.lit("}")), (self.lit("{"), "$members", self.lit("}")),
                         (self.lit("["), self.lit("]")), (self.lit("["), "$elements", self.lit("]"))]
        return v

    # ------------------------------------------------------------------ arrays
    def array(self, s: dict, ptr: str, base) -> list:
        f = ArrayFacets.read(s, ptr)
        elems = [self.value(x, f.prefix_ptr(i), base) for i, x in enumerate(f.prefix)]
        rest = self.value(f.rest, f.rest_ptr, base)
        lo, hi = f.min_items, f.max_items
        k = len(elems)
        if rest is None:
            hi = k if hi is None else min(hi, k)
        for i, e in enumerate(elems):
            if e is None:
                hi = i if hi is None else min(hi, i)
                break
        if hi is not None and lo > hi:
            return []
        top = max(k, lo) + 1 if hi is None else hi
        if top - k > self.max_array_unroll:
            raise grammar_only(LimitExceeded(f"array bounds at #{ptr} unroll to {top} rule positions",
                                             "max_array_unroll", self.max_array_unroll))
        comma, lb, rb = self.lit(","), self.lit("["), self.lit("]")

        def elem(i):
            return elems[i - 1] if i <= k else rest

        # C_i: elements i.. each after a comma (i >= 2)
        nxt = None
        if hi is None:
            loop = self.fresh("C")
            self.rules[loop] = [(comma, rest, loop), ()]
            nxt = loop
            first_loop = max(k, lo) + 1
        else:
            first_loop = hi + 1
        chain = {}
        for i in range(first_loop - 1, 1, -1):
            alts = [(comma, elem(i), chain.get(i + 1, nxt) if i + 1 < first_loop else nxt)]
            if i > lo:
                alts.append(())
            chain[i] = self.rule("C", [tuple(y for y in a if y is not None) if a and a[-1] is None else a
                                       for a in alts])
        tail = chain.get(2, nxt) if 2 < first_loop else nxt
        out = []
        if lo == 0:
            out.append((lb, rb))
        if hi is None or hi >= 1:
            body = (lb, elem(1), tail, rb) if tail is not None else (lb, elem(1), rb)
            out.append(body)
        return out

    # ------------------------------------------------------------------ $ref and recursion
    def resolve_ref(self, ref, base, ptr):
        if not isinstance(ref, str):
            raise SchemaError("$ref must be a string", ptr)
        target, tbase = self.rc.resolve(ref, base, ptr)
        return target, tbase, ref

    def recursive(self, s, base) -> bool:
        """Does ``s`` reach a ``$ref`` cycle (so it has no regular language)?  The reader's answer."""
        return self.doc.recursive(s, base)


def compile_json_schema_cfg(schema, **options) -> SchemaReport:
    """Compile ``schema`` (dict, bool, JSON text or a :class:`.reader.SchemaDocument`) to a :class:`~structgen.cfg.CFG` (``report.grammar``).

    Options: ``whitespace="compact"|"flexible"|"dumps"``, ``max_whitespace=16``, ``lenient=False``,
    ``draft=None``, ``time_limit=10.0`` (seconds, for the regular leaves), ``max_states``,
    ``max_array_unroll=2048`` (bounded array lengths become rule chains up to this length),
    ``max_string_length=256`` (a string schema with a larger ``maxLength`` is counted in chunks of
    this many code points by rules, exactly; inside a leaf compiled as one automaton -- with a
    ``pattern`` or ``format``, under ``not`` / ``oneOf`` -- it is lowered to it: sound, reported in
    ``report.truncated``), ``max_floating_permutations=3`` (required keys that ``properties`` does
    not place -- from ``required`` alone, ``dependentRequired``, ``oneOf`` of ``required`` -- may
    come in any order when there are at most this many) and the
    leaf options of :func:`structgen.frontends.json_schema.regular.compile_json_schema` (``any_depth``,
    ``unique_items_limit``, ...; ``any_depth`` only bounds free-form values *inside* a regular
    leaf, e.g. under ``not``), ``hygiene=None`` (generation restrictions, see :mod:`.hygiene`:
    value terminals intersected with them, extra members after the declared ones),
    ``edge_whitespace=True`` (flexible layout: a whitespace run may also come before and after the
    document, as JSON text allows; False: only between lexemes, as the regular compiler puts it).
    """
    return call_deep(_compile_json_schema_cfg, schema, options)


def _compile_json_schema_cfg(schema, options) -> SchemaReport:
    schema = parse_json_text(schema)
    c = CfgSchemaCompiler(schema, **with_hygiene(grammar_options(options)))
    try:
        cfg = c.build()
        c.report.grammar = cfg
        return c.report
    finally:
        # the combiner refers back to its compiler: without this, the compiler and all it built
        # wait for a full garbage collection (which then pauses some later mask)
        c._combiner = None
