"""ringtest: the kernel's own ring benchmark (tools/virtio/ringtest), built from a tree.

Each ``tree`` (a kernel tree, a source tarball, ``git:TREE@REV`` or
``debian:linux-source-X.Y``; several as ``NAME=SPEC,NAME2=SPEC2`` for a paired
A/B) is exported and its ringtest copied into ``build/ringtest/`` and built
there with the tree's own Makefile (``ringlab.kernel_tests``).  Each trial is
one run of one program (``rings``), pinned with ringtest's
``--guest-affinity`` (the guest adds buffers: the producer) and
``--host-affinity`` (the host consumes them: the consumer), and timed by
ringlab's wrapper: wall time and the program's CPU time.

raw.csv: ``variant`` is the tree's NAME (the thing compared); parameter columns
``ring`` (the program), ``ring_size``, ``run_cycles``, ``batch``,
``outstanding``, ``param``, ``sleep``, ``relax``; ``ns_per_op`` is wall
nanoseconds per item (``run_cycles`` items per run, ``count``); ``elapsed_ns``
the wall time.  Extra columns: ``cpu_user_s``, ``cpu_sys_s``, ``cpu_util``
(CPU time / wall time: about 2 when both threads spin), ``source_sha256``
(sha256 of the ringtest sources and included headers that were compiled).
ringtest reads no counters: they are NaN with the reason in ``counter_errors``.

The work differs from ringlab's ptr_ring mode 1: ringtest's guest also polls
for completions that the host signals back, so one item is a round trip
through two rings' worth of cache lines.  Compare the two side by side
(notebook 21), not as one number.

Code layouts (``layouts`` K > 1): ringtest's sources are the user's tree, so no pad of unused
code can be put ahead of its functions without editing them.  Its layouts vary function
alignment only: layout k of a tree builds every ring with ``-falign-functions=N``, N drawn
from 1..64 (powers of two) by ``ringlab.build.layouts.layout_spec(seed, TREE NAME, k)``,
added through the validated CFLAGS path (``make --eval=CFLAGS += ...``) in a build folder of
its own (``build/ringtest/<hash>-a<N>/``; ``source_sha256`` stays the sources' hash).  A
trial runs the ring built in the layout pair of its round (``spec.extra["layout"]``,
ringlab.run.plan; raw.csv ``layout``).  Seven alignments exist, so two layouts of one tree
may be the same build.  ``layouts`` 1 is the Makefile's build with no alignment flag.
"""
from __future__ import annotations

import math
import re
from typing import Any

from ringlab import catalog
from ringlab.build.layouts import MAX_LAYOUTS, layout_spec
from ringlab.errors import InputFileError, ParamError, RunnerError
from ringlab.tools import kernel_tests
from ringlab.sources import kernel_tree
from ringlab.experiments.base import Experiment, TrialSpec, last_json_object
from ringlab.experiments.params import Param
from ringlab.build.driver import validate_cflags
from ringlab.digest import sha256_file
from ringlab.schema import COUNTER_EVENTS
from ringlab.system import privilege

#: this experiment's catalog entry (raw.csv columns, bounds)
ENTRY = catalog.experiment("ringtest")
DEFAULT_TREE = "debian:linux-source-6.1"
_PAIR = re.compile(r"^\d+:\d+$")


def _runner_error(msg: str) -> Exception:
    return RunnerError(msg)


def parse_tree_param(text: str) -> list[kernel_tree.TreeSpec]:
    try:
        return kernel_tree.parse_trees(text)
    except kernel_tree.TreeError as e:
        raise ParamError(f"parameter 'tree': {e}; allowed: {kernel_tree.ALLOWED}") from None


class Ringtest(Experiment):
    name = ENTRY.name
    description = "the kernel's tools/virtio/ringtest programs, built from your tree(s), timed per run"
    params = [
        Param("tree", "str", DEFAULT_TREE, "kernel tree(s): a folder, a source tarball, git:TREE@REV, "
              "debian:linux-source-X.Y; A/B as NAME=SPEC,NAME2=SPEC2", column=False),
        Param("rings", "str_list", ["ptr_ring"], "ringtest programs: ptr_ring, virtio_ring_0_9, "
              "virtio_ring_poll, ring, noring (or any other program of the tree's Makefile)"),
        Param("ring_sizes", "int_list", [256], "--ring-size (a power of two)", min=ENTRY.bound("ring_size").low,
              max=ENTRY.bound("ring_size").high,
              column=False),
        Param("run_cycles", "int", 10_000_000, "--run-cycles: items per run", min=ENTRY.bound("run_cycles").low,
              max=ENTRY.bound("run_cycles").high),
        Param("batch", "int", 1, "--batch: buffers added before a kick", min=ENTRY.bound("batch").low,
              max=ENTRY.bound("batch").high),
        Param("outstanding", "int", 0, "--outstanding: most buffers in flight (0: unlimited)",
              min=ENTRY.bound("outstanding").low, max=ENTRY.bound("outstanding").high),
        Param("param", "int", 0, "--param: ring-specific knob (ptr_ring: batch; 0: the ring's default)",
              min=ENTRY.bound("param").low, max=ENTRY.bound("param").high),
        Param("sleep", "bool", False, "--sleep: wait on eventfd instead of polling"),
        Param("relax", "bool", False, "--relax: cpu_relax() while polling"),
        Param("cpus", "str", "auto", "guest:host pairs: auto (one pair per topology class) | none | "
              "explicit GUEST:HOST like 0:1", column=False),
        Param("cflags", "str", "", "extra CFLAGS for the ringtest build (added to the Makefile's), "
              "each shaped -O*, -f*, -m*, -D*, -U*, -g*, -W* or -std=*", column=False),
        Param("make", "str", "make", "make executable", column=False),
        Param("layouts", "int", 1, "code layouts per tree: builds with seeded function alignments "
              "(-falign-functions only: no pad can enter the tree's sources), paired by index and "
              "cycled over the rounds (1: the Makefile's build)", min=1, max=MAX_LAYOUTS, column=False),
    ]
    # 2-CPU VM sizes: a ptr_ring run of 1e7 items takes ~0.25 s here.
    profiles = {
        "smoke": {"run_cycles": 200_000, "trials": 2, "warmup": 1, "timeout": 60.0, "layouts": 2},
        "quick": {"run_cycles": 2_000_000, "trials": 8, "warmup": 1, "layouts": 4},
        "full": {"run_cycles": 10_000_000, "trials": 30, "warmup": 2, "timeout": 300.0, "layouts": 8},
    }
    binaries: list[str] = []
    code_params = ("tree", "make")
    trial_privilege = "wrapper"      # the timing wrapper; it starts the program unprivileged
    extra_columns = list(ENTRY.extra_columns)

    @classmethod
    def check(cls, values: dict[str, Any]) -> None:
        validate_cflags(values["cflags"], "cflags")
        parse_tree_param(values["tree"])
        for r in values["rings"]:
            if not re.fullmatch(r"[A-Za-z0-9_]+", r):
                raise ParamError(f"parameter 'rings': invalid program name {r!r}; allowed: "
                                 + ", ".join(kernel_tests.KNOWN_PROGRAMS))
        for s in values["ring_sizes"]:
            if s & (s - 1):
                raise ParamError(f"parameter 'ring_sizes': {s} is not a power of two; allowed: 1, 2, 4, ... "
                                 "(ringtest asserts it)")
        cpus = values["cpus"].replace(" ", "")
        if cpus not in ("auto", "none") and not all(_PAIR.match(p) for p in cpus.split(",") if p) or not cpus:
            raise ParamError(f"parameter 'cpus': bad value {values['cpus']!r}; allowed: auto, none, "
                             "or GUEST:HOST pairs like 0:1")
        values["cpus"] = cpus

    # -- availability ---------------------------------------------------------------------
    def unavailable(self, values: dict[str, Any], ctx: Any = None) -> str | None:
        reasons = [f"tree {t.name!r}: {why}" for t in parse_tree_param(values["tree"])
                   if (why := t.unavailable())]
        return "; ".join(reasons) or None

    # -- planning ---------------------------------------------------------------------------
    def _pairs(self, values, ctx) -> list[tuple[int, int, str]]:
        spec = values["cpus"]
        if spec == "none":
            return [(-1, -1, "unpinned")]
        pairs = [(int(a), int(b), c) for a, b, c in ctx.select_pairs(spec)]
        if spec == "auto":
            # two polling threads on one CPU progress only when the scheduler preempts
            # one; with --sleep they block on eventfd instead, so same-cpu is fine
            if not values["sleep"]:
                pairs = [p for p in pairs if p[2] != "same-cpu"]
            if not pairs:
                ctx.warn("ringtest: only one CPU online, so trials run unpinned")
                pairs = [(-1, -1, "unpinned")]
        return pairs

    @staticmethod
    def layout_aligns(values: dict[str, Any], tree: str) -> list[int]:
        """The ``-falign-functions`` of each layout of ``tree`` ([0]: no flag, when ``layouts`` is 1)."""
        k = int(values.get("layouts", 1) or 1)
        return [0] if k == 1 else [layout_spec(values["seed"], tree, i).align for i in range(k)]

    def layout_builds(self, values: dict[str, Any]) -> dict[tuple[str, str], list[tuple[str, str, int]]]:
        """Build every (tree, ring) in each layout: {(tree name, ring): [(binary, source_sha256,
        align) per layout]}.  Raises (before any trial) naming the program and tree that is
        missing or fails."""
        out: dict[tuple[str, str], list[tuple[str, str, int]]] = {}
        for t in parse_tree_param(values["tree"]):
            done: dict[int, dict[str, tuple[str, str, int]]] = {}
            try:
                for align in self.layout_aligns(values, t.name):
                    if align not in done:
                        prep = kernel_tests.prepare(t, values["cflags"], align=align)
                        done[align] = {ring: (str(kernel_tests.build(prep, ring, make=values["make"],
                                                                     cflags=values["cflags"])),
                                              prep.source_sha256, align) for ring in values["rings"]}
                    for ring in values["rings"]:
                        out.setdefault((t.name, ring), []).append(done[align][ring])
            except kernel_tests.RingtestError as e:
                if "failed to build" in str(e):   # the tree's code did not compile: a failed build
                    raise _runner_error(f"ringtest: {e}") from None
                raise InputFileError(f"parameter 'tree': ringtest: {e}") from None
        return out

    def builds(self, values: dict[str, Any]) -> dict[tuple[str, str], tuple[str, str]]:
        """{(tree name, ring): (binary, source_sha256)} of layout 0 (see :meth:`layout_builds`)."""
        return {k: v[0][:2] for k, v in self.layout_builds(values).items()}

    def plan(self, values: dict[str, Any], ctx: Any) -> list[TrialSpec]:
        trees = parse_tree_param(values["tree"])
        for t in trees:
            # a Debian source package not installed is this machine's to fix (the run is skipped);
            # a folder, tarball or git tree that is not there is a bad parameter, refused before
            # the run folder exists
            if t.kind != "debian" and (why := t.unavailable()) and "does not exist" in why:
                raise ParamError(f"parameter 'tree': tree {t.name!r}: {why}; allowed: {kernel_tree.ALLOWED}")
        built = {} if self.unavailable(values, ctx) else self.layout_builds(values)
        self._built = built
        pairs = self._pairs(values, ctx)
        n = values["warmup"] + values["trials"]
        specs = []
        for t in trees:
            for ring in values["rings"]:
                lays = built.get((t.name, ring)) or [("", "", 0)]
                extra = {"binary": lays[0][0], "source_sha256": lays[0][1], "binaries": [b for b, _, _ in lays]}
                for size in values["ring_sizes"]:
                    for g, h, cls in pairs:
                        config = {"variant": t.name, "ring": ring, "ring_size": size,
                                  "run_cycles": values["run_cycles"], "batch": values["batch"],
                                  "outstanding": values["outstanding"], "param": values["param"],
                                  "sleep": values["sleep"], "relax": values["relax"]}
                        for k in range(n):
                            specs.append(TrialSpec(config=dict(config), trial=k, warmup=k < values["warmup"],
                                                   cpus=(g, h), pair_class=cls,
                                                   extra=dict(extra)))
        return specs

    def build_info(self, values: dict[str, Any]) -> dict[str, Any]:
        """Each (tree, ring) binary with its sha256 and the source_sha256 of the ringtest sources
        and headers it was compiled from, for env.json's ``build`` (``ringlab provenance``)."""
        built = getattr(self, "_built", None)
        if built is None:
            built = {} if self.unavailable(values) else self.layout_builds(values)
        bins = {}
        for (tree, ring), lays in built.items():
            for binary, source_sha, align in lays:
                try:
                    digest = sha256_file(binary)
                except OSError:
                    continue
                name = f"ringtest-{tree}-{ring}" + (f"@a{align}" if align else "")
                bins[name] = {"name": name, "path": str(binary), "sha256": digest, "source_sha256": source_sha,
                              "tree": tree, "ring": ring,
                              **({"layout": {"align": align, "flags": [f"-falign-functions={align}"]}}
                                 if align else {})}
        return {"binaries": bins} if bins else {}

    @staticmethod
    def trial_binary(spec: TrialSpec) -> str:
        """The ring program of this trial: its tree's build in the layout of its round."""
        lays = spec.extra.get("binaries") or [spec.extra["binary"]]
        return lays[int(spec.extra.get("layout", 0))]

    def command(self, spec: TrialSpec, ctx: Any) -> list[str]:
        c = spec.config
        g, h = spec.cpus
        prog = kernel_tests.ringtest_argv(self.trial_binary(spec), ring_size=c["ring_size"],
                                          run_cycles=c["run_cycles"], batch=c["batch"],
                                          outstanding=c["outstanding"], param=c["param"], sleep=c["sleep"],
                                          relax=c["relax"], host_cpu=h, guest_cpu=g)
        # the timing wrapper is ringlab's own; the ringtest program runs as the unprivileged user
        return kernel_tests.time_argv(c["run_cycles"], privilege.wrap(prog))

    def measured_binary(self, spec: TrialSpec, argv: list[str], ctx: Any) -> str:
        return self.trial_binary(spec)

    def parse(self, spec: TrialSpec, stdout: str, stderr: str, ctx: Any) -> list[dict[str, Any]]:
        doc = last_json_object(stdout)
        if not isinstance(doc, dict) or doc.get("binary") != "ringtest" or not doc.get("wall_ns"):
            raise ValueError(f"no ringtest timing JSON in the wrapper's output: {(stdout or '')[-200:]!r}")
        wall, items = float(doc["wall_ns"]), int(doc["items"])
        cpu = (doc["cpu_user_ns"] + doc["cpu_sys_ns"]) / 1e9
        nan = math.nan
        row: dict[str, Any] = {
            "iteration": 0, "ns_per_op": wall / items, "elapsed_ns": wall, "ns_producer": nan,
            "ns_consumer": nan, "count": items,
            "cpu_producer_start": -1, "cpu_producer_end": -1, "cpu_consumer_start": -1, "cpu_consumer_end": -1,
            "counters_multiplexed": False,
            "counter_errors": "all: ringtest is timed from outside; no counters read",
            "ctx_voluntary": doc.get("ctx_voluntary"), "ctx_involuntary": doc.get("ctx_involuntary"),
            "cpu_user_s": doc["cpu_user_ns"] / 1e9, "cpu_sys_s": doc["cpu_sys_ns"] / 1e9,
            "cpu_util": cpu / (wall / 1e9) if wall > 0 else nan,
            "source_sha256": spec.extra.get("source_sha256", ""),
        }
        for ev in COUNTER_EVENTS:
            row[ev] = nan
        return [row]
