"""Where things live: the repository root, csrc/, build/, results/."""
from __future__ import annotations

import os
import pwd
import stat as _stat
from pathlib import Path

from ringlab.errors import ParamError, UnsafeDirError

ROOT = Path(__file__).resolve().parent.parent


def expand_user(text: str | os.PathLike, error: type[ParamError] = ParamError) -> Path:
    """``Path(text).expanduser()``, or ``error`` (a one-line RinglabError) when ``~USER`` names no
    user of this machine or the home folder is unknown."""
    try:
        return Path(text).expanduser()
    except (RuntimeError, KeyError):
        head = str(text).split("/", 1)[0]
        raise error(f"{str(text)[:80]!r}: {head[:40]!r} names no user with a home folder on this machine; "
                    "allowed: ~/PATH, ~USER/PATH of a user of this machine, or an absolute path",
                    input=str(text)) from None
CSRC = ROOT / "csrc"
NOTEBOOKS = ROOT / "notebooks"


def build_dir() -> Path:
    """Build output folder (git-ignored).  RINGLAB_BUILD overrides it."""
    return Path(os.environ.get("RINGLAB_BUILD", ROOT / "build"))


def bin_dir() -> Path:
    return build_dir() / "bin"


def scratch_dir() -> Path:
    """Where notebook runs outside ``ringlab reproduce`` go: $RINGLAB_SCRATCH or <repo>/scratch."""
    return Path(os.environ.get("RINGLAB_SCRATCH") or (ROOT / "scratch"))


def results_dir() -> Path:
    return Path(os.environ.get("RINGLAB_RESULTS", ROOT / "results"))


def _owner(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def check_private_dir(path: Path, st: os.stat_result, what: str, env: str) -> None:
    """Raise UnsafeDirError unless ``st`` (an lstat or fstat of ``path``) is a real directory
    owned by the current user and not writable by group or others."""
    fix = f"remove it (rm -r {path}) or set {env} to a folder of yours with mode 0700"
    if _stat.S_ISLNK(st.st_mode):
        raise UnsafeDirError(f"{what} {path} is a symbolic link; ringlab does not follow links there: {fix}")
    if not _stat.S_ISDIR(st.st_mode):
        raise UnsafeDirError(f"{what} {path} is not a directory: {fix}")
    mode = _stat.S_IMODE(st.st_mode)
    if st.st_uid != os.geteuid() or mode & 0o022:
        why = (f"owned by {_owner(st.st_uid)}, not by the current user ({_owner(os.geteuid())})"
               if st.st_uid != os.geteuid() else "writable by group or others")
        raise UnsafeDirError(f"{what} {path} is {why} (owner {_owner(st.st_uid)}, mode {mode:04o}); "
                             f"allowed: a directory of the current user with mode 0700: {fix}")


def private_dir(path: str | os.PathLike, what: str, env: str, parents: bool = True) -> Path:
    """``path`` as a folder only the current user can write: created with mode 0700 when
    missing, then checked with lstat (``check_private_dir``).  ``UnsafeDirError`` (exit 2)
    names the folder, its owner and mode, and how to fix it."""
    path = Path(path)
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    check_private_dir(path, os.lstat(path), what, env)
    return path
