"""Run folders and tidy frames of the layout design, from ringlab.simulate.noise simulations."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ringlab.simulate import noise

MAIL_DATA = Path(__file__).resolve().parent / "data" / "mail"


def tidy_frame(sim: dict, names=("base", "patched"), params=None) -> pd.DataFrame:
    """One raw.csv row per simulated trial: variant, round, layout, order, ns_per_op = exp(log_y)."""
    n = len(sim["order"])
    df = pd.DataFrame({"variant": np.where(sim["arm"] == 1, names[1], names[0])})
    for k, v in (params or {"mode": 0}).items():
        df[k] = v
    df["trial"] = sim["round"]
    df["round"] = sim["round"]
    df["order"] = sim["order"]
    df["layout"] = sim["layout"]
    df["status"] = "ok"
    df["ns_per_op"] = np.exp(sim["log_y"])
    df.index = pd.RangeIndex(n)
    return df


def layout_frame(K: int, rounds_per_layout: int = 20, effect=(0.0, 0.0), sigma_layout: float = 0.02,
                 seed: int = 0, **kw) -> tuple[pd.DataFrame, dict]:
    """(raw.csv-like frame, env) like the mail test's run, whose trials are a simulated layout run
    (a ``layout`` column; ``parameters.layouts`` = K)."""
    tmpl = pd.read_csv(MAIL_DATA / "raw.csv")
    sim = noise.simulate_ab(K, rounds_per_layout, effect=effect, sigma_layout=sigma_layout,
                            rng=np.random.default_rng(seed), **kw)
    rows = tmpl[tmpl["warmup"].astype(str) == "False"]
    base = rows[rows["variant"] == "base"].iloc[0]
    df = pd.DataFrame([base] * len(sim["order"])).reset_index(drop=True)
    df["variant"] = np.where(sim["arm"] == 1, "patched", "base")
    df["trial"], df["order"], df["warmup"] = sim["round"], sim["order"], False
    df["ns_per_op"] = np.exp(sim["log_y"])
    df["binary_sha256"] = np.where(sim["arm"] == 1, "c" * 64, "b" * 64)
    df["layout"] = sim["layout"]
    env = json.loads((MAIL_DATA / "env.json").read_text())
    env.setdefault("parameters", {})["layouts"] = K
    return df, env
