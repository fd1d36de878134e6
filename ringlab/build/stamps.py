"""Incremental builds: what is up to date.

A binary is rebuilt only when its inputs change: a stamp next to it
(``<out_dir>/.stamps/NAME.json``) stores the compile command and the sha256 of every file the
compiler read (taken from its own ``-MMD`` dependency output, so it covers the user's kernel
header too) and every file the assembler read (GNU as's ``--MD`` output: an ``.incbin`` or
``.include`` in an ``asm`` statement).  A failed build removes the binary of that NAME with its
records (:func:`remove_binary`), so no older one can be measured in its place.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ringlab.digest import sha256_file
from ringlab.build.layouts import ALIGNS, LayoutCopies
from ringlab.build.sourceset import source_record_path


def stamp_path(out_dir: Path, name: str) -> Path:
    """Where the stamp of binary ``name`` in ``out_dir`` lies."""
    return out_dir / ".stamps" / f"{name}.json"


def stamp_key(cc: str, ccver: str, flags: list[str], sources: list[Path], ldlibs: list[str],
              copies: LayoutCopies | None) -> str:
    """The hash of a build's command: compiler, its version, flags, sources, libraries and, for a
    binary of layout copies, every copy's pad and flags."""
    layout = None if copies is None else [f"balign {max(ALIGNS)}",
                                          *([lay.pad, *lay.flags()] for lay in copies.layouts)]
    return hashlib.sha256(json.dumps([cc, ccver, flags, [str(s) for s in sources], ldlibs,
                                      *([layout] if layout else [])]).encode()).hexdigest()


def up_to_date(stamp: Path, out: Path, key: str) -> dict | None:
    """The stamp's record when binary ``out`` is up to date: built by the command ``key`` names,
    still the file it recorded, with its source record, and every input it read unchanged.
    None when it must be built again."""
    try:
        data = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return None
    if data.get("key") != key or not out.is_file() or "source" not in data:
        return None
    if not source_record_path(out).is_file():
        return None
    try:
        if sha256_file(out) != data.get("sha256"):
            return None
        for f, h in data.get("inputs", {}).items():
            if sha256_file(Path(f)) != h:
                return None
    except OSError:
        return None
    return data


def write_stamp(stamp: Path, data: dict) -> None:
    """Record a build: ``data`` holds its key, the binary's sha256, its inputs, command and source set."""
    stamp.write_text(json.dumps(data, indent=1))


def remove_binary(out_dir: Path, name: str) -> None:
    """A failed build leaves no binary of that name behind (nor its records)."""
    for p in (out_dir / name, source_record_path(out_dir / name), stamp_path(out_dir, name)):
        try:
            p.unlink()
        except FileNotFoundError:
            pass
