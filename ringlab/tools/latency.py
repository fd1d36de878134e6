"""Core-to-core latency: the physical bound under an SPSC ring's throughput.

``build/bin/c2c_latency`` (csrc/harness/c2c_latency.c) bounces one cache line between two
threads pinned to CPUs a and b and prints the one-way transfer latency (round trip / 2,
median of K rounds) as JSON.  An SPSC ring moves at least one line per element batch, so
ns_per_op far below this figure means the ring batches, far above means something else
costs.  ``measure(a, b)`` returns nanoseconds, or None when the probe cannot run (no
binary, a CPU offline, a timeout); ``Probe`` caches per run, so each pair is measured once.
"""
from __future__ import annotations

import json
import os
import subprocess

from ringlab import paths
from ringlab.system import privilege

#: ping-pong round trips per round, and rounds (the median is reported)
ITERATIONS = 20_000
ROUNDS = 7
#: seconds; a pair whose CPU is preempted for long (a busy VM host) gives up rather than stall a run
TIMEOUT_S = 20.0
#: environment variable that lowers the round trips per round a run's probe makes (an emulated
#: machine, whose latency means nothing, need not spend minutes on it)
ITERATIONS_VAR = "RINGLAB_C2C_ITERATIONS"


def default_iterations() -> int:
    """ITERATIONS, or $RINGLAB_C2C_ITERATIONS when it is a positive integer."""
    try:
        v = int(os.environ.get(ITERATIONS_VAR, ""))
    except ValueError:
        return ITERATIONS
    return v if v > 0 else ITERATIONS


def binary() -> str:
    return str(paths.bin_dir() / "c2c_latency")


def run_probe(a: int, b: int, iterations: int | None = None, rounds: int = ROUNDS,
              timeout: float = TIMEOUT_S, exe: str | None = None) -> dict:
    """Run the probe and return its JSON document; raise RuntimeError with the reason.

    ``iterations`` defaults to default_iterations(); the document says how many were made."""
    iterations = default_iterations() if iterations is None else iterations
    if a == b:
        raise RuntimeError("same CPU: a ping-pong between two spinning threads on one CPU measures the scheduler")
    argv = [exe or binary(), "-a", str(int(a)), "-b", str(int(b)), "-n", str(int(iterations)),
            "-k", str(int(rounds)), "--json"]
    if privilege.dropping() and not os.path.isfile(argv[0]):
        raise RuntimeError(f"{argv[0]} not built (ringlab build)")
    try:
        # under root the probe runs as the unprivileged user, like every trial
        p = subprocess.run(privilege.wrap(argv), capture_output=True, text=True, timeout=timeout,
                           start_new_session=True, env=privilege.env())
    except FileNotFoundError:
        raise RuntimeError(f"{argv[0]} not built (ringlab build)") from None
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"timed out after {timeout:g}s") from None
    if p.returncode != 0:
        raise RuntimeError(f"exit code {p.returncode}: {p.stderr.strip()[-200:]}")
    try:
        return json.loads(p.stdout)
    except ValueError:
        raise RuntimeError(f"unparsable output: {p.stdout[-200:]!r}") from None


def measure(a: int, b: int, **kw) -> float | None:
    """One-way latency between CPUs a and b in ns, or None when it cannot be measured."""
    try:
        v = run_probe(a, b, **kw).get("one_way_ns")
    except RuntimeError:
        return None
    return None if v is None else float(v)


class Probe:
    """measure() with a per-run cache; ``reasons[(a, b)]`` says why a pair has no figure."""

    def __init__(self, **kw):
        self.kw = kw
        self.cache: dict[tuple[int, int], float | None] = {}
        self.reasons: dict[tuple[int, int], str] = {}

    def measure(self, a: int, b: int) -> float | None:
        key = (int(a), int(b))
        if key not in self.cache:
            try:
                v = run_probe(a, b, **self.kw).get("one_way_ns")
                self.cache[key] = None if v is None else float(v)
            except RuntimeError as e:
                self.cache[key] = None
                self.reasons[key] = str(e)
        return self.cache[key]
