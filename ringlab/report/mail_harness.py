"""Notebook 21's reply: the kernel's ringtest ``ptr_ring`` beside ringlab's SPSC on the same
header, in the shape of :mod:`ringlab.report.mail` (headline, PMU line, tested code, machine
line, noise floor, one row per ring size and CPU pair, what was not measured, the reproduce line).

The two harnesses do different work (ringtest's producer also waits for the used ring); the row
reads as a comparison all the same: the %change of ringtest's time per item against the SPSC's
time per op, from their Hodges-Lehmann ratio by the gain rule of every ringlab table
(``tables.gain_of_ratio``: + = ringtest takes less; past ±50% a factor, "×9.9 slower").  The
side-by-side frame comes from
``ringlab.studies.harness_compare.side_by_side`` (the caller passes it in).
"""
from __future__ import annotations

import math

import pandas as pd

from ringlab import schema
from ringlab.report.analysis import Analysis
from ringlab.report.mail import MIN_WIDTH, WIDTH, MailError, noise_floor_lines, sd_label, value_label
from ringlab.report.mail_reproduce import command_words, reproduce_lines, run_path
from ringlab.report.mail_run import (counters_line, cpus_text, duration_text, machine_line, not_measured, trial_text,
                                     wall_time)
from ringlab.report.mailfmt import as_float, hang_para, path_lines, sig4, wrap_para, short_sha
from ringlab.report.tables import change_ci_text, change_text, gain_of_ratio, is_factor

#: the table's columns: SPSC, its spread, ringtest/SPSC, ringtest, its spread (then the row)
_COLS = (9, 5, 14, 9, 5)


def _cv(a: Analysis, size: int, cpus: str) -> float:
    """The spread (CV) of ns_per_op of one ring size and CPU pair of a run, made once."""
    return a.kept(("harness cv", size, cpus), lambda: _spread_of(a.df, size, cpus))


def _spread_of(df: pd.DataFrame, size: int, cpus: str) -> float:
    if "ns_per_op" not in df.columns or not len(df):
        return math.nan
    ok = schema.measured(df)
    size_col = "ring_size" if "ring_size" in ok.columns else "size"
    a, b = (int(x) for x in cpus.split(":"))
    sel = ok[(pd.to_numeric(ok[size_col], errors="coerce") == size)
             & (pd.to_numeric(ok["cpu_req_producer"], errors="coerce") == a)
             & (pd.to_numeric(ok["cpu_req_consumer"], errors="coerce") == b)]
    v = pd.to_numeric(sel["ns_per_op"], errors="coerce").dropna()
    return float(v.std() / v.mean()) if len(v) > 1 and v.mean() else math.nan


def _significant(r) -> bool:
    lo, hi = as_float(r.get("ratio_ci_low")), as_float(r.get("ratio_ci_high"))
    return math.isfinite(lo) and math.isfinite(hi) and (lo > 1 or hi < 1)


def _gain(r) -> float:
    """The row's %change, + = ringtest takes less time: the gain of ringtest/spsc (time, lower is better)."""
    return gain_of_ratio(r.get("ratio"), lower_is_better=True)


def _change_cell(r) -> str:
    """The row's %change (a factor past ±50%), starred when its CI excludes 0."""
    g = _gain(r)
    if not math.isfinite(g):
        return "n/a"
    txt = change_text(g)
    return f"*{txt}*" if _significant(r) else f" {txt} "


def _ci_text(r, g: float) -> str:
    """The row's CI in the sign and form of its %change ("[×7.8, ×11.6]" beside "×9.9 slower")."""
    lo, hi = as_float(r.get("ratio_ci_low")), as_float(r.get("ratio_ci_high"))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return ""
    ci = change_ci_text(gain_of_ratio(hi), gain_of_ratio(lo), g, percent_sign=False)
    word = change_text(g).split()[-1]
    return ci[:-len(word) - 1] if is_factor(g) and ci.endswith(f"] {word}") else ci


def _ratio_text(r) -> str:
    """The row's %change with its CI, in the one sign (+ = ringtest takes less; a factor past ±50%,
    which is the ratio itself), and the ratio ringtest/spsc beside a percent."""
    g = _gain(r)
    if not math.isfinite(g):
        return "n/a"
    ratio, lo, hi = as_float(r.get("ratio")), as_float(r.get("ratio_ci_low")), as_float(r.get("ratio_ci_high"))
    has_ci = math.isfinite(lo) and math.isfinite(hi)
    ci = _ci_text(r, g)
    if is_factor(g):
        return f"{change_text(g)} {ci}".rstrip()
    return (f"{change_text(g)} {ci} (ringtest/spsc ×{ratio:.2f}" + (f" [×{lo:.2f}, ×{hi:.2f}])" if has_ci else ")")
            ).replace("  ", " ")


def paste_block(rt: Analysis, table: pd.DataFrame, width: int, notebook=None) -> list[str]:
    """The lines to paste into a commit message, marked as such, for the headline row (the decided
    row with the largest effect, else the first): the command, n, spsc -> ringtest with the
    %change and its 95% CI (+ = ringtest takes less, said in the line, which travels without the
    mail's header; a factor past ±50%), the data."""
    rows = [r for _, r in table.iterrows()]
    called = [r for r in rows if _significant(r)]
    r = max(called, key=lambda x: abs(_gain(x))) if called else rows[0]
    env, g = rt.env, _gain(r)
    rl = f"ringlab {short_sha(env.git.commit)}" + (" (uncommitted changes)" if env.git.dirty else "")
    out = hang_para(f"To paste into the commit message (ringtest vs spsc, size={int(r['ring_size'])} {r['cpus']}):",
                    width)
    out += hang_para(f"Measured with {rl} ({command_words(rt.path, env, notebook)}):", width)
    out += hang_para(f"  n: {int(r['n_ringtest'])} ringtest and {int(r['n_spsc'])} SPSC trials (unpaired), "
                     f"{cpus_text(env)}", width, 4)
    note = "(95% CI)" if is_factor(g) else "(95% CI, + = ringtest takes less)"   # pasted without the header
    out += hang_para(f"  spsc -> ringtest: {sig4(as_float(r['spsc_ns_per_op']))} -> "
                     f"{sig4(as_float(r['ringtest_ns_per_item']))} ns per item, {change_text(g)} {_ci_text(r, g)} "
                     f"{note}", width, 4, whole=(note,))
    first = "  data: "
    parts = path_lines(f"{run_path(rt.path, env)}/raw.csv", width - len(first), 0)
    return out + [first + parts[0]] + [" " * 4 + x for x in parts[1:]] + [""]


def harness_mail_text(ringtest_run, spsc_run, table: pd.DataFrame, width: int = WIDTH,
                      notebook: tuple[str, dict] | None = None) -> str:
    """Plain text (``width`` columns) for notebook 21's reply; ``table`` is ``side_by_side``.
    ``ringtest_run`` and ``spsc_run`` are run folders or their Analysis (``report.analysis``)."""
    if not isinstance(width, int) or width < MIN_WIDTH:
        raise MailError(f"--width: {width!r} is too narrow; allowed: an integer >= {MIN_WIDTH} (default {WIDTH})")
    rt, spsc = Analysis.for_run(ringtest_run), Analysis.for_run(spsc_run)
    ringtest_run = rt.path
    rt.run.read()   # DataError naming the file when raw.csv or env.json is corrupt
    df, env = rt.df, rt.env
    if table is None or not len(table):
        raise MailError(f"RUN: {ringtest_run} and {spsc.path} have no ring size and CPU pair in common; "
                        "allowed: a kernel-tests run folder whose ringlab-spsc run measured the same pairs")
    host = env.host or "this host"
    tree = env.parameters.get("tree") or "?"
    n = len(table)
    sig = sum(_significant(r) for _, r in table.iterrows())
    gains = [_gain(r) for _, r in table.iterrows()]
    slower, faster = sum(1 for g in gains if g < 0), sum(1 for g in gains if g > 0)
    ways = (f"ringtest is slower in {slower} of {n}" if slower == n else f"ringtest is faster in {faster} of {n}"
            if faster == n else f"ringtest is slower in {slower} and faster in {faster} of {n}")
    lines = wrap_para(f"ringlab kernel-tests: ringtest ptr_ring beside ringlab's SPSC on {host}: {ways} "
                      f"row{'s' if n != 1 else ''}; " + (f"{sig} decided" if sig else "none decided"), width)
    for _, r in table.iterrows():   # the robot's headline, one per row told apart from 0
        if _significant(r):
            g = _gain(r)
            what = (f"{change_text(g)} in" if is_factor(g)
                    else f"{abs(g):.1f}% {'improvement' if g > 0 else 'regression'} of")
            lines += hang_para(f"ringtest vs spsc: {what} ns per item (size={int(r['ring_size'])} {r['cpus']}), "
                               f"95% CI {_ci_text(r, g)}", width)
    lines += wrap_para(counters_line(df, env), width)
    lines.append("")
    git = env.git
    lines += wrap_para(f"tested: include/linux/ptr_ring.h of {tree}, in tools/virtio/ringtest (its own "
                       f"Makefile) and in ringlab's SPSC harness; ringlab {short_sha(git.commit)}", width)
    lines += wrap_para("test machine: " + machine_line(env), width)
    lines += noise_floor_lines(rt.host, rt.noise_floor, env, {"gains": []}, width)
    lines.append("")
    nr = sorted({int(x) for x in pd.to_numeric(table["n_ringtest"], errors="coerce").dropna()})
    ns = sorted({int(x) for x in pd.to_numeric(table["n_spsc"], errors="coerce").dropna()})
    span = lambda v: "?" if not v else f"{v[0]}" if v[0] == v[-1] else f"{v[0]}-{v[-1]}"  # noqa: E731
    wall = wall_time(env, df)
    lines += wrap_para(f"n: {span(nr)} ringtest and {span(ns)} SPSC trials per row (unpaired); ringtest "
                       f"{trial_text(df)}, SPSC {trial_text(spsc.df)}; run "
                       + (duration_text(wall) if math.isfinite(wall) else "time not recorded")
                       + ". ns: lower is better.", width)
    w = _COLS
    lines.append(" ".join((f"{'spsc ns/op':>{w[0] + w[1] + 1}}", f"{'%change':^{w[2]}}",
                           f"{'ringtest ns':>{w[3] + w[4] + 1}}")) + "  ring")
    lines.append(" ".join((f"{'':>{w[0]}}", f"{'±%sd':>{w[1]}}", f"{'':^{w[2]}}", f"{'':>{w[3]}}",
                           f"{'±%sd':>{w[4]}}")).rstrip())
    lines.append("-" * min(width, 62))
    ratios = []
    for _, r in table.iterrows():
        size, cpus = int(r["ring_size"]), str(r["cpus"])
        cells = (f"{value_label(r['spsc_ns_per_op']):>{w[0]}}", f"{sd_label(_cv(spsc, size, cpus)):>{w[1]}}",
                 f"{_change_cell(r):^{w[2]}}", f"{value_label(r['ringtest_ns_per_item']):>{w[3]}}",
                 f"{sd_label(_cv(rt, size, cpus)):>{w[4]}}")
        line, label = " ".join(cells) + "  ", f"size={size} {cpus} {r['pair_class']}"
        # the label is never cut: on a line of its own where the row is too long
        lines += [line + label] if len(line) + len(label) <= width else [line.rstrip()] + wrap_para(label, width, 4)
        ratios.append(f"size={size} {cpus}: {_ratio_text(r)}")
    lines.append("")
    levels = sorted({f"{as_float(x) * 100:.4g}%" for x in table["ci_level"] if math.isfinite(as_float(x))})
    lines += wrap_para("%change: + = better, as in every ringlab table: (spsc - ringtest) / spsc of the time per "
                       "item, + = ringtest takes less; past ±50% a factor (×3.2 slower: 3.2 times the SPSC's "
                       "time), from the Hodges-Lehmann ratio of ringtest's ns per item to the SPSC's ns per op; "
                       f"*x*: its {', '.join(levels) or 'n/a'} CI excludes 0 (Mann-Whitney): "
                       + "; ".join(ratios) + ". They do different work (ringtest's producer also waits for "
                       "the used ring), so the change says how much of ringtest's time the bare ring "
                       "accounts for, not which is better.", width)
    lines += [""] + paste_block(rt, table, width, notebook)
    lines += wrap_para("not measured here: " + not_measured(df, env), width)
    lines.append("")
    lines += reproduce_lines(ringtest_run, env, width, notebook)
    lines += wrap_para("Every trial: summary.md and ringlab-spsc/raw.csv beside raw.csv.", width)
    return "\n".join(ln.rstrip() for ln in lines) + "\n"


__all__ = ["harness_mail_text"]
