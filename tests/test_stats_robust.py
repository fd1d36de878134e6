"""ringlab.stats.ranktests.hodges_lehmann: the Hodges-Lehmann estimate is exactly np.median of the
n(n+1)/2 Walsh averages, without forming them; `ringlab compare` of one long configuration stays
small."""
from __future__ import annotations

import importlib.util
import math
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ringlab.stats import ranktests
from ringlab.stats.ranktests import hodges_lehmann

ROOT = Path(__file__).resolve().parent.parent


def _walsh_median(d) -> float:
    """The definition: np.median of (d_i + d_j) / 2 over i <= j."""
    d = np.asarray(d, dtype=float)
    i, j = np.triu_indices(len(d))
    return float(np.median((d[i] + d[j]) / 2))


def _sample(rng, n: int, kind: int) -> np.ndarray:
    """Arrays of the shapes that break selection: ties, wide exponents, rounding-prone sums."""
    if kind == 0:
        return rng.normal(size=n)
    if kind == 1:                                   # few distinct values: long runs of ties
        return rng.integers(-5, 6, n).astype(float)
    if kind == 2:                                   # two decimals, both signs: equal sums from different pairs
        return np.round(rng.lognormal(0, 1, n), 2) * rng.choice([-1, 1], n)
    if kind == 3:                                   # magnitudes from 1e-300 to 1e300: sums that round
        return rng.normal(size=n) * 10.0 ** rng.integers(-300, 300, n)
    if kind == 4:                                   # per-round log ratios as compare forms them
        return np.log(rng.lognormal(0, 0.05, n) * 1.03) - np.log(rng.lognormal(0, 0.05, n))
    v = rng.normal(size=n)                          # a constant block and a few wild values
    v[: n // 2] = 0.25
    v[: max(1, n // 50)] *= 1e6
    return v


@pytest.mark.parametrize("sample, form", [(ranktests._SAMPLE, ranktests._FORM_PER_ROW), (7, 0), (1, 0)])
def test_hodges_lehmann_equals_the_walsh_median_exactly(monkeypatch, sample, form):
    # the selection path for every n (no direct formation); small draws force many rounds and
    # pivots at the ends of the windows
    monkeypatch.setattr(ranktests, "HL_DIRECT_MAX", 0)
    monkeypatch.setattr(ranktests, "_SAMPLE", sample)
    monkeypatch.setattr(ranktests, "_FORM_PER_ROW", form)
    rng = np.random.default_rng(20261207 + sample)
    sizes = list(range(1, 41)) + [int(n) for n in rng.integers(41, 400, 60)] + [999, 1000, 2000]
    for t, n in enumerate(sizes):
        d = _sample(rng, n, t % 6)
        assert hodges_lehmann(d) == _walsh_median(d), (n, t % 6)


def test_hodges_lehmann_default_path_matches_on_both_sides_of_the_direct_limit():
    rng = np.random.default_rng(5)
    for n in (ranktests.HL_DIRECT_MAX - 1, ranktests.HL_DIRECT_MAX, ranktests.HL_DIRECT_MAX + 1, 1500):
        for kind in range(6):
            d = _sample(rng, n, kind)
            assert hodges_lehmann(d) == _walsh_median(d), (n, kind)
            assert hodges_lehmann(list(d)) == _walsh_median(d)


def test_hodges_lehmann_non_finite_values_as_np_median(monkeypatch):
    monkeypatch.setattr(ranktests, "HL_DIRECT_MAX", 0)
    rng = np.random.default_rng(3)
    base = rng.normal(size=300)
    with np.errstate(invalid="ignore"):
        for extra in ([np.inf], [-np.inf] * 200, [np.inf] * 400, [np.nan], [np.inf, -np.inf]):
            d = np.concatenate([base, extra])
            want, got = _walsh_median(d), hodges_lehmann(d)
            assert got == want or (math.isnan(got) and math.isnan(want)), (extra[:2], got, want)


def test_hodges_lehmann_of_a_million_values_is_quick_and_small():
    d = np.random.default_rng(1).normal(0, 0.05, 1_000_000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    v = hodges_lehmann(d)
    grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grew_mb < 400          # O(n): some tens of 8 MB arrays at most (the pairs would be 4 TB)
    assert abs(v) < 0.001


def _compare_size():
    spec = importlib.util.spec_from_file_location("compare_size", ROOT / "benchmarks" / "compare_size.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: what `ringlab compare` of 10^5 rows in one configuration may use (the Walsh averages of its
#: 50,000 rounds, formed, would take 20 GB)
COMPARE_RSS_BOUND = 1_500_000_000


def test_compare_of_one_long_configuration_stays_small(tmp_path):
    raw = tmp_path / "raw.csv"
    _compare_size()._write_file(raw, 100_000, 1)      # 2 arms x 1 configuration x 50,000 rounds

    def limit():                                      # a blow-up fails fast instead of swapping
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))

    with open(tmp_path / "out.txt", "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ringlab", "compare", str(raw), "--baseline", "batch"],
                                stdout=out, stderr=subprocess.STDOUT, preexec_fn=limit, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = (tmp_path / "out.txt").read_text()
    assert proc.returncode == 0, text[-2000:]
    assert usage.ru_maxrss * 1024 < COMPARE_RSS_BOUND, usage.ru_maxrss
    assert "reorder" in text and "faster" in text
