"""Every git command ringlab runs, hardened against the repository it runs in.

ringlab often runs as root and reads repositories that users name (``git:TREE@REV``)
and its own checkout.  A repository's own configuration can name programs that git
runs on its behalf: hooks, ``core.fsmonitor``, ``core.pager``, ``diff.external``,
textconv drivers, smudge/clean filters (``filter.X.smudge`` with ``* filter=X`` in
``.git/info/attributes``), ``core.sshCommand``.  So every call here:

* runs with a clean environment: no inherited ``GIT_*`` variables (``GIT_DIR``,
  ``GIT_SSH_COMMAND``, ``GIT_EXTERNAL_DIFF``...), no system or global config
  (``GIT_CONFIG_NOSYSTEM=1``, ``GIT_CONFIG_GLOBAL=/dev/null``, ``GIT_ATTR_NOSYSTEM=1``),
  no prompts and no pager, literal pathspecs, no optional index writes;
* overrides the repository's settings that name programs (``core.hooksPath=/dev/null``,
  ``core.fsmonitor=false``, ``core.pager=cat``, ``diff.external=``, ``protocol.allow=never``);
* reads files at a revision as blobs (``ls-tree`` then ``cat-file``), never through
  ``git archive``, ``git show`` or a checkout, so no filter or textconv ever runs; only
  regular files are written out, never symlinks or submodules.

A repository that git refuses because it belongs to another user (``safe.directory``)
stays refused: the error says to copy or clone it, or to run ringlab as its owner.

Only argv lists are used, never a shell.  This module imports nothing of ringlab but
ringlab.errors.
"""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ringlab.errors import ParamError

TIMEOUT_S = 300
#: Repository settings overridden on every call (each one names a program or a transport).
HARDENING = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "protocol.allow=never",
    "-c", "core.pager=cat",
    "-c", "diff.external=",
    "-c", "core.sshCommand=",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
)
#: Subcommands that take --no-textconv / --no-ext-diff.
_NO_TEXTCONV = {"diff", "log", "show", "grep", "blame"}
_NO_EXT_DIFF = {"diff", "log", "show"}
_KEEP_ENV = ("PATH", "HOME", "TMPDIR")
#: Subcommands that may read worktree files through a repository's clean/smudge filters
#: (a racily-clean file is re-hashed through its clean filter): every filter driver the
#: repository configures is emptied for them.
_WORKTREE = {"status", "diff", "diff-index", "diff-files", "update-index", "add", "checkout",
             "stash", "describe"}
REGULAR_MODES = ("100644", "100755")


class GitError(ParamError):
    """git could not give what a parameter names (no such revision, no such file, refused
    repository, git missing).  The message names the repository and what is wrong."""


class GitRefused(GitError):
    """git refused the repository: it belongs to another user."""


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every git call: a few inherited variables, no GIT_*, no pager."""
    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update({
        "LC_ALL": "C", "LANG": "C",
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat",
        "GIT_LITERAL_PATHSPECS": "1", "GIT_OPTIONAL_LOCKS": "0", "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_PROTOCOL_FROM_USER": "0",
    })
    if extra:
        env.update(extra)
    return env


def argv(args: list[str] | tuple[str, ...], repo: str | Path | None = None,
         filters: tuple[str, ...] = ()) -> list[str]:
    """``git [-C repo] <hardening> SUBCOMMAND [--no-textconv] [--no-ext-diff] ARGS``;
    each driver in ``filters`` gets empty clean, smudge and process commands."""
    args = list(args)
    out = ["git"]
    if repo is not None:
        out += ["-C", str(repo)]
    out += list(HARDENING)
    for name in filters:
        for key in ("clean", "smudge", "process"):
            out += ["-c", f"filter.{name}.{key}="]
        out += ["-c", f"filter.{name}.required=false"]
    if args:
        sub, rest = args[0], args[1:]
        extra = []
        if sub in _NO_TEXTCONV:
            extra.append("--no-textconv")
        if sub in _NO_EXT_DIFF:
            extra.append("--no-ext-diff")
        out += [sub, *extra, *rest]
    return out


def is_refusal(stderr: str) -> bool:
    s = stderr.lower()
    return "dubious ownership" in s or "safe.directory" in s or "unsafe repository" in s


def refusal_message(repo: str | Path) -> str:
    repo = Path(repo)
    try:
        owner = pwd.getpwuid(repo.stat().st_uid).pw_name
    except (OSError, KeyError):
        owner = "another user"
    try:
        me = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        me = str(os.geteuid())
    return (f"git refuses the repository {repo}: it belongs to another user ({owner}), and ringlab "
            f"will not run git inside another user's repository as {me}; copy or clone it as the "
            "user running ringlab, or run ringlab as its owner")


def run(args, repo: str | Path | None = None, *, input: bytes | None = None, cwd=None,
        timeout: float = TIMEOUT_S, check: bool = True, ceiling: str | Path | None = None,
        what: str = "") -> subprocess.CompletedProcess:
    """Run one hardened git command (bytes in, bytes out).

    ``check``: a non-zero exit raises GitError with git's last lines (a refused
    repository raises GitRefused, without git's advice).  ``ceiling``: git does not look
    for a repository above this folder (GIT_CEILING_DIRECTORIES)."""
    extra = {"GIT_CEILING_DIRECTORIES": str(ceiling)} if ceiling is not None else None
    filters = _filter_drivers(repo, cwd, extra, timeout) if args and args[0] in _WORKTREE else ()
    cmd = argv(args, repo, filters)
    label = what or f"git {args[0] if args else ''}".strip()
    if shutil.which("git", path=environment().get("PATH")) is None:
        raise GitError(f"{label}: git is not installed")
    try:
        proc = subprocess.run(cmd, input=input, capture_output=True, timeout=timeout, cwd=cwd,
                              env=environment(extra), stdin=None if input is not None else subprocess.DEVNULL)
    except FileNotFoundError:
        raise GitError(f"{label}: git is not installed") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"{label}: git timed out after {timeout:.0f} s") from None
    err = proc.stderr.decode(errors="replace")
    if proc.returncode != 0 and is_refusal(err):
        raise GitRefused(f"{label}: " + refusal_message(repo if repo is not None else (cwd or ".")))
    if check and proc.returncode != 0:
        raise GitError(f"{label}: {last_lines(err) or f'exit {proc.returncode}'}")
    return proc


def _filter_drivers(repo, cwd, extra, timeout) -> tuple[str, ...]:
    """Names of the filter drivers the repository's config defines (reading config runs nothing)."""
    cmd = argv(["config", "--get-regexp", r"^filter\."], repo)
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout, cwd=cwd, env=environment(extra),
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    names = []
    for line in proc.stdout.decode(errors="replace").splitlines():
        key = line.split(" ", 1)[0]
        name = key[len("filter."):].rpartition(".")[0]
        if name and name not in names:
            names.append(name)
    return tuple(names)


def last_lines(stderr: str | bytes, n: int = 3) -> str:
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and "safe.directory" not in ln]
    return "; ".join(lines[-n:])


def text(args, repo=None, **kw) -> str:
    """stdout of a checked call, decoded, trailing newlines removed."""
    return run(args, repo, **kw).stdout.decode(errors="replace").rstrip("\n")


# -- reading files at a revision ---------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """One ``ls-tree -r -l`` row."""
    mode: str
    type: str
    sha: str
    size: int | None
    path: str

    @property
    def regular(self) -> bool:
        return self.type == "blob" and self.mode in REGULAR_MODES


def rev_parse_commit(repo: str | Path, rev: str, **kw) -> str | None:
    """The full commit id REV names in repo, or None when it names none."""
    if rev.startswith("-"):
        raise GitError(f"REV {rev!r} starts with '-'; allowed: a commit, tag or branch name")
    proc = run(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
               repo, check=False, **kw)
    if proc.returncode != 0:
        if proc.stderr.strip():
            raise GitError(f"git cannot resolve {rev!r} to a commit in {repo}: {last_lines(proc.stderr)}")
        return None
    return proc.stdout.decode().strip()


def ls_tree(repo: str | Path, commit: str, paths: tuple[str, ...] | list[str] = (), **kw) -> list[Entry]:
    """Every entry at ``commit`` under ``paths`` (recursive; literal pathspecs)."""
    out = run(["ls-tree", "-r", "-l", "-z", "--full-tree", commit, "--", *paths], repo, **kw).stdout
    entries = []
    for rec in out.split(b"\0"):
        if not rec:
            continue
        meta, _, path = rec.partition(b"\t")
        mode, typ, sha, size = meta.decode().split()
        entries.append(Entry(mode, typ, sha, int(size) if size.isdigit() else None,
                             path.decode(errors="surrogateescape")))
    return entries


def safe_relpath(path: str) -> bool:
    """A path that stays inside the folder it is written below."""
    p = PurePosixPath(path)
    return bool(path) and not p.is_absolute() and all(part not in ("", ".", "..", ".git") for part in p.parts) \
        and "\\" not in path


def cat_blob(repo: str | Path, sha: str, max_bytes: int, **kw) -> bytes:
    """The raw bytes of one blob (never filtered), refused above ``max_bytes``."""
    size = int(text(["cat-file", "-s", sha], repo, **kw) or "0")
    if size > max_bytes:
        raise GitError(f"blob {sha[:12]} in {repo} is {size} bytes, more than the {max_bytes} allowed")
    return run(["cat-file", "blob", sha], repo, **kw).stdout


def read_file(repo: str | Path, commit: str, path: str, max_bytes: int, **kw) -> bytes:
    """The raw bytes of ``path`` at ``commit`` (a regular file of at most max_bytes)."""
    hits = [e for e in ls_tree(repo, commit, [path], **kw) if e.path == path]
    if not hits:
        raise FileNotFoundError(path)
    e = hits[0]
    if not e.regular:
        kind = {"120000": "a symlink", "160000": "a submodule"}.get(e.mode, f"mode {e.mode}")
        raise GitError(f"{path} at {commit[:12]} is {kind}, not a regular file")
    if e.size is not None and e.size > max_bytes:
        raise GitError(f"{path} at {commit[:12]} is {e.size} bytes, more than the {max_bytes} allowed")
    return cat_blob(repo, e.sha, max_bytes, **kw)


def export(repo: str | Path, commit: str, prefixes: tuple[str, ...], dest: Path, *,
           max_file: int = 64 << 20, max_total: int = 512 << 20, **kw) -> int:
    """Write the regular files under ``prefixes`` at ``commit`` into ``dest``; return how many.

    Symlinks and submodules are skipped (never followed, never written); paths that
    would leave ``dest`` are refused.  The bytes are the blobs', never filtered."""
    entries = [e for e in ls_tree(repo, commit, prefixes, **kw) if e.regular]
    total = 0
    for e in entries:
        if not safe_relpath(e.path):
            raise GitError(f"{repo} at {commit[:12]}: refusing the path {e.path!r}")
        if e.size is None or e.size > max_file:
            raise GitError(f"{repo} at {commit[:12]}: {e.path} is {e.size} bytes, more than {max_file}")
        total += e.size
    if total > max_total:
        raise GitError(f"{repo} at {commit[:12]}: {total} bytes under {', '.join(prefixes)}, more than {max_total}")
    if not entries:
        return 0
    batch = "".join(f"{e.sha}\n" for e in entries).encode()
    out = run(["cat-file", "--batch"], repo, input=batch, **kw).stdout
    pos = 0
    for e in entries:
        nl = out.index(b"\n", pos)
        header = out[pos:nl].decode().split()
        if len(header) != 3 or header[0] != e.sha or header[1] != "blob":
            raise GitError(f"{repo}: unexpected git cat-file output for {e.path}: {' '.join(header)}")
        size = int(header[2])
        data = out[nl + 1: nl + 1 + size]
        pos = nl + 1 + size + 1
        target = dest / e.path
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                     0o755 if e.mode == "100755" else 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    return len(entries)


def apply(patch: Path, cwd: Path, *, include: str | None = None, **kw) -> subprocess.CompletedProcess:
    """``git apply`` of one patch file inside ``cwd``, never looking for a repository above it."""
    args = ["apply", "--verbose"]
    if include:
        args.append(f"--include={include}")
    return run([*args, str(patch)], cwd=cwd, ceiling=Path(cwd).resolve().parent, check=False, **kw)


__all__ = ["GitError", "GitRefused", "Entry", "run", "text", "argv", "environment", "rev_parse_commit",
           "ls_tree", "read_file", "cat_blob", "export", "apply", "safe_relpath", "refusal_message",
           "REGULAR_MODES", "HARDENING"]
