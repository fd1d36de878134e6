"""The kernel's own ring test, ``tools/virtio/ringtest``: find, build out of tree, time.

ringtest (Michael S. Tsirkin's ring layout benchmark) is a set of programs, one
per ring layout (``ptr_ring``, ``virtio_ring_0_9``, ``virtio_ring_poll``,
``ring``, ``noring``, ...), all linked with the same ``main.c``.  A "guest"
thread adds buffers and polls for their completion, a "host" thread consumes
them and signals completion; ``--run-cycles`` buffers pass through the ring.
The programs print nothing: they are meant to be timed from outside.

* ``prepare(tree)`` exports the tree (``ringlab.kernel_tree``), copies
  ``tools/virtio/ringtest`` and every file its sources include by a relative
  path (``ptr_ring.c`` includes ``../../../include/linux/ptr_ring.h``) into
  ``build/ringtest/<hash>/`` with the same layout, so the tree's own
  Makefile builds there, unchanged, and the user's tree is never written.  The
  folder is named by the sha256 of the copied sources (and CFLAGS), which is
  also recorded per trial (``source_sha256``): equal hashes mean the two sides
  of an A/B compiled the same code.  ``prepare(tree, cflags, align=N)`` copies into
  ``build/ringtest/<hash>-a<N>/`` instead, where ``build`` adds ``-falign-functions=N``
  (a code layout, ringlab.build.layouts): the folder differs, ``source_sha256`` does
  not, since the alignment moves code and changes none of it.
* ``build(prepared, program)`` runs ``make -C DIR PROGRAM``.  A program the
  Makefile does not know, or one that fails to build, is reported by name.
  The user's CFLAGS (checked by ``ringlab.build.driver.validate_cflags``: no ``$``,
  backquote or shell metacharacter) reach make as one argv element, never
  through the environment.
* ``python -m ringlab.kernel_tests time --items N -- PROGRAM ARGS...`` is the
  trial wrapper: it starts the program, waits for it with ``wait4`` and prints
  one JSON line with the wall time (``perf_counter_ns`` around start and reap,
  so process start-up and ring allocation are included: ~1 ms against the
  0.1-1 s of a trial) and the program's user and system CPU time.  The wrapper
  exits with the program's status (128+N for a signal), so a crashed ringtest
  is recorded as a crash.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import click

from ringlab import paths
from ringlab.errors import RunnerError
from ringlab.sources import kernel_tree
from ringlab.system import privilege
from ringlab.tools.argv import python_module, run_command
from ringlab.build.driver import validate_cflags

RINGTEST_DIR = "tools/virtio/ringtest"
#: What is exported from a tarball or git revision: ringtest and the header it includes.
EXPORT_PREFIXES = ("tools/virtio", "include/linux/ptr_ring.h")
#: The programs of tools/virtio/ringtest/Makefile in v4.8 .. v6.x (a tree may have more).
KNOWN_PROGRAMS = ("ptr_ring", "virtio_ring_0_9", "virtio_ring_poll", "ring", "noring")
_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
_RULE_RE = re.compile(r"^([A-Za-z0-9_]+)[ \t]*:(?!=)[ \t]*(.*)$", re.M)
MAKE_TIMEOUT_S = 600


class RingtestError(RunnerError):
    """ringtest cannot be prepared or built.  The message names the tree and the program."""


@dataclass
class Prepared:
    """A tree's ringtest copied into its own build folder."""
    tree: kernel_tree.TreeSpec
    source_root: Path          # the exported / given tree
    provenance: str            # where the sources came from (dir, tarball, git commit)
    build_root: Path           # build/ringtest/<hash>/ (mirrors the tree's layout)
    source_sha256: str
    programs: list[str] = field(default_factory=list)
    align: int = 0             # -falign-functions of this build folder (0: the compiler's default)

    def align_flags(self) -> list[str]:
        """The code layout's compiler options (none for align 0)."""
        return [f"-falign-functions={self.align}"] if self.align else []

    @property
    def ringtest_dir(self) -> Path:
        return self.build_root / RINGTEST_DIR


def list_programs(ringtest_dir: Path) -> list[str]:
    """Programs the Makefile links (rules ``NAME: ... main.o``), in Makefile order."""
    try:
        text = (Path(ringtest_dir) / "Makefile").read_text(errors="replace")
    except OSError:
        return []
    out = []
    for name, deps in _RULE_RE.findall(text):
        if "main.o" in deps.split() and name not in out:
            out.append(name)
    return out


def _included_files(ringtest: Path, root: Path) -> tuple[list[Path], list[str]]:
    """Files (relative to root) ringtest needs: its own folder plus relative includes outside it.

    Returns (files, missing) where missing names includes that do not exist in the tree."""
    files: list[Path] = []
    missing: list[str] = []
    seen: set[Path] = set()
    todo = sorted(p for p in ringtest.iterdir() if p.is_file())
    for p in todo:
        seen.add(p.resolve())
        files.append(p.relative_to(root))
    queue = [p for p in todo if p.suffix in (".c", ".h")]
    root_r = root.resolve()
    while queue:
        src = queue.pop(0)
        try:
            text = src.read_text(errors="replace")
        except OSError:
            continue
        for inc in _INCLUDE_RE.findall(text):
            cand = (src.parent / inc)
            if not cand.exists():
                # "main.h"-style includes are found next to the file; others may be system headers
                if inc.startswith(".."):
                    missing.append(f"{inc} (included by {src.relative_to(root)})")
                continue
            r = cand.resolve()
            if r in seen:
                continue
            try:
                rel = r.relative_to(root_r)
            except ValueError:
                missing.append(f"{inc} (outside the tree, included by {src.relative_to(root)})")
                continue
            seen.add(r)
            files.append(rel)
            queue.append(root / rel)
    return files, missing


def _hash_files(root: Path, files: list[Path], cflags: str) -> str:
    h = hashlib.sha256()
    for rel in sorted(files, key=str):
        h.update(str(rel).encode() + b"\0")
        h.update((root / rel).read_bytes())
        h.update(b"\0")
    h.update(b"CFLAGS\0" + cflags.encode())
    return h.hexdigest()


@contextlib.contextmanager
def _locked(folder: Path):
    """Exclusive lock on a build folder: parallel test workers or runs never copy or make at once."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".ringlab-lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def prepare(tree: kernel_tree.TreeSpec, cflags: str = "", align: int = 0) -> Prepared:
    """Export the tree and copy its ringtest (and includes) into build/ringtest/: one folder per
    source set, CFLAGS and function alignment ``align`` (0, or a power of two up to 4096)."""
    if not isinstance(align, int) or align < 0 or align > 4096 or align & (align - 1):
        raise ValueError(f"align {align!r}: allowed: 0 or a power of two up to 4096")
    try:
        root, prov = kernel_tree.export(tree, EXPORT_PREFIXES)
    except kernel_tree.TreeError as e:
        raise RingtestError(str(e)) from None
    rt = root / RINGTEST_DIR
    if not (rt / "Makefile").is_file():
        raise RingtestError(f"tree {tree.name!r}: no {RINGTEST_DIR}/Makefile under {root} "
                            "(ringtest appeared in Linux 4.8)")
    files, missing = _included_files(rt, root)
    if missing:
        raise RingtestError(f"tree {tree.name!r}: ringtest includes files the tree lacks: {'; '.join(missing)}")
    sha = _hash_files(root, files, cflags)
    # Named by the sources' hash alone: two trees (or revisions) with the same ringtest
    # sources build in the same folder, to the same bytes, and provenance says so.
    dest = paths.build_dir() / "ringtest" / (sha[:16] + (f"-a{align}" if align else ""))
    stamp = dest / ".ringlab-sources"
    with _locked(dest):
        if not stamp.is_file():
            for rel in files:
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / rel, dest / rel)   # keeps mtimes: make rebuilds only what changed
            stamp.write_text(f"{prov}\nsha256 {sha}\n")
    return Prepared(tree, root, prov, dest, sha, list_programs(dest / RINGTEST_DIR), align)


def build(prep: Prepared, program: str, make: str = "make", cflags: str = "",
          timeout: float = MAKE_TIMEOUT_S) -> Path:
    """``make -C build/ringtest/.../tools/virtio/ringtest PROGRAM``; the binary's path.

    ``cflags`` must pass ``ringlab.build.driver.validate_cflags`` (ParamError otherwise): only
    compiler options of the allowed shapes, with no ``$``, backquote, quote, ``#`` or shell
    metacharacter, so neither make (``$(shell ...)``) nor the recipe's shell (``;``) can
    run anything from them.  They reach make as the single argv element
    ``--eval=CFLAGS += OPTIONS``: read before the Makefile, so the Makefile's own
    ``CFLAGS +=`` still applies after them (a ``CFLAGS=OPTIONS`` argument would replace
    it).  CFLAGS from ringlab's environment is not passed on.  The folder's function
    alignment (``prepare(..., align=N)``) is added last, through the same argument."""
    words = validate_cflags(cflags, "cflags") + validate_cflags(prep.align_flags(), "layouts")
    if program not in prep.programs:
        raise RingtestError(f"ringtest program {program!r} not found in tree {prep.tree.name!r} "
                            f"({prep.source_root / RINGTEST_DIR}/Makefile); it has: "
                            + (", ".join(prep.programs) or "none"))
    env = dict(os.environ)
    for k in ("MAKEFLAGS", "MFLAGS", "MAKEFILES", "CFLAGS"):
        env.pop(k, None)
    argv = [make, "-C", str(prep.ringtest_dir)]
    if words:
        argv.append("--eval=CFLAGS += " + " ".join(words))
    argv.append(program)
    log = prep.ringtest_dir / f".make-{program}.log"
    try:
        with _locked(prep.build_root):
            if privilege.dropping():
                r, argv = _make_unprivileged(prep, program, argv, env, timeout)
            else:
                r = subprocess.run(argv, capture_output=True, text=True, errors="replace", env=env,
                                   timeout=timeout)
    except FileNotFoundError:
        raise RingtestError(f"ringtest program {program!r} of tree {prep.tree.name!r}: "
                            f"'{make}' not found (install make)") from None
    except subprocess.TimeoutExpired:
        raise RingtestError(f"ringtest program {program!r} of tree {prep.tree.name!r}: "
                            f"make did not finish within {timeout:g} s") from None
    log.write_text(f"$ {' '.join(argv)}\n{r.stdout}\n{r.stderr}")
    binary = prep.ringtest_dir / program
    if r.returncode != 0 or not os.access(binary, os.X_OK):
        raise RingtestError(f"ringtest program {program!r} of tree {prep.tree.name!r} failed to build "
                            f"(make exit {r.returncode}): {_first_error(r.stderr or r.stdout)} "
                            f"[full log: {log}]")
    return binary


def _make_unprivileged(prep: Prepared, program: str, argv: list[str], env: dict, timeout: float):
    """Under root: ``make`` as the unprivileged user, in a fresh copy of the build folder that the
    user owns; the root parent copies the program out (links not followed).  The tree's Makefile
    and sources are code from elsewhere: they never run as root."""
    with privilege.workdir(f"ringtest-{program}") as work:
        tree = work / "tree"
        shutil.copytree(prep.build_root, tree, symlinks=True,
                        ignore=shutil.ignore_patterns(".ringlab-lock", ".make-*.log"))
        for dirpath, dirnames, filenames in os.walk(tree):
            for n in [*dirnames, *filenames]:
                privilege.give(Path(dirpath) / n)
        privilege.give(tree)
        rdir = tree / RINGTEST_DIR
        argv = [argv[0], "-C", str(rdir), *argv[3:]]
        r = subprocess.run(privilege.wrap(argv), capture_output=True, text=True, errors="replace",
                           env=privilege.env(env, home=work), cwd=str(work), timeout=timeout)
        built = rdir / program
        if r.returncode == 0:
            try:
                privilege.copy_out(built, prep.ringtest_dir / program)
            except (OSError, privilege.PrivilegeError) as e:
                r = subprocess.CompletedProcess(argv, 1, r.stdout, f"{r.stderr}\nerror: {program}: {e}")
    return r, argv


def _first_error(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    for ln in lines:
        if re.search(r"\b(fatal )?error\b", ln, re.I):
            return ln
    return lines[-1] if lines else "(no output)"


# -- options -----------------------------------------------------------------------------
def ringtest_argv(binary, *, ring_size: int, run_cycles: int, batch: int = 1, outstanding: int = 0,
                  param: int = 0, sleep: bool = False, relax: bool = False,
                  host_cpu: int = -1, guest_cpu: int = -1) -> list[str]:
    """ringtest's long options (main.c): 0 for outstanding/param means "the program's default"."""
    argv = [str(binary), "--ring-size", str(ring_size), "--run-cycles", str(run_cycles),
            "--batch", str(batch)]
    if outstanding:
        argv += ["--outstanding", str(outstanding)]
    if param:
        argv += ["--param", str(param)]
    if sleep:
        argv.append("--sleep")
    if relax:
        argv.append("--relax")
    if host_cpu >= 0:
        argv += ["--host-affinity", str(host_cpu)]
    if guest_cpu >= 0:
        argv += ["--guest-affinity", str(guest_cpu)]
    return argv


# -- the timing wrapper ------------------------------------------------------------------
def time_argv(items: int, program_argv: list[str]) -> list[str]:
    return [*python_module("ringlab.tools.kernel_tests"), "time", "--items", str(int(items)), "--",
            *map(str, program_argv)]


def _time(items: int, argv: list[str]) -> int:
    child = {"pid": None}

    def forward(signum, frame):
        if child["pid"]:
            try:
                os.kill(child["pid"], signum)
            except ProcessLookupError:
                pass
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, forward)
    t0 = time.perf_counter_ns()
    try:
        # the program's stdout goes to our stderr: our stdout carries only the JSON line
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno())
    except OSError as e:
        print(f"ringlab.kernel_tests: cannot run {argv[0]!r}: {e}", file=sys.stderr)
        return 127
    child["pid"] = proc.pid
    while True:
        try:
            _, status, ru = os.wait4(proc.pid, 0)
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries already
            continue
    t1 = time.perf_counter_ns()
    proc.returncode = os.waitstatus_to_exitcode(status)
    code = proc.returncode
    if code != 0:
        what = f"killed by signal {-code}" if code < 0 else f"exit {code}"
        print(f"ringlab.kernel_tests: {os.path.basename(privilege.strip(argv)[0])} {what}", file=sys.stderr)
        return 128 - code if code < 0 else code
    print(json.dumps({"schema": 1, "binary": "ringtest", "program": os.path.basename(privilege.strip(argv)[0]),
                      "items": items, "wall_ns": t1 - t0,
                      "cpu_user_ns": int(ru.ru_utime * 1e9), "cpu_sys_ns": int(ru.ru_stime * 1e9),
                      "ctx_voluntary": ru.ru_nvcsw, "ctx_involuntary": ru.ru_nivcsw,
                      "max_rss_kb": ru.ru_maxrss}), flush=True)
    return 0


@click.group(help="time one run of a ringtest program (wall and CPU time, JSON)",
             context_settings={"help_option_names": ["-h", "--help"]})
def command() -> None:
    pass


@command.command("time", help="run the command after --, print wall/CPU time as JSON",
                 options_metavar="[OPTIONS] -- CMD ...")
@click.option("--items", type=int, required=True, help="items the run passes (ns/item = wall / items)")
@click.pass_obj
def _time_command(cmd: list[str], items: int) -> int:
    if not cmd:
        raise click.UsageError("a command after -- is required")
    return _time(items, cmd)


def main(argv: list[str] | None = None) -> int:
    """``python -m ringlab.tools.kernel_tests time --items N -- CMD ...``"""
    return run_command(command, argv, "python -m ringlab.kernel_tests")


if __name__ == "__main__":
    sys.exit(main())
