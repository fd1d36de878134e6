"""`ringlab env --headers`: the kernel header trees on this machine, newest first."""
from __future__ import annotations

from ringlab.sources import kernel_header as kh
from ringlab.lab.cli import main


def _tree(root, name):
    h = root / name / "include" / "linux" / "ptr_ring.h"
    h.parent.mkdir(parents=True)
    h.write_text("/* test header */\n")


def test_trees_newest_first(tmp_path, monkeypatch, capsys):
    for name in ("linux-headers-6.1.0-9-common", "linux-headers-6.1.0-57-common", "linux-headers-6.1.0-50-common"):
        _tree(tmp_path, name)
    (tmp_path / "linux-headers-6.1.0-57-amd64" / "include").mkdir(parents=True)   # no ptr_ring.h
    monkeypatch.setattr(kh, "USR_SRC", tmp_path)
    assert main(["env", "--headers"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [str(tmp_path / f"linux-headers-6.1.0-{v}-common") for v in (57, 50, 9)]


def test_none_is_exit_1_with_a_message(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(kh, "USR_SRC", tmp_path)
    assert main(["env", "--headers"]) == 1
    cap = capsys.readouterr()
    assert cap.out == "" and "no kernel header tree found" in cap.err and "\n" == cap.err[-1]
    assert cap.err.count("\n") == 1
