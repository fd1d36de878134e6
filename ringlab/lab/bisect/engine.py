"""The bisection: confirm the endpoints, then halve the candidates with three-arm steps.

State lives in ``DIR/bisect.json`` (written after every change, through ringlab.rundir), so a
killed bisect continues with ``--resume``: the search is deterministic given the steps'
outcomes, so it replays, reusing every finished step from bisect.json and resuming the run
folder of an interrupted one.

Search (``git bisect`` on the candidates c[0..n-1], oldest first): ``lo`` = -1 (good's header),
``hi`` = n-1 (the last candidate carries bad's header, so it is known bad).  The next step is
the untried candidate strictly between lo and hi nearest their middle; good moves lo, bad moves
hi, unclear (after more rounds, up to ``step_budget``) or a build failure skips it.  The
endpoints (step 0) run more rounds in the same way until bad against good is decided: a
significant change of at least the threshold, or a CI within +-threshold (nothing to bisect),
up to ``step_budget`` or ``ENDPOINT_BUDGET_FACTOR`` times the first run's rounds.  The result
is c[hi] when nothing between lo and hi is left untried, else the range c[lo+1..hi].

Every run of a step is one more look at its pooled rounds, and each look's call is the step's
answer, so the looks split the error (``ringlab.stats.sequential.look_alpha``): a step that may take L looks
(its budget over its first run's rounds) compares at alpha / L at each, and the step's record
holds ``looks``, ``max_looks`` and the last look's ``alpha``.  A call at any of its looks is then
a false one with probability at most alpha (re-testing the endpoints at 5% up to 8 times would
call an A/A pair in about 18% of bisections).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from ringlab.errors import DataError, ParamError
from ringlab.lab.bisect import gitrange, steps
from ringlab import catalog, rundir, schema
from ringlab.experiments.params import MAX_TRIALS
from ringlab.run.prepare import draw_seed
from ringlab.stats.sequential import look_alpha

STATE_FILE = "bisect.json"
STATE_VERSION = 1
FINAL = ("good", "bad", "unclear", "build-error")
DEFAULT_THRESHOLD_PCT = 2.0
DEFAULT_BUDGET_FACTOR = 3
#: the endpoints decide whether there is anything to bisect: they measure longer
ENDPOINT_BUDGET_FACTOR = 8


@dataclass
class Config:
    experiment: str
    tree: str
    good: str
    bad: str
    out: Path
    metric: str = "ns_per_op"
    threshold_pct: float = DEFAULT_THRESHOLD_PCT
    step_budget: int | None = None
    params: dict[str, str] = field(default_factory=dict)
    command: str = ""
    tree_name: str = ""   # how reports name the tree; empty: its path


def _save(out: Path, state: dict) -> None:
    rundir.write_text(out, STATE_FILE, json.dumps(state, indent=2, sort_keys=False, default=str) + "\n")


def load_state(out: Path) -> dict:
    path = Path(out) / STATE_FILE
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: cannot read the bisect state ({e}); allowed: a folder written by "
                        "ringlab bisect") from None
    if not isinstance(state, dict) or state.get("kind") != "bisect":
        raise DataError(f"{path}: not a bisect state (kind != 'bisect')")
    return state


def max_looks(budget: int, first_rounds: int) -> int:
    """The most looks a step takes: one per run of ``first_rounds`` rounds within ``budget`` rounds
    (at least one).  It depends on the plan alone, never on what the looks saw."""
    return max(1, int(budget) // max(1, int(first_rounds)))


def _rounds(df: pd.DataFrame) -> int:
    ok = df[~schema.warmup_mask(df)]
    keys = [c for c in ("run_id", "round") if c in ok.columns]
    return int(ok.groupby(keys).ngroups) if keys else len(ok)


#: metrics a bisect may follow (lower is better for all but ipc)
BISECT_METRICS = tuple(sorted(schema.LOWER_IS_BETTER | {"ipc"}))
#: the largest regression threshold, in percent
MAX_THRESHOLD_PCT = 1000.0
#: step_budget bounds, in rounds (a step is one run: at most MAX_TRIALS rounds)
MAX_STEP_BUDGET = MAX_TRIALS
MAX_SEED = 2**32 - 1


def check_config(cfg: Config) -> None:
    """ParamError (exit 2) for a bisect parameter out of its bounds, before anything is measured."""
    if cfg.metric not in BISECT_METRICS:
        raise ParamError(f"parameter 'metric': {str(cfg.metric)[:40]!r}; allowed: one of {', '.join(BISECT_METRICS)}")
    t = cfg.threshold_pct
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not (math.isfinite(t) and 0 <= t <= MAX_THRESHOLD_PCT):
        raise ParamError(f"parameter 'threshold': {t!r}; allowed: a percentage in [0, {MAX_THRESHOLD_PCT:g}]")
    b = cfg.step_budget
    if b is not None and (isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= MAX_STEP_BUDGET):
        raise ParamError(f"parameter 'step_budget': {b!r}; allowed: an integer in [1, {MAX_STEP_BUDGET}] (rounds)")
    seed = cfg.params.get("seed", 1)
    try:
        ok = str(seed).strip().lstrip("+").isdigit() and 0 <= int(seed) <= MAX_SEED
    except ValueError:
        ok = False
    if not ok:
        raise ParamError(f"parameter 'seed': {str(seed)[:40]!r}; allowed: an integer in [0, {MAX_SEED}]")


#: step seeds are the bisection's seed + 100 x step + run: a drawn seed leaves room for them
SEED_ROOM = 1_000_000


def _seed(cfg: Config) -> dict:
    """The bisection's seed (``-p seed``, else drawn per bisection like a run's, so a rerun samples
    fresh layouts) and where it came from."""
    if "seed" in cfg.params:
        return {"seed": int(cfg.params["seed"]), "seed_source": "given"}
    seed, source = draw_seed()
    return {"seed": seed % (MAX_SEED - SEED_ROOM), "seed_source": source}


def init_state(cfg: Config) -> dict:
    """Resolve and check the range (ParamError, exit 2) and list its candidates."""
    if cfg.experiment not in gitrange.MEASURED_PATHS or cfg.experiment != catalog.RING_EXPERIMENT:
        raise ParamError(f"experiment {cfg.experiment!r}: not bisectable; allowed: {catalog.RING_EXPERIMENT}")
    check_config(cfg)
    tree = gitrange.check_tree(cfg.tree)
    good = gitrange.resolve(tree, cfg.good, "good")
    bad = gitrange.resolve(tree, cfg.bad, "bad")
    gitrange.check_order(tree, good, bad)
    every = gitrange.commits(tree, good, bad)
    cands = gitrange.commits(tree, good, bad, gitrange.MEASURED_PATHS[cfg.experiment])
    return {
        "kind": "bisect", "version": STATE_VERSION, "experiment": cfg.experiment, "tree": str(tree),
        "tree_name": cfg.tree_name or str(tree),
        "good": cfg.good, "bad": cfg.bad, "good_commit": gitrange.describe(tree, good).to_dict(),
        "bad_commit": gitrange.describe(tree, bad).to_dict(), "metric": cfg.metric,
        "threshold_pct": cfg.threshold_pct, "step_budget": cfg.step_budget, "params": dict(cfg.params),
        **_seed(cfg), "command": cfg.command,
        "paths": list(gitrange.MEASURED_PATHS[cfg.experiment]), "commits_in_range": len(every),
        "skipped_commits": len(every) - len(cands),
        "candidates": [gitrange.describe(tree, c).to_dict() for c in cands],
        "endpoints": None, "steps": [], "result": None,
    }


def _same_range(old: dict, new: dict) -> None:
    for k in ("experiment", "tree", "metric"):
        if old.get(k) != new.get(k):
            raise ParamError(f"parameter '--resume': {k} differs from the bisect in the folder "
                             f"({old.get(k)!r}); allowed: the same {k}, or a new --out folder")
    for k in ("good_commit", "bad_commit"):
        if old[k]["sha"] != new[k]["sha"]:
            raise ParamError(f"parameter '{k.split('_')[0]}': differs from the bisect in the folder "
                             f"({old[k]['sha'][:12]}); allowed: the same revision, or a new --out folder")


def _machine(step_dir: Path) -> dict:
    """The machine a step ran on, from its env.json (read through ``rundir.RunOutput``); {} without one."""
    env = rundir.RunOutput(step_dir).env_doc
    if not env:
        return {}
    return {"host": env.host, "cpu": env.cpu_model,
            "kernel": env.machine.get("kernel"), "n_cpus": env.topology.get("n_cpus")}


class Bisect:
    """One bisection over ``state`` in folder ``out`` (``run()`` does it all)."""

    def __init__(self, state: dict, out: Path, log: Callable[[str], None] = print):
        self.state, self.out, self.log = state, Path(out), log
        self.tree = Path(state["tree"])
        self.good, self.bad = state["good_commit"]["sha"], state["bad_commit"]["sha"]

    def save(self) -> None:
        _save(self.out, self.state)

    def _run_arms(self, n: int, sha: str, arms: dict[str, str], record: dict) -> pd.DataFrame | None:
        """Run (or resume) the step's first run, and as long as it is unclear and under budget,
        more runs of as many rounds; None when a header does not build."""
        name = f"{n:02d}-{sha[:12]}"
        record.setdefault("runs", [])
        frames: list[pd.DataFrame] = []
        k = 0
        while True:
            folder = name if k == 0 else f"{name}-more{k}"
            if folder not in record["runs"]:
                record["runs"].append(folder)
                self.save()
            params = steps.step_params(self.state["params"], self.tree, arms, self.state["seed"] + 100 * n + k)
            try:
                frames.append(steps.run_step(self.out / "steps" / folder, self.state["experiment"], params,
                                             resume=True, log=self.log))
            except steps.StepBuildError as e:
                steps.record_build_error(self.out / "steps" / name, str(e))
                record.update(status="build-error", error=str(e))
                return None
            df = pd.concat(frames, ignore_index=True)
            record["rounds"] = _rounds(df)
            first = _rounds(frames[0])
            budget = self.state.get("step_budget") or (
                ENDPOINT_BUDGET_FACTOR if n == 0 else DEFAULT_BUDGET_FACTOR) * first
            most = max_looks(budget, first)
            record.update(looks=k + 1, max_looks=most, alpha=look_alpha(k + 1, most))
            self.save()
            if n == 0:
                if steps.endpoints_decided(steps.groups_regressed(df, self.state["metric"], record["alpha"]),
                                           self.state["threshold_pct"]):
                    return df
            elif self._classify(df, record) != "unclear":
                return df
            if k + 1 >= most or record["rounds"] + first > budget:
                return df
            k += 1

    def _classify(self, df: pd.DataFrame, record: dict) -> str:
        st, metric, group = self.state, self.state["metric"], self.state["endpoints"].get("group")
        alpha = float(record.get("alpha", 0.05))
        record["vs_good"] = steps.effect(df, "good", "candidate", metric, group, alpha)
        record["vs_bad"] = steps.effect(df, "bad", "candidate", metric, group, alpha)
        record["endpoints"] = steps.effect(df, "good", "bad", metric, group, alpha)
        direction = st["endpoints"]["direction"]
        record["status"] = steps.classify(record["vs_good"], record["vs_bad"], direction,
                                          steps.endpoint_effect(record["endpoints"], st["endpoints"], direction))
        return record["status"]

    def confirm(self) -> dict:
        """Step 0: bad against good; sets state["endpoints"]."""
        ep = self.state.get("endpoints")
        if ep and ep.get("status") == "done":
            return ep
        ep = {"step": 0, "dir": f"steps/00-{self.bad[:12]}", "status": "running"}
        self.state["endpoints"] = ep
        self.save()
        for sha in (self.good, self.bad):
            try:
                steps.check_builds(self.tree, sha)
            except steps.StepBuildError as e:
                steps.record_build_error(self.out / ep["dir"], str(e))
                raise ParamError(f"parameter '{'good' if sha == self.good else 'bad'}': {sha[:12]} does not "
                                 f"build: {e}; allowed: revisions whose header builds") from None
        df = self._run_arms(0, self.bad, {"good": self.good, "bad": self.bad}, ep)
        if df is None:
            raise ParamError(f"the endpoints do not build: {ep.get('error')}")
        rows = [r for r in steps.groups_regressed(df, self.state["metric"], float(ep.get("alpha", 0.05)))
                if "error" not in r]
        thr = self.state["threshold_pct"]
        real = [r for r in rows if steps.ci_excludes_zero(r, 1 if (r["delta_pct"] or 0) > 0 else -1)
                and abs(r["delta_pct"]) >= thr]
        pick = max(real or rows, key=lambda r: abs(r["delta_pct"] or 0), default={})
        ep.update(pick, status="done", regression=bool(real), machine=_machine(self.out / ep["dir"]),
                  direction=1 if (pick.get("delta_pct") or 0) > 0 else -1, configurations=rows)
        self.save()
        return ep

    def measure(self, n: int, idx: int) -> dict:
        """Step ``n`` on candidate ``idx``: reused from bisect.json when finished."""
        cand = self.state["candidates"][idx]
        done = [s for s in self.state["steps"] if s["n"] == n]
        if done and done[0]["sha"] != cand["sha"]:
            raise DataError(f"{self.out / STATE_FILE}: step {n} was {done[0]['sha'][:12]}, the replay asks "
                            f"for {cand['sha'][:12]}; allowed: a bisect folder of the same range")
        if done and done[0].get("status") in FINAL:
            self.log(f"step {n:02d} {cand['sha'][:12]}: {done[0]['status']} (from {STATE_FILE})")
            return done[0]
        rec = done[0] if done else {"n": n, "index": idx, "sha": cand["sha"], "subject": cand["subject"],
                                    "dir": f"steps/{n:02d}-{cand['sha'][:12]}", "status": "running"}
        if not done:
            self.state["steps"].append(rec)
            self.save()
        try:
            steps.check_builds(self.tree, cand["sha"])
        except steps.StepBuildError as e:
            steps.record_build_error(self.out / rec["dir"], str(e))
            rec.update(status="build-error", error=str(e))
        else:
            self._run_arms(n, cand["sha"], {"good": self.good, "bad": self.bad, "candidate": cand["sha"]}, rec)
        self.save()
        self.log(f"step {n:02d} {cand['sha'][:12]} {cand['subject'][:50]}: {rec['status']}")
        return rec

    def search(self) -> None:
        """Halve the candidates; sets state["result"]."""
        cands = self.state["candidates"]
        lo, hi, tried, n = -1, len(cands) - 1, set(), 1
        while True:
            inner = [i for i in range(lo + 1, hi) if i not in tried]
            if not inner:
                break
            mid = min(inner, key=lambda i: (abs(i - (lo + hi) / 2), i))
            rec = self.measure(n, mid)
            n += 1
            tried.add(mid)
            if rec["status"] == "good":
                lo = mid
            elif rec["status"] == "bad":
                hi = mid
        self.state["result"] = self._result(lo, hi, tried)

    def _result(self, lo: int, hi: int, tried: set) -> dict:
        cands, ep = self.state["candidates"], self.state["endpoints"]
        between = list(range(lo + 1, hi))
        bad_step = [s for s in self.state["steps"] if s["index"] == hi and s.get("status") == "bad"]
        eff = dict(bad_step[0]["vs_good"]) if bad_step else {k: ep.get(k) for k in
                                                             ("group", "delta_pct", "ci_low_pct", "ci_high_pct",
                                                              "verdict", "design", "layouts")}
        eff["source"] = f"step {bad_step[0]['n']:02d}" if bad_step else "endpoints (same header as bad)"
        if not between:
            return {"status": "found", "first_bad": cands[hi], "effect": eff,
                    "message": f"first bad commit: {cands[hi]['sha'][:12]} {cands[hi]['subject']}"}
        rng = cands[lo + 1:hi + 1]
        return {"status": "range", "range": rng, "effect": eff, "skipped_steps": len(between),
                "message": f"the first bad commit is one of {len(rng)} ({rng[0]['sha'][:12]}.."
                           f"{rng[-1]['sha'][:12]}): the steps between could not be classified"}

    def run(self) -> dict:
        st = self.state
        if not st["candidates"]:
            st["result"] = {"status": "no candidates", "message": (
                f"no commit in {st['good']}..{st['bad']} ({st['commits_in_range']} commits) changes "
                f"{', '.join(st['paths'])}: nothing to bisect")}
            self.save()
            return st
        ep = self.confirm()
        if not ep.get("regression"):
            d = ep.get("delta_pct")
            st["result"] = {"status": "nothing to bisect", "message": (
                "nothing to bisect: bad vs good is " + (f"{d:+.1f}% [{ep['ci_low_pct']:+.1f}, "
                                                        f"{ep['ci_high_pct']:+.1f}] ({ep['verdict']})"
                                                        if d is not None else "not measurable")
                + f", not a significant change of at least {st['threshold_pct']:g}%")}
            self.save()
            return st
        self.search()
        self.save()
        return st


def start(cfg: Config, resume: bool) -> Bisect:
    """A new bisect in ``cfg.out`` (refused when one is there), or the one there (``resume``)."""
    out = Path(cfg.out)
    new = init_state(cfg)
    if (out / STATE_FILE).exists():
        if not resume:
            raise ParamError(f"parameter '--out': {out} already holds a bisect; allowed: --resume, or a "
                             "new folder")
        old = load_state(out)
        _same_range(old, new)
        return Bisect(old, out)
    if resume:
        raise ParamError(f"parameter '--resume': {out} holds no {STATE_FILE}; allowed: the folder of an "
                         "interrupted bisect")
    if out.exists() and any(out.iterdir()):
        raise ParamError(f"parameter '--out': {out} is not empty; allowed: a new or empty folder")
    return Bisect(new, out)
