"""ringlab's own benchmarks: `ringlab bench NAME [options]`.

Each benchmark is a script under benchmarks/ that also runs on its own
(``python benchmarks/<file>.py``) and provides ``add_arguments(parser)`` and
``run(args) -> int``.  Add one by adding a line to BENCHMARKS.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys

from ringlab import paths

#: name -> (script under benchmarks/, one-line help)
BENCHMARKS = {
    "fidelity": ("harness_fidelity.py",
                 "ours vs the real kernel ptr_ring.h, and prebatch vs batch, interleaved"),
    "overhead": ("runner_overhead.py",
                 "per-trial fixed overhead of the runner, and the cost of in-region counters"),
    "stats": ("stats_speed.py", "summaries and comparisons of 10^5 raw rows (target <= 5 s)"),
    "power": ("stats_power.py", "A/A false positives, power and CI width on the committed runs' rounds"),
    "decide": ("decide.py", "machine time to a decisive verdict: planned designs vs profile full"),
    "layouts": ("common_layouts.py", "spread of per-pair log ratios with independent vs common random "
                                     "layouts, batch vs reorder, interleaved in one run"),
    "size": ("compare_size.py", "peak memory and time of `ringlab compare` on a 10^6-row raw.csv "
                                "(targets 4 GiB, 60 s)"),
}


def _load(name: str):
    script, _ = BENCHMARKS[name]
    path = paths.ROOT / "benchmarks" / script
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(f"ringlab_bench_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="benchmark", metavar="NAME")
    sub.required = True
    for name, (script, help_) in BENCHMARKS.items():
        mod = _load(name)
        if mod is None:
            continue
        sp = sub.add_parser(name, help=help_, description=(mod.__doc__ or help_).strip().splitlines()[0])
        mod.add_arguments(sp)
        sp.set_defaults(_bench_run=mod.run)


def run(args) -> int:
    fn = getattr(args, "_bench_run", None)
    if fn is None:  # pragma: no cover - argparse requires NAME
        print(f"ringlab bench: unknown benchmark; allowed: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    return int(fn(args) or 0)
