"""Code ringlab did not write never runs as root: under root, a kernel header's compile and the
trials that run its binary are the unprivileged user's (ringlab.system.privilege), and the build
record lists every file the compiler and the assembler read, ``.incbin`` included."""
from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
from pathlib import Path

import pytest

from ringlab import run as runner
from ringlab.build import driver
from ringlab.build.cflags import BuildError
from ringlab.build.sourceset import source_record_path
from ringlab.report import provenance
from ringlab.system import privilege

DATA = Path(__file__).resolve().parent / "data" / "kernel_headers"
BASE_HEADER = DATA / "team_mainline" / "include" / "linux" / "ptr_ring.h"

needs_cc = pytest.mark.skipif(shutil.which(os.environ.get("CC") or "gcc") is None, reason="no C compiler")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: checks that root's compiles and "
                                "trials leave root (run the suite as root, as the CI does)")


def _header(tmp_path: Path, name: str, extra: str) -> Path:
    """A PATH header source: the team's ptr_ring.h followed by ``extra``."""
    d = tmp_path / name / "include" / "linux"
    d.mkdir(parents=True)
    h = d / "ptr_ring.h"
    h.write_text(BASE_HEADER.read_text() + "\n" + extra + "\n")
    return h


def _incbin(path: Path) -> str:
    return ('__asm__(".pushsection .rodata\\n.incbin \\"%s\\"\\n.popsection\\n");' % path)


def _drop_box(tmp_path: Path) -> Path:
    """A folder anyone may create files in (sticky, like /tmp), for what the code under test records."""
    box = tmp_path / "box"
    box.mkdir()
    os.chmod(box, 0o1777)
    return box


def _euid_header(tmp_path: Path, box: Path) -> Path:
    return _header(tmp_path, "euid", f"""
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void ringlab_test_record_euid(void)
{{
	FILE *f = fopen("{box}/euid", "a");
	if (f) {{ fprintf(f, "%d\\n", (int)geteuid()); fclose(f); }}
}}
""")


@needs_cc
@needs_root
def test_a_headers_constructor_never_runs_as_root(tmp_path, monkeypatch):
    monkeypatch.delenv(privilege.USER_VAR, raising=False)
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("RINGLAB_STATE_DIR", str(tmp_path / "state"))
    box = _drop_box(tmp_path)
    header = _euid_header(tmp_path, box)
    res = runner.run_experiment("ptr_ring", {"profile": "smoke", "cpus": "none", "governor": "false",
                                             "variants": "evil", "modes": "0", "trials": 2, "warmup": 0,
                                             "count": 10000, "kernel_headers": f"evil={header}"},
                                tmp_path / "run", build=True, progress=False, log=lambda m: None)
    seen = (box / "euid").read_text().split()
    assert seen, "the constructor never ran"
    user = pwd.getpwnam(privilege.DEFAULT_USER)
    assert "0" not in seen and set(seen) == {str(user.pw_uid)}
    st = (box / "euid").stat()
    assert st.st_uid == user.pw_uid
    env = json.loads((res.out_dir / "env.json").read_text())
    assert env["privilege"]["parent_uid"] == 0 and env["privilege"]["dropped"] is True
    assert env["privilege"]["build_uid"] == env["privilege"]["trial_uid"] == user.pw_uid
    assert env["privilege"]["user"] == privilege.DEFAULT_USER


@needs_cc
@needs_root
def test_every_compile_of_a_header_runs_unprivileged(tmp_path, monkeypatch):
    """CC is a wrapper that records the euid of every compiler run, then runs gcc."""
    monkeypatch.delenv(privilege.USER_VAR, raising=False)
    box = _drop_box(tmp_path)
    cc = tmp_path / "cc-record"
    cc.write_text(f"#!/bin/sh\necho $(id -u) \"$*\" >> {box}/cc-euid\nexec {shutil.which('gcc')} \"$@\"\n")
    cc.chmod(0o755)
    (box / "cc-euid").touch()
    os.chmod(box / "cc-euid", 0o666)
    monkeypatch.setenv("CC", str(cc))
    header = _header(tmp_path, "plain", "")
    driver.build_all(kernel_headers={"plain": str(header)}, out_dir=tmp_path / "bin",
                     only=["ptr_ring_test-plain"])
    # the compiles and the link of the header's binary (not `cc --version`, run by ringlab itself)
    seen = [ln.split()[0] for ln in (box / "cc-euid").read_text().splitlines() if "ptr_ring_test-plain" in ln]
    assert len(seen) >= 4          # 3 sources and the link
    assert "0" not in seen


@needs_cc
@needs_root
def test_layout_copies_of_a_header_build_unprivileged(tmp_path, monkeypatch):
    """A binary of layout copies: every compile, the pads' assembly and the link run as the user."""
    from ringlab.build import layouts as L
    monkeypatch.delenv(privilege.USER_VAR, raising=False)
    box = _drop_box(tmp_path)
    cc = tmp_path / "cc-record"
    cc.write_text(f"#!/bin/sh\necho $(id -u) \"$*\" >> {box}/cc-euid\nexec {shutil.which('gcc')} \"$@\"\n")
    cc.chmod(0o755)
    (box / "cc-euid").touch()
    os.chmod(box / "cc-euid", 0o666)
    monkeypatch.setenv("CC", str(cc))
    header = _header(tmp_path, "plain", "")
    group = L.copy_groups(L.arm_layouts(3, "plain", 3))[0]
    info = driver.build_all(kernel_headers={"plain": str(header)}, out_dir=tmp_path / "bin",
                            only=["ptr_ring_test-plain"], layouts={"ptr_ring_test-plain": [group]})
    exe = Path(info.binaries[group.binary_name("ptr_ring_test-plain")].path)
    assert exe.stat().st_uid == 0 and info.binaries[exe.name].layout == group.record()
    lines = (box / "cc-euid").read_text().splitlines()
    seen = [ln.split()[0] for ln in lines if "ptr_ring_test-plain" in ln or "pad0.s" in ln]
    assert any("pad0.s" in ln for ln in lines)
    assert len(seen) >= 4 and "0" not in seen


@needs_cc
@needs_root
def test_incbin_of_a_root_only_file_does_not_build(tmp_path, monkeypatch):
    monkeypatch.delenv(privilege.USER_VAR, raising=False)
    secret = tmp_path / "secret"
    secret.write_text("root-only-line\n")
    os.chmod(secret, 0o600)
    assert secret.stat().st_uid == 0 and stat.S_IMODE(secret.stat().st_mode) == 0o600
    header = _header(tmp_path, "shadow", _incbin(secret))
    with pytest.raises(BuildError, match=str(secret)):
        driver.build_all(kernel_headers={"shadow": str(header)}, out_dir=tmp_path / "bin",
                         only=["ptr_ring_test-shadow"])
    assert not (tmp_path / "bin" / "ptr_ring_test-shadow").exists()
    for p in (tmp_path / "bin").rglob("*"):
        if p.is_file():
            assert b"root-only-line" not in p.read_bytes()


@needs_cc
def test_incbin_of_a_readable_file_is_in_the_build_record_and_provenance(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("RINGLAB_STATE_DIR", str(tmp_path / "state"))
    blob = tmp_path / "data" / "blob.bin"
    blob.parent.mkdir()
    blob.write_bytes(b"readable-marker\n")
    os.chmod(blob, 0o644)
    header = _header(tmp_path, "incbin", _incbin(blob))
    info = driver.build_all(kernel_headers={"inc": str(header)}, only=["ptr_ring_test-inc"])
    b = info.binaries["ptr_ring_test-inc"]
    assert str(blob) in b.source_files and str(blob) in b.inputs
    assert b"readable-marker" in Path(b.path).read_bytes()
    record = json.loads(source_record_path(Path(b.path)).read_text())
    assert str(blob) in record["files"]
    # the same file under another content is another source set
    before = b.source_sha256
    blob.write_bytes(b"other-marker\n")
    again = driver.build_all(kernel_headers={"inc": str(header)}, only=["ptr_ring_test-inc"])
    assert again.binaries["ptr_ring_test-inc"].rebuilt
    assert again.binaries["ptr_ring_test-inc"].source_sha256 != before
    # provenance's "every file the compiler read" of a run names it
    res = runner.run_experiment("ptr_ring", {"profile": "smoke", "cpus": "none", "governor": "false",
                                             "variants": "inc", "modes": "0", "trials": 1, "warmup": 0,
                                             "count": 10000, "kernel_headers": f"inc={header}"},
                                tmp_path / "run", build=True, progress=False, log=lambda m: None)
    c = provenance.check(res.out_dir)
    assert str(blob) in c["variants"]["inc"]["sources"]


@needs_root
def test_a_folder_the_user_cannot_reach_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv(privilege.USER_VAR, raising=False)
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "x.c").write_text("int x;\n")
    with pytest.raises(privilege.PrivilegeError, match="private/x.c is not readable by 'ringlab-run'"):
        privilege.check_readable([private / "x.c"], "test source")


@needs_root
def test_keep_root_is_explicit_and_recorded(monkeypatch):
    monkeypatch.setenv(privilege.USER_VAR, privilege.KEEP_ROOT)
    assert not privilege.dropping() and privilege.wrap(["prog", "-x"]) == ["prog", "-x"]
    assert privilege.record() == {"parent_uid": 0, "build_uid": 0, "trial_uid": 0, "user": "root",
                                  "dropped": False}
    monkeypatch.delenv(privilege.USER_VAR)
    argv = privilege.wrap(["prog", "-x"])
    assert argv[0].endswith("setpriv") and argv[-3:] == ["--", "prog", "-x"]
    assert "--no-new-privs" in argv and "--clear-groups" in argv and "--bounding-set=-all" in argv
    assert privilege.strip(argv) == ["prog", "-x"]
    assert privilege.strip(["perf", "record", "--", *argv]) == ["perf", "record", "--", "prog", "-x"]
    with privilege.as_written():
        assert privilege.wrap(["prog"]) == ["prog"]


def test_a_user_with_uid_0_is_refused(monkeypatch):
    monkeypatch.setenv(privilege.USER_VAR, pwd.getpwuid(0).pw_name + "-no-such-user")
    with pytest.raises(privilege.PrivilegeError, match="no such user"):
        privilege.account()


def test_not_root_nothing_changes(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert not privilege.dropping()
    assert privilege.wrap(["a", "b"]) == ["a", "b"] and privilege.prefix() == []
    with privilege.workdir("x") as w:
        assert w is None
    privilege.check_readable([Path("/nonexistent/x")], "anything")   # nothing checked
