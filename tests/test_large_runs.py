"""Long runs (more values than the committed runs hold): the KDE of the modality check and the
figures' dots are bounded in cost, and smaller samples keep their exact paths."""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sst

from ringlab.report import figures
from ringlab.stats import outliers


def test_kde_above_the_exact_limit_is_the_exact_density_to_1e_5_of_its_peak():
    rng = np.random.default_rng(1)
    v = np.concatenate([rng.normal(10, 0.3, outliers.KDE_EXACT_MAX_N), rng.normal(13, 0.3, 3_000)])
    lo, hi = v.min(), v.max()
    grid = np.linspace(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo), 1024)
    exact = sst.gaussian_kde(v)(grid)
    fast = outliers._kde_density(v, grid)
    assert np.max(np.abs(fast - exact)) < 1e-5 * exact.max()
    mod = outliers.modality(v)
    assert mod["multimodal"] and len(mod["modes"]) == 2


def test_kde_up_to_the_limit_is_scipys(monkeypatch):
    v = np.random.default_rng(2).normal(size=500)
    grid = np.linspace(-3, 3, 11)
    assert np.array_equal(outliers._kde_density(v, grid), sst.gaussian_kde(v)(grid))


def test_figures_draw_a_bounded_seeded_subsample_above_the_limit():
    d = pd.DataFrame({"x": np.arange(figures.MAX_DRAWN * 3)})
    a, words = figures._drawn(d, "box")
    b, _ = figures._drawn(d, "box")
    assert len(a) == figures.MAX_DRAWN and a.equals(b) and a.index.is_monotonic_increasing
    assert f"{figures.MAX_DRAWN:,} of {len(d):,} trials" in words
    small = d.iloc[:figures.MAX_DRAWN]
    same, none = figures._drawn(small, "box")
    assert same is small and none == ""


def test_box_and_order_figures_of_a_long_run_say_they_are_subsampled(tmp_path, monkeypatch):
    from tests.synth import make_raw
    from ringlab.stats import measurements
    monkeypatch.setattr(figures, "MAX_DRAWN", 50)
    meas, _ = measurements(make_raw(trials=60, warmup=0, rounds_col=True, seed=1))
    titles = []
    real_save = figures.save

    def save(fig, out_dir, name):
        titles.append(" ".join([fig._suptitle.get_text() if fig._suptitle else ""]
                               + [ax.get_title() for ax in fig.axes]))
        return real_save(fig, out_dir, name)
    monkeypatch.setattr(figures, "save", save)
    drawn = figures.render_all(meas, "ns_per_op", ["mode", "size"], tmp_path / "figures")
    assert {"box", "order"} <= set(drawn)
    assert all("a seeded random 50 of 120 trials" in t for t in titles[:2]), titles


def test_walsh_order_statistics_from_the_selected_bracket_are_the_full_bisections(monkeypatch):
    from ringlab.stats import ranktests as rt
    rng = np.random.default_rng(3)
    samples = [np.log(rng.lognormal(0, 0.05, 2600) * 1.03) - np.log(rng.lognormal(0, 0.05, 2600)),
               rng.integers(-5, 6, 3000).astype(float) * 0.01,          # long runs of ties
               np.round(rng.normal(0, 1, 2500), 3)]
    for d in samples:
        m = len(d) * (len(d) + 1) // 2
        assert m > rt.DIRECT_MAX                                        # the bisection path
        ks = [(m + 1) // 2, m // 2 + 1, 1000, m + 1 - 1000, 1, m]
        fast = rt.order_stats("walsh", d, None, ks)
        with monkeypatch.context() as p:
            p.setattr(rt, "_walsh_bracket", lambda a, k, lo, hi: (lo, hi))
            full = rt.order_stats("walsh", d, None, ks)
        assert np.array_equal(fast, full)
