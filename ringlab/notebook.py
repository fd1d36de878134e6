"""Small helpers that keep the notebooks thin: validate parameters, pick the run
folder, run, report, and display bounded outputs.

A notebook's ``parameters`` cell holds plain typed literals; the next cell calls
:func:`params`, which validates them through the experiment's own ``Param``
definitions (the same ones ``ringlab run -p`` uses) and raises ``ParamError``
naming the parameter and its allowed values.  ``""``, ``0`` for counts and
``None`` mean "the profile's default".
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ringlab.experiments.base import ParamError


def params(experiment: str, profile: str = "quick", **values: Any) -> dict:
    """Validated parameter set for ``experiment``: profile defaults < non-empty notebook values.

    ``None`` and ``""`` mean "use the profile's default" (notebooks write ``count or None``
    for counts where 0 means default)."""
    from ringlab.experiments import get
    overrides = {k: v for k, v in values.items() if v is not None and not (isinstance(v, str) and not v.strip())}
    return get(experiment).resolve(overrides, profile=profile)


def check_choice(name: str, value: Any, allowed) -> Any:
    allowed = list(allowed)
    if value not in allowed:
        raise ParamError(f"parameter '{name}': unknown value {value!r}; allowed: {', '.join(map(str, allowed))}")
    return value


def run_dir(out_dir: str, experiment_folder: str, host: str = "") -> Path:
    """The run folder: ``out_dir`` if given, else a new results/<experiment>/<host>/<run-id>/."""
    if out_dir:
        return Path(out_dir).resolve()
    from ringlab.reproduce import run_dir_for
    return run_dir_for(experiment_folder, host or None).resolve()


def markdown(text: str, max_chars: int = 20000):
    """Display markdown, truncated so the executed notebook stays small."""
    from IPython.display import Markdown, display
    if len(text) > max_chars:
        text = text[:max_chars] + "\n\n*(truncated: see the files in the run folder)*"
    display(Markdown(text))


def table(df, max_rows: int = 40, floatfmt: str = ".4g"):
    """Display a DataFrame as a markdown table (bounded, deterministic text output)."""
    if len(df) > max_rows:
        shown = df.head(max_rows)
        note = f"\n\n*({len(df) - max_rows} more rows in the CSV)*"
    else:
        shown, note = df, ""
    markdown(to_markdown(shown, floatfmt) + note)


def to_markdown(df, floatfmt: str = ".4g") -> str:
    """Markdown table without the optional `tabulate` dependency."""
    import math
    cols = [str(c) for c in df.columns]

    def fmt(v):
        if isinstance(v, float):
            return "" if math.isnan(v) else format(v, floatfmt)
        return str(v).replace("|", "\\|")
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(fmt(v) for v in row) + " |")
    return "\n".join(lines)


def figures(paths, width: int = 640):
    """Show saved PNG figures inline (the files in figures/ are the source of truth)."""
    from IPython.display import Image, display
    for p in paths:
        p = Path(p)
        if p.suffix == ".png" and p.exists():
            display(Image(filename=str(p), width=width))
