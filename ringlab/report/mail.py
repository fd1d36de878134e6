"""A run as a reply for a mailing list, in the shape of the kernel test robot's reports
(``ringlab mail RUN``, and mail.txt of the A/B notebooks).

Plain text, at most ``width`` (72) columns, one screen (60 lines for three rows): a title that
says what the rows say together ("after is slower in 12 of 12 rows; none decided", or "3 of 6
rows changed (all faster); the other 3: 2 slower, 1 faster, none decided"), one headline per
comparison in the robot's form ("prebatch vs batch: 11.8% improvement of ns/op (mode=0
same-cpu), 95% CI [+11.1, +12.5]"; rows not called: "no change called" with the way they
point), whether this host has a PMU and what counts instructions instead, the code under test,
one machine line as LKP writes it ("2 threads 1 sockets (AMD EPYC) with 8G memory"), the host's
noise floor (the A/A bound of its calibration); then, stated once, how many (n: layout pairs x
rounds of each row, ops and seconds per trial, the run's wall time), the metric, which way is
better and the one sign, and the settings every printed row shares; then one table row per
configuration and metric::

      base ±%sd   %change     patched ±%sd  ns/op

``%change`` is the verdict's effect (``ringlab.stats.contract.Comparison``: the Hodges-Lehmann
estimate, ``gain_pct`` for lower-is-better metrics), + = better throughout, past ±50% a factor
("×9.7 faster", ``tables.change_text``), ``*..*`` marks the rows Holm calls significant
(mmtests' mark); the per-arm figures are the Comparison's own, so they agree with summary.md.
A/A controls are stated as bounds (``|Δ| < 2.9%``).  Then each row's two intervals, five lines
to paste into a commit message for the run's headline row (the largest called effect), what
this host could not measure, and the reproduce line with paths relative to the tree.  Labels
are never cut: a row too long for its line wraps.  Hashes, layouts and per-trial detail stay
in env.json and summary.md.

The run folder is read through :class:`ringlab.rundir.RunOutput` only (raw.csv, env.json, the
executed notebook); the baseline is the one rule of :mod:`ringlab.rundir.baseline`.  Every
number comes from the run's :class:`ringlab.report.analysis.Analysis` (the comparisons, the host
and its noise floor, each arm's spread, the published counts): ``mail_text`` takes a run folder,
or the ``Report`` / ``Analysis`` summary.md was rendered from, which it then renders again.
"""
from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from ringlab import catalog, schema
from ringlab.errors import ParamError
from ringlab.stats import StatsError, measurements
from ringlab.stats.rounds import comparison_columns
from ringlab.stats.replication import NO_BETWEEN_TEXT
from ringlab.report.mail_objdump import loop_summary
from ringlab.report.mail_reproduce import command_words, reproduce_lines, run_path
from ringlab.report.mail_run import (aa_controls, counters_line, cpus_text, design_text, duration_text, machine_line,
                                     not_measured, tested_line, trial_text, wall_time)
from ringlab.report.mailfmt import (plain_number, as_float, hang_para, is_finite_number, sig4, wrap_para,
                                    path_lines, short_sha)
from ringlab.report.analysis import INSTR, Analysis, pick_metric
from ringlab.rundir import RunEnv, pick_baseline as baseline_rule, require_metric, run_variants
from ringlab.rundir.calibration import run_host, run_noise_floor
from ringlab.report.tables import (change_ci_text, change_text, change_words, gain_ci, is_factor, next_gain_ci,
                                   row_change_ci_text, row_change_text)

WIDTH = 72
MIN_WIDTH = 60
MAX_WIDTH = 1000
#: the metrics' short names in the table
METRIC_NAMES = {"ns_per_op": "ns/op", "elapsed_us": "us", "elapsed_ns": "ns", INSTR: "instr/op"}
# columns shown as the placement of a row, not as a configuration parameter
_PLACEMENT_COLS = ("cpu_req_producer", "cpu_req_consumer", "pair_class")
#: the table's columns: base, its spread, %change, patched, its spread (then the metric)
_COLS = (9, 5, 11, 9, 5)
#: the same where a row of the table prints a factor ("*×9.7 slower*")
_WIDE_COLS = (9, 5, 14, 9, 5)


class MailError(ParamError):
    """Bad input to ``ringlab mail`` (names the parameter and the allowed values)."""


def read_env(run_dir) -> RunEnv:
    """env.json of a run folder (an empty RunEnv when missing or unreadable): ``RunOutput(run_dir).env_doc``."""
    return Analysis.for_run(run_dir).run.env_doc


def _baseline(df: pd.DataFrame, env: dict, baseline: str | None) -> str:
    """The run's baseline by the one rule of :mod:`ringlab.rundir.baseline` (the one summary.md
    names), ``--baseline`` naming the input; a run with a single variant compares nothing and
    names that variant."""
    variants = run_variants(df)
    if not variants:
        raise MailError("RUN: raw.csv has no variant column or no rows; nothing to compare")
    return baseline_rule(df, env, baseline, option="--baseline", error=MailError) or variants[0]


# -- the numbers: Comparison rows and the arms' spread ---------------------------------------
def _config_key(r, cols) -> tuple:
    return tuple(str(r[c]) for c in cols)


def _gain(r) -> float:
    """The row's %change with + = better: ``gain_pct`` (lower is better), else ``delta_pct``."""
    g = as_float(r.get("gain_pct"))
    return g if math.isfinite(g) else as_float(r.get("delta_pct"))


def _bound(r) -> float:
    """The largest |effect| the row's printed (95%) CI allows, in percent (an A/A control's bound)."""
    lo, hi = as_float(r.get("ci_low_pct")), as_float(r.get("ci_high_pct"))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return math.nan
    return max(abs(lo), abs(hi))


def value_label(v: float) -> str:
    v = as_float(v)
    if not math.isfinite(v):
        return "n/a"
    a = abs(v)
    return f"{v:.4g}" if a < 1e5 else f"{v:.3e}"


def sd_label(cv: float) -> str:
    return f"±{cv * 100:.0f}%" if math.isfinite(cv) and cv * 100 >= 0.5 else ""


def _change(r, control: bool) -> str:
    if control:
        b = _bound(r)
        return f"|Δ|<{b:.1f}%" if math.isfinite(b) else "n/a"
    g = _gain(r)
    if not math.isfinite(g):
        return "n/a"
    txt = row_change_text(r)
    return f"*{txt}*" if catalog.is_call(r.get("verdict")) else f" {txt} "


#: short names of configuration columns in the table's metric column
SHORT = {"alloc_len": "len", "placement": "place"}


def _label(r, vary: list[str], metric: str, places: bool, timing: bool = True) -> str:
    bits = [] if timing else [METRIC_NAMES.get(metric, metric)]
    for c in vary:
        bits.append(f"{SHORT.get(c, c)}={plain_number(r[c])}")
    if places:
        cls = r.get("pair_class")
        if isinstance(cls, str) and cls:
            bits.append(cls)
    return " ".join(bits)


def _arm(r, which: str) -> float:
    v = r.get(f"center_{which}")
    try:
        if v is not None and math.isfinite(float(v)):
            return float(v)
    except (TypeError, ValueError):
        pass
    return r[f"median_{which}"]


def _wide(rows) -> bool:
    """A row of ``rows`` (compare() rows) prints its %change as a factor: the table's wide columns."""
    return any(is_factor(_gain(r)) for r in rows)


def _row(r, cv_b: float, cv_c: float, control: bool, label: str, width: int, wide: bool = False) -> list[str]:
    w = _WIDE_COLS if wide else _COLS
    # the arms' figures the %change is computed from (their centers), the medians where there are none
    base, cand = _arm(r, "baseline"), _arm(r, "candidate")
    cells = (f"{value_label(base):>{w[0]}}", f"{sd_label(cv_b):>{w[1]}}", f"{_change(r, control):^{w[2]}}",
             f"{value_label(cand):>{w[3]}}", f"{sd_label(cv_c):>{w[4]}}")
    line = " ".join(cells) + "  "
    if len(line) + len(label) <= width:
        return [line + label]
    if len(label) <= width - 4:
        return [line.rstrip(), " " * min(len(line), width - len(label)) + label]
    return [line.rstrip()] + wrap_para(label, width, 4)   # never cut: wrapped at its spaces


def _header(base: str, cand: str, width: int, metric: str, wide: bool = False) -> list[str]:
    w = _WIDE_COLS if wide else _COLS
    unit = f"  {METRIC_NAMES.get(metric, metric)}"
    a, b = f"{base} ±%sd", f"{cand} ±%sd"
    if len(a) <= w[0] + w[1] + 1 and len(b) <= w[3] + w[4] + 1:   # each arm's name over its two columns
        head = f"{a:>{w[0] + w[1] + 1}} {'%change':^{w[2]}} {b:>{w[3] + w[4] + 1}}" + unit
        return [head, "-" * min(width, 62)]
    names = (f"{base:>{w[0] + w[1] + 1}}", f"{'%change':^{w[2]}}", f"{cand:>{w[3] + w[4] + 1}}")
    second = (f"{'':>{w[0]}}", f"{'±%sd':>{w[1]}}", f"{'':^{w[2]}}", f"{'':>{w[3]}}", f"{'±%sd':>{w[4]}}")
    return hang_para(" ".join(names) + unit, width) + [" ".join(second).rstrip(), "-" * min(width, 62)]


def _table(a: Analysis, baseline: str, metric: str, width: int,
           candidates: list[str] | None) -> tuple[list[str], dict]:
    """The LKP-shaped table (one block per candidate) and what the footnotes need."""
    env = a.env
    cmp = a.compare(baseline, metric)
    if candidates:
        cmp = cmp[cmp["candidate"].astype(str).isin(candidates)]
    if not len(cmp):
        raise MailError(f"RUN: no comparison against baseline {baseline!r} (no other variant was measured)")
    cols = list(cmp.attrs.get("group_columns") or [])
    vary = [c for c in cols if c not in _PLACEMENT_COLS and cmp[c].astype(str).nunique() > 1]
    const = [c for c in cols if c not in _PLACEMENT_COLS and c not in vary]
    places = "pair_class" in cmp.columns and cmp["pair_class"].astype(str).nunique() > 1
    cv = a.spread(metric, cols)
    instr = a.instructions(baseline, cols)
    controls = aa_controls(env, baseline, [str(c) for c in cmp["candidate"].unique()])
    out: list[str] = []
    info = {"controls": [], "significant": 0, "rows": 0, "family": {}, "instr_source": None,
            "first": cmp.iloc[0], "const": const, "gains": [], "metric": metric}
    for cand, grp in cmp.groupby("candidate", sort=False):
        cand = str(cand)
        control = cand in controls
        if control:
            info["controls"].append(cand)
        size = grp["family_size"].iloc[0]
        info["family"][cand] = int(as_float(size)) if is_finite_number(size) else len(grp)
        icand = None
        if instr is not None:
            icand = instr[0][instr[0]["candidate"].astype(str) == cand]
        wide = _wide([r for _, r in grp.iterrows() if cand not in controls]
                     + ([r for _, r in icand.iterrows()] if icand is not None else []))
        out += _header(baseline, cand, width, metric, wide)   # each head and rule start a table
        for _, r in grp.iterrows():
            ck = _config_key(r, cols)
            out += _row(r, cv.get((baseline,) + ck, math.nan), cv.get((cand,) + ck, math.nan), control,
                        _label(r, vary, metric, places), width, wide)
            info["rows"] += 1
            if not control:
                info["significant"] += catalog.is_call(r.get("verdict"))
                info["gains"].append((r, _label(r, vary, metric, places)))
        if instr is not None:
            icmp, src = instr
            info["instr_source"] = src
            for _, r in icmp[icmp["candidate"].astype(str) == cand].iterrows():
                lab = _label(r, [c for c in vary if c in r.index], INSTR, False, timing=False) + f" ({src})"
                out += _row(r, 0.0, 0.0, False, lab, width, wide)
    return out, info


def _sub_runs(run_dir: Path) -> list[Path]:
    """The run folder's sub-runs (a notebook's further questions), in natural order."""
    def natural(p: Path):
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.name)]
    if not Path(run_dir).is_dir():
        return []
    return sorted((p for p in Path(run_dir).iterdir()   # a linked folder is not one of the run's sub-runs
                   if p.is_dir() and not p.is_symlink() and (p / "raw.csv").is_file()), key=natural)


def _sub_analysis(a: Analysis, sub: Path) -> Analysis:
    """The Analysis of a sub-run of ``a``'s folder, made once."""
    return a.kept(("sub-run", sub.name), lambda: Analysis(sub))


def _count_runs(a: Analysis, baseline: str) -> list[tuple[Path, pd.DataFrame, str]]:
    """The sub-runs that count instructions (``-p icount true``): (folder, the compare() frame of
    instructions per op, the counts' source), for those with counts of ``baseline``."""
    out = []
    for sub in _sub_runs(a.path):
        try:
            sa = _sub_analysis(a, sub)
            df, params = sa.df, sa.env.parameters
            if params.get("icount") is not True or INSTR not in df.columns:
                continue
            counted = df[pd.to_numeric(df[INSTR], errors="coerce").notna()]
            instr = sa.instructions(baseline, [c for c in comparison_columns(counted, None)
                                               if c not in _PLACEMENT_COLS])
        except Exception:   # noqa: BLE001 - no counts of this baseline there: nothing to show
            continue
        if instr is not None and len(instr[0]):
            out.append((sub, instr[0], instr[1]))
    return out


def _further_runs(a: Analysis, baseline: str, metric: str, width: int,
                  count_runs: list[tuple[Path, pd.DataFrame, str]], printed: list | None = None) -> list[str]:
    """The runs in the run folder's sub-folders that compare ``baseline`` with one candidate (a
    notebook's further questions: a lock arm, a batch sweep), one row per configuration, labelled
    by sub-folder, under one header; each sub-run is its own Holm family.  A sub-run that counts
    instructions (``count_runs``, from ``_count_runs``) gives its instructions-per-op rows instead
    of timing ones.  [] where there are none.  ``printed`` (a list) receives each frame whose rows
    are printed."""
    rows: list[str] = []
    pending: list[tuple] = []   # (row, spread of base, of candidate, label, shorter label)
    cands: set[str] = set()
    frames: list[pd.DataFrame] = []
    counts = {sub: (icmp, src) for sub, icmp, src in count_runs}
    for sub in _sub_runs(a.path):
        if sub in counts:
            icmp, src = counts[sub]
            if icmp["candidate"].astype(str).nunique() != 1:
                continue
            cands.add(str(icmp["candidate"].iloc[0]))
            cols = list(icmp.attrs.get("group_columns") or [])
            vary = [c for c in cols if c not in _PLACEMENT_COLS and icmp[c].astype(str).nunique() > 1]
            frames.append(icmp)
            for _, r in icmp.iterrows():
                lab = _label(r, vary, INSTR, False, timing=False)   # "instr/op" names the run
                # too long for one line: without the counter's name (the mail's second line names it)
                pending.append((r, 0.0, 0.0, f"{lab} ({src})", lab))
            continue
        try:
            sa = _sub_analysis(a, sub)
            params = sa.env.parameters
            if params.get("icount") is True:    # counts of another baseline: not a row of this table
                continue
            cmp = sa.compare(baseline, metric)
        except Exception:   # noqa: BLE001 - not a comparison of this baseline: not a row of this table
            continue
        if not len(cmp) or cmp["candidate"].astype(str).nunique() != 1:
            continue
        cand = str(cmp["candidate"].iloc[0])
        cands.add(cand)
        cols = list(cmp.attrs.get("group_columns") or [])
        vary = [c for c in cols if c not in _PLACEMENT_COLS and cmp[c].astype(str).nunique() > 1]
        cv = sa.spread(metric, cols)
        frames.append(cmp)
        for _, r in cmp.iterrows():
            ck = _config_key(r, cols)
            label = " ".join(x for x in (sub.name, _label(r, vary, metric, False)) if x)
            pending.append((r, cv.get((baseline,) + ck, math.nan), cv.get((cand,) + ck, math.nan), label, None))
    wide = _wide([p[0] for p in pending])
    for r, cvb, cvc, label, short in pending:
        row = _row(r, cvb, cvc, False, label, width, wide)
        rows += row if len(row) == 1 or short is None else _row(r, cvb, cvc, False, short, width, wide)
    if not rows or len(cands) != 1:
        return []
    if printed is not None:
        printed.extend(frames)
    head = wrap_para("Further runs in this folder (each its own Holm family; the folder names what "
                     "differs from the table above):", width)
    return head + _header(baseline, cands.pop(), width, metric, wide) + rows + [""]


# -- the lines around the table ------------------------------------------------------------
def _direction(r) -> int:
    """+1 where the row's estimate is better (+), -1 where worse, 0 where there is no difference."""
    g = _gain(r)
    return 0 if not math.isfinite(g) or g == 0 else (1 if g > 0 else -1)


def _called(r) -> bool:
    return catalog.is_call(r.get("verdict"))


def _ways(rows, metric: str) -> str:
    """How rows point: "2 slower, 1 faster" (and "1 the same"), words of the metric."""
    good, bad = change_words(metric)
    n = {d: sum(1 for r in rows if _direction(r) == d) for d in (-1, 1, 0)}
    if len(rows) > 1 and max(n.values()) == len(rows):
        return "all " + (bad if n[-1] else good if n[1] else "the same")
    parts = [f"{n[-1]} {bad}" if n[-1] else "", f"{n[1]} {good}" if n[1] else "", f"{n[0]} the same" if n[0] else ""]
    return ", ".join(x for x in parts if x)


def _pattern(who: str, rows, metric: str) -> str:
    """What undecided rows say all together: "after is slower in 12 of 12 rows" when every row
    points one way, else "after is slower in 7 and faster in 5 of 12 rows"."""
    good, bad = change_words(metric)
    n = len(rows)
    k = {d: sum(1 for r in rows if _direction(r) == d) for d in (-1, 1, 0)}
    if k[-1] == n or k[1] == n:
        return f"{who} {'is' if ',' not in who else 'are'} {bad if k[-1] == n else good} in {n} of {n} row" + \
            ("" if n == 1 else "s")
    parts = [f"{bad} in {k[-1]}" if k[-1] else "", f"{good} in {k[1]}" if k[1] else "",
             f"the same in {k[0]}" if k[0] else ""]
    parts = [x for x in parts if x]
    return f"{who} {'is' if ',' not in who else 'are'} " + " and ".join(parts) + f" of {n} rows"


def _headline(env: RunEnv, df: pd.DataFrame, host: str | None, base: str, cands: list[str], info: dict) -> str:
    """The title: the arms, the host, and what the rows say together (how many changed, which
    way the others point)."""
    exp = env.experiment or (str(df["experiment"].iloc[0]) if "experiment" in df.columns and len(df) else "run")
    host = host or "this host"
    real = [c for c in cands if c not in info["controls"]] or cands
    rows = [r for r, _ in info["gains"]]
    called = [r for r in rows if _called(r)]
    rest = [r for r in rows if not _called(r)]
    metric = info.get("metric", "ns_per_op")
    n = len(rows)
    if called:
        what = f"{len(called)} of {n} rows changed ({_ways(called, metric)})"
        if rest:
            what += f"; the other {len(rest)}: {_ways(rest, metric)}, none decided"
    elif rows:
        what = _pattern(", ".join(real), rows, metric) + "; none decided"
    else:
        what = "no row compared"
    return f"ringlab {exp}: {', '.join(real)} against {base} on {host}: {what}"


def _mag(g: float, lib: bool, metric: str) -> tuple[str, str]:
    """(size, kind) of an effect in the robot's words: ("11.8%", "improvement"), ("30.7%",
    "regression"), or a factor ("×9.7", "faster")."""
    if is_factor(g):
        num, word = change_text(g, lib, metric).split(" ", 1)
        return num, word
    return f"{abs(g):.1f}%", "improvement" if g > 0 else "regression"


def _once(ci: str, word: str) -> str:
    """A factor's CI beside its estimate: "[×9.0, ×10.5]" where the estimate already says "faster"."""
    return ci[:-len(word) - 1] if ci.endswith(f"] {word}") else ci


def robot_lines(info: dict, base: str, width: int) -> list[str]:
    """One headline per comparison in the kernel test robot's form, + = better:
    "prebatch vs batch: 11.8% improvement of ns/op (mode=0 same-cpu), 95% CI [+11.1, +12.5]";
    several called rows of one direction in one line ("6.0% to 11.8% improvement ... in 2 of 2
    rows"); the rows not called in one line, "no change called", with the way they point."""
    metric = info.get("metric", "ns_per_op")
    mname = METRIC_NAMES.get(metric, metric)
    by_cand: dict[str, list] = {}
    for r, lab in info["gains"]:
        by_cand.setdefault(str(r["candidate"]), []).append((r, lab))
    out: list[str] = []
    for cand, rows in by_cand.items():
        head = f"{cand} vs {base}:"
        n = len(rows)
        called = [(r, lab) for r, lab in rows if _called(r)]
        for d in (1, -1):
            grp = [(r, lab) for r, lab in called if _direction(r) == d]
            if not grp:
                continue
            lib = bool(grp[0][0].get("lower_is_better", True)) if grp[0][0].get("lower_is_better") is not None else True
            if len(grp) == 1:
                r, lab = grp[0]
                size, kind = _mag(_gain(r), lib, metric)
                of_ = "of" if kind in ("improvement", "regression") else "in"
                txt = (f"{head} {size} {kind} {of_} {mname}" + (f" ({lab})" if lab else "")
                       + f", 95% CI {_once(row_change_ci_text(r, percent_sign=False), kind)}")
            else:
                gs = sorted(abs(_gain(r)) for r, _ in grp)
                lo_t, kind = _mag(d * gs[0], lib, metric)
                hi_t, _ = _mag(d * gs[-1], lib, metric)
                lo_k = _mag(d * gs[0], lib, metric)[1]
                if kind in ("improvement", "regression"):
                    txt = f"{head} {lo_t[:-1]}% to {hi_t} {kind} of {mname} in {len(grp)} of {n} rows"
                elif lo_k == kind:   # factors of one direction
                    txt = f"{head} {lo_t} to {hi_t} {kind} in {mname} in {len(grp)} of {n} rows"
                else:   # a percent and a factor
                    txt = f"{head} {change_text(d * gs[0], lib, metric)} to {change_text(d * gs[-1], lib, metric)} " \
                          f"in {mname} in {len(grp)} of {n} rows"
            out += hang_para(txt, width)
        rest = [r for r, _ in rows if not _called(r)]
        if rest and called:
            out += hang_para(f"{head} no change called in the other {len(rest)} "
                             f"({_ways(rest, metric)})", width)
        elif rest:
            out += hang_para(f"{head} no change called ({_pattern(cand, rest, metric)})", width)
    return out


def floor_lines(env: dict, df: pd.DataFrame, info: dict, width: int, run_dir: Path) -> list[str]:
    """The host's noise floor: the calibration beside the run (its results folder), else the
    one of this checkout's results folder."""
    host = run_host(df, env)
    return noise_floor_lines(host, run_noise_floor(host, run_dir), env, info, width)


def noise_floor_lines(host: str | None, nf: dict | None, env: dict, info: dict, width: int) -> list[str]:
    """The noise-floor line of ``host`` whose floor is ``nf`` (an Analysis' ``host`` and ``floor``)."""
    if nf is None:
        own = _own_floor(env)
        return wrap_para(f"noise floor: not calibrated on {host or 'this host'}"
                         + (f"; this run's own {own}" if own else " (ringlab calibrate measures its A/A bound)"), width)
    # the significant rows whose effect is inside the A/A bound: their arms, by configuration
    below: dict[str, list[str]] = {}
    for r, lab in info["gains"]:
        if catalog.is_call(r.get("verdict")) and abs(_gain(r)) < nf["bound_pct"]:
            below.setdefault(lab, []).append(str(r["candidate"]))
    named = [" ".join(x for x in (", ".join(arms), lab) if x) for lab, arms in below.items()]
    txt = (f"noise floor: |Δ| < {nf['bound_pct']:.1f}% (A/A, calibration {nf['run_id']}, "
           f"{nf['layouts']} layout pairs)" + (f"; below it: {'; '.join(named)}" if named else ""))
    return wrap_para(txt, width)


def _short_source(r) -> str:
    """A row's next-run basis as the mail says it, in a few words."""
    basis, src = str(r.get("next_basis") or ""), str(r.get("next_source") or "")
    if basis == "none" or src == NO_BETWEEN_TEXT:
        return "no between-run information: a rerun if nothing drifted"
    if basis == "host A/A":
        return "host A/A upper bound"
    return src


def _interval_lines(info: dict, width: int) -> list[str]:
    """Each row's two intervals, + = better, one line per row: this run's 95% CI (the verdict's)
    and where another run on this host is expected (the next-run interval), under a header that
    says what each means and the next-run interval's between-run basis."""
    rows = [(r, lab) for r, lab in info["gains"] if math.isfinite(as_float(r.get("next_low_pct")))]
    if not rows:
        return []
    # the mail's short form of each basis: a first run on a host must fit one screen too
    srcs = list(dict.fromkeys(_short_source(r) for r, _ in rows if r.get("next_source")))
    flip = any(r.get("sign_reproducible") is False for r, _ in rows)
    out = wrap_para("[95% CI]: this run, the verdicts'. next: another run here, 95%"
                    + (f" ({'; '.join(srcs)})" if srcs else "") + "."
                    + (" ?: call may flip." if flip else ""), width)
    for r, lab in rows:
        lo, hi = gain_ci(r)
        nlo, nhi = next_gain_ci(r)
        est = row_change_text(r)   # a factor past ±50%, its CIs without the word again
        ci = f"{est} {_once(row_change_ci_text(r, percent_sign=False), est.split()[-1])}"
        nxt = ("next " + (_once(change_ci_text(nlo, nhi, _gain(r), bool(r.get("lower_is_better", True)),
                                               info.get("metric", "ns_per_op"), percent_sign=False), est.split()[-1])
                          if is_factor(_gain(r)) else f"[{nlo:+.1f}, {nhi:+.1f}]")
               + ("?" if r.get("sign_reproducible") is False else ""))
        one = len({str(x["candidate"]) for x, _ in rows}) == 1   # one arm: the table above names it
        name = " ".join(x for x in (None if one and lab else str(r["candidate"]), lab) if x)
        line = f"  {ci:<21} {nxt:<20} {name}"
        if len(line) > width:   # unaligned, where that keeps the row on one line
            line = f"  {ci} {nxt} {name}"
        # the label is never cut: what does not fit goes on the next line
        out += [line] if len(line) <= width else [f"  {ci} {nxt}"] + wrap_para(name, width, 4)
    return out + [""]


def shared_settings(info: dict, printed: list[pd.DataFrame]) -> list[str]:
    """The configuration columns every printed row shares ("size 1000", "batch 0"): constant
    over the table and over each further run's rows (a column a further run lacks, or sets
    otherwise, is left out)."""
    first = info["first"]
    keep = []
    for c in info["const"]:
        v = str(first[c])
        if all(c in f.columns and len(f) and (f[c].astype(str) == v).all() for f in printed):
            keep.append(f"{c} {plain_number(first[c])}")
    return keep


def header_lines(a: Analysis, info: dict, width: int, printed: list[pd.DataFrame], factors: bool = True) -> list[str]:
    """How many, and how to read the table, stated once above it: n (rounds, layout pairs), the
    trials' length, the run's wall time; the metric, which way is better, the one sign (and how a
    change past ±50% prints, where ``factors``: a row prints one); the settings every row shares."""
    metric = info.get("metric", "ns_per_op")
    rows = [r for r, _ in info["gains"]] or [info["first"]]
    wall = wall_time(a.env, a.df)
    txt = (f"n: {design_text(rows)} per row, {trial_text(a.df)}, run "
           + (duration_text(wall) if math.isfinite(wall) else "time not recorded") + ".")
    lib = metric in schema.LOWER_IS_BETTER
    good, _ = change_words(metric)
    txt += (f" {METRIC_NAMES.get(metric, metric)}: {'lower' if lib else 'higher'} is better. %change: the "
            f"verdict's estimate, + = better ({good})" + (f"; past ±50% a factor (×2.1 {good})." if factors else "."))
    txt += " " + _legend_text(info)
    shared = shared_settings(info, printed)
    if shared:
        txt += " Every row: " + ", ".join(shared) + "."
    return wrap_para(txt, width)


#: the next-run interval's basis (compare() rows' ``next_basis``) in the block's words
_BASIS_WORDS = {"none": "no drift measured", "host A/A": "host A/A drift bound", "runs": "drift between its runs here"}


def _block_row(a: Analysis, info: dict):
    """The run's headline row: the called row with the largest effect, else the first row of the
    run's patched arm (env.json ``report``), else the first row; None without rows."""
    rows = info["gains"]
    if not rows:
        return None
    called = [x for x in rows if _called(x[0])]
    if called:
        return max(called, key=lambda x: abs(_gain(x[0])))
    return next((x for x in rows if str(x[0]["candidate"]) == str(a.patched)), rows[0])


def paste_block(a: Analysis, info: dict, base: str, width: int, notebook=None) -> list[str]:
    """Five lines to paste into a commit message, marked as such, for the run's headline row:
    the command, n, before -> after with the %change in the table's one sign (+ = better, stated in
    the line: the block travels without the mail's header; a factor beyond ±50%) and its 95% CI,
    where a rerun here should land (the next-run interval in the same sign and, when the row has
    one, its basis), the data."""
    pick = _block_row(a, info)
    if pick is None:
        return []
    r, lab = pick
    env, metric = a.env, info.get("metric", "ns_per_op")
    lib = bool(r.get("lower_is_better", True)) if r.get("lower_is_better") is not None else True
    mname = METRIC_NAMES.get(metric, metric)
    git = env.git
    rl = f"ringlab {short_sha(git.commit)}" + (" (uncommitted changes)" if git.dirty else "")
    g = _gain(r)
    est = row_change_text(r)   # the table's %change: + = better, a factor (its own direction word) past ±50%
    note = "(95% CI)" if is_factor(g) else "(95% CI, + = better)"   # the sign stated: pasted without the header
    change = f"{est} {_once(row_change_ci_text(r, percent_sign=False), est.split()[-1])} {note}"
    nlo, nhi = next_gain_ci(r)
    basis = r.get("next_basis")   # where its between-run part comes from; absent from older frames
    # the line's label says what the interval is; its basis alone keeps the line as short as the block's
    # one screen needs, beside the sign stated above
    basis = f"({_BASIS_WORDS.get(basis, basis)})" if isinstance(basis, str) and basis.strip() else "(next-run interval)"
    if math.isfinite(nlo) and math.isfinite(nhi):
        if is_factor(g):
            nxt = f"{change_ci_text(nlo, nhi, g, lib, metric, percent_sign=False)} {basis}"
        else:
            nxt = f"[{nlo:+.1f}, {nhi:+.1f}] {basis}"
    else:
        nxt = "not estimated (no next-run interval for this row)"
    out = hang_para(f"To paste into the commit message ({r['candidate']} vs {base}"
                    + (f", {lab}" if lab else "") + "):", width)
    out += hang_para(f"Measured with {rl} ({command_words(a.path, env, notebook)}):", width)
    out += hang_para(f"  n: {design_text([r])}, {trial_text(a.df, short=True)}, {cpus_text(env)}", width, 4)
    out += hang_para(f"  before -> after: {sig4(_arm(r, 'baseline'))} -> {sig4(_arm(r, 'candidate'))} {mname}, "
                     f"{change}", width, 4, whole=(note,))
    out += hang_para(f"  a rerun here should show: {nxt}", width, 4)
    first = "  data: "
    parts = path_lines(f"{run_path(a.path, env)}/raw.csv", width - len(first), 0)
    out += [first + parts[0]] + [" " * 4 + x for x in parts[1:]]
    return out + [""]


def _own_floor(env: RunEnv) -> str:
    """A staged run's own measure of its noise, for a host without a calibration: the 95% CI
    half-widths the judged rows reached at the run's design, as a range per mode ("" for a run
    without stages)."""
    stop = RunEnv.of(env).stopping_record
    if stop is None:
        return ""
    rows = [r for r in stop.rows or () if isinstance(r.half_width_pct, (int, float)) and math.isfinite(r.half_width_pct)]
    if not rows or not stop.stages:
        return ""
    by_mode: dict[str | None, list[float]] = {}     # one range per mode: the rows of a mode share its noise
    for r in rows:
        mode = dict(p.split("=", 1) for p in str(r.group).split(",") if "=" in p).get("mode")
        by_mode.setdefault(mode, []).append(float(r.half_width_pct))
    parts = []
    for mode, hw in by_mode.items():
        lo, hi = f"{min(hw):.2f}", f"{max(hw):.2f}"
        parts.append((f"±{lo}%" if lo == hi else f"±{lo}-{hi}%") + (f" in mode {mode}" if mode is not None else ""))
    return ("95% CI half-width " + ", ".join(parts) + f" at {stop.layouts} layouts x "
            f"{stop.rounds_per_layout} rounds")


def _legend_text(info: dict) -> str:
    """What the table's marks mean (a sentence of the header paragraph)."""
    sizes = sorted(set(info["family"].values()))
    fam = (f"the run's {sizes[0]} comparisons" if len(sizes) == 1
           else ", ".join(f"{c} {n}" for c, n in info["family"].items()))
    txt = ("±%sd: spread of one arm's "
           f"trials. *x*: significant at family-wise 5% (p Holm-adjusted over {fam}).")
    if info["controls"]:
        txt += (f" {', '.join(info['controls'])}: an A/A control (the base's code again); "
                "|Δ|<x% is the bound its 95% CI allows.")
    return txt


def published_counts_text(df: pd.DataFrame, env: RunEnv, base: str, cands: list[str]) -> str:
    """The published instruction counts of a study of the run's experiment (ringlab.catalog's
    ``STUDIES``) beside ours, when this run counted both of their arms ("" when not):
    whether they agree (the same sign, within 2 points), with the static size of the measured
    loop (objdump -d of the binaries that ran) as the evidence."""
    exp = RunEnv.of(env).experiment
    if exp not in catalog.EXPERIMENT_NAMES or INSTR not in df.columns:
        return ""
    for study in catalog.STUDIES:
        txt = _counts_beside(df, env, study, {base} | set(cands)) if study.experiment == exp and study.counts else ""
        if txt:
            return txt
    return ""


def _counts_beside(df: pd.DataFrame, env: RunEnv, study: catalog.Study, arms: set[str]) -> str:
    """:func:`published_counts_text` for one study's counts ("" when the run lacks an arm)."""
    pub = study.counts
    counts = pub.counts()
    if set(counts) - arms:
        return ""
    try:
        meas, _ = measurements(df, INSTR)
    except StatsError:
        return ""
    if pub.mode and "mode" in meas.columns:
        meas = meas[meas["mode"].astype(str) == pub.mode]
    med = meas.groupby(meas["variant"].astype(str))[INSTR].median()
    if not set(counts) <= set(med.index):
        return ""
    base, patched = study.arms
    pb, pr = counts[base], counts[patched]
    ob, orr = float(med[base]), float(med[patched])
    dp, do = (pr / pb - 1) * 100, (orr / ob - 1) * 100
    agree = (dp > 0) == (do > 0) and abs(dp - do) <= 2
    txt = (f"Published counts {'agree' if agree else 'disagree'} with ours: {study.name}'s {pub.tool} gave "
           f"{pb:.0f} -> {pr:.0f} instructions/op ({dp:+.1f}%) for the whole process; callgrind counts "
           f"{ob:.2f} -> {orr:.2f} ({do:+.2f}%) in the measured loop ({pub.loop}).")
    loops = loop_summary(run_binaries(env, study.arms))
    if len(loops) == 2:
        b, r = loops[base], loops[patched]
        txt += (f" objdump -d: its loop holds {b['loop_instructions']} instructions in {base}, "
                f"{r['loop_instructions']} in {patched} ({b['instructions']} and {r['instructions']} in the "
                f"function; notebook {study.notebook} shows them).")
    else:
        txt += f" Notebook {study.notebook} shows the loop's objdump."
    return txt


def _published_counts(a: Analysis, base: str, cands: list[str]) -> str:
    """:func:`published_counts_text` of the run, made once per baseline and candidates."""
    return a.kept(("published counts", base, tuple(cands)),
                  lambda: published_counts_text(a.df, a.env, base, cands))


def published_counts(run_dir, baseline: str | None = None) -> str:
    """:func:`published_counts_text` of a run folder, a Report or an Analysis (notebook 10)."""
    a = Analysis.for_run(run_dir)
    a.run.read()   # DataError naming the file when raw.csv or env.json is corrupt
    base = _baseline(a.df, a.env, baseline)
    return _published_counts(a, base, sorted(set(a.df["variant"].astype(str)) - {base}))


def _published_icount(a: Analysis, base: str, cands: list[str], width: int) -> list[str]:
    txt = _published_counts(a, base, cands)
    return wrap_para(txt, width) if txt else []


def run_binaries(env: RunEnv, arms) -> dict[str, str]:
    """{arm: the path of the binary that ran it}, for the arms whose binary (the run's
    experiment's, ringlab.catalog) is still the one that ran."""
    env = RunEnv.of(env)
    if env.experiment not in catalog.EXPERIMENT_NAMES:
        return {}
    entry = catalog.experiment(env.experiment)
    used = env.binaries_used
    out = {}
    for a in arms:
        d = next((v for k, v in sorted(used.items()) if entry.arm_of_binary(k) == a
                  and isinstance(v, dict)), {})
        if d.get("path") and d.get("sha256") and _sha256(d["path"]) == d["sha256"]:
            out[a] = d["path"]   # the very binary that ran, not a rebuild
    return out


def _sha256(path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def counters_text(run_dir) -> str:
    """The mail's second line for a run folder (or its Report / Analysis): whether the host has a
    PMU and what counts instructions instead (the first line of a notebook's run overview)."""
    a = Analysis.for_run(run_dir)
    a.run.read()
    return counters_line(a.df, a.env)


# -- the mail --------------------------------------------------------------------------------
def mail_text(run_dir, baseline: str | None = None, width: int = WIDTH, metric: str | None = None,
              candidates: list[str] | None = None, notebook: tuple[str, dict] | None = None) -> str:
    """The run in ``run_dir`` as plain text for a mailing-list reply.  ``run_dir`` is a run
    folder, or the ``Report`` / ``Analysis`` of one, whose comparisons the mail then shares.

    ``notebook`` = (notebook file name, its parameters) lets a notebook that is still
    running give its own papermill line; otherwise the executed notebook in the run folder
    (papermill metadata) is used when there is one."""
    if not isinstance(width, int) or width < MIN_WIDTH:
        raise MailError(f"--width: {width!r} is too narrow; allowed: an integer >= {MIN_WIDTH} (default {WIDTH})")
    if width > MAX_WIDTH:
        raise MailError(f"--width: {width!r} is too wide; allowed: an integer in [{MIN_WIDTH}, {MAX_WIDTH}] "
                        f"(default {WIDTH})")
    a = Analysis.for_run(run_dir)
    run_dir, run = a.path, a.run
    raw = run.raw_csv
    if run_dir.is_dir() and not run.has_raw:
        raise MailError(f"RUN: no raw.csv in {run_dir} ({raw}: no such file); allowed: a run folder written by `ringlab run` "
                        "or a notebook")
    run.read()   # DataError (exit 2) naming the file and line when one is corrupt
    df, env = a.df, a.env
    try:
        metric = pick_metric(df, metric)
        require_metric(df, metric, raw)
        measurements(df, metric)
    except StatsError as e:
        raise MailError(f"--metric: {e}") from None
    base = _baseline(df, env, baseline)
    variants = [base] + sorted(set(df["variant"].astype(str)) - {base})
    if candidates:
        bad = [c for c in candidates if c not in variants or c == base]
        if bad:
            raise MailError(f"--candidate: {', '.join(bad)} not a variant of this run other than the baseline; "
                            f"allowed: {', '.join(v for v in variants if v != base)}")
        variants = [base] + [v for v in variants if v in candidates]
    table, info = _table(a, base, metric, width, variants[1:] if candidates else None)

    count_runs = _count_runs(a, base) if not candidates else []
    printed: list[pd.DataFrame] = []
    further = _further_runs(a, base, metric, width, count_runs, printed) if not candidates else []
    lines = wrap_para(_headline(env, df, a.host, base, variants[1:], info), width)
    lines += robot_lines(info, base, width)
    counted = [f"{s.name}/" for s, _, src in count_runs if src == "callgrind"]
    lines += wrap_para(counters_line(df, env, elsewhere=", ".join(counted) or None), width)
    lines.append("")
    lines += wrap_para(tested_line(env, base, variants[1:], run_dir), width)
    lines += wrap_para("test machine: " + machine_line(env), width)
    lines += noise_floor_lines(a.host, a.noise_floor, env, info, width)
    lines.append("")
    lines += header_lines(a, info, width, printed, factors=any("×" in ln for ln in table + further))
    lines += table
    lines.append("")
    lines += _interval_lines(info, width)
    lines += further
    block = paste_block(a, info, base, width, notebook)
    lines += block
    lines += _published_icount(a, base, variants[1:], width)
    lines += wrap_para("not measured here: " + not_measured(df, env), width)
    for w in env.warnings:
        lines += wrap_para(f"warning: {w}", width)
    lines.append("")
    lines += reproduce_lines(run_dir, env, width, notebook)
    if block:   # the block's data line names the folder
        lines += wrap_para("Hashes, layouts and every trial: summary.md and env.json beside raw.csv.", width)
    else:
        lines += wrap_para("Hashes, layouts and every trial: summary.md, env.json and raw.csv in", width)
        lines += path_lines(f"{run_path(run_dir, env)}/", width)
    text = "\n".join(ln.rstrip() for ln in lines) + "\n"
    return text


__all__ = ["MailError", "WIDTH", "counters_text", "mail_text", "published_counts", "read_env", "reproduce_lines",
           "run_binaries"]
