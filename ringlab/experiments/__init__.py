"""Experiments: what to run (parameters, trial plans, argv, parsing). See base.py."""
from ringlab.experiments.base import COMMON_PARAMS, Experiment, Param, ParamError, TrialSpec, get, names

__all__ = ["COMMON_PARAMS", "Experiment", "Param", "ParamError", "TrialSpec", "get", "names"]
