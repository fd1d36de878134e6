"""Write the SYNTHETIC run folder that tests/test_mail.py turns into a mail.

TEST DATA, NOT A MEASUREMENT: every number below is drawn from a seeded random
generator around round values chosen to look like a ptr_ring A/B (a base header
and a patched one, modes 0-2, callgrind counts for mode 0, one crashed trial).
The host, CPU model and paths say so too.  Re-running this script writes the same
bytes; then regenerate the golden file:

    python tests/data/mail/make_data.py
    RINGLAB_REGEN_GOLDEN=1 pytest tests/test_mail.py
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from ringlab import schema

HERE = Path(__file__).resolve().parent
RUN_ID = "20260101T000000Z-test00"
HOST = "synthetic-test-host"
VARIANTS = ["base", "patched"]
MODES = [0, 1, 2]
TRIALS, WARMUP, COUNT = 8, 1, 20_000_000
# median ns/op and relative spread per (variant, mode): round made-up values
CENTRE = {("base", 0): 4.4, ("patched", 0): 5.9, ("base", 1): 5.2, ("patched", 1): 6.1,
          ("base", 2): 5.5, ("patched", 2): 5.6}
SPREAD = {0: 0.04, 1: 0.12, 2: 0.10}
ICOUNT = {"base": 43.5, "patched": 51.5}      # exact, as callgrind gives
SHA = {"base": "b" * 64, "patched": "c" * 64}
PARAM_COLS = ["mode", "size", "batch", "lock"]
BASE_HEADER = "/usr/src/linux-headers-0.0.0-test-common/include/linux/ptr_ring.h"
PATCH = "results/patch-ab/synthetic-test-host/20260101T000000Z-test00/flush-delay.patch"


def rows() -> list[dict]:
    rng = np.random.default_rng(20260101)
    out, order = [], 0
    for t in range(WARMUP + TRIALS):
        block = [(v, m) for v in VARIANTS for m in MODES]
        for i in rng.permutation(len(block)):
            v, m = block[i]
            ns = CENTRE[(v, m)] * float(np.exp(rng.normal(0, SPREAD[m])))
            p, c = (1, 1) if m == 0 else (0, 1)
            cls = "same-cpu" if m == 0 else "same-llc"
            r = {"run_id": RUN_ID, "experiment": "ptr_ring", "host": HOST, "variant": v, "mode": m,
                 "size": 1000, "batch": 0, "lock": False, "trial": t, "iteration": 0, "order": order,
                 "warmup": t < WARMUP, "status": "ok", "exit_code": 0,
                 "timestamp": f"2026-01-01T00:{order // 60:02d}:{order % 60:02d}.000000Z",
                 "ns_per_op": round(ns, 6), "elapsed_ns": round(ns * COUNT), "count": COUNT,
                 "cpu_req_producer": p, "cpu_req_consumer": c, "cpu_producer_start": p,
                 "cpu_producer_end": p, "cpu_consumer_start": c if m else -1,
                 "cpu_consumer_end": c if m else -1, "pair_class": cls, "actual_pair_class": cls,
                 "binary_sha256": SHA[v], "wall_s": round(ns * COUNT / 1e9 + 0.012, 6)}
            if (v, m, t) == ("patched", 2, 5):   # one crashed trial, kept with its status
                r.update(status="crash", exit_code=-11, ns_per_op="", elapsed_ns="",
                         stderr_tail="synthetic crash (test data)", actual_pair_class="")
            out.append(r)
            order += 1
    for v in VARIANTS:                              # callgrind rows, mode 0, never timed
        for t in range(2):
            out.append({"run_id": RUN_ID, "experiment": "ptr_ring", "host": HOST, "variant": v, "mode": 0,
                        "size": 1000, "batch": 0, "lock": False, "trial": t, "iteration": 0, "order": order,
                        "warmup": False, "status": "ok", "exit_code": 0,
                        "timestamp": f"2026-01-01T00:{order // 60:02d}:{order % 60:02d}.000000Z",
                        "count": COUNT, "cpu_req_producer": 1, "cpu_req_consumer": 1, "pair_class": "same-cpu",
                        "actual_pair_class": "same-cpu", "instructions": ICOUNT[v] * 1_000_000,
                        "icount_ops": 1_000_000, "valgrind_version": "valgrind-0.0.0-test",
                        "instructions_per_op": ICOUNT[v], "icount_source": "callgrind",
                        "binary_sha256": SHA[v], "wall_s": 0.5})
            order += 1
    return out


def env() -> dict:
    params = {"profile": "full", "trials": TRIALS, "warmup": WARMUP, "repeats": 1, "timeout": 120.0, "seed": 1,
              "counters": True, "governor": True, "disable_boost": False, "icount": True,
              "icount_ops": 1_000_000, "icount_trials": 2, "variants": VARIANTS, "modes": MODES,
              "sizes": [1000], "count": COUNT, "batch": 0, "lock": False, "cpus": "auto", "cflags": "",
              "kernel_headers": f"base={BASE_HEADER},patched={BASE_HEADER}+{PATCH}"}
    na = {"ok": False, "reason": "not supported (ENOENT): no hardware PMU exposed (virtual machine?)"}
    return {
        "note": "SYNTHETIC TEST DATA written by tests/data/mail/make_data.py; not a measurement",
        "schema_version": 1, "ringlab_version": "0.1.0", "run_id": RUN_ID, "experiment": "ptr_ring",
        "host": HOST, "started_utc": "2026-01-01T00:00:00.000000Z", "status": "complete",
        "ended_utc": "2026-01-01T00:01:00.000000Z", "parameters": params, "command": None,
        "git": {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": False, "dirty_files": []},
        "build": {"compiler": "/usr/bin/gcc", "compiler_version": "gcc (Test) 0.0.0",
                  "cflags": ["-O2", "-g", "-std=gnu11", "-pthread", "-Wall", "-Wextra"], "user_cflags": [],
                  "kernel_headers": {"base": BASE_HEADER,
                                     "patched": f"/root/.cache/ringlab/headers/{'d' * 16}/ptr_ring.h"}},
        "plan": {"trials_total": len(VARIANTS) * len(MODES) * (TRIALS + WARMUP) + 4, "seed": 1,
                 "order": "seeded random shuffle within rounds (round r = trial r of every configuration)"},
        "environment": {
            "host": {"hostname": "test", "host_id": HOST, "kernel": "0.0.0-test", "machine": "x86_64",
                     "virtualization": {"type": "kvm"}},
            "cpu": {"model": "Synthetic CPU (test data)"},
            "topology": {"n_cpus": 2, "n_packages": 1, "llc_groups": [[0, 1]], "numa_nodes": {"0": [0, 1]}},
            "governor": {"available": False, "reason": "no cpufreq driver (virtual machine?)"},
            "perf": {"counters": {"cycles": na, "instructions": na, "task_clock": {"ok": True, "reason": None}}},
        },
        "binaries_used": {f"ptr_ring_test-{v}": {"path": f"/tmp/test/ptr_ring_test-{v}", "sha256": SHA[v]}
                          for v in VARIANTS},
        "governor": {"governor": {"status": "unavailable", "reason": "no cpufreq driver (virtual machine?)"}},
        "warnings": [],
    }


def notebook() -> dict:
    """The metadata an executed notebook carries (papermill's injected parameters), no cells."""
    return {"cells": [], "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                      "language": "python"},
                                      "papermill": {"parameters": {"profile": "full", "patch": "builtin:flush-delay",
                                                                   "out_dir": "/tmp/test/run", "host": HOST}}},
            "nbformat": 4, "nbformat_minor": 5}


def main() -> None:
    cols = schema.ordered_columns(PARAM_COLS)
    with open(HERE / "raw.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="raise")
        w.writeheader()
        for r in rows():
            w.writerow({c: ("" if r.get(c) is None else r.get(c, "")) for c in cols})
    (HERE / "env.json").write_text(json.dumps(env(), indent=2) + "\n")
    (HERE / "12-patch-ab.ipynb").write_text(json.dumps(notebook(), indent=1) + "\n")


if __name__ == "__main__":
    main()
