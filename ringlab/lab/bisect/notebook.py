"""What notebook 13-bisect calls: the bisect's configuration from the notebook's parameters
(building the test repository when no tree is given), the run through the same engine as
``ringlab bisect``, and its tables against the test series' known answer.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ringlab import catalog
from ringlab.errors import ParamError as BaseParamError
from ringlab.errors import RinglabError
from ringlab.lab import notebook as rn
from ringlab.lab.bisect import engine, report, testrepo
from ringlab.rundir import RunOutput
from ringlab.sources import patches
from ringlab.sources import builtin_patches
from ringlab.tools import icount as icount_tool

#: callgrind operations per icount trial of a step (callgrind runs code 50-100x slower)
ICOUNT_OPS = 200_000
#: fewest operations per timed trial of a step: a flush costs tens of ns, and shorter trials (the
#: smoke profile's 100,000 operations) are mostly start-up noise
MIN_COUNT = 2_000_000


@dataclass
class Plan:
    config: engine.Config | None
    repo: testrepo.TestRepo | None   # the test repository, when no tree was given
    icount: bool
    why_not: str = ""                # why nothing can run here (no header tree)


def _step_params(profile: str, layouts: int, modes: str, trials: int, count: int, icount: bool,
                 seed: int) -> tuple[dict, bool]:
    """The steps' pass-through parameters, validated as ``ringlab run`` would; trials 0: the
    profile's, at least 2 per layout (a t interval across layout pairs needs several); count 0:
    the profile's, at least MIN_COUNT."""
    P = rn.params(catalog.RING_EXPERIMENT, profile=profile, modes=modes, layouts=layouts, trials=trials or None,
                  count=count or None, seed=seed, icount=icount)
    usable = bool(icount) and icount_tool.availability().ok
    out = {"profile": profile, "modes": ",".join(map(str, P["modes"])), "layouts": str(P["layouts"]),
           "trials": str(trials or max(int(P["trials"]), 2 * int(P["layouts"]))),
           "count": str(count or max(int(P["count"]), MIN_COUNT)), "seed": str(P["seed"]),
           "icount": "true" if usable else "false"}
    if usable:
        out["icount_ops"] = str(ICOUNT_OPS)
    return out, usable


def _command(tree: str, good: str, bad: str, threshold: float, params: dict, spins: int) -> str:
    """The papermill line that repeats this bisect: with ``tree``, good and bad; for the test
    repository (no tree), its ``spins``, so that the line names no folder of this machine."""
    words = ["papermill", "notebooks/13-bisect.ipynb", "out.ipynb", "-k", "python3"]
    if tree:
        words += ["-p", "tree", tree, "-p", "good", good, "-p", "bad", bad]
    else:
        words += ["-p", "spins", str(spins)]
    words += ["-p", "threshold", f"{float(threshold):g}"]
    for k in ("profile", "layouts", "modes", "trials", "count", "seed"):
        words += ["-p", k, params[k]]
    words += ["-p", "icount", "True" if params["icount"] == "true" else "False"]
    return shlex.join(words)


def plan(out: Path, tree: str = "", good: str = "", bad: str = "", threshold: float = 2.0,
         profile: str = "quick", layouts: int = 4, modes: str = "0", trials: int = 0, count: int = 0,
         icount: bool = True, seed: int = 1, spins: int = testrepo.DEFAULT_SPINS) -> Plan:
    """Check the parameters (ParamError naming the one at fault) and say what to bisect: the
    given tree, or the test repository (``Plan.why_not`` when this machine has no header tree)."""
    try:
        params, usable = _step_params(profile, layouts, modes, trials, count, icount, seed)
        if tree and not (good and bad):
            raise BaseParamError(f"parameter '{'bad' if good else 'good'}': empty; allowed: a revision of "
                                 f"{tree} (good and bad are required with tree)")
        repo, command = None, _command(tree, good, bad, threshold, params, spins)
        if not tree:
            repo = testrepo.build(spins)
            if repo is None:
                return Plan(None, None, usable, "no kernel header tree here (/usr/src/*/include/linux/ptr_ring.h; "
                                                "on Debian: apt-get install linux-headers-<version>-common), "
                                                "so there is no real header to build the test repository from; "
                                                "pass tree, good and bad to bisect your own tree")
            tree, good, bad = str(repo.tree), good or repo.good, bad or repo.bad
        cfg = engine.Config(experiment=catalog.RING_EXPERIMENT, tree=tree, good=good, bad=bad, out=Path(out),
                            threshold_pct=float(threshold), params=params, command=command,
                            tree_name=(f"the test repository (built from {repo.source}, spins {spins})"
                                       if repo else ""))
        engine.init_state(cfg)   # the range is checked before anything runs
        return Plan(cfg, repo, usable)
    except builtin_patches.PatchError as e:
        raise rn.param_error(f"parameter 'spins': {e}", "spins") from None
    except BaseParamError as e:
        raise rn.param_error(str(e), e.input) from None


def run(cfg: engine.Config) -> dict:
    """The bisection, as ``ringlab bisect`` runs it: bisect.json, steps/, summary.md, figures/."""
    try:
        b = engine.start(cfg, resume=False)
        b.log = lambda msg: print(f"bisect: {msg}", flush=True)
        state = b.run()
    except BaseParamError as e:
        raise rn.param_error(str(e), e.input) from None
    except RinglabError as e:
        line = f"{type(e).__name__}: {e}"   # IPython shows the message alone, no traceback
        e._render_traceback_ = lambda: [line]
        raise
    report.write_outputs(cfg.out, state)
    return state


# -- tables -------------------------------------------------------------------------------------
def _expected(c: testrepo.Commit, repo: testrepo.TestRepo) -> str:
    if c.kind == "base":
        return "good (the good endpoint)"
    if c.kind == "unrelated":
        return "skipped (not a candidate)"
    if c is repo.planted:
        return "bad: the first bad commit, the one to find"
    return "bad (carries the cost)" if c.has_cost else "good"


def expectation(repo: testrepo.TestRepo) -> str:
    """What the planted commit should cost, stated before measuring."""
    n = repo.spins
    flushes = -(-1000 // 16)
    return (f"expected: the planted commit {repo.planted.sha[:12]} adds at least "
            f"{builtin_patches.expected_extra_per_op(n):+.2f} instructions/op in mode 0 ({n} iterations x "
            f"{builtin_patches.INSNS_PER_SPIN} instructions x {flushes} flushes per 1000 operations; loop set-up adds a "
            f"few per flush), and in time {n * flushes / 1000:.1f} to {2 * n * flushes / 1000:.1f} cycles per "
            "operation (one to two cycles per iteration): a few to some tens of percent of a ring operation "
            "of a few ns")


def series_table(repo: testrepo.TestRepo) -> pd.DataFrame:
    """Every commit of the test repository: what it does and the call expected of the bisect."""
    return pd.DataFrame([{"commit": c.sha[:12], "kind": c.kind, "subject": c.subject, "what it does": c.what,
                          "expected": _expected(c, repo)} for c in repo.commits])


def step_table(state: dict, repo: testrepo.TestRepo | None = None) -> pd.DataFrame:
    """report.step_rows as a table; with the test repository, each commit's kind and expected call."""
    cols = ["step", "commit", "subject", "rounds", "vs good", "vs bad", "call"]
    df = pd.DataFrame(report.step_rows(state), columns=cols)
    if repo is not None and len(df):
        by12 = {c.sha[:12]: c for c in repo.commits}
        df["kind"] = [by12[s].kind if s in by12 else "" for s in df["commit"]]
        df["expected"] = [("bad" if by12[s].has_cost else "good") if s in by12 else "" for s in df["commit"]]
        df.loc[df["step"] == "00", ["kind", "expected"]] = ["endpoints", "regression"]
    return df


def _callgrind(run_dir: Path) -> dict[str, float]:
    try:
        df = RunOutput(run_dir).raw
    except (OSError, RinglabError):
        return {}
    if "icount_source" not in df.columns:
        return {}
    ic = df[(df["icount_source"] == "callgrind") & (df["status"] == "ok")]
    return {str(k): float(v) for k, v in ic.groupby(ic["variant"].astype(str))["instructions_per_op"].median().items()}


def instructions_table(out: Path, state: dict) -> pd.DataFrame:
    """Instructions per operation (callgrind, mode 0) of each step's arms: good, bad, candidate."""
    ep = state.get("endpoints") or {}
    rows = [("00", state["bad_commit"]["sha"], ep.get("dir"))] if ep.get("dir") else []
    rows += [(f"{s['n']:02d}", s["sha"], s["dir"]) for s in state.get("steps", [])]
    out_rows = []
    for step, sha, d in rows:
        m = _callgrind(Path(out) / d)
        if not m:
            continue
        g, b, c = (m.get(a, float("nan")) for a in ("good", "bad", "candidate"))
        out_rows.append({"step": step, "commit": sha[:12], "good": round(g, 3), "bad": round(b, 3),
                         "candidate": round(c, 3) if step != "00" else float("nan"),
                         "bad - good": round(b - g, 3),
                         "candidate - good": round(c - g, 3) if step != "00" else float("nan")})
    return pd.DataFrame(out_rows, columns=["step", "commit", "good", "bad", "candidate", "bad - good",
                                           "candidate - good"])


def result_text(state: dict) -> str:
    """The bisect's result and its effect against good, as ``ringlab bisect`` prints them."""
    res = state.get("result") or {}
    lines = [f"**{res.get('message', 'not finished')}**"]
    eff = res.get("effect") or {}
    if eff.get("delta_pct") is not None:
        lines.append(f"effect against good: {eff['delta_pct']:+.1f}% [{eff['ci_low_pct']:+.1f}, "
                     f"{eff['ci_high_pct']:+.1f}] ({eff.get('source')}; configuration {eff.get('group')})")
    lines.append(f"{state['skipped_commits']} of {state['commits_in_range']} commits skipped (they do not "
                 f"change {', '.join(state['paths'])})")
    return "  \n".join(lines)


def check(state: dict, repo: testrepo.TestRepo) -> str:
    """Was the planted commit found?  Was a commit without the cost (comment-only, layout-only,
    the reorder) ever called bad, or one with it called good?"""
    res, planted = state.get("result") or {}, repo.planted
    by = repo.by_sha()
    if res.get("status") == "found":
        hit = res["first_bad"]["sha"] == planted.sha
        found = (f"found: {planted.sha[:12]} ({planted.subject})" if hit else
                 f"**wrong**: the bisect names {res['first_bad']['sha'][:12]} ({res['first_bad']['subject']}), "
                 f"the planted commit is {planted.sha[:12]}")
    elif res.get("status") == "range":
        inside = any(c["sha"] == planted.sha for c in res["range"])
        found = (f"not pinned down: a range of {len(res['range'])} commits, which "
                 f"{'holds' if inside else '**does not hold**'} the planted one")
    else:
        found = f"not found: {res.get('message', 'the bisect did not finish')}"
    steps = [(s, by.get(s["sha"])) for s in state.get("steps", [])]
    false_bad = [f"{s['sha'][:12]} ({c.kind})" for s, c in steps if c and not c.has_cost and s.get("status") == "bad"]
    false_good = [f"{s['sha'][:12]} ({c.kind})" for s, c in steps if c and c.has_cost and s.get("status") == "good"]
    neutral = sorted({c.kind for s, c in steps if c and not c.has_cost})
    lines = [f"- planted commit: {found}",
             f"- commits without the cost measured: {len([1 for s, c in steps if c and not c.has_cost])} "
             f"({', '.join(neutral) or 'none'}); called bad: {', '.join(false_bad) or 'none'}",
             f"- commits with the cost called good: {', '.join(false_good) or 'none'}"]
    return "\n".join(lines)
