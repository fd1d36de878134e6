"""ringlab's own benchmarks: `ringlab bench NAME [options]`.

Each benchmark is a script under benchmarks/ that also runs on its own
(``python benchmarks/<file>.py``) and provides ``command``, a click command of class
``options.Command`` whose callback returns the exit code.  ``ringlab bench NAME`` is that command
(``ringlab bench NAME --help`` is its help).  Add one by adding a line to BENCHMARKS.
"""
from __future__ import annotations

import importlib.util

import click

from ringlab import paths
from ringlab.lab.commands import options

#: name -> (script under benchmarks/, one-line help)
BENCHMARKS = {
    "fidelity": ("harness_fidelity.py",
                 "ours vs the real kernel ptr_ring.h, and prebatch vs batch, interleaved"),
    "overhead": ("runner_overhead.py",
                 "per-trial fixed overhead of the runner, and the cost of in-region counters"),
    "stats": ("stats_speed.py", "summaries and comparisons of 10^5 raw rows (target <= 5 s)"),
    "power": ("stats_power.py", "A/A false positives, power and CI width on the committed runs' rounds"),
    "decide": ("decide.py", "machine time to a decisive verdict: the staged run vs a fixed design of its time"),
    "stopping": ("stopping_aa.py", "A/A rate and power of the staged design, simulated through the run's own "
                                   "stopping code (>= 2000 runs)"),
    "repro": ("repro.py", "the same A/B run several times: how often each run's CI and next-run interval "
                          "held the next run's estimate"),
    "layouts": ("common_layouts.py", "spread of per-pair log ratios with independent vs common random "
                                     "layouts, batch vs reorder, interleaved in one run"),
    "turns": ("turns.py", "spread of per-round log ratios with the arms in separate processes vs taking "
                          "turns loop by loop, batch vs reorder, interleaved in one run"),
    "builds": ("layout_builds.py", "cost of a layout design's builds: separate binaries, layout copies, a "
                                   "cache hit, builds beside measuring"),
    "size": ("compare_size.py", "peak memory and time of compare, summarize and mail on a long run's 10^6-row "
                                "raw.csv, one configuration (limits 2 GB, 60 s each)"),
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


def _group() -> click.Group:
    group = options.Group("bench", subcommand_metavar="NAME [ARGS]...")
    for name, (_, help_) in BENCHMARKS.items():
        mod = _load(name)
        if mod is not None:
            mod.command.short_help = help_
            group.add_command(mod.command, name)
    return group


command = _group()
