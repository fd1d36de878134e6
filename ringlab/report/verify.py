"""``ringlab verify RUN``: every number the run folder prints, recomputed from raw.csv and env.json.

A second implementation of the formulas docs/verdicts.md states, written the way a reviewer
would follow the doc with pandas, numpy, scipy and statsmodels, and deliberately without
``ringlab.stats``: a number that the report's own code gets wrong would otherwise be
"recomputed" by the same code and agree with itself.  The files themselves are read as every
ringlab reader reads them (``ringlab.rundir``: raw.csv's checks, the run constants env.json
keeps, env.json's typed fields; ``ringlab.schema``'s warm-up and failed-trial rules): the second
implementation is of the statistics, not of the file format.

Recomputed per row (configuration x candidate against the baseline):

* measurement rows: status ``ok``, not a warm-up, the metric present; per arm and round the
  median of its rows in that round (round key: ``round``, else ``trial``; per ``run_id`` when a
  file holds several);
* paired when the common rounds are at least 2 and at least half of either arm's rounds;
  d = ln(candidate / baseline) per common round;
* ``layouts`` (a ``layout`` column, more than one layout pair among the rounds): the REML fit
  d = theta + u_layout + e_round (the one-way ANOVA closed form when every pair has the same
  rounds, else statsmodels' MixedLM), its t CI on K - 1 df and the t test's p;
* one build, paired: Hodges-Lehmann of d with the inverted Wilcoxon signed-rank CI and p;
  unpaired: the Hodges-Lehmann shift with the inverted Mann-Whitney CI and p (exact null
  distributions up to 400 pairs / 2500 products of the sample sizes, normal with continuity
  correction above, as ringlab.stats.ranktests' docstring states);
* ``exact`` (every measurement of each arm the same value, or callgrind counts): the
  difference of the medians, no CI;
* delta_pct = (exp(estimate) - 1) x 100 and the CI the same way, gain_pct (+ = better), Holm
  over the run (statsmodels' ``multipletests``), the CI at each row's Holm step level, the
  verdict those give at the equivalence margin (env.json ``parameters.margin``, else 1%), and the
  next-run interval d +- t_nu sqrt(2 SE^2 + 2 tau^2) with tau and the basis the row states.

Then every number of compare.csv, summary.md's A/B table, mail.txt (its tables, interval lines,
headlines and commit block) and the executed notebooks' A/B tables is compared with the
recomputed one to the digits printed (half a unit of the last printed digit, plus 1e-9;
compare.csv holds full floats and is held to a relative 1e-6, the MixedLM optimiser's reach).
Numbers that cannot be recomputed from the folder are listed as not checked, with the reason.
"""
from __future__ import annotations

import json
import math
import re
import warnings
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats as sst
from statsmodels.stats.multitest import multipletests

from ringlab import schema
from ringlab.catalog import CALLS, Verdict
from ringlab.errors import DataError, ParamError
from ringlab.rundir.envjson import RunEnv
from ringlab.rundir.reader import RunOutput

ALPHA = 0.05
LEVEL = 0.95
#: the equivalence margin when env.json names none (docs/verdicts.md: +-1%)
DEFAULT_MARGIN = 0.01
#: exact rank-test null distributions up to these sizes (ringlab.stats.ranktests' docstring)
EXACT_SIGNED_RANK_MAX = 400
EXACT_MWU_MAX = 2500
#: compare.csv writes floats at full precision: recomputed values agree to this relative error
CSV_REL_TOL = 1e-6
INSTRUCTION_METRICS = {"instructions_per_op", "instructions"}


class VerifyError(ParamError):
    """A run folder verify cannot read (exit 2)."""


@dataclass
class Finding:
    """One printed number that does not recompute."""
    file: str
    row: str
    field: str
    printed: str
    recomputed: str

    def __str__(self) -> str:
        return f"{self.file}: {self.row}: {self.field}: printed {self.printed}, recomputed {self.recomputed}"


@dataclass
class Result:
    run: Path
    checked: int = 0
    findings: list[Finding] = field(default_factory=list)
    not_checked: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def text(self) -> str:
        lines = [f"verify {self.run}: {self.checked} numbers checked in {', '.join(self.files) or 'no file'}; "
                 f"{len(self.findings)} disagree"]
        lines += [f"DISAGREES {f}" for f in self.findings]
        lines += [f"not checked: {w}" for w in dict.fromkeys(self.not_checked)]
        return "\n".join(lines)


# -- rank tests, as docs/verdicts.md states them ----------------------------------------------
# scipy's wilcoxon / mannwhitneyu give p but not the null distribution's quantiles that the
# inverted CI needs, so the two null distributions are built here (a few lines each).

def _signed_rank_cdf(n: int) -> np.ndarray:
    p = np.zeros(n * (n + 1) // 2 + 1)
    p[0] = 1.0
    for i in range(1, n + 1):
        q = p.copy()
        q[i:] += p[:len(p) - i]
        p = q * 0.5
    return np.minimum(np.cumsum(p), 1.0)


def _mwu_cdf(nx: int, ny: int) -> np.ndarray:
    # counts of U = #{y > x} over the interleavings: f(i, j) = f(i-1, j) shifted by j + f(i, j-1)
    M = nx * ny
    f = [[None] * (ny + 1) for _ in range(nx + 1)]
    for i in range(nx + 1):
        for j in range(ny + 1):
            if i == 0 or j == 0:
                a = np.zeros(M + 1)
                a[0] = 1.0
            else:
                a = f[i][j - 1].copy()
                a[j:] += f[i - 1][j][:M + 1 - j]
            f[i][j] = a
    c = f[nx][ny]
    return np.minimum(np.cumsum(c / c.sum()), 1.0)


class _Null:
    def __init__(self, kind: str, *n: int):
        if kind == "signed_rank":
            (k,) = n
            self.M = k * (k + 1) // 2
            self.sd = math.sqrt(k * (k + 1) * (2 * k + 1) / 24)
            self.table = _signed_rank_cdf(k) if k <= EXACT_SIGNED_RANK_MAX else None
        else:
            nx, ny = n
            self.M = nx * ny
            self.sd = math.sqrt(nx * ny * (nx + ny + 1) / 12)
            self.table = _mwu_cdf(nx, ny) if nx * ny <= EXACT_MWU_MAX else None
        self.mu = self.M / 2

    def cdf(self, t: int) -> float:
        if t < 0:
            return 0.0
        if t >= self.M:
            return 1.0
        if self.table is not None:
            return float(self.table[t])
        return float(sst.norm.cdf((t + 0.5 - self.mu) / self.sd))

    def crit(self, a: float) -> int:
        """Largest k with P(T <= k - 1) <= a/2."""
        k = 0
        if self.table is not None:
            k = int(np.searchsorted(self.table, a / 2, side="right"))
        elif self.sd > 0:
            k = max(0, int(math.floor(self.mu + self.sd * sst.norm.ppf(a / 2))))
            while k > 0 and self.cdf(k - 1) > a / 2:
                k -= 1
            while self.cdf(k) <= a / 2:
                k += 1
        return max(0, min(k, (self.M + 1) // 2))


def _rank(values: np.ndarray, null: _Null, level: float) -> tuple[float, float, float, float]:
    """(estimate, ci_low, ci_high, p) from the Walsh averages / pairwise differences ``values``."""
    v = np.sort(values)
    est = float(np.median(v))
    k = null.crit(1 - level)
    lo, hi = (float(v[k - 1]), float(v[null.M - k])) if k >= 1 else (math.nan, math.nan)
    pos, neg = int((v > 0).sum()), int((v < 0).sum())
    zero = len(v) - pos - neg
    p = min(1.0, 2 * null.cdf(min(pos, neg) + zero))
    return est, lo, hi, p


def signed_rank(d: np.ndarray, level: float):
    i, j = np.triu_indices(len(d))
    return _rank((d[i] + d[j]) / 2, _Null("signed_rank", len(d)), level)


def rank_sum(x: np.ndarray, y: np.ndarray, level: float):
    return _rank((y[None, :] - x[:, None]).ravel(), _Null("mwu", len(x), len(y)), level)


# -- the layouts fit ----------------------------------------------------------------------------

def layouts_fit(d: np.ndarray, layout: np.ndarray) -> dict:
    """REML fit of d = theta + u_layout + e: theta, se, df = K - 1, sigma2 layout and round."""
    groups, inv = np.unique(layout, return_inverse=True)
    n_k = np.bincount(inv)
    K, N = len(groups), len(d)
    out = {"K": K, "df": K - 1, "method": ""}
    if float(np.std(d, ddof=1)) == 0:
        return {**out, "theta": float(d.mean()), "se": 0.0, "s2l": 0.0, "s2r": 0.0, "n_k": n_k}
    if np.all(n_k == n_k[0]):
        n = int(n_k[0])
        y = pd.Series(d).groupby(inv)
        means = y.mean().to_numpy()
        theta = float(d.mean())
        if n == 1:
            return {**out, "theta": theta, "se": float(np.std(d, ddof=1)) / math.sqrt(K), "s2l": math.nan,
                    "s2r": math.nan, "n_k": n_k, "method": "closed"}
        msb = n * float(np.var(means, ddof=1))
        msw = float(((d - means[inv]) ** 2).sum()) / (K * (n - 1))
        if msb >= msw:
            return {**out, "theta": theta, "se": math.sqrt(msb / N), "s2l": (msb - msw) / n, "s2r": msw,
                    "n_k": n_k, "method": "closed"}
        s2 = float(((d - theta) ** 2).sum()) / (N - 1)       # REML's sigma_L^2 is 0; the SE stays MSB's
        return {**out, "theta": theta, "se": math.sqrt(msb / N), "s2l": 0.0, "s2r": s2, "n_k": n_k, "method": "closed"}
    c, s = float(d.mean()), float(d.std(ddof=1))
    z = (d - c) / s          # MixedLM's tolerances are absolute: fit on the standardised scale
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = sm.MixedLM(z, np.ones((N, 1)), groups=inv).fit(reml=True, method=["powell", "nm"])
    s2l, s2r = float(np.asarray(res.cov_re)[0, 0]), float(res.scale)
    if res.converged and s2l <= 1e-6 * s2r:     # the boundary: the pooled rounds, the SE the weighted MSB's
        m = pd.Series(d).groupby(inv).mean().to_numpy()
        se = math.sqrt(float((n_k * (m - c) ** 2).sum()) / ((K - 1) * N))
        return {**out, "theta": c, "se": se, "s2l": 0.0, "s2r": s * s, "n_k": n_k, "method": "mixedlm"}
    if res.converged and math.isfinite(float(res.bse_fe[0])):
        return {**out, "theta": c + s * float(res.fe_params[0]), "se": s * float(res.bse_fe[0]), "s2l": s * s * s2l,
                "s2r": s * s * s2r, "n_k": n_k, "method": "mixedlm"}
    means = pd.Series(d).groupby(inv).mean().to_numpy()     # not converged: the pair means
    s2r = float(((d - means[inv]) ** 2).sum()) / (N - K)
    return {**out, "theta": float(means.mean()), "se": float(np.std(means, ddof=1)) / math.sqrt(K),
            "s2l": max(0.0, float(np.var(means, ddof=1)) - s2r * float(np.mean(1 / n_k))), "s2r": s2r, "n_k": n_k,
            "method": "pair means"}


def _t_ci(theta: float, se: float, df: int, level: float) -> tuple[float, float]:
    q = float(sst.t.ppf(0.5 + level / 2, df))
    return theta - q * se, theta + q * se


def _t_p(theta: float, se: float, df: int) -> float:
    if se == 0:
        return 1.0 if theta == 0 else 0.0
    return float(2 * sst.t.sf(abs(theta) / se, df))


# -- reading the run folder --------------------------------------------------------------------

def _same(a, b) -> bool:
    """A raw.csv cell and a printed configuration value name the same value."""
    sa, sb = str(a).strip(), str(b).strip()
    if sa == sb or sa.lower() == sb.lower():
        return True
    try:
        fa, fb = float(sa), float(sb)
    except ValueError:
        return False
    return fa == fb or (math.isnan(fa) and math.isnan(fb))


def _label(config: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items()) or "all"


def _parse_label(text: str) -> dict:
    if not isinstance(text, str) or text in ("", "all"):
        return {}
    out = {}
    for part in re.split(r",(?=[A-Za-z_][A-Za-z0-9_]*=)", text):
        k, _, v = part.partition("=")
        out[k] = v
    return out


def _margin(env: RunEnv) -> float:
    """The equivalence margin, a fraction: the run's ``-p margin`` (percent, env.json
    ``parameters.margin``), else 1%."""
    pct = env.parameters.get("margin")
    if isinstance(pct, (int, float)) and not isinstance(pct, bool) and 0 <= pct < 100:
        return float(pct) / 100
    return DEFAULT_MARGIN


def _baseline(env: RunEnv, variants: list[str]) -> str | None:
    params = env.parameters
    listed = params.get("variants")
    listed = listed.split(",") if isinstance(listed, str) else (listed or [])
    for name in (env.report.get("baseline"), env.baseline, params.get("baseline"), *listed):
        if name and str(name) in variants:
            return str(name)
    return variants[0] if variants else None


@dataclass
class Row:
    """One recomputed comparison."""
    config: dict
    baseline: str
    candidate: str
    metric: str
    lower_is_better: bool
    v: dict = field(default_factory=dict)      # compare.csv's field names -> recomputed values
    est: float = math.nan                      # log scale (exact: raw difference)
    d: np.ndarray | None = None
    x: np.ndarray | None = None
    y: np.ndarray | None = None
    fit: dict | None = None
    design: str = ""

    @property
    def label(self) -> str:
        return f"{_label(self.config)} {self.candidate} vs {self.baseline}"

    def ci(self, level: float) -> tuple[float, float]:
        """The CI of the estimate at ``level`` (log scale)."""
        if self.design == "layouts":
            return _t_ci(self.fit["theta"], self.fit["se"], self.fit["df"], level)
        if self.design == "paired":
            return signed_rank(self.d, level)[1:3]
        if self.design == "unpaired":
            return rank_sum(self.x, self.y, level)[1:3]
        return math.nan, math.nan


def _measurements(raw: pd.DataFrame, metric: str) -> pd.DataFrame:
    keep = pd.Series(True, index=raw.index)
    if "status" in raw.columns:
        keep &= ~schema.failed_mask(raw)
    if "warmup" in raw.columns:
        keep &= ~schema.warmup_mask(raw)
    vals = pd.to_numeric(raw[metric], errors="coerce")
    keep &= vals.notna()
    out = raw.loc[keep].copy()
    out[metric] = vals[keep].astype(float)
    col = next((c for c in ("round", "trial") if c in out.columns
                and pd.to_numeric(out[c], errors="coerce").notna().any()), None)
    if col is not None:
        key = pd.to_numeric(out[col], errors="coerce")
        if "run_id" in out.columns and out["run_id"].nunique(dropna=False) > 1:
            key = out["run_id"].astype(str) + "/" + key.astype("Int64").astype(str)
        out["_round"] = key
    return out


def _per_round(sub: pd.DataFrame, metric: str) -> pd.Series:
    if "_round" not in sub.columns:
        return pd.Series(sub[metric].to_numpy(), index=pd.RangeIndex(len(sub)), dtype=float)
    return sub.groupby("_round", sort=True)[metric].median()


def _hl(v: np.ndarray) -> float:
    i, j = np.triu_indices(len(v))
    return float(np.median((v[i] + v[j]) / 2))


def recompute_row(meas: pd.DataFrame, config: dict, baseline: str, candidate: str, metric: str) -> Row:
    sel = pd.Series(True, index=meas.index)
    for k, val in config.items():
        if k in meas.columns:
            sel &= meas[k].map(lambda a, val=val: _same(a, val))
    sub = meas.loc[sel]
    bsub, csub = sub[sub["variant"].astype(str) == baseline], sub[sub["variant"].astype(str) == candidate]
    lib = metric in schema.LOWER_IS_BETTER
    r = Row(config, baseline, candidate, metric, lib)
    b_all, c_all = bsub[metric].to_numpy(float), csub[metric].to_numpy(float)
    mb = float(np.median(b_all)) if len(b_all) else math.nan
    mc = float(np.median(c_all)) if len(c_all) else math.nan
    r.v.update(n_baseline=len(b_all), n_candidate=len(c_all), median_baseline=mb, median_candidate=mc,
               delta_abs=mc - mb, ratio_medians_pct=(mc / mb - 1) * 100 if mb else math.nan)
    if len(b_all) >= 2 and len(c_all) >= 2 and (np.std(b_all) > 0 or np.std(c_all) > 0):
        r.v["p_welch"] = float(sst.ttest_ind(b_all, c_all, equal_var=False).pvalue)
    callgrind = ("icount_source" in sub.columns and metric in INSTRUCTION_METRICS and len(b_all) and len(c_all)
                 and (pd.concat([bsub, csub])["icount_source"].astype(str) == "callgrind").all())
    b, c = _per_round(bsub, metric).dropna(), _per_round(csub, metric).dropna()
    common = b.index.intersection(c.index)
    paired = "_round" in sub.columns and len(common) >= 2 and len(common) >= 0.5 * max(len(b), len(c))
    # the baseline's center: Hodges-Lehmann of its per-round values over the rounds compared
    # (log scale when positive); the candidate's is center x the estimated ratio
    vb = (b.loc[common] if paired else b).to_numpy(float)
    vb = vb[np.isfinite(vb)]
    if len(vb):
        log = bool(np.all(vb > 0))
        r.v["center_baseline"] = math.exp(_hl(np.log(vb))) if log else _hl(vb)
    if len(b_all) and len(c_all) and (callgrind or (np.all(b_all == b_all[0]) and np.all(c_all == c_all[0]))):
        r.design, r.est = "exact", mc - mb
        r.v.update(design="exact", n_pairs=0, delta_pct=(mc - mb) / abs(mb) * 100 if mb else math.nan)
        r.v["center_candidate"] = r.v.get("center_baseline", math.nan) * (1 + r.v["delta_pct"] / 100)
        return r
    if len(b) < 2 or len(c) < 2:      # too few to compare: the row says so, unpaired, no estimate
        r.design = "too few"
        r.v.update(design="unpaired", n_pairs=0)
        return r
    allv = np.concatenate([b.to_numpy(), c.to_numpy()])
    if not np.all(allv > 0):
        r.design = "not positive"
        return r
    if paired:
        r.d = np.log(c.loc[common].to_numpy()) - np.log(b.loc[common].to_numpy())
        r.v["n_pairs"] = len(common)
        K = 0
        if "layout" in sub.columns:
            lay = bsub.groupby("_round", sort=True)["layout"].first().astype(str).reindex(common)
            K = lay.nunique()
            r.v["layouts"] = int(pd.concat([bsub, csub])["layout"].dropna().astype(str).nunique())
        if K >= 2:
            r.design, r.fit = "layouts", layouts_fit(r.d, lay.to_numpy())
            f = r.fit
            r.est, p = f["theta"], _t_p(f["theta"], f["se"], f["df"])
            r.v["layouts"] = f["K"]
            r.v["sigma_layout_pct"] = math.sqrt(f["s2l"]) * 100 if math.isfinite(f["s2l"]) else math.nan
            r.v["sigma_round_pct"] = math.sqrt(f["s2r"]) * 100 if math.isfinite(f["s2r"]) else math.nan
            if math.isfinite(f["s2l"]) and math.isfinite(f["s2r"]):
                unit = f["s2l"] + f["s2r"] * float(np.mean(1.0 / f["n_k"]))
                r.v["layout_share"] = f["s2l"] / unit if unit > 0 else 0.0
        else:
            r.design = "paired"
            r.est, _, _, p = signed_rank(r.d, LEVEL)
    else:
        r.x, r.y = np.log(b.to_numpy()), np.log(c.to_numpy())
        r.design, r.v["n_pairs"] = "unpaired", 0
        r.est, _, _, p = rank_sum(r.x, r.y, LEVEL)
    r.v.update(design=r.design, p_value=p, delta_pct=math.expm1(r.est) * 100)
    lo, hi = r.ci(LEVEL)
    r.v.update(ci_low_pct=math.expm1(lo) * 100, ci_high_pct=math.expm1(hi) * 100)
    r.v["center_candidate"] = r.v["center_baseline"] * math.exp(r.est)
    return r


def _gain(v: float, lib: bool) -> float:
    return -v if lib else v


def finish_family(rows: list[Row], margin: float) -> None:
    """Holm over the run, the CI at each row's Holm level, the verdict, gain_pct."""
    p = np.array([r.v.get("p_value", math.nan) for r in rows], dtype=float)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok)
    adj = multipletests(p[ok], method="holm")[1] if m > 1 else p[ok]
    order = ok[np.argsort(p[ok], kind="stable")]
    stop = next((i for i, j in enumerate(order) if p[j] > ALPHA / (m - i)), m)
    level = {int(j): 1 - ALPHA / (m - min(i, stop)) for i, j in enumerate(order)}
    for r, (i, j) in zip([rows[j] for j in ok], enumerate(ok)):
        r.v["p_holm"] = float(adj[i])
    for i, r in enumerate(rows):
        r.v["family_size"] = m
        lib = r.lower_is_better
        if "delta_pct" in r.v:
            r.v["gain_pct"] = _gain(r.v["delta_pct"], lib)
        if r.design == "exact":
            est = r.est
            if est == 0:
                r.v["verdict"] = (Verdict.SAME_INSTRUCTIONS if r.metric in INSTRUCTION_METRICS
                                  else Verdict.NO_DIFFERENCE).value
            else:
                r.v["verdict"] = _direction(est, r.metric).value
            continue
        if r.design not in ("layouts", "paired", "unpaired"):
            if r.design == "too few":
                r.v["verdict"] = Verdict.INCONCLUSIVE.value
            continue
        lo, hi = r.v["ci_low_pct"], r.v["ci_high_pct"]
        gl, gh = sorted((_gain(lo, lib), _gain(hi, lib)))
        r.v.update(gain_low_pct=gl, gain_high_pct=gh)
        lev = level.get(i, LEVEL)
        hl_lo, hl_hi = (math.expm1(x) * 100 for x in r.ci(lev))
        r.v.update(holm_ci_low_pct=hl_lo, holm_ci_high_pct=hl_hi, holm_ci_level=lev)
        nz = margin * 100
        if not math.isfinite(hl_lo):
            verdict = Verdict.INCONCLUSIVE
        elif hl_lo > 0 or hl_hi < 0:
            verdict = _direction(hl_lo if hl_lo > 0 else hl_hi, r.metric)
        elif lo > 0 or hi < 0:
            verdict = Verdict.NOT_AFTER_HOLM
        elif -nz <= hl_lo and hl_hi <= nz:
            verdict = Verdict.NO_DIFFERENCE
        else:
            verdict = Verdict.INCONCLUSIVE
        r.v["verdict"] = verdict.value


def _direction(sign: float, metric: str) -> Verdict:
    instructions = metric in INSTRUCTION_METRICS
    better = (sign < 0) == (instructions or metric in schema.LOWER_IS_BETTER)
    return Verdict.call(+1 if better else -1, instructions=instructions)


def next_run(r: Row, tau_pct: float, basis: str, source: str) -> tuple[float, float]:
    """(low, high) in % (delta's sign): est +- t_nu sqrt(2 SE^2 + 2 tau^2), each side's SE from
    the 95% CI (docs/verdicts.md "Two intervals")."""
    if r.design not in ("layouts", "paired", "unpaired"):
        return math.nan, math.nan
    df_w = float(r.fit["df"]) if r.design == "layouts" else math.inf
    q = float(sst.t.ppf(0.975, df_w)) if math.isfinite(df_w) else float(sst.norm.ppf(0.975))
    lo, hi = r.ci(LEVEL)
    tau2 = (tau_pct / 100) ** 2 if basis != "none" and math.isfinite(tau_pct) else 0.0
    df_b = math.inf
    if basis == "runs" and "Q-profile" not in (source or ""):   # a bound of 2-3 runs is taken as known
        k = re.search(r"(\d+) runs", source or "")
        df_b = float(int(k.group(1)) - 2) if k else math.inf     # k runs: k - 2 df (docs/verdicts.md)
    out = []
    for s in ((r.est - lo) / q, (hi - r.est) / q):
        a, b = 2 * s * s, 2 * tau2
        den = (a * a / df_w if math.isfinite(df_w) else 0.0) + (b * b / df_b if math.isfinite(df_b) else 0.0)
        nu = (a + b) ** 2 / den if den > 0 else math.inf
        t = float(sst.t.ppf(0.975, nu)) if math.isfinite(nu) else float(sst.norm.ppf(0.975))
        out.append(t * math.sqrt(a + b))
    return math.expm1(r.est - out[0]) * 100, math.expm1(r.est + out[1]) * 100


# -- comparing printed numbers -----------------------------------------------------------------

_NUM = re.compile(r"^[<>≤]?\s*[+\-−]?(\d+\.?\d*|\.\d+)(e[+\-]?\d+)?$", re.I)


def tolerance(printed: str) -> float:
    """Half a unit of the last printed digit, plus 1e-9."""
    s = printed.strip().strip("*%").lstrip("<>≤+-−").lower()
    mant, _, exp = s.partition("e")
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    return 0.5 * 10 ** (-decimals) * (10 ** int(exp) if exp else 1) + 1e-9


def to_float(text: str) -> float | None:
    s = str(text).strip().replace("−", "-").rstrip("%")
    if s.startswith("+"):
        s = s[1:]
    try:
        return float(s)
    except ValueError:
        return None


class Checker:
    def __init__(self, result: Result, file: str):
        self.result, self.file = result, file

    def number(self, row: str, name: str, printed, recomputed, rel: float = 0.0) -> None:
        """``printed`` (text, as printed) against ``recomputed``."""
        if recomputed is None or (isinstance(recomputed, float) and not math.isfinite(recomputed)):
            pv = to_float(str(printed)) if printed is not None else None
            if pv is None or not math.isfinite(pv):
                return      # both empty
            self.bad(row, name, str(printed), "nothing (not computable from raw.csv)")
            return
        text = str(printed).strip()
        if text.startswith(("<", "≤")):
            bound = to_float(text.lstrip("<≤ "))
            self.result.checked += 1
            if bound is None or not recomputed < bound + 1e-9:
                self.bad(row, name, text, f"{recomputed:.6g}")
            return
        pv = to_float(text)
        self.result.checked += 1
        if pv is None or not math.isfinite(pv):
            self.bad(row, name, text, f"{recomputed:.6g}")
            return
        tol = tolerance(text) + rel * abs(recomputed)
        if abs(pv - recomputed) > tol:
            self.bad(row, name, text, f"{recomputed:.6g}")

    def equal(self, row: str, name: str, printed, recomputed) -> None:
        self.result.checked += 1
        if str(printed).strip() != str(recomputed).strip():
            self.bad(row, name, str(printed), str(recomputed))

    def bad(self, row, name, printed, recomputed) -> None:
        self.result.findings.append(Finding(self.file, row, name, printed, recomputed))

    def found(self, r, row: str, name: str):
        """``r``, the comparison a printed line names; where none matches, a finding (``name`` is
        there, no comparison of raw.csv is) and None."""
        if r is None:
            self.bad(row, name, "present", "no single comparison of raw.csv matches it")
        return r

    def change(self, row: str, name: str, printed: str, gain: float, lib: bool) -> None:
        """A %change as the tables print it: "+1.3%", or a factor "×2.1 faster"."""
        text = printed.strip().strip("*").strip()
        m = re.match(r"^[×x]\s*([\d.]+)\s*(\S+)?", text)
        if m:
            self.number(row, name + " (factor)", m.group(1), _factor(gain, lib))
            return
        self.number(row, name, text, gain)

    def change_ci(self, row: str, name: str, printed: str, glo: float, ghi: float, lib: bool) -> None:
        text = printed.strip()
        inner = re.match(r"^\[(.*)\](.*)$", text)
        if not inner:
            self.bad(row, name, text, f"[{glo:+.1f}, {ghi:+.1f}]")
            return
        parts = [p.strip() for p in inner.group(1).split(",")]
        if len(parts) != 2:
            self.bad(row, name, text, f"[{glo:+.1f}, {ghi:+.1f}]")
            return
        if any("×" in p or p.lower().startswith("x") for p in parts):
            printed_f = sorted(re.sub(r"[^\d.]", "", p.split()[0]) for p in parts)
            fac = sorted((_factor(glo, lib), _factor(ghi, lib)))
            printed_f = sorted(printed_f, key=lambda s: float(s) if s else math.nan)
            for p, f, side in zip(printed_f, fac, ("low", "high")):
                self.number(row, f"{name} factor {side}", p, f)
            return
        self.number(row, name + " low", parts[0], glo)
        self.number(row, name + " high", parts[1], ghi)


def _factor(g: float, lib: bool) -> float:
    r = 1 - g / 100 if lib else 1 + g / 100
    return max(r, 1 / r) if math.isfinite(r) and r > 0 else math.nan


# -- the files -----------------------------------------------------------------------------------

#: compare.csv fields checked, and those not, with why
COMPARE_FIELDS = ("n_baseline", "n_candidate", "median_baseline", "median_candidate", "delta_abs",
                  "ratio_medians_pct", "p_welch", "delta_pct", "ci_low_pct", "ci_high_pct", "p_value", "p_holm",
                  "family_size", "n_pairs", "layouts", "sigma_layout_pct", "sigma_round_pct", "layout_share",
                  "holm_ci_low_pct", "holm_ci_high_pct", "holm_ci_level", "gain_pct", "gain_low_pct",
                  "gain_high_pct", "center_baseline", "center_candidate", "next_low_pct", "next_high_pct")
NOT_CHECKED = {
    "trials_needed": "the plan needs the planner's power rule (docs/verdicts.md gives it in words, not to the round)",
    "states, slow_share, delta_fast_pct, delta_slow_pct, ci_fast_*, ci_slow_*, heterogeneity_p":
        "the machine-state classifier (a two-state Markov model) is a diagnostic the docs do not state as a formula",
    "next_between_sd_pct, next_basis": "tau comes from earlier runs or results/calibration/<host>/drift.json, "
                                       "outside the run folder; the next-run interval is checked with the tau "
                                       "the row states",
}


def _row_key(config: dict, candidate: str) -> tuple:
    return (tuple(sorted((k, str(v)) for k, v in config.items())), candidate)


def _resolve(conds: dict, config: dict) -> dict:
    """``conds`` with each key named as the configuration names it: a mail may shorten a column
    ("len" for alloc_len); a key that names no column is a bare value."""
    out: dict = {None: list(conds.get(None, []))}
    for k, v in conds.items():
        if k is None:
            continue
        if k in config:
            out[k] = v
            continue
        like = [c for c in config if c.endswith("_" + k) or c.startswith(k + "_")]
        if len(like) == 1:
            out[like[0]] = v
        else:
            out[None].append(v)
    return out


def _lookup(rows: list[Row], candidate: str, conds: dict) -> Row | None:
    """The row of ``candidate`` whose configuration matches ``conds`` ({column: value} or
    {None: [bare values]}), if exactly one does."""
    found = []
    for r in rows:
        if r.candidate != candidate:
            continue
        conds = _resolve(conds, r.config)
        bare = conds.get(None, [])
        if any(k in r.config and not _same(r.config[k], v) for k, v in conds.items() if k is not None):
            continue
        if any(not any(_same(cv, b) for cv in r.config.values()) for b in bare):
            continue
        found.append(r)
    return found[0] if len(found) == 1 else None


def check_compare_csv(path: Path, rows: list[Row], res: Result) -> None:
    ck = Checker(res, "compare.csv")
    cmp = pd.read_csv(path)
    by_key = {_row_key(r.config, r.candidate): r for r in rows}
    for _, c in cmp.iterrows():
        cfg = _parse_label(c.get("group"))
        r = by_key.get(_row_key(cfg, str(c.get("candidate"))))
        label = f"{c.get('group')} {c.get('candidate')}"
        if r is None:
            ck.bad(label, "row", "present", "no such comparison in raw.csv")
            continue
        ck.equal(label, "design", c.get("design"), r.v.get("design", r.design))
        ck.equal(label, "verdict", c.get("verdict"), r.v.get("verdict", ""))
        tau = pd.to_numeric(c.get("next_between_sd_pct"), errors="coerce")
        basis = str(c.get("next_basis")) if pd.notna(c.get("next_basis")) else "none"
        if basis in ("", "nan"):
            basis = "none"
        nlo, nhi = next_run(r, float(tau) if pd.notna(tau) else math.nan, basis, str(c.get("next_source") or ""))
        r.v.update(next_low_pct=nlo, next_high_pct=nhi)
        if "sign_reproducible" in cmp.columns:
            # a called row: does its next-run interval lie on the side of 0 its CI lies on?
            called = r.v.get("verdict") in CALLS and r.design != "exact" and math.isfinite(nlo)
            same_side = (nlo > 0 and r.v["ci_low_pct"] > 0) or (nhi < 0 and r.v["ci_high_pct"] < 0)
            want = str(same_side) if called else ""
            got = c.get("sign_reproducible")
            ck.equal(label, "sign_reproducible", "" if pd.isna(got) else str(got), want)
        for f in COMPARE_FIELDS:
            if f not in cmp.columns:
                continue
            val = c.get(f)
            if pd.isna(val) and not math.isfinite(float(r.v.get(f, math.nan) or math.nan)):
                continue
            ck.number(label, f, repr(float(val)) if pd.notna(val) else "nan", r.v.get(f, math.nan), rel=CSV_REL_TOL)
    printed = {_row_key(_parse_label(g), str(cand)) for g, cand in zip(cmp["group"], cmp["candidate"])}
    for r in rows:
        if _row_key(r.config, r.candidate) not in printed:
            ck.bad(r.label, "row", "missing", "a comparison raw.csv holds")
    for what, why in NOT_CHECKED.items():
        res.not_checked.append(f"compare.csv {what}: {why}")


def _md_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every markdown table in ``text``: (header cells, rows of cells)."""
    out, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        rule = i + 1 < len(lines) and re.match(r"^\s*\|[\s\-:|]+\|\s*$", lines[i + 1])
        if lines[i].lstrip().startswith("|") and rule:
            head = _cells(lines[i])
            body = []
            j = i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                body.append(_cells(lines[j]))
                j += 1
            out.append((head, body))
            i = j
        else:
            i += 1
    return out


def _cells(line: str) -> list[str]:
    s = line.strip()
    s = s[1:] if s.startswith("|") else s
    s = s[:-1] if s.endswith("|") else s
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", s)]


def _candidate_of(cell: str, candidates: list[str]) -> str | None:
    name = cell.split(":")[0].strip()
    m = re.search(r"\(([^()]*)\)\s*$", name)
    if m and m.group(1) in candidates:
        return m.group(1)
    return name if name in candidates else None


class _HTMLTables(HTMLParser):
    """The tables of an HTML text (a notebook's DataFrame output) as (header cells, rows of cells)."""

    def __init__(self):
        super().__init__()
        self.tables: list[tuple[list[str], list[list[str]]]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._head = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append(([], []))
        elif tag == "thead":
            self._head = True
        elif tag == "tbody":
            self._head = False
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None and self.tables:
            head, body = self.tables[-1]
            if self._head and not head:
                head.extend(self._row)
            elif not self._head:
                body.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def html_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    p = _HTMLTables()
    p.feed(text)
    return [t for t in p.tables if t[0]]


def check_ab_table(text, file: str, rows: list[Row], res: Result, nexts: dict, family=None) -> int:
    """The A/B tables of a markdown text (summary.md, a notebook's output), or of the (header,
    rows) tables given; how many rows it checked. A row whose ``baseline`` cell names another
    variant than the rows' baseline is looked up in ``family(that variant)``, the comparisons
    against it (``recompute(run, baseline=...)``), when ``family`` is given."""
    ck = Checker(res, file)
    candidates = sorted({r.candidate for r in rows})
    own = rows[0].baseline if rows else None
    variants = sorted({*candidates, *([own] if own else [])})
    cfg_cols = {k for r in rows for k in r.config}
    unit = re.compile(r"(\S+) (?:\S+/\S+|" + re.escape(rows[0].metric if rows else "ns_per_op") + ")")
    n = 0
    for head, body in (_md_tables(text) if isinstance(text, str) else text):
        if not any(h.startswith("%change") for h in head):
            continue
        # the arms' columns: "baseline" / "candidate" (cells "name: 4.07 ns"), or one table per
        # candidate whose headers name the arms ("before (before)", "after (after)", or the arm and
        # the metric's unit: "prebatch ns/op"); a configuration column is no arm's
        arm_of, name_of = {}, {}
        for h in head:
            if h in cfg_cols:
                continue
            m = re.search(r"\(([^()]*)\)", h) or unit.fullmatch(h)
            name = name_of[h] = m.group(1) if m else h
            if h in ("baseline", "candidate"):
                arm_of[h] = h
            elif name in candidates:
                arm_of[h] = "candidate"
            elif rows and name == rows[0].baseline:
                arm_of[h] = "baseline"
        fixed = next((name_of[h] for h, a in arm_of.items() if a == "candidate" and h != "candidate"), None)
        if "candidate" not in head and fixed is None:
            continue
        for cells in body:
            cell = dict(zip(head, cells))
            fam, against = rows, ""
            base = _candidate_of(cell.get("baseline", ""), variants) if "baseline" in cell else None
            if base and base != own and family is not None:
                fam, against = family(base), f" vs {base}"
            cand = fixed or _candidate_of(cell.get("candidate", ""), sorted({r.candidate for r in fam}))
            conds = {k: v for k, v in cell.items() if k in cfg_cols}
            r = _lookup(fam, cand, conds) if cand else None
            label = " ".join([f"{k}={v}" for k, v in conds.items()] + [cand or cell.get("candidate", "")]) + against
            if ck.found(r, label, "row") is None:
                continue
            n += 1
            lib = r.lower_is_better
            g = r.v.get("gain_pct", math.nan)
            for h, v in cell.items():
                if h.startswith("%change"):
                    ck.change(label, h, v, g, lib)
                elif h.startswith("95% CI of %change"):
                    ck.change_ci(label, h, v, r.v.get("gain_low_pct", math.nan), r.v.get("gain_high_pct", math.nan),
                                 lib)
                elif h.startswith("next run here"):
                    if id(r) not in nexts:
                        res.not_checked.append(f"{file} {h}: no compare.csv states the rows' tau and basis")
                        continue
                    lo, hi = nexts[id(r)]
                    if v.strip() not in ("", "n/a", "—"):
                        gl, gh = sorted((_gain(lo, lib), _gain(hi, lib)))
                        ck.change_ci(label, h, v, gl, gh, lib)
                elif h.startswith("layouts and machine states"):
                    m = re.match(r"(\d+) layout pairs, layout spread ([\d.]+) points \(([\d.]+)% of the CI width", v)
                    if m and r.design == "layouts":
                        ck.number(label, "layout pairs", m.group(1), r.v.get("layouts", math.nan))
                        ck.number(label, "layout spread", m.group(2), r.v.get("sigma_layout_pct", math.nan))
                        ck.number(label, "layout share %", m.group(3), r.v.get("layout_share", math.nan) * 100)
                    res.not_checked.append(f"{file} {h}: the machine states (the classifier's diagnostic)")
                elif h == "p (Holm)":
                    ck.number(label, h, v, r.v.get("p_holm", math.nan))
                elif h == "family size":
                    ck.number(label, h, v, r.v.get("family_size", math.nan))
                elif h == "n_pairs":
                    ck.number(label, h, v, r.v.get("n_pairs", math.nan))
                elif h == "design":
                    ck.equal(label, h, v, r.v.get("design", r.design))
                elif h == "verdict":
                    word = r.v.get("verdict", "")
                    ck.result.checked += 1
                    if not v.startswith(word):
                        ck.bad(label, h, v.split(" (")[0], word)
                elif h in arm_of:
                    m = re.search(r"(?:^|:)\s*([+\-]?[\d.]+(?:e[+\-]?\d+)?)(?:\s|$)", v)
                    if m:
                        key = "center_" + arm_of[h]
                        ck.number(label, f"{arm_of[h]} center", m.group(1), r.v.get(key, math.nan))
    return n


def _mail_conds(label: str) -> dict:
    conds: dict = {None: []}
    for tok in label.split():
        if "=" in tok:
            k, _, v = tok.partition("=")
            conds[k] = v
        else:
            conds[None].append(tok)
    return conds


def _further_rows(run: Path | None, name: str, cache: dict) -> list[Row] | None:
    """The recomputed rows of the run folder's sub-run ``name`` (a further run the mail prints
    below its table, labelled by its folder's name), or None when there is no such sub-run."""
    if run is None or not name or "/" in name or name.startswith("."):
        return None
    if name not in cache:
        sub = run / name
        cache[name] = recompute(sub)[0] if (sub / "raw.csv").is_file() else None
    return cache[name]


def _by_sub_run(tables, run: Path, rows: list[Row], cache: dict) -> list[tuple[str, list, list[Row]]]:
    """A notebook's tables with their rows grouped by the run folder they compare, as (sub-run name,
    or "" for the run itself; the tables; its recomputed rows): a row whose ``build`` cell names a
    sub-run of the run (verdict-check's ``aligned`` build, measured into ``RUN/aligned``) is that
    sub-run's comparison, recomputed from its own raw.csv; every other row is the run's own."""
    groups: dict = {}
    for head, body in tables:
        col = head.index("build") if "build" in head else None
        for cells in body:
            name = cells[col].strip() if col is not None and col < len(cells) else ""
            key = name if _further_rows(run, name, cache) is not None else ""
            groups.setdefault(key, {}).setdefault(tuple(head), []).append(cells)
    return [(k, [(list(h), b) for h, b in t.items()], cache[k] if k else rows) for k, t in groups.items()]


def check_mail(text: str, rows: list[Row], res: Result, nexts: dict, run: Path | None = None) -> None:
    ck = Checker(res, "mail.txt")
    further: dict = {}
    candidates = sorted({r.candidate for r in rows}, key=len, reverse=True)
    baseline = rows[0].baseline if rows else ""
    lines = text.splitlines()
    cand = None
    for i, line in enumerate(lines):
        # a table's head: "<baseline> ±%sd   %change   <candidate> ±%sd  <unit>"
        m = re.match(r"^\s*(\S+)(?:\s+±%sd)?\s+%change\s+(\S+)(?:\s+±%sd)?\s+(\S+)\s*$", line)
        if m:
            cand = m.group(2) if m.group(2) in candidates else None
            continue
        if cand is None:
            continue
        m = re.match(r"^\s*([\d.]+(?:e[+\-]?\d+)?)\s+(?:±\S+\s+)?(\*?[+\-−]?[\d.]+%\*?|\*?[×x][\d.]+ \w+\*?)\s+"
                     r"([\d.]+(?:e[+\-]?\d+)?)\s+(?:±\S+\s+)?(.*)$", line)
        if not m:
            if not line.strip() or line.startswith("-"):
                continue
            if not line.startswith(" "):
                cand = None
            continue
        label = m.group(4)
        first = label.split()[0] if label.split() else ""
        if "/" in first and "=" not in first:     # "instr/op mode=0 (callgrind)": another metric's row
            res.not_checked.append(f"mail.txt {first} rows: another metric than {rows[0].metric} "
                                   "(its exact comparison is not in compare.csv's family)")
            continue
        r = _lookup(rows, cand, _mail_conds(label))
        rl = f"{cand} {label}"
        sub = _further_rows(run, first, further) if r is None else None
        if sub:
            r = _lookup(sub, cand, _mail_conds(label[len(first):]))
        if ck.found(r, rl, "row") is None:
            continue
        ck.number(rl, "baseline center", m.group(1), r.v.get("center_baseline"))
        ck.change(rl, "%change", m.group(2), r.v.get("gain_pct", math.nan), r.lower_is_better)
        ck.number(rl, "candidate center", m.group(3), r.v.get("center_candidate"))
    # the interval lines: "  +0.5% [-6.3, +6.8]    next [-9.2, +9.3]    prebatch mode=0 same-cpu"
    for line in lines:
        m = re.match(r"^\s+(\S+)\s+(\[[^\]]*\])\s+next\s+(\[[^\]]*\])\s+(\S+)\s*(.*)$", line)
        if not m or m.group(4) not in candidates:
            continue
        r = _lookup(rows, m.group(4), _mail_conds(m.group(5)))
        rl = f"{m.group(4)} {m.group(5)}"
        if ck.found(r, rl, "interval line") is None:
            continue
        lib = r.lower_is_better
        ck.change(rl, "interval %change", m.group(1), r.v.get("gain_pct", math.nan), lib)
        ck.change_ci(rl, "95% CI", m.group(2), r.v.get("gain_low_pct", math.nan),
                     r.v.get("gain_high_pct", math.nan), lib)
        if id(r) not in nexts:
            res.not_checked.append("mail.txt next intervals: no compare.csv states the rows' tau and basis")
            continue
        lo, hi = nexts[id(r)]
        gl, gh = sorted((_gain(lo, lib), _gain(hi, lib)))
        ck.change_ci(rl, "next", m.group(3), gl, gh, lib)
    joined = re.sub(r"\s*\n\s+", " ", text)
    # "n: 30 rounds over 8 layout pairs per row": every row's rounds and layout pairs
    m = re.search(r"\bn: (\d+) rounds over (\d+) layout pairs per row", re.sub(r"\s+", " ", text))
    if m:
        for r in rows:
            if r.design == "layouts":
                rl = f"{r.candidate} {_label(r.config)}"
                ck.number(rl, "n rounds", m.group(1), r.v.get("n_pairs", math.nan))
                ck.number(rl, "n layout pairs", m.group(2), r.v.get("layouts", math.nan))
    # headlines: "<cand> vs <base>: 21.7% regression of ns/op (<label>), 95% CI [-37.6, -7.7]"
    for m in re.finditer(r"(\S+) vs (\S+): ([\d.]+)% (regression|improvement) of \S+ \(([^)]*)\), 95% CI "
                         r"(\[[^\]]*\])", joined):
        r = _lookup(rows, m.group(1), _mail_conds(m.group(5)))
        rl = f"{m.group(1)} {m.group(5)} (headline)"
        if ck.found(r, rl, "headline") is None:
            continue
        g = r.v.get("gain_pct", math.nan)
        ck.number(rl, "headline %", m.group(3), abs(g))
        ck.equal(rl, "headline direction", m.group(4), "improvement" if g > 0 else "regression")
        ck.change_ci(rl, "headline 95% CI", m.group(6), r.v.get("gain_low_pct", math.nan),
                     r.v.get("gain_high_pct", math.nan), r.lower_is_better)
    # the commit block: "(<cand> vs <base>, <label>):" ... "before -> after: A -> B unit, -x% [lo, hi] (95% CI,
    # + = better)" and "should show: [lo, hi]": the tables' one sign (gain_pct), a factor past ±50%
    for m in re.finditer(r"\((\S+) vs (\S+), ([^)]*)\):.*?before -> after: ([\d.]+(?:e[+\-]?\d+)?) -> "
                         r"([\d.]+(?:e[+\-]?\d+)?) \S+, ([×x][\d.]+ \w+|\S+) (\[[^\]]*\])(?: \((95% CI[^)]*)\))?"
                         r"(?:[^\n]*?should show: (\[[^\]]*\]))?", joined, re.S):
        r = _lookup(rows, m.group(1), _mail_conds(m.group(3)))
        rl = f"{m.group(1)} {m.group(3)} (commit block)"
        if ck.found(r, rl, "commit block") is None:
            continue
        lib = r.lower_is_better
        ck.number(rl, "before", m.group(4), r.v.get("center_baseline"))
        ck.number(rl, "after", m.group(5), r.v.get("center_candidate"))
        ck.change(rl, "change", m.group(6), r.v.get("gain_pct", math.nan), lib)
        ck.change_ci(rl, "95% CI", m.group(7), r.v.get("gain_low_pct", math.nan), r.v.get("gain_high_pct", math.nan),
                     lib)
        if not m.group(6).startswith(("×", "x")):   # a percent states its sign in the line (pasted without the header)
            ck.equal(rl, "sign stated", m.group(8) or "none", "95% CI, + = better")
        if m.group(9) and id(r) not in nexts:
            res.not_checked.append("mail.txt next intervals: no compare.csv states the rows' tau and basis")
        elif m.group(9):
            lo, hi = nexts[id(r)]
            gl, gh = sorted((_gain(lo, lib), _gain(hi, lib)))
            ck.change_ci(rl, "next run", m.group(9), gl, gh, lib)
    res.not_checked.append("mail.txt ±%sd, trial length and wall time, noise floor, instruction counts: not in "
                           "docs/verdicts.md's formulas (arm spread, timings, calibration files)")


def recompute(run_dir, baseline: str | None = None) -> tuple[list[Row], dict]:
    """Every comparison of the run, recomputed from raw.csv and env.json (and the
    configuration labels compare.csv prints, to name the rows); with ``baseline``, the family
    of every other variant against that one (a notebook's table "each against base") instead
    of the run's own."""
    run = Path(run_dir)
    raw_path = run / "raw.csv"
    if not run.is_dir():
        raise VerifyError(f"{run}: not a folder; verify needs a run folder with raw.csv (and env.json)")
    if not raw_path.is_file():
        raise VerifyError(f"{run}: no raw.csv; verify needs the run's raw.csv (and env.json) to recompute "
                          "the printed numbers from")
    # the files are read as every ringlab reader reads them (ringlab.rundir: raw.csv's checks and the
    # run constants env.json keeps); what verify writes again is the statistics, not the file format
    try:
        folder = RunOutput(run)
        env = folder.env
        raw = folder.read_raw(required=())
    except DataError as e:
        raise VerifyError(str(e)) from e
    if "variant" not in raw.columns:
        raise VerifyError(f"{raw_path}: no 'variant' column; verify needs the arms compared")
    cmp = pd.read_csv(run / "compare.csv") if (run / "compare.csv").is_file() else None
    rep = env.report
    metric = None
    if cmp is not None and "metric" in cmp.columns and len(cmp):
        metric = str(cmp["metric"].iloc[0])
    metric = metric or rep.get("metric") or schema.PRIMARY_METRIC
    if metric not in raw.columns:
        raise VerifyError(f"{raw_path}: no '{metric}' column; verify needs the metric the report compared")
    variants = sorted(map(str, raw["variant"].dropna().unique()))
    if baseline is not None:
        if baseline not in variants:
            raise VerifyError(f"{raw_path}: no variant '{baseline}' to compare against")
    elif cmp is not None and "baseline" in cmp.columns and len(cmp):
        baseline = str(cmp["baseline"].iloc[0])
    else:
        baseline = _baseline(env, variants)
    meas = _measurements(raw, metric)
    if cmp is not None and len(cmp):
        configs = [dict(t) for t in dict.fromkeys(tuple(_parse_label(g).items()) for g in cmp["group"])]
    else:
        cols = [c for c in schema.param_columns(raw.columns) if c in meas.columns
                and c not in ("layout", "ring_offset", "env_pad")]
        keys = meas[cols].astype(str).drop_duplicates().sort_values(cols) if cols else pd.DataFrame([{}])
        configs = [dict(zip(cols, k)) for k in keys.itertuples(index=False)]
    rows = [recompute_row(meas, cfg, baseline, cand, metric) for cfg in configs for cand in variants
            if cand != baseline]
    rows = [r for r in rows if r.v["n_baseline"] or r.v["n_candidate"]]
    finish_family(rows, _margin(env))
    return rows, {"metric": metric, "baseline": baseline, "margin": _margin(env)}


def _rerendered(run: Path) -> str:
    """What env.json's ``rerendered`` record says of reports re-rendered after the run ("" when none):
    the executed notebook then keeps the tables it printed with the code of its run, and only the
    re-rendered reports are held to today's formulas (docs/results.md)."""
    try:
        rec = RunOutput(run).env.rerendered
    except DataError:
        return ""
    if not rec.get("commit"):
        return ""
    files = ", ".join(map(str, rec.get("files") or [])) or "the reports"
    return (f"{files} were re-rendered from the same trials by ringlab {str(rec['commit'])[:12]} on "
            f"{rec.get('utc', '?')} (nothing re-measured), so only they are held to today's formulas")


def verify(run_dir) -> Result:
    """Recompute the run and compare every printed number (module docstring)."""
    run = Path(run_dir)
    rows, info = recompute(run)
    res = Result(run)
    for r in rows:
        if r.design == "not positive":
            res.not_checked.append(f"{r.label}: values not all positive (the relative-difference scale is not "
                                   "in docs/verdicts.md's formulas)")
    nexts: dict = {}
    cmp_path = run / "compare.csv"
    if cmp_path.is_file():
        res.files.append("compare.csv")
        check_compare_csv(cmp_path, rows, res)
        nexts = {id(r): (r.v["next_low_pct"], r.v["next_high_pct"]) for r in rows if "next_low_pct" in r.v}
    else:
        res.not_checked.append("next-run intervals: no compare.csv states the row's tau and basis")
    if (run / "summary.md").is_file():
        res.files.append("summary.md")
        text = (run / "summary.md").read_text(errors="replace")
        if not check_ab_table(text, "summary.md", rows, res, nexts) and rows:
            res.not_checked.append("summary.md: no A/B table found")
    if (run / "mail.txt").is_file():
        res.files.append("mail.txt")
        check_mail((run / "mail.txt").read_text(errors="replace"), rows, res, nexts, run)
    rerendered = _rerendered(run)
    further: dict = {}
    families: dict = {}

    def family(name: str) -> list[Row]:
        """The comparisons against ``name``, for a notebook row whose baseline is another variant."""
        if name not in families:
            families[name] = recompute(run, baseline=name)[0]
        return families[name]

    for nb in sorted(run.glob("*.ipynb")):
        if rerendered:
            res.not_checked.append(f"{nb.name}: its tables were printed when the run was made; {rerendered}")
            continue
        res.files.append(nb.name)
        try:
            cells = json.loads(nb.read_text()).get("cells", [])
        except (json.JSONDecodeError, UnicodeDecodeError):
            res.not_checked.append(f"{nb.name}: not a readable notebook")
            continue
        found = 0
        for c in cells:
            for o in c.get("outputs", []):
                for kind, v in (o.get("data") or {}).items():
                    s = "".join(v) if isinstance(v, list) else str(v)
                    if "%change" not in s:
                        continue
                    tables = {"text/markdown": _md_tables, "text/html": html_tables}.get(kind)
                    for sub, tabs, sub_rows in _by_sub_run(tables(s) if tables else [], run, rows, further):
                        found += check_ab_table(tabs, f"{nb.name} ({sub})" if sub else nb.name, sub_rows, res,
                                                {} if sub else nexts, None if sub else family)
        if not found:
            res.not_checked.append(f"{nb.name}: no A/B table in today's form (a %change column) among its outputs")
    return res


__all__ = ["Finding", "Result", "VerifyError", "recompute", "verify", "tolerance", "signed_rank", "rank_sum",
           "layouts_fit"]
