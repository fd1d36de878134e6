"""A tree's git config can name programs in many more places than hooks and filters: signature
verification (log.showSignature with gpg.program, gpg.ssh.program, gpg.x509.program), editors,
askpass, credential helpers, proxies, pagers per command, merge and diff drivers, drivers
defined in an included config file or named by core.attributesFile.  Every ringlab entry point
that reads a user's tree (bisect, git:TREE@REV header and ringtest sources, the checkout's
provenance, the fleet's commit check, the reference series' commits, blobs at a revision) runs
none of them, and none of the programs named by inherited environment variables either.

Each program is a script that writes a marker file named after the setting; the control tests
show that plain git does run them in this tree, and that ringlab's runner without its overrides
does too, so the assertions here can fail.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ringlab.lab.bisect import gitrange, steps, testrepo
from ringlab.lab.cli import main
from ringlab.lab.fleet import record as fleet_record
from ringlab.sources import git_source, header_source, kernel_tree
from ringlab.system import checkout
from ringlab.system import git as hgit
from ringlab.tools import kernel_tests
from tests.bisect_fakes import fake_frame
from tests.fakes.ringtest_tree import write_fake_ringtest_tree

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")

DATA = Path(__file__).resolve().parent / "data" / "kernel_headers"
MAIN = DATA / "team_mainline" / "include/linux/ptr_ring.h"
IN_TREE = "include/linux/ptr_ring.h"
HOOKS = ("pre-commit", "commit-msg", "post-commit", "post-index-change", "reference-transaction",
         "pre-auto-gc", "post-checkout", "post-rewrite")
#: a signature of each format git verifies, by the program that verifies it
SIGNATURES = {
    "gpg.program": "-----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----",
    "gpg.ssh.program": "-----BEGIN SSH SIGNATURE-----\n U1NIU0lHAAAAAQ==\n -----END SSH SIGNATURE-----",
    "gpg.x509.program": "-----BEGIN SIGNED MESSAGE-----\n MIAGCSqGSIb3\n -----END SIGNED MESSAGE-----",
}
IDENT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
         "GIT_COMMITTER_EMAIL": "t@example.org"}


def _plain_env() -> dict[str, str]:
    return dict({k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **IDENT)


def _plain_git(repo: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=_plain_env(), **kw)


def _ok(repo: Path, *args: str, **kw) -> str:
    p = _plain_git(repo, *args, **kw)
    assert p.returncode == 0, p.stderr
    return p.stdout.decode().strip()


class Hostile:
    """A kernel-like tree whose config, included config, attributes file, hooks and inherited
    environment name a marker-writing program for every setting git runs one from."""

    def __init__(self, tmp: Path, monkeypatch):
        self.markers = tmp / "markers"
        self.markers.mkdir()
        self.bin = tmp / "bin"
        self.bin.mkdir()
        repo = write_fake_ringtest_tree(tmp / "linux")
        (repo / IN_TREE).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(MAIN, repo / IN_TREE)
        (repo / ".gitattributes").write_text("* filter=evil diff=evil merge=evil\n*.h filter=inc diff=inc\n")
        _ok(repo, "init", "-q", "-b", "main")
        _ok(repo, "add", "-A")
        _ok(repo, "commit", "-qm", "base")
        self.good = _ok(repo, "rev-parse", "HEAD")
        # one commit per signature format, each changing the header (so each is a bisect candidate)
        self.signed = {}
        for i, (key, sig) in enumerate(SIGNATURES.items()):
            with open(repo / IN_TREE, "a") as f:
                f.write(f"\n/* signed change {i} */\n")
            _ok(repo, "add", "-A")
            tree = _ok(repo, "write-tree")
            parent = _ok(repo, "rev-parse", "HEAD")
            body = (f"tree {tree}\nparent {parent}\nauthor t <t@example.org> 1700000000 +0000\n"
                    f"committer t <t@example.org> 1700000000 +0000\ngpgsig {sig}\n\nptr_ring: signed {i}\n")
            sha = _ok(repo, "hash-object", "-t", "commit", "-w", "--stdin", input=body.encode())
            _ok(repo, "update-ref", "refs/heads/main", sha)
            self.signed[key] = sha
        self.bad = list(self.signed.values())[-1]
        self.repo = repo
        self.committed = {str(p.relative_to(repo)): p.read_bytes() for p in repo.rglob("*")
                          if p.is_file() and not p.is_symlink() and ".git" not in p.relative_to(repo).parts}
        hooks = tmp / "hooks"
        hooks.mkdir()
        for d in (repo / ".git/hooks", hooks):
            for h in HOOKS:
                self.program(f"hook-{h}", d / h)
        (repo / ".git/info").mkdir(exist_ok=True)
        (repo / ".git/info/attributes").write_text("* filter=evil diff=evil merge=evil\n")
        attrs = tmp / "attributes"
        attrs.write_text("* filter=attrfile diff=attrfile\n")
        signers = tmp / "allowed_signers"
        signers.write_text("t@example.org ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE\n")
        included = tmp / "included.config"
        self.config = {
            # signature verification: git log/show run the verifying program of the format
            "log.showSignature": "true",
            "gpg.program": self.program("gpg.program"),
            "gpg.openpgp.program": self.program("gpg.openpgp.program"),
            "gpg.x509.program": self.program("gpg.x509.program"),
            "gpg.ssh.program": self.program("gpg.ssh.program"),
            "gpg.ssh.defaultKeyCommand": self.program("gpg.ssh.defaultKeyCommand"),
            "gpg.ssh.allowedSignersFile": str(signers),
            "commit.gpgSign": "true", "tag.gpgSign": "true",
            # core
            "core.fsmonitor": self.program("core.fsmonitor"),
            "core.hooksPath": str(hooks),
            "core.pager": self.program("core.pager"),
            "core.editor": self.program("core.editor"),
            "core.askPass": self.program("core.askPass"),
            "core.sshCommand": self.program("core.sshCommand"),
            "core.gitProxy": self.program("core.gitProxy"),
            "core.alternateRefsCommand": self.program("core.alternateRefsCommand"),
            "core.attributesFile": str(attrs),
            "sequence.editor": self.program("sequence.editor"),
            "pager.log": self.program("pager.log"), "pager.show": self.program("pager.show"),
            "pager.status": self.program("pager.status"), "pager.diff": self.program("pager.diff"),
            "credential.helper": self.program("credential.helper"),
            "credential.https://example.org.helper": self.program("credential.url.helper"),
            # drivers named by the attributes above
            "diff.external": self.program("diff.external"),
            "diff.evil.command": self.program("diff.evil.command"),
            "diff.evil.textconv": self.program("diff.evil.textconv"),
            "diff.attrfile.textconv": self.program("diff.attrfile.textconv"),
            "merge.evil.driver": self.program("merge.evil.driver"),
            "filter.evil.clean": self.program("filter.evil.clean"),
            "filter.evil.smudge": self.program("filter.evil.smudge"),
            "filter.evil.process": self.program("filter.evil.process"),
            "filter.evil.required": "true",
            "filter.attrfile.clean": self.program("filter.attrfile.clean"),
            "filter.attrfile.smudge": self.program("filter.attrfile.smudge"),
            # transports and tools
            "uploadpack.packObjectsHook": self.program("uploadpack.packObjectsHook"),
            "protocol.ext.allow": "always", "protocol.allow": "always",
            "remote.origin.url": f"ext::{self.program('remote.ext')} %S",
            "remote.origin.uploadpack": self.program("remote.origin.uploadpack"),
            "remote.origin.receivepack": self.program("remote.origin.receivepack"),
            "sendemail.smtpServer": self.program("sendemail.smtpServer"),
            "sendemail.toCmd": self.program("sendemail.toCmd"),
            "web.browser": "evil", "browser.evil.cmd": self.program("browser.evil.cmd"),
            "man.viewer": "evil", "man.evil.cmd": self.program("man.evil.cmd"),
            "interactive.diffFilter": self.program("interactive.diffFilter"),
            "difftool.evil.cmd": self.program("difftool.evil.cmd"),
            "mergetool.evil.cmd": self.program("mergetool.evil.cmd"),
            "submodule.recurse": "true",
            "include.path": str(included),
            "gc.auto": "1",
        }
        for key, value in self.config.items():
            _ok(repo, "config", key, value)
        # drivers defined only in an included config file, named by the committed .gitattributes
        for key, value in {"filter.inc.clean": self.program("filter.inc.clean"),
                           "filter.inc.smudge": self.program("filter.inc.smudge"),
                           "filter.inc.process": self.program("filter.inc.process"),
                           "diff.inc.textconv": self.program("diff.inc.textconv"),
                           "diff.inc.command": self.program("diff.inc.command")}.items():
            subprocess.run(["git", "config", "-f", str(included), key, value], check=True, env=_plain_env())
        # inherited variables that name programs, config, or other repositories
        env = {"GIT_EXTERNAL_DIFF": "env.GIT_EXTERNAL_DIFF", "GIT_PAGER": "env.GIT_PAGER", "PAGER": "env.PAGER",
               "GIT_SSH": "env.GIT_SSH", "GIT_SSH_COMMAND": "env.GIT_SSH_COMMAND", "GIT_ASKPASS": "env.GIT_ASKPASS",
               "SSH_ASKPASS": "env.SSH_ASKPASS", "GIT_EDITOR": "env.GIT_EDITOR", "EDITOR": "env.EDITOR",
               "VISUAL": "env.VISUAL", "GIT_SEQUENCE_EDITOR": "env.GIT_SEQUENCE_EDITOR",
               "GIT_PROXY_COMMAND": "env.GIT_PROXY_COMMAND"}
        for var, name in env.items():
            monkeypatch.setenv(var, self.program(name))
        monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'log.showsignature=true' 'gpg.program={self.program('env.params')}'")
        monkeypatch.setenv("GIT_CONFIG_COUNT", "2")
        monkeypatch.setenv("GIT_CONFIG_KEY_0", "log.showSignature")
        monkeypatch.setenv("GIT_CONFIG_VALUE_0", "true")
        monkeypatch.setenv("GIT_CONFIG_KEY_1", "gpg.program")
        monkeypatch.setenv("GIT_CONFIG_VALUE_1", self.program("env.count"))
        monkeypatch.setenv("GIT_TRACE", str(self.markers / "env.GIT_TRACE"))
        monkeypatch.setenv("GIT_DIR", str(tmp / "nowhere"))
        monkeypatch.setenv("GIT_WORK_TREE", str(tmp / "nowhere"))
        monkeypatch.setenv("GIT_EXEC_PATH", str(tmp / "nowhere"))
        monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "ext:file:ssh")
        self.make_racy()

    def program(self, name: str, path: Path | None = None) -> str:
        """A script that writes the marker ``name`` and passes stdin through, upper-cased (so a
        filtered file would differ from its blob); a filter "process" exits at once."""
        p = path or self.bin / name.replace("/", "_")
        p.write_text(f'#!/bin/sh\ntouch "{self.markers}/{name}"\n'
                     + ('exit 1\n' if name.endswith(".process") else 'tr a-z A-Z\nexit 0\n'))
        p.chmod(0o755)
        return str(p)

    def make_racy(self) -> None:
        """Every index entry racily clean: git re-reads the files (through clean filters)."""
        idx = self.repo / ".git/index"
        st = idx.stat()
        for p in self.repo.rglob("*"):
            if p.is_file() and ".git" not in p.relative_to(self.repo).parts:
                os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1))

    def ran(self) -> list[str]:
        return sorted(p.name for p in self.markers.iterdir())


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    return Hostile(tmp_path, monkeypatch)


@pytest.fixture
def build(tmp_path, monkeypatch):
    d = tmp_path / "build"
    monkeypatch.setenv("RINGLAB_BUILD", str(d))
    return d


# -- controls: the tree does run its programs ---------------------------------------------------
def test_plain_git_runs_the_signature_programs_pager_filters_and_fsmonitor(hostile):
    env = {k: v for k, v in _plain_env().items() if not k.startswith("GIT_")}
    for key, sha in hostile.signed.items():
        subprocess.run(["git", "-C", str(hostile.repo), "log", "-1", "--format=%s", sha], capture_output=True,
                       env=env, timeout=60)
    subprocess.run(["git", "-C", str(hostile.repo), "status"], capture_output=True, env=env, timeout=60)
    ran = hostile.ran()
    assert "gpg.program" in ran or "gpg.openpgp.program" in ran, ran
    assert "gpg.ssh.program" in ran and "gpg.x509.program" in ran, ran
    assert "core.fsmonitor" in ran and any(m.startswith("filter.") for m in ran), ran


def test_the_runner_without_its_overrides_runs_the_signature_program(hostile, monkeypatch):
    """What the hardening adds is what keeps gpg from running: the same describe() with the
    earlier overrides only (hooks, fsmonitor, pager, external diff, ssh) runs it."""
    monkeypatch.setattr(hgit, "HARDENING", ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
                                            "-c", "core.pager=cat", "-c", "diff.external=",
                                            "-c", "core.sshCommand="))
    monkeypatch.setattr(hgit, "_NO_SHOW_SIGNATURE", set())
    monkeypatch.setattr(hgit, "_repo_overrides", lambda *a: ())
    gitrange.describe(hostile.repo, hostile.signed["gpg.program"])
    assert {"gpg.program", "gpg.openpgp.program"} & set(hostile.ran()), hostile.ran()


# -- every entry point ----------------------------------------------------------------------
class _FakeRuns:
    """steps.run_step replaced: no effect anywhere, so the bisect ends 'nothing to bisect'."""

    def __call__(self, out_dir, experiment, params, resume, log=None):
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        return fake_frame(params, {})


def test_bisect_describes_signed_commits_without_running_anything(hostile, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(steps, "run_step", _FakeRuns())
    out = tmp_path / "b"
    rc = main(["bisect", "ptr_ring", "-p", "tree", str(hostile.repo), "-p", "good", hostile.good,
               "-p", "bad", "main", "-p", "layouts", "4", "--out", str(out)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    state = json.loads((out / "bisect.json").read_text())
    assert state["bad_commit"]["sha"] == hostile.bad and state["bad_commit"]["subject"] == "ptr_ring: signed 2"
    assert [c["sha"] for c in state["candidates"]] == list(hostile.signed.values())
    assert hostile.ran() == []


def test_the_range_functions_run_nothing(hostile):
    tree = gitrange.check_tree(str(hostile.repo))
    for key, sha in hostile.signed.items():
        assert gitrange.resolve(tree, sha, "bad") == sha
        c = gitrange.describe(tree, sha)
        assert c.sha == sha and c.subject.startswith("ptr_ring: signed"), key
    gitrange.check_order(tree, hostile.good, hostile.bad)
    assert gitrange.commits(tree, hostile.good, hostile.bad, gitrange.MEASURED_PATHS["ptr_ring"]) == \
        list(hostile.signed.values())
    assert hostile.ran() == []


def test_git_header_and_tree_sources_run_nothing_and_read_blobs(hostile, build):
    for sha in [hostile.good, *hostile.signed.values()]:
        src = header_source.resolve_source(f"git:{hostile.repo}@{sha}")
        assert src.record["commit"] == sha
    assert src.header.read_bytes() == hostile.committed[IN_TREE]
    gs = git_source.parse(f"git:{hostile.repo}@main")
    assert git_source.resolve_commit(gs) == hostile.bad
    assert git_source.read_file(gs, hostile.bad, IN_TREE, 1 << 20) == hostile.committed[IN_TREE]
    (t,) = kernel_tree.parse_trees(f"git:{hostile.repo}@main")
    root, prov = kernel_tree.export(t, kernel_tests.EXPORT_PREFIXES)
    assert prov.endswith(hostile.bad)
    assert (root / IN_TREE).read_bytes() == hostile.committed[IN_TREE]
    assert hgit.read_file(hostile.repo, hostile.bad, IN_TREE, 1 << 20) == hostile.committed[IN_TREE]
    assert hostile.ran() == []


def test_provenance_and_the_fleet_commit_check_run_nothing(hostile):
    """rev-parse and status in the tree: status re-reads racily clean files, the path through
    clean filters and fsmonitor."""
    info = checkout.git_info(hostile.repo)
    assert info["commit"] == hostile.bad and info["dirty"] is False, info
    assert fleet_record.git_commit(hostile.repo, allow_dirty=True) == (hostile.bad, False)
    assert hostile.ran() == []


def test_committing_in_the_tree_runs_no_hook_signer_editor_or_filter(hostile):
    """The reference series' commit path (add -A, commit) in the hostile tree."""
    (hostile.repo / "new.txt").write_text("new\n")
    sha = testrepo._commit(hostile.repo, "ptr_ring: unsigned", 5)
    assert _ok(hostile.repo, "cat-file", "-p", sha).count("gpgsig") == 0
    assert _ok(hostile.repo, "show", f"{sha}:new.txt") == "new", "stored without the clean filter"
    assert hostile.ran() == []


def test_every_call_overrides_what_the_tree_defines(hostile):
    proc = hgit.run(["log", "-1", "--format=%H", hostile.bad], hostile.repo)
    args = proc.args
    pairs = {args[i + 1] for i, a in enumerate(args) if a == "-c"}
    for want in ("filter.evil.clean=", "filter.evil.smudge=", "filter.evil.process=", "filter.evil.required=false",
                 "filter.inc.clean=", "filter.attrfile.clean=", "diff.evil.command=", "diff.evil.textconv=",
                 "diff.inc.textconv=", "merge.evil.driver=", "pager.log=false", "pager.show=false",
                 "credential.https://example.org.helper=", "remote.origin.uploadpack=",
                 "remote.origin.receivepack=", "protocol.ext.allow=never", "protocol.allow=never",
                 "browser.evil.cmd=", "man.evil.cmd=", "difftool.evil.cmd=", "mergetool.evil.cmd=",
                 "sendemail.tocmd=", "sendemail.smtpserver=", "gpg.program=", "gpg.ssh.program=",
                 "gpg.x509.program=", "gpg.openpgp.program=", "log.showSignature=false", "core.editor=:",
                 "credential.helper=", "core.attributesFile=/dev/null", "submodule.recurse=false"):
        assert want in pairs, want
    assert "--no-show-signature" in args and "--no-pager" in args
    env = hgit.environment()
    for var in ("GIT_EXTERNAL_DIFF", "GIT_SSH", "GIT_SSH_COMMAND", "SSH_ASKPASS", "EDITOR", "VISUAL",
                "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_DIR", "GIT_WORK_TREE",
                "GIT_EXEC_PATH", "GIT_TRACE"):
        assert var not in env, var
    assert env["GIT_ASKPASS"] == env["GIT_PROXY_COMMAND"] == env["GIT_ALLOW_PROTOCOL"] == ""
    assert env["GIT_EDITOR"] == env["GIT_SEQUENCE_EDITOR"] == ":" and env["GIT_PAGER"] == env["PAGER"] == "cat"
    assert hostile.ran() == []


def test_a_driver_name_that_cannot_be_overridden_is_refused(hostile):
    _ok(hostile.repo, "config", "filter.a=b.smudge", hostile.program("filter.a=b.smudge"))
    with pytest.raises(hgit.GitError, match=r"filter\.a=b\..*holding '='.*allowed: "):
        gitrange.describe(hostile.repo, hostile.bad)
    with pytest.raises(hgit.GitError, match=str(hostile.repo)):
        git_source.resolve_commit(git_source.parse(f"git:{hostile.repo}@main"))
    assert hostile.ran() == []


def test_program_overrides_by_key():
    got = dict(hgit.program_overrides(["filter.X y.clean", "diff.d.textconv", "pager.log", "core.bare",
                                       "credential.helper", "protocol.file.allow", "user.name",
                                       "remote.o.url", "gpg.ssh.program", "hook.h.command"]))
    assert got == {"filter.X y.clean": "", "filter.X y.smudge": "", "filter.X y.process": "",
                   "filter.X y.required": "false", "diff.d.textconv": "", "pager.log": "false",
                   "credential.helper": "", "protocol.file.allow": "never", "gpg.ssh.program": "",
                   "hook.h.command": ""}


def test_run_refuses_an_env_that_would_reopen_config_or_programs(tmp_path):
    for var in ("GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "GIT_DIR"):
        with pytest.raises(ValueError, match=var):
            hgit.run(["status"], tmp_path, env={var: "x"})


def test_inherited_variables_run_and_write_nothing(hostile, monkeypatch):
    """Without the variables that only point git elsewhere (which would make every call fail),
    the ones that name programs, config or a trace file still change nothing."""
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_EXEC_PATH"):
        monkeypatch.delenv(var)
    gitrange.describe(hostile.repo, hostile.signed["gpg.program"])
    assert checkout.git_info(hostile.repo)["commit"] == hostile.bad
    (hostile.repo / "new.txt").write_text("new\n")
    testrepo._commit(hostile.repo, "ptr_ring: unsigned", 5)
    assert hostile.ran() == []


def test_no_module_builds_its_own_git_command_or_environment():
    """Every git call goes through ringlab.system.git.run (which reads the tree's config and
    overrides what it defines): no module runs git with only argv() or environment()."""
    import re
    root = Path(hgit.__file__).resolve().parent.parent
    for py in root.rglob("*.py"):
        if py == Path(hgit.__file__).resolve():
            continue
        text = py.read_text()
        assert not re.search(r"\b(hgit|git)\.(argv|environment)\(", text), py
        assert not re.search(r"""\[\s*["']git["']\s*,""", text), py
