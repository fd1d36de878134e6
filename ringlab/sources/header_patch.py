"""Patches for a header source: fetching a lore series with b4, and applying the ptr_ring.h
hunks of each message to a copy of the base header (``git apply``, argv only).

A patch that makes a symlink, names a path outside the tree, deletes ptr_ring.h or turns it into
anything but a regular file is refused, naming the patch.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from ringlab.sources import patchmail
from ringlab.sources.header_cache import HeaderSource, header_cache_dir, sha256_bytes
from ringlab.sources.header_files import IN_TREE, KernelHeaderError, file_kind, read_header_bytes
from ringlab.system import git as hgit


def _run(argv: list[str], what: str, **kw) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, timeout=kw.pop("timeout", 120), **kw)
    except FileNotFoundError:
        raise KernelHeaderError(f"{what}: {argv[0]!r} is not installed") from None
    except subprocess.TimeoutExpired:
        raise KernelHeaderError(f"{what}: {argv[0]} timed out") from None


def _err(proc: subprocess.CompletedProcess) -> str:
    text = proc.stderr.decode(errors="replace") if isinstance(proc.stderr, bytes) else proc.stderr
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return "; ".join(lines[-3:]) or f"exit {proc.returncode}"


def fetch_lore(msgid: str) -> Path:
    """The series of lore message ``msgid`` as an mbox, fetched with ``b4 am`` (cached by id)."""
    mid = msgid.strip().strip("<>")
    if not mid or mid.startswith("-"):
        raise KernelHeaderError(f"lore:{msgid}: expected a Message-ID such as "
                                "20210101120000.1234-1-someone@example.org")
    dest = header_cache_dir() / "lore" / sha256_bytes(mid.encode())[:20]
    have = sorted(dest.glob("*.mbx")) if dest.is_dir() else []
    if have:
        return have[0]
    exe = shutil.which("b4")
    if exe is None:
        raise KernelHeaderError(f"lore:{mid}: b4 is not installed, so the series cannot be fetched "
                                "(install it with `pip install b4`, or save the series as an mbox "
                                "and give its path as PATCH)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        proc = _run([exe, "am", "-o", tmp, mid], f"lore:{mid}", timeout=300)
        mbx = sorted(Path(tmp).glob("*.mbx"))
        if proc.returncode != 0 or not mbx:
            raise KernelHeaderError(
                f"lore:{mid}: `b4 am` could not fetch the series (offline, or an unknown "
                f"Message-ID?): {_err(proc) if proc.returncode != 0 else 'b4 wrote no .mbx file'}")
        dest.mkdir(exist_ok=True)
        out = dest / mbx[0].name
        shutil.copyfile(mbx[0], out)
    return out


_MODE_LINE = re.compile(r"^(?:new file mode|new mode|old mode|deleted file mode|index [0-9a-f]+\.\.[0-9a-f]+)"
                        r"\s+(\d{6})\s*$", re.M)
_PATH_LINE = re.compile(r"^(?:diff --git a/(\S+) b/(\S+)|--- (?:a/)?(\S+)|\+\+\+ (?:b/)?(\S+)|"
                        r"rename (?:from|to) (\S+)|copy (?:from|to) (\S+))\s*$", re.M)


def check_patch(s: str, m, total: int) -> None:
    """Refuse a patch that makes a symlink or names a path outside the tree it applies to."""
    title = m.subject or "(no subject)"
    where = f"kernel header {s!r}: patch {m.index}/{total} {title!r}"
    for mm in _MODE_LINE.finditer(m.diff):
        if mm.group(1) == "120000":
            raise KernelHeaderError(f"{where}: makes a symlink (mode 120000); allowed: changes "
                                    f"to the regular file {IN_TREE}")
    for mm in _PATH_LINE.finditer(m.diff):
        path = next(g for g in mm.groups() if g)
        if path == "/dev/null":
            continue
        if path.startswith("/") or ".." in path.split("/"):
            raise KernelHeaderError(f"{where}: names the path {path!r}, outside the kernel tree; "
                                    "allowed: paths relative to the tree root")


def apply_patches(s: str, base: HeaderSource, msgs: list, total: int) -> bytes:
    """Apply the ptr_ring.h hunks of each message, in order, to a copy of the base header.

    The result must be the regular file include/linux/ptr_ring.h (not a symlink, not
    deleted) of at most MAX_HEADER_BYTES; anything else is refused naming the patch."""
    for m in msgs:
        check_patch(s, m, total)
    with tempfile.TemporaryDirectory(prefix="ringlab-patch-") as tmp:
        work = Path(tmp) / "tree"
        (work / IN_TREE).parent.mkdir(parents=True)
        (work / IN_TREE).write_bytes(read_header_bytes(base.header))
        for m in msgs:
            title = m.subject or "(no subject)"
            where = f"kernel header {s!r}: patch {m.index}/{total} {title!r}"
            pf = Path(tmp) / f"{m.index:04d}.patch"
            pf.write_text(m.diff)
            try:
                proc = hgit.apply(pf, work, include=IN_TREE, what=where)
            except hgit.GitError as e:
                raise KernelHeaderError(str(e)) from None
            if proc.returncode != 0:
                err = proc.stderr.decode(errors="replace")
                mm = re.search(r"patch failed: (\S+):(\d+)", err)
                hunk = patchmail.hunk_at(m.diff, IN_TREE, int(mm.group(2)) if mm else None)
                raise KernelHeaderError(
                    f"{where} does not apply to "
                    f"{base.spec} (sha256 {base.sha256[:12]}): "
                    + "; ".join(ln.strip() for ln in err.splitlines() if ln.startswith("error") and "while searching" not in ln)
                    + ("\nfailing hunk:\n" + hunk if hunk else ""))
            try:
                st = os.lstat(work / IN_TREE)
            except FileNotFoundError:
                raise KernelHeaderError(f"{where}: deletes {IN_TREE} (or renames it away); allowed: "
                                        f"patches that change {IN_TREE}") from None
            if not stat.S_ISREG(st.st_mode):
                raise KernelHeaderError(f"{where}: turns {IN_TREE} into {file_kind(st.st_mode)}; "
                                        "allowed: patches that keep it a regular file")
        try:
            return read_header_bytes(work / IN_TREE, follow=False)
        except KernelHeaderError as e:
            raise KernelHeaderError(f"kernel header {s!r}: the patched {IN_TREE}: "
                                    f"{str(e).split(': ', 1)[-1]}") from None
