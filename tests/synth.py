"""Synthetic raw.csv frames that follow ringlab.schema (the runner is written in parallel).

``make_raw()`` builds a tidy frame: one row per (variant, params, trial, iteration), with
warm-up rows, an optional failed row, placement, counters (NaN = unsupported) and system
columns, in ``schema.ordered_columns`` order.  Every knob is explicit so each test states
its known answer.
"""
from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd

from ringlab import schema


def make_raw(variants=("batch", "reorder"), params=None, trials=30, iterations=1, warmup=1,
             base_ns=10.0, effects=None, cv=0.05, seed=0, experiment="ptr_ring",
             counters=False, failed=0, c2c=None, slow_frac=0.0, slow_factor=2.0,
             slow_marker="cross_cpu", deterministic_icount=None, process_cv=None,
             cpu_pairs=None, metric="ns_per_op", round_cv=None, rounds_col=False,
             busy_frac=0.0, busy_factor=1.5, single_thread=None):
    """A synthetic raw.csv frame.

    effects: {variant: relative change}, e.g. {"reorder": -0.03} (3% lower ns_per_op).
    slow_frac/slow_factor: that share of measured trials is slow_factor x slower; with
      slow_marker "cross_cpu" those trials ran the consumer on another LLC (placement
      columns show it), with None nothing recorded distinguishes them.
    deterministic_icount: {variant: instructions_per_op} constant per variant (callgrind).
    process_cv: extra between-process noise (Kalibera & Jones levels) when iterations > 1.
    cpu_pairs: list of (producer, consumer) CPUs cycled over trials (cpus=all).
    round_cv: noise shared by every arm of a round (the machine's slow/fast state); trial t
      is round t.  rounds_col: also write the ``round`` column (new runner layout).
    busy_frac/busy_factor: that share of rounds is busy (procs_running high, load1 high) and
      busy_factor x slower for every arm; procs_running/load1 are always written when > 0.
    single_thread: variants that record no consumer CPU (cpu_req_consumer = -1), as perf_rb's base.
    """
    rng = np.random.default_rng(seed)
    params = params or {"mode": [1], "size": [1000]}
    effects = effects or {}
    sigma = np.sqrt(np.log1p(cv * cv))
    rows = []
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    pnames = list(params)
    n_rounds = warmup + trials
    round_noise = (rng.lognormal(0, np.sqrt(np.log1p(round_cv ** 2)), n_rounds) if round_cv
                   else np.ones(n_rounds))
    busy = rng.random(n_rounds) < busy_frac
    busy[:warmup] = False
    for combo in itertools.product(*params.values()):
        for v in variants:
            for t in range(warmup + trials):
                proc = rng.lognormal(0, np.sqrt(np.log1p(process_cv ** 2))) if process_cv else 1.0
                slow = t >= warmup and rng.random() < slow_frac
                for it in range(iterations):
                    val = (base_ns * (1 + effects.get(v, 0.0)) * proc * round_noise[t]
                           * rng.lognormal(-sigma ** 2 / 2, sigma))
                    if busy[t]:
                        val *= busy_factor
                    if slow:
                        val *= slow_factor
                    if t < warmup:
                        val *= 1.3
                    pcpu, ccpu = (1, 2)
                    if cpu_pairs:
                        pcpu, ccpu = cpu_pairs[t % len(cpu_pairs)]
                    req = (pcpu, -1 if single_thread and v in single_thread else ccpu)
                    pclass = "same-llc"
                    if slow and slow_marker == "cross_cpu":
                        ccpu, pclass = 9, "cross-llc"
                    r = {"run_id": "20260101T000000Z-abcdef", "experiment": experiment, "host": "synth",
                         "variant": v}
                    r.update(dict(zip(pnames, combo)))
                    r.update(trial=t, iteration=it, order=0, warmup=t < warmup, status="ok",
                             exit_code=0, stderr_tail="", timestamp="")
                    r[metric] = val
                    if metric != "ns_per_op":
                        r["ns_per_op"] = np.nan
                    r.update(elapsed_ns=val * 1e8, ns_producer=val * 1e8, ns_consumer=val * 1e8,
                             count=100_000_000, cpu_req_producer=req[0], cpu_req_consumer=req[1],
                             cpu_producer_start=pcpu, cpu_producer_end=pcpu,
                             cpu_consumer_start=ccpu, cpu_consumer_end=ccpu,
                             pair_class="same-llc", actual_pair_class=pclass)
                    for e in schema.COUNTER_EVENTS:
                        r[e] = np.nan
                    r.update(counters_multiplexed=False, counter_errors="cycles: not supported (ENOENT)",
                             ipc=np.nan, branch_miss_rate=np.nan, instructions_per_op=np.nan,
                             cycles_per_op=np.nan, icount_source="")
                    if counters:
                        cyc = val * 3.0 * 1e8
                        ins = cyc * (1.5 + 0.01 * rng.standard_normal())
                        br, bm = ins * 0.2, ins * 0.2 * 0.01
                        r.update(cycles=cyc, instructions=ins, branches=br, branch_misses=bm,
                                 ipc=ins / cyc, branch_miss_rate=bm / br, instructions_per_op=ins / 1e8,
                                 cycles_per_op=cyc / 1e8, icount_source="perf", counter_errors="")
                    for e in ("task_clock", "context_switches", "cpu_migrations", "page_faults"):
                        r[e] = 0.0 if e != "task_clock" else val * 1e8
                    if deterministic_icount:
                        r["instructions_per_op"] = deterministic_icount[v]
                        r["icount_source"] = "callgrind"
                    r.update(ctx_voluntary=int(rng.integers(0, 3)), ctx_involuntary=int(rng.integers(0, 3)),
                             steal_delta=0.0, c2c_latency_ns=c2c if c2c is not None else np.nan,
                             binary_sha256="0" * 64, wall_s=val * 0.1)
                    if rounds_col:
                        r["round"] = t
                    if busy_frac > 0:
                        r["procs_running"] = int(rng.integers(3, 6)) if busy[t] else 1
                        r["load1"] = float(rng.uniform(2.5, 4.0)) if busy[t] else float(rng.uniform(0.0, 0.6))
                    rows.append(r)
    df = pd.DataFrame(rows)
    # randomised interleaved execution order, as the runner does; timestamps follow it
    order = rng.permutation(len(df))
    df["order"] = order
    df["timestamp"] = [(t0 + timedelta(seconds=int(o))).isoformat() for o in order]
    for i in range(failed):
        j = int(rng.integers(len(df)))
        df.loc[j, ["status", "exit_code", metric]] = ["crash", -11, np.nan]
    cols = schema.ordered_columns(pnames, extra=[metric] if metric not in df.columns else None)
    cols = [c for c in cols if c in df.columns] + [c for c in df.columns if c not in cols]
    return df[cols]
