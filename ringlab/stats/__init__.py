"""Statistics of raw.csv frames.  Returns plain pandas frames / dicts; never prints.

* ``summarize``  per-group descriptive statistics, bootstrap CIs, outliers, variance components
* ``compare``    A/B verdicts (Mann-Whitney + Holm, bootstrap CI of the ratio of medians)
* ``diagnose``   modality, outliers and the recorded column that explains them
* ``diagnose_ab`` "same instructions, different time"
"""
from ringlab.stats.compare import JSON_FIELDS, compare, compare_arrays, holm, to_records, verdict_one
from ringlab.stats.diagnose import diagnose, diagnose_ab, find_cause
from ringlab.stats.outliers import modality, tukey_flags
from ringlab.stats.power import recommended_trials, trials_needed
from ringlab.stats.summary import StatsError, format_value, measurements, summarize

__all__ = ["JSON_FIELDS", "StatsError", "compare", "compare_arrays", "diagnose", "diagnose_ab",
           "find_cause", "format_value", "holm", "measurements", "modality", "recommended_trials",
           "summarize", "to_records", "trials_needed", "tukey_flags", "verdict_one"]
