"""A comparison in several sessions: each a run folder, a failed one recorded, a series resumed,
and the sessions combined by random effects."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ringlab.errors import ParamError
from ringlab.lab import cli
from ringlab.studies import sessions


def _write_run(d: Path, effect: float, seed: int, status: str = "complete") -> None:
    """A run folder of arms a and b (mode 0), whose b is ``effect`` (log) slower."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(30):
        base = 100 * math.exp(rng.normal(0, 0.01))
        for v, x in (("a", base), ("b", base * math.exp(effect + rng.normal(0, 0.01)))):
            rows.append({"experiment": "ptr_ring", "variant": v, "mode": 0, "round": r, "trial": r,
                         "status": "ok", "ns_per_op": x, "host": "h"})
    d.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(d / "raw.csv", index=False)
    import json
    (d / "env.json").write_text(json.dumps({"run_id": d.name, "host": "h", "status": status, "baseline": "a",
                                            "started_utc": f"2026-12-04T0{seed % 10}:00:00Z"}))


class FakeRun:
    """``run_experiment``'s stand-in: writes a run per call; ``fail`` lists the calls that raise."""

    def __init__(self, effects, fail=()):
        self.effects, self.fail, self.calls = list(effects), set(fail), []

    def __call__(self, experiment, params, out_dir, resume=False, build=True, log=None):
        i = len(self.calls)
        self.calls.append((Path(out_dir).name, resume))
        if i in self.fail:
            raise RuntimeError("the build broke")
        _write_run(Path(out_dir), self.effects[i], seed=i)
        return type("R", (), {"status": "complete", "status_reason": ""})()


def test_sessions_each_a_run_folder_a_failure_recorded_the_rest_run(tmp_path):
    fake = FakeRun([0.05, 0.05, 0.05], fail={1})
    naps = []
    recs = sessions.run_sessions("ptr_ring", {}, 3, tmp_path, gap_s=5, run=fake, sleep=naps.append)
    assert [r["status"] for r in recs] == ["complete", "failed", "complete"]
    assert "the build broke" in recs[1]["reason"]
    assert [c[0] for c in fake.calls] == ["session-1", "session-2", "session-3"] and naps == [5, 5]


def test_an_interrupted_series_resumes_and_keeps_complete_sessions(tmp_path):
    _write_run(tmp_path / "session-1", 0.05, 1)
    _write_run(tmp_path / "session-2", 0.05, 2, status="interrupted")
    fake = FakeRun([0.05, 0.05, 0.05])
    recs = sessions.run_sessions("ptr_ring", {}, 3, tmp_path, run=fake, sleep=lambda s: None)
    assert recs[0]["kept"] and fake.calls == [("session-2", True), ("session-3", False)]


@pytest.mark.parametrize("n,gap", [(1, 0), (0, 0), (3, -1), (3, math.nan), (True, 0)])
def test_bad_series_is_refused_naming_the_option(tmp_path, n, gap):
    with pytest.raises(ParamError, match="--sessions|--gap"):
        sessions.run_sessions("ptr_ring", {}, n, tmp_path, gap_s=gap, run=FakeRun([]))


def test_combined_runs_find_an_effect_that_moved(tmp_path):
    dirs = []
    for i, eff in enumerate((0.02, 0.10, 0.03, 0.08)):
        _write_run(tmp_path / f"r{i}", eff, seed=10 + i)
        dirs.append(tmp_path / f"r{i}")
    rows = sessions.run_rows(dirs, "a")
    assert len(rows) == 4 and rows["se"].gt(0).all()
    comb = sessions.combined(rows)
    assert len(comb) == 1 and comb["heterogeneous"].iloc[0] and comb["tau_pct"].iloc[0] > 1
    moved = sessions.moved_text(comb, rows)
    assert len(moved) == 1 and "moved between runs" in moved[0] and "r1" in moved[0]
    hits = sessions.hit_rates(rows)
    assert len(hits) == 3 and not hits["ci_held"].all()


def test_steady_runs_are_not_called_heterogeneous(tmp_path):
    dirs = []
    for i in range(4):
        _write_run(tmp_path / f"r{i}", 0.05, seed=20 + i)
        dirs.append(tmp_path / f"r{i}")
    comb = sessions.combined(sessions.run_rows(dirs, "a"))
    assert not comb["heterogeneous"].iloc[0]
    assert comb["pi_low_pct"].iloc[0] < 5.13 < comb["pi_high_pct"].iloc[0]


def test_combine_command_prints_the_table(tmp_path, capsys):
    for i, eff in enumerate((0.02, 0.10, 0.03)):
        _write_run(tmp_path / f"r{i}", eff, seed=30 + i)
    assert cli.main(["sessions", "--combine", *(str(tmp_path / f"r{i}") for i in range(3))]) == 0
    out = capsys.readouterr().out
    assert "b vs a" in out and "heterogeneous" in out and "next run" in out


def test_sessions_command_needs_an_out_folder(capsys):
    assert cli.main(["sessions", "ptr_ring", "-n", "2"]) == 2
    assert "--out" in capsys.readouterr().err


def test_calibrate_between_refuses_one_session(capsys):
    assert cli.main(["calibrate", "--between-only", "--between", "1"]) == 2
    assert "--between" in capsys.readouterr().err




def test_compare_runs_says_which_comparisons_have_a_next_run_interval(tmp_path):
    from ringlab.studies import compare_runs
    for i in range(3):
        _write_run(tmp_path / f"r{i}", 0.05, seed=40 + i)
    rows = sessions.run_rows([tmp_path / f"r{i}" for i in range(3)], "a")
    three = sessions.combined(rows)
    two = sessions.combined(rows[rows["run"] != rows["run"].iloc[-1]])
    assert math.isfinite(three["pi_low_pct"].iloc[0]) and not math.isfinite(two["pi_low_pct"].iloc[0])
    assert "1 of 1 have the three runs or more" in compare_runs.heterogeneity_lines(rows, three)[1]
    line = compare_runs.heterogeneity_lines(rows, two)[1]
    assert line.startswith("0 of 1 have the three runs or more") and "drawn without one" in line


def _rec(run, log_delta, se, config="mode=0"):
    return {"baseline": "a", "candidate": "b", "config": config, "run": run, "log_delta": log_delta, "se": se,
            "df": math.inf, "delta_pct": math.expm1(log_delta) * 100,
            "ci_low_pct": math.expm1(log_delta - 1.96 * se) * 100, "ci_high_pct": math.expm1(log_delta + 1.96 * se) * 100}


def test_hit_rates_take_each_runs_interval_from_the_runs_before_it_and_itself():
    """Run 1 of a comparison: the host's A/A of the row's mode (none in another mode); from run 2
    on: the runs so far, never a later one (their Q-profile bound before run MIN_RUNS)."""
    from ringlab.stats.replication import MIN_RUNS, Between, between_of_runs
    effs = [0.020, 0.031, 0.012, 0.027, 0.018, 0.024]
    rows = pd.DataFrame([_rec(f"r{i}", e, 0.004) for i, e in enumerate(effs)])
    aa = Between(tau2=0.005 ** 2, df=math.inf, basis="host A/A", runs=6, text="host A/A upper bound from 6 runs")
    hits = sessions.hit_rates(rows, {"0": aa})
    assert list(hits["next_basis"]) == ["host A/A"] + ["runs"] * (len(effs) - 2)
    assert hits.iloc[1]["next_source"] == "from 2 runs of this comparison (Q-profile 40% bound)"
    own = between_of_runs(effs[:MIN_RUNS], [0.004 ** 2] * MIN_RUNS)
    r = hits.iloc[MIN_RUNS - 1]
    assert r["next_source"] == f"from {MIN_RUNS} runs of this comparison"
    assert r["next_between_sd_pct"] == pytest.approx(own.tau * 100)
    changed = rows.copy()
    changed.loc[len(effs) - 1, "log_delta"] = 0.5          # a wild last run changes no earlier interval
    again = sessions.hit_rates(changed, {"0": aa})
    assert again["next_low_pct"].iloc[:-1].tolist() == pytest.approx(hits["next_low_pct"].iloc[:-1].tolist())
    other = sessions.hit_rates(pd.DataFrame([_rec(f"r{i}", e, 0.004, "mode=1") for i, e in enumerate(effs)]),
                               {"0": aa})
    assert other["next_basis"].iloc[0] == "none", "no mode lends its A/A"
    assert sessions.hit_rates(rows)["next_basis"].iloc[0] == "none"
