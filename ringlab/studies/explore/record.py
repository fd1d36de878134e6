"""The run folder of an analysis notebook (95-explore): summary.md and env.json."""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from ringlab import fmt, rundir
from ringlab.system import checkout, envinfo
from ringlab.studies.explore.opened_run import OpenedRun
from ringlab.rundir import RunFolder


def record(run_dir, opened: Iterable[OpenedRun], parameters: dict, tables: dict[str, pd.DataFrame] | None = None,
           figures: Iterable[Path] = (), note: str = "") -> list[Path]:
    """Write an analysis notebook's run folder: summary.md (the runs it opened, its tables and
    figures, or ``note``) and env.json (``kind`` "explore", ``inputs``, ``parameters``, machine
    and git commit) through :mod:`ringlab.rundir`; returns the paths written."""
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
        rundir.write_text(run_dir, "summary.md", "\n".join(md))
        folder.write_env(environment=envinfo.collect(probe_counters=False), git=checkout.git_info(),
                         inputs=[r.name for r in opened], parameters=dict(parameters))
        folder.finish("complete")
    return [run_dir / "summary.md", run_dir / "env.json"]


__all__ = ["record"]
