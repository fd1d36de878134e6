"""The cache of resolved kernel headers: build/kernel_headers/, one folder per header.

A header taken from git or patched is written there (by commit sha, or by the hash of base and
patch) with a ``source.json`` next to it that records where its bytes came from; a later
resolve of that cached file returns the same record (:func:`cached_record`).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ringlab import paths
from ringlab.sources.header_files import KernelHeaderError, read_header_bytes

SOURCE_RECORD = "source.json"


@dataclass
class HeaderSource:
    """One resolved header source: the file to compile and where its bytes came from."""
    spec: str
    header: Path
    sha256: str                   # of the header's content
    record: dict                  # provenance: kind, spec, header, sha256 and the kind's fields


def header_cache_dir() -> Path:
    return paths.build_dir() / "kernel_headers"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_path(p: Path) -> str:
    return sha256_bytes(read_header_bytes(p))


def cached_record(header: Path) -> dict | None:
    side = header.with_name(SOURCE_RECORD)
    try:
        header.relative_to(header_cache_dir().resolve())
    except ValueError:
        return None
    try:
        rec = json.loads(side.read_text())
    except (OSError, ValueError):
        return None
    try:
        return rec if rec.get("sha256") == sha256_path(header) else None
    except KernelHeaderError:
        return None


def store(dirname: Path, data: bytes, record: dict) -> Path:
    """Write header bytes and their record into the cache (atomically); return the header path."""
    dirname.mkdir(parents=True, exist_ok=True)
    header = dirname / "ptr_ring.h"
    record = dict(record, header=str(header.resolve()), sha256=sha256_bytes(data))
    for path, payload in ((header, data), (dirname / SOURCE_RECORD,
                                           json.dumps(record, indent=1, sort_keys=True).encode())):
        fd, tmp = tempfile.mkstemp(dir=dirname, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, path)
    return header.resolve()
