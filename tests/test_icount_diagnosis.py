"""A constructed case for the A/B diagnosis: one source, two alignment builds.

Callgrind counts the measured region of both builds for real; they execute the same
instructions (within 0.1%), so when their times differ significantly the A/B report must
say "same instructions, different time", and when the times do not differ it must not.
The timing rows are constructed (a known 5% shift, or none) because alignment effects on
a shared VM are too small and noisy to produce a reliable difference on demand.

Only function alignment differs between the builds: -falign-loops / -falign-jumps put
padding nops where they are executed (measured here: +0.15% and +0.7% instructions per
op), which the diagnosis rightly reports as "different instructions".
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ringlab.build import driver as build
from ringlab.tools import icount
from ringlab.stats import diagnose_ab

pytestmark = pytest.mark.skipif(not icount.availability().ok,
                                reason="callgrind not available: " + icount.availability().reason)

FLAGS = {"align1": "-falign-functions=1",
         "align64": "-falign-functions=64"}
OPS = 200_000


@pytest.fixture(scope="module")
def counts(tmp_path_factory):
    out = {}
    for name, flags in FLAGS.items():
        d = tmp_path_factory.mktemp(name)
        info = build.build_all(cflags=flags, out_dir=d, only=["ptr_ring_test-batch"])
        exe = Path(info.binaries["ptr_ring_test-batch"].path)
        argv = [str(exe), "-s", "1000", "-m", "0", "-N", str(OPS), "--counters", "none"]
        out[name] = (exe, icount.count(argv).instructions)
    return out


def _frame(counts, shift):
    rng = np.random.default_rng(7)
    rows = []
    for variant, (_, ir) in counts.items():
        factor = 1.0 + (shift if variant == "align64" else 0.0)
        for t, v in enumerate(rng.lognormal(np.log(10.0 * factor), 0.01, 30)):
            rows.append({"variant": variant, "mode": 0, "size": 1000, "trial": t, "warmup": False,
                         "status": "ok", "ns_per_op": v, "instructions_per_op": np.nan})
        for t in range(2):
            rows.append({"variant": variant, "mode": 0, "size": 1000, "trial": t, "warmup": False,
                         "status": "ok", "ns_per_op": np.nan, "instructions_per_op": ir / OPS,
                         "icount_source": "callgrind"})
    return pd.DataFrame(rows)


def test_alignment_builds_differ_but_execute_the_same_instructions(counts):
    (exe1, ir1), (exe64, ir64) = counts["align1"], counts["align64"]
    assert exe1.read_bytes() != exe64.read_bytes(), "the flags must change the binary"
    assert abs(ir64 - ir1) / ir1 <= 0.001


def test_diagnosis_fires_on_same_instructions_different_time(counts):
    out = diagnose_ab(_frame(counts, 0.05), "align1", "align64")
    assert out and out[0]["finding"] == "same instructions, different time"
    text = out[0]["text"]
    assert "objdump" in text and "-falign" in text


def test_diagnosis_quiet_when_times_agree(counts):
    out = diagnose_ab(_frame(counts, 0.0), "align1", "align64")
    assert out and out[0]["finding"] != "same instructions, different time"
