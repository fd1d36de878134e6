"""ringlab's own benchmarks: `ringlab bench NAME [options]`.

Each benchmark is a script under benchmarks/ that also runs on its own
(``python benchmarks/<file>.py``) and provides ``add_arguments(parser)`` (an argparse parser, the
script's own) and ``run(args) -> int``.  ``ringlab bench NAME ARGS`` hands ARGS to that parser
(``ringlab bench NAME --help`` is its help).  Add one by adding a line to BENCHMARKS.
"""
from __future__ import annotations

import argparse
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


def _bench_command(name: str, help_: str, mod) -> click.Command:
    """``ringlab bench NAME``: the words after NAME go to the benchmark script's own parser."""
    description = (mod.__doc__ or help_).strip().splitlines()[0]

    @click.command(name, cls=options.Command, help=description, short_help=help_, add_help_option=False,
                   context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
    @click.argument("words", nargs=-1, type=click.UNPROCESSED)
    def bench(words) -> int:
        return run(options.Args({"benchmark": name, "words": words, "module": mod}))
    return bench


def _group() -> click.Group:
    group = options.Group("bench", subcommand_metavar="NAME [ARGS]...")
    for name, (_, help_) in BENCHMARKS.items():
        mod = _load(name)
        if mod is not None:
            group.add_command(_bench_command(name, help_, mod))
    return group


command = _group()


def run(args) -> int:
    p = argparse.ArgumentParser(prog=f"ringlab bench {args.benchmark}",
                                description=(args.module.__doc__ or "").strip().splitlines()[0] or None)
    args.module.add_arguments(p)
    try:
        parsed = p.parse_args(args.words)
    except SystemExit as e:     # the script's parser printed its usage error or its --help
        return int(e.code or 0)
    return int(args.module.run(parsed) or 0)
