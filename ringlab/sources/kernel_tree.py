"""Kernel source trees as inputs: a checkout, a source tarball, a git revision, Debian's package.

The kernel's own tests (``tools/virtio/ringtest``) are built from the tree the
user points at.  A ``tree`` parameter names it in one of these forms:

* ``/path/to/linux``                  a kernel tree on disk (only read, never written)
* ``/path/to/linux-6.1.tar.xz``       a kernel source tarball (.tar, .tar.gz, .tar.xz, .tar.bz2)
* ``git:/path/to/linux@REV``          revision REV of a git checkout (any commit-ish)
* ``debian:linux-source-6.1``         Debian's ``linux-source-6.1`` package
                                      (``/usr/src/linux-source-6.1.tar.xz``)

Several trees compare as ``NAME=SPEC,NAME2=SPEC2``; without a NAME the name is
derived from the spec (the folder name, the tarball's stem, the revision).

Tarballs, revisions and the Debian package are exported into
``build/kernel-src/<key>/`` (only the paths asked for: ``tools/virtio`` and
whatever its sources include from the rest of the tree), so nothing is ever
extracted into or written below the user's tree.  A git revision is read through
ringlab.git_source (hardened git, raw blobs: no hook, filter or config program of
the repository runs).
"""
from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ringlab.paths import expand_user
from ringlab import paths
from ringlab.errors import InputFileError
from ringlab.names import NAME_RULE, name_problem
from ringlab.sources import git_source

DEBIAN_PREFIX = "debian:"
GIT_PREFIX = "git:"
DEBIAN_DEFAULT = "linux-source-6.1"
#: Where Debian's linux-source-X.Y package puts its tarball.
DEBIAN_SRC_DIR = Path("/usr/src")
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
ALLOWED = ("a kernel tree folder, a kernel source tarball, git:TREE@REV, or debian:linux-source-X.Y; "
           "several as NAME=SPEC,NAME2=SPEC2")


class TreeError(InputFileError):
    """A tree spec cannot be used.  The message says which and why."""


@dataclass(frozen=True)
class TreeSpec:
    """One parsed ``tree`` entry (nothing read from disk yet)."""
    name: str
    kind: str          # dir | tarball | git | debian
    spec: str          # as given (without NAME=)
    path: Path         # the folder, tarball, or git checkout
    rev: str = ""      # git only

    def unavailable(self) -> str | None:
        """Why this tree cannot be had on this machine, or None."""
        if self.kind == "debian":
            if not self.path.is_file():
                pkg = self.path.name.split(".tar")[0]
                return (f"Debian's {pkg} is not installed ({self.path} missing): "
                        f"apt-get install {pkg}")
            return None
        if self.kind == "git":
            if shutil.which("git") is None:
                return "git is not installed (needed for git:TREE@REV)"
            return None if self.path.is_dir() else f"git tree {self.path} does not exist"
        if not self.path.exists():
            return f"{self.path} does not exist"
        return None


def _derive_name(kind: str, path: Path, rev: str) -> str:
    if kind == "git":
        raw = rev
    elif kind in ("tarball", "debian"):
        raw = path.name
        for suf in TAR_SUFFIXES:
            if raw.endswith(suf):
                raw = raw[: -len(suf)]
                break
    else:
        raw = path.resolve().name if path.exists() else path.name
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", raw).strip("-")
    return name or "tree"


def parse_one(text: str, name: str | None = None) -> TreeSpec:
    """One SPEC (optionally already split from its NAME)."""
    text = text.strip()
    if not text:
        raise TreeError("empty tree spec")
    if text.startswith(DEBIAN_PREFIX):
        pkg = text[len(DEBIAN_PREFIX):].strip() or DEBIAN_DEFAULT
        if not re.fullmatch(r"linux-source-[0-9][0-9.]*", pkg):
            raise TreeError(f"unknown Debian package {pkg!r}: expected linux-source-X.Y")
        path = Path(os.environ.get("RINGLAB_DEBIAN_SRC_DIR", DEBIAN_SRC_DIR)) / f"{pkg}.tar.xz"
        return TreeSpec(name or _derive_name("debian", path, ""), "debian", text, path)
    if text.startswith(GIT_PREFIX):
        try:
            g = git_source.parse(text)
        except git_source.GitError as e:
            raise TreeError(str(e)) from None
        return TreeSpec(name or _derive_name("git", g.tree, g.rev), "git", text, g.tree, g.rev)
    path = expand_user(text, TreeError)
    kind = "tarball" if path.name.endswith(TAR_SUFFIXES) else "dir"
    return TreeSpec(name or _derive_name(kind, path, ""), kind, text, path)


def parse_trees(text: str) -> list[TreeSpec]:
    """``SPEC`` or ``NAME=SPEC[,NAME2=SPEC2]`` -> TreeSpecs with distinct names.

    A comma starts a new entry only when what follows looks like ``NAME=`` or a
    known prefix, so a path with a comma in it still works as a single SPEC.
    """
    parts: list[str] = []
    for seg in str(text or "").split(","):
        head = seg.strip()
        starts = (head.startswith((GIT_PREFIX, DEBIAN_PREFIX, "/", "~", "."))
                  or bool(re.match(r"^[A-Za-z0-9_.-]+=", head)))
        if parts and not starts:
            parts[-1] += "," + seg
        else:
            parts.append(seg)
    out: list[TreeSpec] = []
    for part in (p.strip() for p in parts):
        if not part:
            continue
        name = None
        m = re.match(r"^([A-Za-z0-9_.-]+)=(.*)$", part)
        if m and not part.startswith((GIT_PREFIX, DEBIAN_PREFIX)):
            name, part = m.group(1), m.group(2)
        out.append(parse_one(part, name))
    if not out:
        raise TreeError("no tree given")
    names = [t.name for t in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise TreeError(f"tree name {dup[0]!r} used twice; name them: A=SPEC,B=SPEC")
    for n in names:
        why = name_problem(n)
        if why is not None:
            raise TreeError(f"invalid tree NAME {n!r} ({why}); allowed: {NAME_RULE}")
    return out


# -- export ----------------------------------------------------------------------------
def _src_root() -> Path:
    return paths.build_dir() / "kernel-src"


def _extract(tar_source, dest: Path, prefixes: tuple[str, ...], strip_top: bool) -> int:
    """Stream a tar (path or bytes) into dest, keeping only paths under ``prefixes``.

    Returns the number of files written."""
    def want(rel: str) -> bool:
        return any(rel == p or rel.startswith(p.rstrip("/") + "/") for p in prefixes)

    n = 0
    if isinstance(tar_source, (bytes, bytearray)):
        tf = tarfile.open(fileobj=io.BytesIO(tar_source), mode="r:")
    else:
        tf = tarfile.open(tar_source, mode="r|*")  # streaming: one pass over a 140 MB .tar.xz
    with tf:
        for m in tf:
            parts = m.name.lstrip("./").split("/")
            if strip_top:
                parts = parts[1:]
            rel = "/".join(parts)
            if not rel or ".." in parts or not want(rel) or not (m.isfile() or m.isdir()):
                continue
            target = dest / rel
            if m.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            f = tf.extractfile(m)
            if f is None:
                continue
            with open(target, "wb") as out:
                shutil.copyfileobj(f, out)
            os.chmod(target, 0o755 if m.mode & 0o111 else 0o644)
            os.utime(target, (m.mtime, m.mtime))
            n += 1
    return n


def _publish(tmp: Path, final: Path) -> Path:
    """Atomic rename of a finished export; a concurrent exporter's copy wins."""
    try:
        os.rename(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not final.is_dir():
            raise
    return final


def resolve_commit(t: TreeSpec) -> str:
    """The full commit id of a git tree spec's REV."""
    try:
        return git_source.resolve_commit(git_source.parse(t.spec))
    except git_source.GitRefused as e:
        raise git_source.GitRefused(f"tree {t.name!r}: {e}") from None
    except git_source.GitError as e:
        raise TreeError(f"tree {t.name!r}: revision {t.rev!r} not found in {t.path} ({e})") from None


def export(t: TreeSpec, prefixes: tuple[str, ...]) -> tuple[Path, str]:
    """A local folder holding ``prefixes`` of the tree, and a provenance string.

    A folder tree is returned as is (read, never written).  Tarballs, git
    revisions and the Debian package are exported once into build/kernel-src/.
    """
    why = t.unavailable()
    if why:
        raise TreeError(f"tree {t.name!r}: {why}")
    if t.kind == "dir":
        if not t.path.is_dir():
            raise TreeError(f"tree {t.name!r}: {t.path} is not a folder")
        return t.path.resolve(), f"dir {t.path.resolve()}"
    key_prefixes = ",".join(sorted(prefixes))
    if t.kind == "git":
        commit = resolve_commit(t)
        prov = f"git {t.path.resolve()} {t.rev} = {commit}"
        try:
            final, _ = git_source.export(git_source.parse(t.spec), prefixes, commit)
        except git_source.GitRefused as e:
            raise git_source.GitRefused(f"tree {t.name!r}: {e}") from None
        except git_source.GitError as e:
            raise TreeError(f"tree {t.name!r}: {e}") from None
        return final, prov
    # tarball / debian
    st = t.path.stat()
    key = hashlib.sha256(f"tar\0{t.path.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\0{key_prefixes}"
                         .encode()).hexdigest()[:16]
    final = _src_root() / f"{_derive_name('tarball', t.path, '')}-{key}"
    prov = f"tarball {t.path.resolve()} ({st.st_size} bytes)"
    if final.is_dir():
        return final, prov
    _src_root().mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=_src_root()))
    try:
        n = _extract(t.path, tmp, prefixes, strip_top=True)
    except (tarfile.TarError, OSError, EOFError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise TreeError(f"tree {t.name!r}: cannot read tarball {t.path}: {e}") from None
    if n == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise TreeError(f"tree {t.name!r}: {', '.join(prefixes)} not found in {t.path}")
    return _publish(tmp, final), prov
