"""Merge every run under results/ across hosts and dates (notebook 90).

* ``load_runs``           every run folder with a readable raw.csv, as a :class:`ringlab.rundir.RunOutput`
* ``runs_table``          one line per run: experiment, host, arch, date, profile, trials
* ``cross_machine_table`` seed 000's shape across machines: arch/host | unpatched | patched | delta | its CI
* ``stale_checks``        the seed-002 question, answered from hashes and numbers:
                          A and B ran the same binary, or binaries from the same sources;
                          two runs hold identical numbers (copied, not re-measured)
"""
from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

import pandas as pd

from ringlab import fmt, paths, rundir
from ringlab.catalog import SEED000, SEED003
from ringlab.report import provenance, tables
from ringlab.errors import DataError, ParamError
from ringlab.report import pick_metric
from ringlab.report import published
from ringlab.report.figures import cross_run_forest, effect_rows, forest, host_noise_floor, meta_forest
from ringlab.rundir import RunFolder, RunOutput, pick_baseline
from ringlab.rundir.calibration import with_host_next_run
from ringlab.stats import compare
from ringlab.stats.summary import StatsError
from ringlab.studies import sessions
from ringlab.system import checkout, envinfo


#: the delta column of ``cross_machine_table``: (baseline - candidate) / baseline, + = candidate faster
DELTA_MAIL = "%change (+ = faster)"


def _run_folders(root: str | Path | None) -> list[RunOutput]:
    root = Path(root) if root else paths.results_dir()
    return [RunOutput(d, (d.parent.parent.name, d.parent.name, d.name))
            for d in sorted(p.parent for p in root.glob("*/*/*/" + rundir.RAW_CSV))]


def load_runs(root: str | Path | None = None) -> list[RunOutput]:
    """Every run folder ``results/<experiment>/<host>/<run-id>`` under ``root`` whose raw.csv can be
    read (``skipped`` lists the others with the reason); ``env_doc`` is {} for an unreadable env.json.
    The tables below take these or the runs of ``ringlab.open`` (both have ``raw``, ``env_doc``,
    ``experiment``, ``host``, ``run_id``)."""
    out = []
    for r in _run_folders(root):
        try:
            r.raw
        except DataError:
            continue   # ``skipped`` lists it with the reason
        out.append(r)
    return out


def skipped(root: str | Path | None = None) -> list[str]:
    """Run folders under ``root`` whose raw.csv cannot be read, each with the reason."""
    out = []
    for r in _run_folders(root):
        try:
            r.raw
        except DataError as e:
            out.append(str(e))
    return out


def _arch(env: rundir.RunEnv) -> str:
    return env.machine.get("machine", "?")


def runs_table(runs: list[RunOutput]) -> pd.DataFrame:
    rows = []
    for r in runs:
        ok = r.raw[r.raw["status"] == "ok"] if "status" in r.raw.columns else r.raw
        rows.append({"experiment": r.experiment, "host": r.host, "arch": _arch(r.env_doc), "run_id": r.run_id,
                     "profile": r.env_doc.parameters.get("profile", "?"),
                     "variants": ",".join(sorted(map(str, r.raw["variant"].unique()))) if "variant" in r.raw else "",
                     "trials ok": len(ok), "trials total": len(r.raw),
                     "git": (r.env_doc.git.commit or "?")[:10] + (" (dirty)" if r.env_doc.git.dirty else "")})
    return pd.DataFrame(rows)


def cross_machine_table(runs: list[RunOutput], baseline: str = SEED000.baseline, patched: str = SEED000.patched,
                        metric: str = "ns_per_op") -> pd.DataFrame:
    """For every run holding both variants: the arms' centers, %change (+ = faster), its CI
    and verdict per config.

    The arm columns are the centers the effect is computed from (their ratio is the %change,
    ``ringlab.report.tables.arm_centers``); the CI follows the %change in its sign, under one
    heading: "95% CI of %change" (runs analysed before every CI was printed at 95% read
    "95% CI (Holm) of %change": each row at its Holm step's level, ``tables.holm_footnote``)."""
    rows, cmps = [], []
    for r in runs:
        if "variant" not in r.raw.columns or metric not in r.raw.columns:
            continue
        vs = set(r.raw["variant"].astype(str))
        if baseline not in vs or patched not in vs:
            continue
        cmp = compare(r.raw, baseline, metric)
        cmp = cmp[cmp["candidate"] == patched]
        cmps.append(cmp)
        for _, c in cmp.iterrows():
            cb, cc = tables.arm_centers(c)
            rows.append({"arch/host": f"{_arch(r.env_doc)}/{r.host}", "run": f"{r.experiment}/{r.run_id}",
                         "mode": c.get("mode"), "size": c.get("size"), "pair_class": c.get("pair_class"),
                         f"unpatched ({baseline})": cb, f"patched ({patched})": cc,
                         DELTA_MAIL: fmt.pct(tables.gain(c)),
                         "_ci": fmt.ci(*tables.gain_ci(c)),
                         "verdict": c["verdict"]})
    if not rows:
        return pd.DataFrame(columns=["arch/host", "run", "verdict"])
    allc = pd.concat(cmps)
    allc.attrs.update(cmps[0].attrs)
    head = f"{tables.ci_heading(allc)} of {tables.CHANGE}"
    for row in rows:
        row[head] = row.pop("_ci")
        row["verdict"] = row.pop("verdict")
    return pd.DataFrame(rows)


def _numbers_digest(df: pd.DataFrame, variant: str, metric: str = "ns_per_op") -> str | None:
    if metric not in df.columns:
        return None
    vals = df.loc[(df["variant"].astype(str) == variant) & (df.get("status", "ok") == "ok"), metric].dropna()
    if vals.empty:
        return None
    return hashlib.sha256(",".join(repr(float(v)) for v in vals).encode()).hexdigest()


def stale_checks(runs: list[RunOutput]) -> pd.DataFrame:
    """Findings, one per line: within-run pairs with the same binary or sources, and runs
    whose numbers are identical to another run's."""
    rows = []
    for r in runs:
        try:
            rep = provenance.check(r.path)
        except (OSError, ValueError) as e:  # a run without a readable env.json still gets a line
            rows.append({"scope": f"{r.experiment}/{r.host}/{r.run_id}", "check": "provenance",
                         "finding": f"cannot check: {type(e).__name__}: {e}"})
            continue
        for p in rep["pairs"]:
            rows.append({"scope": f"{r.experiment}/{r.host}/{r.run_id}", "check": f"{p['a']} vs {p['b']}",
                         "finding": p["verdict"]})
    # each run's measurements digested once, per variant; then every pair of runs compared
    digests = []
    for r in runs:
        raw = r.raw
        variants = sorted(set(raw.get("variant", pd.Series(dtype=str)).astype(str)))
        digests.append({v: d for v in variants if (d := _numbers_digest(raw, v))})
    for (a, da), (b, db) in itertools.combinations(zip(runs, digests), 2):
        for v in sorted(set(da) & set(db)):
            if da[v] == db[v]:
                rows.append({"scope": f"{a.run_id} vs {b.run_id}", "check": f"{v} numbers",
                             "finding": "IDENTICAL measurements in two runs: copied, not re-measured"})
    if not any("IDENTICAL" in r["finding"] for r in rows):
        rows.append({"scope": "all runs", "check": "numbers",
                     "finding": f"no two of the {len(runs)} runs share a variant's measurements"})
    return pd.DataFrame(rows)


def cross_machine_note(t_cross: pd.DataFrame) -> str:
    """The sign convention of the cross-machine table and, under a Holm heading, its footnote."""
    note = (f"{tables.SIGN_CONVENTION} {DELTA_MAIL.split(' (')[0]} = (unpatched - patched) / unpatched; "
            "the arm columns are the centers the effect is computed from, so their ratio is the %change.")
    if any(tables.HOLM_MARK in str(c) for c in t_cross.columns):
        note += (f" {tables.HOLM_MARK} Within each run, Holm over its configurations sets each row's CI "
                 "level so that the run keeps a 5% family-wise error rate; a row is significant exactly "
                 "when its interval excludes 0.")
    elif len(t_cross):
        note += (" Every CI is at 95%; the verdicts are Holm-adjusted within each run over its "
                 "configurations, so each run keeps a 5% family-wise error rate.")
    return note


def summary_text(runs: list[RunOutput], t_cross: pd.DataFrame, t_stale: pd.DataFrame, t_runs: pd.DataFrame) -> str:
    """summary.md of the compare-runs folder."""
    md = ["# Runs compared", "", f"{len(runs)} runs under results/.", "",
          "## Cross-machine (ptr_ring, seed 000 shape)", "",
          fmt.df_to_markdown(t_cross) if len(t_cross) else "no run holds both variants", "",
          *([cross_machine_note(t_cross), ""] if len(t_cross) else []),
          "## Stale-data checks", "", fmt.df_to_markdown(t_stale), "", "## Runs", "", fmt.df_to_markdown(t_runs), ""]
    return "\n".join(md)


#: experiment -> the published effect of a comparison row, in the + = better sign (seed threads)
EXPECTED = {
    "ptr-ring-reorder": lambda r: published.reorder_gain_pct(r.get("mode"))
    if (r.get("baseline"), r.get("candidate")) == SEED000.arms else None,
    "ptr-ring-batch-zeroing": lambda r: published.batch_zeroing_gain_pct()
    if (r.get("baseline"), r.get("candidate")) == SEED003.arms else None,
}


def latest_runs(runs: list[RunOutput]) -> dict[str, list[RunOutput]]:
    """{experiment: the latest run of each host (run ids sort by time), hosts in name order}."""
    out: dict[str, dict[str, RunOutput]] = {}
    for r in sorted(runs, key=lambda r: (r.experiment, r.host, r.run_id)):
        out.setdefault(r.experiment, {})[r.host] = r
    return {e: [hs[h] for h in sorted(hs)] for e, hs in sorted(out.items())}


def experiment_effects(runs: list[RunOutput], experiment: str, baseline: str | None = None,
                       candidate: str | None = None, root=None):
    """(forest rows, {host: A/A bound %}) of one experiment: every configuration of the latest
    run of each host, the paired effect of each candidate against the run's baseline in the
    + = better sign with its CI and next-run interval, with the published effect where a seed
    thread has one."""
    parts, noise = [], {}
    for r in latest_runs(runs).get(experiment, []):
        raw = r.raw
        if "variant" not in raw.columns or raw["variant"].nunique() < 2:
            continue
        try:
            base, metric = pick_baseline(raw, r.env_doc, baseline), pick_metric(raw)
            cmp = compare(raw, base, metric)
        except (StatsError, DataError, ParamError):   # no comparison, or no such baseline in this run
            continue
        # each row's next-run interval, as the run's own report gives it
        cmp = with_host_next_run(cmp, r.host, root, run_dir=getattr(r, "path", None), metric=metric)
        rows = effect_rows(cmp, r.host, candidate=candidate, expected=EXPECTED.get(experiment))
        if len(rows):
            parts.append(rows)
            noise[r.host] = host_noise_floor(r.host, root)
    return (pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()), noise


#: a comparison across runs and hosts: the same experiment, arms and configuration
META_KEY = ("experiment", "baseline", "candidate", "config")


def meta_rows(runs: list[RunOutput]) -> pd.DataFrame:
    """One row per run and comparison (every run, not only the latest): its estimate, 95% CI and
    standard error (``ringlab.studies.sessions.comparison_rows``), with ``experiment``; the run is
    named ``host/run-id``."""
    rows = []
    for r in sorted(runs, key=lambda r: (r.experiment, r.host, r.run_id)):
        raw = r.raw
        if "variant" not in raw.columns or raw["variant"].nunique() < 2:
            continue
        try:
            base = pick_baseline(raw, r.env_doc, None)
            cmp = compare(raw, base, pick_metric(raw))
        except (StatsError, DataError, ParamError):
            continue
        rows += sessions.comparison_rows(cmp, f"{r.host}/{r.run_id}", r.host, r.env_doc.started_utc,
                                         experiment=r.experiment)
    return pd.DataFrame(rows)


def random_effects(runs: list[RunOutput]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(``meta_rows``, their random-effects combination per comparison measured in two or more
    runs: estimate, tau, I², Q's p, heterogeneous, the next run's interval; ``ringlab.studies.
    sessions.combined``)."""
    rows = meta_rows(runs)
    return rows, sessions.combined(rows, by=META_KEY)


def heterogeneity_lines(rows: pd.DataFrame, comb: pd.DataFrame) -> list[str]:
    """Which comparisons are heterogeneous across runs (their effect moved), or that none is."""
    if comb is None or not len(comb):
        return ["No comparison was measured in two or more committed runs: nothing to combine."]
    moved = sessions.moved_text(comb, rows)
    head = (f"{len(comb)} comparison(s) measured in two or more runs; {len(moved)} heterogeneous "
            "(Cochran's Q p < 0.05: the runs' effects differ by more than their own noise allows).")
    with_pi = int((comb["k"] >= 3).sum())
    pi = (f"{with_pi} of {len(comb)} have the three runs or more that a next-run (prediction) interval "
          "needs (a t quantile with k - 2 degrees of freedom)")
    if with_pi < len(comb):
        pi += ("; the others are drawn without one: two runs say how far apart they are, not where a "
               "third will fall (ringlab sessions, or another committed run, gives it)")
    return [head, pi + "."] + moved


def experiment_forests(runs: list[RunOutput], out_dir, root=None) -> list[Path]:
    """figures/forest-EXPERIMENT.png|svg for every experiment with an A/B comparison: rows =
    configuration x host (each host's latest run), the paired effect (+ = better), the hosts'
    A/A bands, the published effect as a marker."""
    out = []
    for exp in latest_runs(runs):
        rows, noise = experiment_effects(runs, exp, root=root)
        if len(rows):
            out += forest(rows, Path(out_dir), f"forest-{exp}",
                          f"{exp}: paired effect per configuration and host (latest run of each host)",
                          noise=noise)
    return out


def write(run_dir: str | Path, runs: list[RunOutput], baseline: str = SEED000.baseline,
          patched: str = SEED000.patched) -> list[Path]:
    """The merged tables as files: runs.csv, cross_machine.csv, stale.csv, summary.md, env.json
    (written by ringlab.rundir)."""
    run_dir = Path(run_dir)
    t_runs, t_cross, t_stale = runs_table(runs), cross_machine_table(runs, baseline, patched), stale_checks(runs)
    out = []
    with RunFolder(run_dir, mode="write", kind="compare-runs") as f:
        for name, t in (("runs.csv", t_runs), ("cross_machine.csv", t_cross), ("stale.csv", t_stale)):
            out.append(rundir.write_csv(run_dir, name, t))
        rundir.write_text(run_dir, "summary.md", summary_text(runs, t_cross, t_stale, t_runs))
        out += cross_run_forest(runs, run_dir / "figures", baseline, patched)
        out += experiment_forests(runs, run_dir / "figures")
        rows, comb = random_effects(runs)
        if len(comb):
            out.append(rundir.write_csv(run_dir, "random_effects.csv", comb))
            out += meta_forest(rows, comb, run_dir / "figures", "forest-random-effects", META_KEY)
        f.write_env(environment=envinfo.collect(probe_counters=False), git=checkout.git_info(),
                    inputs=[f"{r.experiment}/{r.host}/{r.run_id}" for r in runs])
        f.finish("complete")
    return out + [run_dir / "summary.md", run_dir / "env.json"]
