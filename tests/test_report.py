import hashlib
import re
import subprocess
import sys

import pandas as pd
import pytest

from ringlab import rundir
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
    header = next(ln for ln in md.splitlines() if ln.startswith("| mode | unpatched (batch) | patched (reorder) |"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    assert cols[-1] == "verdict" and "p (Holm)" in cols
    d = cols.index("%change (+ = faster)")
    assert cols[d + 1] in ("95% CI of %change", "95% CI (Holm) of %change") and "delta" not in cols and not any("gain" in c for c in cols)
    assert "Sign: + means better" in md and md.count("Sign: + means better") == 1
    assert "Noise floor" in md   # stated in every summary, also when the host has no calibration
    assert "IPC" in md and "instructions/op" in md
    assert "slow trials had" in md  # cause of the 10% slow trials
    assert "excluded" in md
    assert (run_dir / "summary.csv").read_text().startswith("metric,")
    tex = (run_dir / "summary.tex").read_text()
    assert "\\begin{tabular}" in tex and "\\%" in tex
    assert {"box", "order", "spsc", "counters"} <= set(paths["figures"]) and "ecdf" not in paths["figures"]


def test_counters_na_when_unsupported(tmp_path):
    make_raw(trials=10, seed=2).to_csv(tmp_path / "raw.csv", index=False)
    write_report(tmp_path, figures=False)
    md = (tmp_path / "summary.md").read_text()
    assert NA_COUNTERS in md


def test_figures_are_byte_identical(tmp_path):
    # several configurations, severe outliers and a size sweep: every figure and layout
    df = make_raw(trials=20, seed=3, counters=True, c2c=50.0, params={"mode": [0, 1], "size": [64, 1000]},
                  slow_frac=0.1, cpu_pairs=[(a, b) for a in range(3) for b in range(3) if a != b])
    hashes = []
    for k in range(2):
        d = tmp_path / f"r{k}"
        d.mkdir()
        df.to_csv(d / "raw.csv", index=False)
        paths = write_report(d, baseline="batch")
        files = sorted(p for ps in paths["figures"].values() for p in ps)
        hashes.append({p.name: _sha(p) for p in files})
    assert {"cpu_pairs.png", "box.png", "order.png", "size_sweep.png", "spsc.svg"} <= set(hashes[0])
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
    assert bad.returncode == 2 and "raw.csv: no such file" in bad.stderr and "Traceback" not in bad.stderr


def test_summary_says_how_the_run_stopped(run_dir):
    import json
    from ringlab.report.stopping_sentences import stopping_text
    from ringlab.stats.stopping_record import Stopping
    write_report(run_dir, baseline="batch", figures=False)
    plain = (run_dir / "summary.md").read_text()
    assert "Stop" not in plain and "target" not in plain.lower().split("## a/b")[0]
    st = {"target_ci": 2.0, "budget_s": 60.0, "pilot_rounds": 10, "rounds_planned": 25, "rounds_run": 25,
          "rounds_for_target": 90, "stop_reason": "budget", "target_met": False, "baseline": "batch"}
    (run_dir / "env.json").write_text(json.dumps({"baseline": "batch", "stopping": st}))
    write_report(run_dir, figures=False)
    md = (run_dir / "summary.md").read_text()
    sentence = stopping_text(Stopping.from_json(st))
    assert sentence.startswith("Stopped by the budget") and "budget of 60 s" in sentence
    top = md.split("\n## ")[0]   # with the status line, before the first table
    assert sentence in top.splitlines()
    # the only other change: an inconclusive row plans for the run's target_ci instead of the margin
    assert "(the run's target_ci)" in md and "(the run's target_ci)" not in plain
    plan = re.compile(r"trials_needed for a CI half-width of [^|]*")
    assert plan.sub("", md.replace(sentence + "\n\n", "", 1)) == plan.sub("", plain)


def test_ab_text_names_the_method_the_table_uses(run_dir):
    write_report(run_dir, baseline="batch", figures=False)
    md = (run_dir / "summary.md").read_text()
    assert "Hodges-Lehmann" in md and "signed-rank" in md and "bootstrap of that ratio" not in md


# -- formatting ------------------------------------------------------------------------------
def test_fmt_one_definition_each():
    from ringlab import fmt
    assert fmt.p(0.0004) == "< 0.001" and fmt.p(0.52) == "0.520" and fmt.p(float("nan")) == "n/a"
    assert fmt.pct(6.25) == "+6.2%" and fmt.pct(-1.04) == "-1.0%" and fmt.pct(3, signed=False) == "3.0%"
    assert fmt.ci(-1.5, 4.0) == "[-1.5%, +4.0%]"
    assert fmt.ci(-1.5, 4.0, negate=True) == "[-4.0%, +1.5%]"
    assert fmt.ci_header(0.9) == "90% CI" and fmt.ci_header(None) == "95% CI"
    assert fmt.md_table(["a", "b"], [["x|y", 1]]) == "| a | b |\n|---|---|\n| x\\|y | 1 |"
    # the tables use these, not their own copies
    from ringlab.lab import notebook
    from ringlab.report import tables, vs_published as seeds
    assert seeds._p is fmt.p and seeds._pct is fmt.pct and tables.md_table is fmt.md_table
    assert not hasattr(notebook, "to_markdown")


# -- the report object -----------------------------------------------------------------------
def test_report_object_names_tables_and_figures(run_dir):
    from ringlab.report import report
    r = report(run_dir, baseline="batch", labels={"batch": "unpatched", "reorder": "patched"})
    assert {"ab", "summary", "counters"} <= set(r.tables)
    assert r.figures["spsc"].name == "spsc.png" and r.figures["spsc"].is_file()
    assert {"box", "order", "counters"} <= set(r.figures)
    assert list(r.tables["ab"].columns)[:3] == ["mode", "unpatched (batch)", "patched (reorder)"]
    assert r.markdown == (run_dir / "summary.md").read_text()
    # what the run cannot have is named with a reason, never silently absent
    assert "fewer than 4" in r.why_missing("cpu_pairs")
    assert "one ring size" in r.why_missing("size_sweep")
    assert "known:" in r.why_missing("throughput")


def test_report_says_why_spsc_is_missing(tmp_path):
    from ringlab.report import report
    make_raw(trials=10, seed=5, params={"mode": [0], "size": [1000]}).to_csv(tmp_path / "raw.csv", index=False)
    r = report(tmp_path, baseline="batch")
    assert "spsc" not in r.figures and "core-to-core latency" in r.why_missing("spsc")


def test_each_ci_follows_its_number_in_its_sign(run_dir):
    import pandas as pd

    from ringlab.report import report
    from ringlab.stats import compare
    ab = report(run_dir, baseline="batch", figures=False).tables["ab"]
    cmp = compare(rundir.read_raw(run_dir / "raw.csv", strict=False), "batch")
    cols = list(ab.columns)
    ch = "%change (+ = faster)"
    ci = cols[cols.index(ch) + 1]
    assert ci in ("95% CI of %change", "95% CI (Holm) of %change")

    def bounds(s):
        lo, hi = s.split("]")[0].strip("[").split(", ")
        return float(lo.rstrip("%")), float(hi.rstrip("%"))
    for (_, row), (_, r) in zip(ab.iterrows(), cmp.iterrows()):
        g = float(row[ch].rstrip("%"))
        glo, ghi = bounds(row[ci])
        assert g == pytest.approx(-r["delta_pct"], abs=0.051) and glo <= g <= ghi
        assert (glo, ghi) == pytest.approx((-r["ci_high_pct"], -r["ci_low_pct"]), abs=0.051)
        assert "]" == row[ci][-1], "no per-row level: the heading states the one level"
        # the arm figures beside the effect are the ones it is computed from: their ratio is it
        cb, cc = r["center_baseline"], r["center_candidate"]
        assert (cb - cc) / cb * 100 == pytest.approx(r["gain_pct"])
        assert r["gain_pct"] == pytest.approx(-r["delta_pct"])
        assert (r["gain_low_pct"], r["gain_high_pct"]) == pytest.approx((-r["ci_high_pct"], -r["ci_low_pct"]))


def test_new_compare_columns_are_shown_when_present(run_dir):
    import pandas as pd

    from ringlab.report import tables
    from ringlab.stats import compare
    cmp = compare(rundir.read_raw(run_dir / "raw.csv", strict=False), "batch")
    cmp["design"], cmp["n_pairs"], cmp["ci_level"], cmp["family_size"] = "paired", 30.0, 0.9, 2
    cmp.attrs["alpha"] = 0.1
    h, rows = tables.comparison_rows(cmp)
    for c in ("design", "n_pairs", "90% CI of %change", "family size"):
        assert c in h
    assert rows[0][h.index("design")] == "paired" and rows[0][h.index("n_pairs")] == "30"


def _with_callgrind_rows(df):
    import numpy as np
    cg = df[(df["mode"] == 0) & ~df["warmup"]].groupby("variant").head(2).copy()
    cg["ns_per_op"] = np.nan
    cg["icount_source"] = "callgrind"
    cg["instructions_per_op"] = cg["variant"].map({"batch": 43.3857, "reorder": 44.6337})
    return pd.concat([df, cg], ignore_index=True)


def test_counters_show_callgrind_and_excluded_rows_are_explained(tmp_path):
    df = _with_callgrind_rows(make_raw(trials=10, seed=2, params={"mode": [0, 1], "size": [1000]}))
    df.to_csv(tmp_path / "raw.csv", index=False)
    from ringlab.report import report
    r = report(tmp_path, baseline="batch", figures=False)
    cnt = r.tables["counters"]
    row = cnt[(cnt["variant"] == "batch") & (cnt["mode"] == "0")].iloc[0]
    assert row["instructions/op"] == "43.39 (callgrind)"
    assert cnt[cnt["mode"] == "1"]["instructions/op"].eq(NA_COUNTERS).all()
    assert "4 without a ns_per_op value (4 callgrind instruction-count trials, untimed by design" in r.markdown
    assert "counted by callgrind in separate, untimed trials" in r.markdown


# -- figures ---------------------------------------------------------------------------------
def test_box_marks_severe_outliers_with_several_configurations(run_dir, captured):
    import numpy as np

    from ringlab.report import figures
    from ringlab.stats.outliers import flag_outliers
    write_report(run_dir, baseline="batch")
    df = rundir.read_raw(run_dir / "raw.csv", strict=False)
    meas = df[~df["warmup"]]
    n_severe = int((flag_outliers(meas.assign(config=meas["mode"]), "ns_per_op", ["variant", "config"])
                    == "severe").sum())
    assert n_severe > 0
    ax = captured["box"].axes[0]
    red = [c for c in ax.collections if len(c.get_offsets()) and
           np.allclose(np.asarray(c.get_edgecolor() if len(c.get_edgecolor()) else c.get_facecolor())[0][:3],
                       (1, 0, 0))]
    assert sum(len(c.get_offsets()) for c in red) == n_severe
    assert "config" == ax.get_xlabel()
    assert figures.FIGURES["box"] is figures.box


def test_run_order_has_one_panel_per_configuration(run_dir, captured):
    write_report(run_dir, baseline="batch")
    fig = captured["order"]
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert sorted(ax.get_title() for ax in panels) == ["mode=0", "mode=1"]
    for ax in panels:  # each panel only holds its own configuration's trials
        assert sum(len(c.get_offsets()) for c in ax.collections) == 60


def test_size_sweep_names_mode_and_patch(tmp_path, captured):
    from ringlab.report import report
    make_raw(variants=("prebatch", "batch"), params={"mode": [2], "size": [16, 256]}, trials=8,
             seed=6).to_csv(tmp_path / "raw.csv", index=False)
    r = report(tmp_path, baseline="prebatch")
    assert r.figures["size_sweep"].is_file()
    fig = captured["size_sweep"]
    assert "batch (patched) vs prebatch (baseline)" in fig._suptitle.get_text()
    assert fig.axes[0].get_title().startswith("mode 2 (SPSC, near-full)")
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["batch (patched)", "prebatch (baseline)"]


def _forest_runs(tmp_path):
    from ringlab.studies import compare_runs
    out = []
    for k, eff in enumerate((-0.05, 0.02)):
        d = tmp_path / "results" / "ptr-ring-reorder" / f"host{k}" / f"2026010{k}T000000Z-aaaaaa"
        d.mkdir(parents=True)
        make_raw(effects={"reorder": eff}, params={"mode": [0, 1], "size": [1000]}, trials=12,
                 seed=10 + k).to_csv(d / "raw.csv", index=False)
    out = compare_runs.load_runs(tmp_path / "results")
    return out


def test_compare_runs_writes_a_deterministic_forest_plot(tmp_path, captured):
    from ringlab.studies import compare_runs
    runs = _forest_runs(tmp_path)
    hashes = []
    for k in range(2):
        paths = compare_runs.write(tmp_path / f"cmp{k}", runs)
        png = [p for p in paths if p.name == "forest.png"]
        assert png, "compare-runs writes figures/forest.png"
        hashes.append((_sha(png[0]), _sha(png[0].with_suffix(".svg"))))
    assert hashes[0] == hashes[1]
    ax = captured["forest"].axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == 4 and any("host0" in t for t in labels) and any("host1" in t for t in labels)


def test_cross_machine_ci_follows_its_delta_with_its_level(tmp_path):
    from ringlab import fmt
    from ringlab.studies import compare_runs
    from ringlab.stats import compare
    runs = _forest_runs(tmp_path)
    t = compare_runs.cross_machine_table(runs)
    cols = list(t.columns)
    d = cols.index("%change (+ = faster)")
    head = cols[d + 1]
    levels = []
    for r in runs:
        c = compare(r.raw, "batch")
        levels += list(c.loc[c["candidate"] == "reorder", "ci_level"])
    per_row = len({round(v, 6) for v in levels}) > 1 or any(abs(v - 0.95) > 1e-9 for v in levels)
    assert head == ("95% CI (Holm) of %change" if per_row else "95% CI of %change")
    k = 0
    for r in runs:
        c = compare(r.raw, "batch")
        for _, row in c[c["candidate"] == "reorder"].iterrows():
            got = t.iloc[k]
            assert got["%change (+ = faster)"] == fmt.pct(-row["delta_pct"])
            assert got[head] == fmt.ci(row["ci_low_pct"], row["ci_high_pct"], negate=True)
            b, p = got["unpatched (batch)"], got["patched (reorder)"]
            assert (b - p) / b * 100 == pytest.approx(-row["delta_pct"])
            k += 1
    assert k == len(t) == 4


def test_no_forest_when_no_run_holds_both_variants(tmp_path):
    from ringlab.report.figures import cross_run_forest
    runs = _forest_runs(tmp_path)
    assert cross_run_forest(runs, tmp_path / "f", baseline="batch", patched="prebatch") == []


def test_notebook_shows_by_name_or_says_why_not(run_dir, monkeypatch):
    from ringlab.lab import notebook as rn
    shown = []
    monkeypatch.setattr(rn, "figures", lambda paths, width=640: shown.extend(("figure", p.name) for p in paths))
    monkeypatch.setattr(rn, "markdown", lambda text, max_chars=20000: shown.append(("markdown", text)))
    r = rn.report(run_dir, baseline="batch")
    rn.show_figures(r, "spsc", "cpu_pairs")
    rn.show_tables(r, "counters", "variance")
    assert shown[0] == ("figure", "spsc.png")
    assert shown[1][0] == "markdown" and "figure 'cpu_pairs': not available here because fewer than 4" in shown[1][1]
    assert shown[2][0] == "markdown" and shown[2][1].startswith("| variant | mode | IPC")
    assert "table 'variance': not available here because" in shown[3][1]


def test_incomplete_run_says_its_status_first(tmp_path):
    import json

    from ringlab.report import report
    make_raw(trials=6, seed=7).to_csv(tmp_path / "raw.csv", index=False)
    (tmp_path / "env.json").write_text(json.dumps({"status": "interrupted"}))
    r = report(tmp_path, baseline="batch", figures=False)
    assert r.status == "interrupted"
    assert r.markdown.splitlines()[2].startswith("**Run status: INTERRUPTED")


def test_summarize_renders_what_the_notebook_asked_for(run_dir):
    """A notebook's report choices (baseline, labels) are kept in env.json, so `ringlab
    summarize RUN` re-renders the very summary.md the notebook wrote."""
    import json

    from ringlab.lab import cli
    from ringlab.lab import notebook as rn
    (run_dir / "env.json").write_text(json.dumps({"env_version": 2, "kind": "run", "status": "complete"}))
    rn.report(run_dir, baseline="reorder", labels={"reorder": "unpatched", "batch": "patched"})
    by_notebook = (run_dir / "summary.md").read_text()
    assert "unpatched (reorder)" in by_notebook
    assert json.loads((run_dir / "env.json").read_text())["report"]["baseline"] == "reorder"
    (run_dir / "summary.md").unlink()
    assert cli.main(["summarize", str(run_dir), "--no-figures"]) == 0
    assert (run_dir / "summary.md").read_text() == by_notebook


def test_ab_table_shows_layouts_only_for_layout_runs():
    from layout_runs import tidy_frame
    from ringlab.report.tables import FIXED_BUILD, LAYOUT_HEADER, comparison_rows
    from ringlab.stats import compare as stats_compare
    from ringlab.simulate import noise
    import numpy as np
    sim = noise.simulate_ab(8, 20, effect=(0.0, 0.0), sigma_layout=0.034, rng=np.random.default_rng(5))
    h, rows = comparison_rows(stats_compare(tidy_frame(sim), "base"))
    cell = rows[0][h.index(LAYOUT_HEADER)]
    assert "8 layout pairs" in cell and "of the CI width squared" in cell
    res = stats_compare(tidy_frame(sim), "base")
    sensitive = bool(res["layout_sensitive"].iloc[0])
    assert ("layout-sensitive" in cell) is sensitive
    one = noise.simulate_ab(1, 40, rng=np.random.default_rng(6))
    h1, rows1 = comparison_rows(stats_compare(tidy_frame(one), "base"))
    assert FIXED_BUILD in rows1[0][h1.index(LAYOUT_HEADER)]
    # without a layout column: the table of before
    h0, _ = comparison_rows(stats_compare(tidy_frame(one).drop(columns="layout"), "base"))
    assert LAYOUT_HEADER not in h0


# -- forests in one sign, A/A bands, published markers -------------------------------------
def _host_rows(k, eff):
    from ringlab.report import figures
    from ringlab.stats import compare
    df = make_raw(variants=("prebatch", "batch"), effects={"batch": eff},
                  params={"mode": [2], "size": [16, 64, 1024]}, trials=12, seed=20 + k)
    return figures.effect_rows(compare(df, "prebatch", "ns_per_op"), f"host{k}", expected=8.0)


def test_effect_rows_say_plus_is_better():
    rows = _host_rows(0, -0.10)           # batch 10% less time per op: + ~10%
    assert (rows["effect_pct"] > 5).all() and (rows["effect_pct"] < 15).all()
    assert (rows["ci_low_pct"] <= rows["effect_pct"]).all() and (rows["effect_pct"] <= rows["ci_high_pct"]).all()
    slower = _host_rows(1, 0.10)
    assert (slower["effect_pct"] < 0).all(), "a candidate that takes more time is negative"
    assert list(rows["config"]) == ["size=16", "size=64", "size=1024"]


def test_forest_shades_each_hosts_band_marks_the_expected_effect_and_states_the_level(tmp_path, captured):
    from ringlab.report import figures
    rows = pd.concat([_host_rows(0, -0.10), _host_rows(1, 0.03)], ignore_index=True)
    noise = {"host0": 0.6, "host1": 6.3}
    shas = []
    for k in range(2):
        paths = figures.forest(rows, tmp_path / f"f{k}" / "figures", "forest", "t", noise=noise)
        shas.append([_sha(p) for p in paths])
    assert shas[0] == shas[1], "same data, same bytes"
    fig = captured["forest"]
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == 6 and labels[0].startswith("host0") and labels[-1].startswith("host1")
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("host0: A/A band" in t and "0.6%" in t for t in legend)
    assert any("host1: A/A band" in t and "6.3%" in t for t in legend)
    assert "published / expected effect" in legend
    assert "+ = better" in ax.get_xlabel()
    level = figures.level_text(rows["ci_level"])
    assert level in ax.get_xlabel() and ("95% CI" != level or rows["ci_level"].nunique() == 1)


def test_level_text_states_one_level_or_the_range():
    from ringlab.report.figures import level_text
    assert level_text([0.95, 0.95]) == "95% CI"
    assert level_text([0.975, 0.9875]) == "97.5-98.75% CI (Holm-adjusted per family)"


def test_paired_size_sweep_is_deterministic_with_one_line_per_host(tmp_path, captured):
    from ringlab.report import figures
    rows = pd.concat([_host_rows(0, -0.10), _host_rows(1, 0.03)], ignore_index=True)
    rows["size"] = [16, 64, 1024] * 2
    shas = [[_sha(p) for p in figures.paired_size_sweep(rows, tmp_path / f"s{k}" / "figures",
                                                        noise={"host0": 0.6})] for k in range(2)]
    assert shas[0] == shas[1] and len(shas[0]) == 2
    ax = captured["size_sweep_hosts"].axes[0]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "host0" in texts and "host1" in texts and any("A/A band" in t for t in texts)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["16", "64", "1024"]


def test_compare_runs_draws_one_forest_per_experiment(tmp_path, captured):
    from ringlab.studies import compare_runs
    runs = _forest_runs(tmp_path)
    paths = compare_runs.write(tmp_path / "cmp", runs)
    assert "forest-ptr-ring-reorder.png" in {p.name for p in paths}
    ax = captured["forest-ptr-ring-reorder"].axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == 4 and sum("host0" in t for t in labels) == 2
    # seed 000's x86 effect of reorder (+6.2% in mode 0, +7.6% in mode 1) as markers
    marks = [ln for ln in ax.get_lines() if ln.get_marker() == "D" and ln.get_markerfacecolor() == "none"]
    xs = sorted(round(float(x), 1) for ln in marks for x in ln.get_xdata())
    assert xs == [6.3, 6.3, 7.7, 7.7]


def test_published_vs_reproduced_batch_shows_every_size_and_other_runs(tmp_path):
    from ringlab.report import vs_published as vp
    for k in range(2):
        d = tmp_path / f"h{k}"
        d.mkdir()
        make_raw(variants=("prebatch", "batch"), effects={"batch": -0.05},
                 params={"mode": [2], "size": [16, 64, 1024]}, trials=10, seed=30 + k).to_csv(d / "raw.csv",
                                                                                           index=False)
    t = vp.published_vs_reproduced_batch(tmp_path / "h0", more=[tmp_path / "h1"])
    rep = t[t["source"].str.startswith("reproduced")]
    assert len(rep) == 6 and rep["config"].str.contains("size 16, batch 1,").sum() == 2
    assert rep["config"].str.contains("size 64, batch 16,").sum() == 2
    assert "95% CI of ratio" not in t.columns and "CI level" in t.columns


def test_spsc_bars_have_error_bars_in_size_order(tmp_path, captured):
    from ringlab.report import write_report
    df = make_raw(trials=10, seed=5, c2c=50.0, params={"mode": [1], "size": [1000, 64]})
    df.to_csv(tmp_path / "raw.csv", index=False)
    write_report(tmp_path, baseline="batch")
    ax = captured["spsc"].axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["size=64", "size=1000"]
    assert len(ax.lines) >= 2 + 4, "a CI whisker per bar besides the two reference lines"
