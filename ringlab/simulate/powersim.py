"""Error rates of the verdict on real rounds: A/A false positives, power and CI width.

Method (``ringlab bench power``):

* a *unit* is one pair of arms in one configuration of a committed run, with the rounds in
  which both arms were measured (``units_from_frame``);
* the unit's real effect is removed first (candidate divided by exp(Hodges-Lehmann of the
  per-round log ratios)), so only its noise is left;
* each simulated run draws ``n`` rounds with replacement and **swaps the two arms at random
  inside each drawn round**: the null hypothesis is then exactly true (the round-to-round
  noise and the correlation of the two arms within a round are kept as measured);
* a known effect is injected by multiplying the candidate by (1 + effect).  Both analyses are
  translation-equivariant on the log scale, so the CI of the shifted data is the CI of the
  null data plus ln(1 + effect): one CI per simulated run serves every effect;
* paired: Wilcoxon signed-rank CI of the per-round log ratios (what ``compare`` does);
  unpaired: Mann-Whitney CI of the two arms' log values as independent samples (the fallback,
  and what treating the arms as independent costs); optionally "bootstrap": the previous
  verdict's CI (percentile bootstrap of the ratio of medians, arms resampled independently).  A run "calls" the effect when its 95% CI
  excludes 0 (single comparison, alpha = 0.05; ``compare`` corrects per family on top).

Rates are averaged over units with equal weight, so a file with many configurations does not
dominate a unit with a different noise.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from ringlab import schema
from ringlab.stats import ranktests as _rt
from ringlab.stats.rounds import ROUND_COLUMN, Rounds, comparison_columns, round_key, round_values
from ringlab.stats.summary import measurements

ROUNDS = (30, 60, 100)
EFFECTS = (0.02, 0.05)
MIN_UNIT_ROUNDS = 8


def units_from_frame(df: pd.DataFrame, metric: str = schema.PRIMARY_METRIC, source: str = "") -> list[dict]:
    """Every pair of arms per configuration with >= MIN_UNIT_ROUNDS common rounds (positive values)."""
    meas, _ = measurements(df, metric)
    if "variant" not in meas.columns:
        return []
    meas["variant"] = meas["variant"].astype(str)
    cols = comparison_columns(meas)
    rk = round_key(meas)
    if rk is None:
        return []
    meas[ROUND_COLUMN] = rk
    units = []
    groups = meas.groupby(cols, sort=True, dropna=False) if cols else [((), meas)]
    for key, sub in groups:
        key = key if isinstance(key, tuple) else (key,)
        label = ",".join(f"{c}={v}" for c, v in zip(cols, key)) or "all"
        arms = {v: round_values(s, metric) for v, s in sub.groupby("variant", sort=True)}
        for a, b in itertools.combinations(sorted(arms), 2):
            rounds = Rounds.pair(arms[a], arms[b], paired=True)
            if rounds.n_common < MIN_UNIT_ROUNDS or not rounds.positive():
                continue
            lx = np.log(rounds.baseline.loc[rounds.common].to_numpy())
            ly = np.log(rounds.candidate.loc[rounds.common].to_numpy())
            hl = _rt.signed_rank(ly - lx, 0.5)["estimate"]
            units.append({"source": source, "group": label, "arms": (a, b), "n_rounds": rounds.n_common,
                          "base": lx, "cand": ly - hl})
    return units


def simulate_unit(unit: dict, n: int, reps: int, rng: np.random.Generator, level: float = 0.95,
                  boot: int = 0) -> dict:
    """CIs (log scale) of ``reps`` simulated A/A runs of ``n`` rounds, paired and unpaired
    (and, with ``boot`` resamples, the previous bootstrap-of-medians CI as "bootstrap")."""
    idx = rng.integers(0, unit["n_rounds"], size=(reps, n))
    swap = rng.random((reps, n)) < 0.5
    b, c = unit["base"][idx], unit["cand"][idx]
    x, y = np.where(swap, c, b), np.where(swap, b, c)
    plo, phi = _rt.signed_rank_ci_batch(y - x, level)
    ulo, uhi = _rt.rank_sum_ci_batch(x, y, level)
    out = {"paired": (plo, phi), "unpaired": (ulo, uhi)}
    if boot:
        out["bootstrap"] = _bootstrap_median_ratio(x, y, boot, rng, level)
    return out


def _bootstrap_median_ratio(x, y, B: int, rng, level: float):
    """The ratio-of-medians CI (arms independent): percentile bootstrap of ln(median y / median x), arms resampled
    independently (B resamples per simulated run)."""
    reps, n = x.shape
    lo, hi = np.empty(reps), np.empty(reps)
    a = (1 - level) / 2 * 100
    step = max(1, int(4_000_000 // (B * n)))
    for s in range(0, reps, step):
        xs, ys = x[s:s + step], y[s:s + step]
        k = len(xs)
        ix = rng.integers(0, n, size=(k, B, n))
        iy = rng.integers(0, n, size=(k, B, n))
        mx = np.median(np.take_along_axis(np.broadcast_to(xs[:, None, :], (k, B, n)), ix, axis=2), axis=2)
        my = np.median(np.take_along_axis(np.broadcast_to(ys[:, None, :], (k, B, n)), iy, axis=2), axis=2)
        lo[s:s + step], hi[s:s + step] = np.percentile(my - mx, [a, 100 - a], axis=1)
    return lo, hi


def _called(lo, hi, effect: float) -> np.ndarray:
    s = math.log1p(effect)
    return (lo + s > 0) | (hi + s < 0)


def _width_pct(lo, hi) -> np.ndarray:
    return (np.expm1(hi) - np.expm1(lo)) * 100


def power_table(units: list[dict], rounds=ROUNDS, effects=EFFECTS, reps: int = 300, seed: int = 0,
                level: float = 0.95, boot: int = 0) -> pd.DataFrame:
    """One row per (design, rounds): aa_rate, power_<e>pct for each effect, ci_width_pct (mean
    over units of the mean CI width), width_ratio_median (unpaired/paired width per unit, median);
    ``attrs["width_ratio_by_source"]``: {source: {rounds: {design: [mean width per unit]}}}."""
    rng = np.random.default_rng(seed)
    acc = {}
    by_source: dict = {}
    for u in units:
        for n in rounds:
            sim = simulate_unit(u, n, reps, rng, level, boot)
            src = by_source.setdefault(u["source"], {}).setdefault(n, {})
            for design, (lo, hi) in sim.items():
                src.setdefault(design, []).append(_width_pct(lo, hi).mean())
                a = acc.setdefault((design, n), {"aa": [], "w": [], **{e: [] for e in effects}})
                a["aa"].append(_called(lo, hi, 0.0).mean())
                a["w"].append(_width_pct(lo, hi).mean())
                for e in effects:
                    a[e].append(_called(lo, hi, e).mean())
    rows = []
    order = {"paired": 0, "unpaired": 1, "bootstrap": 2}
    for (design, n), a in sorted(acc.items(), key=lambda kv: (kv[0][1], order[kv[0][0]])):
        row = {"design": design, "rounds": n, "units": len(a["aa"]), "aa_rate": float(np.mean(a["aa"]))}
        for e in effects:
            row[f"power_{e * 100:g}pct"] = float(np.mean(a[e]))
        row["ci_width_pct"] = float(np.mean(a["w"]))
        row["_w"] = np.asarray(a["w"])
        rows.append(row)
    out = pd.DataFrame(rows)
    ratio = {}
    for n in rounds:
        p = out[(out["design"] == "paired") & (out["rounds"] == n)]["_w"]
        q = out[(out["design"] == "unpaired") & (out["rounds"] == n)]["_w"]
        if len(p) and len(q):
            ratio[n] = float(np.median(q.iloc[0] / p.iloc[0]))
    out["width_ratio_median"] = out["rounds"].map(ratio)
    out = out.drop(columns="_w")
    out.attrs["width_ratio_by_source"] = by_source
    return out


def targets(table: pd.DataFrame, aa_max: float = 0.05, power_min: float = 0.8, effect: float = 0.05,
            rounds_max: int = 60) -> list[tuple[str, bool | None, str]]:
    """(target, met, the figure) for the two targets of the paired analysis (A/A rate, power),
    then the CI widths against the unpaired analyses of the same rounds; ``met`` None marks a
    line printed for reference, not a target."""
    p = table[table["design"] == "paired"].set_index("rounds")
    u = table[table["design"] == "unpaired"].set_index("rounds")
    col = f"power_{effect * 100:g}pct"
    out = []
    worst_aa = float(p["aa_rate"].max())
    out.append((f"paired A/A false positives <= {aa_max:.0%} at every size", worst_aa <= aa_max,
                f"worst {worst_aa:.1%}"))
    ok_n = [n for n in p.index if n <= rounds_max and p.loc[n, col] >= power_min]
    best = float(p.loc[[n for n in p.index if n <= rounds_max], col].max())
    out.append((f"paired power >= {power_min:.0%} for a {effect:.0%} effect at <= {rounds_max} rounds",
                bool(ok_n), f"{best:.1%} at best" + (f" (reached at {min(ok_n)} rounds)" if ok_n else "")))
    ratios = (u["ci_width_pct"] / p["ci_width_pct"]).dropna()
    worst = float(ratios.min())
    unpaired_fig = (f"unpaired/paired {worst:.2f}x at worst "
                    f"({', '.join(f'{n}: {r:.2f}x' for n, r in ratios.items())})")
    b = table[table["design"] == "bootstrap"].set_index("rounds")
    if len(b):
        rb = (b["ci_width_pct"] / p["ci_width_pct"]).dropna()
        out.append(("for reference, against the bootstrap CI of the ratio of medians (arms independent)", None,
                    f"bootstrap/paired {float(rb.min()):.2f}x at worst "
                    f"({', '.join(f'{n}: {r:.2f}x' for n, r in rb.items())})"))
    out.append(("for reference, against an unpaired Hodges-Lehmann/Mann-Whitney analysis of the same rounds",
                None, unpaired_fig))
    return out
