"""Every git command ringlab runs, hardened against the repository it runs in.

ringlab often runs as root and reads repositories that users name (``git:TREE@REV``,
``ringlab bisect -p tree``) and its own checkout.  A repository's own configuration can
name programs that git runs on its behalf: hooks, ``core.fsmonitor``, ``core.pager``,
``diff.external``, textconv and merge drivers, smudge/clean filters (``filter.X.smudge``
with ``* filter=X`` in ``.git/info/attributes``), ``core.sshCommand``, signature
verification (``log.showSignature`` with ``gpg.program``), credential helpers, editors.
So every call here:

* runs with a clean environment: no inherited ``GIT_*`` variables (``GIT_DIR``,
  ``GIT_SSH_COMMAND``, ``GIT_EXTERNAL_DIFF``, ``GIT_CONFIG_PARAMETERS``, ``GIT_CONFIG_COUNT``...),
  no ``PAGER``/``EDITOR``/``VISUAL``/``SSH_ASKPASS``, no system or global config
  (``GIT_CONFIG_NOSYSTEM=1``, ``GIT_CONFIG_GLOBAL=/dev/null``, ``GIT_ATTR_NOSYSTEM=1``);
  editors are ``:`` (git runs none), askpass and the git:// proxy are empty, no
  transport is allowed (``GIT_ALLOW_PROTOCOL`` empty), no prompts and no pager
  (``--no-pager``), literal pathspecs, no optional index writes;
* overrides every setting git documents as running a program (HARDENING: hooks,
  fsmonitor, pager, editors, askpass, ssh, proxy, alternate refs, credential helpers,
  external diff, every gpg program, signature display, upload-pack hook, attributes
  file, submodule recursion), and, read from the repository's config before each call,
  every per-driver or per-name setting it defines (``filter.X.*``, ``diff.X.command``,
  ``diff.X.textconv``, ``merge.X.driver``, ``pager.X``, ``credential.URL.helper``,
  ``remote.X.uploadpack``, ``protocol.X.allow``... see PROGRAM_KEYS);
* passes ``--no-textconv``, ``--no-ext-diff``, ``--no-show-signature`` and
  ``--ignore-submodules=all`` to the subcommands that take them;
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
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ringlab.errors import ParamError

TIMEOUT_S = 300
#: Settings overridden on every call: each names a program git would run (or a transport,
#: a signature check, a recursion into a submodule whose config is not read here), and
#: each value runs nothing.  ``:`` is the editor git itself treats as "do not edit".
HARDENING = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "protocol.allow=never",
    "-c", "protocol.ext.allow=never",
    "-c", "core.pager=cat",
    "-c", "core.editor=:",
    "-c", "sequence.editor=:",
    "-c", "core.askPass=",
    "-c", "core.sshCommand=",
    "-c", "core.gitProxy=none",
    "-c", "core.alternateRefsCommand=",
    "-c", "core.attributesFile=/dev/null",
    "-c", "credential.helper=",
    "-c", "diff.external=",
    "-c", "gpg.program=",
    "-c", "gpg.openpgp.program=",
    "-c", "gpg.x509.program=",
    "-c", "gpg.ssh.program=",
    "-c", "gpg.ssh.defaultKeyCommand=",
    "-c", "gpg.ssh.allowedSignersFile=/dev/null",
    "-c", "log.showSignature=false",
    "-c", "commit.gpgSign=false",
    "-c", "tag.gpgSign=false",
    "-c", "uploadpack.packObjectsHook=",
    "-c", "interactive.diffFilter=",
    "-c", "web.browser=",
    "-c", "man.viewer=",
    "-c", "submodule.recurse=false",
    "-c", "status.submoduleSummary=false",
    "-c", "diff.ignoreSubmodules=all",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
)
#: Per-driver and per-name settings that run a program (or allow a transport): each one
#: the repository's config defines is overridden with the value beside it.  Keys as
#: ``git config --list`` prints them (section and name lower case, subsection as written).
PROGRAM_KEYS = (
    (re.compile(r"filter\..+\.(clean|smudge|process)"), ""),
    (re.compile(r"filter\..+\.required"), "false"),
    (re.compile(r"diff\..+\.(command|textconv)"), ""),
    (re.compile(r"merge\..+\.driver"), ""),
    (re.compile(r"(difftool|mergetool|browser|man)\..+\.(cmd|path)"), ""),
    (re.compile(r"credential\.(.+\.)?helper"), ""),
    (re.compile(r"gpg\.(.+\.)?program"), ""),
    (re.compile(r"gpg\.ssh\.defaultkeycommand"), ""),
    (re.compile(r"pager\..+"), "false"),
    (re.compile(r"remote\..+\.(uploadpack|receivepack)"), ""),
    (re.compile(r"protocol\.(.+\.)?allow"), "never"),
    (re.compile(r"submodule\..+\.update"), "none"),
    (re.compile(r"sendemail\.(.+\.)?(smtpserver|tocmd|cccmd|headercmd|sendmailcmd)"), ""),
    (re.compile(r"hook\..+\.command"), ""),
    (re.compile(r"instaweb\.(httpd|browser)"), ""),
)
#: Subcommands that take --no-textconv / --no-ext-diff / --no-show-signature /
#: --ignore-submodules.
_NO_TEXTCONV = {"diff", "log", "show", "grep", "blame"}
_NO_EXT_DIFF = {"diff", "log", "show"}
_NO_SHOW_SIGNATURE = {"log", "show", "whatchanged"}
_NO_SUBMODULES = {"status", "diff", "diff-index", "diff-files"}
_KEEP_ENV = ("PATH", "HOME", "TMPDIR")
#: Variables environment() sets that a caller's ``env`` may not change.
_HARDENED_ENV = {"GIT_PAGER", "PAGER", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_ASKPASS", "GIT_PROXY_COMMAND",
                 "GIT_ALLOW_PROTOCOL", "GIT_ATTR_NOSYSTEM", "GIT_NO_LAZY_FETCH", "GIT_EXTERNAL_DIFF",
                 "GIT_SSH", "GIT_SSH_COMMAND", "GIT_DIR", "GIT_WORK_TREE", "GIT_EXEC_PATH", "PATH"}
REGULAR_MODES = ("100644", "100755")


class GitError(ParamError):
    """git could not give what a parameter names (no such revision, no such file, refused
    repository, git missing).  The message names the repository and what is wrong."""


class GitRefused(GitError):
    """git refused the repository: it belongs to another user."""


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every git call: PATH, HOME and TMPDIR inherited, nothing else (no
    GIT_*, PAGER, EDITOR, VISUAL, SSH_ASKPASS); no pager, editor, askpass, proxy or transport."""
    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update({
        "LC_ALL": "C", "LANG": "C",
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat",
        "GIT_EDITOR": ":", "GIT_SEQUENCE_EDITOR": ":",
        # set and empty: git then ignores core.askPass, SSH_ASKPASS and core.gitProxy
        "GIT_ASKPASS": "", "GIT_PROXY_COMMAND": "",
        # set and empty: no transport at all (ext::, ssh, a promisor remote's lazy fetch)
        "GIT_ALLOW_PROTOCOL": "", "GIT_NO_LAZY_FETCH": "1",
        "GIT_LITERAL_PATHSPECS": "1", "GIT_OPTIONAL_LOCKS": "0", "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_PROTOCOL_FROM_USER": "0",
    })
    if extra:
        env.update(extra)
    return env


def argv(args: list[str] | tuple[str, ...], repo: str | Path | None = None,
         overrides: tuple[tuple[str, str], ...] = ()) -> list[str]:
    """``git --no-pager [-C repo] <hardening> <overrides> SUBCOMMAND [--no-textconv]
    [--no-ext-diff] [--no-show-signature] [--ignore-submodules=all] ARGS``; ``overrides``
    are (key, value) pairs, those ``program_overrides`` gives for the repository."""
    args = list(args)
    out = ["git", "--no-pager"]
    if repo is not None:
        out += ["-C", str(repo)]
    out += list(HARDENING)
    for key, value in overrides:
        out += ["-c", f"{key}={value}"]
    if args:
        sub, rest = args[0], args[1:]
        extra = []
        if sub in _NO_TEXTCONV:
            extra.append("--no-textconv")
        if sub in _NO_EXT_DIFF:
            extra.append("--no-ext-diff")
        if sub in _NO_SHOW_SIGNATURE:
            extra.append("--no-show-signature")
        if sub in _NO_SUBMODULES:
            extra.append("--ignore-submodules=all")
        out += [sub, *extra, *rest]
    return out


def program_overrides(keys, where: str | Path = "") -> tuple[tuple[str, str], ...]:
    """(key, harmless value) for each key in ``keys`` (as ``git config --list --name-only``
    prints them) that PROGRAM_KEYS names; every filter driver also gets empty clean, smudge
    and process commands and required=false.  GitError for a key ``-c`` cannot carry (a
    driver name holding '=')."""
    out: list[tuple[str, str]] = []
    seen = set()

    def add(key: str, value: str) -> None:
        if "=" in key:
            raise GitError(f"{where}: its git config defines {key!r}, a setting that runs a program, "
                           "under a name holding '=', which ringlab cannot override; allowed: driver "
                           "and section names without '='")
        if key not in seen:
            seen.add(key)
            out.append((key, value))
    for key in keys:
        if key.startswith("filter.") and key.count(".") >= 2:
            name = key[len("filter."):].rpartition(".")[0]
            for sub, value in (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")):
                add(f"filter.{name}.{sub}", value)
            continue
        for rx, value in PROGRAM_KEYS:
            if rx.fullmatch(key):
                add(key, value)
                break
    return tuple(out)


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
        what: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run one hardened git command (bytes in, bytes out).

    ``check``: a non-zero exit raises GitError with git's last lines (a refused
    repository raises GitRefused, without git's advice).  ``ceiling``: git does not look
    for a repository above this folder (GIT_CEILING_DIRECTORIES).  ``env``: variables
    added to the hardened environment (an author's name and date, never a GIT_CONFIG_*)."""
    extra = dict(env or {})
    if any(k.startswith("GIT_CONFIG") or k in _HARDENED_ENV for k in extra):
        raise ValueError(f"git.run: env may not set {sorted(extra)}")
    if ceiling is not None:
        extra["GIT_CEILING_DIRECTORIES"] = str(ceiling)
    label = what or f"git {args[0] if args else ''}".strip()
    if shutil.which("git", path=environment().get("PATH")) is None:
        raise GitError(f"{label}: git is not installed")
    overrides = _repo_overrides(repo, cwd, extra, timeout, label)
    cmd = argv(args, repo, overrides)
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


def _repo_overrides(repo, cwd, extra, timeout, label) -> tuple[tuple[str, str], ...]:
    """program_overrides for the config git will read in repo (or cwd): the names of its keys,
    includes followed, listed by a hardened ``git config`` (reading config runs nothing)."""
    cmd = argv(["config", "--null", "--name-only", "--list"], repo)
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout, cwd=cwd, env=environment(extra),
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    keys = [k.decode(errors="surrogateescape") for k in proc.stdout.split(b"\0") if k]
    try:
        return program_overrides(keys, repo if repo is not None else (cwd or "."))
    except GitError as e:
        raise GitError(f"{label}: {e}") from None


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
           "program_overrides", "REGULAR_MODES", "HARDENING", "PROGRAM_KEYS"]
