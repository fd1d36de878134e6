"""What ringlab knows, declared once: its experiments, ring variants, verdict words and stop reasons.

The catalog is part of the base layer: it imports nothing of ringlab but ``ringlab.errors``, and every
other layer derives its tables from it instead of keeping copies.  Each module holds one kind of entry:

- ``verdicts``: the verdict words, one enum whose members say whether they are a call and whether
  they are settled;
- ``stops``: why a staged run stopped;
- ``variants``: the built-in ring variants (header, batch support, cache-line layout);
- ``experiments``: the experiments (raw.csv columns, parameter bounds, binaries, notebook).
- ``words``: what the word enums and the name lookups share (``Word``, ``by_name``).

This file only re-exports.
"""
from ringlab.catalog.experiments import (EXPERIMENT_NAMES, EXPERIMENTS, NOTEBOOKS, RING_EXPERIMENT, SEED000,
                                         SEED003, STUDIES, Bound, Experiment, Notebook, PublishedCounts, Study,
                                         all_extra_columns, experiment, notebook)
from ringlab.catalog.variants import (DEFAULT_VARIANT, LAYOUTS, VARIANT_NAMES, VARIANTS, RingLayout, RingVariant,
                                      layout, variant)
from ringlab.catalog.stops import STOP_MODES, StopReason
from ringlab.catalog.verdicts import CALLS, NOT_CALLED, UNSETTLED, Verdict, is_call
