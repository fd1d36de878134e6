"""A run's analysis: every number its reports show, computed once, then rendered.

``Analysis(run_dir, metric, baseline, labels, patched)`` reads the run through
:class:`ringlab.rundir.RunOutput` and resolves its metric and baseline the way the run's notebook asked
for its report (env.json ``report``) unless told otherwise.  Each of these is computed on first
use and kept:

* ``host``, ``noise_floor``: the run's host and its noise floor (``rundir.calibration.run_host`` and
  ``run_noise_floor``, the one rule every report of a run quotes);
* ``compare(baseline, metric, by, noise, alpha)``: compare()'s frame with the next-run
  interval (this comparison's earlier runs, else the host's A/A, else none), one per set of
  arguments; ``comparison`` is the one of the run's own ``baseline`` and metric (None for a run
  with a single variant);
* ``measurements`` / ``excluded``, ``params``, ``summary``, ``diagnoses`` (modality, outliers and
  their causes) and ``instructions_vs_time`` ("same instructions, different time"): the
  statistics of summary.md;
* ``spread(metric, cols)`` and ``instructions(baseline, cols)``: each arm's spread and the
  instructions-per-op comparison the mail's table shows;
* ``kept(key, make)``: any other result made once (the published-vs-reproduced tables, the
  mail's published counts, the analyses of a folder's sub-runs).

summary.md and compare.csv (:func:`ringlab.report.summary.build`), mail.txt (:mod:`ringlab.report.mail`,
:mod:`ringlab.report.mail_harness`), the notebook tables (:mod:`ringlab.report.vs_published`) and
``ringlab compare`` render from it; :meth:`Analysis.for_run` takes a run folder, a ``Report`` or an
``Analysis``, so that a caller holding one passes it on instead of computing again.
"""
from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from ringlab import rundir, schema
from ringlab.report.mailfmt import as_float
from ringlab.rundir import pick_baseline
from ringlab.rundir.calibration import results_root_of, run_host, run_noise_floor, with_host_next_run
from ringlab.stats import compare, diagnose, diagnose_ab, measurements, summarize
from ringlab.stats.decide import EQUIVALENCE_MARGIN
from ringlab.stats.summary import StatsError, group_columns

INSTR = "instructions_per_op"


def pick_metric(df: pd.DataFrame, metric: str | None = None) -> str:
    """``metric`` if given, else ns_per_op when it has values, else elapsed_us / elapsed_ns."""
    if metric:
        return metric
    for m in (schema.PRIMARY_METRIC, "elapsed_us", "elapsed_ns"):
        if m in df.columns and pd.to_numeric(df[m], errors="coerce").notna().any():
            return m
    raise StatsError("metric: raw.csv has no values in ns_per_op, elapsed_us or elapsed_ns; "
                     "pass metric=<column>")


def arm_spread(df: pd.DataFrame, metric: str, cols: list[str]) -> dict[tuple, float]:
    """(variant, config key) -> CV of the measurements (from stats.summarize); {} when there are none."""
    try:
        s = summarize(df, metric, by=cols or None, n_resamples=200)
    except StatsError:
        return {}
    return {(str(r["variant"]),) + tuple(str(r[c]) for c in cols): as_float(r["cv"]) for _, r in s.iterrows()}


def instruction_comparison(df: pd.DataFrame, baseline: str, cols: list[str]) -> tuple[pd.DataFrame, str] | None:
    """The compare() frame of instructions per op and the counts' source (callgrind, else perf);
    None when the baseline has no counts."""
    if INSTR not in df.columns:
        return None
    vals = pd.to_numeric(df[INSTR], errors="coerce")
    sub = df[vals.notna()]
    if not len(sub) or baseline not in set(sub["variant"].astype(str)):
        return None
    src = sub["icount_source"].fillna("perf").astype(str) if "icount_source" in sub.columns else \
        pd.Series("perf", index=sub.index)
    source = "callgrind" if (src == "callgrind").any() else "perf"
    sub = sub[src == source]
    try:
        return compare(sub, baseline, INSTR, by=cols or None), source
    except StatsError:
        return None


class Analysis:
    """The numbers of one run, each computed once (see the module docstring)."""

    def __init__(self, run_dir, metric: str | None = None, baseline: str | None = None,
                 labels: dict | None = None, patched: str | None = None, frame: pd.DataFrame | None = None,
                 run: rundir.RunOutput | None = None):
        """``frame``: a raw.csv frame read by the caller (``ringlab compare RAW.csv``): the run is
        that frame alone, env.json is not read.  ``run``: the :class:`ringlab.rundir.RunOutput` of
        ``run_dir`` the caller has read already (``ringlab summarize``), so raw.csv is read once."""
        self.path = Path(run_dir)
        self.run = run if run is not None else rundir.RunOutput(run_dir)
        self._frame = frame
        self._metric_given, self._baseline_given = metric, baseline
        self._labels_given, self._patched_given = labels, patched
        self._kept: dict = {}

    # -- the run -----------------------------------------------------------------------------
    @cached_property
    def df(self) -> pd.DataFrame:
        return self._frame if self._frame is not None else self.run.raw

    @cached_property
    def env(self) -> rundir.RunEnv:
        if self._frame is not None:
            return rundir.RunEnv.of({})
        self.run.read()   # raw.csv first: env.json is checked against its experiment
        return self.run.env

    @cached_property
    def asked(self) -> dict:
        """How the run's notebook asked for its report (env.json ``report``)."""
        return self.env.report

    @cached_property
    def metric(self) -> str:
        return pick_metric(self.df, self._metric_given or self.asked.get("metric"))

    @cached_property
    def labels(self) -> dict | None:
        return self._labels_given if self._labels_given is not None else self.asked.get("labels")

    @cached_property
    def patched(self) -> str | None:
        return self._patched_given or self.asked.get("patched")

    @cached_property
    def baseline(self) -> str | None:
        return pick_baseline(self.df, self.env, self._baseline_given)

    @cached_property
    def host(self) -> str | None:
        return run_host(self.df, self.env)

    @cached_property
    def noise_floor(self) -> dict | None:
        return run_noise_floor(self.host, self.path)

    # -- the comparisons ---------------------------------------------------------------------
    def kept(self, key, make: Callable[[], Any]):
        """``make()``, made on the first call with ``key`` and kept for the later ones."""
        if key not in self._kept:
            self._kept[key] = make()
        return self._kept[key]

    @cached_property
    def margin(self) -> float:
        """The equivalence margin the run's comparisons test, a fraction: the run's ``-p margin``
        (percent, env.json ``parameters.margin``), else ``EQUIVALENCE_MARGIN``."""
        pct = self.env.parameters.get("margin")
        if isinstance(pct, (int, float)) and not isinstance(pct, bool) and 0 <= pct < 100:
            return float(pct) / 100
        return EQUIVALENCE_MARGIN

    @cached_property
    def plan_targets(self) -> dict:
        """``ringlab.stats.compare``'s plan targets: a staged run's ``target_ci`` and ``target_ci_by_mode`` as
        fractions, the half-widths its ``trials_needed`` plan for ({} for any other run: the margin)."""
        st = self.env.stopping_record
        if st is None or not float(st.target_ci or 0) > 0:
            return {}
        return {"plan_target": float(st.target_ci) / 100,
                "plan_target_by_mode": {str(m): float(t) / 100 for m, t in (st.target_ci_by_mode or {}).items()}}

    def compare(self, baseline: str, metric: str | None = None, by=None, noise: float | None = None,
                alpha: float = 0.05) -> pd.DataFrame:
        """``ringlab.stats.compare``'s frame of every other variant against ``baseline`` with each row's next-run
        interval (``with_host_next_run``), made once per set of arguments; callers do not change it.
        ``noise``: the equivalence margin (a fraction), the run's own (``margin``) when None."""
        metric = metric or self.metric
        noise = self.margin if noise is None else noise
        targets = self.plan_targets
        key = ("compare", str(baseline), metric, tuple(by) if isinstance(by, (list, tuple)) else by, noise, alpha)
        return self.kept(key, lambda: with_host_next_run(
            compare(self.df, baseline, metric, by=by, noise=noise, alpha=alpha, **targets), self.host,
            results_root_of(self.path), run_dir=self.path, metric=metric, by=by))

    @cached_property
    def comparison(self) -> pd.DataFrame | None:
        """The comparison of the run's own baseline and metric (``compare``); None without a baseline."""
        return self.compare(self.baseline, self.metric) if self.baseline else None

    def spread(self, metric: str, cols: list[str]) -> dict[tuple, float]:
        """:func:`arm_spread` of the run, made once per metric and columns."""
        return self.kept(("spread", metric, tuple(cols)), lambda: arm_spread(self.df, metric, cols))

    def instructions(self, baseline: str, cols: list[str]) -> tuple[pd.DataFrame, str] | None:
        """:func:`instruction_comparison` of the run, made once per baseline and columns."""
        return self.kept(("instructions", baseline, tuple(cols)),
                         lambda: instruction_comparison(self.df, baseline, cols))

    # -- summary.md's statistics -------------------------------------------------------------
    @cached_property
    def _measured(self) -> tuple[pd.DataFrame, dict]:
        return measurements(self.df, self.metric)

    @property
    def measurements(self) -> pd.DataFrame:
        return self._measured[0]

    @property
    def excluded(self) -> dict:
        return self._measured[1]

    @cached_property
    def params(self) -> list:
        return group_columns(self.df, include_variant=False)

    @cached_property
    def summary(self) -> pd.DataFrame:
        return summarize(self.df, self.metric)

    @cached_property
    def diagnoses(self) -> list:
        return diagnose(self.df, self.metric)

    @cached_property
    def instructions_vs_time(self) -> list:
        """``diagnose_ab`` of each candidate against the baseline: same instructions, different time."""
        out = []
        if self.baseline and INSTR in self.df.columns:
            for cand in sorted(set(self.df["variant"].astype(str)) - {self.baseline}):
                out += diagnose_ab(self.df, self.baseline, cand, time_metric=self.metric, comparison=self.comparison)
        return out

    def compute(self) -> "Analysis":
        """Every statistic of summary.md, in the order summary.md's reader asked for them (errors
        surface here, before anything is rendered)."""
        for name in ("metric", "baseline", "_measured", "params", "summary", "comparison", "diagnoses",
                     "instructions_vs_time", "noise_floor"):
            getattr(self, name)
        return self

    @classmethod
    def for_run(cls, run, **kwargs) -> "Analysis":
        """The Analysis of ``run``: itself when it is one, a Report's, else a new one of the folder."""
        if isinstance(run, Analysis):
            return run
        held = getattr(run, "analysis", None)
        if isinstance(held, Analysis):
            return held
        return cls(run, **kwargs)


__all__ = ["Analysis", "INSTR", "arm_spread", "instruction_comparison", "pick_metric"]
