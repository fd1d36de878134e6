"""What the figures draw: checked on the matplotlib objects each figure function builds."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection
from matplotlib.container import BarContainer
from matplotlib.patches import PathPatch

from ringlab.report import figures, figures_forest
from ringlab.stats import compare
from tests.synth import make_raw


def _legend_texts(fig) -> list[str]:
    out = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    for ax in fig.axes:
        if ax.get_legend() is not None:
            out += [t.get_text() for t in ax.get_legend().get_texts()]
    return out


# -- spsc: points with CIs, references only on scale and for their ring --------------------------
def _spsc_frame(ns: dict, n: int = 30, seed: int = 0, pair_rows: bool = True) -> pd.DataFrame:
    """Two-thread trials on a measured pair (c2c 34.5 ns) and, with ``pair_rows``, same-CPU trials
    without a core-to-core latency."""
    rng = np.random.default_rng(seed)
    rows = []
    for v, centre in ns.items():
        for _ in range(n):
            rows.append({"variant": v, "ns_per_op": centre * rng.lognormal(0, 0.003), "c2c_latency_ns": 34.5,
                         "pair_class": "same-llc", "placement": "split"})
            if pair_rows:
                rows.append({"variant": v, "ns_per_op": centre * 2, "c2c_latency_ns": np.nan,
                             "pair_class": "same-cpu", "placement": "same-core"})
    return pd.DataFrame(rows)


def test_spsc_reference_lines_far_off_the_data_are_named_in_the_title_not_drawn(tmp_path, captured):
    # perf-ring-buffer's case: ~0.58 Mops/s against references at 14.5 and 232 Mops/s
    df = _spsc_frame({"backward": 1700.0, "forward": 1760.0})
    assert figures.spsc(df, "ns_per_op", [], tmp_path / "figures", ring="ptr_ring")
    fig = captured["spsc"]
    ax = fig.axes[0]
    assert not any("reference" in t for t in _legend_texts(fig)), "no line 25x off the data"
    assert "off-scale" in ax.get_title() and "14.5" in ax.get_title() and "232" in ax.get_title()
    assert ax.get_ylim()[1] < 14.5 / 3


def test_spsc_draws_ci_points_not_bars_names_the_placement_and_draws_no_other_rings_references(
        tmp_path, captured):
    # page-frag's case: a 1% difference, the same-cpu placement left out, not a pointer ring
    df = _spsc_frame({"after": 8.0, "before": 8.08})
    figures.spsc(df, "ns_per_op", [], tmp_path / "figures", ring="page_frag")
    ax = captured["spsc"].axes[0]
    assert not any(isinstance(c, BarContainer) for c in ax.containers), "no bars from zero"
    assert not [p for p in ax.patches if p.get_height() > 0 and p.get_width() > 0]
    mops = 1000 / df.loc[df["c2c_latency_ns"].notna(), "ns_per_op"]
    lo, hi = ax.get_ylim()
    assert lo > 0.9 * mops.min() and hi < 1.1 * mops.max(), "the axis shows the difference, not zero"
    title = ax.get_title()
    assert "same-llc" in title and "same-cpu" in title and "not drawn" in title
    assert "no reference" in title and "page_frag" in title
    assert not any("reference" in t for t in _legend_texts(captured["spsc"]))


def test_spsc_draws_a_reference_within_range_for_ptr_ring(tmp_path, captured):
    # 3.6 ns/op: 278 Mops/s; 8/c2c = 232 Mops/s is on scale, 1/(2 c2c) = 14.5 is not
    figures.spsc(_spsc_frame({"batch": 3.6, "reorder": 3.62}), "ns_per_op", [], tmp_path / "figures",
                 ring="ptr_ring")
    texts = _legend_texts(captured["spsc"])
    assert sum("reference" in t for t in texts) == 1 and any("232" in t for t in texts)
    assert "off-scale" in captured["spsc"].axes[0].get_title()


# -- box: dots below 20 trials, range from the trials inside the fences -------------------------
def _box_frame(n: int, outlier: float | None = None) -> pd.DataFrame:
    rng = np.random.default_rng(n)
    d = pd.DataFrame({"variant": np.repeat(["a", "b"], n), "ns_per_op": rng.normal(10, 0.1, 2 * n)})
    if outlier is not None:
        d.loc[0, "ns_per_op"] = outlier
    return d


def test_box_draws_points_not_boxes_below_20_trials(tmp_path, captured):
    figures.box(_box_frame(10), "ns_per_op", [], tmp_path / "figures")
    ax = captured["box"].axes[0]
    assert not [p for p in ax.patches if isinstance(p, PathPatch)], "no quartile box of 10 trials"
    assert sum(len(c.get_offsets()) for c in ax.collections) == 20
    assert "too few for quartile boxes" in ax.get_title()
    figures.box(_box_frame(25), "ns_per_op", [], tmp_path / "f2")
    assert [p for p in captured["box"].axes[0].patches if isinstance(p, PathPatch)], "boxes from 20 trials"


def test_box_range_is_not_set_by_an_outlier_which_is_marked_at_the_edge(tmp_path, captured):
    figures.box(_box_frame(25, outlier=1000.0), "ns_per_op", [], tmp_path / "figures")
    ax = captured["box"].axes[0]
    lo, hi = ax.get_ylim()
    assert hi < 11 and lo > 9, (lo, hi)
    red = [c for c in ax.collections if len(c.get_offsets())
           and np.allclose(np.asarray(c.get_edgecolor() if len(c.get_edgecolor()) else c.get_facecolor())[0][:3],
                           (1, 0, 0))]
    ys = np.concatenate([c.get_offsets()[:, 1] for c in red])
    assert len(ys) == 1 and lo < ys[0] < hi and ys[0] > hi - 0.05 * (hi - lo), "the outlier sits at the top edge"
    assert any("beyond the axis" in t for t in _legend_texts(captured["box"]))


def test_box_has_one_group_per_configuration(tmp_path, captured):
    # no per-trial figure pools modes (the pooled ECDF of two modes is gone)
    df = make_raw(trials=10, seed=1, params={"mode": [0, 1], "size": [1000]})
    figures.render_all(df[~df["warmup"]], "ns_per_op", ["mode", "size"], tmp_path / "figures")
    assert "ecdf" not in captured
    assert [t.get_text() for t in captured["box"].axes[0].get_xticklabels()] == ["mode=0", "mode=1"]


# -- forests -------------------------------------------------------------------------------------
def _rows(effects, verdicts=None, nxt=True):
    e = np.asarray(effects, dtype=float)
    d = pd.DataFrame({"host": "h", "config": [f"c{i}" for i in range(len(e))], "effect_pct": e,
                      "ci_low_pct": e - 0.5, "ci_high_pct": e + 0.5, "ci_level": 0.95,
                      "verdict": verdicts or ["inconclusive"] * len(e)})
    if nxt:
        d["next_low_pct"], d["next_high_pct"] = e - 2, e + 2
    return d


def test_forest_marks_called_rows_by_fill_and_direction_and_draws_the_next_run_interval(tmp_path, captured):
    rows = _rows([5.0, -4.0, 0.2], ["faster", "slower", "inconclusive"])
    figures.forest(rows, tmp_path / "figures", "forest", "t", noise={"h": 1.0})
    fig = captured["forest"]
    ax = fig.axes[0]
    dots = {ln.get_label(): ln for ln in ax.lines if ln.get_marker() == "o"}
    better = next(ln for lab, ln in dots.items() if "better" in lab)
    worse = next(ln for lab, ln in dots.items() if "worse" in lab)
    opened = next(ln for lab, ln in dots.items() if "not called" in lab)
    assert better.get_markerfacecolor() != worse.get_markerfacecolor()
    assert opened.get_markerfacecolor() in ("white", "w", (1.0, 1.0, 1.0, 1.0))
    assert list(better.get_xdata()) == [5.0] and list(worse.get_xdata()) == [-4.0]
    segs = [c for c in ax.collections if isinstance(c, LineCollection) and
            "next run" in str(c.get_label())]
    assert segs and len(segs[0].get_segments()) == 3
    assert any(np.allclose(s[:, 0], [3.0, 7.0]) for s in segs[0].get_segments())
    assert any("next run" in t for t in _legend_texts(fig)) and any("A/A band" in t for t in _legend_texts(fig))


def test_forest_splits_effects_that_span_more_than_ten_fold_into_panels(tmp_path, captured):
    # perf-ring-buffer's forest: +-1% rows beside ~90% rows
    rows = _rows([1.0, -0.5, 8.0, 90.0, 85.0, 88.0])
    figures.forest(rows, tmp_path / "figures", "forest", "t")
    axes = captured["forest"].axes
    assert len(axes) == 2
    small, large = axes
    assert [t.get_text().split()[1] for t in small.get_yticklabels()] == ["c0", "c1", "c2"]
    assert small.get_xlim()[1] < 20 and large.get_xlim()[0] > 50
    one = _rows([1.0, -3.0, 8.0])
    figures.forest(one, tmp_path / "f2", "forest", "t")
    assert len(captured["forest"].axes) == 1


def test_meta_forest_splits_per_experiment_and_keeps_every_figure_readable(tmp_path, captured):
    comb, rows = [], []
    for e in ("exp-a", "exp-b"):
        for i in range(15):
            c = {"experiment": e, "baseline": "base", "candidate": "cand", "config": f"size={i}"}
            for r in range(3):
                rows.append({**c, "run": f"h/r{r}", "host": "h", "delta_pct": -1.0 + r,
                             "ci_low_pct": -2.0 + r, "ci_high_pct": r + 0.0})
            comb.append({**c, "lower_is_better": True, "estimate_pct": 0.0, "ci_low_pct": -1.0, "ci_high_pct": 1.0,
                         "pi_low_pct": -3.0, "pi_high_pct": 3.0, "i2": 0.1, "heterogeneous": False, "k": 3})
    paths = figures.meta_forest(pd.DataFrame(rows), pd.DataFrame(comb), tmp_path / "figures",
                                key=("experiment", "baseline", "candidate", "config"))
    names = sorted({p.stem for p in paths})
    assert len(names) >= 4 and all(n.startswith("forest-random-effects-exp-") for n in names)
    total = 0
    for n in names:
        fig = captured[n]
        labels = fig.axes[0].get_yticklabels()
        assert len(labels) <= figures_forest.MAX_FOREST_ROWS
        assert fig.get_size_inches()[1] * fig.dpi <= 1500
        total += len(labels)
    assert total == 120


def test_paired_size_sweep_names_the_commits_and_dates_of_the_runs_it_combines(tmp_path, captured):
    rows = pd.concat([_rows([5.0, 6.0]).assign(host="epyc", size=[16, 64], commit="d5ba66d487aa",
                                               date="2026-12-06"),
                      _rows([4.0, 7.0]).assign(host="xeon", size=[16, 64], commit="6b9ac02cba11",
                                               date="2026-12-01")], ignore_index=True)
    figures.paired_size_sweep(rows, tmp_path / "figures")
    fig = captured["size_sweep_hosts"]
    head = fig._suptitle.get_text()
    assert "d5ba66d" in head and "6b9ac02" in head and "2026-12-06" in head and "2026-12-01" in head
    legend = _legend_texts(fig)
    assert any("epyc" in t and "d5ba66d" in t for t in legend)


# -- the verdict check's forest ------------------------------------------------------------------
def test_verdict_check_forest_draws_no_instruction_count_as_an_expected_time(tmp_path, captured):
    from ringlab.studies import verdict_check as vc
    df = make_raw(variants=("base", "d8"), effects={"d8": 0.097}, trials=20, seed=8, cv=0.01)
    cmp = compare(df, "base", "ns_per_op")
    rows = vc.forest_rows(cmp, None, host="h", expected={"d8": 7.39}, calls={"d8": "slower"})
    assert rows["expected_pct"].isna().all(), "no expected time effect was stated"
    assert np.allclose(rows["instructions_pct"], -7.39)
    assert (rows["effect_pct"] < -7.39 - 1).all(), "a 9.7% time cost lies beyond the -7.4% instruction mark"
    figures.forest(rows, tmp_path / "figures", "verdict_check", "t")
    fig = captured["verdict_check"]
    texts = _legend_texts(fig)
    assert "published / expected effect" not in texts
    assert any("not a time prediction" in t for t in texts)
    assert all("(expected: slower)" in t.get_text() for t in fig.axes[0].get_yticklabels())
    quiet = vc.forest_rows(cmp, None, host="h", calls={"d8": " or ".join(vc.NOT_CALLED)})
    assert quiet["expected_call"].tolist() == ["not called"]


# -- every A/B run writes its headline forest ----------------------------------------------------
def test_every_ab_report_writes_a_forest(tmp_path):
    from ringlab.report import write_report
    make_raw(trials=12, seed=4, params={"mode": [0, 1], "size": [1000]}).to_csv(tmp_path / "raw.csv", index=False)
    paths = write_report(tmp_path, baseline="batch")
    assert "forest" in paths["figures"] and (tmp_path / "figures" / "forest.png").is_file()


def test_counters_are_points_with_cis_not_bars(tmp_path, captured):
    df = make_raw(trials=25, seed=2, counters=True)
    figures.counters(df[~df["warmup"]], "ns_per_op", [], tmp_path / "figures")
    for ax in captured["counters"].axes:
        assert not any(isinstance(c, BarContainer) for c in ax.containers) and not ax.patches
        assert len(ax.containers) == 2, "one median with its CI per variant"
