"""The verdict pipeline's types (Rounds -> Estimate -> decide -> Plan -> Comparison) and the
rules ringlab/stats keeps: no file access, no dict with underscore keys, no private imports."""
from __future__ import annotations

import ast
import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ringlab.stats import JSON_FIELDS, Estimate, Rounds, compare, compare_arrays, decide
from ringlab.stats.contract import EXTRA_FIELDS
from ringlab.stats.plan import Plan, least_layouts, plan_more
from ringlab.stats.rounds import Scale

STATS = Path(__file__).resolve().parent.parent / "ringlab" / "stats"
FILE_CALLS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "read_csv", "to_csv", "load",
              "dump", "loads", "mkdir", "exists", "is_file", "glob", "iterdir"}


def _trees():
    for f in sorted(STATS.glob("*.py")):
        yield f.name, ast.parse(f.read_text())


def test_stats_opens_no_file():
    hits = []
    for name, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                fn = node.func
                called = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
                if called in FILE_CALLS:
                    hits.append(f"{name}:{node.lineno} {called}")
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                hits += [f"{name}:{node.lineno} import {m}" for m in mods if m in ("json", "pathlib", "os")]
    assert not hits, hits


def test_no_underscore_keys_and_no_private_imports():
    hits = []
    for name, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                hits += [f"{name}:{node.lineno} key {k.value!r}" for k in node.keys
                         if isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value.startswith("_")]
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                    and isinstance(node.slice.value, str) and node.slice.value.startswith("_") \
                    and not node.slice.value.startswith("__"):
                hits.append(f"{name}:{node.lineno} [{node.slice.value!r}]")
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ringlab"):
                hits += [f"{name}:{node.lineno} {a.name}" for a in node.names if a.name.startswith("_")]
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id.startswith("_") and node.attr.startswith("_") and not node.attr.startswith("__"):
                hits.append(f"{name}:{node.lineno} {node.value.id}.{node.attr}")
    assert not hits, hits


def test_rounds_pair_once_and_choose_the_design():
    b = pd.Series([1.0, 2.0, 3.0, np.nan], index=[0, 1, 2, 3])
    c = pd.Series([1.1, 2.2, 3.3, 4.4], index=[0, 1, 2, 3])
    r = Rounds.pair(b, c)
    assert list(r.common) == [0, 1, 2] and r.paired and r.positive()
    assert r.differences(r.scale(2.0)) == pytest.approx([math.log(1.1)] * 3)
    few = Rounds.pair(pd.Series([1.0, 2.0, 3.0, 4.0], index=[0, 1, 2, 3]), pd.Series([1.0, 2.0], index=[3, 9]))
    assert not few.paired and few.n_common == 1


def _estimate(lo_pct, hi_pct, **kw):
    lo, hi = math.log1p(lo_pct / 100), math.log1p(hi_pct / 100)
    return Estimate((lo + hi) / 2, lo, hi, 0.95, 0.01, 20, "rounds", "paired", Scale(True, 1.0), **kw)


def test_decide_from_the_printed_ci_alone():
    assert decide(_estimate(-3.0, -1.0), "ns_per_op", 0.01).verdict == "faster"
    assert decide(_estimate(1.0, 3.0), "ns_per_op", 0.01).verdict == "slower"
    assert decide(_estimate(1.0, 3.0), "ops_per_s", 0.01).verdict == "faster"
    small = decide(_estimate(0.2, 0.5), "ns_per_op", 0.01)
    assert small.verdict == "slower" and small.note == "significant but within ±1% (the equivalence margin)"
    same = decide(_estimate(-0.5, 0.5), "ns_per_op", 0.01)
    assert same.verdict == "no significant difference" and same.note == "within ±1% (the equivalence margin)"
    # the note names the margin tested, whatever it is
    assert decide(_estimate(-0.5, 0.5), "ns_per_op", 0.02).note == "within ±2% (the equivalence margin)"
    assert decide(_estimate(-1.5, 1.5), "ns_per_op", 0.02).verdict == "no significant difference"
    wide = decide(_estimate(-4.0, 4.0), "ns_per_op", 0.01)
    assert wide.verdict == "inconclusive" and not wide.settled
    assert wide.note == "the CI reaches beyond ±1% (the equivalence margin)"
    nan = Estimate(0.0, math.nan, math.nan, 0.95, math.nan, 1, "rounds", "paired", Scale(True, 1.0))
    assert decide(nan, "ns_per_op", 0.01).note == "too few rounds (1) for a 0.95 CI"
    with pytest.raises(dataclasses.FrozenInstanceError):
        nan.p = 0.5


def test_plan_asks_for_more_than_was_run():
    rng = np.random.default_rng(0)
    d = rng.normal(0.01, 0.05, 20)
    est = _estimate(-4.0, 4.0)
    plan = plan_more(est, 0.01, 0.05, d=d)
    assert isinstance(plan, Plan) and plan.trials >= est.n + 1 and plan.basis.startswith("trials_needed for")
    assert "±1% (the equivalence margin)" in plan.basis


def test_plan_does_not_depend_on_the_observed_effect():
    # two rows with the same spread and different effects get the same plan: the plan is for the
    # target half-width at the variance measured, not post-hoc power against the estimate
    rng = np.random.default_rng(11)
    d = rng.normal(0.0, 0.04, 12)
    rows = [compare_arrays(np.ones(12), np.exp(d + shift), paired=True) for shift in (0.0, 0.012)]
    assert [r["verdict"] for r in rows] == ["inconclusive", "inconclusive"]
    assert rows[0]["delta_pct"] != pytest.approx(rows[1]["delta_pct"], abs=0.5)
    assert rows[0]["trials_needed"] == rows[1]["trials_needed"] > 12
    # halving the target quadruples the rounds (the half-width narrows with sqrt(n))
    est = _estimate(-4.0, 4.0)
    big = np.random.default_rng(1).normal(0.0, 0.05, 20)
    n1, n2 = plan_more(est, 0.01, 0.05, d=big).trials, plan_more(est, 0.005, 0.05, d=big).trials
    assert n2 / n1 == pytest.approx(4.0, rel=0.02)
    assert plan_more(est, 0.01, 0.05, d=big + 0.03).trials == n1


def test_planned_rounds_reach_the_target_half_width():
    # at the spread the plan was made for (a long pilot: its spread is the true one), the planned
    # n drawn afresh gives signed-rank CIs whose typical half-width is the target (the exact
    # interval's discreteness makes it a little wider at these n)
    from ringlab.stats import ranktests as rt
    rng = np.random.default_rng(12)
    pilot = rng.normal(0.0, 0.03, 2000)
    n = int(plan_more(_estimate(-4.0, 4.0), 0.01, 0.05, d=pilot).trials)
    widths = []
    for _ in range(40):
        ci = rt.signed_rank(rng.normal(0.0, 0.03, n), 0.95)
        widths.append((ci["ci_high"] - ci["ci_low"]) / 2)
    assert 30 <= n <= 45 and 0.85 * math.log1p(0.01) < np.median(widths) <= 1.1 * math.log1p(0.01), (n, np.median(widths))


def test_least_layouts():
    k = least_layouts(0.02 ** 2, math.log1p(0.05))
    assert k >= 3 and least_layouts(0.05 ** 2, math.log1p(0.05)) > k
    assert math.isnan(least_layouts(math.nan, 0.05))


def test_compare_frame_columns_are_serialized_in_one_order():
    from tests.synth import make_raw
    df = make_raw(trials=10, warmup=0, rounds_col=True, cv=0.03, effects={"reorder": 0.05})
    res = compare(df, "batch")
    cols = res.attrs["group_columns"]
    assert list(res.columns) == JSON_FIELDS + cols + EXTRA_FIELDS


def test_layouts_plan_does_not_depend_on_the_observed_effect():
    # the layouts design: K from the measured layout and round variance, the same for two rows whose
    # data differ by a constant effect only
    rng = np.random.default_rng(13)
    K, R = 6, 8
    lay = np.repeat(np.arange(K), R)
    rnd = np.arange(K * R)
    base = 10 * np.exp(rng.normal(0, 0.01, K * R))
    d = rng.normal(0, 0.03, K)[lay] + rng.normal(0, 0.02, K * R)

    def frame(shift):
        cand = base * np.exp(d + shift)
        return pd.DataFrame({"variant": ["base"] * (K * R) + ["cand"] * (K * R), "mode": 0,
                             "round": np.concatenate([rnd, rnd]), "trial": np.concatenate([rnd, rnd]),
                             "layout": np.concatenate([lay, lay]), "ns_per_op": np.concatenate([base, cand])})
    rows = [compare(frame(s), "base").iloc[0] for s in (0.0, -0.01)]
    assert [r["design"] for r in rows] == ["layouts", "layouts"]
    assert [r["verdict"] for r in rows] == ["inconclusive", "inconclusive"], [r["note"] for r in rows]
    assert abs(rows[0]["delta_pct"] - rows[1]["delta_pct"]) > 0.9
    assert rows[0]["trials_needed"] == rows[1]["trials_needed"] > K * R


def test_a_staged_runs_target_is_what_the_plan_is_for():
    # with a staged run's target_ci (and a mode's own target) the plan is for that half-width, and
    # says so; a target twice the margin needs a quarter of the rounds
    rng = np.random.default_rng(14)
    rows = []
    for mode in (0, 1):
        d = rng.normal(0, 0.04, 12)
        rows.append(pd.DataFrame({"variant": ["base"] * 12 + ["cand"] * 12, "mode": mode,
                                  "round": list(range(12)) * 2, "trial": list(range(12)) * 2,
                                  "ns_per_op": np.concatenate([np.full(12, 10.0), 10 * np.exp(d)])}))
    df = pd.concat(rows, ignore_index=True)
    margin = compare(df, "base")
    staged = compare(df, "base", plan_target=0.02, plan_target_by_mode={"1": 0.04})
    assert list(margin["verdict"]) == ["inconclusive"] * 2 and list(staged["verdict"]) == ["inconclusive"] * 2
    assert all("±1% (the equivalence margin)" in n for n in margin["note"])
    assert "±2% (the run's target_ci)" in staged["note"].iloc[0]
    assert "±4% (mode 1's target_ci)" in staged["note"].iloc[1]
    for i, k in ((0, 4), (1, 16)):
        assert staged["trials_needed"].iloc[i] == pytest.approx(
            max(margin["trials_needed"].iloc[i] / k, 13), rel=0.1, abs=1)
