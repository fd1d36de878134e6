"""Least privilege: code ringlab did not write never runs as root.

When ringlab runs as root (the governor, tracepoints, modules and the tuning state file need
it), every compile of a binary and every trial process runs as an unprivileged user instead:
kernel headers, patches, trees and ringtest sources are code from elsewhere, and a header's
``__attribute__((constructor))`` or an ``.incbin`` in a top-level ``asm`` would otherwise run
as root or embed root-only files.  The root parent keeps only what needs root.

* The user is ``ringlab-run``, a dedicated system account without a home, a shell or groups,
  created with ``useradd --system`` on first use.  A dedicated uid rather than ``nobody``
  (65534): ``nobody`` is shared with NFS root squashing and with other daemons, so its files
  and processes would be open to them and theirs to a trial.  ``RINGLAB_RUN_USER`` names
  another existing account instead (never one with uid 0), or is ``root`` to keep root for
  everything: an explicit choice of whoever sets root's environment (a machine where every
  header and tree is trusted, or a test double whose interpreter only root can reach), recorded
  in env.json as ``"dropped": false``.  It is read from the environment only, never from a run's
  files.
* The switch is util-linux ``setpriv``: real and effective uid and gid of the user, no
  supplementary groups, no capabilities (inheritable, ambient and bounding set emptied),
  ``no_new_privs`` (a setuid program cannot give root back), and the parent-death signal, so
  the process dies with ringlab.
* A compile runs in a folder the user owns (``build/unprivileged/<job>/``, 0700, removed
  after the build), on a copy of the kernel header that root made there; the root parent
  copies the linked binary out without following links.
* Where the drop cannot work (no ``setpriv``, the user cannot be found or created, an input
  the user cannot read) the build or trial fails with :class:`PrivilegeError` naming the
  reason: ringlab never falls back to compiling or running such code as root.

When ringlab does not run as root nothing changes: no prefix, no user, no staging folder.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from ringlab import paths
from ringlab.errors import RunnerError

#: the dedicated account of compiles and trials under root
DEFAULT_USER = "ringlab-run"
#: names another existing account instead of DEFAULT_USER
USER_VAR = "RINGLAB_RUN_USER"
#: folder (below the build folder) of the user's per-job work folders
WORK_SUBDIR = "unprivileged"
_PROBE_TIMEOUT_S = 60


class PrivilegeError(RunnerError):
    """Code from elsewhere cannot be built or run without root here; the message says why."""


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int


_lock = threading.Lock()
_account: dict[str, Account] = {}
_readable: set[str] = set()


#: RINGLAB_RUN_USER value that keeps root for compiles and trials
KEEP_ROOT = "root"


def dropping() -> bool:
    """True when compiles and trials must leave root: ringlab's effective uid is 0 (and
    RINGLAB_RUN_USER is not ``root``)."""
    return os.geteuid() == 0 and os.environ.get(USER_VAR) != KEEP_ROOT


def _lookup(name: str) -> Account | None:
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        return None
    return Account(name, pw.pw_uid, pw.pw_gid)


def _create(name: str) -> None:
    exe = shutil.which("useradd") or ("/usr/sbin/useradd" if os.access("/usr/sbin/useradd", os.X_OK) else None)
    if exe is None:
        raise PrivilegeError(f"ringlab runs as root, and compiles and runs code it did not write as the "
                             f"user {name!r}, which does not exist; useradd is not installed to create it: "
                             f"create the account (useradd --system {name}) or set {USER_VAR} to an "
                             "existing unprivileged user")
    argv = [exe, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
            "--shell", "/usr/sbin/nologin", "--comment", "ringlab unprivileged builds and trials", name]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PrivilegeError(f"cannot create the unprivileged user {name!r} ({e}); create it "
                             f"(useradd --system {name}) or set {USER_VAR} to an existing one") from None
    if proc.returncode != 0 and _lookup(name) is None:     # a concurrent useradd may have won
        why = (proc.stderr or proc.stdout).strip().splitlines()
        raise PrivilegeError(f"cannot create the unprivileged user {name!r} (useradd exit {proc.returncode}: "
                             f"{why[-1] if why else 'no message'}); create it (useradd --system {name}) "
                             f"or set {USER_VAR} to an existing unprivileged user")


def account() -> Account:
    """The account compiles and trials run as under root (created when it is the default and
    missing).  Raises PrivilegeError when it cannot be had."""
    name = os.environ.get(USER_VAR) or DEFAULT_USER
    with _lock:
        if name in _account:
            return _account[name]
        acc = _lookup(name)
        if acc is None:
            if name != DEFAULT_USER:
                raise PrivilegeError(f"{USER_VAR}={name!r}: no such user; allowed: an existing "
                                     f"unprivileged account, or unset for {DEFAULT_USER!r}")
            _create(name)
            acc = _lookup(name)
            if acc is None:
                raise PrivilegeError(f"the unprivileged user {name!r} was created but cannot be found")
        if acc.uid == 0 or acc.gid == 0:
            raise PrivilegeError(f"{USER_VAR}={name!r}: uid {acc.uid} gid {acc.gid}; allowed: an "
                                 "account whose uid and gid are not 0")
        _account[name] = acc
        return acc


def _setpriv() -> str:
    exe = shutil.which("setpriv")
    if exe is None:
        raise PrivilegeError("ringlab runs as root and compiles and runs code it did not write as an "
                             "unprivileged user, through util-linux setpriv, which is not installed: "
                             "install util-linux (setpriv), or run ringlab as a user")
    return exe


def prefix(pdeathsig: bool = True) -> list[str]:
    """argv prefix that runs the rest of the argv as the unprivileged user; [] when not root."""
    if not dropping():
        return []
    acc = account()
    out = [_setpriv(), f"--reuid={acc.uid}", f"--regid={acc.gid}", "--clear-groups",
           "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    if pdeathsig:
        out += ["--pdeathsig", "KILL"]
    return out + ["--"]


_local = threading.local()


@contextlib.contextmanager
def as_written():
    """Within it :func:`wrap` leaves argv as it is: for rebuilding a command to describe it
    (provenance), not to run it; nothing is looked up or created."""
    old = getattr(_local, "describe", False)
    _local.describe = True
    try:
        yield
    finally:
        _local.describe = old


def wrap(argv: list[str]) -> list[str]:
    """``argv`` run as the unprivileged user (unchanged when not root)."""
    if getattr(_local, "describe", False):
        return [str(a) for a in argv]
    return [*prefix(), *map(str, argv)]


def strip(argv: list[str]) -> list[str]:
    """``argv`` without the :func:`prefix` it holds (at its start, or after a wrapper's ``--``):
    what the command is, whoever runs it."""
    out, i, argv = [], 0, [str(a) for a in argv]
    while i < len(argv):
        a = argv[i]
        if os.path.basename(a) == "setpriv" and "--" in argv[i + 1:]:
            end = argv.index("--", i + 1)
            if any(x.startswith("--reuid=") for x in argv[i + 1:end]):
                i = end + 1
                continue
        out.append(a)
        i += 1
    return out


def env(base: dict[str, str] | None = None, home: Path | None = None) -> dict[str, str]:
    """The environment of a dropped process: ``base`` (default: ours) with HOME, USER and
    LOGNAME of the user (HOME its work folder, or /nonexistent), and no bytecode writes."""
    out = dict(os.environ if base is None else base)
    if dropping():
        acc = account()
        out.update(HOME=str(home) if home else "/nonexistent", USER=acc.name, LOGNAME=acc.name,
                   PYTHONDONTWRITEBYTECODE="1")
    return out


def check_readable(files: list[Path], what: str) -> None:
    """Raise PrivilegeError naming the first of ``files`` (files to read, folders to search) the
    unprivileged user cannot reach; nothing when not root."""
    if not dropping():
        return
    todo = []
    for f in files:
        p = str(Path(f).resolve())
        if p not in _readable:
            todo.append(p)
    if not todo:
        return
    # test(1) as the user, paths as argv: nothing is interpreted by a shell
    script = 'for f do if [ -d "$f" ]; then [ -r "$f" ] && [ -x "$f" ]; else [ -r "$f" ]; fi || printf "%s\\n" "$f"; done'
    argv = wrap(["/bin/sh", "-c", script, "sh", *todo])
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, cwd="/",
                              env=env())
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PrivilegeError(f"{what}: cannot check what the unprivileged user can read ({e})") from None
    bad = [ln for ln in proc.stdout.splitlines() if ln]
    if proc.returncode != 0 and not bad:
        raise PrivilegeError(f"{what}: cannot run as the unprivileged user {account().name!r} "
                             f"({(proc.stderr or '').strip()[-200:] or f'exit {proc.returncode}'})")
    if bad:
        acc = account()
        raise PrivilegeError(f"{what}: {bad[0]} is not readable by {acc.name!r} (uid {acc.uid}), the "
                             "unprivileged user ringlab compiles and runs code it did not write as "
                             "when run as root; make it and the folders above it readable by others "
                             "(chmod o+rX), or put it in a folder others can read")
    _readable.update(todo)


def _root_folder(d: Path) -> None:
    """``d`` made (if need be) a root-owned folder that only root writes and others may search."""
    d.mkdir(parents=True, exist_ok=True)
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
        raise PrivilegeError(f"{d}: not a root-owned folder that only root can write; remove it")
    os.chmod(d, 0o755)


def _work_top() -> Path:
    """``<build>/unprivileged``, root's and searchable by others.  In a checkout the user cannot
    reach (``paths.private_checkout``) the build folder lies under PRIVATE_CHECKOUT_BUILDS: every
    folder from there down is made so too, and so is its bin/ (the user runs what it holds)."""
    build = paths.build_dir().resolve()
    if paths.private_checkout() and build.is_relative_to(paths.PRIVATE_CHECKOUT_BUILDS):
        base = paths.PRIVATE_CHECKOUT_BUILDS
        rel = build.relative_to(base).parts
        for d in [base, *(base.joinpath(*rel[:i + 1]) for i in range(len(rel))), build / "bin"]:
            _root_folder(d)
    top = build / WORK_SUBDIR
    _root_folder(top)
    return top


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.is_symlink():
            h.update(p.relative_to(folder).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def readable_copy(folder: Path, label: str) -> Path:
    """A root-owned copy of ``folder`` (ringlab's own sources) that the unprivileged user can
    read but not change, for a checkout it cannot reach (a clone in /root): made once per
    content (the digest is in its name), atomically, under the build's work folder.  Compiles
    name it with ``-ffile-prefix-map`` back to ``folder``, so the binaries are the same bytes."""
    folder = Path(folder).resolve()
    dest = _work_top() / f"{label}-{_digest(folder)}"
    if dest.is_dir():
        return dest
    tmp = Path(tempfile.mkdtemp(prefix=f".{label}-", dir=dest.parent))
    try:
        copy = tmp / "copy"
        shutil.copytree(folder, copy, symlinks=False)
        for d, dirs, files in os.walk(copy):
            os.chmod(d, 0o755)
            for f in files:
                os.chmod(os.path.join(d, f), 0o644)
        os.chmod(tmp, 0o755)
        try:
            os.rename(copy, dest)
        except OSError:
            if not dest.is_dir():       # another build made it first: theirs is the same content
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


@contextlib.contextmanager
def workdir(label: str):
    """A fresh folder the unprivileged user owns (0700), removed afterwards; None when not root."""
    if not dropping():
        yield None
        return
    acc = account()
    top = _work_top()
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:80]
    d = Path(tempfile.mkdtemp(prefix=f"{safe}-", dir=top)).resolve()
    try:
        os.chown(d, acc.uid, acc.gid)
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def give(path: Path) -> None:
    """Hand a file or folder ringlab itself just made (inside a work folder) to the user, before
    any process of the user runs there; links are not followed."""
    acc = account()
    os.chown(path, acc.uid, acc.gid, follow_symlinks=False)


def read_bytes(path: Path) -> bytes:
    """The content of a regular file in the user's folder, read without following a link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PrivilegeError(f"{path}: not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def copy_out(src: Path, dest: Path, mode: int = 0o755) -> None:
    """Copy a regular file out of the user's folder to ``dest`` (root's), atomically, without
    following links; ``dest`` gets ``mode``."""
    data = read_bytes(src)
    tmp = dest.with_name(f".{dest.name}.copy")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb", closefd=False) as f:
            f.write(data)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    os.replace(tmp, dest)


# -- programs root runs itself ------------------------------------------------------------------
#: What a program ringlab runs as root must be (perf, named by a parameter): the end of refusal messages.
ROOT_SAFE = ("allowed: a regular executable file owned by root and not writable by group or others, "
             "reached only through folders owned by root that group and others cannot write (or, "
             "like /tmp, sticky), e.g. /usr/bin/perf")


def root_unsafe_reason(path: str | os.PathLike) -> str | None:
    """Why a program at ``path`` is unsafe to run as root, or None when it is safe.

    Safe: every folder walked to reach it, symlinks followed one by one, is owned by root and
    not writable by group or others unless sticky (then only root may replace the root-owned
    entries checked next); the file is a regular executable owned by root and not writable by
    group or others.  So no user but root can change what runs."""
    todo = list(Path(os.path.abspath(path)).parts[1:])
    cur, hops = "/", 0
    why = _unsafe_dir(cur, os.stat(cur))
    if why:
        return why
    while todo:
        name = todo.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            cur = os.path.dirname(cur)      # an ancestor already checked
            continue
        nxt = os.path.join(cur, name)
        try:
            st = os.lstat(nxt)
        except OSError as e:
            return f"cannot be examined ({nxt}: {e.strerror})"
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > 40:
                return f"has too many levels of symbolic links ({nxt})"
            target = os.readlink(nxt)
            if target.startswith("/"):
                cur = "/"
            todo[:0] = list(Path(target).parts[1:] if target.startswith("/") else Path(target).parts)
            continue
        if todo:
            why = _unsafe_dir(nxt, st)
            if why:
                return why
            cur = nxt
            continue
        if not stat.S_ISREG(st.st_mode):
            return f"is not a regular file ({nxt})"
        if st.st_uid != 0:
            return f"is owned by uid {st.st_uid}, not root ({nxt})"
        if st.st_mode & 0o022:
            return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}, {nxt})"
        if not st.st_mode & 0o111:
            return f"is not executable (mode {stat.S_IMODE(st.st_mode):04o}, {nxt})"
    return None


def _unsafe_dir(path: str, st: os.stat_result) -> str | None:
    if not stat.S_ISDIR(st.st_mode):
        return f"is not reached through folders ({path} is not one)"
    if st.st_uid != 0:
        return f"is in a folder owned by uid {st.st_uid}, not root ({path})"
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return (f"is in a folder writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}, "
                f"{path})")
    return None


def record(trial: str = "user") -> dict:
    """env.json ``privilege``: which uid ran ringlab (``parent_uid``), its compiles
    (``build_uid``) and the code under test in its trials (``trial_uid``), and the user's name.
    ``trial``: the experiment's ``trial_privilege`` ("user", "wrapper" or "root")."""
    euid = os.geteuid()
    if not dropping():
        try:
            name = pwd.getpwuid(euid).pw_name
        except KeyError:
            name = str(euid)
        return {"parent_uid": euid, "build_uid": euid, "trial_uid": euid, "user": name, "dropped": False}
    acc = account()
    out = {"parent_uid": euid, "build_uid": acc.uid, "trial_uid": acc.uid, "user": acc.name,
           "dropped": True, "via": "setpriv",
           "root_keeps": "governor, tracepoints (perf), modules (insmod, rmmod), the state file"}
    if trial == "wrapper":
        out["wrapper_uid"] = euid       # ringlab's own timing or perf wrapper; it starts the code as the user
    elif trial == "root":
        out["trial_uid"] = euid         # insmod: the code under test is a kernel module
    return out
