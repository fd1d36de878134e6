"""ringlab: a reproducibility kit for ring-buffer microbenchmarks.

The layers, top to bottom: each imports only the layers below it (the ``layers`` contract in
pyproject.toml's ``[tool.importlinter]``; docs/architecture.md has who imports whom)::

    lab/  simulate/  studies/  report/  run/  experiments/  tools/  build/  sources/  system/
    rundir/  stats/  base (catalog/, digest, fmt, names, paths, schema)  errors

simulate/ is used only by the benchmarks and the tests.

The data flow is another order: what is measured (sources/) is built (build/), its trials
(experiments/, tools/) are run (run/) into a run folder (rundir/), whose rows are analysed
(stats/), reported (report/) and set beside other runs (studies/); lab/ holds the notebooks'
steps, reproduce and the command line, and system/ reads and tunes the machine.
"""
__version__ = "0.1.0"

#: interactive analysis (ringlab/studies/explore/), imported on first use so that ``import ringlab``
#: stays light: ``ringlab.open(PATH)`` opens a run folder, ``results/<experiment>`` (its latest
#: complete run) or ``results/`` (every run); ``ringlab.open_all(PATH)`` is one tidy frame.
_EXPLORE = ("open", "open_all")


def __getattr__(name: str):
    if name in _EXPLORE:
        from ringlab.studies import explore
        return getattr(explore, name)
    raise AttributeError(f"module 'ringlab' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_EXPLORE))
