"""``uniqueItems`` over open item sets: which arrays of an instance must hold distinct items,
as a function of their path, for the unique-items guard (:mod:`structgen.runtime.unique_guard`).

The compilers take ``uniqueItems`` exactly only when the items range over a small finite set of
values (:mod:`.regular_arrays`).  Otherwise the array is compiled without it and the guard
rejects duplicates at run time -- possible when *which* arrays are unique follows from the
instance path alone: every ``uniqueItems: true`` reached from the root only through
``properties``, ``patternProperties``, ``additionalProperties``, ``prefixItems``, ``items``
(draft 7: its array form, ``additionalItems``), ``allOf`` and ``$ref``.  Those applicators are
conjunctive -- every sub-schema they reach at a path applies to the value there -- so an array
must be unique exactly when one of the sub-schemas at its path says so.  Under ``anyOf``,
``oneOf``, ``not``, ``if`` / ``then`` / ``else``, ``contains``, ``dependentSchemas`` and the
other conditional applicators it depends on which branch holds: those ``uniqueItems`` stay in
the schema for the compilers (exact over small finite item sets, else their error) -- except in
an ``anyOf`` / ``oneOf`` whose declared types let at most one branch take arrays and at most one
take objects ("a string or an array of unique strings", "null, or a list of unique names"): a
container's type picks the branch, so its unique arrays are as unconditional (:func:`type_disjoint`;
the plan follows a branch only for values of its types).

:class:`UniquePlan` is a small deterministic automaton over instance paths: a state is the set
of sub-schemas applying at a path; ``step(state, key_or_index)`` follows one member or item,
``unique(state)`` says whether an array there must be unique, ``below(state)`` whether any
deeper path may hold one.  States are built on demand and numbered from 0 (the root).
``patternProperties`` are matched with Python's ``re`` (``re.search``, as ``jsonschema`` does).
"""
from __future__ import annotations

import re

from structgen.errors import StructgenError

from .reader import SchemaDocument, without_keywords

__all__ = ["UniquePlan", "unique_plan", "without_open_unique"]

#: applicators whose sub-schemas apply conditionally (a unique array under them has no plan)
_CONDITIONAL = ("anyOf", "oneOf", "not", "if", "then", "else", "contains", "dependentSchemas",
                "dependencies", "propertyNames", "unevaluatedItems", "unevaluatedProperties",
                "contentSchema")
#: keywords whose values map names to sub-schemas (a property may be called "not" or "dependencies")
_NAME_MAPS = ("properties", "patternProperties", "$defs", "definitions")


class UniquePlan:
    """See the module docstring.  Built by :func:`unique_plan`."""

    def __init__(self, doc: SchemaDocument):
        self._doc = doc
        self._draft7 = doc.draft == "draft7"
        self._ids: dict = {}      # frozenset of id(sub-schema) -> state
        self._nodes: list = []    # state -> tuple of (sub-schema, base URI)
        self._unique: list = []
        self._below: list = []
        self._trans: dict = {}    # (state, step) -> state
        self._hot_memo: dict = {}
        self.conditional: set = set()
        self.root = self._state([(doc.root, doc.root_base)])

    # ------------------------------------------------------------------ states
    def _closure(self, pairs):
        out, seen, todo = [], set(), list(pairs)
        while todo:
            s, base = todo.pop()
            if not isinstance(s, dict) or id(s) in seen:
                continue
            seen.add(id(s))
            base = self._doc.base(s, base)
            if "$ref" in s and isinstance(s["$ref"], str):
                todo.append(self._doc.resolve(s["$ref"], base, ""))
                if self._draft7:
                    continue  # draft 7: $ref's siblings are ignored
            out.append((s, base))
            for sub in s.get("allOf", ()) if isinstance(s.get("allOf"), list) else ():
                todo.append((sub, base))
            for kw in ("anyOf", "oneOf"):  # branches of disjoint types: the value's type picks one
                if type_disjoint(self._doc, s.get(kw), base):
                    todo += [(sub, base) for sub in s[kw]]
        return out

    def _state(self, pairs) -> int:
        nodes = self._closure(pairs)
        key = frozenset(id(s) for s, _ in nodes)
        st = self._ids.get(key)
        if st is None:
            st = len(self._nodes)
            self._ids[key] = st
            self._nodes.append(tuple(nodes))
            self._unique.append(any(s.get("uniqueItems") is True and _admits(s, "array") for s, _ in nodes))
            self._below.append(any(self._hot_children(s, base) for s, base in nodes))
        return st

    def unique(self, state: int) -> bool:
        return self._unique[state]

    def below(self, state: int) -> bool:
        return self._below[state]

    def hot(self, state: int) -> bool:
        return self._unique[state] or self._below[state]

    def bounded(self, state: int) -> bool:
        """May a started item of the array at ``state`` have only finitely many completions (so
        that all of them can be duplicates)?  False only when every item schema is *open*
        (:func:`_open`: plain strings, numbers, containers without upper bounds); the guard runs
        its liveness search in bounded arrays only."""
        for s, _ in self._nodes[state]:
            prefix, rest = _item_schemas(s, self._draft7)
            if not all(_open(x) for x in list(prefix) + [rest]):
                return True
        return False

    def step(self, state: int, step) -> int:
        """The state of member ``step`` (a str key) or item ``step`` (an int index)."""
        k = (state, step)
        nxt = self._trans.get(k)
        if nxt is None:
            nxt = self._state(self._children(self._nodes[state], step))
            self._trans[k] = nxt
        return nxt

    def _children(self, nodes, step):
        out = []
        for s, base in nodes:
            if not _admits(s, "object" if isinstance(step, str) else "array"):
                continue  # a branch for another type of value
            if isinstance(step, str):
                matched = False
                props = s.get("properties")
                if isinstance(props, dict) and step in props:
                    out.append((props[step], base))
                    matched = True
                pats = s.get("patternProperties")
                if isinstance(pats, dict):
                    for pat, sub in pats.items():
                        if re.search(pat, step):
                            out.append((sub, base))
                            matched = True
                if not matched and "additionalProperties" in s:
                    out.append((s["additionalProperties"], base))
            else:
                prefix, rest = _item_schemas(s, self._draft7)
                if step < len(prefix):
                    out.append((prefix[step], base))
                elif rest is not None:
                    out.append((rest, base))
        return out

    # ------------------------------------------------------------------ reachability
    def _hot_children(self, s, base) -> bool:
        """Does a unique array sit at some path strictly below sub-schema ``s``?"""
        return any(self._hot(c, b, set()) for c, b in _child_schemas(s, base, self._draft7))

    def _hot(self, s, base, seen) -> bool:
        if not isinstance(s, dict):
            return False
        memo = self._hot_memo.get(id(s))
        if memo is not None:
            return memo
        if id(s) in seen:
            return False
        seen.add(id(s))
        res = False
        for node, b in self._closure([(s, base)]):
            if node.get("uniqueItems") is True or any(self._hot(c, cb, seen)
                                                     for c, cb in _child_schemas(node, b, self._draft7)):
                res = True
                break
        if res:  # a False reached inside a cycle may be partial: only True is kept
            self._hot_memo[id(s)] = res
        return res


def _admits(s: dict, t: str) -> bool:
    """Does schema object ``s``'s ``type`` keyword allow JSON type ``t`` ("object" or "array")?"""
    ty = s.get("type")
    return ty is None or ty == t or (isinstance(ty, list) and t in ty)


def _types(doc: SchemaDocument, s, base):
    """The set of JSON types schema ``s`` declares (through one ``$ref``), "integer" as "number";
    None when it declares none."""
    if isinstance(s, dict) and "type" not in s and isinstance(s.get("$ref"), str):
        try:
            s, base = doc.resolve(s["$ref"], doc.base(s, base), "")
        except StructgenError:
            return None
    ty = s.get("type") if isinstance(s, dict) else None
    if ty is None and isinstance(s, dict):
        # an enumeration without "type" admits the types of its values
        values = [s["const"]] if "const" in s else s.get("enum")
        if isinstance(values, list):
            return {_value_type(v) for v in values}
    if isinstance(ty, str):
        ty = [ty]
    if not isinstance(ty, list) or not all(isinstance(x, str) for x in ty):
        return None
    return {"number" if x == "integer" else x for x in ty}


def _value_type(v) -> str:
    """The JSON type of a Python value read from JSON ("integer" as "number")."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def type_disjoint(doc: SchemaDocument, branches, base="") -> bool:
    """Does at most one of ``branches`` (an ``anyOf`` / ``oneOf`` list) admit arrays, and at most
    one admit objects, by their declared types (a branch that declares none admits both)?  Then
    for a container value the only branch that can hold must hold, and a unique array below it
    is as unconditional as one reached through ``allOf`` (scalar types may overlap: they have no
    items).  A single branch always holds."""
    if not isinstance(branches, list) or not branches:
        return False
    arrays = objects = 0
    for b in branches:
        ts = _types(doc, b, base)
        arrays += ts is None or "array" in ts
        objects += ts is None or "object" in ts
    return arrays <= 1 and objects <= 1


_OPEN_KEYWORDS = frozenset({"type", "minLength", "minItems", "minProperties", "required", "uniqueItems", "items",
                            "properties", "additionalProperties", "title", "description", "default", "examples",
                            "$comment", "deprecated", "readOnly", "writeOnly"})
_OPEN_TYPES = frozenset({"string", "number", "integer", "boolean", "null", "array", "object"})


def _open(s, depth: int = 0) -> bool:
    """Does every started value of schema ``s`` have infinitely many distinct completions (literals
    aside: the guard decides them at their first byte)?  Conservative: only keyword sets that set
    no upper bound and no enumeration count (None stands for an absent ``items``)."""
    if s is None or s is True:
        return True
    if not isinstance(s, dict) or depth > 4 or not set(s) <= _OPEN_KEYWORDS:
        return False
    t = s.get("type")
    ts = t if isinstance(t, list) else [] if t is None else [t]
    if not all(x in _OPEN_TYPES for x in ts):
        return False
    if "items" in s and not (isinstance(s["items"], (dict, bool)) and s["items"] is not False
                             and _open(s["items"], depth + 1)):
        return False
    props = s.get("properties", {})
    if not isinstance(props, dict) or not all(_open(v, depth + 1) for v in props.values()):
        return False
    extra = s.get("additionalProperties", True)
    return extra is not False and _open(extra, depth + 1)


def _item_schemas(s, draft7: bool):
    """``(prefix item schemas, the schema of the items after them or None)``."""
    items = s.get("items")
    if isinstance(items, list):  # draft 7's array form
        return items, s.get("additionalItems")
    prefix = s.get("prefixItems") if not draft7 else None
    return (prefix if isinstance(prefix, list) else []), items


def _child_schemas(s, base, draft7: bool):
    """The sub-schemas applying to members or items of the value ``s`` constrains."""
    out = []
    for kw in ("properties", "patternProperties"):
        v = s.get(kw)
        if isinstance(v, dict):
            out += [(x, base) for x in v.values()]
    if "additionalProperties" in s:
        out.append((s["additionalProperties"], base))
    prefix, rest = _item_schemas(s, draft7)
    out += [(x, base) for x in prefix]
    if rest is not None:
        out.append((rest, base))
    return out


def _mark_below(doc: SchemaDocument, node, found: set, seen: set) -> None:
    """Add to ``found`` the ids of the ``uniqueItems: true`` schema objects at or below ``node``
    (through sub-schemas and ``$ref``; ``seen``: the objects visited)."""
    if isinstance(node, list):
        for x in node:
            _mark_below(doc, x, found, seen)
        return
    if not isinstance(node, dict) or id(node) in seen:
        return
    seen.add(id(node))
    if node.get("uniqueItems") is True:
        found.add(id(node))
    ref = node.get("$ref")
    if isinstance(ref, str):
        _mark_below(doc, doc.resolve(ref, doc.base(node), "")[0], found, seen)
    for k, v in node.items():
        if k not in ("enum", "const", "examples", "default"):
            _mark_below(doc, v, found, seen)


def _conditional_unique(doc: SchemaDocument) -> set:
    """The ids of the schema objects with ``uniqueItems: true`` that sit in a conditional applicator
    (or are reached from one through sub-schemas and ``$ref``): those stay with the compilers."""
    found, seen = set(), set()

    def walk(node) -> None:
        if isinstance(node, list):
            for x in node:
                walk(x)
            return
        if not isinstance(node, dict):
            return
        for k, v in node.items():
            if k in ("enum", "const", "examples", "default"):
                continue
            if k in _NAME_MAPS and isinstance(v, dict):  # property names, not keywords
                for sub in v.values():
                    walk(sub)
                continue
            if k in _CONDITIONAL and not (k in ("anyOf", "oneOf") and type_disjoint(doc, v, doc.base(node))):
                _mark_below(doc, v, found, seen)
            else:
                walk(v)

    try:
        walk(doc.root)
    finally:
        walk = None  # a recursive closure is a reference cycle: break it, so refcounting frees what it holds
    return found


def unique_plan(root, draft: str | None = None) -> UniquePlan | None:
    """The plan of ``root``'s unique arrays reached conjunctively (see the module docstring), or
    None when there are none.  ``plan.conditional``: the ids of the ``uniqueItems`` schema objects
    inside conditional applicators (or reached from one), which :func:`without_open_unique` leaves
    to the compilers."""
    try:
        doc = SchemaDocument(root, draft)
        if not _patterns_compile(doc.root):
            return None
        conditional = _conditional_unique(doc)
        plan = UniquePlan(doc)
    except StructgenError:
        return None  # the compilers name the problem with its pointer
    plan.conditional = conditional
    return plan if plan.hot(plan.root) else None


def _patterns_compile(node) -> bool:
    """Does Python's ``re`` take every ``patternProperties`` pattern (the plan matches keys with it)?"""
    if isinstance(node, list):
        return all(_patterns_compile(x) for x in node)
    if not isinstance(node, dict):
        return True
    pats = node.get("patternProperties")
    if isinstance(pats, dict):
        for p in pats:
            try:
                re.compile(p)
            except (re.error, TypeError):
                return False
    return all(_patterns_compile(v) for k, v in node.items() if k not in ("enum", "const", "examples", "default"))


def without_open_unique(root, limit: int, conditional=frozenset()):
    """``root`` without ``uniqueItems`` (the guard enforces it), except in the schema objects whose
    ids are in ``conditional`` and where the items range over at most ``limit`` values of
    ``const`` / ``enum`` / boolean / null schemas (the compilers' ``unique_items_limit``): there
    their exact construction keeps the array's length bounds and its liveness exact."""
    def keep(s) -> bool:
        if id(s) in conditional:
            return True
        if isinstance(s.get("items"), list):
            prefix, rest = _item_schemas(s, True)
        else:
            prefix, rest = _item_schemas(s, False)
        counts = [_count(x) for x in list(prefix) + [rest]]
        return all(c is not None for c in counts) and sum(counts) <= limit

    return without_keywords(root, ("uniqueItems",), keep=keep)


def _count(s):
    """How many values schema ``s`` allows when it is a const / enum / boolean / null schema."""
    if s is False:
        return 0
    if not isinstance(s, dict) or "$ref" in s:
        return None
    if "const" in s:
        return 1
    if "enum" in s and isinstance(s["enum"], list):
        return len(s["enum"])
    t = s.get("type")
    ts = t if isinstance(t, list) else [t]
    if ts and all(x in ("boolean", "null") for x in ts):
        return (2 if "boolean" in ts else 0) + (1 if "null" in ts else 0)
    return None
