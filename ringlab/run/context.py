"""The run as an experiment sees it (``ctx`` in ``Experiment.plan/command/parse``).

One ``RunContext`` per run carries everything a trial needs: the resolved parameter
``values``, the run id and folder, the host, the CPU topology, the core-to-core
latencies measured at the start, and the warnings collected on the way.  Nothing
else travels next to it.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

from ringlab import paths
from ringlab.errors import ParamError
from ringlab.tools.argv import command_shape
from ringlab.system import topology as _topology


class RunContext:
    """``ctx.values``, ``ctx.binary(name)``, ``ctx.select_pairs(spec)``, ``ctx.pick_single_cpu()``,
    ``ctx.pair_class(a, b)``, ``ctx.warn(msg)``, ``ctx.out_dir``, ``ctx.run_id``, ``ctx.host``."""

    def __init__(self, experiment: str, values: dict[str, Any], run_id: str, out_dir: Path,
                 log: Callable[[str], None], host: str = ""):
        self.experiment, self.values, self.run_id, self.out_dir = experiment, values, run_id, out_dir
        self.host = host
        self.warnings: list[str] = []
        #: one-way core-to-core latency per "a:b" pair (ringlab.latency), NaN when not measured
        self.c2c: dict[str, float] = {}
        #: env.json "measured_commands": {variant: [{"row": configuration, "shape": argv shape}]}
        self.measured_commands: dict[str, list[dict[str, Any]]] = {}
        self.commands_changed = False
        #: the run's trial launcher (ringlab.run.launcher), None: the runner spawns each trial
        self.launcher = None
        self._log = log
        self._topo = None
        self._topo_error: str | None = None

    @property
    def timeout(self) -> float:
        return float(self.values["timeout"])

    def log(self, msg: str) -> None:
        self._log(msg)

    # binaries
    def binary(self, name: str) -> Path:
        """Path of build/bin/NAME (RINGLAB_BUILD moves build/)."""
        return paths.bin_dir() / name

    # topology (ringlab.system.topology)
    @property
    def topology(self):
        if self._topo is None and self._topo_error is None:
            try:
                self._topo = _topology.Topology.read()
            except (OSError, ValueError, KeyError) as e:
                self._topo_error = f"{type(e).__name__}: {e}"
        return self._topo

    def _need_topo(self, what: str):
        topo = self.topology
        if topo is None:
            raise ParamError(f"parameter 'cpus': cannot place threads ({what}) because the CPU topology "
                             f"could not be read ({self._topo_error}); allowed: none")
        return topo

    def select_pairs(self, spec: str, need_two: bool = True) -> list[tuple[int, int, str]]:
        if str(spec).strip().lower() == "none":
            return [(-1, -1, "unpinned")]
        return _topology.select_pairs(self._need_topo(spec), spec, need_two=need_two)

    def pick_single_cpu(self) -> int:
        return _topology.pick_single_cpu(self._need_topo("single CPU"))

    def pair_class(self, a: int, b: int) -> str:
        if a is None or b is None or a < 0 or b < 0:
            return "unpinned"
        if a == b:
            return "same-cpu"
        topo = self.topology
        if topo is None:
            return ""
        try:
            return topo.pair_class(a, b)
        except (KeyError, ValueError):
            return ""

    def c2c_of(self, p: int, c: int) -> float:
        return self.c2c.get(f"{p}:{c}", math.nan)

    def record_command(self, spec, argv: list[str], measured_binary: str) -> None:
        """Keep the argv shape (``ringlab.tools.argv.command_shape``) of each variant and configuration once."""
        row = {k: v for k, v in spec.config.items() if k != "variant"}
        row.update(cpu_req_producer=spec.cpus[0], pair_class=spec.pair_class)
        items = self.measured_commands.setdefault(str(spec.config.get("variant")), [])
        if any(it.get("row") == row for it in items):
            return
        items.append({"row": row, "shape": command_shape(argv, str(measured_binary))})
        self.commands_changed = True

    def warn(self, msg: str) -> None:
        if msg not in self.warnings:
            self.warnings.append(msg)
            self._log(f"warning: {msg}")
