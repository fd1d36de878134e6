"""Order, rounds and seeds: the sequence in which a run's trials execute.

Rounds are blocks.  Round r holds trial r of every configuration.  Inside a round,
all arms (variants) of one configuration run back to back, in a fresh random order
(AB, BA, ...), and the configurations' blocks are shuffled within the round.  So

* every configuration's warm-ups (trials 0..warmup-1) come before its measured trials;
* a slow drift of the machine (thermal, a neighbour starting, a VM's fast/slow state)
  hits the arms of a configuration alike, in the same round and minutes apart at most,
  and the statistics can pair the arms within a round (``raw.csv`` column ``round``);
* no arm always goes first: the order within each block is drawn anew every round.

The order depends only on the plan and ``seed`` (``random.Random(seed)``), so
``--resume`` reproduces it.  Callgrind (icount) trials are never timed; they run after
all the timing trials, in plan order.
"""
from __future__ import annotations

import random

from ringlab.experiments.base import TrialSpec

#: the text env.json's "plan" records about the order
ORDER_DESCRIPTION = ("rounds are blocks: round r holds trial r of every configuration; in each round the "
                     "arms (variants) of one configuration run back to back in a seeded random order, "
                     "and the configurations' blocks are shuffled")


def configuration_key(spec: TrialSpec) -> tuple:
    """What the arms of one block share: every parameter but ``variant``, and the CPUs."""
    return tuple(sorted((k, str(v)) for k, v in spec.config.items() if k != "variant")) + (("cpus", spec.cpus),)


def order_plan(specs: list[TrialSpec], seed: int) -> list[TrialSpec]:
    """Seeded block order, in rounds (see the module docstring)."""
    rng = random.Random(seed)
    rounds: dict[int, dict[tuple, list[TrialSpec]]] = {}
    for s in specs:
        rounds.setdefault(s.trial, {}).setdefault(configuration_key(s), []).append(s)
    out: list[TrialSpec] = []
    for r in sorted(rounds):
        blocks = list(rounds[r].values())
        for arms in blocks:
            rng.shuffle(arms)
        rng.shuffle(blocks)
        for arms in blocks:
            out.extend(arms)
    return out


def full_plan(exp, values: dict, specs: list[TrialSpec], ctx) -> list[TrialSpec]:
    """Timing trials in block order, then the icount trials (``icount=true``)."""
    plan = order_plan(list(specs), values["seed"])
    if values.get("icount"):
        icount_plan = exp.icount_specs(values, specs)
        if not icount_plan:
            ctx.warn(f"icount: no single-threaded trials in this {exp.name} plan; nothing to count")
        plan += icount_plan
    return plan
