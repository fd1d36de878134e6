"""Interactive analysis: open a run, an experiment's latest run, or every run, in a notebook.

::

    import ringlab
    run = ringlab.open("results/ptr-ring-reorder")  # its latest complete run, any host
    run                                             # a card: experiment, host, profile, status, verdicts
    run.raw.query("mode == 1")                      # measured trials: no warm-ups, no failures
    run.compare(baseline="prebatch")                # the paired analysis against another baseline
    run.figure("ecdf")                              # a report figure, drawn in a scratch folder
    trials = ringlab.open_all("results/")           # one tidy frame: every run, every host

``open(PATH)`` takes

* a run folder (it holds raw.csv and env.json): that run, a :class:`Run`;
* ``results/<experiment>``: its **latest complete run**, any host and any profile: of the
  runs whose status is ``complete``, the one whose run id (it begins with the UTC time the
  run started) sorts last, ties broken by host name; a :class:`Run`;
* ``results/`` (a folder of ``<experiment>/<host>/<run-id>/`` run folders; the configured
  results folder or an empty folder count too, even without runs): every run, a :class:`Runs`.

A relative PATH that does not exist from the working directory is looked up from the
repository root, so ``open("results/...")`` works from notebooks/ too.

``open_all(PATH)`` is one tidy frame of the measured trials of every run under PATH (every
run of an experiment folder, not only the latest): ``run`` (``<experiment>/<host>/<run-id>``,
the folder), ``results_experiment`` (the results folder's experiment, as ``open`` takes it),
``profile``, ``run_status``, then every raw.csv column as written (its ``run_id``,
``experiment`` -- ringlab run's name, e.g. ptr_ring -- and ``host``; filled from env.json and
the folder where an older raw.csv lacks them).

Nothing here parses a file: runs are read through :func:`ringlab.report.rundata.read_run` and
:class:`ringlab.rundir.RunFolder`; tables and figures are the :class:`ringlab.report.Report`
object's, numbers come from :mod:`ringlab.stats`.  The report writes files (summary.md,
figures/), so it is built on a copy of raw.csv and env.json in a scratch folder
(``$RINGLAB_SCRATCH/open/...``, or a temporary folder where that cannot be written):
opening a run and drawing its figures never writes into the run folder, committed or not.
"""
from __future__ import annotations

import hashlib
import html
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from ringlab import paths
from ringlab.errors import DataError, ParamError, RinglabError
from ringlab.report.rundata import read_run
from ringlab.rundir import RunEnv, RunFolder
from ringlab.stats import StatsError

#: what open() accepts, for error messages
ALLOWED = ("a run folder (holding raw.csv and env.json), results/<experiment> (its latest complete "
           "run, any host) or results/ (every run)")
#: the leading columns of open_all()'s frame, before raw.csv's own
KEY_COLUMNS = ["run", "results_experiment", "run_id", "experiment", "host", "profile", "run_status"]


def _user_error(cls, message: str) -> RinglabError:
    """A ringlab error that IPython shows as one line (the message is the whole story)."""
    e = cls(message)
    e._render_traceback_ = lambda: [f"{cls.__name__}: {message}"]
    return e


def _is_true(col: pd.Series) -> pd.Series:
    return col.map(lambda v: str(v).strip().lower() in ("true", "1", "yes")).astype(bool)


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


class Run:
    """One run folder, opened for reading (see the module docstring).

    ``path``; ``experiment``, ``host``, ``run_id``: the folder's place in
    ``results/<experiment>/<host>/<run-id>`` (env.json's values for a folder elsewhere);
    ``name`` = "experiment/host/run_id"; ``env`` (:class:`ringlab.rundir.RunEnv`);
    ``status`` and ``status_line`` (:class:`RunFolder`); ``profile``; ``raw`` / ``raw_all`` /
    ``trials()``; ``metric`` and ``baseline`` (the report's defaults); ``summary()``,
    ``compare()``, ``report()``, ``figure()``, ``round_ratios()``.
    """

    def __init__(self, path, names: tuple[str, str, str] | None = None):
        self.path = Path(path).absolute()
        data = read_run(self.path, require_raw=False, load_raw=False)
        self.status, self.status_line = data.status, data.status_line
        try:
            self.env = RunFolder(self.path).read_env()
        except DataError:
            self.env = RunEnv(self.path / "env.json", 0, "run", {})
        if names is None:
            host = self.env.get("host")
            if host and self.path.parent.name == str(host) and len(self.path.parts) >= 4:
                names = (self.path.parent.parent.name, str(host), self.path.name)
            else:
                names = (str(self.env.get("experiment") or self.path.name), str(host or self.path.parent.name),
                         self.path.name)
        self.experiment, self.host, self.run_id = names
        self._raw: pd.DataFrame | None = None
        self._reports: dict = {}
        self._scratch: Path | None = None

    # -- identity ------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self.experiment}/{self.host}/{self.run_id}"

    @property
    def profile(self) -> str:
        return str(self.env.parameters.get("profile") or "?")

    def __repr__(self) -> str:
        return f"<ringlab run {self.name}: {self.status}, profile {self.profile}, {self.path}>"

    # -- trials --------------------------------------------------------------------------------
    @property
    def raw_all(self) -> pd.DataFrame:
        """Every row of raw.csv: warm-ups, failed and timed-out trials included."""
        if self._raw is None:
            self._raw = read_run(self.path).raw
        return self._raw.copy()

    def trials(self, warmup: bool = False, failed: bool = False) -> pd.DataFrame:
        """raw.csv's rows; warm-ups and trials whose status is not ok only when asked."""
        df = self.raw_all
        keep = pd.Series(True, index=df.index)
        if not warmup and "warmup" in df.columns:
            keep &= ~_is_true(df["warmup"])
        if not failed and "status" in df.columns:
            keep &= df["status"].astype(str).eq("ok")
        return df[keep].reset_index(drop=True)

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
        from ringlab.report import pick_metric
        try:
            return pick_metric(self.raw_all)
        except StatsError as e:
            raise _user_error(DataError, f"{self.path}: {e}") from None

    @property
    def baseline(self) -> str | None:
        """The report's default baseline: env.json's, else raw.csv's first variant (None: one variant)."""
        from ringlab.report import pick_baseline
        return pick_baseline(self.raw_all, self.env.doc, None)

    # -- statistics ----------------------------------------------------------------------------
    def summary(self, metric: str | None = None, by=None) -> pd.DataFrame:
        """Per-configuration statistics of ``metric`` (:func:`ringlab.stats.summarize`)."""
        from ringlab.stats import summarize
        try:
            return summarize(self.raw_all, metric or self.metric, by=by)
        except StatsError as e:
            raise _user_error(ParamError, str(e)) from None

    def compare(self, baseline: str | None = None, by=None, metric: str | None = None,
                noise: float = 0.01, alpha: float = 0.05) -> pd.DataFrame:
        """Every other variant against ``baseline`` (default: the report's) within each
        configuration, paired by round: :func:`ringlab.stats.compare`'s frame (verdict,
        delta_pct, ci_low_pct, ci_high_pct, ci_level, design, n_pairs, family_size, ...)."""
        from ringlab.stats import compare
        base = baseline or self.baseline
        if base is None:
            raise _user_error(ParamError, f"parameter 'baseline': {self.name} has a single variant "
                                          f"({', '.join(self.variants) or 'none'}): there is nothing to compare")
        if str(base) not in self.variants:
            raise _user_error(ParamError, f"parameter 'baseline': {base!r} is not a variant of {self.name}; "
                                          f"allowed: {', '.join(self.variants)}")
        try:
            return compare(self.raw_all, str(base), metric or self.metric, by=by, noise=noise, alpha=alpha)
        except StatsError as e:
            raise _user_error(ParamError, str(e)) from None

    def round_ratios(self, candidate: str, baseline: str | None = None, metric: str | None = None,
                     by=None) -> pd.DataFrame:
        """Per configuration and round, candidate / baseline of the round's medians of ``metric``
        (the unit :func:`compare` pairs on), in the order the rounds ran.

        Columns: the configuration columns of ``compare``, ``config`` (those that differ
        between configurations, as one label: "mode=1 pair_class=same-llc", or "all"),
        ``round``, ``t_s`` (seconds from the run's first measured row to the round's first
        row; NaN without timestamps), ``baseline_value``, ``candidate_value``, ``ratio``.
        Rounds where either arm has no value are left out."""
        from ringlab.stats import measurements
        from ringlab.stats.compare import comparison_columns, round_key
        base, metric = str(baseline or self.baseline), metric or self.metric
        for name, v in (("candidate", candidate), ("baseline", base)):
            if str(v) not in self.variants:
                raise _user_error(ParamError, f"parameter '{name}': {v!r} is not a variant of {self.name}; "
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

    # -- the report, drawn in a scratch folder ---------------------------------------------------
    def _scratch_dir(self) -> Path:
        if self._scratch is None:
            from ringlab.reproduce import scratch_dir
            tag = hashlib.sha256(str(self.path).encode()).hexdigest()[:10]
            d = scratch_dir() / "open" / f"{self.run_id}-{tag}"
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError:
                d = Path(tempfile.mkdtemp(prefix=f"ringlab-open-{self.run_id}-"))
            self._scratch = d
        return self._scratch

    def report(self, baseline: str | None = None, metric: str | None = None, labels: dict | None = None,
               figures: bool = True):
        """The run's :class:`ringlab.report.Report` (tables, figures, missing, markdown), built on a
        copy of raw.csv and env.json in a scratch folder: the run folder is never written."""
        from ringlab.report import report as _report
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
        for f in ("raw.csv", "env.json"):
            if (self.path / f).is_file():
                shutil.copyfile(self.path / f, d / f)
        try:
            rep = _report(d, metric=metric, baseline=baseline, labels=labels, figures=figures)
        except StatsError as e:
            raise _user_error(ParamError, str(e)) from None
        self._reports[(key, figures)] = rep
        return rep

    def figure(self, name: str, baseline: str | None = None, metric: str | None = None) -> FigureFile:
        """Figure ``name`` of the run's report (box, ecdf, order, cpu_pairs, spsc, counters,
        size_sweep); ``DataError`` with the report's reason when this run cannot have it."""
        from ringlab.report.figures import FIGURES
        known = list(FIGURES) + ["size_sweep"]
        if name not in known:
            raise _user_error(ParamError, f"parameter 'name': unknown figure {name!r}; allowed: {', '.join(known)}")
        rep = self.report(baseline=baseline, metric=metric)
        if name not in rep.figures:
            raise _user_error(DataError, f"figure '{name}' of {self.name} is not available: {rep.why_missing(name)}")
        return FigureFile(rep.figures[name])

    # -- the card ------------------------------------------------------------------------------
    def _repr_html_(self) -> str:
        e = html.escape
        what = self.experiment
        if self.env.get("experiment") and str(self.env.get("experiment")) != self.experiment:
            what += f" ({self.env.get('experiment')})"
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
        except (RinglabError, StatsError, ValueError) as err:
            table = f"<p><i>no verdict table: {e(str(err))}</i></p>"
        rows = "".join(f"<tr><th style='text-align:left'>{e(k)}</th><td style='text-align:left'>{e(str(v))}</td></tr>"
                       for k, v in facts)
        return (f"<div class='ringlab-run'><h4>{e(self.name)}</h4><table>{rows}</table>"
                f"<p><b>A/B verdicts</b></p>{table}</div>")


class Runs(Sequence):
    """Every run under a results folder: a sequence of :class:`Run` (oldest first).

    ``runs[i]`` or ``runs["experiment/host/run-id"]``; ``experiments``; ``latest(experiment)``
    (its latest complete run, or None) and ``latest()`` (the latest complete run of each
    experiment, a Runs); ``raw`` / ``trials()`` (one tidy frame, as :func:`open_all`);
    ``table()`` (one line per run); ``skipped`` ({run: reason} for unreadable raw.csv files).
    """

    def __init__(self, root, runs: Iterable[Run]):
        self.root = Path(root)
        self._runs = list(runs)
        self.skipped: dict[str, str] = {}

    @classmethod
    def under(cls, root) -> "Runs":
        root = Path(root)
        found = [Run(d, (d.parent.parent.name, d.parent.name, d.name)) for d in _run_dirs(root, 3)]
        return cls(root, sorted(found, key=lambda r: (r.run_id, r.host, r.experiment)))

    def __len__(self) -> int:
        return len(self._runs)

    def __getitem__(self, key):
        if isinstance(key, str):
            for r in self._runs:
                if r.name == key:
                    return r
            raise KeyError(f"no run {key!r} under {self.root}; runs: {', '.join(r.name for r in self._runs)}")
        if isinstance(key, slice):
            return Runs(self.root, self._runs[key])
        return self._runs[key]

    def __repr__(self) -> str:
        return f"<ringlab runs under {self.root}: {len(self)} runs of {len(self.experiments)} experiments>"

    @property
    def experiments(self) -> list[str]:
        return sorted({r.experiment for r in self._runs})

    def latest(self, experiment: str | None = None):
        """The latest complete run of ``experiment`` (None when it has none), or with no
        argument the latest complete run of every experiment (a Runs)."""
        if experiment is None:
            picks = [self.latest(x) for x in self.experiments]
            return Runs(self.root, [r for r in picks if r is not None])
        done = [r for r in self._runs if r.experiment == experiment and r.status == "complete"]
        return _newest(done)

    def trials(self, warmup: bool = False, failed: bool = False) -> pd.DataFrame:
        """One tidy frame: KEY_COLUMNS, then every raw.csv column (see the module docstring)."""
        frames = []
        for r in self._runs:
            try:
                df = r.trials(warmup=warmup, failed=failed)
            except DataError as err:
                self.skipped[r.name] = str(err)
                continue
            fill = {"run_id": r.env.get("run_id") or r.run_id, "experiment": r.env.get("experiment") or r.experiment,
                    "host": r.host}
            for c in ("host", "experiment", "run_id"):
                if c not in df.columns:
                    df.insert(0, c, fill[c])
            lead = {"run": r.name, "results_experiment": r.experiment, "profile": r.profile,
                    "run_status": r.status}
            for c in ("run_status", "profile", "results_experiment", "run"):
                df.insert(0, c, lead[c])
            frames.append(df[KEY_COLUMNS + [c for c in df.columns if c not in KEY_COLUMNS]])
        if not frames:
            return pd.DataFrame(columns=KEY_COLUMNS)
        return pd.concat(frames, ignore_index=True, sort=False)

    @property
    def raw(self) -> pd.DataFrame:
        return self.trials()

    def table(self) -> pd.DataFrame:
        """One line per run: run, experiment, host, profile, status, variants, measured and
        excluded (warm-up or not ok) trials, machine, git commit."""
        rows = []
        for r in self._runs:
            try:
                raw, n, vs = r.raw_all, len(r.trials()), ", ".join(r.variants)
            except DataError as err:
                self.skipped[r.name] = str(err)
                raw, n, vs = pd.DataFrame(), 0, f"unreadable raw.csv: {err}"
            host = r.env.environment.get("host") or {}
            git = r.env.get("git") or {}
            rows.append({"run": r.name, "experiment": r.experiment, "host": r.host, "profile": r.profile,
                         "status": r.status, "variants": vs, "measured": n, "excluded": len(raw) - n,
                         "machine": host.get("machine", "?") if isinstance(host, dict) else "?",
                         "git": str(git.get("commit") or "?")[:10] + (" (dirty)" if git.get("dirty") else "")})
        cols = ["run", "experiment", "host", "profile", "status", "variants", "measured", "excluded", "machine", "git"]
        return pd.DataFrame(rows, columns=cols)

    def describe(self) -> str:
        """One sentence: how many runs of which experiments, or that there are none yet."""
        if not self._runs:
            return (f"No runs under {self.root} yet: `make reproduce` (or `ringlab reproduce`) writes them, "
                    "or point `open()` at a folder of runs.")
        done = sum(r.status == "complete" for r in self._runs)
        return (f"{len(self)} runs under {self.root} ({done} complete) of {len(self.experiments)} experiments: "
                + ", ".join(self.experiments) + ".")

    def _repr_html_(self) -> str:
        if not self._runs:
            return f"<p>{html.escape(self.describe())}</p>"
        return f"<p>{html.escape(self.describe())}</p>" + self.table().to_html(index=False, border=0)


# -- finding runs --------------------------------------------------------------------------------
def _run_dirs(root: Path, depth: int) -> list[Path]:
    """Run folders (holding raw.csv) ``depth`` levels under ``root``, no hidden folder on the way."""
    if not root.is_dir():
        return []
    pattern = "/".join(["*"] * depth + ["raw.csv"])
    return sorted(p.parent for p in root.glob(pattern)
                  if p.is_file() and not any(s.startswith(".") for s in p.relative_to(root).parts))


def _newest(runs: Sequence[Run]) -> Run | None:
    return max(runs, key=lambda r: (r.run_id, r.host), default=None)


def _resolve(path) -> Path:
    if path is None or (isinstance(path, str) and not path.strip()):
        return paths.results_dir()
    p = Path(path).expanduser()
    if not p.is_absolute() and not p.exists() and (paths.ROOT / p).exists():
        p = paths.ROOT / p
    if p.is_file() and p.name in ("raw.csv", "env.json"):
        p = p.parent
    return p


def _classify(p: Path) -> str:
    """"run", "experiment" or "root"; a ringlab error naming ``p`` and what is allowed otherwise."""
    if (p / "raw.csv").is_file():
        return "run"
    if p.is_dir() and _run_dirs(p, 2):
        return "experiment"
    if p.is_dir() and _run_dirs(p, 3):
        return "root"
    configured = p.absolute() == paths.results_dir().absolute()
    if configured or (p.is_dir() and not any(p.iterdir())):
        return "root"   # the results folder, or an empty one: no runs yet
    if not p.exists():
        raise _user_error(ParamError, f"parameter 'path': {p} does not exist; allowed: {ALLOWED}")
    if (p / "env.json").is_file():
        try:
            kind = RunFolder(p).read_env().kind
        except DataError:
            kind = "run"
        raise _user_error(DataError, f"{p}: env.json but no raw.csv (a '{kind}' folder holds no trials to "
                                     f"open); allowed: {ALLOWED}")
    raise _user_error(ParamError, f"parameter 'path': {p} holds no run folder (raw.csv at <host>/<run-id>/ or "
                                  f"<experiment>/<host>/<run-id>/ under it); allowed: {ALLOWED}")


def open(path=None):  # noqa: A001 (ringlab.open is the public name)
    """A :class:`Run` (run folder, or an experiment folder's latest complete run) or a
    :class:`Runs` (a results folder); ``path`` default: the results folder
    (``$RINGLAB_RESULTS``, else the repository's results/).  See the module docstring."""
    p = _resolve(path)
    kind = _classify(p)
    if kind == "run":
        return Run(p)
    if kind == "root":
        return Runs.under(p)
    runs = [Run(d, (p.name, d.parent.name, d.name)) for d in _run_dirs(p, 2)]
    pick = _newest([r for r in runs if r.status == "complete"])
    if pick is None:
        states = ", ".join(f"{r.host}/{r.run_id}: {r.status}" for r in runs)
        raise _user_error(DataError, f"{p}: no complete run to open ({states}); open one of them by its folder")
    return pick


def open_all(path=None, warmup: bool = False, failed: bool = False) -> pd.DataFrame:
    """One tidy frame of the trials of every run under ``path`` (a results folder, an
    experiment folder: all its runs, or one run folder): ``KEY_COLUMNS`` then every raw.csv
    column; warm-ups and trials that are not ok only when asked."""
    p = _resolve(path)
    kind = _classify(p)
    if kind == "run":
        runs = Runs(p.parent, [Run(p)])
    elif kind == "experiment":
        runs = Runs(p, [Run(d, (p.name, d.parent.name, d.name)) for d in _run_dirs(p, 2)])
    else:
        runs = Runs.under(p)
    return runs.trials(warmup=warmup, failed=failed)


# -- the explore notebook's own run folder ------------------------------------------------------
def record(run_dir, opened: Iterable[Run], parameters: dict, tables: dict[str, pd.DataFrame] | None = None,
           figures: Iterable[Path] = (), note: str = "") -> list[Path]:
    """Write an analysis notebook's run folder: summary.md (the runs it opened, its tables and
    figures, or ``note``) and env.json (``kind`` "explore", ``inputs``, ``parameters``, machine
    and git commit) through :class:`RunFolder`; returns the paths written."""
    from ringlab import fmt, provenance
    from ringlab.system import envinfo
    run_dir = Path(run_dir)
    opened = list(opened)
    md = ["# Explore", ""]
    md += ([f"Opened {len(opened)} runs:", ""] + [f"- `{r.name}` ({r.profile}, {r.status})" for r in opened]
           if opened else ["No run was opened."]) + [""]
    if note:
        md += [note, ""]
    for title, t in (tables or {}).items():
        md += [f"## {title}", "", fmt.df_to_markdown(t) if len(t) else "(empty)", ""]
    for f in figures:
        f = Path(f)
        rel = f.relative_to(run_dir) if f.is_relative_to(run_dir) else f
        md += [f"![{f.stem}]({rel})", ""]
    with RunFolder(run_dir, mode="write", kind="explore") as folder:
        (run_dir / "summary.md").write_text("\n".join(md), encoding="utf-8")
        folder.write_env(environment=envinfo.collect(probe_counters=False), git=provenance.git_info(),
                         inputs=[r.name for r in opened], parameters=dict(parameters))
        folder.finish("complete")
    return [run_dir / "summary.md", run_dir / "env.json"]


__all__ = ["ALLOWED", "KEY_COLUMNS", "FigureFile", "Run", "Runs", "open", "open_all", "record"]
