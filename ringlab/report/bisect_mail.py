"""A bisect folder (``DIR/bisect.json`` of ``ringlab bisect``) as a plain-text mail in the style of
the kernel test robot's regression reports: subject, the commit, the metric change with its CI,
every step, the machine, and the command that reproduces it.  Plain text, at most ``width``
columns (shell commands are kept whole, with a trailing backslash per line)."""
from __future__ import annotations

import json
import shlex
import textwrap
from pathlib import Path

from ringlab import schema
from ringlab.errors import DataError
from ringlab.rundir.inputs import clean, read_input

STATE_FILE = "bisect.json"


def is_bisect_folder(path) -> bool:
    return (Path(path) / STATE_FILE).is_file()


def _read(path) -> dict:
    f = Path(path) / STATE_FILE
    try:   # never through a link (rundir.inputs): a DataError naming the file
        state = json.loads(read_input(f, "a bisect.json written by ringlab bisect"))
    except DataError:
        raise
    except (OSError, ValueError) as e:
        raise DataError(f"{f}: cannot read ({clean(e, 80)}); allowed: a bisect.json written by ringlab "
                        "bisect") from None
    if not isinstance(state, dict) or state.get("kind") != "bisect":
        raise DataError(f"{f}: not a bisect state (kind != 'bisect')")
    return state


def effect_text(e: dict | None, unit: str = "%", missing: str = "n/a") -> str:
    """``+24.3% [+7.6%, +43.7%]`` of a step's effect (``unit`` after each CI bound)."""
    if not e or e.get("delta_pct") is None:
        return missing
    lo, hi = e.get("ci_low_pct"), e.get("ci_high_pct")
    ci = f" [{lo:+.1f}{unit}, {hi:+.1f}{unit}]" if lo is not None and hi is not None else ""
    return f"{e['delta_pct']:+.1f}%{ci}"


def _pct(e: dict | None) -> str:
    return effect_text(e)


def _word(state: dict, delta: float) -> str:
    worse = (delta > 0) == (state.get("metric", schema.PRIMARY_METRIC) in schema.LOWER_IS_BETTER)
    return "regression" if worse else "improvement"


def subject(state: dict) -> str:
    res, exp, metric = state.get("result") or {}, state["experiment"], state["metric"]
    eff = res.get("effect") or {}
    if res.get("status") == "found":
        c = res["first_bad"]
        return (f"[ringlab] {c['sha'][:12]} {c['subject']}: {exp} {metric} {eff['delta_pct']:+.1f}% "
                f"{_word(state, eff['delta_pct'])}")
    if res.get("status") == "range":
        r = res["range"]
        return (f"[ringlab] {r[0]['sha'][:12]}..{r[-1]['sha'][:12]} ({len(r)} commits): {exp} {metric} "
                f"{eff['delta_pct']:+.1f}% {_word(state, eff['delta_pct'])}")
    return f"[ringlab] {exp} {metric} {state['good']}..{state['bad']}: {res.get('status', 'not finished')}"


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False) or [""]


def _command(cmd: str, width: int) -> list[str]:
    words, lines, cur = shlex.split(cmd) if cmd else [], [], "  "
    for w in (shlex.quote(x) for x in words):
        if len(cur) + len(w) + 3 > width and cur.strip():
            lines.append(cur.rstrip() + " \\")
            cur = "    "
        cur += w + " "
    return lines + [cur.rstrip()] if cur.strip() else lines


def _commit_lines(res: dict) -> list[str]:
    if res.get("status") == "found":
        c = res["first_bad"]
        return [f"commit: {c['sha']}", f"Author: {c['author']}", f"Date:   {c['date']}", "",
                f"    {c['subject']}", ""]
    out = ["The first bad commit is one of:"]
    out += [f"  {c['sha'][:12]} {c['subject']}" for c in res.get("range", [])]
    return out + [""]


def _step_lines(state: dict) -> list[str]:
    ep = state.get("endpoints") or {}
    out = ["steps (effect against good; against bad):",
           f"  00 {state['bad_commit']['sha'][:12]} endpoints {_pct(ep)}"]
    for s in state.get("steps", []):
        call = s.get("status", "")
        if call in ("unclear", "build-error"):
            call += ", skipped"
        out.append(f"  {s['n']:02d} {s['sha'][:12]} {call}: {_pct(s.get('vs_good'))}; {_pct(s.get('vs_bad'))}")
    return out


def _machine_line(ep: dict) -> str:
    m = ep.get("machine") or {}
    parts = [m.get("host") or "unknown host", m.get("cpu"),
             f"{m['n_cpus']} CPUs" if m.get("n_cpus") else None, f"kernel {m['kernel']}" if m.get("kernel") else None]
    return "machine: " + ", ".join(p for p in parts if p)


def tree_name(state: dict) -> str:
    """How reports name the bisected tree: the test repository in words, or its path."""
    return state.get("tree_name") or state["tree"]


def bisect_mail_text(path, width: int = 72) -> str:
    """The mail of bisect folder ``path`` (DataError when bisect.json is missing or corrupt)."""
    state = _read(path)
    res, ep = state.get("result") or {}, state.get("endpoints") or {}
    out = [f"Subject: {subject(state)}", ""]
    out += _wrap(f"ringlab bisected {state['experiment']} {state['metric']} between {state['good']} "
                 f"({state['good_commit']['sha'][:12]}) and {state['bad']} ({state['bad_commit']['sha'][:12]}) "
                 f"of {tree_name(state)}: {res.get('message', 'not finished')}.", width)
    out.append("")
    if res.get("status") in ("found", "range"):
        out += _commit_lines(res)
        eff = res.get("effect") or {}
        out += _wrap(f"{state['metric']}: {_pct(eff)} against good ({eff.get('source', '')}; "
                     f"{eff.get('design', '')} design, {eff.get('layouts') or 1} layout pair(s))", width)
        out += _wrap(f"configuration: {ep.get('group', '')}", width)
        out += _wrap(f"bad vs good at the endpoints: {_pct(ep)}", width)
        out.append("")
    out += _wrap(f"{state['commits_in_range']} commits in the range, {len(state['candidates'])} change "
                 f"{', '.join(state['paths'])}; {state['skipped_commits']} others skipped.", width)
    out += [""] + _step_lines(state) + [""]
    out += _wrap(_machine_line(ep), width) + ["", "To reproduce:", ""] + _command(state.get("command", ""), width)
    return "\n".join(out) + "\n"
