"""Schema rewriting for the grammar compiler: what it can express as rules.

- :func:`rewrite`: keywords about which keys are present (``dependentRequired``,
  ``dependentSchemas``, ``dependencies``, ``not: {required}``, ``oneOf`` of ``required``) restated
  as ``allOf`` / ``anyOf`` of ``required`` and absent keys;
- :class:`Merger`: ``allOf`` (and ``$ref`` with siblings) merged into one schema where that is
  exact, else :class:`NotMergeable`;
- the facts the grammar compiler decides by: :func:`regular_only` (a keyword only the regular
  compiler can enforce), :func:`wholesale_types`, :func:`objects_disjoint`.

Pure functions of schema dicts (and of the owner's leaf compiler for patterns and ``$ref``);
merged dicts are new objects the owner keeps alive (their ids are memo keys).
"""
from __future__ import annotations

from .keywords import ALL_TYPES, ANNOTATIONS, ARRAY_KEYWORDS, OBJECT_KEYWORDS, TYPE_KEYWORDS, UNSUPPORTED
from .language import pattern_finds
from .reader import always_false

#: keywords whose meaning needs intersection/complement of whole values: compiled the regular way
REGULAR_ONLY = ("not", "if", "dependentSchemas", "dependencies", "dependentRequired", "contains",
                "uniqueItems", "propertyNames")
SCALAR_KEYWORDS = TYPE_KEYWORDS - OBJECT_KEYWORDS - ARRAY_KEYWORDS
#: keywords without a constraint of their own (``then``/``else`` count only next to ``if``)
NOT_CONSTRAINING = ANNOTATIONS - {"additionalItems", "minContains", "maxContains"}
SCALAR_ALLOF = "$structgen:scalarAllOf"
#: the keywords a merge keeps (``SCALAR_ALLOF``: merged schemas' scalar keyword fragments, which all apply)
MERGEABLE = (OBJECT_KEYWORDS | ARRAY_KEYWORDS | SCALAR_KEYWORDS | UNSUPPORTED
             | {"type", "enum", "const", "anyOf", "oneOf", "not", "if", "then", "else", SCALAR_ALLOF})


def regular_only(s: dict, k: str) -> bool:
    """Is keyword ``k`` of ``s`` one that only the regular compiler can enforce?"""
    if k not in REGULAR_ONLY:
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


def only_keyword(s, keyword: str) -> bool:
    return isinstance(s, dict) and keyword in s and all(k in NOT_CONSTRAINING for k in s if k != keyword)


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
    if only_keyword(nt, "required") and isinstance(nt["required"], list):
        drop.add("not")
        req = list(dict.fromkeys(nt["required"]))
        extra.append({"type": "object", "anyOf": [{"properties": {k: False}} for k in req]} if req else False)
    one = s.get("oneOf")
    if isinstance(one, list) and len(one) > 1 and all(only_keyword(b, "required") and isinstance(b["required"], list)
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


TYPE_FACETS = {"null": set(), "boolean": set(), "object": OBJECT_KEYWORDS, "array": ARRAY_KEYWORDS,
              "string": {"minLength", "maxLength", "pattern", "format"},
              "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}}
TYPE_FACETS["integer"] = TYPE_FACETS["number"]


def wholesale_types(m: dict) -> set:
    """The types of which a merged schema accepts every value (no keyword of it applies)."""
    if any(k in m for k in ("enum", "const", "anyOf", "oneOf", "allOf", "not", "if", "$ref", SCALAR_ALLOF)):
        return set()
    t = m.get("type")
    types = set(ALL_TYPES) if t is None else set(t if isinstance(t, list) else [t])
    if "number" in types:
        types.add("integer")
    return {x for x in types if not any(k in m for k in TYPE_FACETS[x])}


def objects_disjoint(a: dict, b: dict) -> bool:
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


class NotMergeable(Exception):
    """The components cannot be merged exactly (the caller takes another way)."""


class Merger:
    """``allOf`` (and ``$ref`` with siblings) merged into one schema, where that is exact, for
    ``owner`` (a :class:`.cfg.CfgSchemaCompiler`: its leaf compiler, ``kept`` list, ``resolve_ref``
    and ``disjoint_rest``).

    Components are flattened (nested ``allOf``, ``$ref`` targets inlined once); object and array
    keywords are combined keyword by keyword (properties recursively as ``allOf``), scalar keywords
    are kept as an ``allOf`` of scalar-only fragments (compiled exactly by the regular compiler),
    ``anyOf``/``oneOf`` of several components as a product.  Anything else raises NotMergeable.
    """

    def __init__(self, owner, base, ptr):
        self.o, self.base, self.ptr = owner, base, ptr
        self.stack: list = []

    def flatten(self, s, base, out: list, depth=0):
        if depth > 16:
            raise NotMergeable()
        if s is True:
            return
        if always_false(s, self.o.rc.draft):
            out.append(False)
            return
        if not isinstance(s, dict):
            raise NotMergeable()
        if any(x is s for x in self.stack):
            raise NotMergeable()  # allOf through a cycle
        s2 = rewrite(s)
        if s2 is not s:
            self.o.kept.append(s2)
            self.stack.append(s)
            self.flatten(s2, base, out, depth + 1)
            self.stack.pop()
            return
        self.stack.append(s)
        rest = {k: v for k, v in s.items() if k not in ("allOf", "$ref")}
        if "$ref" in s:
            t, tb, _ = self.o.resolve_ref(s["$ref"], self.o.rc.base_of.get(id(s), base), self.ptr)
            if self.o.rc.draft == "draft7":
                self.flatten(t, tb, out, depth + 1)
                self.stack.pop()
                return
        # the parts in the schema object's own key order (declared property order follows it)
        placed = False
        for k in s:
            if k == "$ref":
                self.flatten(t, tb, out, depth + 1)
            elif k == "allOf":
                for sub in s.get("allOf", []) or []:
                    self.flatten(sub, base, out, depth + 1)
            elif not placed:
                out.append(rest)
                placed = True
        if not placed:
            out.append(rest)
        self.stack.pop()

    def merge(self, s) -> dict:
        comps: list = []
        self.flatten(s, self.base, comps)
        if any(c is False for c in comps):
            return {"type": []}
        comps = [{k: v for k, v in c.items() if k not in NOT_CONSTRAINING or ("if" in c and k in ("then", "else"))}
                 for c in comps]
        comps = [{k: v for k, v in c.items() if k in MERGEABLE} for c in comps]
        comps = [c for c in comps if c]
        out: dict = {}
        scalar_frags = []
        types = None
        branch_lists = []
        for c in comps:
            for k in c:
                if k in ("enum", "const") or regular_only(c, k) or k in ("minContains", "maxContains"):
                    raise NotMergeable()  # a whole-value intersection: the regular way
                if k in UNSUPPORTED:
                    raise NotMergeable()
                # other unknown keywords are annotations (the spec says to ignore them)
            if "type" in c:
                tl = set(c["type"] if isinstance(c["type"], list) else [c["type"]])
                if "number" in tl:
                    tl.add("integer")
                types = tl if types is None else types & tl
            frag = {k: v for k, v in c.items() if k in SCALAR_KEYWORDS}
            if frag:
                scalar_frags.append(frag)
            scalar_frags += c.get(SCALAR_ALLOF, [])
            for kw in ("anyOf", "oneOf"):
                if kw in c:
                    branch_lists.append((kw, list(c[kw])))
        self._objects([c for c in comps if any(k in OBJECT_KEYWORDS for k in c)], out)
        self._arrays([c for c in comps if any(k in ARRAY_KEYWORDS for k in c)], out)
        if types is not None:
            out["type"] = sorted(types)
        if len(scalar_frags) == 1:
            out.update(scalar_frags[0])
        elif scalar_frags:
            out[SCALAR_ALLOF] = scalar_frags
        if branch_lists:
            if len(branch_lists) == 1:
                kw, bl = branch_lists[0]
                out[kw] = bl  # a oneOf is checked for disjointness with the merged rest
            else:
                for kw, bl in branch_lists:
                    if kw == "oneOf" and self.o.disjoint_rest({}, bl, self.base, self.ptr) != {}:  # None or narrowed
                        raise NotMergeable()
                prod = [[]]
                for _, bl in branch_lists:
                    prod = [p + [b] for p in prod for b in bl]
                    if len(prod) > 64:
                        raise NotMergeable()
                out["anyOf"] = [{"allOf": p} for p in prod]
        return out

    def _both(self, a, b) -> dict:
        """``a`` and ``b``: ``a`` itself when they are the same schema, else ``owner.conjunction``
        (the same dict for the same two sub-schemas: ``allOf`` of two recursive objects then closes
        its recursion)."""
        return a if a is b else self.o.conjunction((a, b))

    def _objects(self, comps: list, out: dict) -> None:
        if not comps:
            return
        props: dict = {}
        for c in comps:
            for k, v in (c.get("properties") or {}).items():
                props[k] = v if k not in props else self._both(props[k], v)
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
                raise NotMergeable()
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
                hits = [v for p, v in pats if pattern_finds(k, self.o.rc.pattern(p, ""))]
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
        _tightest(comps, out, "minProperties", "maxProperties")

    def _arrays(self, comps: list, out: dict) -> None:
        if not comps:
            return
        tuples = [c for c in comps if "prefixItems" in c or isinstance(c.get("items"), list)]
        if len(tuples) > 1:
            raise NotMergeable()
        items = [c["items"] for c in comps if "items" in c and not isinstance(c["items"], list)]
        if tuples:
            t = tuples[0]
            for k in ("prefixItems", "items", "additionalItems"):
                if k in t:
                    out[k] = t[k]
            if items:  # the other components' items would apply to every element, tuple included
                raise NotMergeable()
        elif items:
            out["items"] = items[0] if len(items) == 1 else {"allOf": items}
        _tightest(comps, out, "minItems", "maxItems")


def _tightest(comps: list, out: dict, low: str, high: str) -> None:
    """The conjunction of count bounds: the largest ``low`` and the smallest ``high`` given."""
    lows = [c[low] for c in comps if low in c]
    highs = [c[high] for c in comps if high in c]
    if lows:
        out[low] = max(lows)
    if highs:
        out[high] = min(highs)
