"""Run ringlab on many machines through Slurm: one exclusive job per node, merged by host.

``submit`` sends one job per node (``--exclusive``, ``--nodelist``, ``-N 1``, ``--time``), all from
one commit of the shared checkout, each writing results/<experiment>/<host>/<run-id>/;
``status`` reads Slurm's accounting (or its job completion log, or squeue); ``collect`` says which
hosts delivered complete runs and rebuilds the results index; ``resume`` re-queues only what is
missing.  The record of a fleet is results/fleet/<fleet-id>/fleet.json.  See docs/fleet.md.
"""
from __future__ import annotations

from ringlab.lab.fleet.collect import NodeVerdict, collect, status, verdicts
from ringlab.lab.fleet.record import load
from ringlab.lab.fleet.submit import choose_nodes, resume, submit

__all__ = ["NodeVerdict", "choose_nodes", "collect", "load", "resume", "status", "submit", "verdicts"]
