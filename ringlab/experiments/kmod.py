"""kmod: in-kernel test modules such as seed 002's page_frag_test.ko, one insmod per trial.

Each trial runs ``python -m ringlab.tools.kmod trial`` (``ringlab.tools.kmod``): insmod the
module with ``args`` and the placement's push/pop CPUs, read the result line
that the module's init wrote to the kernel log after the trial started, rmmod.
The module is unloaded on every way out (normal end, insmod failure, SIGINT,
SIGTERM, the runner's timeout kill), and a module left loaded after a crash
shows in ``ringlab env``.

Parameters:

* ``module``  a .ko path, ``NAME=PATH.ko,NAME2=PATH2.ko`` for a paired A/B
              (e.g. before/after a patch set), or a module NAME found below
              ``tree`` (``tree/**/NAME.ko``)
* ``args``    module parameters in seed 002's form, ``key=value`` separated by
              spaces or commas (``test_alloc_len=12 nr_test=51200000``)
* ``cpus``    where the push and pop threads run: ``auto`` (the same CPU, as
              in the seed's second test, and one pair per topology class),
              ``none`` (the module's defaults), or ``PUSH:POP`` pairs; they are
              passed as ``push_arg``/``pop_arg`` (``test_push_cpu``/``test_pop_cpu``).
              Giving both in ``args`` instead (as the seed's command line does)
              makes them the placement.

Before any trial the run is refused, with every reason, when the process is not
root, module loading is disabled or absent, or a module was built for another
kernel (vermagic).

raw.csv: ``variant`` is the module NAME; parameter column ``args`` (without the
push/pop CPUs, which are ``cpu_req_producer``/``cpu_req_consumer``);
``ns_per_op`` = the module's time / its iteration count (ns per item),
``elapsed_us`` the module's own figure, ``count`` its iterations; extra columns
``kmod_label`` (aligned / non-aligned), ``insmod_exit`` (a test module may fail
its init on purpose so that it unloads itself) and ``insmod_wall_s``.
``binary_sha256`` is the module file's.  No counters are read in the kernel:
they are NaN with the reason.  ``perf stat -r N insmod ...`` text goes through
``ringlab import-perf --kmod`` instead (``ringlab.tools.kmod_perf``).
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from ringlab.paths import expand_user
from ringlab import catalog, rundir, schema
from ringlab.errors import DataError, InputFileError, ParamError, RunnerError
from ringlab.names import check_name
from ringlab.tools import kmod
from ringlab.system import modules
from ringlab.experiments.base import Experiment, TrialSpec, last_json_object
from ringlab.experiments.params import Param

#: this experiment's catalog entry (raw.csv columns)
ENTRY = catalog.experiment("kmod")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PAIR = re.compile(r"^\d+:\d+$")


def _runner_error(msg: str) -> Exception:
    return RunnerError(msg)


def parse_args(text: str) -> list[tuple[str, str]]:
    """``"a=1 b=2,c=x"`` -> [("a", "1"), ("b", "2"), ("c", "x")]; ParamError naming 'args'."""
    out: list[tuple[str, str]] = []
    for tok in re.split(r"[\s,]+", str(text or "").strip()):
        if not tok:
            continue
        key, sep, val = tok.partition("=")
        if not sep or not _KEY.match(key) or val == "":
            raise ParamError(f"parameter 'args': bad item {tok!r}; allowed: key=value items separated by "
                             "spaces or commas, e.g. 'test_alloc_len=12 nr_test=51200000'")
        if key in dict(out):
            raise ParamError(f"parameter 'args': {key} given twice; allowed: each key once")
        out.append((key, val))
    return out


def parse_modules(text: str, tree: str = "") -> dict[str, str]:
    """``module`` -> {variant NAME: .ko path}.  A bare NAME is looked up below ``tree``."""
    text = str(text or "").strip()
    if not text:
        raise ParamError("parameter 'module': required; allowed: a .ko path, NAME=PATH.ko[,NAME2=PATH2.ko], "
                         "or a module name together with -p tree KERNEL_TREE")
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, path = part.partition("=")
        if not sep:
            name, path = "", part
        if name:
            check_name(name, "parameter 'module': NAME")
        if "/" not in path and not path.endswith(".ko"):
            if not tree:
                raise ParamError(f"parameter 'module': {path!r} is a module name, so 'tree' must name the kernel "
                                 "tree it was built in; allowed: a .ko path, or a name with -p tree TREE")
            found = kmod.find_module(tree, path)
            if found is None:
                raise ParamError(f"parameter 'module': no {path}.ko below {tree} (build it first, e.g. "
                                 f"make -C {tree} M=<its folder>); allowed: a .ko path, or a built module's name")
            path = str(found)
        p = expand_user(path)
        name = name or kmod.module_name(p)
        if name in out:
            raise ParamError(f"parameter 'module': NAME {name!r} given twice; allowed: distinct NAMEs")
        out[name] = str(p.resolve() if p.exists() else p)
    return out


def _check_module_file(p: Path) -> None:
    """InputFileError (exit 2) when ``p`` is not a kernel module file: missing, a directory,
    not named .ko or not an ELF object."""
    allowed = "allowed: a built kernel module file (NAME.ko)"
    if p.is_dir():
        raise InputFileError(f"parameter 'module': {p} is a directory; {allowed}")
    if not p.exists():
        raise InputFileError(f"parameter 'module': module file {p} does not exist; {allowed}")
    if not p.is_file() or p.suffix != ".ko":
        raise InputFileError(f"parameter 'module': {p} is not a .ko file; {allowed}")
    try:
        with open(p, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise InputFileError(f"parameter 'module': cannot read {p} ({e.strerror}); {allowed}") from None
    if magic != b"\x7fELF":
        raise InputFileError(f"parameter 'module': {p} is not an ELF object (not a kernel module); {allowed}")


class Kmod(Experiment):
    name = ENTRY.name
    description = "in-kernel test modules (page_frag_test.ko ...): insmod per trial, result from the kernel log"
    params = [
        Param("module", "str", "", "a .ko path, NAME=PATH.ko[,NAME2=PATH2.ko], or a module name with tree",
              column=False),
        Param("tree", "str", "", "kernel tree in which to find a module given by name (tree/**/NAME.ko)",
              column=False),
        Param("args", "str", "", "module parameters, seed 002's form: 'test_alloc_len=12 nr_test=51200000'"),
        Param("cpus", "str", "auto", "push:pop placement: auto (same CPU + one pair per topology class) | "
              "none (module defaults) | PUSH:POP pairs like 16:17,0:0", column=False),
        Param("push_arg", "str", "test_push_cpu", "module parameter that takes the push CPU", column=False),
        Param("pop_arg", "str", "test_pop_cpu", "module parameter that takes the pop CPU", column=False),
        Param("pattern", "str", kmod.DEFAULT_PATTERN, "regex of the result line; named groups us (required), "
              "items, label", column=False),
    ]
    profiles = {
        "smoke": {"trials": 2, "warmup": 0, "timeout": 60.0},
        "quick": {"trials": 10, "warmup": 1, "timeout": 300.0},
        # the seed ran perf stat -r 200; raise -p trials on a quiet machine
        "full": {"trials": 30, "warmup": 2, "timeout": 600.0},
    }
    binaries: list[str] = []
    code_params = ("module", "tree")
    trial_privilege = "root"      # insmod/rmmod need root; the module's code runs in the kernel
    extra_columns = list(ENTRY.extra_columns)

    @classmethod
    def check(cls, values: dict[str, Any]) -> None:
        parse_modules(values["module"], values["tree"])
        args = parse_args(values["args"])
        for k in ("push_arg", "pop_arg"):
            if not _KEY.match(values[k]):
                raise ParamError(f"parameter '{k}': {values[k]!r} is not a module parameter name; "
                                 "allowed: [A-Za-z_][A-Za-z0-9_]*")
        try:
            rx = re.compile(values["pattern"])
        except re.error as e:
            raise ParamError(f"parameter 'pattern': not a regular expression ({e}); allowed: a Python regex "
                             "with a named group us") from None
        if "us" not in rx.groupindex:
            raise ParamError("parameter 'pattern': no named group (?P<us>...) for the time in microseconds; "
                             "allowed: a Python regex with a named group us (items and label optional)")
        keys = dict(args)
        push, pop = values["push_arg"], values["pop_arg"]
        cpus = values["cpus"].replace(" ", "")
        given = [k for k in (push, pop) if k in keys]
        if given:
            if len(given) == 1:
                raise ParamError(f"parameter 'args': sets {given[0]} but not "
                                 f"{pop if given[0] == push else push}; allowed: both (the placement) or neither "
                                 "(then cpus places them)")
            if cpus != "auto":
                raise ParamError(f"parameter 'args': sets {push}/{pop} and 'cpus' is {cpus!r}; allowed: the "
                                 "placement in one of them")
            if not (keys[push].isdigit() and keys[pop].isdigit()):
                raise ParamError(f"parameter 'args': {push}/{pop} must be CPU numbers; got "
                                 f"{keys[push]!r}/{keys[pop]!r}")
            cpus = f"{keys[push]}:{keys[pop]}"
            args = [(k, v) for k, v in args if k not in (push, pop)]
        if cpus not in ("auto", "none") and (not cpus or not all(_PAIR.match(p) for p in cpus.split(","))):
            raise ParamError(f"parameter 'cpus': bad value {values['cpus']!r}; allowed: auto, none, or PUSH:POP "
                             "pairs like 16:17,0:0")
        values["cpus"] = cpus
        values["args"] = " ".join(f"{k}={v}" for k, v in args)

    # -- refusal, planning ---------------------------------------------------------------------
    def refusal(self, values: dict[str, Any]) -> list[str]:
        return modules.refusal_reasons(list(parse_modules(values["module"], values["tree"]).values()))

    def plan(self, values: dict[str, Any], ctx: Any) -> list[TrialSpec]:
        for path in parse_modules(values["module"], values["tree"]).values():
            _check_module_file(Path(path))
        reasons = self.refusal(values)
        if reasons:
            raise _runner_error("kmod: refusing to load modules: " + "; ".join(reasons))
        modules = parse_modules(values["module"], values["tree"])
        if values["cpus"] == "none":
            pairs = [(-1, -1, "unpinned")]
        else:
            pairs = [(int(a), int(b), c) for a, b, c in ctx.select_pairs(values["cpus"])]
        n = values["warmup"] + values["trials"]
        specs = []
        for name, path in modules.items():
            for p, c, cls in pairs:
                config = {"variant": name, "args": values["args"]}
                for k in range(n):
                    specs.append(TrialSpec(config=dict(config), trial=k, warmup=k < values["warmup"],
                                           cpus=(p, c), pair_class=cls, extra={"path": path}))
        return specs

    def command(self, spec: TrialSpec, ctx: Any) -> list[str]:
        v = ctx.values
        args = [f"{k}={val}" for k, val in parse_args(spec.config["args"])]
        p, c = spec.cpus
        if p >= 0 and c >= 0:
            args += [f"{v['push_arg']}={p}", f"{v['pop_arg']}={c}"]
        out_dir = getattr(ctx, "out_dir", None)
        log = str(Path(out_dir) / "kmod-unload.log") if out_dir else None
        return kmod.trial_argv(spec.extra["path"], args, pattern=v["pattern"], log=log)

    def measured_binary(self, spec: TrialSpec, argv: list[str], ctx: Any) -> str:
        return spec.extra["path"]

    def cleanup(self, spec: TrialSpec, ctx: Any) -> None:
        """After a timeout or an interrupt: unload the module now, not when its guardian gets to it,
        so the next trial (or the next run) does not find it loaded."""
        name = kmod.module_name(spec.extra["path"])
        ok, why = kmod.rmmod(name)
        out_dir = getattr(ctx, "out_dir", None)
        if out_dir:
            try:
                rundir.append_line(out_dir, "kmod-unload.log",
                                   f"{kmod.utc_now()} runner: {name} {'unloaded' if ok else 'NOT unloaded: ' + why} "
                                   f"after trial {spec.trial} ended early")
            except (OSError, DataError):
                pass
        if not ok:
            ctx.warn(f"kmod: {name} still loaded after a trial ended early ({why}); its guardian keeps "
                     f"trying, or rmmod {name}")

    def parse(self, spec: TrialSpec, stdout: str, stderr: str, ctx: Any) -> list[dict[str, Any]]:
        doc = last_json_object(stdout)
        if not isinstance(doc, dict) or doc.get("binary") != "kmod" or not doc.get("results"):
            raise ValueError(f"no kmod result JSON in the trial's output: {(stdout or '')[-200:]!r}")
        rows = []
        for i, r in enumerate(doc["results"]):
            us = float(r["us"])
            items = r.get("items")
            row: dict[str, Any] = {
                "iteration": i, "elapsed_us": us, "elapsed_ns": us * 1e3,
                "ns_per_op": us * 1e3 / items if items else math.nan, "count": items,
                "ns_producer": math.nan, "ns_consumer": math.nan,
                "cpu_producer_start": -1, "cpu_producer_end": -1, "cpu_consumer_start": -1,
                "cpu_consumer_end": -1, "kmod_label": r.get("label", ""),
                "insmod_exit": doc.get("insmod_exit"), "insmod_wall_s": (doc.get("insmod_ns") or math.nan) / 1e9,
                "counters_multiplexed": False,
                "counter_errors": "all: the test runs in the kernel; no counters read (perf stat -r N insmod "
                                  "... output goes through ringlab import-perf --kmod)",
            }
            for ev in schema.COUNTER_EVENTS:
                row[ev] = math.nan
            rows.append(row)
        return rows
