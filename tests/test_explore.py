"""ringlab.open / open_all: which run a PATH opens, what .raw holds, compare against another
baseline, figures drawn outside the run folder, the HTML card, bad paths, and no writes."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ringlab import rundir
import ringlab
from ringlab import paths
from ringlab.studies import explore
from ringlab.errors import DataError, ParamError, RinglabError
from ringlab.rundir import RunFolder, read_env
from ringlab.stats import compare as stats_compare
from synth import make_raw


def make_run(root: Path, folder: str, host: str, run_id: str, status: str = "complete",
             profile: str = "quick", **raw_kw) -> Path:
    """A run folder as `ringlab run` leaves it: raw.csv and env.json (written through RunFolder)."""
    d = root / folder / host / run_id
    with RunFolder(d, mode="write", kind="run") as f:
        f.write_env(experiment=raw_kw.get("experiment", "ptr_ring"), host=host, run_id=run_id, parameters={"profile": profile})
        f.finish(status, "" if status == "complete" else f"{status} on purpose")
    df = make_raw(**raw_kw)
    df["host"], df["run_id"] = host, run_id
    df.to_csv(d / "raw.csv", index=False)
    return d


@pytest.fixture
def results(tmp_path, monkeypatch) -> Path:
    """Two experiments on two hosts; ptr-ring-reorder's newest run was interrupted."""
    monkeypatch.setenv("RINGLAB_SCRATCH", str(tmp_path / "scratch"))
    root = tmp_path / "results"
    three = dict(variants=("prebatch", "batch", "reorder"), effects={"reorder": -0.10}, cv=0.01,
                 trials=12, rounds_col=True, params={"mode": [0, 1], "size": [1000]})
    make_run(root, "ptr-ring-reorder", "hostA", "20260101T000000Z-aaaaaa", seed=1, failed=2, **three)
    make_run(root, "ptr-ring-reorder", "hostB", "20260102T000000Z-bbbbbb", seed=2, **three)
    make_run(root, "ptr-ring-reorder", "hostA", "20260103T000000Z-cccccc", status="interrupted", seed=3, **three)
    make_run(root, "page-frag", "hostB", "20260101T120000Z-dddddd", variants=("before", "after"),
             trials=8, seed=4, experiment="page_frag")
    return root


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_run_folder_opens_with_measured_trials_only(results):
    d = results / "ptr-ring-reorder" / "hostA" / "20260101T000000Z-aaaaaa"
    run = ringlab.open(d)
    assert isinstance(run, explore.OpenedRun)
    assert (run.experiment, run.host, run.run_id) == ("ptr-ring-reorder", "hostA", "20260101T000000Z-aaaaaa")
    assert run.status == "complete" and run.profile == "quick" and run.env["experiment"] == "ptr_ring"
    allrows = rundir.read_raw(d / "raw.csv", strict=False)
    measured = allrows[~allrows["warmup"].astype(bool) & allrows["status"].eq("ok")]
    assert len(run.raw) == len(measured) < len(allrows)
    assert not run.raw["warmup"].astype(bool).any() and run.raw["status"].eq("ok").all()
    assert len(run.raw_all) == len(allrows)
    assert len(run.trials(warmup=True)) == int(allrows["status"].eq("ok").sum())
    assert len(run.trials(failed=True)) == int((~allrows["warmup"].astype(bool)).sum())
    # raw.csv or env.json themselves name the same run
    assert ringlab.open(d / "raw.csv").path == run.path


def test_an_experiment_opens_its_latest_complete_run_on_any_host(results):
    run = ringlab.open(results / "ptr-ring-reorder")
    # hostA's 01-03 run is newer but interrupted; hostB's 01-02 is the latest complete one
    assert run.name == "ptr-ring-reorder/hostB/20260102T000000Z-bbbbbb"


def test_an_experiment_without_a_complete_run_says_which_runs_it_has(tmp_path):
    make_run(tmp_path, "x", "h", "20260101T000000Z-eeeeee", status="failed", trials=4)
    with pytest.raises(DataError, match="no complete run.*h/20260101T000000Z-eeeeee: failed"):
        ringlab.open(tmp_path / "x")


def test_the_results_folder_opens_as_a_collection(results):
    runs = ringlab.open(results)
    assert isinstance(runs, explore.Runs) and len(runs) == 4
    assert runs.experiments == ["page-frag", "ptr-ring-reorder"]
    assert [r.name for r in runs.latest()] == ["page-frag/hostB/20260101T120000Z-dddddd",
                                               "ptr-ring-reorder/hostB/20260102T000000Z-bbbbbb"]
    assert runs.latest("nope") is None
    t = runs.table()
    assert list(t["status"]).count("interrupted") == 1 and set(t["host"]) == {"hostA", "hostB"}
    assert runs["page-frag/hostB/20260101T120000Z-dddddd"].experiment == "page-frag"
    assert "4 runs" in runs.describe() and "<table" in runs._repr_html_()


def test_open_all_is_one_tidy_frame_across_runs_and_hosts(results):
    df = ringlab.open_all(results)
    assert list(df.columns[:len(explore.KEY_COLUMNS)]) == explore.KEY_COLUMNS
    raw_cols = pd.read_csv(results / "page-frag" / "hostB" / "20260101T120000Z-dddddd" / "raw.csv", nrows=1).columns
    assert set(raw_cols) <= set(df.columns), "every raw.csv column is kept"
    runs = ringlab.open(results)
    assert len(df) == sum(len(r.raw) for r in runs)
    assert set(df["host"]) == {"hostA", "hostB"} and df["run"].nunique() == 4
    assert set(df["experiment"]) == {"ptr_ring", "page_frag"}, "raw.csv's own experiment column is kept"
    assert set(df["results_experiment"]) == {"ptr-ring-reorder", "page-frag"}
    assert set(df["profile"]) == {"quick"} and "interrupted" in set(df["run_status"])
    assert not df["warmup"].astype(bool).any()
    assert len(ringlab.open_all(results, warmup=True)) > len(df)
    # an experiment folder: all of its runs, every host
    assert ringlab.open_all(results / "ptr-ring-reorder")["run"].nunique() == 3


def test_compare_against_another_baseline(results):
    run = ringlab.open(results / "ptr-ring-reorder")
    assert run.baseline == "prebatch"  # the first variant in raw.csv
    cmp = run.compare(baseline="batch")
    assert set(cmp["baseline"]) == {"batch"} and set(cmp["candidate"]) == {"prebatch", "reorder"}
    reo = cmp[cmp["candidate"] == "reorder"]
    assert (reo["verdict"] == "faster").all(), reo[["delta_pct", "ci_low_pct", "ci_high_pct", "verdict"]]
    assert reo["delta_pct"].between(-12, -8).all(), reo["delta_pct"]
    same = stats_compare(run.raw_all, "batch", "ns_per_op")
    pd.testing.assert_frame_equal(cmp.reset_index(drop=True), same.reset_index(drop=True))
    by_mode = run.compare(baseline="batch", by=["mode"])
    assert by_mode.attrs["group_columns"] == ["mode"]
    with pytest.raises(ParamError, match="parameter 'baseline'.*'nope'.*allowed: prebatch, batch, reorder"):
        run.compare(baseline="nope")


def test_summary_is_the_statistics_of_the_measured_trials(results):
    run = ringlab.open(results / "ptr-ring-reorder")
    s = run.summary()
    assert set(s["variant"]) == {"prebatch", "batch", "reorder"}
    assert s["n"].sum() == len(run.raw)


def test_round_ratios_per_round_in_time_order(results):
    run = ringlab.open(results / "ptr-ring-reorder")
    r = run.round_ratios("reorder", baseline="prebatch")
    assert set(r["config"]) == {"mode=0", "mode=1"}
    assert (r.groupby("config").size() == 12).all(), "one ratio per measured round"
    assert r["ratio"].median() == pytest.approx(0.90, abs=0.02)
    for _, d in r.groupby("config"):
        assert d["t_s"].is_monotonic_increasing
    assert (r["ratio"] == r["candidate_value"] / r["baseline_value"]).all()
    with pytest.raises(ParamError, match="parameter 'candidate'"):
        run.round_ratios("nope")


def test_figures_and_card_never_write_into_the_run_folder(results, tmp_path):
    run = ringlab.open(results / "ptr-ring-reorder")
    before = snapshot(run.path)
    fig = run.figure("box")
    assert fig.path.suffix == ".png" and fig.path.is_file()
    assert fig._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not fig.path.is_relative_to(run.path) and fig.path.is_relative_to(tmp_path / "scratch")
    again = run.figure("box", baseline="batch")
    assert again.path != fig.path, "another baseline is another report"
    card = run._repr_html_()
    assert snapshot(run.path) == before, "the run folder is left as it was"
    with pytest.raises(ParamError, match="parameter 'name'.*allowed: box, order"):
        run.figure("histogram")
    with pytest.raises(DataError, match="cpu_pairs.*not available: fewer than 4"):
        run.figure("cpu_pairs")
    for text in ("ptr-ring-reorder", "hostB", "quick", "complete", "<th>verdict</th>", "reorder"):
        assert text in card, text


def test_the_card_says_why_a_run_has_no_verdicts(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_SCRATCH", str(tmp_path / "scratch"))
    d = make_run(tmp_path / "r", "one", "h", "20260101T000000Z-ffffff", variants=("batch",), trials=4)
    card = ringlab.open(d)._repr_html_()
    assert "no verdict table" in card and "single variant" in card


@pytest.mark.parametrize("case", ["missing", "no-runs", "env-only"])
def test_bad_paths_name_the_path_and_what_is_allowed(tmp_path, case):
    if case == "missing":
        p, err = tmp_path / "nope", ParamError
    elif case == "no-runs":
        p, err = tmp_path / "notes", ParamError
        p.mkdir()
        (p / "a.txt").write_text("x")
    else:
        p, err = tmp_path / "environment" / "h" / "20260101T000000Z-000000", DataError
        with RunFolder(p, mode="write", kind="environment") as f:
            f.finish("complete")
    with pytest.raises(err) as e:
        ringlab.open(p)
    assert isinstance(e.value, RinglabError)
    msg = str(e.value)
    assert str(p) in msg and "allowed: a run folder" in msg and "results/<experiment>" in msg
    if case == "env-only":
        assert "'environment' folder holds no trials" in msg
    with pytest.raises(err):
        ringlab.open_all(p)


def test_an_empty_results_folder_is_an_empty_collection(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_RESULTS", str(tmp_path / "fresh"))  # not even created yet
    runs = ringlab.open()
    assert len(runs) == 0 and len(runs.latest()) == 0 and runs.latest("ptr-ring-reorder") is None
    assert runs.describe().startswith(f"No runs under {tmp_path / 'fresh'}")
    df = ringlab.open_all()
    assert df.empty and list(df.columns) == explore.KEY_COLUMNS
    (tmp_path / "empty").mkdir()
    assert len(ringlab.open(tmp_path / "empty")) == 0


def test_the_committed_results_are_named_relative_to_the_repository():
    runs = ringlab.open(paths.ROOT / "results")
    assert runs.describe().startswith(f"{len(runs)} runs under results/ (")
    assert str(paths.ROOT) not in runs.describe()


def test_record_writes_the_notebook_run_folder_through_runfolder(results, tmp_path):
    runs = ringlab.open(results).latest()
    out = tmp_path / "explore" / "h" / "20260105T000000Z-999999"
    fig = out / "figures" / "round_ratio.png"
    fig.parent.mkdir(parents=True)
    fig.write_bytes(b"png")
    written = explore.record(out, runs, {"baseline": "batch"}, tables={"t": pd.DataFrame({"verdict": ["faster"]})},
                             figures=[fig])
    env = read_env(out)
    assert env.kind == "explore" and env.status == "complete" and env["parameters"] == {"baseline": "batch"}
    assert env["inputs"] == [r.name for r in runs]
    md = (out / "summary.md").read_text()
    assert "| verdict |" in md and "](figures/round_ratio.png)" in md
    assert {p.name for p in written} == {"summary.md", "env.json"}


def test_committed_runs_stay_untouched(tmp_path, monkeypatch):
    """open() + figure() + the card on the repository's committed runs leave `git status` clean."""
    root = paths.ROOT / "results"
    monkeypatch.setenv("RINGLAB_SCRATCH", str(tmp_path / "scratch"))
    runs = ringlab.open(root)
    run = runs.latest("ptr-ring-reorder")
    if run is None:
        pytest.skip("no committed ptr-ring-reorder run")
    git = ["git", "-C", str(paths.ROOT), "status", "--porcelain", "--untracked-files=all", "--", "results"]
    before = subprocess.run(git, capture_output=True, text=True, check=True).stdout
    run.figure("box")
    run._repr_html_()
    run.compare(baseline="prebatch")
    assert subprocess.run(git, capture_output=True, text=True, check=True).stdout == before


def test_import_ringlab_stays_light():
    code = "import sys, ringlab; print('matplotlib' in sys.modules, callable(ringlab.open))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=paths.ROOT)
    assert out.stdout.split() == ["False", "True"], out.stderr


def test_an_unreadable_raw_csv_is_skipped_with_its_reason(results):
    bad = results / "page-frag" / "hostB" / "20260101T120000Z-dddddd" / "raw.csv"
    bad.write_text(bad.read_text().splitlines()[0] + "\n")  # the header, no trial
    runs = ringlab.open(results)
    df = runs.trials()
    assert set(df["results_experiment"]) == {"ptr-ring-reorder"}
    assert list(runs.skipped) == ["page-frag/hostB/20260101T120000Z-dddddd"]
    assert str(bad) in runs.skipped["page-frag/hostB/20260101T120000Z-dddddd"]


def test_env_is_a_read_only_mapping(results):
    from collections.abc import Mapping
    run = ringlab.open(results / "ptr-ring-reorder")
    env = run.env
    assert isinstance(env, Mapping) and "host" in env and "no such key" not in env
    d = dict(env)
    assert d == env.doc and d["host"] == env["host"] == env.get("host")
    assert set(env.keys()) == set(env.doc) and len(env) == len(env.doc)
    assert env.parameters == env.doc.get("parameters", {}) and env.status == env.doc.get("status")
    with pytest.raises(TypeError):
        env["host"] = "other"                         # read-only


def test_a_results_folder_elsewhere_with_ringlab_s_other_folders_opens(results, tmp_path, monkeypatch):
    """A copy of a results folder outside the configured one (a clone, a colleague's) also holds a
    bisection, a calibration and a fleet's records: it still opens, and only runs are listed."""
    monkeypatch.setenv("RINGLAB_RESULTS", str(tmp_path / "elsewhere"))
    (results / "bisect" / "hostA" / "20260104T000000Z-eeeeee" / "steps").mkdir(parents=True)
    (results / "bisect" / "hostA" / "20260104T000000Z-eeeeee" / "bisect.json").write_text("{}\n")
    cal = results / "calibration" / "hostA"
    (cal / "runs").mkdir(parents=True)
    (cal / "calibration.json").write_text("{}\n")
    (results / "fleet" / "20260105T000000Z-ffffff").mkdir(parents=True)
    (results / "fleet" / "20260105T000000Z-ffffff" / "fleet.json").write_text("{}\n")
    frame = ringlab.open_all(results)
    assert set(frame["run_id"]) >= {"20260101T000000Z-aaaaaa", "20260101T120000Z-dddddd"}
    (tmp_path / "unrelated" / "a" / "b" / "c").mkdir(parents=True)
    with pytest.raises(RinglabError, match="allowed: a run folder"):
        ringlab.open_all(tmp_path / "unrelated")
