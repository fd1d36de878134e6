"""A run as a reply for a mailing list, in the shape of the kernel test robot's reports
(``ringlab mail RUN``, and mail.txt of the A/B notebooks).

Plain text, at most ``width`` (72) columns, one screen: a headline (and, on the next line,
whether this host has a PMU and what counts instructions instead), the code under test, one
machine line as LKP writes it ("2 threads 1 sockets (AMD EPYC) with 8G memory"), the host's
noise floor (the A/A bound of its calibration), then one table row per configuration and
metric::

      base ±%stddev    %change    patched ±%stddev  metric

``%change`` is the verdict's effect (``ringlab.stats.contract.Comparison``: the Hodges-Lehmann
estimate, ``gain_pct`` for lower-is-better metrics), + = better throughout, ``*..*`` marks the
rows Holm calls significant (mmtests' mark); the per-arm figures are the Comparison's
own, so they agree with summary.md.  A/A controls are stated as bounds (``|Δ| < 2.9%``).  Then
what this host could not measure, and the reproduce line with paths relative to the tree.
Hashes, layouts and per-trial detail stay in env.json and summary.md.

The run folder is read through :class:`ringlab.rundir.Run` only (raw.csv, env.json, the
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

from ringlab import schema
from ringlab.errors import ParamError
from ringlab.stats import StatsError, measurements
from ringlab.stats.rounds import comparison_columns
from ringlab.stats.contract import SIGNIFICANT
from ringlab.stats.replication import NO_BETWEEN_TEXT
from ringlab.report.mail_objdump import loop_summary
from ringlab.report.mail_reproduce import reproduce_lines, run_path
from ringlab.report.mail_run import (aa_controls, counters_line, machine_line, not_measured, tested_line)
from ringlab.report.mailfmt import plain_number, as_float, is_finite_number, wrap_para, path_lines
from ringlab.report.analysis import INSTR, Analysis, of, pick_metric
from ringlab.report.published import SEED000_INSTRUCTIONS_PER_OP
from ringlab.rundir import RunEnv, pick_baseline as baseline_rule, require_metric, run_variants
from ringlab.rundir.calibration import run_host, run_noise_floor
from ringlab.report.tables import gain_ci, next_gain_ci

WIDTH = 72
MIN_WIDTH = 60
MAX_WIDTH = 1000
#: the metrics' short names in the table
METRIC_NAMES = {"ns_per_op": "ns/op", "elapsed_us": "us", "elapsed_ns": "ns", INSTR: "instr/op"}
# columns shown as the placement of a row, not as a configuration parameter
_PLACEMENT_COLS = ("cpu_req_producer", "cpu_req_consumer", "pair_class")
#: the table's columns: base, its spread, %change, patched, its spread (then the metric)
_COLS = (9, 5, 11, 9, 5)


class MailError(ParamError):
    """Bad input to ``ringlab mail`` (names the parameter and the allowed values)."""


def read_env(run_dir) -> RunEnv:
    """env.json of a run folder (an empty RunEnv when missing or unreadable): ``Run(run_dir).env_doc``."""
    return of(run_dir).run.env_doc


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
    txt = f"{g:+.1f}%"
    return f"*{txt}*" if str(r.get("verdict")) in SIGNIFICANT else f" {txt} "


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


def _row(r, cv_b: float, cv_c: float, control: bool, label: str, width: int) -> list[str]:
    w = _COLS
    # the arms' figures the %change is computed from (their centers), the medians where there are none
    base, cand = _arm(r, "baseline"), _arm(r, "candidate")
    cells = (f"{value_label(base):>{w[0]}}", f"{sd_label(cv_b):>{w[1]}}", f"{_change(r, control):^{w[2]}}",
             f"{value_label(cand):>{w[3]}}", f"{sd_label(cv_c):>{w[4]}}")
    line = " ".join(cells) + "  "
    if len(line) + len(label) <= width:
        return [line + label]
    return [line.rstrip(), " " * min(len(line), width - len(label)) + label[:width]]


def _header(base: str, cand: str, width: int, metric: str) -> list[str]:
    w = _COLS
    names = (f"{base[:w[0] + w[1] + 1]:>{w[0] + w[1] + 1}}", f"{'%change':^{w[2]}}",
             f"{cand[:w[3] + w[4] + 1]:>{w[3] + w[4] + 1}}")
    second = (f"{'':>{w[0]}}", f"{'±%sd':>{w[1]}}", f"{'':^{w[2]}}", f"{'':>{w[3]}}", f"{'±%sd':>{w[4]}}")
    return [" ".join(names) + f"  {METRIC_NAMES.get(metric, metric)}", " ".join(second).rstrip(),
            "-" * min(width, 62)]


def _table(a: Analysis, baseline: str, metric: str, width: int,
           candidates: list[str] | None) -> tuple[list[str], dict]:
    """The LKP-shaped table (one block per candidate) and what the footnotes need."""
    env = a.env
    cmp = a.comparison(baseline, metric)
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
            "first": cmp.iloc[0], "const": const, "gains": []}
    for cand, grp in cmp.groupby("candidate", sort=False):
        cand = str(cand)
        control = cand in controls
        if control:
            info["controls"].append(cand)
        size = grp["family_size"].iloc[0]
        info["family"][cand] = int(as_float(size)) if is_finite_number(size) else len(grp)
        out += ([""] if out else []) + _header(baseline, cand, width, metric)
        for _, r in grp.iterrows():
            ck = _config_key(r, cols)
            out += _row(r, cv.get((baseline,) + ck, math.nan), cv.get((cand,) + ck, math.nan), control,
                        _label(r, vary, metric, places), width)
            info["rows"] += 1
            if not control:
                info["significant"] += str(r.get("verdict")) in SIGNIFICANT
                info["gains"].append((r, _label(r, vary, metric, places)))
        if instr is not None:
            icmp, src = instr
            info["instr_source"] = src
            for _, r in icmp[icmp["candidate"].astype(str) == cand].iterrows():
                lab = _label(r, [c for c in vary if c in r.index], INSTR, False, timing=False) + f" ({src})"
                out += _row(r, 0.0, 0.0, False, lab, width)
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
                  count_runs: list[tuple[Path, pd.DataFrame, str]]) -> list[str]:
    """The runs in the run folder's sub-folders that compare ``baseline`` with one candidate (a
    notebook's further questions: a lock arm, a batch sweep), one row per configuration, labelled
    by sub-folder, under one header; each sub-run is its own Holm family.  A sub-run that counts
    instructions (``count_runs``, from ``_count_runs``) gives its instructions-per-op rows instead
    of timing ones.  [] where there are none."""
    rows: list[str] = []
    cands: set[str] = set()
    counts = {sub: (icmp, src) for sub, icmp, src in count_runs}
    for sub in _sub_runs(a.path):
        if sub in counts:
            icmp, src = counts[sub]
            if icmp["candidate"].astype(str).nunique() != 1:
                continue
            cands.add(str(icmp["candidate"].iloc[0]))
            cols = list(icmp.attrs.get("group_columns") or [])
            vary = [c for c in cols if c not in _PLACEMENT_COLS and icmp[c].astype(str).nunique() > 1]
            for _, r in icmp.iterrows():
                lab = _label(r, vary, INSTR, False, timing=False)   # "instr/op" names the run
                row = _row(r, 0.0, 0.0, False, f"{lab} ({src})", width)
                # too long for one line: the mail's second line names the counter
                rows += row if len(row) == 1 else _row(r, 0.0, 0.0, False, lab, width)
            continue
        try:
            sa = _sub_analysis(a, sub)
            params = sa.env.parameters
            if params.get("icount") is True:    # counts of another baseline: not a row of this table
                continue
            cmp = sa.comparison(baseline, metric)
        except Exception:   # noqa: BLE001 - not a comparison of this baseline: not a row of this table
            continue
        if not len(cmp) or cmp["candidate"].astype(str).nunique() != 1:
            continue
        cand = str(cmp["candidate"].iloc[0])
        cands.add(cand)
        cols = list(cmp.attrs.get("group_columns") or [])
        vary = [c for c in cols if c not in _PLACEMENT_COLS and cmp[c].astype(str).nunique() > 1]
        cv = sa.spread(metric, cols)
        for _, r in cmp.iterrows():
            ck = _config_key(r, cols)
            label = " ".join(x for x in (sub.name, _label(r, vary, metric, False)) if x)
            rows += _row(r, cv.get((baseline,) + ck, math.nan), cv.get((cand,) + ck, math.nan), False, label, width)
    if not rows or len(cands) != 1:
        return []
    head = wrap_para("Further runs in this folder (each its own Holm family; the folder names what "
                     "differs from the table above):", width)
    return head + _header(baseline, cands.pop(), width, metric) + rows + [""]


# -- the lines around the table ------------------------------------------------------------
def _headline(env: RunEnv, df: pd.DataFrame, host: str | None, base: str, cands: list[str], info: dict) -> str:
    exp = env.experiment or (str(df["experiment"].iloc[0]) if "experiment" in df.columns and len(df) else "run")
    host = host or "this host"
    real = [c for c in cands if c not in info["controls"]] or cands
    n = sum(1 for _ in info["gains"])
    gains = [_gain(r) for r, _ in info["gains"] if str(r.get("verdict")) in SIGNIFICANT]
    if gains:
        lo, hi = min(gains), max(gains)
        span = f"{lo:+.1f}%" if abs(hi - lo) < 0.05 else f"{lo:+.1f}% to {hi:+.1f}%"
        what = f"{len(gains)} of {n} rows changed ({span}, + = better)"
    else:
        what = f"no change told apart from noise in {n} row" + ("" if n == 1 else "s")
    return f"ringlab {exp}: {', '.join(real)} against {base} on {host}: {what}"


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
        if str(r.get("verdict")) in SIGNIFICANT and abs(_gain(r)) < nf["bound_pct"]:
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
        ci = f"{_gain(r):+.1f}% [{lo:+.1f}, {hi:+.1f}]"
        nxt = f"next [{nlo:+.1f}, {nhi:+.1f}]" + ("?" if r.get("sign_reproducible") is False else "")
        name = " ".join(x for x in (str(r["candidate"]), lab) if x)
        out.append(f"  {ci:<21} {nxt:<20} {name}"[:width])
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


def _legend(info: dict, width: int) -> list[str]:
    first = info["first"]
    fam = ", ".join(f"{c} {n}" for c, n in info["family"].items())
    txt = ("%change: the verdict's estimate, + = better (less time per op, more ops/s), from the "
           "arms' columns; ±%sd: spread of one arm's "
           f"trials. *x*: significant at family-wise 5% (p Holm-adjusted over configurations: {fam}).")
    if info["controls"]:
        txt += (f" {', '.join(info['controls'])}: an A/A control (the base's code again); "
                "|Δ|<x% is the bound its 95% CI allows.")
    out = wrap_para(txt, width)
    if info["const"]:
        out += wrap_para("Every row: " + ", ".join(f"{c} {plain_number(first[c])}" for c in info["const"]) + ".", width)
    return out


def published_counts_text(df: pd.DataFrame, env: RunEnv, base: str, cands: list[str]) -> str:
    """Seed 000's perf stat counts beside ours, when this run counted batch and reorder ("" when
    not): whether they agree (the same sign, within 2 points), with the static size of the
    measured loop (objdump -d of the binaries that ran) as the evidence."""
    pub = SEED000_INSTRUCTIONS_PER_OP
    if RunEnv.of(env).experiment != "ptr_ring" or set(pub) - ({base} | set(cands)) or INSTR not in df.columns:
        return ""
    try:
        meas, _ = measurements(df, INSTR)
    except StatsError:
        return ""
    if "mode" in meas.columns:
        meas = meas[meas["mode"].astype(str) == "0"]
    med = meas.groupby(meas["variant"].astype(str))[INSTR].median()
    if not set(pub) <= set(med.index):
        return ""
    pb, pr = pub["batch"], pub["reorder"]
    ob, orr = float(med["batch"]), float(med["reorder"])
    dp, do = (pr / pb - 1) * 100, (orr / ob - 1) * 100
    agree = (dp > 0) == (do > 0) and abs(dp - do) <= 2
    txt = (f"Published counts {'agree' if agree else 'disagree'} with ours: seed 000's perf stat gave "
           f"{pb:.0f} -> {pr:.0f} instructions/op ({dp:+.1f}%) for the whole process; callgrind counts "
           f"{ob:.2f} -> {orr:.2f} ({do:+.2f}%) in the measured loop (rl_measured_simple, no locks).")
    loops = loop_summary(run_binaries(env, ("batch", "reorder")))
    if len(loops) == 2:
        b, r = loops["batch"], loops["reorder"]
        txt += (f" objdump -d: its loop holds {b['loop_instructions']} instructions in batch, "
                f"{r['loop_instructions']} in reorder ({b['instructions']} and {r['instructions']} in the "
                "function; notebook 10 shows them).")
    else:
        txt += " Notebook 10 shows the loop's objdump."
    return txt


def _published_counts(a: Analysis, base: str, cands: list[str]) -> str:
    """:func:`published_counts_text` of the run, made once per baseline and candidates."""
    return a.kept(("published counts", base, tuple(cands)),
                  lambda: published_counts_text(a.df, a.env, base, cands))


def published_counts(run_dir, baseline: str | None = None) -> str:
    """:func:`published_counts_text` of a run folder, a Report or an Analysis (notebook 10)."""
    a = of(run_dir)
    a.run.read()   # DataError naming the file when raw.csv or env.json is corrupt
    base = _baseline(a.df, a.env, baseline)
    return _published_counts(a, base, sorted(set(a.df["variant"].astype(str)) - {base}))


def _published_icount(a: Analysis, base: str, cands: list[str], width: int) -> list[str]:
    txt = _published_counts(a, base, cands)
    return wrap_para(txt, width) if txt else []


def run_binaries(env: RunEnv, arms) -> dict[str, str]:
    used = RunEnv.of(env).binaries_used
    out = {}
    for a in arms:
        d = next((v for k, v in sorted(used.items()) if k.split("@")[0] == f"ptr_ring_test-{a}"
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
    a = of(run_dir)
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
    a = of(run_dir)
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
    lib = metric in schema.LOWER_IS_BETTER

    lines = wrap_para(_headline(env, df, a.host, base, variants[1:], info), width)
    count_runs = _count_runs(a, base) if not candidates else []
    counted = [f"{s.name}/" for s, _, src in count_runs if src == "callgrind"]
    lines += wrap_para(counters_line(df, env, elsewhere=", ".join(counted) or None), width)
    lines.append("")
    lines += wrap_para(tested_line(env, base, variants[1:], run_dir), width)
    lines += wrap_para("test machine: " + machine_line(env), width)
    lines += noise_floor_lines(a.host, a.floor, env, info, width)
    lines.append("")
    lines += table
    lines.append("")
    lines += _interval_lines(info, width)
    lines += _further_runs(a, base, metric, width, count_runs) if not candidates else []
    lines += _legend(info, width)
    if not lib:
        lines += wrap_para(f"{metric}: higher is better.", width)
    lines += _published_icount(a, base, variants[1:], width)
    lines += wrap_para("not measured here: " + not_measured(df, env), width)
    for w in env.warnings:
        lines += wrap_para(f"warning: {w}", width)
    lines.append("")
    lines += reproduce_lines(run_dir, env, width, notebook)
    rel = run_path(run_dir, env)
    lines += wrap_para("Hashes, layouts and every trial: summary.md, env.json and raw.csv in", width)
    lines += path_lines(f"{rel}/", width)
    text = "\n".join(ln.rstrip() for ln in lines) + "\n"
    return text


__all__ = ["MailError", "WIDTH", "counters_text", "mail_text", "published_counts", "read_env", "reproduce_lines",
           "run_binaries"]
