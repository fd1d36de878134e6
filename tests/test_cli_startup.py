"""What a command loads before it does its work.

``ringlab`` imports a command's module only when that command runs, and a run without a target
never loads the statistics: scipy, matplotlib and seaborn take a second or more to import here,
and about a minute on an emulated CPU (the QEMU guests of tests/test_guest_topology.py).  The
kmod trial process, started once per insmod, loads no pandas.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("scipy", "matplotlib", "seaborn", "statsmodels", "papermill", "nbformat")

PROBE = ("import contextlib, io, json, sys\n"
         "from ringlab.lab.cli import main\n"
         "with contextlib.redirect_stdout(io.StringIO()):\n"
         "    main(json.loads(sys.argv[1]))\n"
         "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in json.loads(sys.argv[2]))))\n")


def _loaded(argv: list[str], heavy=HEAVY) -> set[str]:
    p = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv), json.dumps(list(heavy))],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return {m.split(".")[0] for m in json.loads(p.stdout.splitlines()[-1])}


@pytest.mark.parametrize("argv", [["run", "ptr_ring", "--list-params"], ["env", "--help"], ["build", "--help"]],
                         ids=lambda a: " ".join(a))
def test_a_command_loads_no_statistics_or_plotting(argv):
    assert _loaded(argv) == set()


def test_the_probe_sees_a_command_that_loads_them():
    assert {"scipy", "matplotlib"} <= _loaded(["compare", "--help"])


def test_the_kmod_trial_process_loads_no_pandas():
    p = subprocess.run([sys.executable, "-c", "import sys, ringlab.tools.kmod; print('pandas' in sys.modules)"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "False", p.stdout + p.stderr
