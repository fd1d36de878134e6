"""A comparison's earlier runs on its host: what its next-run interval's between-run variance rests on.

The earlier runs of a run folder are the run folders beside it (the same parent: the sibling
``session-N`` folders of a ``ringlab sessions`` series, or runs written next to each other) of
the same experiment on the same host with the same parameters except ``IGNORED_PARAMETERS``,
that completed and started before it (a ``session-M`` folder with M below this one's N when a
start time is missing).  Only earlier runs: a run's interval does not change when a later run is
added beside it.

``earlier_effects`` compares each earlier run as the report compares this one and gives, per
comparison (baseline, candidate and configuration), its estimates and standard errors on the log
scale in run order.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

from ringlab.rundir.reader import RunOutput

#: parameters that differ between runs of one command without making it another comparison
IGNORED_PARAMETERS = ("seed", "out")
#: configuration columns that name the CPUs a run was given, not what it measured: a comparison
#: is the same across hosts whose CPU numbers differ
CPU_COLUMNS = ("cpu_req_producer", "cpu_req_consumer", "cpu_producer", "cpu_consumer", "cpus")
_SESSION = re.compile(r"session-(\d+)$")


def _session_no(p: Path) -> int | None:
    m = _SESSION.match(p.name)
    return int(m.group(1)) if m else None


def _same_command(a, b) -> bool:
    pa = {k: v for k, v in a.parameters.items() if k not in IGNORED_PARAMETERS}
    pb = {k: v for k, v in b.parameters.items() if k not in IGNORED_PARAMETERS}
    return a.experiment == b.experiment and a.host == b.host and bool(a.host) and pa == pb


def _before(this_dir: Path, this_env, d: Path, env) -> bool:
    t0, t1 = this_env.started_utc, env.started_utc
    if t0 and t1:
        return str(t1) < str(t0)
    n0, n1 = _session_no(this_dir), _session_no(d)
    return n0 is not None and n1 is not None and n1 < n0


def earlier_runs(run_dir) -> list[Path]:
    """The completed run folders of the same command on the same host beside ``run_dir`` that
    started before it, oldest first ([] when env.json cannot be read)."""
    here = Path(run_dir)
    env = RunOutput(here).env_doc
    if not env.experiment:
        return []
    found = []
    try:
        siblings = sorted(p for p in here.parent.iterdir() if p.is_dir() and p.resolve() != here.resolve())
    except OSError:
        return []
    for d in siblings:
        if not (d / "env.json").is_file():
            continue
        e = RunOutput(d).env_doc
        if e.status != "complete" or not _same_command(env, e) or not _before(here, env, d, e):
            continue
        found.append((str(e.started_utc or ""), _session_no(d) or 0, d))
    return [d for *_, d in sorted(found)]


def config_columns(cmp) -> list[str]:
    """The configuration columns of a compare() frame a comparison is keyed by across runs."""
    return [c for c in (cmp.attrs.get("group_columns") or []) if c in cmp.columns and c != "variant"
            and c not in CPU_COLUMNS]


def comparison_key(r, cols) -> tuple:
    """(baseline, candidate, (column, value) ...) of a compare() row."""
    return (str(r.get("baseline")), str(r.get("candidate")), tuple((c, str(r.get(c))) for c in cols))


def earlier_effects(run_dirs, baseline: str, metric: str = "ns_per_op", by=None) -> dict[tuple, list]:
    """{``comparison_key``: [(log effect, standard error), ...] in run order} of the runs in
    ``run_dirs`` compared against ``baseline`` on ``metric`` (``by``: compare()'s grouping).
    A run that cannot be compared, and a row without a CI, is left out."""
    from ringlab.stats.compare import compare
    from ringlab.stats.replication import log_ratio, row_se
    out: dict[tuple, list] = {}
    for d in run_dirs:
        try:
            cmp = compare(RunOutput(d).raw, baseline, metric, by=by)
        except Exception:   # noqa: BLE001 - not a comparison with this baseline: no earlier effect
            continue
        cols = config_columns(cmp)
        for _, r in cmp.iterrows():
            e, s = log_ratio(r.get("delta_pct")), row_se(r)
            if str(r.get("design")) == "exact" or not (math.isfinite(e) and math.isfinite(s) and s > 0):
                continue
            out.setdefault(comparison_key(r, cols), []).append((e, s))
    return out
