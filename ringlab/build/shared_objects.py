"""Objects compiled once per build: the binaries of one ``ringlab.build.driver.build_all`` call
that compile a source with the same flags (and the same kernel header) share the object.  An
arm's binaries of layout copies differ in their pads and link order, not in what they compile."""
from __future__ import annotations

import os
import threading
from pathlib import Path


class SharedObjects:
    """The objects one ``build_all`` call compiled, by source and flags (the user's work folder
    written as a placeholder, so two binaries' folders do not make two keys): the shared sources
    and the per-alignment measured objects of an arm's binaries of layout copies compile once,
    not once per binary.  Held in memory (an object is tens of kB) for that call only, so a
    source edited between two calls is compiled anew."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done: dict[tuple, tuple[bytes, dict[str, str]]] = {}

    def get(self, key: tuple) -> tuple[bytes, dict[str, str]] | None:
        with self._lock:
            return self._done.get(key)

    def put(self, key: tuple, data: bytes, inputs: dict[str, str]) -> None:
        with self._lock:
            self._done.setdefault(key, (data, dict(inputs)))


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
