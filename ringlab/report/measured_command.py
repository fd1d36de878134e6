"""The measured command of each variant of a run: the argv shape the runner recorded
(env.json ``measured_commands``), or rebuilt with the experiment's own ``command()`` from
env.json's parameters and raw.csv's rows.  ringlab.report.provenance compares them per pair.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from ringlab.rundir import RunEnv

from ringlab import paths
from ringlab.errors import ParamError
from ringlab.experiments import base
from ringlab.system import privilege
from ringlab.tools import perfrecord
from ringlab.tools.argv import command_shape


class _Ctx:
    """What Experiment.command needs to rebuild a trial's argv from a run folder."""

    def __init__(self, values: dict[str, Any], binaries: dict[str, Any]):
        self.values, self._bins, self.warnings = values, binaries, []

    def binary(self, name: str) -> Path:
        b = self._bins.get(name)
        return Path(b["path"]) if isinstance(b, dict) and b.get("path") else paths.bin_dir() / name

    def warn(self, msg: str) -> None:
        self.warnings.append(msg)


def _typed(v: Any) -> Any:
    """A raw.csv value as the experiment's parameter: integral floats (a column with gaps) as int."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if not isinstance(v, str):
        return v
    if v in ("True", "False"):
        return v == "True"
    try:
        return int(v)
    except ValueError:
        pass
    try:
        f = float(v)
    except ValueError:
        return v
    return int(f) if f.is_integer() else f


def _int(v: Any, default: int = -1) -> int:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return default
    return default if f != f else int(f)


def _row_key(row: dict[str, Any], cols: list[str]) -> str:
    return json.dumps([[c, _typed(row.get(c))] for c in cols]
                      + [_typed(row.get("cpu_req_producer")), row.get("pair_class")], default=str)


def commands(env: RunEnv, rows: list[dict[str, str]]) -> tuple[dict[str, dict[str, list[str]]], str | None, str]:
    """{variant: {configuration key: argv shape}}, the reason when not available, and where
    the argv came from: recorded by the runner (env.json "measured_commands") or rebuilt
    with the experiment's own ``command()`` from env.json's parameters and raw.csv's rows."""
    env = RunEnv.of(env)
    try:
        exp_cls = base.get(str(env.experiment))
    except ParamError as e:   # an unknown experiment: say so, compare the rest
        return {}, f"experiment {env.experiment!r} unknown to this ringlab ({e})", ""
    cols = list(exp_cls.param_columns())
    recorded = env.measured_commands
    if isinstance(recorded, dict) and recorded:
        out: dict[str, dict[str, list[str]]] = {}
        for v, items in recorded.items():
            for it in items if isinstance(items, list) else []:
                if isinstance(it, dict) and isinstance(it.get("shape"), list):
                    out.setdefault(v, {})[_row_key(it.get("row") or {}, cols)] = it["shape"]
        return out, None, "recorded at run time"
    values = dict(env.parameters)
    if not values:
        return {}, "env.json has no parameters to rebuild the command from", ""
    exp = exp_cls()
    ctx = _Ctx(values, env.binaries_used)
    perf = None
    out = {}
    for row in rows:
        if row.get("icount_source") == "callgrind" or row.get("status") not in ("ok", None):
            continue
        key = _row_key(row, cols)
        v = row["variant"]
        if key in out.get(v, {}):
            continue
        config = {c: _typed(row[c]) for c in ["variant", *cols] if c in row}
        cpus = (_int(row.get("cpu_req_producer")), _int(row.get("cpu_req_consumer")))
        extra: dict[str, Any] = {"repeats": int(values.get("repeats", 1) or 1)}
        if "perf_cpu" in row:
            if perf is None:
                perf = perfrecord.find_perf(str(values.get("perf", "perf"))) or str(values.get("perf", "perf"))
            extra.update(perf=perf, perf_cpu=_int(row.get("perf_cpu")), workload_cpu=cpus[0])
        spec = base.TrialSpec(config=config, trial=_int(row.get("trial"), 0), warmup=False, cpus=cpus,
                              pair_class=row.get("pair_class") or "unpinned", extra=extra)
        try:
            with privilege.as_written():     # the command, not who it would run as
                argv = [str(a) for a in exp.command(spec, ctx)]
            shape = command_shape(argv, str(exp.measured_binary(spec, argv, ctx)))
        except Exception as e:
            return {}, f"cannot rebuild the measured command ({type(e).__name__}: {e})", ""
        out.setdefault(v, {})[key] = shape
    return out, None, "rebuilt from env.json parameters and raw.csv rows"


def show(shape: list[str], limit: int = 160) -> str:
    text = shlex.join(shape)
    return text if len(text) <= limit else text[:limit - 3] + "..."
