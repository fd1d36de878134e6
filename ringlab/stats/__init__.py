"""Statistics of raw.csv frames.  Returns plain pandas frames / dicts; never prints.

* ``summarize``  per-group descriptive statistics, bootstrap CIs, outliers, variance components
* ``compare``    A/B verdicts (paired by round: Hodges-Lehmann + inverted signed-rank CI, Holm per
                 candidate with matching CI levels; unpaired Mann-Whitney fallback)
* ``rounds_needed``, ``target_met``  the two-stage (Stein) stopping rule for ``-p target_ci``
* ``diagnose``   modality, outliers and the recorded column that explains them
* ``diagnose_ab`` "same instructions, different time"
"""
from ringlab.stats.compare import (JSON_FIELDS, VERDICTS, check_rule, compare, compare_arrays, holm,
                                   to_records, verdict_one)
from ringlab.stats.diagnose import diagnose, diagnose_ab, find_cause
from ringlab.stats.outliers import modality, tukey_flags
from ringlab.stats.power import recommended_trials, trials_needed
from ringlab.stats.sequential import rounds_needed, target_met
from ringlab.stats.summary import StatsError, format_value, measurements, summarize

__all__ = ["JSON_FIELDS", "StatsError", "VERDICTS", "check_rule", "compare", "compare_arrays", "diagnose", "diagnose_ab",
           "find_cause", "format_value", "holm", "measurements", "modality", "recommended_trials",
           "rounds_needed", "summarize", "target_met", "to_records", "trials_needed", "tukey_flags", "verdict_one"]
