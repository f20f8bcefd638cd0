"""caching: the one owner of structgen's caches, in memory and on disk.

Contract:

- :class:`LRU` is the only in-memory cache type: a thread-safe least-recently-used map bounded
  by entry count and optionally by bytes (``sizeof(value)`` per entry; a value larger than a
  quarter of the byte bound is not kept, so one huge automaton cannot flush everything else).
  It counts hits and misses.
- Every process-wide cache is registered under a dotted name: an ``LRU`` with
  ``LRU(..., name=...)`` or :func:`register`, a ``functools.lru_cache`` function with
  :func:`register_function`, any other clear-callback with :func:`on_clear`, and per-object
  caches (one per compiled grammar, one per ``Generator``) with :func:`register_group`, which
  holds its members weakly.  :func:`clear_caches` empties all of them (and, with ``disk=True``,
  the disk cache); :func:`cache_info` reports entries, bytes, hits, misses and limits per name;
  :func:`set_cache_limits` changes the bounds of a named cache.
- One disk format for everything persisted: ``<dir>/<namespace>/<sha256>.pkl``, each file a
  pickled ``{"format": FORMAT, "version": ..., "key": ..., "value": ...}`` written atomically
  (temp file + ``os.replace``).  ``version`` is structgen's version plus the size and mtime of
  its modules, so an upgrade or an edit makes old entries stale: a stale, corrupt or foreign file
  is ignored (and overwritten on the next store).  The directory is ``$STRUCTGEN_CACHE_DIR`` (an
  empty value disables the disk cache), else ``$XDG_CACHE_HOME/structgen`` or
  ``~/.cache/structgen``; :func:`disk_info` reports files and bytes per namespace.  Files are
  unpickled: only point the directory at files this library wrote.

Imports only the standard library (and nothing of structgen), so every layer may use it.
"""
from __future__ import annotations

import functools
import hashlib
import os
import pickle
import tempfile
import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable

__all__ = ["LRU", "register", "register_function", "register_group", "on_clear", "clear_caches",
           "cache_info", "set_cache_limits", "DiskCache", "cache_dir", "disk_info", "FORMAT"]

FORMAT = "structgen-cache-2"  # bump when the file layout changes


def _default_sizeof(value) -> int:
    n = getattr(value, "nbytes", 0)  # numpy arrays, and objects that report their size
    try:
        return int(n() if callable(n) else n)
    except (TypeError, ValueError):
        return 0


class LRU:
    """Least-recently-used map bounded by ``entries`` and (when ``max_bytes`` is not None) by
    the sum of ``sizeof(value)``.  ``get`` returns ``default`` (None) on a miss; None values
    are not stored.  With ``name`` it registers itself (see :func:`register`)."""

    def __init__(self, entries: int, max_bytes: int | None = None, *, sizeof: Callable[[Any], int] | None = None,
                 name: str | None = None):
        self.entries = int(entries)
        self.max_bytes = None if max_bytes is None else int(max_bytes)
        self.sizeof = sizeof or _default_sizeof
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._data: OrderedDict = OrderedDict()  # key -> (value, nbytes)
        self._lock = threading.Lock()
        if name is not None:
            register(name, self)

    def get(self, key, default=None):
        with self._lock:
            item = self._data.get(key)
            if item is None:
                self.misses += 1
                return default
            self._data.move_to_end(key)
            self.hits += 1
            return item[0]

    def put(self, key, value) -> None:
        if value is None:
            return
        nbytes = int(self.sizeof(value)) if self.max_bytes is not None else 0
        if self.max_bytes is not None and nbytes > self.max_bytes // 4:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            self._data[key] = (value, nbytes)
            self.bytes += nbytes
            self._evict()

    def _evict(self) -> None:
        while self._data and (len(self._data) > self.entries
                              or (self.max_bytes is not None and self.bytes > self.max_bytes)):
            _, (_, nb) = self._data.popitem(last=False)
            self.bytes -= nb

    def __contains__(self, key) -> bool:
        with self._lock:
            return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.bytes = 0

    def set_limits(self, entries: int | None = None, max_bytes: int | None = None) -> None:
        with self._lock:
            if entries is not None:
                self.entries = int(entries)
            if max_bytes is not None:
                self.max_bytes = int(max_bytes)
            self._evict()

    def info(self) -> dict:
        return {"entries": len(self._data), "bytes": self.bytes, "hits": self.hits, "misses": self.misses,
                "max_entries": self.entries, "max_bytes": self.max_bytes}


class _Function:
    """A ``functools.lru_cache`` function seen through the cache interface."""

    def __init__(self, fn):
        self.fn = fn

    def clear(self) -> None:
        self.fn.cache_clear()

    def info(self) -> dict:
        ci = self.fn.cache_info()
        return {"entries": ci.currsize, "bytes": None, "hits": ci.hits, "misses": ci.misses,
                "max_entries": ci.maxsize, "max_bytes": None}


class _Callback:
    """A bare clear function (a dict's ``clear``, say): clearable, sizes unknown."""

    def __init__(self, fn):
        self.fn = fn

    def clear(self) -> None:
        self.fn()

    def info(self) -> dict:
        owner = getattr(self.fn, "__self__", None)
        n = len(owner) if owner is not None and hasattr(owner, "__len__") else None
        return {"entries": n, "bytes": None, "hits": None, "misses": None, "max_entries": None, "max_bytes": None}


class _Group:
    """Per-object caches of one kind (held weakly): cleared together, reported summed."""

    def __init__(self):
        self._members: "weakref.WeakSet" = weakref.WeakSet()
        self._lock = threading.Lock()

    def add(self, member) -> None:
        with self._lock:
            self._members.add(member)

    def _live(self) -> list:
        with self._lock:
            return list(self._members)

    def clear(self) -> None:
        for m in self._live():
            m.clear()

    def info(self) -> dict:
        out = {"entries": 0, "bytes": 0, "hits": 0, "misses": 0, "max_entries": None, "max_bytes": None,
               "members": 0}
        for m in self._live():
            i = m.info()
            out["members"] += 1
            for k in ("entries", "bytes", "hits", "misses"):
                out[k] = None if out[k] is None or i.get(k) is None else out[k] + i[k]
        return out


_REGISTRY: "dict[str, Any]" = {}
_REG_LOCK = threading.Lock()


def register(name: str, cache):
    """Register ``cache`` (an object with ``clear()`` and ``info()``) as ``name``; returns it.
    Registering a name again replaces the previous cache (a reloaded module)."""
    with _REG_LOCK:
        _REGISTRY[name] = cache
    return cache


def register_function(name: str, fn):
    """Register a ``functools.lru_cache`` function; returns ``fn`` (usable as a decorator
    factory: ``@functools.partial(register_function, "regex.parse")`` or one line after it)."""
    register(name, _Function(fn))
    return fn


def on_clear(fn, name: str | None = None):
    """Register a clear callback (for caches that are not an :class:`LRU`); returns ``fn``."""
    register(name or f"callback.{getattr(fn, '__qualname__', 'fn')}.{id(fn):x}", _Callback(fn))
    return fn


def register_group(name: str) -> _Group:
    """The group registered as ``name`` (created on first use): ``group.add(obj)`` for each
    per-object cache (with ``clear()`` and ``info()``)."""
    with _REG_LOCK:
        g = _REGISTRY.get(name)
        if not isinstance(g, _Group):
            g = _REGISTRY[name] = _Group()
        return g


def clear_caches(disk: bool = False) -> None:
    """Empty every registered cache; with ``disk=True`` also delete the disk cache's files
    (``<dir>/*/*.pkl``; other files there, such as the demo tokenizer folder, are kept)."""
    with _REG_LOCK:
        caches = list(_REGISTRY.values())
    for c in caches:
        c.clear()
    if disk:
        d = cache_dir()
        if d is not None and os.path.isdir(d):
            # only the files this module writes: the directory may be shared with other things
            for ns in os.listdir(d):
                p = os.path.join(d, ns)
                if not os.path.isdir(p):
                    continue
                for f in os.listdir(p):
                    if f.endswith((".pkl", ".tmp")):
                        try:
                            os.unlink(os.path.join(p, f))
                        except OSError:
                            pass


def cache_info(disk: bool = False) -> dict:
    """``{name: {"entries", "bytes", "hits", "misses", "max_entries", "max_bytes"}}`` for every
    registered cache (None where a cache cannot tell); with ``disk=True`` also ``"disk"``:
    :func:`disk_info`."""
    with _REG_LOCK:
        items = sorted(_REGISTRY.items())
    out = {name: c.info() for name, c in items}
    if disk:
        out["disk"] = disk_info()
    return out


def set_cache_limits(name: str, entries: int | None = None, bytes: int | None = None) -> None:
    """Change the bounds of the registered :class:`LRU` ``name`` (evicting at once if needed)."""
    c = _REGISTRY.get(name)
    if c is None:
        raise KeyError(f"no cache named {name!r}; known: {sorted(_REGISTRY)}")
    if not isinstance(c, LRU):
        raise TypeError(f"cache {name!r} has no settable limits")
    c.set_limits(entries, bytes)


# ----------------------------------------------------------------------------- disk
def cache_dir() -> str | None:
    """The disk cache's root directory, or None when ``STRUCTGEN_CACHE_DIR`` is set empty."""
    d = os.environ.get("STRUCTGEN_CACHE_DIR")
    if d is not None:
        return d if d.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "structgen")


@functools.lru_cache(maxsize=1)
def _code_version() -> str:
    """structgen's modules (path, size, mtime), hashed: an edit or an upgrade changes it."""
    root = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for dirpath, dirnames, files in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                st = os.stat(os.path.join(dirpath, f))
                h.update(f"{os.path.relpath(os.path.join(dirpath, f), root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:32]


class DiskCache:
    """One namespace of the disk cache: ``load(key)`` / ``store(key, value)`` with ``key``
    bytes.  ``directory`` overrides the root (``Generator(cache_dir=...)``); by default it is
    :func:`cache_dir` read at each call, so tests may change the environment variable."""

    def __init__(self, namespace: str, directory: str | os.PathLike | None = None):
        self.namespace = namespace
        self.directory = None if directory is None else os.fspath(directory)

    def root(self) -> str | None:
        d = self.directory if self.directory is not None else cache_dir()
        return None if d is None else os.path.join(d, self.namespace)

    def path(self, key: bytes) -> str | None:
        d = self.root()
        if d is None:
            return None
        return os.path.join(d, hashlib.sha256(FORMAT.encode() + b"\0" + key).hexdigest()[:40] + ".pkl")

    def load(self, key: bytes):
        """The value stored under ``key``, or None (absent, stale, corrupt, or another key)."""
        p = self.path(key)
        if p is None or not os.path.isfile(p):
            return None
        try:
            with open(p, "rb") as f:
                rec = pickle.load(f)
            ok = (isinstance(rec, dict) and rec.get("format") == FORMAT and rec.get("version") == _code_version()
                  and rec.get("key") == hashlib.sha256(key).hexdigest())
        except Exception:  # truncated or from an older structgen: ignore, recompute, overwrite
            ok = False
        return rec["value"] if ok else None

    def store(self, key: bytes, value) -> bool:
        """Write ``value`` atomically; False (silently) when the cache is off or not writable."""
        p = self.path(key)
        if p is None:
            return False
        rec = {"format": FORMAT, "version": _code_version(), "key": hashlib.sha256(key).hexdigest(), "value": value}
        tmp = None
        try:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(p), suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                pickle.dump(rec, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, p)
            return True
        except (OSError, pickle.PicklingError, TypeError, AttributeError):
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)
            return False


def disk_info(directory: str | os.PathLike | None = None) -> dict:
    """``{"dir": root, "namespaces": {name: {"files", "bytes"}}, "files", "bytes"}``."""
    d = os.fspath(directory) if directory is not None else cache_dir()
    out = {"dir": d, "namespaces": {}, "files": 0, "bytes": 0}
    if d is None or not os.path.isdir(d):
        return out
    for ns in sorted(os.listdir(d)):
        p = os.path.join(d, ns)
        if not os.path.isdir(p):
            continue
        files = [os.path.join(p, f) for f in os.listdir(p) if f.endswith(".pkl")]
        size = sum(os.path.getsize(f) for f in files if os.path.isfile(f))
        out["namespaces"][ns] = {"files": len(files), "bytes": size}
        out["files"] += len(files)
        out["bytes"] += size
    return out
