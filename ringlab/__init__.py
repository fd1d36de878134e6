"""ringlab: a reproducibility kit for ring-buffer microbenchmarks.

The folders are the data flow, each layer importing only the layers below it
(docs/architecture.md, the contract in pyproject.toml):

    sources/ (what is measured)  ->  build/  ->  experiments/ + tools/ (trials)  ->  run/
    ->  rundir/ (the run folder)  ->  stats/  ->  report/  ->  studies/ (across runs)
    ->  lab/ (notebooks, reproduce, the command line)

system/ is the machine; errors, paths, schema, fmt and digest are the base.
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
