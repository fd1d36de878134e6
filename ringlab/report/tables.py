"""summary.md / summary.csv / summary.tex from the statistics (no statistics here).

The comparison table shows one estimator in one sign::

    | mode | size | unpatched (batch) | patched (reorder) | design | n_pairs | %change (+ = faster)
      | 95% CI of %change | p (Holm) | family size | verdict |

The arm columns are the centers the effect is computed from (``center_baseline``,
``center_candidate`` of ``ringlab.stats.contract``), so their ratio is the %change; %change is
``gain_pct``: + means better (faster, fewer instructions, more ops/s), as in mmtests, and its
CI is in the same sign.  One CI level per report, stated once in the heading (``ci_heading``);
Holm, which decides the verdicts, is in a footnote (``holm_footnote``).  A host's noise floor (its A/A bound,
``noise_floor``) is stated once, and a verdict on an effect below it says so.
"""
from __future__ import annotations

import math

import pandas as pd

from ringlab import fmt
from ringlab.catalog import Verdict, is_call
from ringlab.stats.contract import ci_side
from ringlab.stats.decide import INSTRUCTION_METRICS
from ringlab.stats.summary import format_value

NA_COUNTERS = "n/a (not supported here)"
#: instructions/op was counted by callgrind (instrumented run of the measured region), not by
#: hardware counters: the value is exact and repeatable, but from separate, untimed trials
CALLGRIND_MARK = "(callgrind)"
COUNTER_TABLE = [("ipc", "IPC", "{:.3g}"), ("branch_miss_rate", "branch-miss rate", "{:.3%}"),
                 ("instructions_per_op", "instructions/op", "{:.4g}")]
#: the one effect column of every table: + means better (faster, fewer instructions, more ops/s)
CHANGE = "%change"
#: kept for callers that name the old heading
GAIN_HEADER = "%change (+ = candidate faster)"
SIGN_CONVENTION = ("Sign: + means better (faster, fewer instructions, more ops/s), as in mmtests, in every "
                   "table of this report.")
ARM_TEXT = ("The two arm columns are the centers the effect is computed from: the baseline's "
            "Hodges-Lehmann center over the rounds compared, and the candidate's center that the "
            "estimated ratio implies (baseline x ratio), so the two give the %change exactly; the "
            "arms' raw medians are in the Summary table.")
HOLM_MARK = "(Holm)"
#: how an effect beyond ±FACTOR_PCT reads (stated once, beside the sign)
FACTOR_TEXT = ("Beyond ±50% an effect is a factor of the metric instead: \"×9.7 slower\" is 9.7 times the "
               "baseline's time, \"×2.1 faster\" under half of it.")
TIME_METRICS = {"ns_per_op", "elapsed_ns", "ns_producer", "ns_consumer", "wall_s", "elapsed_us", "cycles_per_op",
                "cycles"}

#: a comparison whose measured rounds hold one layout pair: ``-p layouts 1``, or a run built with
#: more layouts whose measured rounds all ran one pair (a smoke run: 2 measured rounds, the
#: warm-up round took the other pair)
FIXED_BUILD = ("one layout pair measured (one fixed build): the CI describes this binary pair, "
               "not the code change")
LAYOUT_HEADER = "layouts and machine states"


def _label(name: str, labels: dict | None) -> str:
    lab = (labels or {}).get(name)
    return f"{lab} ({name})" if lab else name


def _varying(frame: pd.DataFrame, cols: list[str]) -> list[str]:
    """Columns that take more than one value (constant ones, e.g. a single requested CPU
    pair, would only widen the table); keep at least ``variant`` when present."""
    keep = [c for c in cols if c in frame.columns and frame[c].astype(str).nunique() > 1]
    return keep or [c for c in cols if c == "variant"]


def constant_settings(frame: pd.DataFrame, cols: list[str]) -> str:
    """"pair_class=same-llc, cpu_req_producer=1" for the columns left out of a table."""
    return ", ".join(f"{c}={frame[c].iloc[0]}" for c in cols
                     if c in frame.columns and len(frame) and frame[c].astype(str).nunique() == 1
                     and c != "variant")


md_table = fmt.md_table


def _num(r, col) -> float:
    v = r.get(col) if hasattr(r, "get") else None
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _flag(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v)) and bool(v)


def _p_text(p) -> str:
    t = fmt.p(p)
    return t if t.startswith("<") else f"= {t}"


def has_layouts(cmp: pd.DataFrame) -> bool:
    """True when compare() saw a ``layout`` column (runs without one render as before)."""
    return "layouts" in cmp.columns and pd.to_numeric(cmp["layouts"], errors="coerce").notna().any()


def layout_texts(r) -> list[tuple[str, str]]:
    """(label, text) lines about the layouts and machine states of a compare() row; none for a
    row made without a ``layout`` column."""
    k = _num(r, "layouts")
    if not math.isfinite(k):
        return []
    if k <= 1:
        out = [("layouts", FIXED_BUILD)]
    else:
        txt = f"{int(k)} layout pairs"
        sl, sh = _num(r, "sigma_layout_pct"), _num(r, "layout_share")
        if math.isfinite(sl):
            txt += f", layout spread {sl:.1f} points"
            txt += f" ({sh:.0%} of the CI width squared)" if math.isfinite(sh) else ""
        if _flag(r.get("layout_sensitive")):
            txt += "; layout-sensitive: the layout spread exceeds the effect"
        out = [("layouts", txt)]
    if _num(r, "states") == 2:
        # in the row's one sign (+ = better), like its headline
        flip = -1.0 if _flag(r.get("lower_is_better", True)) else 1.0
        per = []
        for name in ("fast", "slow"):
            d, lo, hi = (flip * _num(r, c) for c in (f"delta_{name}_pct", f"ci_{name}_low_pct", f"ci_{name}_high_pct"))
            per.append(f"{name} {fmt.pct(d)} {fmt.ci(min(lo, hi), max(lo, hi))}")
        txt = (f"two machine states (slow in {_num(r, 'slow_share'):.0%} of the trials): " + ", ".join(per)
               + f", heterogeneity p {_p_text(r.get('heterogeneity_p'))}; the headline is the mean over all rounds")
        out.append(("states", txt))
    return out


def better_word(metric: str, lower_is_better: bool) -> str:
    """What + means for ``metric``: "faster", "fewer instructions" (the words of a call in the
    candidate's favour), "more <metric>"."""
    if metric in INSTRUCTION_METRICS:
        return Verdict.call(+1, instructions=True).value
    if lower_is_better:
        return Verdict.call(+1).value if metric in TIME_METRICS else f"lower {metric}"
    return "more ops/s" if metric in ("ops_per_s", "mops") else f"higher {metric}"


def change_header(cmp: pd.DataFrame) -> str:
    """"%change (+ = faster)": the one effect column of every table, in the one sign."""
    metric = cmp.attrs.get("metric", "ns_per_op")
    lib = bool(cmp["lower_is_better"].iloc[0]) if len(cmp) and "lower_is_better" in cmp else True
    return f"{CHANGE} (+ = {better_word(metric, lib)})"


def sign_text(cmp: pd.DataFrame) -> str:
    """The sentence that states the sign convention and what the arm columns are (once per report)."""
    metric = cmp.attrs.get("metric", "ns_per_op")
    lib = bool(cmp["lower_is_better"].iloc[0]) if len(cmp) and "lower_is_better" in cmp else True
    formula = ("(baseline - candidate) / baseline" if lib else "(candidate - baseline) / baseline")
    return (f"{SIGN_CONVENTION} Here {CHANGE} = {formula} of {metric}, and its CI is in the same sign. "
            f"{FACTOR_TEXT} {ARM_TEXT}")


def gain_ci(r) -> tuple[float, float]:
    """The CI of a compare() row's ``gain_pct`` (+ = better), from the row (older frames: from
    the CI of delta, negated for lower-is-better metrics)."""
    lo, hi = _num(r, "gain_low_pct"), _num(r, "gain_high_pct")
    if math.isfinite(lo) or math.isfinite(hi) or "gain_low_pct" in getattr(r, "index", ()):
        return lo, hi
    dlo, dhi = _num(r, "ci_low_pct"), _num(r, "ci_high_pct")
    return (-dhi, -dlo) if _flag(r.get("lower_is_better", True)) else (dlo, dhi)


def has_next(cmp: pd.DataFrame) -> bool:
    """The frame has next-run intervals (a report filled them in)."""
    return "next_low_pct" in cmp.columns and pd.to_numeric(cmp["next_low_pct"], errors="coerce").notna().any()


def next_gain_ci(r) -> tuple[float, float]:
    """The next-run interval of a row in the + = better sign."""
    lo, hi = _num(r, "next_low_pct"), _num(r, "next_high_pct")
    return (-hi, -lo) if _flag(r.get("lower_is_better", True)) else (lo, hi)


#: the heading of the next-run column
NEXT_HEADER = "next run here (95% PI)"


def interval_lines(cmp: pd.DataFrame) -> list[str]:
    """What the two intervals mean, one line each, and the between-run basis of the next-run
    interval in words, once per basis (with its modes)."""
    if not has_next(cmp):
        return []
    alpha = float(cmp.attrs.get("alpha", 0.05) or 0.05)
    lines = [f"- {fmt.ci_header(1 - alpha)}: how sure this run is of its own effect; the verdict rests on it "
             "(at Holm's level where a family has several rows).",
             f"- {NEXT_HEADER}: where another run of the same command on this host is expected to put "
             "%change, 95% of the time: this run's noise, the next run's, and both runs' between-run shift "
             "(its variance from the basis below)."]
    groups: dict[tuple[str, str], list[float]] = {}     # (basis in words, mode): the rows' between-run SDs
    for _, r in cmp.iterrows():
        src = str(r.get("next_source") or "")
        if src and src != "nan":
            sd = _num(r, "next_between_sd_pct")
            groups.setdefault((src, str(r["mode"]) if "mode" in cmp.columns else ""), []).extend(
                [sd] if math.isfinite(sd) else [])
    for (src, mode), sds in groups.items():
        sd = "" if not sds else (f"; between-run SD {min(sds):.2f}" + (f"-{max(sds):.2f}" if max(sds) - min(sds) >= 0.005
                                                                       else "") + " points")
        lines.append(f"- next run here (95%, {src}{sd}){f' (mode {mode})' if mode else ''}.")
    moved = [r for _, r in cmp.iterrows() if r.get("sign_reproducible") is False]
    if moved:
        lines.append(f"- {len(moved)} called row(s) have a next-run interval that includes 0: another run "
                     "may not repeat the call.")
    return lines


def gain(r) -> float:
    """A compare() row's effect in the + = better sign (``gain_pct``; older frames: from delta)."""
    g = _num(r, "gain_pct")
    if math.isfinite(g):
        return g
    d = _num(r, "delta_pct")
    return -d if _flag(r.get("lower_is_better", True)) else d


#: beyond this |%change| (+ = better) an effect is printed as a factor ("x9.7 slower"): a percent of
#: a several-fold change reads wrong in either sign (9.7 times the time is "-870%", a tenth of it "+90%")
FACTOR_PCT = 50.0


def gain_of_ratio(ratio: float, lower_is_better: bool = True) -> float:
    """The %change (+ = better) of a candidate/baseline ratio of the metric: compare()'s
    ``gain_pct`` rule, (1 - ratio) x 100 for lower-is-better metrics, (ratio - 1) x 100 else; the
    one gain computation for tables that hold a ratio rather than a compare() row."""
    try:
        ratio = float(ratio)
    except (TypeError, ValueError):
        return math.nan
    if not math.isfinite(ratio):
        return math.nan
    return (1 - ratio) * 100 if lower_is_better else (ratio - 1) * 100


def ratio_of_gain(g: float, lower_is_better: bool = True) -> float:
    """candidate/baseline of the metric from a %change (+ = better): the inverse of ``gain_of_ratio``."""
    return 1 - g / 100 if lower_is_better else 1 + g / 100


def change_words(metric: str) -> tuple[str, str]:
    """The words of a factor's direction for ``metric``: ("faster", "slower") for times and
    throughputs, ("fewer", "more") for instruction counts, ("better", "worse") otherwise."""
    if metric in INSTRUCTION_METRICS:
        return "fewer", "more"
    if metric in TIME_METRICS or metric in ("ops_per_s", "mops"):
        return Verdict.call(+1).value, Verdict.call(-1).value
    return "better", "worse"


def _factor_number(f: float) -> str:
    return f"×{f:.1f}" if f < 99.95 else f"×{f:.0f}"


def is_factor(g: float) -> bool:
    """The effect prints as a factor (|%change| > FACTOR_PCT)."""
    return math.isfinite(g) and abs(g) > FACTOR_PCT


def factor_of_gain(g: float, lower_is_better: bool = True) -> float:
    """How many times better (or worse) a %change (+ = better) is: max(ratio, 1/ratio); NaN where
    the ratio is not positive."""
    r = ratio_of_gain(g, lower_is_better) if math.isfinite(g) else math.nan
    return max(r, 1 / r) if math.isfinite(r) and r > 0 else math.nan


def change_text(g: float, lower_is_better: bool = True, metric: str = "ns_per_op", percent_sign: bool = True) -> str:
    """A %change (+ = better) as the tables and the mail print it: "+11.8%", or beyond
    ±FACTOR_PCT the factor with its direction, "×9.7 faster" / "×2.1 slower"."""
    if not math.isfinite(g):
        return fmt.NA
    if not is_factor(g):
        return f"{g:+.1f}%" if percent_sign else f"{g:+.1f}"
    f = factor_of_gain(g, lower_is_better)
    if not math.isfinite(f):
        return f"{g:+.1f}%"
    good, bad = change_words(metric)
    return f"{_factor_number(f)} {good if g > 0 else bad}"


def change_ci_text(lo: float, hi: float, g: float, lower_is_better: bool = True, metric: str = "ns_per_op",
                   percent_sign: bool = True) -> str:
    """The CI [lo, hi] of a %change g (+ = better) in the form ``change_text`` gives g: percents
    ("[+11.1%, +12.5%]"), or factors when g prints as one ("[×9.0, ×10.5] faster"; bounds on
    both sides of 0: "[×1.1 slower, ×2.9 faster]")."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return fmt.NA
    if not is_factor(g):
        return fmt.ci(lo, hi) if percent_sign else f"[{lo:+.1f}, {hi:+.1f}]"
    flo, fhi = factor_of_gain(lo, lower_is_better), factor_of_gain(hi, lower_is_better)
    if not (math.isfinite(flo) and math.isfinite(fhi)):
        return fmt.ci(lo, hi) if percent_sign else f"[{lo:+.1f}, {hi:+.1f}]"
    good, bad = change_words(metric)
    if lo >= 0 or hi <= 0:   # one direction: the factors in ascending order, the word once
        a, b = sorted((flo, fhi))
        return f"[{_factor_number(a)}, {_factor_number(b)}] {good if g > 0 else bad}"
    return f"[{_factor_number(flo)} {bad}, {_factor_number(fhi)} {good}]"


def row_change_text(r, percent_sign: bool = True) -> str:
    """``change_text`` of a compare() row's gain."""
    return change_text(gain(r), _flag(r.get("lower_is_better", True)), str(r.get("metric") or "ns_per_op"),
                       percent_sign)


def row_change_ci_text(r, percent_sign: bool = True) -> str:
    """``change_ci_text`` of a compare() row's CI of its gain."""
    return change_ci_text(*gain_ci(r), gain(r), _flag(r.get("lower_is_better", True)),
                          str(r.get("metric") or "ns_per_op"), percent_sign)


def arm_centers(r) -> tuple[float, float]:
    """(baseline, candidate) centers the row's effect is computed from (``center_*``); frames
    made before those columns existed: the baseline median and median x (1 + delta)."""
    cb, cc = _num(r, "center_baseline"), _num(r, "center_candidate")
    if math.isfinite(cb):
        return cb, cc
    mb, d = _num(r, "median_baseline"), _num(r, "delta_pct")
    return mb, mb * (1 + d / 100) if math.isfinite(d) else math.nan


def ci_levels(cmp: pd.DataFrame) -> list[float]:
    """The distinct CI levels of the rows that have a CI."""
    if "ci_level" not in cmp.columns:
        return []
    has = pd.to_numeric(cmp["ci_low_pct"], errors="coerce").notna()
    return sorted(set(pd.to_numeric(cmp.loc[has, "ci_level"], errors="coerce").dropna().round(6)))


def ci_heading(cmp: pd.DataFrame) -> str:
    """The one CI heading of a report: "95% CI" when every row is at 1 - alpha, else the
    family-wise level with Holm ("95% CI (Holm)"), whose per-row levels ``holm_footnote`` gives."""
    alpha = float(cmp.attrs.get("alpha", 0.05) or 0.05)
    levels = ci_levels(cmp)
    head = fmt.ci_header(1 - alpha)
    return head if all(abs(v - (1 - alpha)) < 1e-9 for v in levels) else f"{head} {HOLM_MARK}"


def _levels_text(levels: list[float]) -> str:
    return f"{levels[0] * 100:.4g}%" if len(levels) == 1 else f"{levels[0] * 100:.4g}-{levels[-1] * 100:.4g}%"


def holm_footnote(cmp: pd.DataFrame) -> str:
    """The footnote that says how Holm decides the verdicts ("" when every family has one row).

    Frames with ``holm_ci_level``: every CI is printed at 1 - alpha and the verdicts rest on the
    Holm step levels; older frames printed each row at its Holm level (``ci_heading`` marks them)."""
    alpha = float(cmp.attrs.get("alpha", 0.05) or 0.05)
    fam = int(pd.to_numeric(cmp.get("family_size"), errors="coerce").max()) if "family_size" in cmp else 0
    levels = ci_levels(cmp)
    if not all(abs(v - (1 - alpha)) < 1e-9 for v in levels):
        return (f"{HOLM_MARK} Holm over the run's {fam} comparison(s): the family keeps a "
                f"{alpha:.0%} family-wise error rate, so each row's interval is printed at its Holm step's "
                f"level ({_levels_text(levels)}) and a row is significant exactly when its interval excludes 0; "
                "p is Holm-adjusted.")
    if "holm_ci_level" not in cmp.columns or fam <= 1:
        return ""
    holm = sorted(set(pd.to_numeric(cmp["holm_ci_level"], errors="coerce").dropna().round(6)))
    text = (f"p (Holm): p adjusted by Holm over the run's {fam} comparisons (every candidate in every configuration), so the verdicts keep a "
            f"{alpha:.0%} family-wise error rate: a row is called only when p (Holm) <= {alpha:g}, that is when "
            f"its CI at its Holm step's level ({_levels_text(holm)}) excludes 0.")
    excl_uncalled = [r for _, r in cmp.iterrows() if not is_call(r.get("verdict"))
                     and ci_side(r.get("ci_low_pct"), r.get("ci_high_pct")) != 0]
    if excl_uncalled:
        text += (f" {len(excl_uncalled)} row(s) read \"{Verdict.NOT_AFTER_HOLM}\": their {fmt.ci_header(1 - alpha)} "
                 "excludes 0, but with several configurations that also happens by chance, and Holm does not "
                 "reject them.")
    return text


def noise_floor_text(host: str | None, floor: dict | None) -> str:
    """summary.md's line about the host's noise floor (also when there is none)."""
    if floor is None:
        return (f"Noise floor: host {host or '?'} has no A/A calibration (results/calibration/"
                f"{host or '<host>'}/calibration.json, `ringlab calibrate`): effects cannot be set against it.")
    return (f"Noise floor of {host}: an A/A comparison (identical arms, {floor['layouts']} layout pairs, "
            f"calibration {floor['run_id']}) gives |%change| < {floor['bound_pct']:.1f}%; an effect "
            "smaller than that cannot be told from noise on this host.")


def below_floor(r, floor: dict | None) -> bool:
    """The row's effect (not an exact count) is smaller than the host's A/A bound."""
    if floor is None or str(r.get("design")) == "exact":
        return False
    g = gain(r)
    return math.isfinite(g) and abs(g) < floor["bound_pct"]


def floor_note(floor: dict) -> str:
    return f"below this host's noise floor (|%change| < {floor['bound_pct']:.1f}% in A/A)"


def comparison_rows(cmp: pd.DataFrame, labels: dict | None = None,
                    floor: dict | None = None) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the comparison table: the arms' centers the effect is computed from,
    the effect as %change (+ = better) with its CI in the same sign, p (Holm), the verdict."""
    metric = cmp.attrs.get("metric", "ns_per_op")
    gcols = _varying(cmp, list(cmp.attrs.get("group_columns", [])))
    single = cmp["candidate"].nunique() == 1 and cmp["baseline"].nunique() == 1
    if single:  # the mails' layout: one column per arm, labelled
        arms = [_label(cmp["baseline"].iloc[0], labels), _label(cmp["candidate"].iloc[0], labels)]
    else:
        arms = ["baseline", "candidate"]
    ch = change_header(cmp)
    header = gcols + arms
    design = [c for c in ("design", "n_pairs") if c in cmp.columns]
    header += design + [ch, f"{ci_heading(cmp)} of {CHANGE}"]
    nxt = has_next(cmp)
    header += [NEXT_HEADER] if nxt else []
    header += ["p (Holm)"] + (["family size"] if "family_size" in cmp.columns else [])
    lay = has_layouts(cmp)
    header += ([LAYOUT_HEADER] if lay else []) + ["verdict"]
    rows = []
    for _, r in cmp.iterrows():
        row = [str(r[c]) for c in gcols]
        cb, cc = arm_centers(r)
        mb, mc = format_value(cb, metric), format_value(cc, metric)
        if single:
            row += [mb, mc]
        else:
            row += [f"{_label(r['baseline'], labels)}: {mb}", f"{_label(r['candidate'], labels)}: {mc}"]
        for c in design:
            v = r[c]
            row.append("n/a" if v is None or (isinstance(v, float) and math.isnan(v))
                       else str(int(v)) if isinstance(v, float) else str(v))
        row += [row_change_text(r), row_change_ci_text(r)]
        if nxt:
            row.append(fmt.ci(*next_gain_ci(r)))
        row.append(fmt.p(r["p_holm"]))
        if "family_size" in cmp.columns:
            fs = _num(r, "family_size")
            row.append(str(int(fs)) if math.isfinite(fs) else "n/a")
        if lay:
            row.append("; ".join(t for _, t in layout_texts(r)) or "n/a")
        verdict = str(r["verdict"])
        if isinstance(r.get("note"), str) and r["note"]:
            verdict += f" ({r['note']})"
        tn = _num(r, "trials_needed")
        if math.isfinite(tn):
            verdict += f"; ~{int(tn)} trials/arm needed"
        if below_floor(r, floor):
            verdict += f"; {floor_note(floor)}"
        row.append(verdict)
        rows.append(row)
    return header, rows


def summary_rows(summ: pd.DataFrame, metric: str) -> tuple[list[str], list[list[str]]]:
    gcols = _varying(summ, [c for c in summ.columns if c not in SUMMARY_STAT_COLS and not c.startswith("clean_")
                            and c not in ("var_process", "var_iteration", "process_share")])
    header = gcols + ["n", "median [95% CI]", "mean [95% CI]", "CV", "p5-p95",
                      "outliers (mild/severe)", "median w/o severe"]
    rows = []
    f = lambda x: format_value(x, metric)  # noqa: E731
    for _, r in summ.iterrows():
        rows.append([str(r[c]) for c in gcols] + [
            f"{int(r['n'])} (+{int(r['n_excluded'])} excluded)" if r["n_excluded"] else str(int(r["n"])),
            f"{f(r['median'])} [{f(r['median_ci_low'])}, {f(r['median_ci_high'])}]",
            f"{f(r['mean'])} [{f(r['mean_ci_low'])}, {f(r['mean_ci_high'])}]",
            "n/a" if not math.isfinite(r["cv"]) else f"{r['cv'] * 100:.2f}%",
            f"{f(r['p5'])} - {f(r['p95'])}",
            f"{int(r['n_mild'])}/{int(r['n_severe'])}",
            f"{f(r['clean_median'])} ({int(r['clean_n_removed'])} removed)"])
    return header, rows


SUMMARY_STAT_COLS = {"n_excluded", "n", "mean", "median", "std", "cv", "min", "max", "p5", "p95", "mad",
                     "mean_ci_low", "mean_ci_high", "median_ci_low", "median_ci_high", "n_mild",
                     "n_severe", "clean_n_removed", "ci_method"}


def is_callgrind(df: pd.DataFrame) -> pd.Series:
    if "icount_source" not in df.columns:
        return pd.Series(False, index=df.index)
    return df["icount_source"].astype(str).str.lower().eq("callgrind")


def counter_rows(df: pd.DataFrame, group_cols: list[str],
                 icount: pd.DataFrame | None = None) -> tuple[list[str], list[list[str]]]:
    """Median IPC / branch-miss rate / instructions per op per group of ``df`` (timed trials).

    Where hardware counters gave no instructions/op, the callgrind count of the same group
    (rows of ``icount``: untimed callgrind trials) is shown, marked "(callgrind)".  A cell
    with neither says NA_COUNTERS."""
    group_cols = _varying(df, group_cols)
    header = group_cols + [name for _, name, _ in COUNTER_TABLE]
    cg = icount[is_callgrind(icount)] if icount is not None and len(icount) else None
    rows = []
    groups = df.groupby(group_cols, sort=True, dropna=False) if group_cols else [((), df)]
    for key, sub in groups:
        key = key if isinstance(key, tuple) else (key,)
        row = [str(k) for k in key]
        for col, _, f in COUNTER_TABLE:
            v = pd.to_numeric(sub[col], errors="coerce").dropna() if col in sub.columns else pd.Series([], dtype=float)
            if len(v):
                row.append(f.format(float(v.median())))
                continue
            if col == "instructions_per_op" and cg is not None and col in cg.columns:
                m = pd.Series(True, index=cg.index)
                for c, k in zip(group_cols, key):
                    if c in cg.columns:
                        m &= cg[c].astype(str) == str(k)
                cv = pd.to_numeric(cg.loc[m, col], errors="coerce").dropna()
                if len(cv):
                    row.append(f"{f.format(float(cv.median()))} {CALLGRIND_MARK}")
                    continue
            row.append(NA_COUNTERS)
        rows.append(row)
    return header, rows


def tex_text(sections: list[tuple[str, list[str], list[list[str]]]]) -> str:
    """Plain LaTeX tabulars (booktabs), one per section; no jinja2 needed (summary.tex)."""
    def esc(s: str) -> str:
        for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"),
                     ("#", r"\#"), ("$", r"\$"), ("{", r"\{"), ("}", r"\}"), ("~", r"\textasciitilde{}")):
            s = s.replace(a, b) if a != "\\" else s.replace(a, "\x00")
        return s.replace("\x00", r"\textbackslash{}")
    out = ["% generated by ringlab; requires \\usepackage{booktabs}"]
    for title, header, rows in sections:
        out += [f"% {title}", "\\begin{tabular}{" + "l" * len(header) + "}", "\\toprule",
                " & ".join(esc(h) for h in header) + " \\\\", "\\midrule"]
        out += [" & ".join(esc(str(c)) for c in r) + " \\\\" for r in rows]
        out += ["\\bottomrule", "\\end{tabular}", ""]
    return "\n".join(out)
