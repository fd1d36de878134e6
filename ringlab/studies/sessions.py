"""A comparison run in several sessions spread over time, and the sessions combined.

``ringlab sessions EXPERIMENT -n N --gap S`` runs the same experiment with the same parameters N
times, S seconds apart, each session a full run folder ``<out>/session-<i>/`` (raw.csv,
env.json, summary.md).  An interrupted series resumes: a session whose run completed is kept,
one cut short is resumed, a failed one is recorded and the others still run.

``combine_runs`` pools the sessions (or any run folders of one comparison: notebook 90 passes the
committed runs of every host) per candidate and configuration with a random-effects model
(``ringlab.stats.replication.combine``): estimate, tau, I^2, Cochran's Q and the interval the
next session is expected in.  ``hit_rates`` says how often one session's 95% CI, and its
next-run interval, held the following session's estimate: each session's interval from the
sessions before it and itself (``ringlab.stats.replication.between_of_runs``), else the host's
A/A, else none, as the session's own report prints it.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ringlab.errors import ParamError
from ringlab import rundir
from ringlab.rundir import RunOutput
from ringlab.rundir.earlier import config_columns
from ringlab.report import tables
from ringlab.stats.compare import compare
from ringlab.stats.replication import (NONE, between_of_runs, combine, log_ratio, next_run_interval, pct,
                                       row_df, row_se)
from ringlab.stats.summary import StatsError

#: the columns a comparison is keyed by across runs (besides its configuration parameters)
KEY = ("baseline", "candidate")
#: at most this many sessions in one series
MAX_SESSIONS = 100


def check_sessions(n: int, gap_s: float) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or not 2 <= n <= MAX_SESSIONS:
        raise ParamError(f"--sessions: {n!r}; allowed: an integer in [2, {MAX_SESSIONS}] (a series needs two runs)")
    if not (isinstance(gap_s, (int, float)) and math.isfinite(gap_s) and 0 <= gap_s <= 86400):
        raise ParamError(f"--gap: {gap_s!r}; allowed: seconds in [0, 86400] between the end of one session "
                         "and the start of the next")


def session_dir(out: Path, i: int) -> Path:
    return Path(out) / f"session-{i}"


def run_sessions(experiment: str, params: dict[str, Any], n: int, out: Path, gap_s: float = 0.0,
                 build: bool = True, log: Callable[[str], None] | None = None,
                 run: Callable | None = None, sleep: Callable[[float], None] = time.sleep) -> list[dict]:
    """Run ``experiment`` ``n`` times into ``out/session-1 .. n``, ``gap_s`` seconds between the
    end of one and the start of the next; returns one record per session (folder, status, seconds).
    ``run`` is ``ringlab.run.run_experiment`` unless given."""
    check_sessions(n, gap_s)
    if run is None:
        from ringlab.run import run_experiment as run
    log = log or (lambda s: None)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    for i in range(1, n + 1):
        d = session_dir(out, i)
        prior = RunOutput(d).status if (d / "env.json").is_file() else None
        if prior == "complete":
            log(f"sessions: session {i} of {n} already complete in {d}; kept")
            records.append({"session": i, "dir": d, "status": "complete", "seconds": math.nan, "kept": True})
            continue
        if i > 1 and gap_s > 0 and records and not records[-1].get("kept"):
            log(f"sessions: waiting {gap_s:.0f} s before session {i}")
            sleep(gap_s)
        t0 = time.monotonic()
        resume = (d / "raw.csv").is_file()
        try:
            res = run(experiment, dict(params), d, resume=resume, build=build, log=log)
            status, reason = res.status, res.status_reason
        except (ParamError, KeyboardInterrupt):
            raise
        except Exception as e:   # noqa: BLE001 - a session that fails is recorded, the others run
            status, reason = "failed", f"{type(e).__name__}: {e}"
        secs = time.monotonic() - t0
        log(f"sessions: session {i} of {n} {status} in {secs:.0f} s" + (f" ({reason})" if reason else ""))
        records.append({"session": i, "dir": d, "status": status, "seconds": secs, "reason": reason})
    return records


def comparison_rows(cmp: pd.DataFrame, run: str, host=None, started=None, **extra) -> list[dict]:
    """One record per row of a compare() frame ``cmp`` of one run (exact rows left out): the
    run's estimate and 95% CI in percent (delta's sign), its standard error and degrees of freedom
    on the log scale, and ``run``, ``host``, ``started_utc`` and ``extra`` beside them."""
    cols = config_columns(cmp)
    out = []
    for _, r in cmp.iterrows():
        if str(r.get("design")) == "exact":
            continue
        out.append({**extra, "run": run, "host": host, "started_utc": started, "baseline": str(r["baseline"]),
                    "candidate": str(r["candidate"]), "config": ",".join(f"{c}={r[c]}" for c in cols) or "all",
                    "delta_pct": float(r["delta_pct"]), "ci_low_pct": float(r["ci_low_pct"]),
                    "ci_high_pct": float(r["ci_high_pct"]), "verdict": str(r["verdict"]),
                    "lower_is_better": bool(r.get("lower_is_better", True)),
                    "log_delta": log_ratio(r["delta_pct"]), "se": row_se(r), "df": row_df(r)})
    return out


def run_rows(run_dirs, baseline: str | None = None, metric: str = "ns_per_op",
             labels: list[str] | None = None) -> pd.DataFrame:
    """``comparison_rows`` of every run folder in ``run_dirs`` against ``baseline`` (default: the
    run's), ``run`` = ``labels`` or the folder's name.  A folder that cannot be compared is left out."""
    rows = []
    for j, d in enumerate(run_dirs):
        run = RunOutput(d)
        try:
            df, env = run.read()
            base = baseline or (env.baseline if env is not None else None) or str(df["variant"].iloc[0])
            cmp = compare(df, base, metric)
        except Exception:   # noqa: BLE001 - not a comparison with this baseline: not a row
            continue
        env = env if env is not None else rundir.RunEnv.of({})
        rows += comparison_rows(cmp, labels[j] if labels else Path(d).name, env.host, env.started_utc)
    return pd.DataFrame(rows)


def combined(rows: pd.DataFrame, by=("baseline", "candidate", "config"), level: float = 0.95) -> pd.DataFrame:
    """Per comparison (``by``), the random-effects combination of its runs in ``rows``
    (``run_rows``): k, estimate and CI, tau, I^2, Q's p, heterogeneous, the next run's interval,
    in percent.  Comparisons with fewer than two runs with a CI are left out."""
    out = []
    if rows is None or not len(rows):
        return pd.DataFrame()
    for key, grp in rows.groupby(list(by), sort=True):
        g = grp[grp["se"].notna() & (grp["se"] > 0)]
        try:
            re = combine(g["log_delta"], g["se"] ** 2, level)
        except StatsError:
            continue
        out.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))), **re.as_dict(),
                    "hosts": ",".join(sorted({str(h) for h in g["host"].dropna()})),
                    "lower_is_better": bool(g["lower_is_better"].iloc[0])})
    return pd.DataFrame(out)


def mode_of(config: str) -> str | None:
    """The mode of a ``comparison_rows`` config ("mode=0,size=1000" -> "0"; None without one)."""
    for part in str(config).split(","):
        if part.startswith("mode="):
            return part.split("=", 1)[1]
    return None


def run_between(recs: list[dict], i: int, host_aa=None):
    """The between-run variance of run ``i`` of one comparison's runs ``recs`` (in run order), as
    its report takes it: runs 0..i (``between_of_runs``: never a later run), else ``host_aa``
    (a ``Between``, or {mode: ``Between``} read in the row's mode), else ``NONE``."""
    own = [r for r in recs[:i + 1] if isinstance(r.get("se"), float) and math.isfinite(r["se"]) and r["se"] > 0]
    b = between_of_runs([r["log_delta"] for r in own], [r["se"] ** 2 for r in own])
    if b is not None:
        return b
    if isinstance(host_aa, dict):
        return host_aa.get(mode_of(recs[i].get("config", "")), NONE)
    return host_aa if host_aa is not None else NONE


def hit_rates(rows: pd.DataFrame, host_aa=None, level: float = 0.95) -> pd.DataFrame:
    """Per comparison and consecutive pair of runs (in ``rows``' order): whether run i's 95% CI,
    and its next-run interval (``next_run_interval`` with ``run_between``: runs 0..i of this
    comparison, else ``host_aa``, else none), held run i+1's estimate.  Columns: the comparison,
    ``run``, ``next``, ``next_delta_pct``, ``ci_held``, ``next_low_pct``, ``next_high_pct``,
    ``next_basis``, ``next_between_sd_pct``, ``next_source``, ``pi_held``."""
    out = []
    for key, grp in rows.groupby(["baseline", "candidate", "config"], sort=False):
        recs = grp.to_dict("records")
        for i, (a, b) in enumerate(zip(recs, recs[1:])):
            btw = run_between(recs, i, host_aa)
            lo, hi = next_run_interval(a["log_delta"], a["se"], a["df"], btw, level)
            out.append({"baseline": key[0], "candidate": key[1], "config": key[2], "run": a["run"],
                        "next": b["run"], "next_delta_pct": b["delta_pct"],
                        "ci_held": bool(a["ci_low_pct"] <= b["delta_pct"] <= a["ci_high_pct"]),
                        "next_low_pct": pct(lo), "next_high_pct": pct(hi), "next_basis": btw.basis,
                        "next_between_sd_pct": btw.sd_pct, "next_source": btw.text,
                        "pi_held": bool(pct(lo) <= b["delta_pct"] <= pct(hi))})
    return pd.DataFrame(out)


def change_cells(delta_pct: float, low_pct: float, high_pct: float, lower_is_better: bool = True,
                 digits: int = 2) -> tuple[str, str]:
    """A run's effect and an interval of it, given in delta's sign (candidate / baseline - 1, in
    percent), as every report prints them: %change + = better (``tables.gain_of_ratio``), the
    interval's bounds in the same sign, ``digits`` decimals; past ±50% a factor ("×2.1 slower")
    with the interval in factors (``tables.change_text``)."""
    g = tables.gain_of_ratio(1 + delta_pct / 100, lower_is_better)
    lo, hi = sorted(tables.gain_of_ratio(1 + x / 100, lower_is_better) for x in (low_pct, high_pct))
    if tables.is_factor(g):
        return tables.change_text(g, lower_is_better), tables.change_ci_text(lo, hi, g, lower_is_better)
    est = f"{g:+.{digits}f}%" if math.isfinite(g) else "n/a"
    ci = f"[{lo:+.{digits}f}, {hi:+.{digits}f}]" if math.isfinite(lo) and math.isfinite(hi) else "n/a"
    return est, ci


def moved_text(comb: pd.DataFrame, rows: pd.DataFrame) -> list[str]:
    """One line per heterogeneous comparison: its effect moved between runs, with the runs (each
    run's %change and 95% CI, + = better)."""
    lines = []
    if comb is None or not len(comb):
        return lines
    keys = [k for k in ("experiment", "baseline", "candidate", "config") if k in comb.columns and k in rows.columns]
    for _, c in comb[comb["heterogeneous"]].iterrows():
        sub = rows[np.logical_and.reduce([rows[k] == c[k] for k in keys])]
        runs = "; ".join("{} {} {}".format(r["run"], *change_cells(r["delta_pct"], r["ci_low_pct"], r["ci_high_pct"],
                                                                     bool(r.get("lower_is_better", True))))
                         for _, r in sub.iterrows())
        what = f"{c['experiment']}: " if "experiment" in keys else ""
        lines.append(f"{what}{c['candidate']} vs {c['baseline']} ({c['config']}): the effect moved between runs "
                     f"(tau {c['tau_pct']:.2f} points, I² {c['i2']:.0%}, Q p={c['q_p']:.2g}; %change + = better): "
                     f"{runs}")
    return lines


def table_lines(comb: pd.DataFrame) -> list[str]:
    """The combined comparisons as text lines, in the reports' one sign (``change_cells``: %change
    + = better, a factor past ±50%)."""
    if comb is None or not len(comb):
        return ["no comparison with two or more runs that have a CI"]
    out = [f"{'comparison':<34} {'k':>2} {'%change':>8} {'95% CI':>17} {'tau':>6} {'I²':>4} {'Q p':>6}  next run (95%)"]
    for _, c in comb.iterrows():
        name = f"{c['candidate']} vs {c['baseline']} {c['config']}"
        lib = bool(c.get("lower_is_better", True))
        est, ci = change_cells(c["estimate_pct"], c["ci_low_pct"], c["ci_high_pct"], lib)
        nxt = change_cells(c["estimate_pct"], c["pi_low_pct"], c["pi_high_pct"], lib)[1]
        out.append(f"{name[:34]:<34} {int(c['k']):>2} {est:>8} {ci}".ljust(63)
                   + f" {c['tau_pct']:>5.2f} {c['i2']:>4.0%} {c['q_p']:>6.2g}  "
                   + (nxt if math.isfinite(c["pi_low_pct"]) else "n/a (3+ runs)")
                   + ("  heterogeneous" if c["heterogeneous"] else ""))
    out.append("%change: + = better (less time, more ops/s), as in every ringlab report; past ±50% a factor. "
               "Random effects over runs (Paule-Mandel tau², statsmodels): tau is the SD of the runs' own "
               "effects; next run: where another run's estimate is expected (Higgins et al. 2009, t with k-2 df).")
    return out


def write_combined(out: Path, comb: pd.DataFrame, rows: pd.DataFrame) -> list[Path]:
    """``out/combined.csv`` (one row per comparison) and ``out/runs.csv`` (one per run and
    comparison), sorted, floats at 6 significant digits: readable in a git diff."""
    out = Path(out)
    files = []
    for name, frame in (("combined.csv", comb), ("runs.csv", rows)):
        if frame is None or not len(frame):
            continue
        files.append(rundir.write_text(out, name, frame.to_csv(index=False, float_format="%.6g")))
    return files
