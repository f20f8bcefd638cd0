"""JSON Schema -> context-free grammar (:class:`structgen.cfg.CFG`) for the grammar engine.

Why: one DFA per schema blows up (optional properties in declared order, free-form values nested
``any_depth`` deep, recursion unrolled).  Here the *structure* of a schema becomes rules and only
its *leaves* become regular terminals, compiled by the regular compiler
(:class:`structgen.frontends.json_schema.regular._Compiler`), so every leaf keeps its exact language.

What becomes what:
- terminals: strings / numbers / booleans / null with all their keywords, ``enum``/``const``, keys,
  punctuation;
- a sub-schema using a keyword that needs intersection or complement (``not``, non-disjoint
  ``oneOf``, ``if``/``then``/``else``, ``allOf`` that does not merge, ``dependentSchemas``,
  ``propertyNames``, ``contains``, counted ``min/maxProperties``...) becomes a Boolean formula over
  its parts, compiled by :mod:`.json_schema_combine`: scalars as small automata, objects and arrays
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
  (see :func:`_Merger`), else the sub-schema goes the regular way (if it does not recurse).

The object rules are linear in the number of properties and unambiguous: with members
``m_1..m_n`` and extra members ``X``::

    OBJ -> "{" S "}"        S   -> X T_1 | Q_1         Q_i -> m_i T_{i+1} | Q_{i+1} (m_i optional)
    T_i -> "," X T_i | R_i   R_i -> "," m_i T_{i+1} | R_{i+1} (m_i optional)      Q/R_{n+1} -> ε

Layout: ``whitespace="compact"`` puts nothing between lexemes; ``"flexible"`` prefixes every
terminal with a run of at most ``max_whitespace`` JSON whitespace characters and allows one after
the value, so whitespace goes exactly where JSON allows it (never inside a string or a number, which
are single lexemes), and a run stays bounded (an ignore terminal could repeat without bound).

Recursive sub-schemas under ``not``/``oneOf``/``if``... that :mod:`.json_schema_combine` does
not take raise :class:`Unsupported` naming the keyword and its JSON pointer (``lenient=True``: the
keyword is ignored and reported).
"""
from __future__ import annotations

import itertools
import json

from structgen.automaton import ir
from structgen.automaton.build import on_clear
from structgen.cfg.grammar import CFG, trim
from structgen.errors import GrammarError, LimitExceeded, SchemaError, Unsupported

from . import regular as js
from .strings import encode

#: keywords whose meaning needs intersection/complement of whole values: compiled the regular way
_REGULAR_ONLY = ("not", "if", "dependentSchemas", "dependencies", "dependentRequired", "contains",
                 "uniqueItems", "propertyNames")
_OBJECT_KW = frozenset({"properties", "required", "additionalProperties", "patternProperties", "propertyNames",
                        "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies"})
_ARRAY_KW = frozenset({"items", "prefixItems", "additionalItems", "minItems", "maxItems", "contains",
                       "minContains", "maxContains", "uniqueItems"})
_SCALAR_KW = js._TYPE_KEYWORDS - _OBJECT_KW - _ARRAY_KW
_ALL_TYPES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})
_SCALARS = ("null", "boolean", "number", "integer", "string")
#: keywords without a constraint of their own (``then``/``else`` count only next to ``if``)
_ANNOT = js.ANNOTATIONS - {"additionalItems", "minContains", "maxContains"}
_SCALAR_ALLOF = "$structgen:scalarAllOf"
_KNOWN = (_OBJECT_KW | _ARRAY_KW | _SCALAR_KW | js.UNSUPPORTED
          | {"type", "enum", "const", "anyOf", "oneOf", "not", "if", "then", "else", _SCALAR_ALLOF})  # merged schemas: scalar keyword fragments that all apply


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


def _is_regular_only(s: dict, k: str) -> bool:
    """Is keyword ``k`` of ``s`` one that only the regular compiler can enforce?"""
    if k not in _REGULAR_ONLY:
        return False
    v = s[k]
    if k == "if":
        return "then" in s or "else" in s
    if k in ("propertyNames", "contains") and (v is True or v == {}):
        return k == "contains"
    if k == "uniqueItems":
        return v is True
    if k in ("dependentSchemas", "dependencies", "dependentRequired"):
        return bool(v)
    return True


_KEY_CHAR = None  # (A: the DFA of one encoded key code point, its 256-column rows mapped for other_keys_node)
_OTHER_KEYS: dict = {}  # sorted declared keys -> node (the oldest dropped first past _OTHER_KEYS_SIZE)
_OTHER_KEYS_SIZE = 1024
on_clear(_OTHER_KEYS.clear)


def _key_char():
    """``(A, rows)``: A the minimal DFA of the encodings of one code point in a JSON key
    (``encode_charset(ANY_CHAR, "key")``, a prefix code), ``rows[a, b]`` the state of
    :func:`other_keys_node`'s layout after byte ``b`` from A's state ``a`` outside the trie of
    declared keys (-1 dead, 2 the boundary state O, ``3 + a'`` A's state ``a'`` mid code point);
    None when A is not a prefix-code automaton starting at 0 (then the generic path is used)."""
    global _KEY_CHAR
    if _KEY_CHAR is None:
        import numpy as np

        from structgen.automaton.build import build_dfa
        from .strings import encode_charset

        a = build_dfa(encode_charset(ir.ANY_CHAR, "key"))
        t = np.asarray(a.transitions)[:, np.asarray(a.byte_class)].astype(np.int32)  # [nA, 256]
        acc = np.asarray(a.accepting, bool)
        ok = a.start == 0 and not acc[0] and not (t[acc] >= 0).any() and not (t == 0).any()
        rows = np.where(t < 0, -1, np.where(acc[np.maximum(t, 0)], 2, 3 + t)).astype(np.int32)
        _KEY_CHAR = (a, t, acc, rows) if ok else False
    return _KEY_CHAR or None


def other_keys_node(declared) -> ir.Node | None:
    """The IR (an embedded minimal DFA) of every JSON object key, quotes included, whose decoding
    is not one of ``declared``: ``"`` encode(Not(alt(literals)), "key") ``"``, built directly
    instead of by two subset constructions, a product and a difference per object (a millisecond
    and more each, most of a small schema's compile time).  The layout: the trie of the declared
    keys' code points; from a trie node, each code point to a child by its encodings (the byte
    trie of :func:`json_strings._gadget`), every other encoding of a code point (A, mid code point:
    A's own states) to the boundary state O, outside the trie, where anything goes; the closing
    quote from O and from trie nodes that are not a declared key.  Exact because the encodings
    form a prefix code and decoding is a function.  None when the generic path must be used."""
    import numpy as np

    from structgen.automaton.build import embedded
    from structgen.automaton.minimize import canonical_dfa
    from .strings import _SURROGATE, _gadget

    kc = _key_char()
    if kc is None:
        return None
    texts = tuple(sorted(set(declared)))
    hit = _OTHER_KEYS.get(texts)
    if hit is not None:
        return hit
    A, at, aacc, rows = kc
    nA = at.shape[0]
    # the trie of code points: children[u] = {code point: node}; end[u]: a declared key ends at u
    children: list = [{}]
    end = [False]
    for t in texts:
        if _SURROGATE.search(t):
            continue  # a lone surrogate is not a Unicode string: it excludes nothing (as ir.literal)
        u = 0
        for ch in t:
            c = ord(ch)
            v = children[u].get(c)
            if v is None:
                v = len(children)
                children[u][c] = v
                children.append({})
                end.append(False)
            u = v
        end[u] = True
    n_nodes = len(children)
    # states: 0 before the opening quote, 1 after the closing one, 2 = O, 3 + a = A's state a
    # (mid code point, outside the trie), then node u's entry E(u) = base + u, then gadget states
    base = 3 + nA
    simple_src, simple_byte, simple_dst = [], [], []
    extra_rows = []  # (row of A, [(byte, target)]) for gadget-internal states
    complex_entry = []  # (node, [(byte, target)])
    for u, ch in enumerate(children):
        simple = []
        hard = []
        for c, v in ch.items():
            if 0x20 <= c < 0x7F and c != 0x22 and c != 0x5C:
                simple.append((c, v))  # printable ASCII: its one encoding is its raw byte
            else:
                hard.append((c, v))
        for c, v in simple:
            simple_src.append(base + u)
            simple_byte.append(c)
            simple_dst.append(base + v)
        if hard:
            hard.sort()
            cps = tuple(c for c, _ in hard)
            kids = [base + v for _, v in hard]
            n_int, edges = _gadget(cps, "key")
            first = base + n_nodes + len(extra_rows)
            a_of = [0] + [-1] * n_int  # A's state at each gadget state (the walk from A's start)
            rows_of = [[] for _ in range(n_int + 1)]
            for src, byte, dst in edges:
                a2 = int(at[a_of[src], byte])
                if a2 < 0:
                    return None  # not A's language: do not guess
                if dst < 0:
                    if not aacc[a2]:
                        return None
                    rows_of[src].append((byte, kids[-dst - 1]))
                else:
                    if a_of[dst] not in (-1, a2) or aacc[a2]:
                        return None
                    a_of[dst] = a2
                    rows_of[src].append((byte, first + dst - 1))
            complex_entry.append((u, rows_of[0]))
            for g in range(1, n_int + 1):
                extra_rows.append((a_of[g], rows_of[g]))
    n = base + n_nodes + len(extra_rows)
    # byte classes: A's, with every byte written explicitly above (and the quote) a class of its own
    explicit = np.zeros(256, bool)
    explicit[0x22] = True
    explicit[simple_byte] = True
    for _, row in complex_entry + extra_rows:
        for byte, _ in row:
            explicit[byte] = True
    code = np.asarray(A.byte_class, np.int64) * 257 + np.where(explicit, np.arange(1, 257), 0)
    _, rep, bc = np.unique(code, return_index=True, return_inverse=True)
    bc = bc.reshape(256).astype(np.int32)
    crows = rows[:, rep]
    table = np.empty((n, rep.shape[0]), np.int32)
    q = bc[0x22]
    table[0] = -1
    table[0, q] = base
    table[1] = -1
    table[2] = crows[0]
    table[2, q] = 1
    table[3:base] = crows
    table[base:base + n_nodes] = crows[0]
    ends = np.array(end, bool)
    table[base + np.flatnonzero(~ends), q] = 1
    if simple_src:
        table[np.array(simple_src), bc[np.array(simple_byte)]] = np.array(simple_dst, np.int32)
    for u, row in complex_entry:
        for byte, dst in row:
            table[base + u, bc[byte]] = dst
    for i, (a, row) in enumerate(extra_rows):
        r = base + n_nodes + i
        table[r] = crows[a]
        for byte, dst in row:
            table[r, bc[byte]] = dst
    acc = np.zeros(n, bool)
    acc[1] = True
    node = embedded(canonical_dfa(table, acc, bc))
    if len(_OTHER_KEYS) >= _OTHER_KEYS_SIZE:
        try:
            _OTHER_KEYS.pop(next(iter(_OTHER_KEYS)))
        except (KeyError, RuntimeError, StopIteration):  # another thread got there first
            pass
    _OTHER_KEYS[texts] = node
    return node


def _is_literal(node) -> bool:
    return isinstance(node, ir.Seq) and all(isinstance(x, ir.CharSet) and len(x.ranges) == 1
                                            and x.ranges[0][0] == x.ranges[0][1] for x in node.items)


def _only(s, keyword: str) -> bool:
    return isinstance(s, dict) and keyword in s and all(k in _ANNOT for k in s if k != keyword)


def rewrite(s: dict) -> dict:
    """``s`` with keywords about which keys are present restated as ``allOf``/``anyOf`` of
    ``required`` and absent keys (``properties: {k: false}``), which the grammar can express
    exactly, recursion or not:

    - ``dependentRequired`` / array ``dependencies``: k absent, or k and its dependents present;
    - ``dependentSchemas`` / schema ``dependencies``: k absent, or k present and the schema holds;
    - ``not: {required: R}``: an object with some key of R absent;
    - ``oneOf`` of ``required``-only branches: branch i's keys present and, for every other
      branch j, some key of R_j \\ R_i absent (non-objects match every branch, so they are out).

    Returns ``s`` itself when nothing applies.
    """
    if not isinstance(s, dict):
        return s
    extra, drop = [], set()
    dep_req, dep_sch = {}, {}
    for kw in ("dependentRequired", "dependentSchemas", "dependencies"):
        v = s.get(kw)
        if isinstance(v, dict) and v:
            drop.add(kw)
            for k, x in v.items():
                if kw == "dependentRequired" or (kw == "dependencies" and isinstance(x, list)):
                    dep_req[k] = list(x)
                else:
                    dep_sch[k] = x
    for k, need in dep_req.items():
        need = [x for x in need if x != k]
        if need:
            extra.append({"anyOf": [{"properties": {k: False}}, {"required": [k, *need]}]})
    for k, sub in dep_sch.items():
        if sub is True or sub == {}:
            continue
        extra.append({"anyOf": [{"properties": {k: False}}, {"required": [k], "allOf": [sub]}]})
    nt = s.get("not")
    if _only(nt, "required") and isinstance(nt["required"], list):
        drop.add("not")
        req = list(dict.fromkeys(nt["required"]))
        extra.append({"type": "object", "anyOf": [{"properties": {k: False}} for k in req]} if req else False)
    one = s.get("oneOf")
    if isinstance(one, list) and len(one) > 1 and all(_only(b, "required") and isinstance(b["required"], list)
                                                      for b in one):
        drop.add("oneOf")
        sets = [list(dict.fromkeys(b["required"])) for b in one]
        alts = []
        for i, ri in enumerate(sets):
            comps, ok = [{"type": "object", "required": ri}], True
            for j, rj in enumerate(sets):
                if j == i:
                    continue
                diff = [k for k in rj if k not in ri]
                if not diff:
                    ok = False
                    break
                comps.append({"anyOf": [{"properties": {k: False}} for k in diff]})
            if ok:
                alts.append({"allOf": comps})
        extra.append({"anyOf": alts} if alts else False)
    if not extra:
        return s
    out = {k: v for k, v in s.items() if k not in drop}
    out["allOf"] = list(s.get("allOf", []) or []) + extra
    return out


_TYPE_KWS = {"null": set(), "boolean": set(), "object": _OBJECT_KW, "array": _ARRAY_KW,
              "string": {"minLength", "maxLength", "pattern", "format"},
              "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}}
_TYPE_KWS["integer"] = _TYPE_KWS["number"]


def _wholesale_types(m: dict) -> set:
    """The types of which a merged schema accepts every value (no keyword of it applies)."""
    if any(k in m for k in ("enum", "const", "anyOf", "oneOf", "allOf", "not", "if", "$ref", _SCALAR_ALLOF)):
        return set()
    t = m.get("type")
    types = set(_ALL_TYPES) if t is None else set(t if isinstance(t, list) else [t])
    if "number" in types:
        types.add("integer")
    return {x for x in types if not any(k in m for k in _TYPE_KWS[x])}


def _objects_disjoint(a: dict, b: dict) -> bool:
    """Two merged object-only schemas no object satisfies together: one requires a key the other
    forbids (``properties: {k: false}``, or ``additionalProperties: false`` without patterns)."""
    def object_only(x):
        t = x.get("type")
        return t is not None and set(t if isinstance(t, list) else [t]) <= {"object"}

    def forbids(x, k):
        props = x.get("properties") or {}
        if k in props:
            return props[k] is False
        return x.get("additionalProperties", True) is False and not x.get("patternProperties")

    if not (object_only(a) or object_only(b)):
        return False
    if not (object_only(a) and object_only(b)):
        return False
    return any(forbids(b, k) for k in a.get("required", []) or []) or \
        any(forbids(a, k) for k in b.get("required", []) or [])


class _LeafCompiler(js._Compiler):
    """The regular compiler with string lengths capped: ``maxLength`` above ``max_string_length``
    counts as ``max_string_length`` (sound, not exact: a counted repetition costs ~20 DFA states
    per code point, so ``maxLength: 65535`` has no practical automaton).  Plain long strings do
    not get here: :meth:`CfgSchemaCompiler._long_string` counts them in chunks."""

    max_string_length = 256

    def string(self, s: dict, ptr: str, base: str):
        hi = s.get("maxLength")
        if isinstance(hi, (int, float)) and not isinstance(hi, bool) and hi > self.max_string_length \
                and s.get("minLength", 0) <= self.max_string_length:
            s = dict(s, maxLength=self.max_string_length)
            self.report.exact = False
            self.report.truncated.append(f"#{ptr}/maxLength")
        return super().string(s, ptr, base)


class _NotMergeable(Exception):
    pass


def grammar_only(e: Exception) -> Exception:
    """Mark ``e`` as a limit of the grammar compiler itself (recursion under a combinator, an empty
    language, a long array unrolled), one the regular compiler may not share.  Every other error
    of :func:`compile_json_schema_cfg` comes from the regular compiler on a sub-schema, which the
    regular compilation of the whole schema meets again (see :mod:`.json_schema_select`)."""
    e.grammar_only = True
    return e


class CfgSchemaCompiler:
    """Builds the :class:`CFG` of a schema; see the module docstring.  Options as
    :func:`compile_json_schema_cfg`."""

    def __init__(self, root, *, whitespace="compact", max_whitespace=16, lenient=False, draft=None,
                 time_limit=10.0, max_states=100_000, max_array_unroll=2048, max_string_length=256,
                 max_floating_permutations=3, property_order="declared", any_order_limit=1024, **regular_options):
        self.rc = _LeafCompiler(root, whitespace=whitespace, max_whitespace=max_whitespace, lenient=lenient,
                               draft=draft, time_limit=time_limit, max_states=max_states, recursion="error",
                               extra_properties="anywhere", property_order=property_order,
                               any_order_limit=any_order_limit, **regular_options)
        self.any_order = self.rc.any_order      # members in any order (see structgen.frontends.json_schema.property_order)
        self.any_order_limit = int(any_order_limit)
        self.rc.max_string_length = int(max_string_length)
        self.root = root
        self.lenient = lenient
        self.report = self.rc.report
        self.flexible = whitespace == "flexible"
        self.dumps = whitespace == "dumps"
        self.ws = ir.Repeat(js._WS_CHARS, 0, int(max_whitespace)) if self.flexible else None
        self.max_whitespace = int(max_whitespace)
        self.max_array_unroll = int(max_array_unroll)
        self.max_floating_permutations = int(max_floating_permutations)
        self.rules: dict = {}
        self.terminals: dict = {}
        self._term_by_node: dict = {}
        self._memo: dict = {}       # id(schema dict) -> (schema, symbol)
        self._keep: list = []       # merged dicts kept alive (their ids are memo keys)
        self._rec_memo: dict = {}
        self._n = 0
        self._any = None
        self._combiner = None       # json_schema_combine.Combiner, made on first use

    # ------------------------------------------------------------------ symbols
    def _fresh(self, hint: str) -> str:
        self._n += 1
        return f"{hint}#{self._n}"

    def term(self, node: ir.Node, hint: str = "t", ws: bool = True) -> str:
        """The terminal name of a regular language (deduplicated); ``None`` for the empty language.
        ``ws=False``: no whitespace before it (a piece of a longer lexical unit)."""
        if node == ir.NOTHING:
            return None
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
            name = self._fresh(hint.upper())
            self._term_by_node[key] = name
            self.terminals[name] = ir.seq(lead, node) if lead is not None else node
        self._term_by_node[raw] = name
        return name

    def lit(self, s: str) -> str:
        if self.dumps and s in (",", ":"):
            s += " "  # json.dumps' separators
        return self.term(ir.literal(s), f"'{s}'")

    def rule(self, hint: str, alts) -> str:
        name = self._fresh(hint)
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
            raise grammar_only(Unsupported("the schema allows no value (the grammar engine needs a non-empty "
                                           "language)", "#"))
        alts = [(top,)]
        if self.ws is not None:
            # the trailing run is its own lexeme (no whitespace prefix of its own)
            self.terminals["WS$trail"] = ir.Repeat(js._WS_CHARS, 1, self.max_whitespace)
            alts.append((top, "WS$trail"))
        self.rules["$json"] = alts
        cfg = CFG("$json", _inline_units(self.rules, "$json"), self.terminals, [])
        cfg.validate()
        try:
            trim(cfg, validate=False, check_only=True)  # the language is not empty
        except GrammarError:
            # the grammar engine needs a non-empty language; the regular path represents this one
            raise grammar_only(Unsupported("the schema allows no value (the grammar engine needs a non-empty "
                                           "language)", "#")) from None
        return cfg

    # ------------------------------------------------------------------ values
    def value(self, s, ptr: str, base) -> str | None:
        """The symbol of the values valid under ``s`` (None: no value is)."""
        if base is None:
            base = self.rc.base_of.get(id(s), self.rc.root_base) if isinstance(s, dict) else self.rc.root_base
        if s is True:
            return self.any_value()
        if js.always_false(s, self.rc.draft):
            return None
        if not isinstance(s, dict):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(s).__name__}", ptr)
        hit = self._memo.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        self.rc.check_time()
        base = self.rc.base_of.get(id(s), base)
        name = self._fresh("v")
        self._memo[id(s)] = (s, name)
        alts = self._dict_alts(s, ptr, base)
        self.rules[name] = [a for a in alts if a is not None and None not in a]
        return name

    def _regular(self, s, ptr: str, base, keyword: str | None = None) -> list:
        """``s`` compiled whole the regular way, as one terminal (it must not recurse)."""
        if self.recursive(s, base):
            if keyword is None:
                keyword = next((k for k in s if _is_regular_only(s, k)), "$ref")
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

    def _combined(self, s, ptr: str, base, keyword: str | None = None) -> list:
        """``s`` through :mod:`.json_schema_combine` (Boolean combinations of sub-schemas as
        grammar rules, objects and arrays as automata over members / elements); where that does
        not apply, the regular way (:meth:`_regular`).  A failed attempt leaves nothing behind."""
        from .combine import Combiner, Fallback

        if self._combiner is None:
            self._combiner = Combiner(self)
        cb = self._combiner
        marks = [(d, len(d)) for d in (self.rules, self._memo, self.terminals, self._term_by_node, cb._memo)]
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
            return self._regular(s, ptr, base, keyword)
        self.report.unique_keys = True  # members in any order: the key guard removes duplicate keys
        return [(sym,)] if sym is not None else []

    def _dict_alts(self, s: dict, ptr: str, base, regular_ok: bool = True) -> list:
        rc = self.rc
        if rc.draft == "draft7" and "$ref" in s:
            t, tb, _ = self._resolve(s["$ref"], base, ptr)
            return [(self.value(t, f"{ptr}/$ref", tb),)]
        for k in s:
            if k in js.UNSUPPORTED and s[k] is not True:
                rc.unsupported(k, ptr, "not supported")
        if rc.draft == "draft7":
            for k in ("contentMediaType", "contentEncoding"):
                if k in s:
                    rc.unsupported(k, ptr, "content decoding is not a regular constraint")
        s2 = rewrite(s)
        if s2 is not s:
            self._keep.append(s2)
            s = s2
        constraining = {k: v for k, v in s.items() if k not in _ANNOT}
        if set(constraining) == {"$ref"}:
            t, tb, _ = self._resolve(s["$ref"], base, ptr)
            return [(self.value(t, f"{ptr}/$ref", tb),)]
        if "allOf" in s or "$ref" in s:
            try:
                merged = _Merger(self, base, ptr).merge(s)
            except _NotMergeable:
                merged = None
            if merged is not None:
                self._keep.append(merged)
                return self._dict_alts(merged, ptr, base, regular_ok)
            if regular_ok:
                return self._combined(s, ptr, base, "allOf" if "allOf" in s else "$ref")
        if any(_is_regular_only(s, k) for k in s):
            if regular_ok:
                return self._combined(s, ptr, base)
            s = {k: v for k, v in s.items() if not _is_regular_only(s, k)}  # lenient: reported already
        if "oneOf" in s:
            subs = js._as_list(s["oneOf"], "oneOf", ptr)
            rest = {k: v for k, v in s.items() if k != "oneOf"}
            narrowed = self._disjoint(rest, subs, base, ptr)
            if narrowed is None:
                if regular_ok:
                    return self._combined(s, ptr, base, "oneOf")
                self.unsupported("oneOf", ptr, "branches that may overlap over a recursive sub-schema")
                narrowed = rest
            return self._distribute(narrowed, subs, "oneOf", ptr, base, regular_ok)
        if "anyOf" in s:
            subs = js._as_list(s["anyOf"], "anyOf", ptr)
            rest = {k: v for k, v in s.items() if k != "anyOf"}
            return self._distribute(rest, subs, "anyOf", ptr, base, regular_ok)
        if "enum" in s or "const" in s:
            # concrete values: a finite language, compiled whole (with any sibling keywords)
            return self._regular(s, ptr, base, "enum" if "enum" in s else "const")
        return self._typed(s, ptr, base)

    def _disjoint(self, rest: dict, subs: list, base, ptr: str):
        """``rest`` (maybe narrowed by type) when no value can satisfy two branches taken together
        with it, else None.  Types that two branches accept wholesale (no keyword of theirs
        applies to them) satisfy both, so oneOf excludes them: they are cut from ``rest``."""
        if len(subs) < 2:
            return rest
        rc = self.rc
        shapes = [rc.shape(x, base) for x in subs]
        if all(js._disjoint(shapes[i], shapes[j]) for i in range(len(subs)) for j in range(i + 1, len(subs))):
            return rest
        for attempt in range(2):
            merged = []
            for b in subs:
                combo = {"allOf": [rest, b]}
                self._keep.append(combo)
                try:
                    merged.append(_Merger(self, base, ptr).merge(combo))
                except _NotMergeable:
                    return None
            self._keep += merged
            shapes = [rc.shape(m, base) for m in merged]
            if all(js._disjoint(shapes[i], shapes[j]) or _objects_disjoint(merged[i], merged[j])
                   or self._values_disjoint(merged[i], merged[j], base)
                   for i in range(len(subs)) for j in range(i + 1, len(subs))):
                return rest
            if attempt:
                return None
            wholesale = [_wholesale_types(m) for m in merged]
            cut = {t for t in _ALL_TYPES if sum(t in w for w in wholesale) >= 2}
            if "number" in cut:
                cut.add("integer")
            if not cut:
                return None
            keep = sorted(_ALL_TYPES - cut - ({"integer"} if "number" in cut else set()))
            rest = {"allOf": [rest, {"type": keep}]}
            self._keep.append(rest)
        return None

    def _values_disjoint(self, a: dict, b: dict, base) -> bool:
        """Object-only schemas that both require a key whose value schemas have no type in common."""
        ta, tb = a.get("type"), b.get("type")
        if ta is None or tb is None or not ({*(ta if isinstance(ta, list) else [ta])}
                                            | {*(tb if isinstance(tb, list) else [tb])}) <= {"object"}:
            return False
        pa, pb = a.get("properties") or {}, b.get("properties") or {}
        for k in set(a.get("required") or []) & set(b.get("required") or []):
            if k in pa and k in pb and js._disjoint(self.rc.shape(pa[k], base), self.rc.shape(pb[k], base)):
                return True
        return False

    def _distribute(self, rest: dict, subs: list, kw: str, ptr: str, base, regular_ok: bool) -> list:
        """rest ∩ (b_1 ∪ ... ∪ b_n) = (rest ∩ b_1) ∪ ... : one alternative per branch."""
        trivial = all(k in _ANNOT for k in rest)
        alts = []
        for i, b in enumerate(subs):
            where = f"{ptr}/{kw}/{i}"
            if trivial:
                alts.append((self.value(b, where, base),))
                continue
            combo = {"allOf": [rest, b]}
            self._keep.append(combo)
            try:
                merged = _Merger(self, base, where).merge(combo)
            except _NotMergeable:
                merged = None
            if merged is None:
                if regular_ok:
                    combo = {kw: subs, **rest}
                    self._keep.append(combo)
                    return self._combined(combo, ptr, base, kw)
                self.unsupported(kw, ptr, "a branch that cannot be merged with its sibling keywords "
                                          "over a recursive sub-schema")
                alts.append((self.value(b, where, base),))
                continue
            self._keep.append(merged)
            alts.append((self.value(merged, where, base),))
        return alts

    def _typed(self, s: dict, ptr: str, base) -> list:
        t = s.get("type")
        if t is None:
            types = set(_ALL_TYPES)
            # keywords of one type do not make the others invalid
        else:
            tl = t if isinstance(t, list) else [t]
            for x in tl:
                if x not in _ALL_TYPES:
                    if x == "any":
                        return [(self.any_value(),)]
                    raise SchemaError(f"unknown type {x!r}", f"{ptr}/type")
            types = set(tl)
        alts = []
        scalars = [x for x in _SCALARS if x in types]
        if "string" in scalars and _SCALAR_ALLOF not in s:
            long = self._long_string(s, ptr)
            if long is not None:
                alts.append((long,))
                scalars.remove("string")
        if scalars:
            if t is None and not any(k in s for k in _SCALAR_KW) and _SCALAR_ALLOF not in s:
                alts.append((self.scalar_any(),))
            elif _SCALAR_ALLOF in s:
                sub = {"type": scalars, "allOf": s[_SCALAR_ALLOF]}
                self._keep.append(sub)
                lang = self.rc.compile(sub, ptr, base)
                self.report.exact = self.report.exact and lang.exact
                alts.append((self.term(lang.node, "scalar"),))
            else:
                sub = {k: v for k, v in s.items() if k in _SCALAR_KW}
                sub["type"] = scalars
                self._keep.append(sub)
                lang = self.rc.typed(sub, ptr, base)
                self.report.exact = self.report.exact and lang.exact
                alts.append((self.term(lang.node, "scalar"),))
        if "object" in types:
            alts += self.object(s, ptr, base)
        if "array" in types:
            alts += self.array(s, ptr, base)
        return alts

    def _long_string(self, s: dict, ptr: str):
        """Strings whose ``maxLength`` is past ``max_string_length`` (and no ``pattern`` or
        ``format``): the symbol of an exact grammar, or None (the regular compiler's string).

        One automaton counting to ``maxLength`` code points needs about 20 states per code point
        (65535: over a million), so the body is cut into chunks of exactly ``max_string_length``
        code points, counted by rules: ``B_k -> tail_k | CHUNK B_{k+1}`` with ``k`` chunks read,
        ``tail_k`` the last ``max(minLength - kC, 0)`` to ``min(C - 1, maxLength - kC)`` code points
        and the closing quote.  Chunks are exact-length lexemes, so every string has one parse."""
        cap = int(self.rc.max_string_length)
        lo, hi = s.get("minLength", 0), s.get("maxLength")
        if any(k in s for k in ("pattern", "format", "enum", "const")) or hi is None:
            return None
        for kw, v in (("minLength", lo), ("maxLength", hi)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v):
                raise SchemaError(f"{kw} must be a non-negative integer", f"{ptr}/{kw}")
        lo, hi = int(lo), int(hi)
        if hi <= cap or lo > hi:
            return None
        if hi // cap > 4096:
            return None  # the regular compiler caps it (reported)
        char = encode(ir.ANY_CHAR, "value")
        quote = ir.literal('"')
        chunk = self.term(ir.Repeat(char, cap, cap), "chunk", ws=False)
        name = self._fresh("longstr")
        body = [self._fresh("B") for _ in range(hi // cap + 1)]
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
                                js.json_numbers.NUMBER, self.rc.string_node()), "scalar")

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

    # ------------------------------------------------------------------ objects
    def object(self, s: dict, ptr: str, base) -> list:
        rc = self.rc
        props = s.get("properties", {}) or {}
        if not isinstance(props, dict):
            raise SchemaError("properties must be an object", f"{ptr}/properties")
        required = s.get("required", [])
        if not isinstance(required, list):
            raise SchemaError("required must be an array", f"{ptr}/required")
        required = list(dict.fromkeys(required))
        patterns = s.get("patternProperties", {}) or {}
        addl = s.get("additionalProperties", True)
        min_p, max_p = int(s.get("minProperties", 0)), s.get("maxProperties")
        max_p = None if max_p is None else int(max_p)

        pat_items = list(patterns.items())
        pat_ir = [rc.pattern(p, f"{ptr}/patternProperties/{js._esc_ptr(p)}") for p, _ in pat_items]
        declared = list(props) + [k for k in required if k not in props]
        colon, comma = self.lit(":"), self.lit(",")
        members = []  # (symbols of the member, required)
        keys = []     # property_order="any": the quoted key languages of the members that can occur
        for k in declared:
            where = f"{ptr}/properties/{js._esc_ptr(k)}"
            subs = [props[k]] if k in props else []
            matched = [i for i, (p, _) in enumerate(pat_items) if js._search(p, k, pat_ir[i])]
            subs += [pat_items[i][1] for i in matched]
            if not subs:
                subs = [addl]
            if len(subs) == 1:
                val = self.value(subs[0], where, base)
            else:
                combo = {"allOf": subs}
                self._keep.append(combo)
                val = self.value(combo, where, base)
            if val is None and k in required:
                return []  # a required property that can have no value: no object
            key_ir = rc.key_literal(k)
            key = self.term(key_ir, "key")
            members.append(((key, colon, val) if val is not None else None, k in required))
            if val is not None:
                keys.append(key_ir)

        # extra members: keys not declared, split by the patterns they match
        extra = []
        if pat_items or addl is not False:
            if len(pat_items) > 4:
                if not self.recursive(s, base):
                    return self._regular(s, ptr, base, "patternProperties")
                self.unsupported("patternProperties", ptr, "more than 4 patterns")
                pat_items, pat_ir = [], []
            not_declared = ir.Not(ir.alt(*[ir.literal(k) if k else ir.EMPTY for k in declared])) if declared else None
            for mask in range(1 << len(pat_items)):
                conds = [pat_ir[i] if mask >> i & 1 else ir.Not(pat_ir[i]) for i in range(len(pat_items))]
                if not_declared is not None:
                    conds.append(not_declared)
                chosen = [pat_items[i][1] for i in range(len(pat_items)) if mask >> i & 1]
                if not chosen:
                    val = self.value(addl, f"{ptr}/additionalProperties", base)
                elif len(chosen) == 1:
                    val = self.value(chosen[0], f"{ptr}/patternProperties", base)
                else:
                    combo = {"allOf": chosen}
                    self._keep.append(combo)
                    val = self.value(combo, f"{ptr}/patternProperties", base)
                if val is None:
                    continue
                key_ir = other_keys_node(declared) if not pat_items and not_declared is not None else None
                if key_ir is None:
                    body = (ir.And(tuple(conds)) if len(conds) > 1 else conds[0]) if conds else js._ANY_STAR
                    key_ir = ir.seq(ir.literal('"'), encode(body, "key"), ir.literal('"'))
                key = self.term(key_ir, "xkey")
                if key is not None:
                    extra.append((key, colon, val))
                    keys.append(key_ir)
        n_req = sum(1 for m, r in members if r)
        n_opt = sum(1 for m, r in members if not r and m is not None)
        if max_p is not None and (extra or max_p < n_req + n_opt) or min_p > n_req:
            if not self.recursive(s, base):
                return self._combined(s, ptr, base, "maxProperties" if max_p is not None else "minProperties")
            if max_p is not None and max_p < n_req or (not extra and min_p > n_req + n_opt):
                return []
            self.unsupported("minProperties" if min_p > n_req else "maxProperties", ptr,
                             "property counts over a recursive sub-schema")
        x = self.rule("X", extra) if extra else None
        if self.any_order and (len(members) >= 2 or extra):
            from . import property_order as po

            if any(m is None and r for m, r in members):
                return []  # a required key that can have no value
            live = [(m, r) for m, r in members if m is not None]
            # every key allowed / only declared keys: known without building the key automaton
            open_keys = (len(keys) == 0) if not extra else \
                (True if not pat_items and len(extra) == 1 and len(keys) == len(live) + 1 else None)
            form = po.choose_form(keys, len(live), self.any_order_limit, open_keys)
            if form == "closed":  # repeated members; the key guard keeps an unused key reachable
                self.report.live_keys = True
                form = "repeat"
            return self._chain(live, x, form)
        floating = members[len(props):]  # required keys without a declared place: any order
        if 2 <= len(floating) <= self.max_floating_permutations:
            start = []
            for perm in itertools.permutations(floating):
                start += self._chain(members[:len(props)] + list(perm), x)
            return start
        return self._chain(members, x)

    def _chain(self, members: list, x, order: str = "declared") -> list:
        """The object rules for members in this order (see the module docstring).

        ``order="repeat"`` / ``"subset"`` (``property_order="any"``, see
        :mod:`structgen.frontends.json_schema.property_order`): members in any order, exact modulo duplicate keys.
        "repeat": ``F_c -> O G_c | R G_{c+1}``, ``G_c -> "," F_c | ε (c = r)`` with ``c`` the
        number of required members so far (O: optional and extra members, R: required ones);
        "subset": ``F_U -> m_i G_{U+i} (i not in U) | X G_U``, ``G_U -> "," F_U | ε (U holds
        every required member)`` over the sets U of declared members used."""
        comma, lb, rb = self.lit(","), self.lit("{"), self.lit("}")
        if order == "repeat":
            r = sum(1 for _, req in members if req)
            opt = [m for m, req in members if not req] + ([(x,)] if x else [])
            o = self.rule("O", opt) if opt else None
            rq = self.rule("Rq", [m for m, req in members if req]) if r else None
            f = [self._fresh("F") for _ in range(r + 1)]
            g = [self._fresh("G") for _ in range(r + 1)]
            for c in range(r + 1):
                self.rules[f[c]] = ([(o, g[c])] if o else []) + ([(rq, g[c + 1])] if c < r else [])
            for c in range(r + 1):
                self.rules[g[c]] = ([(comma, f[c])] if self.rules[f[c]] else []) + ([()] if c == r else [])
            return [(lb, f[0], rb)] + ([(lb, rb)] if r == 0 else [])
        if order == "subset":
            n = len(members)
            need = sum(1 << i for i, (_, req) in enumerate(members) if req)
            mem = [self.rule("M", [m]) for m, _ in members]  # shared: 2 symbols per alternative below
            f = [self._fresh("F") for _ in range(1 << n)]
            g = [self._fresh("G") for _ in range(1 << n)]
            for u in range(1 << n):
                alts = [(mem[i], g[u | 1 << i]) for i in range(n) if not u >> i & 1]
                self.rules[f[u]] = alts + ([(x, g[u])] if x else [])
            for u in range(1 << n):
                self.rules[g[u]] = ([(comma, f[u])] if self.rules[f[u]] else []) + ([()] if u & need == need else [])
            return [(lb, f[0], rb)] + ([(lb, rb)] if need == 0 else [])
        n = len(members)
        # Q_i / R_i: next declared member from i (R: after a comma); T_i: extras, then R_i
        q = [None] * (n + 2)
        r = [None] * (n + 2)
        t = [None] * (n + 2)
        q[n + 1] = self.rule("Q", [()])
        r[n + 1] = self.rule("R", [()])
        t[n + 1] = self.rule("T", [(comma, x, "$self"), (r[n + 1],)] if x else [(r[n + 1],)])
        for i in range(n, 0, -1):
            m, req = members[i - 1]
            qa, ra = [], []
            if m is not None:
                qa.append((*m, t[i + 1]))
                ra.append((comma, *m, t[i + 1]))
            if not req:
                qa.append((q[i + 1],))
                ra.append((r[i + 1],))
            q[i] = self.rule("Q", qa)
            r[i] = self.rule("R", ra)
            t[i] = self.rule("T", [(comma, x, "$self"), (r[i],)] if x else [(r[i],)])
        for i in range(1, n + 2):  # "$self" placeholders: T_i -> "," X T_i
            self.rules[t[i]] = [tuple(t[i] if y == "$self" else y for y in a) for a in self.rules[t[i]]]
        start = [(lb, q[1], rb)]
        if x:
            start.append((lb, x, t[1], rb))
        return start

    # ------------------------------------------------------------------ arrays
    def array(self, s: dict, ptr: str, base) -> list:
        items, prefix = s.get("items"), s.get("prefixItems")
        rest_schema, rest_ptr = True, f"{ptr}/items"
        if isinstance(items, list):
            prefix, rest_schema, rest_ptr = items, s.get("additionalItems", True), f"{ptr}/additionalItems"
        elif items is not None:
            rest_schema = items
        prefix = prefix or []
        elems = [self.value(x, f"{ptr}/prefixItems/{i}", base) for i, x in enumerate(prefix)]
        rest = self.value(rest_schema, rest_ptr, base)
        lo = int(s.get("minItems", 0))
        hi = s.get("maxItems")
        hi = None if hi is None else int(hi)
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
            loop = self._fresh("C")
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
    def _resolve(self, ref, base, ptr):
        if not isinstance(ref, str):
            raise SchemaError("$ref must be a string", ptr)
        target, tbase = self.rc.resolve(ref, base, ptr)
        return target, tbase, ref

    def recursive(self, s, base) -> bool:
        """Does ``s`` reach a ``$ref`` cycle (so it has no regular language)?"""
        seen_stack: list = []
        memo = self._rec_memo

        def walk(node, b) -> bool:
            if isinstance(node, list):
                return any(walk(x, b) for x in node)
            if not isinstance(node, dict):
                return False
            hit = memo.get(id(node))
            if hit is not None and hit[0] is node:
                return hit[1]
            if any(x is node for x in seen_stack):
                return True
            seen_stack.append(node)
            b = self.rc.base_of.get(id(node), b)
            res = False
            for k, v in node.items():
                if k == "$ref" and isinstance(v, str):
                    try:
                        t, tb = self.rc.resolve(v, b, "")
                    except Exception:
                        continue
                    res = walk(t, tb)
                elif k in js._SCHEMA_MAPS and isinstance(v, dict) and k not in ("$defs", "definitions"):
                    res = any(walk(x, b) for x in v.values())
                elif k in js._SCHEMA_VALUES:
                    res = walk(v, b)
                if res:
                    break
            seen_stack.pop()
            if not res or not seen_stack:
                memo[id(node)] = (node, res)
            return res

        return walk(s, base)


class _Merger:
    """``allOf`` (and ``$ref`` with siblings) merged into one schema, where that is exact.

    Components are flattened (nested ``allOf``, ``$ref`` targets inlined once); object and array
    keywords are combined keyword by keyword (properties recursively as ``allOf``), scalar keywords
    are kept as an ``allOf`` of scalar-only fragments (compiled exactly by the regular compiler),
    ``anyOf``/``oneOf`` of several components as a product.  Anything else raises _NotMergeable.
    """

    def __init__(self, owner: CfgSchemaCompiler, base, ptr):
        self.o, self.base, self.ptr = owner, base, ptr
        self.stack: list = []

    def flatten(self, s, base, out: list, depth=0):
        if depth > 16:
            raise _NotMergeable()
        if s is True:
            return
        if js.always_false(s, self.o.rc.draft):
            out.append(False)
            return
        if not isinstance(s, dict):
            raise _NotMergeable()
        if any(x is s for x in self.stack):
            raise _NotMergeable()  # allOf through a cycle
        s2 = rewrite(s)
        if s2 is not s:
            self.o._keep.append(s2)
            self.stack.append(s)
            self.flatten(s2, base, out, depth + 1)
            self.stack.pop()
            return
        self.stack.append(s)
        rest = {k: v for k, v in s.items() if k not in ("allOf", "$ref")}
        if "$ref" in s:
            t, tb, _ = self.o._resolve(s["$ref"], self.o.rc.base_of.get(id(s), base), self.ptr)
            if self.o.rc.draft == "draft7":
                self.flatten(t, tb, out, depth + 1)
                self.stack.pop()
                return
            self.flatten(t, tb, out, depth + 1)
        for sub in s.get("allOf", []) or []:
            self.flatten(sub, base, out, depth + 1)
        out.append(rest)
        self.stack.pop()

    def merge(self, s) -> dict:
        comps: list = []
        self.flatten(s, self.base, comps)
        if any(c is False for c in comps):
            return {"type": []}
        comps = [{k: v for k, v in c.items() if k not in _ANNOT or ("if" in c and k in ("then", "else"))}
                 for c in comps]
        comps = [{k: v for k, v in c.items() if k in _KNOWN} for c in comps]
        comps = [c for c in comps if c]
        out: dict = {}
        scalar_frags = []
        types = None
        branch_lists = []
        for c in comps:
            for k in c:
                if k in ("enum", "const") or _is_regular_only(c, k) or k in ("minContains", "maxContains"):
                    raise _NotMergeable()  # a whole-value intersection: the regular way
                if k in js.UNSUPPORTED:
                    raise _NotMergeable()
                # other unknown keywords are annotations (the spec says to ignore them)
            if "type" in c:
                tl = set(c["type"] if isinstance(c["type"], list) else [c["type"]])
                if "number" in tl:
                    tl.add("integer")
                types = tl if types is None else types & tl
            frag = {k: v for k, v in c.items() if k in _SCALAR_KW}
            if frag:
                scalar_frags.append(frag)
            scalar_frags += c.get(_SCALAR_ALLOF, [])
            for kw in ("anyOf", "oneOf"):
                if kw in c:
                    branch_lists.append((kw, list(c[kw])))
        self._objects([c for c in comps if any(k in _OBJECT_KW for k in c)], out)
        self._arrays([c for c in comps if any(k in _ARRAY_KW for k in c)], out)
        if types is not None:
            out["type"] = sorted(types)
        if len(scalar_frags) == 1:
            out.update(scalar_frags[0])
        elif scalar_frags:
            out[_SCALAR_ALLOF] = scalar_frags
        if branch_lists:
            if len(branch_lists) == 1:
                kw, bl = branch_lists[0]
                out[kw] = bl  # a oneOf is checked for disjointness with the merged rest
            else:
                for kw, bl in branch_lists:
                    if kw == "oneOf" and self.o._disjoint({}, bl, self.base, self.ptr) != {}:  # None or narrowed
                        raise _NotMergeable()
                prod = [[]]
                for _, bl in branch_lists:
                    prod = [p + [b] for p in prod for b in bl]
                    if len(prod) > 64:
                        raise _NotMergeable()
                out["anyOf"] = [{"allOf": p} for p in prod]
        return out

    def _objects(self, comps: list, out: dict) -> None:
        if not comps:
            return
        props: dict = {}
        for c in comps:
            for k, v in (c.get("properties") or {}).items():
                props[k] = v if k not in props else {"allOf": [props[k], v]}
        closed = [c for c in comps if c.get("additionalProperties", True) is not True or c.get("patternProperties")]
        # several objects closed by additionalProperties: false (no patterns): exactly the keys all
        # of them declare may occur (others are forbidden), each valid under every component
        all_false = len(closed) > 1 and all(c.get("additionalProperties", True) is False
                                            and not c.get("patternProperties") for c in closed)
        if len(closed) > 1 and not all_false:
            first = closed[0]
            if not all(c.get("additionalProperties", True) == first.get("additionalProperties", True)
                       and c.get("patternProperties") == first.get("patternProperties")
                       and set(c.get("properties") or {}) == set(first.get("properties") or {}) for c in closed):
                raise _NotMergeable()
        if all_false:
            allowed = set.intersection(*[set(c.get("properties") or {}) for c in closed])
            for k in list(props):
                if k not in allowed:
                    props[k] = False
            out["additionalProperties"] = False
        elif closed:
            c0 = closed[0]
            if c0.get("patternProperties"):
                pats = list(c0["patternProperties"].items())
            else:
                pats = []
            own = set(c0.get("properties") or {})
            for k in list(props):
                if k in own:
                    continue
                hits = [v for p, v in pats if js._search(p, k, self.o.rc.pattern(p, ""))]
                extra = hits if hits else [c0.get("additionalProperties", True)]
                props[k] = {"allOf": [props[k], *extra]}
            if "additionalProperties" in c0:
                out["additionalProperties"] = c0["additionalProperties"]
            if pats:
                out["patternProperties"] = dict(pats)
        else:
            pats = {}
            for c in comps:
                for p, v in (c.get("patternProperties") or {}).items():
                    pats[p] = v if p not in pats else {"allOf": [pats[p], v]}
            if pats:
                out["patternProperties"] = pats
        if props:
            out["properties"] = props
        req = []
        for c in comps:
            req += [k for k in c.get("required", []) or [] if k not in req]
        if req:
            out["required"] = req
        mins = [c["minProperties"] for c in comps if "minProperties" in c]
        maxs = [c["maxProperties"] for c in comps if "maxProperties" in c]
        if mins:
            out["minProperties"] = max(mins)
        if maxs:
            out["maxProperties"] = min(maxs)

    def _arrays(self, comps: list, out: dict) -> None:
        if not comps:
            return
        draft7 = self.o.rc.draft == "draft7"
        tuples = [c for c in comps if "prefixItems" in c or isinstance(c.get("items"), list)]
        if len(tuples) > 1:
            raise _NotMergeable()
        items = [c["items"] for c in comps if "items" in c and not isinstance(c["items"], list)]
        if tuples:
            t = tuples[0]
            for k in ("prefixItems", "items", "additionalItems"):
                if k in t:
                    out[k] = t[k]
            if items and not draft7:
                # the other components' items apply to every element
                raise _NotMergeable()
            if items:
                raise _NotMergeable()
        elif items:
            out["items"] = items[0] if len(items) == 1 else {"allOf": items}
        mins = [c["minItems"] for c in comps if "minItems" in c]
        maxs = [c["maxItems"] for c in comps if "maxItems" in c]
        if mins:
            out["minItems"] = max(mins)
        if maxs:
            out["maxItems"] = min(maxs)


def compile_json_schema_cfg(schema, **options) -> js.SchemaReport:
    """Compile ``schema`` to a :class:`~structgen.cfg.CFG` (``report.grammar``).

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
    leaf, e.g. under ``not``).
    """
    if isinstance(schema, (str, bytes)):
        try:
            schema = json.loads(schema)
        except ValueError as e:
            raise SchemaError(f"schema is not valid JSON: {e}") from e
    c = CfgSchemaCompiler(schema, **options)
    cfg = c.build()
    c.report.grammar = cfg
    return c.report
