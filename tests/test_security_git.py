"""git as a guest: a repository's own config never makes ringlab run a program, files at a
revision are read as raw blobs, a refused repository stays refused, and patched or
user-named header files must be regular files of a sane size.

The hostile repository configures every program git can be told to run (filters,
textconv, fsmonitor, hooks in .git/hooks and in core.hooksPath, pager, tar command,
ssh command, external diff); each writes a marker file.  A control test shows the
markers do appear when plain git runs in that repository.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ringlab.lab import cli
from ringlab.sources import git_source, kernel_header as kh, kernel_tree
from ringlab.sources import header_files, header_patch, header_source
from ringlab.system import checkout as provenance
from ringlab.tools import kernel_tests
from ringlab.errors import ParamError
from ringlab.system import git as hgit
from tests.fakes.ringtest_tree import write_fake_ringtest_tree

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")

DATA = Path(__file__).resolve().parent / "data" / "kernel_headers"
MAIN = DATA / "team_mainline" / "include/linux/ptr_ring.h"
IN_TREE = "include/linux/ptr_ring.h"
HOOKS = ("post-checkout", "pre-commit", "post-commit", "post-index-change", "reference-transaction",
         "pre-auto-gc", "post-merge", "fsmonitor-watchman")


def _plain_git(repo: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    env = dict({k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org")
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=env, **kw)


@pytest.fixture
def build(tmp_path, monkeypatch):
    d = tmp_path / "build"
    monkeypatch.setenv("RINGLAB_BUILD", str(d))
    return d


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    """(repo, marker folder, {path: committed bytes}): a kernel-like tree whose config runs
    a marker-writing program from every place git looks for one."""
    markers = tmp_path / "markers"
    markers.mkdir()
    evil = tmp_path / "evil.sh"
    # writes a marker named after its first argument, then passes stdin through, upper-cased,
    # so a filtered file would also differ from the blob
    # (a long-running filter "process" just exits: it never answers git's handshake)
    evil.write_text(f'#!/bin/sh\ntouch "{markers}/$1"\n[ "$1" = process ] && exit 1\n'
                    'tr a-z A-Z\nexit 0\n')
    evil.chmod(0o755)
    repo = write_fake_ringtest_tree(tmp_path / "linux")
    (repo / IN_TREE).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(MAIN, repo / IN_TREE)
    (repo / "tools/virtio/ringtest/link-to-secret").symlink_to("/etc/passwd")
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n")
    assert _plain_git(repo, "init", "-q").returncode == 0
    assert _plain_git(repo, "add", "-A").returncode == 0
    assert _plain_git(repo, "commit", "-qm", "tree").returncode == 0
    committed = {str(p.relative_to(repo)): p.read_bytes() for p in repo.rglob("*")
                 if p.is_file() and not p.is_symlink() and ".git" not in p.relative_to(repo).parts}
    hooks_dir = tmp_path / "hooks"
    hooks_dir.mkdir()
    for d in (repo / ".git/hooks", hooks_dir):
        for h in HOOKS:
            (d / h).write_text(f'#!/bin/sh\ntouch "{markers}/hook-{h}"\n')
            (d / h).chmod(0o755)
    (repo / ".git/info").mkdir(exist_ok=True)
    (repo / ".git/info/attributes").write_text("* filter=evil diff=evil\n")
    for key, value in [("filter.evil.smudge", f"{evil} smudge"), ("filter.evil.clean", f"{evil} clean"),
                       ("filter.evil.process", f"{evil} process"),
                       ("diff.evil.textconv", f"{evil} textconv"), ("diff.external", f"{evil} external"),
                       ("core.fsmonitor", f"{evil}"), ("core.hooksPath", str(hooks_dir)),
                       ("core.pager", f"{evil} pager"), ("pager.show", f"{evil} pager-show"),
                       ("tar.tgz.command", f"{evil} tar"), ("tar.tar.gz.command", f"{evil} tar"),
                       ("core.sshCommand", f"{evil} ssh"), ("core.editor", f"{evil} editor"),
                       ("core.askPass", f"{evil} askpass"), ("gc.auto", "1")]:
        assert _plain_git(repo, "config", key, value).returncode == 0
    # inherited variables that would redirect or run things
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", f"{evil} env-external")
    monkeypatch.setenv("GIT_SSH_COMMAND", f"{evil} env-ssh")
    monkeypatch.setenv("GIT_PAGER", f"{evil} env-pager")
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.pager={evil} env-params'")
    return repo, markers, committed


def _markers(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir())


def test_the_hostile_repository_does_run_programs_under_plain_git(hostile, tmp_path):
    """Control: the same repository, read the usual ways, runs the configured programs."""
    repo, markers, _ = hostile
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", "-o", str(tmp_path / "x.tar"),
                    "HEAD"], capture_output=True, env=env, timeout=60)
    subprocess.run(["git", "-C", str(repo), "status"], capture_output=True, env=env, timeout=60)
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--", "."], capture_output=True, env=env,
                   timeout=60)
    assert _markers(markers), "the hostile config should run something under plain git"


def test_kernel_header_from_git_runs_nothing_and_reads_the_blob(hostile, build):
    repo, markers, committed = hostile
    src = header_source.resolve_source(f"git:{repo}@HEAD")
    assert src.header.read_bytes() == committed[IN_TREE] == MAIN.read_bytes()
    assert src.record["kind"] == "git"
    # BASE+PATCH on a git base runs git apply: hardened too
    patch = _patch_from_worktree(build.parent, lambda h: h.write_text(
        h.read_text().replace("#define _LINUX_PTR_RING_H 1", "#define _LINUX_PTR_RING_H 1\n/* patched */")))
    patched = header_source.resolve_source(f"git:{repo}@HEAD+{patch}")
    assert b"/* patched */" in patched.header.read_bytes()
    assert provenance.git_info(repo)["commit"]
    assert _markers(markers) == []


def test_ringtest_tree_from_git_runs_nothing_and_exports_raw_regular_files(hostile, build):
    repo, markers, committed = hostile
    (t,) = kernel_tree.parse_trees(f"git:{repo}@HEAD")
    root, prov = kernel_tree.export(t, kernel_tests.EXPORT_PREFIXES)
    assert prov.startswith(f"git {repo.resolve()} HEAD = ")
    got = {str(p.relative_to(root)): p for p in root.rglob("*") if not p.is_dir()}
    want = {k: v for k, v in committed.items()
            if k.startswith(("tools/virtio/", IN_TREE))}
    assert sorted(got) == sorted(want), "regular files only: no symlink is written"
    for rel, data in want.items():
        assert not got[rel].is_symlink() and got[rel].read_bytes() == data, rel
    assert _markers(markers) == []


def test_every_git_call_is_hardened():
    argv = hgit.argv(["show", "HEAD:x"], "/r")
    for opt in ("core.hooksPath=/dev/null", "core.fsmonitor=false", "protocol.allow=never",
                "core.pager=cat", "diff.external="):
        assert opt in argv
    assert "--no-textconv" in argv and "--no-ext-diff" in argv
    env = hgit.environment()
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_CONFIG_GLOBAL"] == "/dev/null"
    assert env["GIT_ATTR_NOSYSTEM"] == "1" and env["GIT_TERMINAL_PROMPT"] == "0"
    assert env["GIT_PAGER"] == env["PAGER"] == "cat"
    assert "GIT_EXTERNAL_DIFF" not in env and "GIT_DIR" not in env
    # no other module of ringlab starts git itself
    root = Path(kh.__file__).resolve().parent
    for py in root.rglob("*.py"):
        if py.name == "git.py" and py.parent.name == "system":
            continue
        assert not re.search(r"""\[\s*["']git["']\s*,""", py.read_text()), py


# -- a repository of another user -----------------------------------------------------------
def _check_refusal(msg: str) -> None:
    assert "safe.directory" not in msg and "git config" not in msg
    assert "belongs to another user" in msg and "copy or clone it" in msg and "\n" not in msg


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the repository to another user")
def test_repository_of_another_user_is_refused_without_an_exception_hint(hostile, build):
    repo, markers, _ = hostile
    subprocess.run(["chown", "-R", "nobody", str(repo)], check=True)
    with pytest.raises(header_files.KernelHeaderError) as e:
        header_source.resolve_source(f"git:{repo}@HEAD")
    _check_refusal(str(e.value))
    (t,) = kernel_tree.parse_trees(f"git:{repo}@HEAD")
    with pytest.raises(ParamError) as e2:
        kernel_tree.export(t, kernel_tests.EXPORT_PREFIXES)
    _check_refusal(str(e2.value))
    assert "tree " in str(e2.value)
    assert _markers(markers) == []


def test_refusal_message_never_passes_on_gits_advice(tmp_path, monkeypatch, build):
    repo = tmp_path / "r"
    repo.mkdir()
    advice = (f"fatal: detected dubious ownership in repository at '{repo}'\nTo add an exception "
              f"for this directory, call:\n\n\tgit config --global --add safe.directory {repo}\n")
    real = subprocess.run

    def fake(cmd, *a, **kw):
        if cmd and cmd[0] == "git":
            return subprocess.CompletedProcess(cmd, 128, b"", advice.encode())
        return real(cmd, *a, **kw)
    monkeypatch.setattr(hgit.subprocess, "run", fake)
    with pytest.raises(header_files.KernelHeaderError) as e:
        header_source.resolve_source(f"git:{repo}@HEAD")
    _check_refusal(str(e.value))
    with pytest.raises(git_source.GitRefused) as e2:
        git_source.resolve_commit(git_source.parse(f"git:{repo}@HEAD"))
    _check_refusal(str(e2.value))
    assert "error" in provenance.git_info(repo) and "safe.directory" not in provenance.git_info(repo)["error"]


# -- patched headers ------------------------------------------------------------------------
def _patch_from_worktree(tmp_path: Path, change) -> Path:
    """A git diff of the header tree after ``change(header_path)``."""
    r = tmp_path / "mk"
    (r / IN_TREE).parent.mkdir(parents=True)
    shutil.copy(MAIN, r / IN_TREE)
    _plain_git(r, "init", "-q")
    _plain_git(r, "add", "-A")
    _plain_git(r, "commit", "-qm", "base")
    change(r / IN_TREE)
    _plain_git(r, "add", "-A")
    pf = tmp_path / "evil.patch"
    pf.write_bytes(_plain_git(r, "diff", "--cached", "HEAD").stdout)
    assert IN_TREE.encode() in pf.read_bytes()
    return pf


def _to_symlink(target: str):
    def change(h: Path):
        h.unlink()
        h.symlink_to(target)
    return change


def _secret(tmp_path: Path) -> Path:
    s = tmp_path / "secret"
    s.write_text("top secret 0600 content\n")
    s.chmod(0o600)
    return s


def _cli(capsys, *args) -> tuple[int, str]:
    rc = cli.main(list(args))
    cap = capsys.readouterr()
    return rc, cap.err + cap.out


@pytest.mark.parametrize("kind", ["secret", "dev-zero", "delete"])
def test_patch_that_replaces_or_deletes_the_header_is_refused(kind, tmp_path, build, capsys):
    secret = _secret(tmp_path)
    change = {"secret": _to_symlink(str(secret)), "dev-zero": _to_symlink("/dev/zero"),
              "delete": lambda h: h.unlink()}[kind]
    pf = _patch_from_worktree(tmp_path, change)
    base = DATA / "team_mainline"
    rc, out = _cli(capsys, "build", "--kernel-header", f"x={base}+{pf}")
    assert rc == 2, out
    assert "Traceback" not in out and len(out.strip().splitlines()) == 1, out
    assert str(pf) in out and IN_TREE in out
    assert ("deletes" if kind == "delete" else "symlink") in out
    if build.exists():
        for p in build.rglob("*"):
            assert not p.is_symlink(), p
            if p.is_file() and p.stat().st_size < 1 << 20:
                assert b"top secret" not in p.read_bytes(), p


@pytest.mark.parametrize("target", ["secret", "/dev/zero"])
def test_a_symlink_made_by_git_apply_is_never_followed(target, tmp_path, build, monkeypatch):
    """Even when the patch check is bypassed, the patched header is lstat-ed and refused."""
    secret = _secret(tmp_path)
    pf = _patch_from_worktree(tmp_path, _to_symlink(str(secret) if target == "secret" else target))
    monkeypatch.setattr(header_patch, "check_patch", lambda *a: None)
    with pytest.raises(header_files.KernelHeaderError, match="turns include/linux/ptr_ring.h into a symlink"):
        header_source.resolve_source(f"{DATA / 'team_mainline'}+{pf}")
    assert not list((build / "kernel_headers").rglob("ptr_ring.h")) if build.exists() else True


def test_patch_with_a_path_outside_the_tree_is_refused(tmp_path, build):
    diff = _patch_from_worktree(tmp_path, lambda h: h.write_text(h.read_text() + "/* x */\n")).read_text()
    pf = tmp_path / "out.diff"
    pf.write_text(diff + diff.replace(IN_TREE, "../../etc/x"))
    with pytest.raises(header_files.KernelHeaderError, match="outside the kernel tree"):
        header_source.resolve_source(f"{DATA / 'team_mainline'}+{pf}")


@pytest.mark.parametrize("path, words", [("/etc/passwd", "no 'struct ptr_ring"),
                                         ("/dev/zero", "not a regular file"),
                                         ("/dev/null", "not a regular file")])
def test_a_user_header_that_is_not_a_header_is_exit_2(path, words, capsys, build):
    rc, out = _cli(capsys, "build", "--kernel-header", f"x={path}")
    assert rc == 2 and words in out and "Traceback" not in out, out
    assert len(out.strip().splitlines()) == 1


def test_an_oversized_header_is_refused_with_a_bounded_read(tmp_path, build):
    big = tmp_path / "ptr_ring.h"
    with open(big, "wb") as f:
        f.truncate(header_files.MAX_HEADER_BYTES + 1)
    with pytest.raises(header_files.KernelHeaderError, match="more than"):
        header_source.resolve_source(str(big))
