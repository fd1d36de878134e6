"""ringlab: a reproducibility kit for ring-buffer microbenchmarks.

Data flow, one module per concern:

    parameters (experiments/)  ->  build (build.py, native.py)  ->  trials (runner.py, system/)
    ->  raw data (raw.csv, schema.py)  ->  statistics (stats/)  ->  tables and figures (report/)
    ->  results/ (reproduce.py, notebooks/)

The command line (cli.py, commands/) only parses arguments and calls these.
"""
__version__ = "0.1.0"
