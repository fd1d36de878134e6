"""A full disk during a run: one clear message, exit 1, no torn row, no temporary file,
env.json ``interrupted`` (or "running" with no lock held, which reads as interrupted), and a
--resume after freeing space completes the run with no trial lost or duplicated.

The fault-injection tests make the n-th write of raw.csv or env.json fail with ENOSPC; the
tmpfs test fills a real 64 KiB tmpfs (root only)."""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ringlab import rundir
from ringlab.lab import cli
from ringlab.rundir import envjson, rawcsv

FAKES = Path(__file__).resolve().parent / "fakes"
sys.path.insert(0, str(FAKES))

from fakes.cli_runs import KEY, N_TRIALS, PARAMS, raw_rows as rows_written, start_run  # noqa: E402

RUN = ["run", "ptr_ring", *PARAMS, "--no-build", "--no-progress"]


def _check_left_behind(out: Path) -> pd.DataFrame:
    """raw.csv ends with a complete row, no temporary file is left, the run reads interrupted."""
    data = (out / "raw.csv").read_bytes()
    assert data.endswith(b"\n")
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    assert rundir.RunFolder(out).status().state == "interrupted"
    return rundir.read_raw(out / "raw.csv", strict=False)


def _resume_completes(out: Path, capsys) -> None:
    assert cli.main([*RUN, "--out", str(out), "--resume"]) == 0, capsys.readouterr().err
    df = rundir.read_raw(out / "raw.csv", strict=False)
    assert len(df) == N_TRIALS and not df.duplicated(KEY).any()
    assert json.loads((out / "env.json").read_text())["status"] == "complete"


def _fail_raw_csv_write(monkeypatch, nth: int, short: bool) -> None:
    """The nth os.write into a raw.csv fails with ENOSPC, or writes half and returns short."""
    real = os.write
    calls = {"n": 0}

    def write(fd, data):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if target.endswith("/raw.csv"):
            calls["n"] += 1
            if calls["n"] == nth:
                if short:
                    return real(fd, bytes(data)[: len(data) // 2])
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)
    monkeypatch.setattr(rawcsv.os, "write", write)


@pytest.mark.parametrize("short", [False, True], ids=["enospc", "short-write"])
def test_a_full_disk_while_writing_raw_csv_ends_the_run_interrupted(fakebin, tmp_path, monkeypatch, capsys,
                                                                    short):
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        _fail_raw_csv_write(m, 5, short)   # the header, then the 4th trial
        rc = cli.main([*RUN, "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert f"disk full while writing {out / 'raw.csv'}: " in err and "run again with --resume" in err
    assert "Traceback" not in err and len([ln for ln in err.splitlines() if "disk full" in ln]) == 1
    df = _check_left_behind(out)
    assert len(df) == 3
    env = json.loads((out / "env.json").read_text())
    assert env["status"] == "interrupted" and "disk full while writing" in env["status_reason"]
    assert env["trials"]["ok"] == 3
    _resume_completes(out, capsys)


def test_a_full_disk_while_writing_env_json_leaves_no_temporary_file(fakebin, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    real_dump = json.dump
    calls = {"n": 0}

    class FullJson:
        @staticmethod
        def dump(doc, f, **kw):
            calls["n"] += rows_written(out / "raw.csv") > 0
            if calls["n"] == 1:    # a write_env in the middle of the run (after its first rows)
                f.write("{\"partial\": ")
                f.flush()
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_dump(doc, f, **kw)
    with monkeypatch.context() as m:
        m.setattr(envjson, "json", FullJson)
        rc = cli.main([*RUN, "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert f"disk full while writing {out / 'env.json'}: " in err and "Traceback" not in err
    _check_left_behind(out)
    env = json.loads((out / "env.json").read_text())
    assert env["status"] == "interrupted"
    _resume_completes(out, capsys)


def test_when_env_json_cannot_be_written_at_all_the_run_still_reads_interrupted(fakebin, tmp_path, monkeypatch,
                                                                                capsys):
    out = tmp_path / "run"
    real_dump = json.dump
    calls = {"n": 0}

    class FullJson:
        @staticmethod
        def dump(doc, f, **kw):
            calls["n"] += rows_written(out / "raw.csv") > 0
            if calls["n"] >= 1:   # every write_env once the run wrote its first rows
                raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))
            return real_dump(doc, f, **kw)
    with monkeypatch.context() as m:
        m.setattr(envjson, "json", FullJson)
        rc = cli.main([*RUN, "--out", str(out)])
    assert rc == 1
    assert "disk full while writing" in capsys.readouterr().err
    assert json.loads((out / "env.json").read_text())["status"] == "running"
    _check_left_behind(out)
    _resume_completes(out, capsys)


def _mount_tmpfs(mnt: Path, size: str) -> str | None:
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    if not shutil.which("mount"):
        return "no mount command"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True,
                       text=True)
    return None if r.returncode == 0 else f"mount -t tmpfs failed: {r.stderr.strip()}"


def test_a_real_full_tmpfs_then_resume_after_freeing_space(fakebin, tmp_path, capsys):
    mnt = tmp_path / "mnt"
    why = _mount_tmpfs(mnt, "64k")
    if why:
        pytest.skip(why)
    try:
        out = mnt / "run"
        params = list(PARAMS)
        params[params.index("trials") + 1] = "60"   # more rows than 64 KiB holds
        proc = start_run(out, {}, params)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 1, err
        assert f"disk full while writing {out}/" in err and "run again with --resume" in err
        assert "Traceback" not in err
        df = _check_left_behind(out)
        assert 0 < len(df)
        subprocess.run(["mount", "-o", "remount,size=16m", str(mnt)], check=True)
        rc = cli.main(["run", "ptr_ring", "--no-build", "--no-progress", "--out", str(out), "--resume"])
        assert rc == 0, capsys.readouterr().err
        full = rundir.read_raw(out / "raw.csv", strict=False)
        assert len(full) == 3 * 61 and not full.duplicated(KEY).any()
        assert json.loads((out / "env.json").read_text())["status"] == "complete"
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_full_disk_before_the_first_env_json_advises_what_works(fakebin, tmp_path, monkeypatch, capsys):
    """env.json never written: --resume would refuse the folder, so the message does not advise
    it; following its advice (remove the folder, run again) completes the run."""
    out = tmp_path / "run"

    class FullJson:
        @staticmethod
        def dump(doc, f, **kw):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    with monkeypatch.context() as m:
        m.setattr(envjson, "json", FullJson)
        rc = cli.main([*RUN, "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "disk full while writing" in err and "--resume" not in err and "Traceback" not in err
    assert f"{out} holds no env.json" in err and "remove it or pick another --out" in err
    assert not (out / "env.json").exists()
    assert cli.main([*RUN, "--out", str(out), "--resume"]) == 2   # what it did not advise
    assert "holds no env.json" in capsys.readouterr().err
    assert cli.main([*RUN, "--out", str(out)]) == 2
    again = capsys.readouterr().err
    assert "already exists" in again and "--resume" not in again
    shutil.rmtree(out)
    assert cli.main([*RUN, "--out", str(out)]) == 0, capsys.readouterr().err


def test_a_full_disk_while_writing_a_report_advises_running_it_again(tmp_path, monkeypatch):
    """A summary, figure or mail is written again by its own command, which has no --resume."""
    from ringlab.errors import DiskFullError
    from ringlab.rundir import files

    def full(*a, **kw):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(files.os, "fdopen", full)
    with pytest.raises(DiskFullError) as e:
        files.write_text(tmp_path, "summary.md", "x")
    assert str(e.value).endswith("free space and run the command again") and "--resume" not in str(e.value)
