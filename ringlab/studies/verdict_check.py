"""Is a verdict about the code change?  Known changes to the real header, and what their verdicts must be.

Notebook 14 runs ONE ptr_ring A/B (mode 0) of the distro's real ``ptr_ring.h`` with arms whose
effect is known before measuring:

* ``base``: the header as it is;
* ``pad48``: ``builtin:pad:48``, 48 bytes of never-called code ahead of the ring.  The same
  instructions run (callgrind counts are equal); only the layout changes;
* ``d2`` / ``d8``: ``builtin:flush-spin:N`` (N iterations of a loop over a volatile counter
  after each batch flush, a cost gcc can neither remove nor unroll) with N chosen (:func:`plan`)
  as the whole number whose added instructions per operation come nearest +2.5% / +7.7% of the
  base's (:meth:`CheckPlan.expected` states what that N adds, before measuring).  Where callgrind
  is here, the cost of one iteration and of the loop's set-up are counted, not assumed: two
  probe builds (:data:`PROBE_SPINS`) are counted beside the base and N comes from the line
  through them; the run's own exact counts (``icount``) then say what each arm really adds;

and a second run of ``base`` and ``d8`` built with :data:`ALIGN_CFLAGS`.  What must hold
(:data:`EXPECTATIONS`, checked by :func:`expectations`): pad48 is not called (no significant
difference or inconclusive), d2 is never ``faster``, d8 is ``slower``, and d8 gets the same call
in the aligned build with its estimate inside the default build's 95% next-run interval (the
interval another run on this host is expected in: ``ringlab.stats.replication``).  The two
builds are two layouts of the same change: their estimates differ by what a run-to-run move
allows, not by zero, so overlapping CIs was the wrong test once the CIs were narrow.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ringlab import catalog, fmt, paths
from ringlab.catalog import Verdict
from ringlab.errors import ParamError
from ringlab.rundir import RunOutput
from ringlab.report.figures import effect_rows
from ringlab.report import tables
from ringlab.report.tables import comparison_rows
from ringlab.sources import kernel_header as kh
from ringlab.sources import patches
from ringlab.sources import builtin_patches
from ringlab.stats.compare import compare
from ringlab.stats.replication import NONE, with_next_run
from ringlab.rundir.calibration import frame_host, results_root_of, with_host_next_run
from ringlab.build import driver
from ringlab.build.layouts import UNALIGNED_LOOP_FLAGS
from ringlab.build.targets import ring_binary
from ringlab.tools import icount

BASELINE = "base"
#: arm -> (built-in patch, expected extra instructions in percent of the base; None: fixed N)
ARMS = {"pad48": ("builtin:pad:48", 0.0), "d2": ("builtin:flush-spin", 2.5), "d8": ("builtin:flush-spin", 7.7)}
#: flush-spin iterations of the two probe builds whose callgrind counts give the cost per iteration
PROBE_SPINS = (1, 8)
#: the second run's compiler flags (loops and jumps pinned to 64 bytes as well as functions)
ALIGN_CFLAGS = "-falign-functions=64 -falign-loops=64 -falign-jumps=64"
#: the verdicts of a time that do not call a difference (``ringlab.catalog.NOT_CALLED``)
NOT_CALLED = catalog.NOT_CALLED
#: what must hold, stated before measuring (the rows of :func:`expectations`, in order)
EXPECTATIONS = (
    "pad48 (layout only) is not called: no significant difference or inconclusive",
    "d2 (the smaller delay, N nearest +2.5% instructions) is never called faster",
    "d8 (the larger delay, N nearest +7.7% instructions) is called slower",
    "d8 gets the same call in the aligned build, and its aligned estimate lies inside the default build's "
    "95% next-run interval",
)
#: rounds per layout pair at profile full: the design whose power ``ringlab bench power`` checks
FULL_ROUNDS_PER_LAYOUT = 20
#: ring size and operations of the callgrind count that sizes d2 and d8
ICOUNT_SIZE, ICOUNT_OPS = 1000, 200_000
#: instructions/op of Debian 6.1's ptr_ring.h in mode 0 (docs/fidelity.md): sizes d2 and d8 only
#: where callgrind is missing
NOMINAL_BASE_PER_OP = 43.5
_BASE_HELP = "a ptr_ring.h, a kernel tree or a headers package root; empty: the newest kernel header tree"


@dataclass(frozen=True)
class CheckPlan:
    """The arms of both runs, generated against ``base`` before anything is measured."""
    base: str
    base_per_op: float                       # instructions/op of the base (mode 0, ring of 1000)
    count_source: str                        # "callgrind", or why there is no count
    specs: dict[str, str] = field(default_factory=dict)       # arm -> normalised built-in spec
    files: dict[str, Path] = field(default_factory=dict)      # arm -> generated patch file
    #: flush-spin's extra instructions/op as (fixed, per iteration), from callgrind counts of
    #: the probe builds; None: the stated figures of ``builtin_patches`` size the arms
    spin_cost: tuple[float, float] | None = None

    def kernel_headers(self, arms) -> str:
        """``kernel_headers`` of a run holding ``arms`` (``base`` first)."""
        return ",".join([f"{BASELINE}={self.base}"] + [f"{a}={self.base}+{self.files[a]}" for a in arms])

    @property
    def default_arms(self) -> list[str]:
        return list(ARMS)

    @property
    def aligned_arms(self) -> list[str]:
        return ["d8"]

    def variants(self, arms) -> str:
        return ",".join([BASELINE, *arms])

    def expected_extra(self, spec: str) -> float:
        """Extra instructions/op of ``spec`` stated before measuring: from the probe builds'
        counts for flush-spin where they were made, else ``builtin_patches.expected_extra``
        (0 for pad)."""
        name, n = builtin_patches.parse_builtin(spec)
        if name == "flush-spin" and self.spin_cost is not None:
            return self.spin_cost[0] + n * self.spin_cost[1]
        return builtin_patches.expected_extra(spec)

    def expected(self) -> pd.DataFrame:
        """What each arm is expected to change, stated before measuring."""
        rows = [{"arm": BASELINE, "patch": "none", "expected extra instructions/op": 0.0,
                 "expected extra %": 0.0, "expected verdict": "(the baseline)"}]
        verdicts = {"pad48": " or ".join(NOT_CALLED), "d2": "not faster", "d8": Verdict.SLOWER.value}
        for arm, spec in self.specs.items():
            extra = self.expected_extra(spec)
            rows.append({"arm": arm, "patch": spec, "expected extra instructions/op": round(extra, 3),
                         "expected extra %": round(100 * extra / self.base_per_op, 2),
                         "expected verdict": verdicts[arm]})
        return pd.DataFrame(rows)


def missing_default_base(base: str) -> str | None:
    """Why the default base cannot be had here (``base`` empty and no kernel header tree under
    /usr/src), with how to get it; None when ``base`` is given or a tree is installed."""
    if base.strip() or kh.header_trees():
        return None
    return (f"no kernel header tree under {kh.USR_SRC} for the default base (the real include/linux/ptr_ring.h): "
            "on Debian, `apt-get install linux-headers-<version>-common` (what `make reproduce` installs as root "
            "unless RINGLAB_INSTALL=0), or pass base=PATH to a ptr_ring.h or kernel tree")


def default_base() -> str:
    """The newest kernel header tree on this machine (``kernel_header.header_trees``), or ParamError."""
    trees = kh.header_trees()
    if not trees:
        raise ParamError(f"parameter 'base': empty, and no kernel header tree was found under {kh.USR_SRC}; "
                         f"allowed: {_BASE_HELP} (on Debian: apt-get install linux-headers-<version>-common)")
    return str(trees[0])


def _count(exe: Path) -> float:
    argv = [str(exe), "-s", str(ICOUNT_SIZE), "-m", "0", "-N", str(ICOUNT_OPS), "--counters", "none"]
    return icount.count(argv).instructions / ICOUNT_OPS


def _counts(sources: dict[str, str], out_dir: Path | None) -> dict[str, float]:
    """Callgrind instructions/op (mode 0, ring of 1000) of each ``name: header source``, built
    with the loop flags of the run's layouts (their loops are unaligned: no padding NOPs run)."""
    out_dir = Path(out_dir) if out_dir else paths.build_dir() / "verdict-check"
    info = driver.build_all(kernel_headers=sources, out_dir=out_dir, cflags=" ".join(UNALIGNED_LOOP_FLAGS),
                            only=[ring_binary(n) for n in sources])
    return {n: _count(Path(info.binaries[ring_binary(n)].path)) for n in sources}


def base_instructions(header: Path, out_dir: Path | None = None) -> tuple[float | None, str]:
    """(instructions/op, "callgrind") of ``header`` in mode 0 with a ring of 1000, as the run's
    layouts build it; (None, why) when callgrind is not available here."""
    av = icount.availability()
    if not av.ok:
        return None, f"no callgrind count: {av.reason}"
    return _counts({BASELINE: str(header)}, out_dir)[BASELINE], "callgrind"


def spin_cost(header: Path, base_per_op: float, workdir: Path, out_dir: Path | None = None) -> tuple[float, float]:
    """(fixed, per iteration) extra instructions/op of ``builtin:flush-spin`` on ``header``: the
    line through the callgrind counts of the :data:`PROBE_SPINS` builds, less ``base_per_op``.
    Raises ParamError where the probes add nothing (the anchor's code never runs)."""
    sources = {}
    for n in PROBE_SPINS:
        patch_file = Path(workdir) / f"probe-spin-{n}.patch"
        builtin_patches.write_builtin(f"builtin:flush-spin:{n}", header, patch_file)
        sources[f"probe{n}"] = f"{header}+{patch_file}"
    counts = _counts(sources, out_dir)
    lo, hi = PROBE_SPINS
    per = (counts[f"probe{hi}"] - counts[f"probe{lo}"]) / (hi - lo)
    if not per > 0:
        raise ParamError(f"parameter 'base': {header}: builtin:flush-spin:{hi} counts no more instructions "
                         f"than builtin:flush-spin:{lo}; allowed: a header whose batch flush runs in mode 0")
    return counts[f"probe{lo}"] - base_per_op - lo * per, per


def _spins(target: float, cost: tuple[float, float] | None) -> int:
    """The flush-spin N whose extra instructions/op is closest to ``target`` (at least 1)."""
    if cost is None:
        return builtin_patches.spins_for(target, name="flush-spin")
    return builtin_patches.nearest_spins(target, *cost)


def plan(base: str = "", workdir=None, base_per_op: float | None = None) -> CheckPlan:
    """Generate the arms' patches against ``base`` (empty: :func:`default_base`) into ``workdir``
    (default ``build/patches``).  d2's and d8's N make the arm's extra instructions/op its
    percentage of ``base_per_op`` (default: the base's callgrind count, :func:`base_instructions`;
    without callgrind :data:`NOMINAL_BASE_PER_OP`, and ``count_source`` says so).  The extra per
    N is counted (:func:`spin_cost`) where the base was counted, else the stated figures."""
    base = (base or "").strip() or default_base()
    header = patches.base_header_file(base)   # PatchError (a ParamError) naming the base
    workdir = Path(workdir) if workdir else paths.build_dir() / "patches"
    source = "given"
    if base_per_op is None:
        base_per_op, source = base_instructions(header)
    if base_per_op is None:
        base_per_op, source = NOMINAL_BASE_PER_OP, f"{source}; a nominal {NOMINAL_BASE_PER_OP} instructions/op"
    if not (math.isfinite(base_per_op) and base_per_op > 0):
        raise ParamError(f"parameter 'base': {base}: counted {base_per_op} instructions per operation; "
                         "allowed: a header whose ring runs in mode 0")
    cost = spin_cost(header, base_per_op, workdir) if source == "callgrind" else None
    specs, files = {}, {}
    for arm, (spec, pct) in ARMS.items():
        if spec.startswith("builtin:flush-spin"):
            spec = f"{spec}:{_spins(base_per_op * pct / 100, cost)}"
        name, n = builtin_patches.parse_builtin(spec)
        probe = builtin_patches.builtin_patch(spec, header)
        files[arm] = workdir / f"{name}-{n}-{probe.base_sha256[:12]}.patch"
        specs[arm] = builtin_patches.write_builtin(spec, header, files[arm]).spec
    return CheckPlan(base=base, base_per_op=float(base_per_op), count_source=source, specs=specs, files=files,
                     spin_cost=cost)


def rounds(layouts: int, per_layout: int = 0, profile: str = "full") -> int | None:
    """Rounds of the run: ``per_layout`` (0: :data:`FULL_ROUNDS_PER_LAYOUT` at profile full) times
    ``layouts``; None (the profile's trials) at other profiles when ``per_layout`` is 0."""
    if per_layout < 0:
        raise ParamError(f"parameter 'rounds_per_layout': {per_layout}; allowed: 0 (the profile's) or a positive integer")
    if not per_layout and profile != "full":
        return None
    return (per_layout or FULL_ROUNDS_PER_LAYOUT) * max(1, int(layouts))


# -- after measuring ------------------------------------------------------------------------------
def compare_run(run_dir, metric: str = "ns_per_op") -> pd.DataFrame:
    """compare() of a run's arms against ``base`` (the layouts design when the run has layouts),
    with their next-run intervals (``with_host_next_run``: the run's earlier runs, else its host's A/A,
    else none)."""
    raw = RunOutput(run_dir).raw
    return with_host_next_run(compare(raw, BASELINE, metric), frame_host(raw), results_root_of(run_dir),
                              run_dir=run_dir, metric=metric)


def verdict_table(cmp: pd.DataFrame, build: str = "") -> pd.DataFrame:
    """The report's comparison table of ``cmp`` (``ringlab.report.tables``), with a ``build`` column."""
    header, rows = comparison_rows(cmp)
    out = pd.DataFrame(rows, columns=header)
    if build:
        out.insert(0, "build", build)
    return out


def _rows(cmp: pd.DataFrame | None, arm: str) -> pd.DataFrame:
    if cmp is None or not len(cmp) or "candidate" not in cmp.columns:
        return pd.DataFrame()
    return cmp[cmp["candidate"].astype(str) == arm]


def _observed(rows: pd.DataFrame) -> str:
    """The verdicts with their %change and CI in the report's one sign (+ = faster)."""
    return "; ".join(f"{r['verdict']}, {fmt.pct(tables.gain(r))} {fmt.ci(*tables.gain_ci(r))}"
                     for _, r in rows.iterrows())


def _next_interval(a: pd.DataFrame) -> pd.DataFrame:
    """``a`` with its next-run intervals: as the report filled them in, else from its CIs with no
    between-run information (``NONE``: a rerun if nothing drifted; a frame without ``ci_level``
    is read as 95%)."""
    if "next_low_pct" in a.columns and pd.to_numeric(a["next_low_pct"], errors="coerce").notna().all():
        return a
    a = a.copy()
    if "ci_level" not in a.columns:
        a["ci_level"] = 0.95
    return with_next_run(a, NONE)


def _same_call_inside(a: pd.DataFrame, b: pd.DataFrame) -> tuple[str, bool | None]:
    """Whether every configuration of ``b`` (the aligned build) gets the call it gets in ``a``
    (the default build) and its estimate lies inside ``a``'s 95% next-run interval."""
    held, texts = True, []
    a = _next_interval(a)
    for (_, ra), (_, rb) in zip(a.iterrows(), b.iterrows()):
        lo, hi = tables.next_gain_ci(ra)
        g = tables.gain(rb)
        if not all(map(math.isfinite, (lo, hi, g, *tables.gain_ci(rb)))):
            return "no CI in one of the builds", None
        same = str(ra["verdict"]) == str(rb["verdict"])
        held = bool(held and same and lo <= g <= hi)
        texts.append(f"default {ra['verdict']}, next run {fmt.ci(lo, hi)}; aligned {rb['verdict']} {fmt.pct(g)} "
                     f"{fmt.ci(*tables.gain_ci(rb))}")
    return "; ".join(texts), held


def expectations(cmp_default: pd.DataFrame, cmp_aligned: pd.DataFrame | None) -> pd.DataFrame:
    """One row per entry of :data:`EXPECTATIONS`: ``expectation``, ``observed`` and ``held``
    (True/False; None when the arm was not measured or has no CI)."""
    def verdict_row(text: str, arm: str, ok) -> dict:
        rows = _rows(cmp_default, arm)
        if rows.empty:
            return {"expectation": text, "observed": f"no comparison of {arm}", "held": None}
        return {"expectation": text, "observed": _observed(rows),
                "held": bool(all(ok(str(v)) for v in rows["verdict"]))}

    out = [verdict_row(EXPECTATIONS[0], "pad48", lambda v: v in NOT_CALLED),
           verdict_row(EXPECTATIONS[1], "d2", lambda v: v != Verdict.FASTER),
           verdict_row(EXPECTATIONS[2], "d8", lambda v: v == Verdict.SLOWER)]
    a, b = _rows(cmp_default, "d8"), _rows(cmp_aligned, "d8")
    if a.empty or b.empty:
        out.append({"expectation": EXPECTATIONS[3], "held": None,
                    "observed": "no comparison of d8 in " + ("the default build" if a.empty else "the aligned build")})
    else:
        observed, held = _same_call_inside(a, b)
        out.append({"expectation": EXPECTATIONS[3], "observed": observed, "held": held})
    frame = pd.DataFrame(out, columns=["expectation", "observed", "held"])
    frame["held"] = pd.Series([r["held"] for r in out], dtype=object)   # True, False or None
    return frame


def _instruction_rows(build: str, ic: pd.DataFrame, check: CheckPlan) -> list[dict]:
    """One row per arm and ring size: the count, its difference from the base at that size, and
    whether every layout of the arm counted the same (it must: a layout adds no executed code)."""
    sizes = sorted(ic["size"].unique()) if "size" in ic.columns else [None]
    rows = []
    for size in sizes:
        sub = ic if size is None else ic[ic["size"] == size]
        per = sub.groupby(sub["variant"].astype(str))["instructions_per_op"]
        base = per.median().get(BASELINE, math.nan)
        for arm, med in per.median().items():
            spec = check.specs.get(arm)
            rows.append({"build": build, "arm": arm, **({} if size is None else {"size": int(size)}),
                         "instructions/op": round(med, 3), "difference": round(med - base, 3),
                         "difference %": round(100 * (med / base - 1), 2),
                         "expected difference": round(check.expected_extra(spec), 3) if spec else 0.0,
                         "identical in every layout": bool(per.get_group(arm).nunique() == 1)})
    return rows


def instruction_table(runs: dict[str, Path], check: CheckPlan) -> pd.DataFrame:
    """Exact instructions per operation of every arm (callgrind rows of raw.csv), per build
    (``runs``: build label -> run folder), with the extra stated before measuring."""
    rows = []
    for build, run_dir in runs.items():
        df = RunOutput(run_dir).raw
        if "icount_source" not in df.columns or not (df["icount_source"] == "callgrind").any():
            rows.append({"build": build, "arm": "n/a", "note": "no callgrind rows (icount=false or valgrind missing)"})
            continue
        ic = df[(df["icount_source"] == "callgrind") & (df["status"] == "ok")]
        rows += _instruction_rows(build, ic, check)
    return pd.DataFrame(rows)


def forest_rows(cmp_default: pd.DataFrame, cmp_aligned: pd.DataFrame | None, host: str = "",
                expected: dict | None = None, calls: dict | None = None) -> pd.DataFrame:
    """Rows for ``ringlab.report.figures.forest``: every arm's effect on time against base per
    build and ring size, in the + = better sign (an arm that costs time is negative), with its CI
    and next-run interval.  What was stated before measuring is an instruction count and a call,
    not a time: ``expected`` {arm: expected extra instructions in percent} (``CheckPlan.expected()``'s
    "expected extra %") goes to ``instructions_pct`` at minus that, drawn as its own marker, and
    ``calls`` {arm: expected verdict} to ``expected_call``; ``expected_pct`` (an expected time
    effect) stays empty.  Extra instructions need not cost their share of the time: a spin loop's
    iterations cost more than the ring's average instruction, so d8's -7.4% of instructions is no
    time prediction for the -9% its slower call measures."""
    expected, calls = expected or {}, calls or {}
    parts = []
    for build, cmp in (("default", cmp_default), ("aligned", cmp_aligned)):
        if cmp is None or not len(cmp):
            continue
        cols = [c for c in ("size", "mode", "pair_class") if c in cmp.columns and cmp[c].nunique() > 1]
        rows = effect_rows(cmp, host, label_columns=cols)
        rows["instructions_pct"] = [-float(expected[c]) if c in expected else math.nan for c in rows["candidate"]]
        # "no significant difference or inconclusive or ..." (CheckPlan.expected()) reads "not called" in a label
        rows["expected_call"] = [str(calls.get(c, "")).replace(" or ".join(NOT_CALLED), "not called")
                                 for c in rows["candidate"]]
        rows["config"] = [f"{build}: {c} vs {BASELINE}" + (f", {lab}" if lab else "")
                          for c, lab in zip(rows["candidate"],
                                            [" ".join(f"{k}={r[k]}" for k in cols) for _, r in rows.iterrows()])]
        parts.append(rows)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


__all__ = ["ALIGN_CFLAGS", "ARMS", "BASELINE", "CheckPlan", "EXPECTATIONS", "NOT_CALLED", "base_instructions",
           "compare_run", "default_base", "spin_cost", "expectations", "forest_rows", "instruction_table", "plan",
           "rounds", "verdict_table"]
