"""DiskCache: compiled grammar parts pickled under a user cache directory, keyed by a hash.

The slow, vocabulary-independent steps of compiling a grammar — Lark's loader
(text -> :class:`~structgen.cfg.grammar.CFG`) and normalisation (CFG -> lexer
DFAs) — are stored as ``<dir>/cfg/<kind>-<sha256>.pkl`` so a new process pays a
file read instead.  The directory is ``$STRUCTGEN_CACHE_DIR`` if set (an empty
value disables the disk cache), else ``$XDG_CACHE_HOME/structgen`` or
``~/.cache/structgen``.  Entries are written atomically (temp file + rename);
an unreadable entry is ignored and rewritten.  Only files this library wrote
there are read (pickle: do not point the directory at untrusted files).
"""
from __future__ import annotations

import hashlib
import os
import pickle
import tempfile

_FORMAT = b"structgen-cfg-1"  # bump when the pickled classes change shape


def cache_dir():
    """The directory in use, or None when the disk cache is disabled."""
    d = os.environ.get("STRUCTGEN_CACHE_DIR")
    if d is not None:
        return os.path.join(d, "cfg") if d.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "structgen", "cfg")


_CODE = None


def _code_version() -> bytes:
    """Size and mtime of the modules whose output is cached, so editing them (or
    upgrading structgen) never serves a stale entry."""
    global _CODE
    if _CODE is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        parts = []
        for sub in ("cfg", "automaton", "spec"):
            d = os.path.join(root, sub)
            for name in sorted(os.listdir(d)) if os.path.isdir(d) else ():
                if name.endswith(".py"):
                    st = os.stat(os.path.join(d, name))
                    parts.append(f"{sub}/{name}:{st.st_size}:{st.st_mtime_ns}")
        _CODE = hashlib.sha256("\n".join(parts).encode()).digest()
    return _CODE


def _path(kind: str, key: bytes):
    d = cache_dir()
    if d is None:
        return None
    h = hashlib.sha256(_FORMAT + _code_version() + kind.encode() + b"\0" + key).hexdigest()[:40]
    return os.path.join(d, f"{kind}-{h}.pkl")


def load(kind: str, key: bytes):
    """The object stored under (kind, key), or None."""
    p = _path(kind, key)
    if p is None or not os.path.exists(p):
        return None
    try:
        with open(p, "rb") as f:
            return pickle.load(f)
    except Exception:  # truncated or stale entry: recompute and overwrite
        return None


def store(kind: str, key: bytes, obj) -> None:
    """Store ``obj`` under (kind, key); silently skipped when the directory is not writable."""
    p = _path(kind, key)
    if p is None:
        return
    try:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(p), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, p)
    except OSError:
        pass
