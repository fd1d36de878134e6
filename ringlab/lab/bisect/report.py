"""DIR/summary.md and DIR/figures/effect.png of a bisect (written through ringlab.rundir)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

from ringlab import fmt, rundir, schema
from ringlab.report.bisect_mail import effect_text, tree_name

matplotlib.use("Agg")  # figures go to files, never to a display (as in ringlab.report.figures)
import matplotlib.pyplot as plt  # noqa: E402


def _ci(e: dict | None) -> str:
    return effect_text(e, unit="", missing="-")


def step_rows(state: dict) -> list[list[str]]:
    """One row per step: step, commit, subject, rounds, vs good, vs bad, call."""
    ep = state.get("endpoints") or {}
    rows = []
    if ep:
        rows.append(["00", state["bad_commit"]["sha"][:12], "endpoints: bad vs good", str(ep.get("rounds", "-")),
                     _ci(ep), "-", "regression" if ep.get("regression") else "no change"])
    for s in state.get("steps", []):
        rows.append([f"{s['n']:02d}", s["sha"][:12], s["subject"][:40], str(s.get("rounds", "-")),
                     _ci(s.get("vs_good")), _ci(s.get("vs_bad")),
                     s.get("status", "") + (" (skipped)" if s.get("status") in ("unclear", "build-error") else "")])
    return rows


def _tree(state: dict) -> str:
    """The tree as summary.md names it: a path in backticks, or the test repository in words."""
    name = tree_name(state)
    return f"`{name}`" if name == state["tree"] else name


def summary_md(state: dict) -> str:
    res = state.get("result") or {}
    ep = state.get("endpoints") or {}
    lines = [f"# Bisect: {state['experiment']} {state['metric']}, {state['good']}..{state['bad']}", "",
             f"Tree: {_tree(state)}; good {state['good_commit']['sha'][:12]}, bad {state['bad_commit']['sha'][:12]}.",
             f"{state['commits_in_range']} commits in the range; {len(state['candidates'])} change "
             f"{', '.join(state['paths'])} (candidates); {state['skipped_commits']} others skipped.",
             "", f"**Result:** {res.get('message', 'not finished')}", ""]
    c = res.get("first_bad")
    if c:
        lines += [f"- commit: {c['sha']}", f"- subject: {c['subject']}", f"- author: {c['author']}",
                  f"- date: {c['date']}"]
    for c in res.get("range", []):
        lines.append(f"- {c['sha'][:12]} {c['subject']} ({c['author']}, {c['date']})")
    if res.get("effect"):
        e = res["effect"]
        lines += [f"- effect against good: {_ci(e)} ({e.get('source', '')}; configuration {e.get('group')})"]
    if ep.get("group"):
        lines += ["", f"Configuration followed: `{ep['group']}` (the endpoints' largest significant change)."]
    lines += ["", "Call: good when the candidate differs significantly from bad towards good and not from good "
              "towards bad, with its effect against good below half of the endpoints'; bad the mirror (at "
              "least half); otherwise unclear (more rounds, then skipped).", "",
              "| step | commit | subject | rounds | vs good | vs bad | call |", "|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in step_rows(state)]
    lines += ["", f"Reproduce: `{state.get('command', '')}`", ""]
    return "\n".join(lines)


def _subject(c: dict | None, width: int = 48) -> str:
    """'1a2b3c4d subject' of a commit, the subject cut to ``width`` characters."""
    c = c or {}
    subj = str(c.get("subject") or "")
    subj = subj if len(subj) <= width else subj[:width - 1] + "\u2026"
    return f"{str(c.get('sha') or '?')[:8]} {subj}".strip()


def effect_figure(state: dict):
    """Each measured commit's effect against good, in the + = better sign, with its CI: one row
    per commit in history order (good at the top, bad at the bottom), named by its short hash
    and subject; a commit that was not measured is listed without a point.  The endpoints'
    effect is shaded as the band a bad commit falls in."""
    lower = state["metric"] in schema.LOWER_IS_BETTER
    sign = -1.0 if lower else 1.0
    cands = list(state.get("candidates") or [])
    ep = state.get("endpoints") or {}
    measured = {s["index"]: s for s in state.get("steps", []) if "index" in s}
    rows = [(_subject(state.get("good_commit")) + "  [good]", {"delta_pct": 0.0}, "good")]
    ends = {str((state.get(k) or {}).get("sha")) for k in ("good_commit", "bad_commit")}
    first_bad = str(((state.get("result") or {}).get("first_bad") or {}).get("sha"))
    for i, c in enumerate(cands):
        if str(c.get("sha")) in ends:   # the endpoints have their own rows
            continue
        s = measured.get(i)
        lab = _subject(c) + ("  [first bad]" if str(c.get("sha")) == first_bad else "")
        rows.append((lab, (s or {}).get("vs_good") or {}, (s or {}).get("status", "not measured")))
    rows.append((_subject(state.get("bad_commit")) + "  [bad]", ep, "bad"))
    colors = {"good": "tab:green", "bad": "tab:red"}
    fig, ax = plt.subplots(figsize=(9, 1.6 + 0.3 * len(rows)))
    y = list(range(len(rows)))[::-1]
    levels = set()
    for yy, (_, e, call) in zip(y, rows):
        if e.get("delta_pct") is None:
            continue
        d = sign * e["delta_pct"]
        lo, hi = sorted((sign * e.get("ci_low_pct", e["delta_pct"]), sign * e.get("ci_high_pct", e["delta_pct"])))
        if e.get("ci_level") is not None:
            levels.add(round(float(e["ci_level"]), 6))
        ax.errorbar([d], [yy], xerr=[[d - lo], [hi - d]], fmt="o", color=colors.get(call, "tab:gray"), capsize=3)
    if ep.get("delta_pct") is not None:
        ax.axvspan(*sorted((0.0, sign * ep["delta_pct"])), color="tab:red", alpha=0.08, lw=0)
    ax.axvline(0, color="black", linewidth=0.6)
    ax.set_yticks(y)
    ax.set_yticklabels([f"{lab}  ({call})" if call not in ("good", "bad") else lab for lab, _, call in rows],
                       fontsize=7)
    lv = fmt.ci_header(next(iter(levels))) if len(levels) == 1 else \
        (f"{min(levels) * 100:.4g}-{max(levels) * 100:.4g}% CI" if levels else "CI")
    ax.set_xlabel(f"{state['metric']} effect against good, % (+ = better), {lv}")
    ax.set_title("bisect: each commit's effect against good (history order, oldest at the top)", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def write_outputs(out: Path, state: dict) -> None:
    rundir.write_text(out, "summary.md", summary_md(state))
    rundir.write_figure(out, "effect", effect_figure(state))
