"""``$dynamicRef`` (2020-12) turned into plain ``$ref``.

Contract: :func:`resolve_dynamic_refs` returns an equivalent document without ``$dynamicRef``.
A ``$dynamicRef`` first resolves like a ``$ref``; only when that target carries a
``$dynamicAnchor`` of the fragment's name does the outermost resource of the dynamic scope with
such an anchor win.  Every resource of any dynamic scope is in the document (remote ones are
bundled first, :mod:`.registry`).

- When the whole document holds one ``$dynamicAnchor`` of each name used, that one is the target
  whatever the scope: each ``$dynamicRef`` becomes a ``$ref`` to it in place.
- Otherwise the document is specialised by scope: the only part of the dynamic scope a
  ``$dynamicRef`` can observe is, per anchor name, the outermost resource entered so far that
  declares it (a *binding*; it only grows, first entry wins, and is restored on return).  Each
  sub-schema reached from the root is copied once per binding it is reached under, into the
  root's ``$defs`` (``structgen:dyn:N``), every ``$ref`` / ``$dynamicRef`` pointing at the copy
  for its target and binding; identifiers are dropped from the copies, since every reference
  is then a JSON pointer.  The copies are finite (bindings are partial maps from the document's
  anchor names to its resources); past ``MAX_COPIES`` the rewrite raises
  :class:`LimitExceeded`.
"""
from __future__ import annotations

from urllib.parse import urldefrag

from structgen.errors import LimitExceeded, Unsupported

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

    try:
        return rewrite(root, doc.root_base, "")
    except Unsupported:
        return _specialise(root, doc, dyn)
    finally:
        index = rewrite = None  # recursive closures are reference cycles: break them, so refcounting frees what they hold


#: most sub-schema copies the scoped rewrite makes (one per sub-schema and binding)
MAX_COPIES = 5000
#: identifiers dropped from copies (every reference becomes a JSON pointer into the root)
_IDENTIFIERS = ("$id", "$anchor", "$dynamicAnchor", "$defs", "definitions")


def _specialise(root, doc: SchemaDocument, dyn: dict):
    """``root`` specialised by dynamic binding (see the module docstring)."""
    declares: dict = {}  # resource URI -> anchor names it declares
    anchor_node: dict = {}  # (resource URI, name) -> node
    for name, places in dyn.items():
        for uri, _, node in places:
            declares.setdefault(uri, []).append(name)
            anchor_node[(uri, name)] = node
    copies: dict = {}   # (id(node), binding) -> name in $defs
    defs: dict = {}

    def enter(binding: tuple, uri: str) -> tuple:
        names = declares.get(uri)
        if not names:
            return binding
        bound = dict(binding)
        for n in names:
            bound.setdefault(n, uri)
        return tuple(sorted(bound.items()))

    def copy_of(node, base: str, binding: tuple, ptr: str) -> str:
        key = (id(node), binding)
        name = copies.get(key)
        if name is None:
            if len(copies) >= MAX_COPIES:
                raise LimitExceeded(f"$dynamicRef at {ptr}: specialising the schema by dynamic scope "
                                    f"needs more than {MAX_COPIES} sub-schema copies", "MAX_COPIES", MAX_COPIES)
            name = copies[key] = f"structgen:dyn:{len(copies)}"
            defs[name] = None  # reserved: a cycle back here refers to the name
            defs[name] = walk(node, base, binding, ptr)
        return f"#/$defs/{name}"

    def walk(node, base: str, binding: tuple, ptr: str):
        if not isinstance(node, dict):
            return node
        nb = doc.base_of.get(id(node), base)
        if urldefrag(nb)[0] != urldefrag(base)[0]:
            binding = enter(binding, urldefrag(nb)[0])  # an embedded resource, entered lexically
        out = {}
        refs = []
        for k, v in node.items():
            if k in _IDENTIFIERS or (k == "$schema" and node is not root):
                continue
            if k == "$ref" and isinstance(v, str):
                target, tbase = doc.resolve(v, nb, f"{ptr}/$ref")
                refs.append(copy_of(target, tbase, enter(binding, urldefrag(tbase)[0]), f"{ptr}/$ref"))
            elif k == "$dynamicRef" and isinstance(v, str):
                target, tbase = _dynamic_target(doc, v, nb, binding, anchor_node, f"{ptr}/$dynamicRef")
                refs.append(copy_of(target, tbase, enter(binding, urldefrag(tbase)[0]), f"{ptr}/$dynamicRef"))
            elif k in DATA_KEYWORDS:
                out[k] = v
            elif k in SCHEMA_MAPS and isinstance(v, dict):
                out[k] = {n: walk(x, nb, binding, f"{ptr}/{k}/{escape_pointer(n)}") for n, x in v.items()}
            elif k in SCHEMA_VALUES and k in SCHEMA_LISTS and isinstance(v, list):
                out[k] = [walk(x, nb, binding, f"{ptr}/{k}/{i}") for i, x in enumerate(v)]
            elif k in SCHEMA_VALUES:
                out[k] = walk(v, nb, binding, f"{ptr}/{k}")
            else:
                out[k] = v
        if refs:
            out["$ref"] = refs[0]
            if len(refs) > 1:
                out["allOf"] = list(out.get("allOf") or []) + [{"$ref": r} for r in refs[1:]]
        return out

    start = enter((), urldefrag(doc.root_base)[0])
    top = copy_of(root, doc.root_base, start, "")
    out = {"$ref": top, "$defs": defs}
    if isinstance(root, dict) and "$schema" in root:
        out["$schema"] = root["$schema"]
    return out


def _dynamic_target(doc: SchemaDocument, ref: str, base: str, binding: tuple, anchor_node: dict, ptr: str):
    """``(target, its base)`` of ``$dynamicRef`` ``ref`` under ``binding``."""
    target, tbase = doc.resolve(ref, base, ptr)
    frag = urldefrag(join_uri(base, ref))[1]
    if frag and not frag.startswith("/") and isinstance(target, dict) and target.get("$dynamicAnchor") == frag:
        uri = dict(binding).get(frag)
        if uri is not None and (uri, frag) in anchor_node:
            node = anchor_node[(uri, frag)]
            return node, doc.base_of.get(id(node), uri)
    return target, tbase


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
