"""Objects compiled once: the binaries that compile a source with the same flags (and the same
kernel header) share the object.  An arm's binaries of layout copies differ in their pads and
link order, not in what they compile, so a staged run's later stages, and later runs, only link.

Within one ``ringlab.build.driver.build_all`` call the objects are held in memory.  With a cache
folder they are also kept on disk (``build/bin/.objects``), each beside the list of files its
compile read and their sha256: an entry is used only while every one of those files still has
its recorded hash, so an edited source or header, or another compiler, compiles anew.  The
folder is written by the ringlab process itself (the parent, under root), never by the
unprivileged user whose compile produced the bytes."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path

from ringlab.digest import sha256_file


class SharedObjects:
    """The compiled objects, by source and flags (the user's work folder written as a
    placeholder, so two binaries' folders do not make two keys): the shared sources and the
    per-alignment measured objects of an arm's binaries of layout copies compile once.

    ``cache_dir``: where they are also kept across calls (None: this call only); ``salt``: what
    else a disk entry must match (the compiler and its version)."""

    def __init__(self, cache_dir: Path | None = None, salt: tuple = ()) -> None:
        self._lock = threading.Lock()
        self._done: dict[tuple, tuple[bytes, dict[str, str]]] = {}
        self._dir = Path(cache_dir) if cache_dir is not None else None
        self._salt = tuple(salt)

    def _entry(self, key: tuple) -> Path:
        digest = hashlib.sha256(json.dumps([list(self._salt), repr(key)]).encode()).hexdigest()
        return self._dir / digest[:40]

    def get(self, key: tuple) -> tuple[bytes, dict[str, str]] | None:
        with self._lock:
            hit = self._done.get(key)
        if hit is not None or self._dir is None:
            return hit
        hit = self._load(self._entry(key))
        if hit is not None:
            with self._lock:
                self._done.setdefault(key, hit)
        return hit

    def put(self, key: tuple, data: bytes, inputs: dict[str, str]) -> None:
        with self._lock:
            self._done.setdefault(key, (data, dict(inputs)))
        if self._dir is not None:
            self._store(self._entry(key), data, inputs)

    @staticmethod
    def _load(base: Path) -> tuple[bytes, dict[str, str]] | None:
        """The entry's bytes and inputs while every input still has its recorded hash, else None
        (a missing, torn or stale entry is compiled anew)."""
        try:
            meta = json.loads(base.with_suffix(".json").read_text())
            inputs = {str(f): str(h) for f, h in meta["inputs"].items()}
            data = base.with_suffix(".o").read_bytes()
            if hashlib.sha256(data).hexdigest() != meta["sha256"]:
                return None
            for f, h in inputs.items():
                if sha256_file(f) != h:
                    return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return data, inputs

    @staticmethod
    def _store(base: Path, data: bytes, inputs: dict[str, str]) -> None:
        """The object, then its record (each written whole, then renamed: a reader never sees
        half of one, and a record always names bytes that are there)."""
        try:
            base.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(base.with_suffix(".o"), data)
            meta = {"sha256": hashlib.sha256(data).hexdigest(), "inputs": dict(sorted(inputs.items()))}
            _write_atomic(base.with_suffix(".json"), json.dumps(meta, indent=1).encode())
        except OSError:     # a cache that cannot be written only costs a compile next time
            pass


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_new(path: Path, data: bytes) -> None:
    """``data`` into ``path`` as a new regular file (an existing entry is removed first, a link
    never followed)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


__all__ = ["SharedObjects", "write_new"]
