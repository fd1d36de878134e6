"""Order, rounds, layouts and seeds: the sequence in which a run's trials execute.

Rounds are blocks.  Round r holds trial r of every configuration.  Inside a round,
all arms (variants) of one configuration run back to back, in a fresh random order
(AB, BA, ...), and the configurations' blocks are shuffled within the round.  So

* every configuration's warm-ups (trials 0..warmup-1) come before its measured trials;
* a slow drift of the machine (thermal, a neighbour starting, a VM's fast/slow state)
  hits the arms of a configuration alike, in the same round and minutes apart at most,
  and the statistics can pair the arms within a round (``raw.csv`` column ``round``);
* no arm always goes first: the order within each block is drawn anew every round.

Code layouts (``layouts`` K > 1, ringlab.build.layouts): round r runs layout pair
k = perm_b[r % K], with b = r // K and perm_b a seeded permutation of range(K), warm-up
rounds included.  So every block of K rounds measures each layout pair once, and the pairs
are spread over the whole run.  Pair k is the baseline arm's layout k and the candidate's
layout k (drawn independently, so the two differ in layout; with ``common_layouts`` both have
the same pad and alignments).  Each trial carries its pair in
``spec.extra["layout"]`` (raw.csv column ``layout``; 0 when K is 1).

Arms that take turns (``interleave``): the arms of a block are one run of processes.  The
block's first arm (its order is still drawn anew each round) carries the others in
``spec.extra["partners"]``; its process starts theirs and each arm times its loops in turn
(csrc/harness/turns.h), so the block is one entry of the plan whose rows hold every arm.

The order depends only on the plan and ``seed`` (``random.Random(seed)``; the layout
permutations come from sha256 of the seed and the block), so ``--resume`` reproduces it, and
K = 1 gives the same order as a plan without layouts.  Callgrind (icount) trials are never
timed; they run after all the timing trials, in plan order, trial t in layout t mod K (so two
icount trials of an arm count two of its layouts: the counts must agree).
"""
from __future__ import annotations

import dataclasses
import hashlib
import random

from ringlab.experiments.base import TrialSpec

#: the text env.json's "plan" records about the order
ORDER_DESCRIPTION = ("rounds are blocks: round r holds trial r of every configuration; in each round the "
                     "arms (variants) of one configuration run back to back in a seeded random order, "
                     "and the configurations' blocks are shuffled")
#: the text env.json's "plan" records about the layouts (``layouts`` > 1)
LAYOUT_DESCRIPTION = ("round r runs layout pair perm_b[r mod K] (b = r div K, perm_b a seeded permutation "
                      "of the K pairs): the baseline's layout k against the candidate's layout k")


def configuration_key(spec: TrialSpec) -> tuple:
    """What the arms of one block share: every parameter but ``variant``, and the CPUs."""
    return tuple(sorted((k, str(v)) for k, v in spec.config.items() if k != "variant")) + (("cpus", spec.cpus),)


def layout_block(seed: int, block: int, layouts: int) -> list[int]:
    """perm_b: the seeded order of the ``layouts`` pairs in block ``block`` (rounds b*K .. b*K+K-1)."""
    digest = hashlib.sha256(f"ringlab-layout-block\0{int(seed)}\0{int(block)}".encode()).digest()
    perm = list(range(int(layouts)))
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(perm)
    return perm


def round_layout(seed: int, rnd: int, layouts: int) -> int:
    """The layout pair of round ``rnd``: perm_b[rnd % K] with b = rnd // K (0 when K is 1)."""
    k = max(1, int(layouts))
    return 0 if k == 1 else layout_block(seed, rnd // k, k)[rnd % k]


def _with_layout(spec: TrialSpec, k: int) -> TrialSpec:
    return dataclasses.replace(spec, extra={**spec.extra, "layout": k})


def order_plan(specs: list[TrialSpec], seed: int, layouts: int = 1) -> list[TrialSpec]:
    """Seeded block order, in rounds, each trial with its round's layout pair (module docstring)."""
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
        k = round_layout(seed, r, layouts)
        for arms in blocks:
            out.extend(_with_layout(s, k) for s in arms)
    return out


def take_turns(plan: list[TrialSpec]) -> list[TrialSpec]:
    """``plan`` with each block of timing trials (the arms of one configuration in one round,
    consecutive in block order) as one entry: its first arm with the others as ``partners``."""
    out: list[TrialSpec] = []
    for s in plan:
        last = out[-1] if out else None
        if (last is not None and s.kind == "timing" and last.kind == "timing" and last.trial == s.trial
                and configuration_key(last) == configuration_key(s)
                and last.extra.get("layout") == s.extra.get("layout")):
            out[-1] = dataclasses.replace(last, extra={**last.extra,
                                                       "partners": [*last.extra.get("partners", ()), s]})
            continue
        out.append(s)
    return out


def full_plan(exp, values: dict, specs: list[TrialSpec], ctx) -> list[TrialSpec]:
    """Timing trials in block order (a block as one entry when the arms take turns), then the
    icount trials (``icount=true``)."""
    layouts = int(values.get("layouts", 1) or 1)
    plan = order_plan(list(specs), values["seed"], layouts)
    if values.get("interleave"):
        plan = take_turns(plan)
    if values.get("icount"):
        icount_plan = exp.icount_specs(values, specs)
        if not icount_plan:
            ctx.warn(f"icount: no single-threaded trials in this {exp.name} plan; nothing to count")
        plan += [_with_layout(s, s.trial % layouts) for s in icount_plan]
    return plan
