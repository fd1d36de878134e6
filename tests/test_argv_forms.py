"""The forms of a ringlab command line that options.Command reads beyond click's defaults, and
the ones it leaves to click: what each accepted argv gives the command, and the one error line
of each rejected one."""
from __future__ import annotations

import pytest

from ringlab.lab import cli


@pytest.mark.parametrize("argv, attr, value", [
    # -p NAME VALUE, -p NAME=VALUE, attached and prefixed spellings
    (["run", "ptr_ring", "-pcflags=-O3"], "parameter", [("cflags", "-O3")]),
    (["run", "ptr_ring", "--param", "cflags", "-O3"], "parameter", [("cflags", "-O3")]),
    (["run", "ptr_ring", "-p", "a=b", "-p", "c", "d=e"], "parameter", [("a", "b"), ("c", "d=e")]),
    # a unique prefix names the option; a value given with = is that value alone
    (["run", "ptr_ring", "--res", "--no-b", "--out", "d"], "resume", True),
    (["run", "ptr_ring", "--out=--resume"], "out", "--resume"),
    (["run", "ptr_ring", "--out", "--"], "out", "--"),
    (["build", "--kernel-header", "a=b", "--kernel-header=c=d", "--cfl", "-O3"], "kernel_header", ["a=b", "c=d"]),
    # greedy: every word up to the next option, "-" included; repeated, the lists add up
    (["reproduce", "--only", "10", "-", "11", "--only", "3"], "only", ["10", "-", "11", "3"]),
    (["reproduce", "--on", "10", "11", "--profile", "smoke"], "only", ["10", "11"]),
    # short options as click takes them: value attached, value beginning with -
    (["mail", "d", "-ofile"], "output", "file"),
    (["mail", "d", "-o", "-x"], "output", "-x"),
    (["sessions", "-n3", "ptr_ring"], "n", 3),
    # options and positional words interleave
    (["sessions", "ptr_ring", "r1", "-n", "2", "r2"], "runs", ["r1", "r2"]),
    (["import-perf", "-"], "file", "-"),
    # fleet submit: its options, then the command as it stands (unknown options included)
    (["fleet", "submit", "--nodes", "a", "-x", "run"], "cmd", ["-x", "run"]),
    (["fleet", "submit", "--nod", "a", "--", "--"], "cmd", ["--"]),
    (["fleet", "submit", "--nodes", "a", "--", "run", "ptr_ring", "--out", "x"], "cmd",
     ["run", "ptr_ring", "--out", "x"]),
])
def test_accepted(argv, attr, value):
    assert getattr(cli.parse_args(argv), attr) == value


@pytest.mark.parametrize("argv, line", [
    (["run", "ptr_ring", "-p", "1x", "v"],
     "ringlab run: error: argument -p/--parameter: expected NAME VALUE or NAME=VALUE, got '1x v'"),
    (["run", "ptr_ring", "-p", "a=b", "c"], "ringlab run: error: unrecognized arguments: c"),
    (["run", "ptr_ring", "--no-b=1"], "ringlab run: error: Option '--no-build' does not take a value"),
    (["run", "ptr_ring", "--bogus=1"], "ringlab run: error: unrecognized arguments: --bogus; allowed: -p/--parameter,"),
    (["run", "ptr_ring", "-p", "cflags", "-O3", "--", "--x"], "ringlab run: error: unrecognized arguments: --x"),
    (["run", "ptr_ring", "--pro", "--out"], "ringlab run: error: argument --out: expected one argument"),
    (["run", "ptr_ring", "--out", "--no"], "ringlab run: error: argument --out: expected one argument"),
    (["reproduce", "--only=10", "11"], "ringlab reproduce: error: unrecognized arguments: 11"),
    (["mail", "d", "-o"], "ringlab mail: error: argument -o/--output: expected one argument"),
    (["run", "ptr_ring", "-hp"], "ringlab run: error: Option '-p' requires an argument"),
])
def test_rejected(capsys, argv, line):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith(line), err
