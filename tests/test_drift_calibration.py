"""`ringlab calibrate --between`'s analysis: the A/A part of drift.json, read back by the reports."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ringlab.rundir.calibration import host_between
from ringlab.stats.replication import between_of_host_aa
from ringlab.studies import drift


def _session(d: Path, i: int, tau: float) -> None:
    """Arms a, b (an A/A) and d (+7.7%) in modes 0 and 1; each session's run effect ~ N(0, tau)."""
    rng = np.random.default_rng(50 + i)
    shift = rng.normal(0, tau, 2)
    rows = []
    for mode in (0, 1):
        for r in range(40):
            base = 100 * math.exp(rng.normal(0, 0.01))
            for v, e in (("a", 0.0), ("b", shift[0]), ("d", 0.077 + shift[1])):
                x = base if v == "a" else base * math.exp(e + rng.normal(0, 0.01))
                rows.append({"experiment": "ptr_ring", "variant": v, "mode": mode, "round": r, "trial": r,
                             "status": "ok", "ns_per_op": x, "host": "h"})
    d.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(d / "raw.csv", index=False)
    (d / "env.json").write_text(json.dumps({"run_id": d.name, "host": "h", "status": "complete", "baseline": "a"}))


def test_drift_json_keeps_the_aa_runs_and_the_reports_read_its_upper_bound(tmp_path):
    dirs = []
    for i in range(5):
        _session(tmp_path / f"session-{i + 1}", i, tau=0.01)
        dirs.append(tmp_path / f"session-{i + 1}")
    doc = drift.analyse(dirs)
    assert set(doc["modes"]) == {"0", "1"}
    m0 = doc["modes"]["0"]
    aa = m0["aa"]
    assert len(aa["effects_log"]) == len(aa["variances_log"]) == 5 == m0["runs"]
    bound = between_of_host_aa(aa["effects_log"], aa["variances_log"])
    assert m0["tau_upper_pct"] == pytest.approx(bound.tau * 100) and m0["tau_upper_pct"] >= m0["tau_pct"]
    assert "rel" not in m0 and m0["ab"]["estimate_pct"] > 5, "the known A/B is kept for reference only"
    cal = tmp_path / "calibration" / "h"
    cal.mkdir(parents=True)
    (cal / "drift.json").write_text(json.dumps({"date_utc": "2026-12-07T00:00:00Z", **doc}))
    got = host_between("h", tmp_path)
    assert got["0"].tau2 == pytest.approx(bound.tau2) and got["0"].basis == "host A/A"
    text = "\n".join(drift.lines({"sessions": 5, "span_min": 10, **doc}))
    assert "mode 0: A/A tau" in text and "upper bound" in text and "for reference, the known A/B" in text
