"""Experiments: what to run (parameters, trial plans, argv, parsing). See base.py."""
from ringlab.experiments import base as _base
from ringlab.errors import ParamError
from ringlab.experiments.base import Experiment, TrialSpec, get, names
from ringlab.experiments.params import COMMON_PARAMS, Param

# The kernel's own tests (tools/virtio/ringtest, in-kernel test modules).
_base.REGISTRY.setdefault("ringtest", "ringlab.experiments.ringtest:Ringtest")
_base.REGISTRY.setdefault("kmod", "ringlab.experiments.kmod:Kmod")

__all__ = ["COMMON_PARAMS", "Experiment", "Param", "ParamError", "TrialSpec", "get", "names"]
