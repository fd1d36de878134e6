"""A run as plain text for a mailing-list reply (``ringlab mail RUN``).

The text answers the reviewer's questions of the seed threads without the reader
opening anything else: where it ran (machine, kernel, compiler and flags), how
(pinning, governor or why not, rounds, trials per arm, failed trials), what came
out per configuration (medians of both arms, the delta with its CI, p and the
verdict, the spread, instructions per operation when counted) and the exact
command lines that reproduce it.

Plain text only: no markdown, every line at most ``width`` (72) columns.  Long
words (paths) are broken with a shell line continuation in commands and
wrapped elsewhere.  Nothing here computes a statistic: the numbers come from
``ringlab.stats.compare`` / ``summarize``, read by column name, so new columns
(``design``, ``n_pairs``, ``ci_level``, ``family_size``) are shown when present.

The run folder is read through :class:`ringlab.rundir.Run` only (raw.csv, env.json, the
executed notebook); the baseline is the one rule of :mod:`ringlab.rundir.baseline`.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from ringlab import fmt, schema
from ringlab.errors import ParamError
from ringlab.stats import StatsError, compare, measurements, summarize
from ringlab.stats.summary import format_value
from ringlab.stats.compare import method_text
from ringlab.report.mail_reproduce import reproduce_lines
from ringlab.report.mail_run import _PLACEMENT_COLS, _icount_note, _machine, _method_lines, _placement, _variant_lines
from ringlab.report.tables import layout_texts
from ringlab.report.mailfmt import _field, _fmt, _num, _ok, _para
from ringlab.report import pick_metric
from ringlab.rundir import Run, pick_baseline as baseline_rule, require_metric, run_variants

WIDTH = 72
MIN_WIDTH = 60
MAX_WIDTH = 1000
INSTR = "instructions_per_op"
#: ptr_ring's modes, as the harness names them
MODE_NAMES = {"ptr_ring": {0: "one thread", 1: "SPSC", 2: "near-full SPSC"}}
_INSTR_VERDICT = {"faster": "fewer instructions", "slower": "more instructions",
                  "no significant difference": "same instructions"}


class MailError(ParamError):
    """Bad input to ``ringlab mail`` (names the parameter and the allowed values)."""


def read_env(run_dir) -> dict[str, Any]:
    """env.json of a run folder ({} when missing or unreadable): ``Run(run_dir).env_doc``."""
    return Run(run_dir).env_doc


# -- what the run was-----------------------------------------------------------------------------------------
def _baseline(df: pd.DataFrame, env: dict, baseline: str | None) -> str:
    """The run's baseline by the one rule of :mod:`ringlab.rundir.baseline` (the one summary.md
    names), ``--baseline`` naming the input; a run with a single variant compares nothing and
    names that variant."""
    variants = run_variants(df)
    if not variants:
        raise MailError("RUN: raw.csv has no variant column or no rows; nothing to compare")
    return baseline_rule(df, env, baseline, option="--baseline", error=MailError) or variants[0]


# -- the results ----------------------------------------------------------------------------
def _config_key(r, cols) -> tuple:
    return tuple(str(r[c]) for c in cols)


def _ci_label(r) -> str:
    return fmt.ci_header(r.get("ci_level"))


def _verdict(r, instr: bool = False) -> str:
    v = str(r.get("verdict", ""))
    if instr:
        v = _INSTR_VERDICT.get(v, v)
    note = r.get("note")
    tn = _num(r.get("trials_needed"))
    extra = []
    if v == "inconclusive" and math.isfinite(tn):
        extra.append(f"~{int(tn)} trials per arm would settle it")
    elif isinstance(note, str) and note and not note.startswith("trials_needed") and "exact" not in note:
        extra.append(note)
    return v + (f" ({'; '.join(extra)})" if extra else "")


def _instr_rows(df: pd.DataFrame, baseline: str, cols: list[str]) -> dict[tuple, list[tuple[str, pd.Series]]]:
    """(config key, candidate) -> [(source, compare row)] for instructions per op."""
    out: dict[tuple, list] = {}
    if INSTR not in df.columns:
        return out
    vals = pd.to_numeric(df[INSTR], errors="coerce")
    sub = df[vals.notna()]
    if not len(sub):
        return out
    src = sub["icount_source"].fillna("perf").astype(str) if "icount_source" in sub.columns else \
        pd.Series("perf", index=sub.index)
    for s in sorted(src.unique()):
        part = sub[src == s]
        if baseline not in set(part["variant"].astype(str)):
            continue
        try:
            cmp = compare(part, baseline, INSTR, by=cols or None)
        except StatsError:
            continue
        for _, r in cmp.iterrows():
            out.setdefault((_config_key(r, cols), str(r["candidate"])), []).append((s, r))
    return out


def _spread(df: pd.DataFrame, metric: str, cols: list[str]) -> dict[tuple, float]:
    """(variant, config key) -> CV of the measurements (from stats.summarize)."""
    try:
        s = summarize(df, metric, by=cols or None, n_resamples=200)
    except StatsError:
        return {}
    return {(str(r["variant"]),) + _config_key(r, cols): _num(r["cv"]) for _, r in s.iterrows()}


def _config_title(r, vary: list[str], experiment: str) -> str:
    bits = []
    for c in vary:
        if c == "mode":
            name = MODE_NAMES.get(experiment, {}).get(int(_num(r[c]))) if _ok(r[c]) else None
            bits.append(f"mode {_fmt(r[c])}" + (f" ({name})" if name else ""))
        else:
            bits.append(f"{c} {_fmt(r[c])}")
    place = _placement(r) if any(c in r for c in _PLACEMENT_COLS) else ""
    return ", ".join(bits + ([place] if place else [])) or "all trials"


def _row_lines(r, baseline: str, instr_rows: list, multi: bool, width: int) -> list[str]:
    """delta, design, layouts/states, verdict and instructions/op lines of one candidate's row."""
    out: list[str] = []
    cand = str(r["candidate"])
    tag = f" {cand}" if multi else ""
    d = fmt.pct(r["delta_pct"])
    if _ok(r["ci_low_pct"]):
        d += f", {_ci_label(r)} {fmt.ci(r['ci_low_pct'], r['ci_high_pct'])}"
    if _ok(r.get("p_holm")):
        pv = fmt.p(r["p_holm"])
        d += f", p {pv}" if pv.startswith("<") else f", p = {pv}"
    if isinstance(r.get("note"), str) and "exact" in r["note"]:
        d += ", exact (every trial gave the same value)"
    out += _field("delta" + tag, d, width, 4, 12)
    if "design" in r and isinstance(r["design"], str) and r["design"]:
        dz = r["design"] + (f", {int(_num(r['n_pairs']))} pairs" if _ok(r.get("n_pairs")) else "")
        out += _field("design" + tag, dz, width, 4, 12)
    for label, text in layout_texts(r):
        out += _field(label + tag, text, width, 4, 12)
    out += _field("verdict" + tag, _verdict(r), width, 4, 12)
    for src, ir in instr_rows:
        txt = (f"{baseline} {_num(ir['median_baseline']):.2f}, {cand} {_num(ir['median_candidate']):.2f}"
               f" ({_num(ir['median_candidate']) - _num(ir['median_baseline']):+.2f}, "
               f"{fmt.pct(ir['delta_pct'])}): {_verdict(ir, instr=True)}")
        if isinstance(ir.get("note"), str) and "exact" in ir["note"]:
            txt += f", exact ({src}: identical counts in every run)"
        elif _ok(ir["ci_low_pct"]):
            txt += f", {_ci_label(ir)} {fmt.ci(ir['ci_low_pct'], ir['ci_high_pct'])} ({src})"
        else:
            txt += f" ({src})"
        out += _field("instr/op" + tag, txt, width, 4, 12)
    return out


def _results(df: pd.DataFrame, env: dict, baseline: str, metric: str, width: int,
             candidates: list[str] | None) -> list[str]:
    cmp = compare(df, baseline, metric)
    if candidates:
        cmp = cmp[cmp["candidate"].astype(str).isin(candidates)]
    if not len(cmp):
        raise MailError(f"RUN: no comparison against baseline {baseline!r} (no other variant was measured)")
    cols = list(cmp.attrs.get("group_columns") or [])
    experiment = str(env.get("experiment") or (df["experiment"].iloc[0] if "experiment" in df.columns else ""))
    vary = [c for c in cols if c not in _PLACEMENT_COLS and cmp[c].astype(str).nunique() > 1]
    const = [c for c in cols if c not in _PLACEMENT_COLS and c not in vary]
    instr = _instr_rows(df, baseline, cols)
    cv = _spread(df, metric, cols)
    lib = bool(cmp["lower_is_better"].iloc[0]) if "lower_is_better" in cmp.columns else metric in schema.LOWER_IS_BETTER
    first = cmp.iloc[0]
    fam = _num(first.get("family_size"))
    fam = int(fam) if math.isfinite(fam) else len(cmp)
    unit = "ns per operation" if metric == "ns_per_op" else metric
    out = [f"Results: {unit} ({'lower' if lib else 'higher'} is better), medians per arm", ""]
    legend = (method_text(cmp).rstrip(".") + ("; negative delta = candidate faster" if lib else "")
              + "; CV: spread of the trials of one arm.")
    out += _para(legend, width, 2)
    if const:
        out += _para("Same in every configuration: " + ", ".join(f"{c} {_fmt(first[c])}" for c in const)
                     + ".", width, 2)
    out += _para("instructions/op: " + _icount_note(df, env) + ".", width, 2)
    for key, grp in cmp.groupby(cols, sort=True, dropna=False) if cols else [((), cmp)]:
        r0 = grp.iloc[0]
        out += ["", *_para(_config_title(r0, vary, experiment), width, 2)]
        ck = _config_key(r0, cols)
        arms = [(baseline, r0["median_baseline"], r0["n_baseline"])]
        arms += [(str(r["candidate"]), r["median_candidate"], r["n_candidate"]) for _, r in grp.iterrows()]
        for name, med, n in arms:
            c = cv.get((name,) + ck, math.nan)
            out += _field(name, f"{format_value(_num(med), metric)}  (n = {int(_num(n))}"
                          + (f", CV {c * 100:.1f}%" if math.isfinite(c) else "") + ")", width, 4, 12)
        multi = len(grp) > 1
        for _, r in grp.iterrows():
            out += _row_lines(r, baseline, instr.get((ck, str(r["candidate"])), []), multi, width)
    return out


# -- the mail --------------------------------------------------------------------------------
def mail_text(run_dir, baseline: str | None = None, width: int = WIDTH, metric: str | None = None,
              candidates: list[str] | None = None, notebook: tuple[str, dict] | None = None) -> str:
    """The run in ``run_dir`` as plain text for a mailing-list reply.

    ``notebook`` = (notebook file name, its parameters) lets a notebook that is still
    running give its own papermill line; otherwise the executed notebook in the run folder
    (papermill metadata) is used when there is one."""
    if not isinstance(width, int) or width < MIN_WIDTH:
        raise MailError(f"--width: {width!r} is too narrow; allowed: an integer >= {MIN_WIDTH} (default {WIDTH})")
    if width > MAX_WIDTH:
        raise MailError(f"--width: {width!r} is too wide; allowed: an integer in [{MIN_WIDTH}, {MAX_WIDTH}] "
                        f"(default {WIDTH})")
    run_dir = Path(run_dir)
    run = Run(run_dir)
    raw = run.raw_csv
    if run_dir.is_dir() and not run.has_raw:
        raise MailError(f"RUN: no raw.csv in {run_dir} ({raw}: no such file); allowed: a run folder written by `ringlab run` "
                        "or a notebook")
    df, run_env = run.read()   # DataError (exit 2) naming the file and line when one is corrupt
    env = dict(run_env.doc) if run_env is not None else {}
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
    meas, _ = measurements(df, metric)

    exp = env.get("experiment") or (str(df["experiment"].iloc[0]) if "experiment" in df.columns and len(df) else "run")
    title = f"ringlab A/B: {', '.join(variants[1:])} against {base} ({exp}, run {env.get('run_id') or run_dir.name})"
    lines = _para(title, width)
    when = [x for x in (env.get("started_utc"), env.get("ended_utc")) if x]
    if when:
        lines += _para(f"Measured {' to '.join(when)}" + (f", status {env['status']}" if env.get("status") else "")
                       + ".", width)
    lines.append("")
    for label, text in _machine(env):
        lines += _field(label, text, width, 0)
    lines += ["", "Variants"]
    lines += _variant_lines(variants, df, env, width)
    lines += ["", "Method"]
    lines += _method_lines(df, env, meas, width)
    lines.append("")
    lines += _results(df, env, base, metric, width, variants[1:] if candidates else None)
    lines.append("")
    lines += reproduce_lines(run_dir, env, width, notebook)
    for w in env.get("warnings") or []:
        lines += [""] + _para(f"Warning recorded during the run: {w}", width)
    lines += ["", *_para("Generated by ringlab mail from raw.csv (one row per trial) and env.json "
                         "of the run folder.", width)]
    text = "\n".join(ln.rstrip() for ln in lines) + "\n"
    return text


__all__ = ["MailError", "WIDTH", "mail_text", "read_env", "reproduce_lines"]
