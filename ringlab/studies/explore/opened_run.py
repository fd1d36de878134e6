"""One opened run folder (:class:`OpenedRun`) and a figure file that Jupyter shows as the image.

See :mod:`ringlab.explore`: nothing here parses a file (:class:`ringlab.rundir.RunOutput` does), and
the report is computed from the run folder, which it only reads: its files and figures are
written to a scratch folder, never to the run folder.
"""
from __future__ import annotations

import hashlib
import html
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from ringlab import paths
from ringlab import schema
from ringlab.errors import DataError, ParamError, RinglabError
from ringlab import rundir
from ringlab.rundir import RunEnv
from ringlab.report import pick_metric
from ringlab.report import report as _report
from ringlab.report.figures import FIGURES
from ringlab.stats import StatsError, compare, measurements, summarize
from ringlab.stats.compare import comparison_columns, round_key


def user_error(cls, message: str) -> RinglabError:
    """A ringlab error that IPython shows as one line (the message is the whole story)."""
    e = cls(message)
    e._render_traceback_ = lambda: [f"{cls.__name__}: {message}"]
    return e


class FigureFile:
    """A figure's PNG file; Jupyter shows it as the image, ``.path`` is the file."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def __fspath__(self) -> str:
        return str(self.path)

    def _repr_png_(self) -> bytes:
        return self.path.read_bytes()

    def __repr__(self) -> str:
        return f"FigureFile({str(self.path)!r})"


class OpenedRun:
    """One run folder, opened for reading (see :mod:`ringlab.explore`).

    ``path``; ``experiment``, ``host``, ``run_id``: the folder's place in
    ``results/<experiment>/<host>/<run-id>`` (env.json's values for a folder elsewhere);
    ``name`` = "experiment/host/run_id"; ``env`` (:class:`ringlab.rundir.RunEnv`), ``env_doc``;
    ``status`` and ``status_line``; ``profile``; ``folder`` (the :class:`ringlab.rundir.RunOutput` that
    reads the files); ``raw`` / ``raw_all`` /
    ``trials()``; ``metric`` and ``baseline`` (the report's defaults); ``summary()``,
    ``compare()``, ``report()``, ``figure()``, ``round_ratios()``.
    """

    def __init__(self, path, names: tuple[str, str, str] | None = None):
        self.path = Path(path).absolute()
        self.folder = rundir.RunOutput(self.path, names)
        self.status, self.status_line = self.folder.status, self.folder.status_line
        try:
            self.env = self.folder.env_file
        except DataError:
            self.env = RunEnv(self.folder.env_json, 0, "run", {})
        self.experiment, self.host, self.run_id = self.folder.names
        self._reports: dict = {}
        self._scratch: Path | None = None
        self._trials: dict[tuple[bool, bool], pd.DataFrame] = {}

    # -- identity ------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self.experiment}/{self.host}/{self.run_id}"

    @property
    def env_doc(self) -> RunEnv:
        """env.json (an empty one when the run has none), as ``ringlab.rundir.RunOutput.env_doc`` gives it."""
        return self.env

    @property
    def profile(self) -> str:
        return str(self.env.parameters.get("profile") or "?")

    def __repr__(self) -> str:
        return f"<ringlab run {self.name}: {self.status}, profile {self.profile}, {self.path}>"

    # -- trials --------------------------------------------------------------------------------
    @property
    def raw_all(self) -> pd.DataFrame:
        """Every row of raw.csv: warm-ups, failed and timed-out trials included."""
        df = self.folder.raw
        self.folder.env   # an env.json of another experiment than raw.csv's: DataError naming it
        return df.copy()

    def trials(self, warmup: bool = False, failed: bool = False) -> pd.DataFrame:
        """raw.csv's rows; warm-ups and trials whose status is not ok only when asked (selected
        once per run and choice; each call returns its own copy)."""
        key = (bool(warmup), bool(failed))
        if key not in self._trials:
            df = self.raw_all
            self._trials[key] = schema.measured(df, warmup=warmup, failed=failed).reset_index(drop=True)
        return self._trials[key].copy()

    @property
    def raw(self) -> pd.DataFrame:
        """The measured trials: status ok, no warm-ups (callgrind count trials included)."""
        return self.trials()

    @property
    def variants(self) -> list[str]:
        df = self.raw_all
        return list(dict.fromkeys(df["variant"].astype(str))) if "variant" in df.columns else []

    @property
    def metric(self) -> str:
        """The metric the report uses by default (ns_per_op, else elapsed_us / elapsed_ns)."""
        try:
            return pick_metric(self.raw_all)
        except StatsError as e:
            raise user_error(DataError, f"{self.path}: {e}") from None

    @property
    def baseline(self) -> str | None:
        """The run's baseline, the one summary.md and ``ringlab mail`` name (the rule of
        :mod:`ringlab.rundir.baseline`); None for a run with a single variant."""
        return rundir.pick_baseline(self.raw_all, self.env.doc, None)

    # -- statistics ----------------------------------------------------------------------------
    def summary(self, metric: str | None = None, by=None) -> pd.DataFrame:
        """Per-configuration statistics of ``metric`` (:func:`ringlab.stats.summarize`)."""
        try:
            return summarize(self.raw_all, metric or self.metric, by=by)
        except StatsError as e:
            raise user_error(ParamError, str(e)) from None

    def compare(self, baseline: str | None = None, by=None, metric: str | None = None,
                noise: float = 0.01, alpha: float = 0.05) -> pd.DataFrame:
        """Every other variant against ``baseline`` (default: the report's) within each
        configuration, paired by round: :func:`ringlab.stats.compare`'s frame (verdict,
        delta_pct, ci_low_pct, ci_high_pct, ci_level, design, n_pairs, family_size, ...)."""
        base = baseline or self.baseline
        if base is None:
            raise user_error(ParamError, f"parameter 'baseline': {self.name} has a single variant "
                                         f"({', '.join(self.variants) or 'none'}): there is nothing to compare")
        if str(base) not in self.variants:
            raise user_error(ParamError, f"parameter 'baseline': {base!r} is not a variant of {self.name}; "
                                         f"allowed: {', '.join(self.variants)}")
        try:
            return compare(self.raw_all, str(base), metric or self.metric, by=by, noise=noise, alpha=alpha)
        except StatsError as e:
            raise user_error(ParamError, str(e)) from None

    def round_ratios(self, candidate: str, baseline: str | None = None, metric: str | None = None,
                     by=None) -> pd.DataFrame:
        """Per configuration and round, candidate / baseline of the round's medians of ``metric``
        (the unit :func:`compare` pairs on), in the order the rounds ran.

        Columns: the configuration columns of ``compare``, ``config`` (those that differ
        between configurations, as one label: "mode=1 pair_class=same-llc", or "all"),
        ``round``, ``t_s`` (seconds from the run's first measured row to the round's first
        row; NaN without timestamps), ``baseline_value``, ``candidate_value``, ``ratio``.
        Rounds where either arm has no value are left out."""
        base, metric = str(baseline or self.baseline), metric or self.metric
        for name, v in (("candidate", candidate), ("baseline", base)):
            if str(v) not in self.variants:
                raise user_error(ParamError, f"parameter '{name}': {v!r} is not a variant of {self.name}; "
                                             f"allowed: {', '.join(self.variants)}")
        meas, _ = measurements(self.raw_all, metric)
        meas["variant"] = meas["variant"].astype(str)
        meas = meas[meas["variant"].isin([base, str(candidate)])]
        cols = comparison_columns(meas, by)
        rk = round_key(meas)
        out_cols = cols + ["config", "round", "t_s", "baseline_value", "candidate_value", "ratio"]
        if rk is None or meas.empty:
            return pd.DataFrame(columns=out_cols)
        meas["round"] = rk
        t = (pd.to_datetime(meas["timestamp"], utc=True, errors="coerce") if "timestamp" in meas.columns
             else pd.Series(pd.NaT, index=meas.index))
        meas["t_s"] = (t - t.min()).dt.total_seconds()
        keys = cols + ["round"]
        med = meas.pivot_table(index=keys, columns="variant", values=metric, aggfunc="median")
        start = meas.groupby(keys, dropna=False)["t_s"].min()
        if base not in med.columns or str(candidate) not in med.columns:
            return pd.DataFrame(columns=out_cols)
        res = pd.DataFrame({"baseline_value": med[base], "candidate_value": med[str(candidate)]}).dropna()
        res["ratio"] = res["candidate_value"] / res["baseline_value"]
        res["t_s"] = start.reindex(res.index)
        res = res.reset_index()
        label = [c for c in cols if res[c].nunique(dropna=False) > 1]  # what tells the configurations apart
        res["config"] = (res[label].astype(str).apply(lambda r: " ".join(f"{c}={v}" for c, v in r.items()), axis=1)
                         if label else "all")
        return res.sort_values(cols + ["t_s", "round"], kind="stable")[out_cols].reset_index(drop=True)

    # -- the report, its files and figures drawn in a scratch folder ------------------------------
    def _scratch_dir(self) -> Path:
        if self._scratch is None:
            tag = hashlib.sha256(str(self.path).encode()).hexdigest()[:10]
            d = paths.scratch_dir() / "open" / f"{self.run_id}-{tag}"
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError:
                d = Path(tempfile.mkdtemp(prefix=f"ringlab-open-{self.run_id}-"))
            self._scratch = d
        return self._scratch

    def report(self, baseline: str | None = None, metric: str | None = None, labels: dict | None = None,
               figures: bool = True):
        """The run's :class:`ringlab.report.Report` (tables, figures, missing, markdown), computed
        from the run folder; its files and figures are written to a scratch folder (the report's
        output folder): the run folder is never written."""
        key = (metric, baseline, tuple(sorted((labels or {}).items())))
        if (key, True) in self._reports:
            return self._reports[(key, True)]
        if (key, figures) in self._reports:
            return self._reports[(key, figures)]
        tag = f"{metric or 'default'}-vs-{baseline or 'default'}" + ("" if figures else "-tables")
        if labels:
            tag += "-" + hashlib.sha256(repr(key[2]).encode()).hexdigest()[:8]
        d = self._scratch_dir() / tag
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        try:
            rep = _report(self.path, metric=metric, baseline=baseline, labels=labels, figures=figures, out_dir=d)
        except StatsError as e:
            raise user_error(ParamError, str(e)) from None
        self._reports[(key, figures)] = rep
        return rep

    def figure(self, name: str, baseline: str | None = None, metric: str | None = None) -> FigureFile:
        """Figure ``name`` of the run's report (box, order, cpu_pairs, spsc, counters,
        size_sweep); ``DataError`` with the report's reason when this run cannot have it."""
        known = list(FIGURES) + ["size_sweep"]
        if name not in known:
            raise user_error(ParamError, f"parameter 'name': unknown figure {name!r}; allowed: {', '.join(known)}")
        rep = self.report(baseline=baseline, metric=metric)
        if name not in rep.figures:
            raise user_error(DataError, f"figure '{name}' of {self.name} is not available: {rep.why_missing(name)}")
        return FigureFile(rep.figures[name])

    # -- the card ------------------------------------------------------------------------------
    def _repr_html_(self) -> str:
        e = html.escape
        what = self.experiment
        if self.env.experiment and str(self.env.experiment) != self.experiment:
            what += f" ({self.env.experiment})"
        facts = [("experiment", what), ("host", self.host), ("profile", self.profile),
                 ("status", self.status + (f": {self.status_line}" if self.status_line else "")),
                 ("run", f"{self.run_id} ({self.path})")]
        try:
            raw = self.raw_all
            n = len(self.trials())
            facts.append(("trials", f"{n} measured, {len(raw) - n} warm-up or not ok; variants "
                                    + ", ".join(self.variants)))
            rep = self.report(figures=False)
            facts.append(("metric", f"{rep.metric}, baseline {rep.baseline or 'none'}"))
            table = (rep.tables["ab"].to_html(index=False, border=0) if "ab" in rep.tables
                     else f"<p><i>no verdict table: {e(rep.why_missing('ab'))}</i></p>")
        except (RinglabError, ValueError) as err:
            table = f"<p><i>no verdict table: {e(str(err))}</i></p>"
        rows = "".join(f"<tr><th style='text-align:left'>{e(k)}</th><td style='text-align:left'>{e(str(v))}</td></tr>"
                       for k, v in facts)
        return (f"<div class='ringlab-run'><h4>{e(self.name)}</h4><table>{rows}</table>"
                f"<p><b>A/B verdicts</b></p>{table}</div>")


__all__ = ["FigureFile", "OpenedRun"]
