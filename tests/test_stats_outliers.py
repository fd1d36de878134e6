import numpy as np
import pandas as pd

from ringlab.stats import diagnose, find_cause, modality, tukey_flags
from ringlab.stats.outliers import describe_modes
from ringlab.stats.summary import format_value
from synth import make_raw


def test_tukey_flags():
    v = np.r_[np.linspace(10, 11, 40), 12.0, 20.0]
    f = tukey_flags(v)
    assert f[-1] == "severe"
    assert (f[:40] == "").all()
    assert list(tukey_flags([1.0, 2.0])) == ["", ""]


def test_seed004_bimodal_text():
    rng = np.random.default_rng(7)
    v = np.r_[rng.normal(2.25e6, 0.02e6, 90), rng.normal(4.4e6, 0.05e6, 10)]
    m = modality(v)
    assert m["multimodal"]
    txt = describe_modes(m, lambda x: format_value(x, "elapsed_us"))
    assert txt.startswith("bimodal: 90% at 2.25 s, 10% at 4.4 s"), txt
    # a lopsided mix the dip test does not reject: the text says the KDE found it
    if m["dip_p"] >= 0.05:
        assert "separated KDE modes" in txt and "dip test" in txt, txt


def test_the_modes_text_names_the_test_that_found_them():
    fmt = lambda x: f"{x:g} ns"
    two = {"multimodal": True, "modes": [{"share": 0.9, "center": 1.0}, {"share": 0.1, "center": 2.0}]}
    assert describe_modes(dict(two, dip_p=0.003), fmt) == "bimodal: 90% at 1 ns, 10% at 2 ns (dip test p=0.003)"
    weak = describe_modes(dict(two, dip_p=0.34), fmt)
    assert weak.startswith("bimodal: 90% at 1 ns, 10% at 2 ns (separated KDE modes;") and "p=0.34" in weak


def test_unimodal_rarely_flagged():
    rng = np.random.default_rng(8)
    hits = sum(modality(rng.lognormal(0, 0.05, n))["multimodal"] for n in (30, 100) for _ in range(50))
    assert hits <= 3


def test_seed004_cause_is_the_cross_cpu_marker():
    df = make_raw(variants=("base",), trials=100, slow_frac=0.1, slow_factor=2.0, slow_marker="cross_cpu",
                  seed=11, experiment="perf_rb")
    (d,) = diagnose(df)
    assert d["kind"] == "multimodal"
    assert d["cause"]["column"] in ("actual_pair_class", "cross_cpu", "cpu_consumer_start")
    assert d["cause"]["p_holm"] < 0.001
    assert "slow trials" in d["text"] and "p < 0.001" in d["text"] and "pin" in d["text"]


def test_null_case_no_recorded_factor():
    df = make_raw(variants=("base",), trials=100, slow_frac=0.1, slow_marker=None, seed=12)
    (d,) = diagnose(df)
    assert d["kind"] == "multimodal"
    assert d["cause"]["column"] is None
    assert "no recorded factor explains" in d["text"]
    # the threshold it was held to is in the text, so that a closest p of 0.02 does not read as a contradiction
    assert "at Holm p < 0.01 (closest: " in d["text"], d["text"]


def test_numeric_cause_drift_by_order():
    n = 60
    order = np.arange(n)
    frame = pd.DataFrame({"order": order, "trial": order % 7, "ctx_involuntary": np.zeros(n)})
    odd = order >= 50  # the last trials are slow: drift
    c = find_cause(frame, odd)
    assert c["column"] == "order" and "higher order" in c["text"]


def test_migrations_cause():
    n = 80
    mig = np.zeros(n)
    mig[:8] = 3
    frame = pd.DataFrame({"cpu_migrations": mig, "order": np.random.default_rng(0).permutation(n)})
    c = find_cause(frame, mig > 0)
    assert c["column"] == "cpu_migrations" and "pin" in c["text"]


def _load_split(slow_load: float, rest_load: float, odd_name: str):
    n = 80
    odd = np.arange(n) < 12
    load = np.where(odd, slow_load, rest_load) + np.random.default_rng(3).normal(0, 0.01, n)
    return find_cause(pd.DataFrame({"load1": load}), odd, odd_name)


def test_slow_trials_with_more_load_are_machine_busy():
    c = _load_split(2.0, 1.0, "slow")
    assert c.get("cause") == "machine busy" and "other work ran" in c["text"]
    assert c["text"].startswith("machine busy: slow trials had higher load1")


def test_slow_trials_with_less_load_are_not_blamed_on_other_work():
    for c in (_load_split(1.0, 2.0, "slow"), _load_split(2.0, 1.0, "fast")):
        assert c["column"] == "load1" and c.get("cause") is None
        assert "other work ran" not in c["text"] and "other work does not explain them" in c["text"], c["text"]


def test_fast_trials_with_less_load_leave_the_slow_ones_busier():
    c = _load_split(1.0, 2.0, "fast")
    assert c.get("cause") is None and "fast trials had lower load1" in c["text"]
    assert "other work ran" in c["text"]
