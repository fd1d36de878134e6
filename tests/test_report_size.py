"""`ringlab summarize` and `ringlab mail` of one long configuration (10^5 rows: 2 arms x 50,000
rounds) stay small: each child's peak RSS above that of a child that only imports the same
modules is bounded.  raw.csv is read once, its repeated texts share one object each, the
measurements share the frame's columns, the figures draw a bounded subsample and the CIs of
large groups are not resampled."""
from __future__ import annotations

import importlib.util
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: what summarize or mail of 10^5 rows may add to the RSS of the modules they import (before:
#: about 310 MB and 250 MB; now about 140 MB)
GROWTH_BOUND = 200_000_000


def _compare_size():
    spec = importlib.util.spec_from_file_location("compare_size", ROOT / "benchmarks" / "compare_size.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _peak_rss(argv: list[str], log: Path) -> tuple[int, int, str]:
    """(exit code, peak RSS in bytes, output) of ``argv`` run as a child."""
    def limit():                                      # a blow-up fails fast instead of swapping
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))

    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, preexec_fn=limit, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss * 1024, log.read_text(errors="replace")


def test_summarize_and_mail_of_one_long_configuration_stay_small(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    _compare_size()._write_file(run / "raw.csv", 100_000, 1)   # 2 arms x 1 configuration x 50,000 rounds
    rc, base, text = _peak_rss([sys.executable, "-c", "import ringlab.lab.cli, ringlab.report, ringlab.report.mail, "
                                "ringlab.report.figures, ringlab.lab.commands.summarize, ringlab.lab.commands.mail"],
                               tmp_path / "imports.txt")
    assert rc == 0, text[-2000:]
    for name, argv in (("summarize", ["summarize", str(run), "--baseline", "batch"]),
                       ("mail", ["mail", str(run), "--baseline", "batch"])):
        rc, rss, text = _peak_rss([sys.executable, "-m", "ringlab"] + argv, tmp_path / f"{name}.txt")
        assert rc == 0, text[-2000:]
        assert rss - base < GROWTH_BOUND, (name, rss, base)
    assert "reorder" in text                                 # the mail's table
    summary = (run / "summary.md").read_text()
    assert "reorder" in summary and "not resampled" in summary   # the CIs of 50,000 values per arm
    assert (run / "figures" / "box.png").is_file() and (run / "figures" / "order.png").is_file()
