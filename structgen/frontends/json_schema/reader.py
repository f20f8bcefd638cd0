"""The JSON Schema reader: a schema document read once, for all three compilers.

:func:`read_schema` (or :class:`SchemaDocument`) walks the document once and keeps:

- the draft: ``draft`` ("2020-12" or "draft7" semantics, from ``$schema`` unless given), the
  declared draft (``declared``: "draft-03".."draft-07" or None) and ``plain_integers``
  (draft-03/04: an integer has no fraction part);
- the ``$id`` / ``$anchor`` index (``by_uri``, ``base_of``: the base URI of each sub-schema,
  by identity) behind :meth:`SchemaDocument.resolve` (local JSON pointers, anchors,
  ``$id``-relative refs; remote refs raise :class:`Unsupported`);
- cheap facts for engine selection (:class:`Facts`: document size, free-form values, keywords
  that intersect object languages), gathered on the same walk, and
  :meth:`SchemaDocument.recursive` (does a sub-schema reach a ``$ref`` cycle?), memoised.

The typed records of what a keyword group says (object, array, string, number facets,
enum/const, combinators) are in :mod:`.records`; the keyword table in :mod:`.keywords`.
:func:`for_declared_draft` drops the keywords a declared older draft does not know (a pre-pass:
the document is read from its result).  The reader never compiles and never raises for a
sub-schema that no compiler reaches: records are read where a compiler asks for them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urldefrag, urljoin

from structgen.errors import SchemaError, StructgenError, Unsupported

from .keywords import (APPLICATORS, ARRAY_KEYWORDS, DATA_KEYWORDS, LATER_KEYWORDS, OBJECT_KEYWORDS,
                       SCHEMA_LISTS, SCHEMA_MAPS, SCHEMA_VALUES, TRIVIAL_KEYWORDS)

_DRAFT_RE = re.compile(r"draft-0[3-7]")
#: keywords that intersect object languages (see :mod:`.select`)
_INTERSECTING = ("dependentRequired", "dependentSchemas", "dependencies")
_REF_SIBLINGS = ("properties", "required", "additionalProperties", "items", "type")
#: what makes one conjunct of an ``allOf`` / ``$ref`` constrain object or array members (or
#: possibly: a ``$ref``, a combinator); ``type`` and annotations do not
_SHAPING = (OBJECT_KEYWORDS | ARRAY_KEYWORDS | APPLICATORS | {"$ref"}) - {"type"}
_FREE_KEYS = frozenset({"type", "additionalProperties", "title", "description", "default", "examples",
                        "$comment"})


def _conjuncts_shaping(node: dict) -> int:
    """How many conjuncts of ``node`` -- its own keywords, each ``allOf`` member, its ``$ref``
    target -- constrain object or array members.  With one, intersecting is merging into that
    one's declared order, which the grammar engine does exactly (and faster: a conjunct holding
    only ``type`` beside an ``allOf`` made the DFA attempt intersect with every object)."""
    n = int(any(k in _SHAPING for k in node if k not in ("allOf", "$ref")))
    if "$ref" in node:
        n += 1
    members = node.get("allOf")
    if isinstance(members, list):
        n += sum(1 for x in members if x is False or (isinstance(x, dict) and any(k in _SHAPING for k in x)))
    return n


def _open_object(node: dict) -> bool:
    """Does ``node`` describe objects whose members past the named ones may hold any value
    (``additionalProperties`` and ``unevaluatedProperties`` absent or ``true``, no
    ``patternProperties``)?  A DFA bounds how deep those values nest, the grammar engine does
    not; and with flexible whitespace such a DFA never fitted the small-schema budget on the dev
    split (31 of 31 tries failed, after 25-55 ms each)."""
    t = node.get("type")
    objects = t == "object" or (isinstance(t, list) and "object" in t) or (t is None and "properties" in node)
    return objects and node.get("additionalProperties", True) is True \
        and node.get("unevaluatedProperties", True) is True and not node.get("patternProperties")


_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def join_uri(base: str, ref: str) -> str:
    """``ref`` resolved against ``base`` (RFC 3986), also for bases ``urljoin`` leaves alone
    (``urn:`` and other non-hierarchical schemes: a fragment-only ``ref`` still attaches)."""
    if not base:
        return ref
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if _SCHEME_RE.match(ref):
        return ref
    return urljoin(base, ref)


def escape_pointer(k) -> str:
    """``k`` as one JSON pointer token (``~`` -> ``~0``, ``/`` -> ``~1``)."""
    return str(k).replace("~", "~0").replace("/", "~1")


def as_list(v, kw: str, ptr: str) -> list:
    """The sub-schema list of keyword ``kw`` (``[]`` when absent); a non-list or an empty list
    raises :class:`SchemaError` at ``ptr/kw``."""
    if v is None:
        return []
    if not isinstance(v, list) or not v:
        raise SchemaError(f"{kw} must be a non-empty array", f"{ptr}/{kw}")
    return v


def declared_draft(root) -> str | None:
    """The draft ``root``'s ``$schema`` names ("draft-03".."draft-07"), or None."""
    if isinstance(root, dict):
        sch = root.get("$schema", "")
        if isinstance(sch, str):
            m = _DRAFT_RE.search(sch)
            if m is not None:
                return m.group(0)
    return None


def always_false(s, draft: str = "2020-12") -> bool:
    """Does no value satisfy ``s`` for a reason seen without compiling it: ``false``, or ``not`` of a
    schema every value satisfies (``not: {}``, ``not: true``: a common way to forbid a property)?
    Compiling those the general way costs a complement of the whole universe."""
    if s is False:
        return True
    if not isinstance(s, dict) or "not" not in s or (draft == "draft7" and "$ref" in s):
        return False
    n = s["not"]
    return n is True or (isinstance(n, dict) and all(k in TRIVIAL_KEYWORDS for k in n))


def has_applicator(s: dict) -> bool:
    """Does ``s`` constrain values through another schema (``$ref``, ``allOf``, ``anyOf``,
    ``oneOf``, ``not``, ``if`` with ``then``/``else``)?"""
    return ("$ref" in s or "allOf" in s or "anyOf" in s or "oneOf" in s or "not" in s
            or ("if" in s and ("then" in s or "else" in s)))


_DROP = object()


_DRAFT_NEW_RE = re.compile(r"/draft/(2019-09|2020-12)/")
#: keywords 2020-12 has and 2019-09 does not (its validators ignore them)
_NOT_IN_2019 = ("prefixItems", "$dynamicRef", "$dynamicAnchor")
#: ... and that draft-07 does not have either
_NOT_IN_DRAFT7 = _NOT_IN_2019 + ("dependentRequired", "dependentSchemas", "unevaluatedItems",
                                 "unevaluatedProperties", "minContains", "maxContains", "$anchor")


def resource_draft(s) -> str | None:
    """The draft the ``$schema`` of schema object ``s`` names ("draft-03".."draft-07", "2019-09",
    "2020-12"), or None (no ``$schema``, or one naming no draft)."""
    sch = s.get("$schema") if isinstance(s, dict) else None
    if not isinstance(sch, str):
        return None
    m = _DRAFT_RE.search(sch)
    if m is not None:
        return m.group(0)
    m = _DRAFT_NEW_RE.search(sch)
    return m.group(1) if m is not None else None


def any_schema_object(root, pred, below: bool = False) -> bool:
    """Does ``pred`` hold for a dict in ``root`` (``below``: not ``root`` itself), looking through
    every dict and list but not into data keywords (``enum``, ``const``...)?  Iterative: any depth."""
    todo = [root]
    if below:
        todo = [v for k, v in root.items() if k not in DATA_KEYWORDS] if isinstance(root, dict) else []
    while todo:
        x = todo.pop()
        if isinstance(x, dict):
            if pred(x):
                return True
            todo.extend(v for k, v in x.items() if k not in DATA_KEYWORDS)
        elif isinstance(x, list):
            todo.extend(x)
    return False


def for_declared_draft(root, draft: str | None = None):
    """``root`` read as the drafts its resources declare: every schema object under a ``$schema``
    of an older draft than the one compiled (``draft``; default 2020-12, draft-07 when the root
    declares draft-03..07) loses the keywords that draft does not know (draft-03..06:
    ``if``/``then``/``else``, and before draft-06 ``const``, ``contains``, ``propertyNames``;
    compiled as 2020-12, also the keywords draft-07 or 2019-09 lack, such as ``prefixItems``), and
    under 2020-12 its array form of ``items`` becomes ``prefixItems`` (``additionalItems`` then
    ``items``): a validator of that draft ignores or reads them so.  Nested resources count (a
    ``$ref`` into a 2019-09 document stays 2019-09).  ``root`` itself when nothing changes;
    otherwise copies along the changed paths."""
    compiled = draft or ("draft7" if declared_draft(root) is not None else "2020-12")

    def dropped(d) -> set:
        out = set(LATER_KEYWORDS.get(d, ()))
        if compiled != "draft7" and d not in (None, "2020-12"):
            out.update(_NOT_IN_2019 if d == "2019-09" else _NOT_IN_DRAFT7)
        return out

    top = resource_draft(root)
    if not dropped(top) and not any_schema_object(root, lambda x: "$schema" in x, below=True):
        return root

    def walk(s, d):
        if not isinstance(s, dict):
            return s
        d = resource_draft(s) or d
        drop = dropped(d)
        if not drop:
            return _rebuilt(s, lambda k, v: _sub_walked(k, v, lambda x: walk(x, d)))
        out = _rebuilt(s, lambda k, v: _DROP if k in drop else _sub_walked(k, v, lambda x: walk(x, d)))
        if compiled != "draft7" and ("additionalItems" in out or isinstance(out.get("items"), list)):
            out = dict(out)
            extra = out.pop("additionalItems", None)
            if isinstance(out.get("items"), list):
                out["prefixItems"] = out.pop("items")
                if extra is not None:
                    out["items"] = extra
        return out

    try:
        return walk(root, top)
    finally:
        walk = None  # a recursive closure is a reference cycle: break it, or all it holds waits for the collector


def _rebuilt(s: dict, value) -> dict:
    """Schema object ``s`` with each keyword's value ``v`` replaced by ``value(k, v)`` (``_DROP``
    removes the keyword); ``s`` itself when nothing changes, else a copy."""
    out = None
    for k, v in s.items():
        new = value(k, v)
        if new is not v and out is None:
            out = dict(s)
        if out is not None:
            if new is _DROP:
                out.pop(k, None)
            else:
                out[k] = new
    return s if out is None else out


def _sub_walked(k: str, v, walk):
    """Keyword ``k``'s value ``v`` with ``walk`` applied to the sub-schemas it holds (maps, lists or
    one schema, by the keyword); ``v`` itself when none changes."""
    if k in SCHEMA_MAPS and isinstance(v, dict):
        vals = {n: walk(x) for n, x in v.items()}
        return vals if any(vals[n] is not v[n] for n in v) else v
    if k in SCHEMA_LISTS and isinstance(v, list):
        vals = [walk(x) for x in v]
        return vals if any(a is not b for a, b in zip(vals, v)) else v
    if k in SCHEMA_VALUES:
        return walk(v)
    return v


def without_keywords(root, names, keep=None):
    """``root`` with the keywords ``names`` removed from every schema object in it (sub-schemas
    found through the applicators, not inside ``const``/``enum`` values or property names) but
    those for which ``keep(schema object)`` is true; ``root`` itself when none occurs, else copies
    along the changed paths."""
    def walk(s):
        if not isinstance(s, dict):
            return s
        drop = keep is None or not keep(s)
        return _rebuilt(s, lambda k, v: _DROP if k in names and drop else _sub_walked(k, v, walk))

    try:
        return walk(root)
    finally:
        walk = None  # a recursive closure: break its cycle (see for_declared_draft)


def _declared_properties(doc, s: dict, base) -> list:
    """Property names ``s`` declares, its ``$ref`` target's (one level) and its ``allOf`` members'
    included, in key order (``doc``: the :class:`SchemaDocument` resolving the refs)."""
    out = []
    for k, v in s.items():
        if k == "properties" and isinstance(v, dict):
            out += list(v)
        elif k == "$ref" and isinstance(v, str):
            try:
                t, _ = doc.resolve(v, doc.base(s, base), "")
            except StructgenError:
                continue
            if isinstance(t, dict) and isinstance(t.get("properties"), dict):
                out += list(t["properties"])
        elif k == "allOf" and isinstance(v, list):
            for m in v:
                if isinstance(m, dict):
                    out += _declared_properties(doc, m, doc.base(s, base))
    return out


def required_in_property_order(root, draft: str | None = None):
    """``root`` with the ``required`` lists of schema objects that combine sub-schemas (``allOf``,
    a ``$ref`` with siblings) sorted in the order their parts declare ``properties``: the
    parts' declared orders then agree, and their intersection is not emptied by two orders of the
    same keys (``required`` is a set: validation does not change).  ``root`` itself when nothing
    moves, else copies along the changed paths."""
    try:
        doc = SchemaDocument(root, draft)
    except StructgenError:
        return root  # the compilers name the problem
    draft7 = doc.draft == "draft7"  # (older drafts read as draft-07: $ref siblings ignored)

    def ordered(req, order):
        rank = {k: i for i, k in enumerate(dict.fromkeys(order))}
        new = [req[i] for i in sorted(range(len(req)), key=lambda i: (rank.get(req[i], len(rank)), i))]
        return new if new != req else req

    def walk(s, hint=None):
        if not isinstance(s, dict):
            return s
        combines = "allOf" in s or ("$ref" in s and not draft7)
        order = (list(hint or []) + _declared_properties(doc, s, None)) if combines or hint else None

        def value(k, v):
            if k == "required" and order and isinstance(v, list) and all(isinstance(x, str) for x in v):
                return ordered(v, order)
            if k == "allOf" and combines:  # the members' own required lists follow the same order
                return _sub_walked(k, v, lambda x: walk(x, order))
            return _sub_walked(k, v, walk)

        return _rebuilt(s, value)

    try:
        return walk(root)
    finally:
        walk = None  # a recursive closure: break its cycle (see for_declared_draft)


@dataclass
class Facts:
    """What engine selection needs, gathered while the document is read.

    ``size``: objects in the document (sub-schemas, definitions and the maps holding them;
    ``$ref`` not followed, data keywords not entered).  ``free_form``: some ``true`` / ``{}``
    below a keyword, an object / array constrained by nothing but its type, or an object whose
    extra members may hold any value (the DFA bounds their nesting depth, the grammar engine does
    not); any ``true`` counts, ``uniqueItems: true`` included, as when the engine budgets were
    measured.  ``intersects_objects``: some sub-schema
    uses ``dependentRequired`` / ``dependentSchemas`` / ``dependencies``, or ``allOf`` or ``$ref``
    beside object / array keywords or ``type`` where two or more conjuncts constrain object or
    array members."""

    size: int = 0
    free_form: bool = False
    intersects_objects: bool = False


class SchemaDocument:
    """A schema document read once (see the module docstring).  ``draft``: "2020-12" or "draft7"
    semantics; None reads it from ``$schema``."""

    def __init__(self, root, draft: str | None = None):
        self.root = root
        self.declared = declared_draft(root)
        self.draft = draft or ("draft7" if self.declared is not None else "2020-12")
        # draft-03/04: an integer has no fraction part (1.0 is a number only); later drafts count
        # any numeral with an integral value
        sch = root.get("$schema", "") if isinstance(root, dict) else ""
        self.plain_integers = draft is None and isinstance(sch, str) and bool(re.search(r"draft-0[34]/", sch))
        self.by_uri: dict = {}
        self.base_of: dict = {}
        self.facts = Facts()
        self._rec_memo: dict = {}
        base0 = ""
        if isinstance(root, dict):
            rid = root.get("$id", root.get("id")) if self.draft == "draft7" else root.get("$id")
            if isinstance(rid, str):
                base0 = urldefrag(rid)[0]
        self.root_base = base0
        self._walk(root, base0, True, True)
        self.by_uri.setdefault(base0, root)

    # ------------------------------------------------------------------ the one walk
    def _walk(self, node, base: str, schema: bool, probe: bool, count: bool = True) -> None:
        """Index ``node`` (when ``schema``: it sits where a sub-schema does, so its ``$id`` and
        ``$anchor`` count) and gather :class:`Facts` (``probe``: the node is a value tested for
        free-form / intersection; maps of sub-schemas are counted but not tested; ``count``: it
        adds to ``size``)."""
        facts = self.facts
        if isinstance(node, list):
            for x in node:
                self._walk(x, base, schema, probe, count)
            return
        if node is True and probe:
            facts.free_form = True
            return
        if not isinstance(node, dict):
            return
        if count:
            facts.size += 1
        if probe:
            if not node:
                facts.free_form = True
            elif node.get("type") in ("object", "array") and set(node) <= _FREE_KEYS \
                    and node.get("additionalProperties", True) is not False:
                facts.free_form = True
            elif _open_object(node):
                facts.free_form = True
            if not facts.intersects_objects and (
                    any(k in node for k in _INTERSECTING)
                    or (("allOf" in node or ("$ref" in node and any(k in node for k in _REF_SIBLINGS)))
                        and _conjuncts_shaping(node) >= 2)):
                facts.intersects_objects = True
        if schema:
            base = self._index(node, base)
        for k, v in node.items():
            if k in SCHEMA_MAPS and isinstance(v, dict):
                if count:
                    facts.size += 1  # the map itself is an object of the document
                for n, x in v.items():
                    # (the size measure was taken skipping entries named like data keywords)
                    self._walk(x, base, schema, True, count and n not in DATA_KEYWORDS)
            elif k in DATA_KEYWORDS or not isinstance(v, (dict, list, bool)):
                continue
            elif k == "required":
                self._walk(v, base, False, False, count)  # names, never schemas (nor free-form values)
            else:
                # only real sub-schemas carry identifiers (an $id inside an unknown keyword does not)
                self._walk(v, base, schema and k in SCHEMA_VALUES, True, count)

    def _index(self, node: dict, base: str) -> str:
        # draft-03/04 spell $id "id" (and know no "$id": their validators ignore it)
        nid = node.get("id" if self.declared in ("draft-03", "draft-04") else "$id")
        if isinstance(nid, str) and not (self.draft == "draft7" and "$ref" in node):  # draft-07: $ref wins
            full = join_uri(base, nid)
            uri, frag = urldefrag(full)
            if frag and not uri:
                uri = base
            if frag:  # draft-07 plain-name fragment ids
                self.by_uri[f"{urldefrag(base)[0]}#{frag}"] = node
            else:
                self.by_uri[uri] = node
                base = uri
        anc = node.get("$anchor")
        if isinstance(anc, str):
            self.by_uri[f"{urldefrag(base)[0]}#{anc}"] = node
        dyn = node.get("$dynamicAnchor")
        if isinstance(dyn, str) and self.draft == "2020-12":  # also a plain anchor for $ref
            self.by_uri.setdefault(f"{urldefrag(base)[0]}#{dyn}", node)
        self.base_of[id(node)] = base
        return base

    # ------------------------------------------------------------------ lookups
    def base(self, s, default: str | None = None) -> str:
        """The base URI of sub-schema ``s`` (``default``, else the root's, when ``s`` was not read)."""
        return self.base_of.get(id(s), self.root_base if default is None else default)

    def resolve(self, ref: str, base: str, ptr: str):
        """``(target, its base URI)`` of ``$ref`` value ``ref`` met at ``ptr`` under ``base``."""
        full = join_uri(base, ref)
        uri, frag = urldefrag(full)
        if frag and not frag.startswith("/"):
            target = self.by_uri.get(f"{uri}#{frag}")
            if target is None:
                raise SchemaError(f"unresolvable $ref {ref!r}", ptr)
            return target, self.base_of.get(id(target), uri)
        doc = self.by_uri.get(uri)
        if doc is None:
            if uri and not uri.startswith(("#",)) and (":" in uri or "/" in uri or "." in uri):
                raise Unsupported(f"remote $ref {ref!r}: {uri!r} is not in the schema (pass registry= to "
                                  f"Grammar.from_json_schema; nothing is fetched)", f"#{ptr}/$ref")
            raise SchemaError(f"unresolvable $ref {ref!r}", ptr)
        node = doc
        if frag:
            for part in frag.split("/")[1:]:
                part = re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), part)
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                    node = node[int(part)]
                elif isinstance(node, dict) and part in node:
                    node = node[part]
                else:
                    raise SchemaError(f"unresolvable $ref {ref!r}", ptr)
        return node, self.base_of.get(id(node), uri)

    def recursive(self, s=None, base: str | None = None) -> bool:
        """Does ``s`` (default: the root) reach a ``$ref`` cycle (so it has no regular language)?"""
        if s is None:
            s = self.root
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
            b = self.base_of.get(id(node), b)
            res = False
            for k, v in node.items():
                if k == "$ref" and isinstance(v, str):
                    try:
                        t, tb = self.resolve(v, b, "")
                    except Exception:
                        continue
                    res = walk(t, tb)
                elif k in SCHEMA_MAPS and isinstance(v, dict) and k not in ("$defs", "definitions"):
                    res = any(walk(x, b) for x in v.values())
                elif k in SCHEMA_VALUES:
                    res = walk(v, b)
                if res:
                    break
            seen_stack.pop()
            if not res or not seen_stack:
                memo[id(node)] = (node, res)
            return res

        try:
            return walk(s, base)
        finally:
            walk = None  # a recursive closure holding the document: break the cycle (see for_declared_draft)


def read_schema(root, draft: str | None = None) -> SchemaDocument:
    """``root`` read once (see :class:`SchemaDocument`)."""
    return SchemaDocument(root, draft)


def free_form(schema) -> bool:
    """Does the schema hold a free-form value (see :class:`Facts`)?"""
    return read_schema(schema).facts.free_form


def intersects_objects(schema) -> bool:
    """Does any sub-schema use a keyword that intersects (object) languages (see :class:`Facts`)?"""
    return read_schema(schema).facts.intersects_objects
