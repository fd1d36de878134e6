"""DIR/summary.md and DIR/figures/effect.png of a bisect (written through ringlab.rundir)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

from ringlab import rundir
from ringlab.report.bisect_mail import effect_text

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


def summary_md(state: dict) -> str:
    res = state.get("result") or {}
    ep = state.get("endpoints") or {}
    lines = [f"# Bisect: {state['experiment']} {state['metric']}, {state['good']}..{state['bad']}", "",
             f"Tree: `{state['tree']}`; good {state['good_commit']['sha'][:12]}, bad {state['bad_commit']['sha'][:12]}.",
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


def effect_figure(state: dict):
    """The candidate's effect against good (with its CI) against commit order."""
    fig, ax = plt.subplots(figsize=(7, 3.5))
    n = len(state["candidates"])
    ep = state.get("endpoints") or {}
    pts = [(-1, {"delta_pct": 0.0, "ci_low_pct": 0.0, "ci_high_pct": 0.0}, "good")]
    if ep.get("delta_pct") is not None:
        pts.append((n, ep, "bad"))
    pts += [(s["index"], s.get("vs_good") or {}, s.get("status", "")) for s in state.get("steps", [])]
    colors = {"good": "tab:green", "bad": "tab:red"}
    for x, e, call in pts:
        if e.get("delta_pct") is None:
            ax.axvline(x, color="0.8", linestyle=":")
            continue
        lo, hi = e.get("ci_low_pct", e["delta_pct"]), e.get("ci_high_pct", e["delta_pct"])
        ax.errorbar([x], [e["delta_pct"]], yerr=[[e["delta_pct"] - lo], [hi - e["delta_pct"]]], fmt="o",
                    color=colors.get(call, "tab:gray"), capsize=3)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xlabel("candidate commit (oldest first; -1 = good, n = bad)")
    ax.set_ylabel(f"{state['metric']} vs good (%)")
    ax.set_title("bisect: effect against good by commit order")
    return fig


def write_outputs(out: Path, state: dict) -> None:
    rundir.write_text(out, "summary.md", summary_md(state))
    rundir.write_figure(out, "effect", effect_figure(state))
