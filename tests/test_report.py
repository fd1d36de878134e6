import hashlib
import subprocess
import sys

import pytest

from ringlab.report import write_report
from ringlab.report.tables import NA_COUNTERS
from synth import make_raw


def _sha(p):
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def run_dir(tmp_path):
    df = make_raw(effects={"reorder": -0.05}, params={"mode": [0, 1], "size": [1000]}, trials=30, seed=1,
                  counters=True, c2c=60.0, slow_frac=0.1)
    df.to_csv(tmp_path / "raw.csv", index=False)
    return tmp_path


def test_write_report_tables(run_dir):
    paths = write_report(run_dir, baseline="batch", labels={"batch": "unpatched", "reorder": "patched"})
    md = (run_dir / "summary.md").read_text()
    assert "| mode | unpatched (batch) | patched (reorder) | delta | 95% CI of delta " \
           "| gain (mail sign: + = candidate faster) | 95% CI of gain | p (Holm) | verdict |" in md
    assert "IPC" in md and "instructions/op" in md
    assert "slow trials had" in md  # cause of the 10% slow trials
    assert "excluded" in md
    assert (run_dir / "summary.csv").read_text().startswith("metric,")
    tex = (run_dir / "summary.tex").read_text()
    assert "\\begin{tabular}" in tex and "\\%" in tex
    assert {"box", "ecdf", "order", "spsc", "counters"} <= set(paths["figures"])


def test_counters_na_when_unsupported(tmp_path):
    make_raw(trials=10, seed=2).to_csv(tmp_path / "raw.csv", index=False)
    write_report(tmp_path, figures=False)
    md = (tmp_path / "summary.md").read_text()
    assert NA_COUNTERS in md


def test_figures_are_byte_identical(tmp_path):
    df = make_raw(trials=20, seed=3, counters=True, c2c=50.0,
                  cpu_pairs=[(a, b) for a in range(3) for b in range(3) if a != b])
    hashes = []
    for k in range(2):
        d = tmp_path / f"r{k}"
        d.mkdir()
        df.to_csv(d / "raw.csv", index=False)
        paths = write_report(d, baseline="batch")
        files = sorted(p for ps in paths["figures"].values() for p in ps)
        hashes.append({p.name: _sha(p) for p in files})
    assert "cpu_pairs.png" in hashes[0]
    assert hashes[0] == hashes[1]


def test_elapsed_us_metric_and_cli(tmp_path):
    df = make_raw(variants=("base", "backward"), trials=30, seed=4, metric="elapsed_us", base_ns=2.25e6,
                  experiment="perf_rb", params={"events": ["raw_syscalls"]})
    df.to_csv(tmp_path / "raw.csv", index=False)
    out = subprocess.run([sys.executable, "-m", "ringlab", "summarize", str(tmp_path), "--baseline", "base",
                          "--no-figures"], capture_output=True, text=True, check=True).stdout
    assert "summary.md" in out
    md = (tmp_path / "summary.md").read_text()
    assert " s |" in md  # 2.25e6 us shown in seconds
    bad = subprocess.run([sys.executable, "-m", "ringlab", "summarize", str(tmp_path / "nope")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "no raw.csv" in bad.stderr
