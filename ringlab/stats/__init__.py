"""Statistics of raw.csv frames.  Returns plain pandas frames / dataclasses; never prints and
opens no file.

* ``summarize``  per-group descriptive statistics, bootstrap CIs, outliers, variance components
* ``compare``    A/B verdicts, the typed pipeline Rounds -> Estimate -> decide -> Plan -> Comparison
                 (``ringlab.stats.compare`` describes it)
* ``target_met``     whether every judged row's printed CI reached the target (``ringlab.stats.sequential``)
* ``diagnose``   modality, outliers and the recorded column that explains them
* ``diagnose_ab`` "same instructions, different time"
"""
from ringlab.catalog import Verdict
from ringlab.stats.compare import compare, compare_arrays
from ringlab.stats.contract import JSON_FIELDS, VERDICTS, Comparison, check_rule, to_records
from ringlab.stats.decide import Decision, decide, holm
from ringlab.stats.diagnose import diagnose, diagnose_ab, find_cause
from ringlab.stats.estimate import Estimate
from ringlab.stats.outliers import modality, tukey_flags
from ringlab.stats.plan import Plan
from ringlab.stats.rounds import Rounds
from ringlab.stats.sequential import target_met
from ringlab.stats.summary import StatsError, format_value, measurements, summarize

__all__ = ["Comparison", "Decision", "Estimate", "JSON_FIELDS", "Plan", "Rounds", "StatsError", "VERDICTS",
           "Verdict", "check_rule", "compare", "compare_arrays", "decide", "diagnose", "diagnose_ab", "find_cause",
           "format_value", "holm", "measurements", "modality", "summarize",
           "target_met", "to_records", "tukey_flags"]
