"""Every run under a results folder (:class:`Runs`) and how run folders are found."""
from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from ringlab import paths
from ringlab.errors import DataError
from ringlab.studies.explore.opened_run import OpenedRun

#: the leading columns of open_all()'s frame, before raw.csv's own
KEY_COLUMNS = ["run", "results_experiment", "run_id", "experiment", "host", "profile", "run_status"]


class Runs(Sequence):
    """Every run under a results folder: a sequence of :class:`OpenedRun` (oldest first).

    ``runs[i]`` or ``runs["experiment/host/run-id"]``; ``experiments``; ``latest(experiment)``
    (its latest complete run, or None) and ``latest()`` (the latest complete run of each
    experiment, a Runs); ``raw`` / ``trials()`` (one tidy frame, as :func:`open_all`);
    ``table()`` (one line per run); ``skipped`` ({run: reason} for unreadable raw.csv files).
    """

    def __init__(self, root, runs: Iterable[OpenedRun], left_out: dict[str, str] | None = None):
        self.root = Path(root)
        self._runs = list(runs)
        self.skipped: dict[str, str] = {}
        #: {run: reason} of the runs that measured nothing here (status ``skipped``): not opened
        self.left_out: dict[str, str] = dict(left_out or {})

    @classmethod
    def under(cls, root) -> "Runs":
        """Every run folder three levels under ``root``, less those whose status is ``skipped``
        (a run that could not measure here holds no trial to compare; ``left_out`` names them)."""
        root = Path(root)
        return cls.measured(root, [OpenedRun(d, (d.parent.parent.name, d.parent.name, d.name))
                                   for d in run_dirs(root, 3)])

    @classmethod
    def measured(cls, root, found: Iterable[OpenedRun]) -> "Runs":
        """The runs of ``found`` that measured (oldest first); the skipped ones in ``left_out``."""
        found = list(found)
        left_out = {r.name: r.env.skipped_reason or r.status_line or "skipped" for r in found if r.status == "skipped"}
        kept = [r for r in found if r.name not in left_out]
        return cls(root, sorted(kept, key=lambda r: (r.run_id, r.host, r.experiment)), left_out)

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
        return newest(done)

    def trials(self, warmup: bool = False, failed: bool = False) -> pd.DataFrame:
        """One tidy frame: KEY_COLUMNS, then every raw.csv column (see :mod:`ringlab.explore`)."""
        frames = []
        for r in self._runs:
            try:
                df = r.trials(warmup=warmup, failed=failed)
            except DataError as err:
                self.skipped[r.name] = str(err)
                continue
            fill = {"run_id": r.env.run_id or r.run_id, "experiment": r.env.experiment or r.experiment,
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
            host, git = r.env.machine, r.env.git
            rows.append({"run": r.name, "experiment": r.experiment, "host": r.host, "profile": r.profile,
                         "status": r.status, "variants": vs, "measured": n, "excluded": len(raw) - n,
                         "machine": host.get("machine", "?"),
                         "git": str(git.commit or "?")[:10] + (" (dirty)" if git.dirty else "")})
        cols = ["run", "experiment", "host", "profile", "status", "variants", "measured", "excluded", "machine", "git"]
        return pd.DataFrame(rows, columns=cols)

    def shown_root(self) -> str:
        """The results folder as a report names it: relative to the repository when it lies in it
        (``results/``), so that a committed summary names no folder of this machine."""
        root = self.root.resolve()
        try:
            return str(root.relative_to(paths.ROOT)) + "/"
        except ValueError:
            return str(self.root)

    def describe(self) -> str:
        """One sentence: how many runs of which experiments, or that there are none yet."""
        left = ""
        if self.left_out:
            left = (f" Left out {len(self.left_out)} run(s) that measured nothing here (skipped): "
                    + "; ".join(f"`{name}` ({why})" for name, why in sorted(self.left_out.items())) + ".")
        if not self._runs:
            return (f"No runs under {self.shown_root()} yet: `make reproduce` (or `ringlab reproduce`) writes them, "
                    "or point `open()` at a folder of runs." + left)
        done = sum(r.status == "complete" for r in self._runs)
        return (f"{len(self)} runs under {self.shown_root()} ({done} complete) of {len(self.experiments)} experiments: "
                + ", ".join(self.experiments) + "." + left)

    def _repr_html_(self) -> str:
        if not self._runs:
            return f"<p>{html.escape(self.describe())}</p>"
        return f"<p>{html.escape(self.describe())}</p>" + self.table().to_html(index=False, border=0)


def run_dirs(root: Path, depth: int) -> list[Path]:
    """Run folders (holding raw.csv) ``depth`` levels under ``root``, no hidden folder on the way."""
    if not root.is_dir():
        return []
    pattern = "/".join(["*"] * depth + ["raw.csv"])
    return sorted(p.parent for p in root.glob(pattern)
                  if p.is_file() and not any(s.startswith(".") for s in p.relative_to(root).parts))


def newest(runs: Sequence[OpenedRun]) -> OpenedRun | None:
    return max(runs, key=lambda r: (r.run_id, r.host), default=None)


__all__ = ["KEY_COLUMNS", "Runs"]
