"""Remote references: the resources a schema's ``$ref`` values name, bundled from a registry.

Contract: :func:`bundle_remote` returns ``root`` with every resource it references (directly or
through other bundled resources) and that ``registry`` holds embedded as a schema resource of
its own (``$id`` = the URI it was found under, in the root's ``$defs`` -- ``definitions`` for
draft-07), so that the one reader resolves them as it resolves any embedded ``$id``: relative
references inside a resource resolve against its URI.  Nothing is ever fetched: a URI that
neither the document nor the registry holds is left to the reader, which names it (a reference
no compiler reaches costs nothing).

``registry``: a ``referencing.Registry`` (the library ``jsonschema`` uses; only the resources it
holds are read -- its ``retrieve`` callable is never called) or a plain mapping of URI to schema.
The official meta-schemas (drafts 3 to 2020-12, as the installed ``jsonschema_specifications``
package ships them, the copies ``jsonschema`` itself validates with) resolve without a registry
(:func:`mentions_meta_schema`); a registry that holds the same URI wins.
"""
from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urldefrag

from structgen.errors import SchemaError

from .keywords import DATA_KEYWORDS
from .reader import SchemaDocument, any_schema_object, declared_draft, join_uri

_PREFIX = "structgen:remote:"


_META_PREFIXES = ("http://json-schema.org/", "https://json-schema.org/")
_META: dict = {}


def meta_schemas() -> dict:
    """``{URI: schema}`` of the official meta-schemas (read once from ``jsonschema_specifications``)."""
    if not _META:
        try:
            from jsonschema_specifications import REGISTRY
        except ImportError:  # pragma: no cover -- a dependency of jsonschema, which structgen requires
            return _META
        _META.update({uri: res.contents for uri, res in REGISTRY.items()})
    return _META


def _names_meta(x: dict) -> bool:
    return any(isinstance(x.get(k), str) and x[k].startswith(_META_PREFIXES) for k in ("$ref", "$dynamicRef"))


def mentions_meta_schema(root) -> bool:
    """Does a ``$ref`` / ``$dynamicRef`` in ``root`` name an official meta-schema by its absolute
    URI (``http(s)://json-schema.org/...``)?  A cheap walk that decides whether to bundle them."""
    return any_schema_object(root, _names_meta)


def lookup(registry, uri: str):
    """The schema ``registry`` holds under ``uri`` (a trailing empty fragment ignored), else the
    official meta-schema of that URI, or None."""
    found = _lookup(registry, uri)
    if found is None and uri.startswith(_META_PREFIXES):
        meta = meta_schemas()
        found = meta.get(uri[:-1] if uri.endswith("#") else uri)
    return found


def _lookup(registry, uri: str):
    if registry is None:
        return None
    keys = (uri, uri + "#") if not uri.endswith("#") else (uri, uri[:-1])
    if isinstance(registry, Mapping):  # a plain mapping, or a referencing.Registry (a Mapping too)
        for k in keys:
            if k in registry:
                res = registry[k]
                return res.contents if not isinstance(res, (dict, bool)) and hasattr(res, "contents") else res
        return None
    for k in keys:
        try:
            res = registry[k]  # a referencing.Registry: stored resources only, no retrieval
        except Exception:  # noqa: BLE001 -- NoSuchResource and friends: simply not held
            continue
        return getattr(res, "contents", res)
    return None


def _refs(node, base: str, doc: SchemaDocument, out: list) -> None:
    """``(absolute URI without fragment)`` of every ``$ref`` / ``$dynamicRef`` under ``node``."""
    if isinstance(node, list):
        for x in node:
            _refs(x, base, doc, out)
        return
    if not isinstance(node, dict):
        return
    base = doc.base_of.get(id(node), base)
    for k, v in node.items():
        if k in ("$ref", "$dynamicRef", "$recursiveRef") and isinstance(v, str):
            out.append(urldefrag(join_uri(base, v))[0])
        elif k not in DATA_KEYWORDS and isinstance(v, (dict, list)):
            _refs(v, base, doc, out)


def bundle_remote(root, registry, draft: str | None = None):
    """``root`` with the referenced resources of ``registry`` embedded (see the module
    docstring); ``root`` itself when it references none."""
    if registry is None and not mentions_meta_schema(root):
        return root
    if registry is not None and not isinstance(registry, Mapping) and not hasattr(registry, "__getitem__"):
        raise SchemaError("registry must be a referencing.Registry or a mapping of URI to schema")
    draft = draft or ("draft7" if declared_draft(root) is not None else "2020-12")
    doc = SchemaDocument(root, draft)
    known = set(doc.by_uri)
    found: dict = {}
    todo: list = []
    _refs(root, doc.root_base, doc, todo)
    while todo:
        uri = todo.pop()
        if uri in known or uri in found or not uri:
            continue
        res = lookup(registry, uri)
        if res is None:
            continue
        res = _as_resource(res, uri, draft)
        found[uri] = res
        sub = SchemaDocument(res, draft)
        known |= set(sub.by_uri)
        _refs(res, uri, sub, todo)
    if not found:
        return root
    defs_kw = "definitions" if draft == "draft7" else "$defs"
    embedded = {f"{_PREFIX}{i}": r for i, r in enumerate(found.values())}
    if isinstance(root, dict):
        out = dict(root)
        defs = out.get(defs_kw)
        # (draft-07: a $ref beside them ignores them as constraints; as an index they still count)
        out[defs_kw] = dict(defs, **embedded) if isinstance(defs, dict) else embedded
        return out
    return {"allOf": [root], defs_kw: embedded}


def _as_resource(res, uri: str, draft: str):
    """``res`` as an embedded resource identified by ``uri``."""
    if isinstance(res, bool):
        return {"$id": uri} if res else {"$id": uri, "not": {}}
    if not isinstance(res, dict):
        raise SchemaError(f"the registry's resource {uri!r} is not a schema")
    out = dict(res)
    own = out.get("$id")
    if isinstance(own, str) and urldefrag(join_uri(uri, own))[0] != uri:
        # a resource found under another URI than its own $id: keep both names
        inner = dict(out)
        inner["$id"] = join_uri(uri, own)
        out = {"$id": uri, "allOf": [inner]}
        return out
    out["$id"] = uri
    if draft == "draft7" and "$ref" in out:
        # draft-07 ignores $id beside $ref: identify the resource on a wrapper instead
        keep = {k: v for k, v in out.items() if k in ("definitions", "$defs")}
        return {**keep, "$id": uri, "allOf": [{"$ref": out["$ref"]}]}
    return out
