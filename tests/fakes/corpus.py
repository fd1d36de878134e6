"""The bad-input corpora's one case and one check.

A :class:`Case` is an argv for ``ringlab.lab.cli.main`` (run in this process) with the
placeholders RUN (the case's run folder, a copy of a good run's raw.csv and env.json when
``needs_run``), OUT (a path that must stay absent) and TMP (the case's folder); ``setup(tmp, run)``
breaks something; ``names`` is the text the one error line must contain; ``env`` is set for the
call.  :func:`check_refused` runs a case and asserts what every refusal must hold: exit code 2,
exactly one line on stderr naming the input, no traceback, no escape sequence printed, and nothing
written: not OUT, nothing below the case's folder (results/ and scratch/ point there), nothing in
the working directory and nothing in the checkout.
"""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ringlab.lab import cli

ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass
class Case:
    id: str
    argv: list[str]
    names: str
    setup: Callable[[Path, Path], None] | None = None
    needs_run: bool = False
    env: dict = field(default_factory=dict)


def fill(s: str, tmp: Path, run: Path, out: Path) -> str:
    return s.replace("RUN", str(run)).replace("OUT", str(out)).replace("TMP", str(tmp))


def tree(root: Path) -> dict:
    """Every path below ``root`` with its size and mtime (folders: their entries tell)."""
    return {str(p.relative_to(root)): None if p.is_dir() and not p.is_symlink() else
            (p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*")}


def git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                          capture_output=True, text=True).stdout


def _cwd_entries() -> set[str]:
    return {p.name for p in Path.cwd().iterdir()} - {"build", "scratch"}


def check_refused(case: Case, good_run: Path, tmp_path: Path, monkeypatch, capsys, git_before: str) -> None:
    run, out = tmp_path / "run", tmp_path / "out"
    monkeypatch.setenv("RINGLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("RINGLAB_SCRATCH", str(tmp_path / "scratch"))
    for k, v in case.env.items():
        monkeypatch.setenv(k, v)
    if case.needs_run:
        run.mkdir()
        for name in ("raw.csv", "env.json"):
            shutil.copyfile(good_run / name, run / name)
    if case.setup:
        case.setup(tmp_path, run)
    before, cwd_before = tree(tmp_path), _cwd_entries()
    argv = [fill(a, tmp_path, run, out) for a in case.argv]
    try:
        rc = cli.main(argv)
    except SystemExit as e:   # argparse's own usage errors
        rc = e.code
    cap = capsys.readouterr()
    err = cap.err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2, err
    assert len(lines) == 1, err
    assert fill(case.names, tmp_path, run, out) in lines[0], lines[0]
    assert "\x1b" not in err + cap.out
    assert not out.exists(), "a refused command left its output behind"
    assert tree(tmp_path) == before, "a refused command wrote below its folder"
    assert _cwd_entries() <= cwd_before, "a refused command wrote into the working directory"
    assert git_status() == git_before, "a refused command wrote into the checkout"
