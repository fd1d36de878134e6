"""``ringlab bench repro --from DIR``: a series of session-N run folders analysed, nothing run."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ringlab.stats.replication import MIN_RUNS


def _session(d: Path, i: int, shifts: dict) -> None:
    """Run folder ``d``: base, d2 and d8 in modes 0 and 1, d2 +2.5%, d8 +7.7% plus ``shifts[i]``."""
    rng = np.random.default_rng(i)
    rows = []
    for mode in (0, 1):
        for r in range(40):
            b = 100 * math.exp(rng.normal(0, 0.01))
            rows.append({"experiment": "ptr_ring", "variant": "base", "mode": mode, "round": r, "trial": r,
                         "status": "ok", "ns_per_op": b, "host": "h"})
            for v, e in (("d2", 0.025), ("d8", 0.077)):
                rows.append({"experiment": "ptr_ring", "variant": v, "mode": mode, "round": r, "trial": r,
                             "status": "ok", "ns_per_op": b * math.exp(e + shifts.get(i, 0.0) + rng.normal(0, 0.01)),
                             "host": "h"})
    d.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(d / "raw.csv", index=False)
    (d / "env.json").write_text(json.dumps({"run_id": d.name, "experiment": "ptr_ring", "host": "h",
                                            "status": "complete", "baseline": "base",
                                            "started_utc": f"2026-12-07T1{i}:00:00Z", "parameters": {"seed": i}}))


def _repro():
    import importlib.util
    spec = importlib.util.spec_from_file_location("repro", Path(__file__).resolve().parent.parent / "benchmarks" / "repro.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_repro_from_a_series_prints_transitions_bases_and_the_fifth_run(tmp_path, capsys):
    for i in range(1, 6):
        _session(tmp_path / f"session-{i}", i, {})
    (tmp_path / "session-6").mkdir()           # no run in it: left out
    repro = _repro()
    assert [d.name for d in repro.series_dirs(tmp_path)] == [f"session-{i}" for i in range(1, 6)]
    rc = repro.main(["--from", str(tmp_path), "--modes", "0", "--arms", "d8"])
    out = capsys.readouterr().out
    assert "nothing run" in out and "d8 vs base, mode=0" in out and "d2 vs base" not in out and "mode=1" not in out
    assert "next-run interval 4 of 4 (4 of 4 wanted)" in out and rc == 0
    assert "no between-run information: the interval of a rerun if nothing drifted" in out
    assert f"from {MIN_RUNS} runs of this comparison" in out
    assert "the first 4 runs combined (random effects, HKSJ)" in out and "run session-5's" in out
    assert out.rstrip().splitlines()[-2].endswith("holds it"), "the prediction interval holds the fifth run"


def test_repro_from_a_series_whose_last_run_moved_exits_1(tmp_path, capsys):
    for i in range(1, 6):
        _session(tmp_path / f"session-{i}", i, {5: 0.08})
    rc = _repro().main(["--from", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1 and "d2 vs base, mode=1" in out and "does not hold" in out


def test_repro_from_a_folder_of_one_run_says_a_series_needs_two(tmp_path, capsys):
    _session(tmp_path / "session-1", 1, {})
    assert _repro().main(["--from", str(tmp_path)]) == 1
    assert "a series needs two runs or more" in capsys.readouterr().out


def test_repro_prints_the_reports_one_sign(tmp_path, capsys):
    """d8 takes about 8% more time than base: every report prints that as -8% (+ = better), and so
    does repro, its CI and next-run interval in the same sign; past ±50% a factor."""
    import re
    from ringlab.studies.sessions import change_cells
    for i in range(1, 6):
        _session(tmp_path / f"session-{i}", i, {})
    _repro().main(["--from", str(tmp_path), "--modes", "0", "--arms", "d8"])
    out = capsys.readouterr().out
    assert "%change: + = better" in out and "%change (+ = faster)" in out
    runs = re.findall(r"^  session-\d\s+([+-]\d+\.\d\d)%\s+\[([+-][\d.]+), ([+-][\d.]+)\]", out, re.M)
    assert len(runs) == 5
    for est, lo, hi in runs:
        assert -9.5 < float(est) < -6.5 and float(lo) <= float(est) <= float(hi)
    assert change_cells(8.0, 6.0, 10.0) == ("-8.00%", "[-10.00, -6.00]")
    assert change_cells(8.0, 6.0, 10.0, lower_is_better=False) == ("+8.00%", "[+6.00, +10.00]")
    assert change_cells(890.0, 680.0, 1060.0) == ("×9.9 slower", "[×7.8, ×11.6] slower")


def test_sessions_table_prints_the_reports_one_sign():
    from ringlab.studies.sessions import table_lines
    comb = pd.DataFrame([{"candidate": "d8", "baseline": "base", "config": "mode=0", "k": 5, "estimate_pct": 8.0,
                          "ci_low_pct": 6.0, "ci_high_pct": 10.0, "tau_pct": 0.5, "i2": 0.1, "q_p": 0.4,
                          "pi_low_pct": 4.0, "pi_high_pct": 12.0, "heterogeneous": False, "lower_is_better": True}])
    lines = table_lines(comb)
    assert "-8.00% [-10.00, -6.00]" in lines[1] and lines[1].endswith("[-12.00, -4.00]")
    assert lines[-1].startswith("%change: + = better")
