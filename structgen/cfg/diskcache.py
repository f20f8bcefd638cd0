"""diskcache: the grammar engine's parts persisted through :class:`structgen.caching.DiskCache`.

The slow, vocabulary-independent steps of compiling a grammar — Lark's loader
(text -> :class:`~structgen.cfg.grammar.CFG`, kind ``"lark"``) and normalisation (CFG -> lexer
DFAs, kind ``"norm"``) — are stored per kind in the namespace ``cfg-<kind>`` of the one disk
cache, so a new process pays a file read instead.  Format, versioning (a stale or damaged entry
is ignored and rewritten), atomic writes and the directory (``$STRUCTGEN_CACHE_DIR``; empty
disables it) are those of :mod:`structgen.caching`.
"""
from __future__ import annotations

from .. import caching

__all__ = ["cache_dir", "load", "store"]

_STORES: dict = {}


def _store(kind: str) -> caching.DiskCache:
    st = _STORES.get(kind)
    if st is None:
        st = _STORES[kind] = caching.DiskCache(f"cfg-{kind}")
    return st


def cache_dir():
    """The disk cache's root directory in use, or None when it is disabled."""
    return caching.cache_dir()


def load(kind: str, key: bytes):
    """The object stored under (kind, key), or None."""
    return _store(kind).load(key)


def store(kind: str, key: bytes, obj) -> None:
    """Store ``obj`` under (kind, key); silently skipped when the directory is not writable."""
    _store(kind).store(key, obj)
