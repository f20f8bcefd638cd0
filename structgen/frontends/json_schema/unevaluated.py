"""``unevaluatedProperties`` / ``unevaluatedItems`` (2020-12), rewritten away before compiling.

Contract: :func:`rewrite_unevaluated` returns a schema document without those two keywords that
accepts exactly the instances the original accepts, or raises :class:`Unsupported` naming the
JSON pointer of a keyword it cannot rewrite exactly (it never widens a language).

How.  What a schema object ``X`` *evaluates* in an instance is the union of

- a static part -- its own ``properties`` names, ``patternProperties`` patterns, everything when
  it has ``additionalProperties`` or ``unevaluatedProperties`` (items: the ``prefixItems`` /
  array-form ``items`` length, everything for ``items`` / ``additionalItems`` /
  ``unevaluatedItems``, and the items a ``contains`` schema matches), and the static parts of
  its ``allOf`` members and ``$ref`` targets (which must hold whenever ``X`` does);
- *cases* ``(conditions, evaluated part)`` for the parts that count only where a branch holds:
  ``anyOf`` / ``oneOf`` branches, ``if`` (its own part and ``then``'s when it holds, ``else``'s
  when it does not) and ``dependentSchemas`` (when the key is present), nested to any depth.

"Every unevaluated member satisfies ``U``" is monotone in the evaluated set (more evaluated,
weaker), so with ``T*`` the set of cases whose conditions hold it equals the disjunction over
subsets ``T`` of the cases of ``(all conditions of T) and closed(static + parts of T, U)``: every
subset whose conditions hold is inside ``T*`` and gives a stronger constraint, and ``T*`` itself
is a term.  ``closed(E, U)`` is a plain schema: ``{"properties": {n: true}, "patternProperties":
{p: true}, "additionalProperties": U}`` for members, ``{"prefixItems": [true] * n, "items":
{"anyOf": [contains..., U]}}`` for items.  Subsets holding two branches of one ``oneOf`` (or
``then`` and ``else`` of one ``if``) never hold together and are skipped; more than
:data:`MAX_CASES` cases are refused.  Inner keywords are rewritten first; a rewritten schema
evaluates everything, as the keyword itself does.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

from structgen.errors import SchemaError, Unsupported

from .keywords import DATA_KEYWORDS, SCHEMA_LISTS, SCHEMA_MAPS, SCHEMA_VALUES
from .reader import SchemaDocument, declared_draft, escape_pointer

#: at most this many branch-dependent cases per keyword (2**MAX_CASES disjuncts at worst)
MAX_CASES = 6
#: ``$ref`` chains followed while collecting evaluated parts
MAX_REF_DEPTH = 64

_KEYWORDS = ("unevaluatedProperties", "unevaluatedItems")


@dataclass(frozen=True)
class Part:
    """What a schema evaluates: member names and patterns (``props_all``: every member), the
    length of the item prefix, the ``contains`` schemas (rewritten) and ``items_all``."""

    names: tuple = ()        # in document order: the declared property order follows it
    patterns: tuple = ()
    props_all: bool = False
    prefix: int = 0
    contains: tuple = ()
    items_all: bool = False

    def union(self, o: "Part") -> "Part":
        return Part(_merge(self.names, o.names), _merge(self.patterns, o.patterns), self.props_all or o.props_all,
                    max(self.prefix, o.prefix), self.contains + tuple(c for c in o.contains
                                                                      if all(c is not d for d in self.contains)),
                    self.items_all or o.items_all)

    def adds(self, o: "Part", kind: str) -> bool:
        """Does ``o`` evaluate something of ``kind`` ("props"/"items") that ``self`` does not?"""
        if kind == "props":
            return not self.props_all and (o.props_all or bool(set(o.names) - set(self.names))
                                           or bool(set(o.patterns) - set(self.patterns)))
        return not self.items_all and (o.items_all or o.prefix > self.prefix
                                       or any(all(c is not d for d in self.contains) for c in o.contains))


@dataclass
class Case:
    """A part that counts where every schema of ``conds`` holds; ``tags``: (choice, branch)
    pairs, two cases with one choice and different branches never hold together."""

    conds: tuple
    part: Part
    tags: frozenset = field(default_factory=frozenset)


def rewrite_unevaluated(root, draft: str | None = None, lenient: bool = False):
    """``root`` without ``unevaluatedProperties`` / ``unevaluatedItems`` (see the module
    docstring); ``root`` itself when it has neither or when the draft is not 2020-12 (older
    drafts do not know them).  ``lenient``: a keyword that cannot be rewritten is left in place
    (the compilers then ignore it) instead of raising."""
    draft = draft or ("draft7" if declared_draft(root) is not None else "2020-12")
    if draft != "2020-12" or not _mentions(root):
        return root
    return _Rewriter(root, lenient).run()


def _mentions(node) -> bool:
    if isinstance(node, dict):
        return any(k in _KEYWORDS for k in node) or any(
            _mentions(v) for k, v in node.items() if k not in DATA_KEYWORDS)
    if isinstance(node, list):
        return any(_mentions(x) for x in node)
    return False


class _Rewriter:
    def __init__(self, root, lenient: bool):
        self.root = root
        self.doc = SchemaDocument(root, "2020-12")
        self.lenient = lenient
        self.done: dict = {}      # id(original) -> (original, rewritten)
        self.busy: set = set()

    def run(self):
        return self.rewrite(self.root, "")

    # ------------------------------------------------------------------ the structural walk
    def rewrite(self, node, ptr: str):
        """The rewritten form of sub-schema ``node`` (memoised by identity)."""
        if not isinstance(node, dict):
            return node
        hit = self.done.get(id(node))
        if hit is not None:
            return hit[1]
        if id(node) in self.busy:
            raise Unsupported("unevaluated keyword whose evaluated set depends on itself", f"#{ptr}")
        self.busy.add(id(node))
        out = {}
        for k, v in node.items():
            p = f"{ptr}/{escape_pointer(k)}"
            if k in DATA_KEYWORDS:
                out[k] = v
            elif k in SCHEMA_MAPS and isinstance(v, dict):
                out[k] = {n: self.rewrite(x, f"{p}/{escape_pointer(n)}") for n, x in v.items()}
            elif k in SCHEMA_VALUES and isinstance(v, list) and k in SCHEMA_LISTS:
                out[k] = [self.rewrite(x, f"{p}/{i}") for i, x in enumerate(v)]
            elif k in SCHEMA_VALUES:
                out[k] = self.rewrite(v, p)
            else:
                out[k] = v
        for kw, kind in (("unevaluatedProperties", "props"), ("unevaluatedItems", "items")):
            if kw not in node:
                continue
            check_unevaluated_value(out[kw], f"{ptr}/{kw}")
            try:
                extra = self.closure(node, ptr, kind, out[kw])
            except Unsupported:
                if self.lenient:
                    continue
                raise
            del out[kw]
            if extra is not None and _fold(out, extra, kind):
                continue
            if extra is not None:
                allof = out.get("allOf")
                out["allOf"] = (list(allof) if isinstance(allof, list) else []) + [extra]
        self.busy.discard(id(node))
        self.done[id(node)] = (node, out)
        return out

    # ------------------------------------------------------------------ evaluated parts
    def collect(self, node, ptr: str, conds: tuple, tags: frozenset, cases: list, depth: int = 0,
                base: str | None = None) -> Part:
        """The static part of ``node`` (holding where ``conds`` do); its branch-dependent cases are
        appended to ``cases`` with their conditions."""
        if not isinstance(node, dict):
            return Part()
        if depth > MAX_REF_DEPTH:
            raise Unsupported("unevaluated keyword over a $ref chain too long to follow", f"#{ptr}")
        base = self.doc.base(node, base)
        part = Part()
        props_all = "additionalProperties" in node or "unevaluatedProperties" in node
        items = node.get("items")
        items_all = ("unevaluatedItems" in node or isinstance(items, (dict, bool))
                     or (isinstance(items, list) and "additionalItems" in node))
        prefix = len(node["prefixItems"]) if isinstance(node.get("prefixItems"), list) else 0
        if isinstance(items, list):
            prefix = max(prefix, len(items))
        contains = (self.rewrite(node["contains"], f"{ptr}/contains"),) if "contains" in node else ()
        props = node.get("properties")
        pats = node.get("patternProperties")
        part = Part(tuple(props) if isinstance(props, dict) else (),
                    tuple(pats) if isinstance(pats, dict) else (), props_all,
                    prefix, contains, items_all)
        if "$dynamicRef" in node or "$recursiveRef" in node:
            raise Unsupported("unevaluated keyword over $dynamicRef", f"#{ptr}")
        ref = node.get("$ref")
        if isinstance(ref, str):
            target, tbase = self.doc.resolve(ref, base, f"{ptr}/$ref")
            if self.doc.base(target, tbase) != base and self._has_branches(target):
                raise Unsupported("unevaluated keyword over branches of another resource", f"#{ptr}/$ref")
            part = part.union(self.collect(target, f"{ptr}/$ref", conds, tags, cases, depth + 1, tbase))
        allof = node.get("allOf")
        if isinstance(allof, list):
            for i, s in enumerate(allof):
                part = part.union(self.collect(s, f"{ptr}/allOf/{i}", conds, tags, cases, depth, base))
        for kw in ("anyOf", "oneOf"):
            br = node.get(kw)
            if not isinstance(br, list):
                continue
            for i, s in enumerate(br):
                p = f"{ptr}/{kw}/{i}"
                t = tags | {((id(node), kw), i)} if kw == "oneOf" else tags
                self.branch(s, p, conds + (self.rewrite(s, p),), t, cases, depth, base)
        if "if" in node:
            cond = self.rewrite(node["if"], f"{ptr}/if")
            yes = tags | {((id(node), "if"), 0)}
            no = tags | {((id(node), "if"), 1)}
            self.branch(node["if"], f"{ptr}/if", conds + (cond,), yes, cases, depth, base)
            if "then" in node:
                self.branch(node["then"], f"{ptr}/then", conds + (cond,), yes, cases, depth, base)
            if "else" in node:
                self.branch(node["else"], f"{ptr}/else", conds + ({"not": cond},), no, cases, depth, base)
        deps = node.get("dependentSchemas")
        if isinstance(deps, dict):
            for k, s in deps.items():
                self.branch(s, f"{ptr}/dependentSchemas/{escape_pointer(k)}",
                            conds + ({"type": "object", "required": [k]},), tags, cases, depth, base)
        return part

    def branch(self, node, ptr, conds, tags, cases, depth, base) -> None:
        sub: list = []
        part = self.collect(node, ptr, conds, tags, sub, depth, base)
        cases.append(Case(conds, part, tags))
        cases.extend(sub)

    @staticmethod
    def _has_branches(node) -> bool:
        return isinstance(node, dict) and any(k in node for k in ("anyOf", "oneOf", "if", "dependentSchemas",
                                                                  "contains", "allOf", "$ref"))

    # ------------------------------------------------------------------ the constraint
    def closure(self, node, ptr: str, kind: str, u):
        """The schema (to add to ``allOf``) saying that what ``node`` leaves unevaluated satisfies
        ``u``; None when nothing can be left unevaluated."""
        kw = "unevaluatedProperties" if kind == "props" else "unevaluatedItems"
        probe = dict(node)
        del probe[kw]  # the keyword's own annotation is not an input to itself
        if kind == "props":
            probe.pop("unevaluatedItems", None)
        else:
            probe.pop("unevaluatedProperties", None)
        cases: list = []
        static = self.collect(probe, ptr, (), frozenset(), cases, 0, self.doc.base(node))
        if static.props_all if kind == "props" else static.items_all:
            return None
        cases = [c for c in cases if static.adds(c.part, kind)]
        if len(cases) > MAX_CASES:
            raise Unsupported(f"{kw} over {len(cases)} branch-dependent parts (at most {MAX_CASES})",
                              f"#{ptr}/{kw}")
        terms = []
        for r in range(len(cases) + 1):
            for subset in combinations(cases, r):
                if not _compatible(subset):
                    continue
                part = static
                conds: list = []
                for c in subset:
                    part = part.union(c.part)
                    for x in c.conds:
                        if all(x is not y for y in conds):
                            conds.append(x)
                closed = _closed(part, kind, u)
                terms.append(conds + ([closed] if closed is not None else []))
        if any(not t for t in terms):
            return None
        if len(terms) == 1:
            t = terms[0]
            return t[0] if len(t) == 1 else {"allOf": t}
        return {"anyOf": [t[0] if len(t) == 1 else {"allOf": t} for t in terms]}


def _merge(a: tuple, b: tuple) -> tuple:
    return a + tuple(x for x in b if x not in a)


def _fold(out: dict, extra: dict, kind: str) -> bool:
    """Put closure ``extra`` into ``out`` itself when it only restates ``out``'s own applicators
    (the common ``properties`` + ``unevaluatedProperties`` case): a plain ``additionalProperties``
    / ``items`` then, no ``allOf`` for the compilers to merge.  True when folded."""
    if kind == "props":
        if "additionalProperties" in out or set(extra) - {"properties", "patternProperties", "additionalProperties"}:
            return False
        props = out.get("properties") if isinstance(out.get("properties"), dict) else {}
        pats = out.get("patternProperties") if isinstance(out.get("patternProperties"), dict) else {}
        if set(extra.get("properties", ())) != set(props) or set(extra.get("patternProperties", ())) != set(pats):
            return False
        out["additionalProperties"] = extra["additionalProperties"]
        return True
    if "items" in out or set(extra) - {"prefixItems", "items"}:
        return False
    pre = out.get("prefixItems") if isinstance(out.get("prefixItems"), list) else []
    if len(extra.get("prefixItems", ())) != len(pre) or "contains" in out:
        return False
    out["items"] = extra["items"]
    return True


def _compatible(cases) -> bool:
    seen: dict = {}
    for c in cases:
        for choice, b in c.tags:
            if seen.setdefault(choice, b) != b:
                return False
    return True


def _closed(part: Part, kind: str, u):
    """The plain schema: what ``part`` does not evaluate satisfies ``u`` (None: nothing is left)."""
    if kind == "props":
        if part.props_all:
            return None
        s: dict = {}
        if part.names:
            s["properties"] = {n: True for n in part.names}
        if part.patterns:
            s["patternProperties"] = {p: True for p in part.patterns}
        s["additionalProperties"] = u
        return s
    if part.items_all:
        return None
    s = {}
    if part.prefix:
        s["prefixItems"] = [True] * part.prefix
    if part.contains:
        s["items"] = {"anyOf": list(part.contains) + [u]} if u is not False else \
            (part.contains[0] if len(part.contains) == 1 else {"anyOf": list(part.contains)})
    else:
        s["items"] = u
    return s


def check_unevaluated_value(v, ptr: str) -> None:
    """A keyword value must be a schema (object or boolean)."""
    if not isinstance(v, (dict, bool)):
        raise SchemaError("unevaluated keyword must be a schema", ptr)
