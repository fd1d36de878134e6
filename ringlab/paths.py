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


#: where the build folder of a checkout that others cannot reach goes under root
PRIVATE_CHECKOUT_BUILDS = Path("/var/cache/ringlab")


def others_can_reach(path: str | os.PathLike) -> bool:
    """Whether a user with no claim on ``path`` (neither its owner nor in its group, as the
    unprivileged user of compiles and trials is) can reach it: every folder from / down to it
    searchable by others (``o+x``)."""
    p = Path(path).absolute()
    for d in (*reversed(p.parents), p):
        try:
            st = os.stat(d)
        except OSError:
            return False
        if _stat.S_ISDIR(st.st_mode) and not st.st_mode & 0o001:
            return False
    return True


def private_checkout() -> bool:
    """True when ringlab runs as root and will hand compiles and trials to an unprivileged user
    (``RINGLAB_RUN_USER`` is not ``root``: ringlab.system.privilege) while that user cannot reach
    the checkout (a clone in /root, a home folder of mode 0700)."""
    return os.geteuid() == 0 and os.environ.get("RINGLAB_RUN_USER") != "root" and not others_can_reach(ROOT)


def build_dir() -> Path:
    """Build output folder (git-ignored): RINGLAB_BUILD, else ``build/`` in the checkout; in a
    private checkout under root (:func:`private_checkout`) a root-owned folder of its own under
    :data:`PRIVATE_CHECKOUT_BUILDS` that the unprivileged user can reach (it runs the binaries)."""
    if os.environ.get("RINGLAB_BUILD"):
        return Path(os.environ["RINGLAB_BUILD"])
    if private_checkout():
        return private_checkout_folder() / "build"
    return ROOT / "build"


def private_checkout_folder() -> Path:
    """This checkout's own folder under :data:`PRIVATE_CHECKOUT_BUILDS`, named by the checkout
    and a hash of its path (other checkouts have their own): where its build folder lies when it
    is a private checkout, and what ``make clean`` removes there."""
    import hashlib
    tag = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    return PRIVATE_CHECKOUT_BUILDS / f"{ROOT.name}-{tag}"


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
