"""perf runs as root: as root, ringlab refuses a perf executable that a user other than root
could change (owned by another uid, writable by group or others, or reached through a folder
another user can write or a symlink in such a folder), naming the parameter 'perf', the path,
why, and what is allowed.  A root-owned 0755 file in root-owned 0755 folders is accepted."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ringlab.errors import ParamError
from ringlab.experiments.perf_rb import PerfRb
from ringlab.system import perfprobe
from ringlab.tools import perfrecord

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the check applies to root only; needs root to chown")
NOBODY = 65534


def _exe(folder: Path, mode: int = 0o755, uid: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / "perf"
    p.write_text("#!/bin/sh\ntouch \"$0.ran\"\nexit 0\n")
    os.chown(p, uid, 0)
    p.chmod(mode)
    return p


@pytest.fixture
def safe_dir(tmp_path):
    """A root-owned 0755 folder whose every ancestor only root can change."""
    d = tmp_path / "bin"
    d.mkdir()
    d.chmod(0o755)
    probe = _exe(d)
    why = perfrecord.root_unsafe_reason(probe)
    probe.unlink()
    if why:
        pytest.skip(f"the temporary folder itself is not root-safe here: {why}")
    return d


def _refused(perf: str, *words: str) -> str:
    with pytest.raises(ParamError) as e:
        perfrecord.check_perf(perf)
    msg = str(e.value)
    assert msg.startswith("parameter 'perf': ") and perf in msg and "allowed: " in msg, msg
    assert "runs as root" in msg and "\n" not in msg, msg
    for w in words:
        assert w in msg, msg
    assert e.value.input == "perf"
    return msg


def test_root_owned_0755_file_in_root_owned_0755_folder_is_accepted(safe_dir):
    p = _exe(safe_dir)
    perfrecord.check_perf(str(p))
    assert perfrecord.perf_root_refusal(str(p)) is None


def test_file_owned_by_another_uid_is_refused(safe_dir):
    p = _exe(safe_dir, uid=NOBODY)
    _refused(str(p), f"owned by uid {NOBODY}", "owned by root")


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_file_writable_by_group_or_others_is_refused(safe_dir, mode):
    p = _exe(safe_dir, mode=mode)
    _refused(str(p), "writable by group or others", f"{mode:04o}")


def test_file_that_is_not_executable_or_not_regular_is_refused(safe_dir):
    p = _exe(safe_dir, mode=0o644)
    _refused(str(p), "not executable")
    _refused(str(safe_dir), "not a regular file")


@pytest.mark.parametrize("mode, uid", [(0o777, 0), (0o775, 0), (0o755, NOBODY)])
def test_folder_another_user_can_write_is_refused(tmp_path, mode, uid):
    d = tmp_path / "userbin"
    p = _exe(d)
    os.chown(d, uid, 0)
    d.chmod(mode)
    msg = _refused(str(p), str(d))
    assert ("writable by group or others" in msg) if uid == 0 else (f"owned by uid {uid}" in msg)


def test_any_ancestor_folder_counts(tmp_path):
    top = tmp_path / "open"
    p = _exe(top / "a" / "b")
    top.chmod(0o777)
    _refused(str(p), str(top), "writable by group or others")


def test_sticky_world_writable_folder_with_root_owned_entries_is_accepted(safe_dir):
    d = safe_dir / "sticky"
    p = _exe(d)
    d.chmod(0o1777)
    perfrecord.check_perf(str(p))


def test_symlink_in_a_user_writable_folder_is_refused_even_to_a_safe_target(tmp_path, safe_dir):
    target = _exe(safe_dir)
    d = tmp_path / "links"
    d.mkdir()
    os.chown(d, NOBODY, 0)
    (d / "perf").symlink_to(target)
    _refused(str(d / "perf"), f"owned by uid {NOBODY}")
    # and a safe symlink to a file another user owns is refused for the file
    bad = _exe(safe_dir / "other", uid=NOBODY)
    (safe_dir / "perf-link").symlink_to(bad)
    _refused(str(safe_dir / "perf-link"), f"owned by uid {NOBODY}")
    # a root-safe symlink to a root-safe file is fine
    (safe_dir / "good-link").symlink_to(target)
    perfrecord.check_perf(str(safe_dir / "good-link"))


def test_a_name_is_resolved_on_path_and_checked(safe_dir, tmp_path, monkeypatch):
    d = tmp_path / "userpath"
    _exe(d, uid=NOBODY)
    monkeypatch.setenv("PATH", f"{d}:{os.environ.get('PATH', '')}")
    msg = _refused("perf", str(d / "perf"))
    assert "'perf' (" in msg


def test_missing_perf_is_left_to_unavailable_reason(tmp_path):
    perfrecord.check_perf(str(tmp_path / "nope" / "perf"))
    assert "not found" in perfrecord.unavailable_reason(str(tmp_path / "nope" / "perf"), probe=False)


def test_not_root_is_not_checked(safe_dir, monkeypatch):
    p = _exe(safe_dir, mode=0o777)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    perfrecord.check_perf(str(p))


def test_the_experiment_refuses_the_parameter_and_never_runs_it(safe_dir):
    p = _exe(safe_dir, mode=0o777)
    with pytest.raises(ParamError, match=r"^parameter 'perf': .*writable by group or others.*allowed: "):
        PerfRb.resolve({"perf": str(p), "variants": "base,forward"}, profile="smoke")
    # only base: perf is never run, so it is not checked
    PerfRb.resolve({"perf": str(p), "variants": "base"}, profile="smoke")
    perfrecord.clear_cache()
    reason = perfrecord.unavailable_reason(str(p))
    assert reason.startswith("parameter 'perf': ") and "writable by group or others" in reason
    assert not Path(str(p) + ".ran").exists(), "the probe must not run a refused perf"


def test_cli_run_exits_2_naming_the_parameter(safe_dir, tmp_path, capsys):
    from ringlab.lab.cli import main
    p = _exe(safe_dir, uid=NOBODY)
    rc = main(["run", "perf_rb", "-p", "perf", str(p), "-p", "variants", "forward", "-p", "profile", "smoke",
               "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "parameter 'perf'" in err and str(p) in err and "Traceback" not in err
    assert not Path(str(p) + ".ran").exists()


def test_env_probe_does_not_run_a_perf_on_path_another_user_owns(tmp_path, monkeypatch):
    d = tmp_path / "userpath"
    p = _exe(d, uid=NOBODY)
    monkeypatch.setenv("PATH", f"{d}:{os.environ.get('PATH', '')}")
    assert shutil.which("perf") == str(p)
    info = perfprobe.perf_tool()
    assert info["version"] is None and "owned by uid" in info["reason"]
    assert not Path(str(p) + ".ran").exists()
