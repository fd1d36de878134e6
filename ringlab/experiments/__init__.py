"""Experiments: what to run (parameters, trial plans, argv, parsing). See base.py."""
from ringlab.errors import ParamError
from ringlab.experiments.base import Experiment, TrialSpec, get, names
from ringlab.experiments.params import COMMON_PARAMS, Param

__all__ = ["COMMON_PARAMS", "Experiment", "Param", "ParamError", "TrialSpec", "get", "names"]
