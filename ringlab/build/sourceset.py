"""Source sets: what a binary was built from, by content.

A source set is every file the compiler read for one binary (from its ``-MMD``
dependency file: the ring or kernel header, the compat shim, the harness; and from the
assembler's ``--MD`` file: what an ``.incbin`` or ``.include`` read) named
by a label that does not depend on where the files lie, each with the sha256 of
its content, plus the compile flags with checkout paths and the variant's name
left out.  ``source_sha256`` hashes the whole set: two binaries with the same
one were built from the same code, whatever their paths or names.

A code layout's flags (``-DRINGLAB_LAYOUT_PAD``, ``-falign-functions``: ringlab.build.layouts)
are left out of the set: they move code and change none of it, so the K layouts of one arm
share one source set.  The record next to the binary names them under ``layout``.

ringlab.build writes the set next to each binary (``NAME.source.json``);
ringlab.binaries checks a binary against the set a run asks for; provenance
compares them between variants and runs.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ringlab import paths

#: Labels of the source set (paths differ between checkouts and users; content does not).
KERNEL_HEADER_LABEL = "<kernel header>"
CSRC_LABEL = "<csrc>"
SOURCE_SUFFIX = ".source.json"


def _depfile_tokens(text: str) -> list[str]:
    """Split the prerequisite part of a make rule, undoing make's escapes.

    The compiler writes ``\\ `` for a space, ``\\#`` for ``#`` and ``$$`` for
    ``$``; an unescaped blank separates two names."""
    toks: list[str] = []
    cur: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n and text[i + 1] in " \t#":
            cur.append(text[i + 1])
            i += 2
            continue
        if ch == "$" and i + 1 < n and text[i + 1] == "$":
            cur.append("$")
            i += 2
            continue
        if ch in " \t":
            if cur:
                toks.append("".join(cur))
                cur = []
            i += 1
            continue
        cur.append(ch)
        i += 1
    if cur:
        toks.append("".join(cur))
    return toks


def parse_depfile(text: str) -> list[str]:
    """Prerequisites listed in a make-style ``-MMD`` dependency file, as file names
    (make's ``\\ ``, ``\\#`` and ``$$`` escapes undone)."""
    text = text.replace("\\\n", " ")
    deps: list[str] = []
    for line in text.splitlines():
        if ":" not in line:
            continue
        _, _, rest = line.partition(": ")
        if not rest and line.endswith(":"):
            continue
        deps.extend(_depfile_tokens(rest.strip()))
    return list(dict.fromkeys(deps))


def source_label(path: Path, header: Path | None) -> str:
    """Name of one input in a source set: the kernel header by role, csrc/ files relative,
    anything else by absolute path.  So the set names content, not where a checkout is."""
    p = Path(path).resolve()
    if header is not None and p == Path(header).resolve():
        return KERNEL_HEADER_LABEL
    try:
        return "csrc/" + p.relative_to(Path(paths.CSRC).resolve()).as_posix()
    except ValueError:
        return str(p)


def label_path(label: str, header: Path | None) -> Path:
    """The file a source label stands for in this checkout (inverse of source_label)."""
    if label == KERNEL_HEADER_LABEL:
        if header is None:
            raise ValueError("source set names a kernel header, but none was given")
        return Path(header)
    if label.startswith("csrc/"):
        return Path(paths.CSRC) / label[len("csrc/"):]
    return Path(label)


def hashed_flags(flags: list[str]) -> list[str]:
    """Compile flags as they enter the source hash: the checkout's csrc path, the kernel
    header's path and the variant's name (a label printed in the output) left out."""
    out = []
    csrc = str(Path(paths.CSRC))
    for f in flags:
        if f.startswith("-DRINGLAB_VARIANT="):
            continue
        if f.startswith("-DRINGLAB_KERNEL_HEADER="):
            out.append("-DRINGLAB_KERNEL_HEADER=" + KERNEL_HEADER_LABEL)
            continue
        out.append(f.replace(csrc, CSRC_LABEL))
    return out


def source_set(files: dict[str, str], flags: list[str]) -> dict:
    """``{"files": {label: sha256}, "flags": [...], "source_sha256": ...}``.

    source_sha256 is the sha256 of the canonical JSON of files and flags: every file
    the compiler read for the binary (header, compat shim, harness sources, by content)
    and the flags, as :func:`hashed_flags` gives them.  Two variants with the same
    source_sha256 run the same code, wherever their headers lie."""
    files = dict(sorted(files.items()))
    flags = list(flags)
    digest = hashlib.sha256(json.dumps({"files": files, "flags": flags}, sort_keys=True,
                                       separators=(",", ":")).encode()).hexdigest()
    return {"files": files, "flags": flags, "source_sha256": digest}


def source_record_path(binary: Path) -> Path:
    """Where the source record of a binary lies: next to it, NAME.source.json."""
    return Path(binary).with_name(Path(binary).name + SOURCE_SUFFIX)


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)
