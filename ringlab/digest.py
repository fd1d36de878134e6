"""sha256 of files, the one implementation (binaries, sources, kernel modules, run folders)."""
from __future__ import annotations

import hashlib
import os

_SHA_CACHE: dict[tuple, str] = {}


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 of a file, cached by (path, size, mtime) so per-trial hashing costs nothing."""
    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _SHA_CACHE:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _SHA_CACHE[key] = h.hexdigest()
    return _SHA_CACHE[key]
