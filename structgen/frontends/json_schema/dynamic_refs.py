"""``$dynamicRef`` (2020-12) where the dynamic scope cannot change its target.

Contract: :func:`resolve_dynamic_refs` returns the document with every ``$dynamicRef`` replaced
by a ``$ref`` to the same target, or raises :class:`Unsupported` naming the pointer of one whose
target depends on the dynamic scope.  A ``$dynamicRef`` first resolves like a ``$ref``; only when
that target carries a ``$dynamicAnchor`` of the fragment's name does the outermost resource of
the dynamic scope with such an anchor win.  Every resource of any dynamic scope is in the
document (remote ones are bundled first, :mod:`.registry`), so when the whole document holds one
``$dynamicAnchor`` of that name, that one is the target whatever the scope: a plain ``$ref`` to
it (by JSON pointer within its resource) is exact.  Several: refused.
"""
from __future__ import annotations

from urllib.parse import urldefrag

from structgen.errors import Unsupported

from .keywords import DATA_KEYWORDS, SCHEMA_LISTS, SCHEMA_MAPS, SCHEMA_VALUES
from .reader import SchemaDocument, declared_draft, escape_pointer, join_uri


def _mentions(node) -> bool:
    if isinstance(node, dict):
        return "$dynamicRef" in node or any(_mentions(v) for k, v in node.items() if k not in DATA_KEYWORDS)
    if isinstance(node, list):
        return any(_mentions(x) for x in node)
    return False


def _children(node: dict):
    """``(key, path tokens, child)`` of every sub-schema of ``node``."""
    for k, v in node.items():
        if k in DATA_KEYWORDS:
            continue
        if k in SCHEMA_MAPS and isinstance(v, dict):
            for n, x in v.items():
                yield k, (k, n), x
        elif k in SCHEMA_VALUES and k in SCHEMA_LISTS and isinstance(v, list):
            for i, x in enumerate(v):
                yield k, (k, str(i)), x
        elif k in SCHEMA_VALUES:
            yield k, (k,), v


def resolve_dynamic_refs(root, draft: str | None = None):
    """``root`` with its ``$dynamicRef`` values made static (see the module docstring); ``root``
    itself when it has none or is not read as 2020-12."""
    draft = draft or ("draft7" if declared_draft(root) is not None else "2020-12")
    if draft != "2020-12" or not _mentions(root):
        return root
    doc = SchemaDocument(root, "2020-12")
    dyn: dict = {}      # anchor name -> [(resource URI, pointer in it)]
    plain: set = set()  # (resource URI, anchor) of $anchor

    def index(node, base: str, rptr: str) -> None:
        if not isinstance(node, dict):
            return
        nb = doc.base_of.get(id(node), base)
        if nb != base or (not rptr and node is root):
            rptr = ""
        uri = urldefrag(nb)[0]
        if isinstance(node.get("$dynamicAnchor"), str):
            dyn.setdefault(node["$dynamicAnchor"], []).append((uri, rptr, node))
        if isinstance(node.get("$anchor"), str):
            plain.add((uri, node["$anchor"]))
        for _, path, x in _children(node):
            index(x, nb, rptr + "".join("/" + escape_pointer(p) for p in path))

    index(root, doc.root_base, "")

    def rewrite(node, base: str, ptr: str):
        if not isinstance(node, dict):
            return node
        nb = doc.base_of.get(id(node), base)
        out = None
        for k, path, x in _children(node):
            new = rewrite(x, nb, ptr + "".join("/" + escape_pointer(p) for p in path))
            if new is not x:
                if out is None:
                    out = {kk: (dict(vv) if kk in SCHEMA_MAPS and isinstance(vv, dict) else
                                list(vv) if isinstance(vv, list) else vv) for kk, vv in node.items()}
                if len(path) == 2 and k in SCHEMA_MAPS:
                    out[k][path[1]] = new
                elif len(path) == 2:
                    out[k][int(path[1])] = new
                else:
                    out[k] = new
        ref = node.get("$dynamicRef")
        if isinstance(ref, str):
            out = dict(node) if out is None else out
            del out["$dynamicRef"]
            target = _static_target(ref, nb, dyn, plain, f"{ptr}/$dynamicRef")
            if "$ref" in out:
                out["allOf"] = list(out.get("allOf") or []) + [{"$ref": target}]
            else:
                out["$ref"] = target
        return node if out is None else out

    return rewrite(root, doc.root_base, "")


def _static_target(ref: str, base: str, dyn: dict, plain: set, ptr: str) -> str:
    full = join_uri(base, ref)
    uri, frag = urldefrag(full)
    if not frag or frag.startswith("/") or (uri, frag) in plain:
        return full  # a pointer or a plain anchor: exactly a $ref
    here = [d for d in dyn.get(frag, ()) if d[0] == uri]
    if not here:
        return full  # no dynamic anchor there: a $ref (the reader names it when unresolvable)
    every = dyn[frag]
    if len(every) > 1:
        raise Unsupported(f"$dynamicRef {ref!r}: {len(every)} resources declare $dynamicAnchor {frag!r}, "
                          f"so its target depends on the dynamic scope", f"#{ptr}")
    u, p, _ = every[0]
    return f"{u}#{p}"
