"""Cause-finding: which recorded column separates slow trials from the others.

For each group whose metric is multimodal (or has severe outliers), the trials
are split into the main mode and the rest ("slow" trials for lower-is-better
metrics), and every recorded candidate cause is tested against that split:

* categorical (actual_pair_class, pair_class, cross-CPU and migration markers
  derived from cpu_*_start/end, the actual CPUs): Fisher's exact test for a 2x2
  table, chi-square contingency otherwise;
* numeric (procs_running, load1, cpu_migrations, context_switches, ctx_involuntary,
  ctx_voluntary, steal_delta, order, timestamp (drift), trial (warm-up)): Mann-Whitney U.

When the named column measures other work on the machine (``BUSY_COLUMNS``) and is higher in
the slow trials, the cause is called **machine busy**.  ``busy_rounds`` asks the same
question per round over the whole run (slower rounds vs their busy columns), and
``diagnose`` appends its finding as a last record (kind "machine busy") when it holds.

p-values are Holm-corrected over the candidates; a cause is named only when the
corrected p < 0.01.  Otherwise we say honestly that no recorded factor explains it.

``diagnose_ab``: equal instruction counts but different times?
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sst

from ringlab import schema
from ringlab.catalog import Verdict, is_call
from ringlab.stats import outliers as _out
from ringlab.stats.compare import compare
from ringlab.stats.layouts import LAYOUT_COLUMNS
from ringlab.stats.decide import holm
from ringlab.stats.rounds import comparison_columns, round_key
from ringlab.stats.summary import format_value, group_columns, measurements

CAUSE_ALPHA = 0.01

NUMERIC_CAUSES = ["procs_running", "load1", "cpu_migrations", "context_switches", "ctx_involuntary",
                  "ctx_voluntary", "steal_delta", "order", "timestamp", "trial"]
#: columns that measure other work on the machine: higher in slow trials = "machine busy"
BUSY_COLUMNS = ["procs_running", "load1", "steal_delta", "ctx_involuntary", "context_switches"]
BUSY_ADVICE = ("other work ran on the machine during those rounds: stop it, isolate the measured CPUs, "
               "or run with -p quiet wait")
#: a busy column *lower* in the slow trials: other work does not explain them
QUIET_ADVICE = ("the slow trials ran while the machine was quieter, so other work does not explain them; "
                "look at idle and frequency states (governor, C-states) or, in a guest, the host's scheduling")
CATEGORICAL_CAUSES = ["actual_pair_class", "pair_class", "cross_cpu", "migrated",
                      "cpu_producer_start", "cpu_consumer_start"]

ADVICE = {
    "actual_pair_class": "pin producer and consumer to the intended CPU pair (cpus=..., pair class)",
    "pair_class": "the placement class matters: compare within one pair class, or pin",
    "cross_cpu": "pin producer and consumer (they ran on different CPUs in those trials)",
    "migrated": "pin the threads: the slow trials migrated between CPUs",
    "cpu_producer_start": "pin the producer: the slow trials ran on particular CPUs",
    "cpu_consumer_start": "pin the consumer: the slow trials ran on particular CPUs",
    "cpu_migrations": "pin the threads: the slow trials migrated between CPUs",
    "context_switches": "isolate the CPUs (isolcpus/nohz_full) or stop other load: slow trials were preempted",
    "ctx_involuntary": "isolate the CPUs or stop other load: slow trials were preempted",
    "procs_running": BUSY_ADVICE,
    "load1": BUSY_ADVICE,
    "ctx_voluntary": "slow trials blocked more often: check spinning/waiting in the harness",
    "steal_delta": "a hypervisor stole CPU time: use bare metal or dedicated vCPUs",
    "order": "drift over the run: check frequency/thermal state, keep trials interleaved",
    "timestamp": "drift over time: check frequency/thermal state and background jobs",
    "trial": "warm-up effect: raise warmup trials",
}


def _derived(df: pd.DataFrame) -> pd.DataFrame:
    """Add cross_cpu / migrated markers and numeric timestamps where columns allow."""
    d = df.copy()
    cols = d.columns
    if {"cpu_producer_start", "cpu_consumer_start"} <= set(cols):
        p, c = pd.to_numeric(d["cpu_producer_start"], errors="coerce"), pd.to_numeric(
            d["cpu_consumer_start"], errors="coerce")
        if c.notna().any():
            d["cross_cpu"] = np.where(p.isna() | c.isna(), None, (p != c).map({True: "different CPUs",
                                                                                False: "same CPU"}))
    pairs = [(a, b) for a, b in [("cpu_producer_start", "cpu_producer_end"),
                                 ("cpu_consumer_start", "cpu_consumer_end")] if {a, b} <= set(cols)]
    if pairs:
        mig = None
        for a, b in pairs:
            x, y = pd.to_numeric(d[a], errors="coerce"), pd.to_numeric(d[b], errors="coerce")
            m = (x != y) & x.notna() & y.notna()
            mig = m if mig is None else (mig | m)
        d["migrated"] = mig.map({True: "migrated", False: "stayed"})
    if "timestamp" in cols:
        t = pd.to_datetime(d["timestamp"], errors="coerce", utc=True)
        d["timestamp"] = (t - t.min()).dt.total_seconds()
    return d


#: a Mann-Whitney test of more pairs (odd x other trials) never takes scipy's exact path
EXACT_MWU_PAIRS = 20_000


def _cause_tests(d: pd.DataFrame, is_odd: np.ndarray) -> list[dict]:
    """One test per candidate column that varies: Fisher/chi2 for categories, Mann-Whitney for numbers."""
    tests = []
    for col in CATEGORICAL_CAUSES:
        if col not in d.columns:
            continue
        s = d[col]
        known = s.notna().to_numpy() & (s.astype(str) != "").to_numpy()
        if known.sum() < 4 or s[known].astype(str).nunique() < 2:
            continue
        tab = pd.crosstab(s[known].astype(str), is_odd[known])
        if tab.shape[1] < 2:
            continue
        if tab.shape == (2, 2):
            p = float(sst.fisher_exact(tab.to_numpy()).pvalue)
        else:
            p = float(sst.chi2_contingency(tab.to_numpy()).pvalue)
        # the level most over-represented among the odd trials
        share_odd = tab[True] / tab[True].sum()
        share_rest = tab[False] / max(tab[False].sum(), 1)
        level = (share_odd - share_rest).idxmax()
        tests.append({"column": col, "kind": "categorical", "p": p, "level": level,
                      "odd_with": int(tab.loc[level, True]), "odd_total": int(tab[True].sum()),
                      "rest_with": int(tab.loc[level, False]), "rest_total": int(tab[False].sum())})
    for col in NUMERIC_CAUSES:
        if col not in d.columns:
            continue
        v = pd.to_numeric(d[col], errors="coerce").to_numpy(dtype=float)
        ok = np.isfinite(v)
        a, b = v[ok & is_odd], v[ok & ~is_odd]
        if len(a) < 2 or len(b) < 2 or np.all(v[ok] == v[ok][0]):
            continue
        # scipy's exact null distribution (its choice when a group has <= 8 values and no ties)
        # costs about (n_a n_b)^2 / 8 operations: hours for a few odd trials among 10^6 rows.
        # Above EXACT_MWU_PAIRS pairs the normal approximation, scipy's own choice once both
        # groups have more than 8 values
        method = "auto" if len(a) * len(b) <= EXACT_MWU_PAIRS else "asymptotic"
        p = float(sst.mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue)
        tests.append({"column": col, "kind": "numeric", "p": p, "median_odd": float(np.median(a)),
                      "median_rest": float(np.median(b))})
    return tests


def find_cause(frame: pd.DataFrame, is_odd: np.ndarray, odd_name: str = "slow") -> dict:
    """Test every candidate column against the boolean split ``is_odd``.

    Returns ``{"column", "p", "p_holm", "text", "advice", "tests"}``; column is None when
    nothing explains the split (text then says so, naming the closest candidate).
    """
    tests = _cause_tests(_derived(frame), np.asarray(is_odd, dtype=bool))
    if not tests:
        return {"column": None, "p": math.nan, "p_holm": math.nan, "tests": [],
                "advice": "", "text": "no recorded factor can be tested (no placement, counter, "
                                      "steal or order columns vary)"}
    adj = holm([t["p"] for t in tests])
    for t, pa in zip(tests, adj):
        t["p_holm"] = float(pa)
    # among clearly significant columns prefer the most interpretable (list order:
    # pair class before raw CPU numbers); otherwise the smallest p
    prio = {c: i for i, c in enumerate(CATEGORICAL_CAUSES + NUMERIC_CAUSES)}
    best = min(tests, key=lambda t: (max(t["p_holm"], 1e-3), prio[t["column"]], t["p"]))
    ptxt = "p < 0.001" if best["p_holm"] < 0.001 else f"p = {best['p_holm']:.2g}"
    if best["p_holm"] >= CAUSE_ALPHA:
        return {"column": None, "p": best["p"], "p_holm": best["p_holm"], "tests": tests, "advice": "",
                "text": f"no recorded factor explains the {odd_name} trials at Holm p < {CAUSE_ALPHA:g} "
                        f"(closest: {best['column']}, Holm {ptxt})"}
    col = best["column"]
    if best["kind"] == "categorical":
        share = best["odd_with"] / best["odd_total"]
        how = "all" if share == 1 else f"{best['odd_with']}/{best['odd_total']}"
        text = (f"{how} {odd_name} trials had {col} = {best['level']} "
                f"(vs {best['rest_with']}/{best['rest_total']} of the others; {ptxt})")
    else:
        word = "higher" if best["median_odd"] > best["median_rest"] else "lower"
        text = (f"{odd_name} trials had {word} {col} (median {best['median_odd']:.4g} vs "
                f"{best['median_rest']:.4g}; {ptxt})")
        if col in BUSY_COLUMNS:
            # other work explains slowness only where the slower trials had more of it
            odd_slow = odd_name in ("slow", "outlier")
            slow_busier = (word == "higher") == odd_slow
            advice = BUSY_ADVICE if slow_busier else QUIET_ADVICE
            found = {"column": col, "p": best["p"], "p_holm": best["p_holm"], "tests": tests, "advice": advice}
            if slow_busier and odd_slow:
                found["cause"], text = "machine busy", "machine busy: " + text
            return {**found, "text": f"{text}; {advice}"}
    return {"column": col, "p": best["p"], "p_holm": best["p_holm"], "tests": tests,
            "advice": ADVICE.get(col, ""), "text": text + (f"; {ADVICE[col]}" if col in ADVICE else "")}


def busy_rounds(df: pd.DataFrame, metric: str = schema.PRIMARY_METRIC, by=None) -> dict:
    """Were the slow rounds the busy ones?  Round-level test over the whole run.

    Each round's slowness = median over its measurements of ln(value / median of the value's
    group) (group = variant + configuration), so every arm and configuration counts alike.
    Each recorded busy column (``BUSY_COLUMNS``: runnable tasks, load, steal, involuntary
    context switches; mean per round) is tested against it with Spearman's rank correlation,
    Holm-corrected; "machine busy" is named when a column is significantly (< 0.01) *higher*
    in slower rounds.  Returns ``{"cause": "machine busy" | None, "column", "rho", "p_holm",
    "n_rounds", "tests", "text"}``.
    """
    meas, _ = measurements(df, metric)
    rk = round_key(meas)
    cols = group_columns(df, by)
    base = {"cause": None, "column": None, "rho": math.nan, "p_holm": math.nan, "n_rounds": 0,
            "tests": [], "text": "no rounds recorded"}
    v = meas[metric].to_numpy(dtype=float)
    if rk is None or len(meas) < 4 or not np.all(v > 0):
        return base
    med = meas.groupby(cols, dropna=False, sort=False)[metric].transform("median") if cols else np.median(v)
    rel = pd.Series(np.log(v / np.asarray(med, dtype=float)), index=meas.index)
    slow = rel.groupby(rk).median()
    base["n_rounds"] = int(len(slow))
    tests = []
    for col in BUSY_COLUMNS:
        if col not in meas.columns:
            continue
        x = pd.to_numeric(meas[col], errors="coerce").groupby(rk).mean().reindex(slow.index)
        ok = x.notna().to_numpy() & np.isfinite(slow.to_numpy())
        if ok.sum() < 5 or np.all(x[ok] == x[ok].iloc[0]):
            continue
        rho, p = sst.spearmanr(slow.to_numpy()[ok], x.to_numpy()[ok])
        if math.isfinite(rho):
            tests.append({"column": col, "rho": float(rho), "p": float(p)})
    if not tests:
        base["text"] = "no busy indicator (procs_running, load1, steal, involuntary switches) varies"
        return base
    for t, pa in zip(tests, holm([t["p"] for t in tests])):
        t["p_holm"] = float(pa)
    best = min(tests, key=lambda t: (t["p_holm"], -t["rho"]))
    ptxt = "p < 0.001" if best["p_holm"] < 0.001 else f"p = {best['p_holm']:.2g}"
    base.update(tests=tests, column=best["column"], rho=best["rho"], p_holm=best["p_holm"])
    if best["p_holm"] < CAUSE_ALPHA and best["rho"] > 0:
        base["cause"] = "machine busy"
        base["text"] = (f"machine busy: slower rounds had higher {best['column']} (Spearman rho "
                        f"{best['rho']:.2f} over {len(slow)} rounds, Holm {ptxt}); {BUSY_ADVICE}")
    else:
        base["text"] = (f"slow rounds are not explained by recorded machine load (closest: {best['column']}, "
                        f"rho {best['rho']:.2f}, Holm {ptxt})")
    return base


def diagnose(df: pd.DataFrame, metric: str = schema.PRIMARY_METRIC, by=None) -> list[dict]:
    """Per group: modality, outliers and, when the sample splits, the recorded cause.

    Returns a list of dicts with ``group`` (dict of group columns), ``label`` (str),
    ``n``, ``modality`` (text), ``dip_p``, ``n_severe``, ``kind`` ("multimodal" |
    "severe outliers" | "ok"), ``cause`` (``find_cause`` result or None) and ``text``.
    """
    meas, _ = measurements(df, metric)
    cols = group_columns(df, by)
    lib = metric in schema.LOWER_IS_BETTER
    out = []
    for key, sub in (meas.groupby(cols, sort=True, dropna=False) if cols else [((), meas)]):
        key = key if isinstance(key, tuple) else (key,)
        label = ",".join(f"{c}={v}" for c, v in zip(cols, key)) or "all"
        v = sub[metric].to_numpy()
        mod = _out.modality(v)
        flags = _out.tukey_flags(v)
        n_sev = int((flags == "severe").sum())
        rec = {"group": dict(zip(cols, key)), "label": label, "n": len(v), "dip_p": mod["dip_p"],
               "modes": mod["modes"], "n_severe": n_sev, "cause": None,
               "modality": _out.describe_modes(mod, lambda x: format_value(x, metric))}
        odd = None
        if mod["multimodal"]:
            main = int(np.argmax([m["n"] for m in mod["modes"]]))
            odd = mod["labels"] != main
            rec["kind"] = "multimodal"
            odd_name = "slow" if (np.median(v[odd]) > np.median(v[~odd])) == lib else "fast"
        elif n_sev:
            odd = flags == "severe"
            rec["kind"] = "severe outliers"
            odd_name = "outlier"
        else:
            rec["kind"] = "ok"
        if odd is not None:
            cause = find_cause(sub, odd, odd_name)
            rec["cause"] = cause
            head = rec["modality"] if rec["kind"] == "multimodal" else f"{n_sev} severe outlier(s)"
            rec["text"] = f"{label}: {head}; {cause['text']}"
        else:
            rec["text"] = f"{label}: {rec['modality']}, no severe outliers"
        out.append(rec)
    busy = busy_rounds(df, metric, by)
    if busy["cause"] == "machine busy":
        out.append({"group": {}, "label": "all rounds", "n": len(meas), "dip_p": math.nan, "modes": [],
                    "n_severe": 0, "modality": "", "kind": "machine busy",
                    "cause": {"column": busy["column"], "p": math.nan, "p_holm": busy["p_holm"],
                              "tests": busy["tests"], "cause": "machine busy", "advice": BUSY_ADVICE,
                              "text": busy["text"]},
                    "text": f"all rounds: {busy['text']}"})
    return out


def _comparison_rows(df: pd.DataFrame, baseline: str, candidate: str, metric: str, alpha: float,
                     by, comparison: pd.DataFrame | None) -> dict:
    """The compare() rows of ``candidate`` against ``baseline`` by configuration label: the
    verdict's own rows (``comparison``, as the report has them), else ``compare`` of ``df``."""
    if comparison is None:
        comparison = compare(df, baseline, metric, by=by, alpha=alpha)
    rows = comparison[(comparison["candidate"].astype(str) == str(candidate))
                      & (comparison["baseline"].astype(str) == str(baseline))]
    return {str(r["group"]): r for r in rows.to_dict("records")}


def _time_text(tv: dict) -> str:
    """The verdict's estimate, CI and p as the Instructions-vs-time line quotes them, + = faster."""
    lib = bool(tv.get("lower_is_better", True))
    d = tv.get("delta_pct", math.nan)
    g = tv.get("gain_pct", -d if lib else d)
    g = g if isinstance(g, float) and math.isfinite(g) else (-d if lib else d)
    lo, hi = tv.get("gain_low_pct", math.nan), tv.get("gain_high_pct", math.nan)
    parts = [tv["verdict"]]
    if math.isfinite(lo) and math.isfinite(hi):
        parts.append(f"CI [{lo:+.1f}%, {hi:+.1f}%]")
    p = tv.get("p_holm", math.nan)
    if isinstance(p, float) and math.isfinite(p):
        parts.append(f"p (Holm) {'< 0.001' if p < 0.001 else f'= {p:.2g}'}")
    return f"time %change {g:+.2f}% (+ = faster; " + ", ".join(parts) + ")"


SAME_ICOUNT_CAUSES = ("code layout and alignment (function/loop alignment, link order), branch "
                      "placement (taken vs fall-through, branch-predictor aliasing), store-to-load "
                      "forwarding stalls, cache-line sharing (false sharing between producer and "
                      "consumer fields)")
SAME_ICOUNT_CHECKS = ("diff `size` and `objdump -d` of the two binaries around the measured "
                      "rl_measured_* functions; rebuild both with layout variants "
                      "(-falign-functions=64, -falign-loops=32, a different link order) and "
                      "see whether the time difference follows the layout rather than the code; "
                      "check cache-line sharing with `perf c2c` where supported")


def _layout_suspected(rec: dict, mb: float, mc: float, time_verdict: str, has_layout: bool) -> None:
    """Time moves against the instruction counts beyond its CI (the time CI excludes 0 on the
    side opposite to the counts): the layout, not the code, is the likely cause."""
    rec["layout_suspected"] = bool((mc > mb and time_verdict == Verdict.FASTER)
                                   or (mc < mb and time_verdict == Verdict.SLOWER))
    if rec["layout_suspected"]:
        rec["layout_text"] = (f"layout suspected: {'more' if mc > mb else 'fewer'} instructions but "
                              f"{time_verdict} beyond the CI (measure several layouts of each arm)")
        if has_layout:   # older runs keep the text their summaries were made with
            rec["text"] += "; " + rec["layout_text"]


def _ic_change(rec: dict, digits: int) -> str:
    """The instruction counts' change in the tables' sign: + = fewer instructions."""
    return f"%change {-rec['icount_delta_pct']:+.{digits}f}%, + = fewer"


def _set_finding(rec: dict, label: str, ic_txt: str, time_txt: str, same: bool, differ: bool,
                 has_layout: bool) -> None:
    """Fill ``finding`` and ``text`` (and causes/checks or the layout suspicion) of one configuration."""
    if same and differ:
        rec["finding"] = "same instructions, different time"
        rec["causes"], rec["checks"] = SAME_ICOUNT_CAUSES, SAME_ICOUNT_CHECKS
        rec["text"] = (f"{label}: same instructions, different time: {ic_txt} "
                       f"({_ic_change(rec, 3)}), but {time_txt}. Likely causes: "
                       f"{SAME_ICOUNT_CAUSES}. Checks: {SAME_ICOUNT_CHECKS}.")
    elif same:
        rec["finding"] = "same instructions, same time"
        rec["text"] = f"{label}: {ic_txt}; {time_txt}"
    else:
        rec["finding"] = "different instructions"
        rec["text"] = (f"{label}: different instructions: {ic_txt} "
                       f"({_ic_change(rec, 2)}); {time_txt}")
        _layout_suspected(rec, rec["icount_baseline"], rec["icount_candidate"], rec["time_verdict"], has_layout)


def _check_variants(df: pd.DataFrame, baseline: str, candidate: str) -> None:
    """Refuse a baseline or candidate that is not a variant of ``df``."""
    if "variant" not in df.columns:
        raise ValueError("raw.csv has no 'variant' column")
    variants = sorted(map(str, df["variant"].dropna().unique()))
    for name, v in (("baseline", baseline), ("candidate", candidate)):
        if str(v) not in variants:
            raise ValueError(f"{name}: {v!r} is not a variant; allowed: " + ", ".join(variants))


def diagnose_ab(df: pd.DataFrame, baseline: str, candidate: str, time_metric: str = schema.PRIMARY_METRIC,
                icount_metric: str = "instructions_per_op", tolerance: float = 0.001,
                alpha: float = 0.05, by=None, comparison: pd.DataFrame | None = None) -> list[dict]:
    """"Same instructions, different time"?  Per configuration, compare instruction counts
    and times of two variants.

    Returns dicts: label, group, icount_baseline, icount_candidate, icount_delta_pct,
    time_verdict, time_delta_pct, time_p, finding ("same instructions, different time" |
    "different instructions" | "same instructions, same time" | "no instruction counts"),
    text, and for the first case ``causes`` and ``checks``; for "different instructions"
    ``layout_suspected`` (time moves against the counts beyond its CI: more instructions and
    faster, or fewer and slower) with ``layout_text`` saying "layout suspected", which the
    text carries for runs with a ``layout`` column (older runs keep the text of their summaries).

    The time verdict, its estimate, CI and p are the compare() row of the configuration (the
    one analysis of the comparison): ``comparison`` when the caller has it, else ``compare``
    of ``df``; ``time_gain_pct`` is its %change in the + = faster sign.
    """
    _check_variants(df, baseline, candidate)
    tmeas, _ = measurements(df, time_metric)
    tmeas["variant"] = tmeas["variant"].astype(str)
    has_ic = icount_metric in df.columns and pd.to_numeric(df[icount_metric], errors="coerce").notna().any()
    imeas = measurements(df, icount_metric)[0] if has_ic else tmeas.iloc[0:0]
    imeas = imeas.assign(variant=imeas["variant"].astype(str)) if len(imeas) else imeas
    cols = comparison_columns(tmeas, by) if by is not None else \
        [c for c in comparison_columns(tmeas) if c not in LAYOUT_COLUMNS]
    rows = _comparison_rows(df, baseline, candidate, time_metric, alpha, by, comparison)
    out = []
    for key, sub in (tmeas.groupby(cols, sort=True, dropna=False) if cols else [((), tmeas)]):
        key = key if isinstance(key, tuple) else (key,)
        label = ",".join(f"{c}={v}" for c, v in zip(cols, key)) or "all"
        bsub, csub = sub[sub["variant"] == str(baseline)], sub[sub["variant"] == str(candidate)]
        if len(bsub) == 0 or len(csub) == 0:
            continue
        tv = rows.get(label)
        if tv is None:
            continue
        rec = {"label": label, "group": dict(zip(cols, key)), "baseline": str(baseline),
               "candidate": str(candidate), "time_verdict": tv["verdict"], "time_delta_pct": tv["delta_pct"],
               "time_gain_pct": tv.get("gain_pct", math.nan), "time_p": tv["p_value"],
               "time_p_holm": tv.get("p_holm", math.nan), "icount_baseline": math.nan,
               "icount_candidate": math.nan, "icount_delta_pct": math.nan}
        isub = imeas
        for c, v in zip(cols, key):
            isub = isub[isub[c] == v] if len(isub) else isub
        ib = isub.loc[isub["variant"] == str(baseline), icount_metric] if len(isub) else []
        ic = isub.loc[isub["variant"] == str(candidate), icount_metric] if len(isub) else []
        time_txt = _time_text(tv)
        if len(ib) == 0 or len(ic) == 0:
            rec["finding"] = "no instruction counts"
            rec["text"] = (f"{label}: {time_txt}; no {icount_metric} recorded (run with callgrind or "
                           f"hardware counters to tell code changes from layout effects)")
            out.append(rec)
            continue
        mb, mc = float(np.median(ib)), float(np.median(ic))
        rec.update(icount_baseline=mb, icount_candidate=mc,
                   icount_delta_pct=(mc / mb - 1) * 100 if mb else math.nan)
        src = ""
        if "icount_source" in isub.columns:
            s = sorted(set(isub["icount_source"].dropna().astype(str)) - {""})
            src = f" ({'/'.join(s)})" if s else ""
        same = mb != 0 and abs(mc - mb) <= tolerance * abs(mb)
        differ = is_call(tv["verdict"])
        ic_txt = f"{icount_metric}{src} {baseline} {mb:.6g} vs {candidate} {mc:.6g}"
        _set_finding(rec, label, ic_txt, time_txt, same, differ, "layout" in df.columns)
        out.append(rec)
    return out
