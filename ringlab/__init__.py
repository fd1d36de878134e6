"""ringlab: a reproducibility kit for ring-buffer microbenchmarks.

Data flow, one module per concern:

    parameters (experiments/)  ->  build (build.py, native.py)  ->  trials (runner.py, system/)
    ->  raw data (raw.csv, schema.py)  ->  statistics (stats/)  ->  tables and figures (report/)
    ->  results/ (reproduce.py, notebooks/)

The command line (cli.py, commands/) only parses arguments and calls these.
"""
__version__ = "0.1.0"

#: interactive analysis (ringlab/explore.py), imported on first use so that ``import ringlab``
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
