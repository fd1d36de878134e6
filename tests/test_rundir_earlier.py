"""A run's earlier runs of the same comparison on its host, and the next-run interval they give."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ringlab.rundir import earlier
from ringlab.rundir.calibration import with_host_next_run
from ringlab.stats import compare
from ringlab.stats.replication import MIN_RUNS, between_of_runs, log_ratio, row_se

PARAMS = {"modes": [0], "sizes": [1000], "layouts": 8}


def _run(d: Path, i: int, effect: float = 0.03, host: str = "h", params: dict | None = None,
         status: str = "complete", seed: int | None = None) -> Path:
    """Run folder ``d``: arms a and b (mode 0) with b ``effect`` (log) slower, started at hour ``i``."""
    rng = np.random.default_rng(100 + i if seed is None else seed)
    rows = []
    for r in range(30):
        base = 100 * math.exp(rng.normal(0, 0.01))
        for v, x in (("a", base), ("b", base * math.exp(effect + rng.normal(0, 0.01)))):
            rows.append({"experiment": "ptr_ring", "variant": v, "mode": 0, "round": r, "trial": r,
                         "status": "ok", "ns_per_op": x, "host": host})
    d.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(d / "raw.csv", index=False)
    (d / "env.json").write_text(json.dumps({
        "run_id": d.name, "experiment": "ptr_ring", "host": host, "status": status, "baseline": "a",
        "started_utc": f"2026-12-04T{i:02d}:00:00Z", "parameters": {**PARAMS, "seed": i, **(params or {})}}))
    return d


def test_earlier_runs_are_the_same_command_on_the_same_host_started_before(tmp_path):
    s = [_run(tmp_path / f"session-{i}", i) for i in range(1, 6)]
    _run(tmp_path / "other-host", 0, host="g")
    _run(tmp_path / "other-params", 0, params={"layouts": 4})
    _run(tmp_path / "failed", 0, status="failed")
    assert earlier.earlier_runs(s[3]) == s[:3]
    assert earlier.earlier_runs(s[0]) == []
    assert earlier.earlier_runs(tmp_path / "nothing-here") == []


def test_next_run_basis_is_this_comparisons_runs_from_min_runs_on(tmp_path):
    s = [_run(tmp_path / f"session-{i}", i, effect=0.03 + 0.01 * (i % 2)) for i in range(1, MIN_RUNS + 2)]

    def row(d):
        raw = pd.read_csv(d / "raw.csv")
        return with_host_next_run(compare(raw, "a"), "h", tmp_path / "no-results", run_dir=d).iloc[0]

    first = row(s[0])
    assert first["next_basis"] == "none" and "no between-run information" in first["next_source"]
    at = row(s[MIN_RUNS - 1])
    assert at["next_basis"] == "runs" and at["next_source"] == f"from {MIN_RUNS} runs of this comparison"
    rows = [compare(pd.read_csv(d / "raw.csv"), "a").iloc[0] for d in s[:MIN_RUNS]]
    own = between_of_runs([log_ratio(r["delta_pct"]) for r in rows], [row_se(r) ** 2 for r in rows])
    assert at["next_between_sd_pct"] == pytest.approx(own.tau * 100)
    # a later run beside it changes nothing
    _run(tmp_path / "session-99", 99, effect=0.4)
    assert row(s[MIN_RUNS - 1])["next_low_pct"] == pytest.approx(at["next_low_pct"])
