"""Data never becomes code: compiler flags, make variables and resumed parameters.

* A results folder is data: ``ringlab run ptr_ring --resume --out DIR`` re-checks every
  parameter of DIR/env.json as ``-p NAME=VALUE`` would be checked, and takes programs and
  sources (a make or perf executable, a tree, a header, a module) from the command line only.
* cflags are compiler options of a few shapes (``ringlab.build.driver.validate_cflags``): no option
  that runs a program, loads code or names a file, no shell or make metacharacter.
* ringtest's CFLAGS reach make as one argv element; nothing in them is expanded.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ringlab.build import driver as B
from ringlab.lab import cli
from ringlab.sources import kernel_tree
from ringlab.tools import kernel_tests
from ringlab.errors import ParamError
from ringlab.experiments import get
from ringlab.run.prepare import _stored_parameters
from tests.fakes.ringtest_tree import write_fake_ringtest_tree

FAKES = Path(__file__).resolve().parent / "fakes"
sys.path.insert(0, str(FAKES))
import fake_ptr_ring_test as fake  # noqa: E402

needs_cc = pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                              reason="needs a C compiler and make")

PARAMS = ["-p", "profile", "smoke", "-p", "cpus", "none", "-p", "governor", "false", "-p", "variants",
          "batch,reorder", "-p", "modes", "0", "-p", "trials", "2", "-p", "warmup", "0"]
SHAPES = "-O*, -f*, -m*, -D*, -U*, -g*, -W*, -std=*"
ALLOWED = "-O3 -fno-inline -march=native -DFOO=1"


def _snapshot(root: Path, skip: Path | None = None) -> dict:
    out = {}
    for p in sorted(root.rglob("*")):
        if skip is not None and (p == skip or skip in p.parents):
            continue
        st = p.lstat()
        # a folder's mtime moves when the writability probe comes and goes; its entries tell
        out[str(p.relative_to(root))] = "dir" if p.is_dir() else (st.st_mtime_ns, st.st_size)
    return out


def _hostile(tmp_path: Path, marker: Path) -> dict[str, str]:
    """Hostile cflags, each set up so that it would create ``marker`` if it reached gcc."""
    evil = tmp_path / "evil"
    evil.mkdir(exist_ok=True)
    for prog in ("cc1", "as", "collect2"):          # what gcc -B looks for first
        exe = evil / prog
        exe.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
        exe.chmod(0o755)
    args = tmp_path / "args"
    args.write_text(f"-wrapper /bin/sh,-c,touch\\ {marker}\n")
    specs = tmp_path / "specs"
    specs.write_text("*cc1:\n+ -DSPECS_WERE_READ\n\n")
    return {"wrapper": f'-O2 -wrapper "/bin/sh,-c,touch {marker}"',
            "B": f"-B{evil}/",
            "specs": f"-specs={specs}",
            "atfile": f"@{args}",
            "plugin": f"-fplugin={tmp_path / 'p.so'}"}


@pytest.fixture
def run_folder(fakebin, tmp_path):
    """A finished mock run; its env.json is then edited by each test."""
    out = tmp_path / "run"
    assert cli.main(["run", "ptr_ring", *PARAMS, "--no-build", "--no-progress", "--out", str(out)]) == 0
    return out


# -- the validator -----------------------------------------------------------------------------
def test_allowed_shapes_pass_unchanged():
    assert B.validate_cflags(ALLOWED) == ["-O3", "-fno-inline", "-march=native", "-DFOO=1"]
    ok = "-O2 -Os -Ofast -g -ggdb -Wall -Wno-unused -Werror=format -std=gnu11 -UNDEBUG -fsanitize=address,undefined"
    assert B.validate_cflags(ok) == ok.split()
    assert B.validate_cflags(["-O1", "-mtune=generic"]) == ["-O1", "-mtune=generic"]
    assert B.validate_cflags("") == [] and B.validate_cflags(None) == []


@pytest.mark.parametrize("bad", [
    "-wrapper /bin/sh,-c,id", "-O2 -wrapper x", "-B/tmp/evil", "-Bevil", "-specs=/tmp/x", "-specs=x",
    "@/tmp/args", "@args", "-fplugin=/tmp/p.so", "-fplugin=p", "-fplugin-arg-p-x=1", "-Wl,-rpath,x", "-Wp,-MD,x",
    "-Wa,-adhln=x", "-o x", "-x c", "-I/tmp", "-Iinc", "-include x.h", "-isystem x", "-fuse-ld=/tmp/ld",
    "-fuse-ld=evil", "-fprofile-use=x", "-fdump-tree-all", "-DX=$HOME", "-DX=`id`", "-O2;id", "-O2 && id",
    "-O2 | id", "-DX=(1)", "-DX=<1>", "-O2\nid", "-DX='1'", '-DX="1"', "-DX=a\\b", "-DX=a#b", "-DX=*",
    "-Xlinker", "-pg", "--param=x", "x.c", "-", "-DX=/etc/passwd",
])
def test_forbidden_options_are_refused_naming_the_shapes(bad):
    with pytest.raises(ParamError) as e:
        B.validate_cflags(bad)
    msg = str(e.value)
    assert msg.startswith("parameter 'cflags': ") and SHAPES in msg and "\n" not in msg


def test_build_refuses_before_compiling(tmp_path):
    marker = tmp_path / "marker"
    for flags in _hostile(tmp_path, marker).values():
        with pytest.raises(ParamError, match="--cflags: .*allowed: compiler options shaped"):
            B.build_all(cflags=flags, out_dir=tmp_path / "bin", only=["ptr_ring_test-batch"])
    assert not marker.exists() and not (tmp_path / "bin").exists()


@pytest.mark.parametrize("case", ["wrapper", "B", "specs", "atfile", "plugin"])
def test_ringlab_build_cflags_exit_2(tmp_path, monkeypatch, capsys, case):
    marker = tmp_path / "marker"
    flags = _hostile(tmp_path, marker)[case]
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "build"))
    assert cli.main(["build", "--cflags", flags]) == 2
    err = capsys.readouterr().err
    assert "--cflags" in err and SHAPES in err and "Traceback" not in err
    assert not marker.exists() and not (tmp_path / "build" / "bin").exists()


# -- a hostile results folder -------------------------------------------------------------------
@pytest.mark.parametrize("case", ["wrapper", "B", "specs", "atfile", "plugin"])
def test_resume_refuses_hostile_cflags_in_env_json(run_folder, tmp_path, capsys, case):
    marker = tmp_path / "marker"
    flags = _hostile(tmp_path, marker)[case]
    env_path = run_folder / "env.json"
    env = json.loads(env_path.read_text())
    env["parameters"]["cflags"] = flags
    env_path.write_text(json.dumps(env, indent=1))
    before = _snapshot(tmp_path)
    # With a build, as the attack ran: the flags would reach gcc if they were not refused.
    rc = cli.main(["run", "ptr_ring", "--resume", "--no-progress", "--out", str(run_folder)])
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err
    assert "parameter 'cflags'" in lines[0] and str(env_path) in lines[0] and SHAPES in lines[0]
    assert not marker.exists()
    assert _snapshot(tmp_path) == before, "a refused resume wrote something"


def test_resume_refuses_cflags_of_the_wrong_type(run_folder, capsys):
    env_path = run_folder / "env.json"
    env = json.loads(env_path.read_text())
    env["parameters"]["cflags"] = ["-wrapper", "/bin/sh,-c,id"]
    env_path.write_text(json.dumps(env))
    assert cli.main(["run", "ptr_ring", "--resume", "--no-build", "--no-progress", "--out", str(run_folder)]) == 2
    err = capsys.readouterr().err
    assert "parameter 'cflags'" in err and str(env_path) in err


def test_resume_rechecks_every_parameter_of_env_json(run_folder, capsys):
    env_path = run_folder / "env.json"
    env = json.loads(env_path.read_text())
    env["parameters"]["cpus"] = "0:1; touch x"
    env_path.write_text(json.dumps(env))
    assert cli.main(["run", "ptr_ring", "--resume", "--no-build", "--no-progress", "--out", str(run_folder)]) == 2
    err = capsys.readouterr().err
    assert "parameter 'cpus'" in err and str(env_path) in err


def test_resume_takes_a_header_source_only_from_the_command_line(run_folder, tmp_path, capsys):
    header = tmp_path / "ptr_ring.h"
    header.write_text("struct ptr_ring { int producer; int consumer_head; };\n")
    env_path = run_folder / "env.json"
    env = json.loads(env_path.read_text())
    env["parameters"].update(kernel_headers=f"mine={header}", variants=["batch", "reorder", "mine"])
    env_path.write_text(json.dumps(env))
    before = _snapshot(tmp_path)
    assert cli.main(["run", "ptr_ring", "--resume", "--no-build", "--no-progress", "--out", str(run_folder)]) == 2
    err = capsys.readouterr().err
    assert "parameter 'kernel_headers'" in err and str(env_path) in err and "command line" in err
    assert _snapshot(tmp_path) == before


def test_programs_named_in_env_json_need_the_command_line(tmp_path):
    ringtest = get("ringtest")
    env_path = tmp_path / "env.json"
    env = {"parameters": {"tree": "/x", "make": "/tmp/evil-make"}}
    with pytest.raises(ParamError, match=r"parameter 'tree'.*env\.json.*command line"):
        _stored_parameters(ringtest, {}, env, env_path)
    with pytest.raises(ParamError, match=r"parameter 'make'.*env\.json.*command line"):
        _stored_parameters(ringtest, {"tree": "/x"}, env, env_path)
    # given again on the command line (the user vouches for it), or the default: accepted
    assert _stored_parameters(ringtest, {"tree": "/x", "make": "/tmp/evil-make"}, env, env_path)["make"] == \
        "/tmp/evil-make"
    assert _stored_parameters(ringtest, {}, {"parameters": {"make": "make"}}, env_path) == {"make": "make"}
    with pytest.raises(ParamError, match=r"parameter 'perf'.*command line"):
        _stored_parameters(get("perf_rb"), {}, {"parameters": {"perf": "/tmp/evil-perf"}}, env_path)
    with pytest.raises(ParamError, match=r"parameter 'module'.*command line"):
        _stored_parameters(get("kmod"), {}, {"parameters": {"module": "/tmp/evil.ko"}}, env_path)


def test_resume_with_allowed_cflags_still_runs(fakebin, tmp_path):
    fake.install(str(fakebin), sys.executable, cflags=ALLOWED)
    out = tmp_path / "run"
    params = PARAMS + ["-p", "cflags", ALLOWED]
    assert cli.main(["run", "ptr_ring", *params, "--no-build", "--no-progress", "--out", str(out)]) == 0
    env = json.loads((out / "env.json").read_text())
    assert env["parameters"]["cflags"] == ALLOWED
    # drop the last row: the resume runs it again, with the flags of env.json
    raw = out / "raw.csv"
    lines = raw.read_bytes().splitlines(keepends=True)
    raw.write_bytes(b"".join(lines[:-1]))
    assert cli.main(["run", "ptr_ring", "--resume", "--no-build", "--no-progress", "--out", str(out)]) == 0
    assert len(raw.read_bytes().splitlines()) == len(lines)


# -- -p cflags on the command line ---------------------------------------------------------------
@pytest.mark.parametrize("case", ["wrapper", "B", "specs", "atfile", "plugin"])
def test_p_cflags_forbidden_shapes_exit_2(fakebin, tmp_path, capsys, case):
    marker = tmp_path / "marker"
    flags = _hostile(tmp_path, marker)[case]
    out = tmp_path / "run"
    assert cli.main(["run", "ptr_ring", *PARAMS, "-p", "cflags", flags, "--no-progress", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "parameter 'cflags'" in err and SHAPES in err and "Traceback" not in err
    assert not marker.exists() and not out.exists()


def test_p_cflags_allowed_shapes_run(fakebin, tmp_path):
    fake.install(str(fakebin), sys.executable, cflags=ALLOWED)
    out = tmp_path / "run"
    assert cli.main(["run", "ptr_ring", *PARAMS, "-p", "cflags", ALLOWED, "--no-build", "--no-progress",
                     "--out", str(out)]) == 0
    assert json.loads((out / "env.json").read_text())["parameters"]["cflags"] == ALLOWED


@needs_cc
def test_allowed_cflags_build_a_binary_that_runs(tmp_path):
    info = B.build_all(cflags=ALLOWED, out_dir=tmp_path / "bin", only=["ptr_ring_test-batch"])
    assert info.user_cflags == ALLOWED.split() and info.cflags[-4:] == ALLOWED.split()
    exe = info.binaries["ptr_ring_test-batch"].path
    r = subprocess.run([exe, "-s", "64", "-m", "0", "-N", "1000", "--counters", "none", "--json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and json.loads(r.stdout.strip().splitlines()[-1])["iterations"]


# -- ringtest: the flags reach make as one argv element ----------------------------------------------
@pytest.fixture
def rt_build(tmp_path, monkeypatch):
    d = tmp_path / "build"
    monkeypatch.setenv("RINGLAB_BUILD", str(d))
    monkeypatch.setenv("RINGLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("RINGLAB_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("RINGLAB_LOCK_DIR", str(tmp_path / "locks"))
    return d


@needs_cc
@pytest.mark.parametrize("flags", ["$(shell touch {m})", "-O2; touch {m};", "-O2 `touch {m}`",
                                   "-O2 && touch {m}", "-DX=$$(touch {m})"])
def test_ringtest_cflags_never_reach_make_or_a_shell(tmp_path, rt_build, capsys, flags):
    tree = write_fake_ringtest_tree(tmp_path / "linux")
    marker = tmp_path / "M"
    out = tmp_path / "run"
    rc = cli.main(["run", "ringtest", "-p", "tree", f"mine={tree}", "-p", "profile", "smoke", "-p", "cpus", "none",
                   "-p", "governor", "false", "-p", "cflags", flags.format(m=marker), "--no-build",
                   "--no-progress", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "parameter 'cflags'" in err and SHAPES in err
    assert not marker.exists() and not out.exists()


@needs_cc
def test_ringtest_build_passes_cflags_as_one_make_argument(tmp_path, rt_build, monkeypatch):
    tree = write_fake_ringtest_tree(tmp_path / "linux")
    marker = tmp_path / "M"
    # CFLAGS in ringlab's own environment never reaches make (it would be expanded there)
    monkeypatch.setenv("CFLAGS", f"$(shell touch {marker})")
    (spec,) = kernel_tree.parse_trees(f"mine={tree}")
    prep = kernel_tests.prepare(spec, ALLOWED)
    with pytest.raises(ParamError, match="parameter 'cflags'"):
        kernel_tests.build(prep, "ptr_ring", cflags=f"$(shell touch {marker})")
    binary = kernel_tests.build(prep, "ptr_ring", cflags=ALLOWED)
    assert os.access(binary, os.X_OK) and not marker.exists()
    log = (prep.ringtest_dir / ".make-ptr_ring.log").read_text()
    first = log.splitlines()[0]
    assert f"--eval=CFLAGS += {ALLOWED}" in first
    compile_line = next(ln for ln in log.splitlines() if "ptr_ring.c" in ln and " -c " in ln)
    # the user's flags, then the Makefile's own CFLAGS += (still applied)
    assert f"{ALLOWED} -O1 -Wall" in compile_line


@needs_cc
def test_ringtest_runs_with_allowed_cflags(tmp_path, rt_build):
    tree = write_fake_ringtest_tree(tmp_path / "linux")
    out = tmp_path / "run"
    assert cli.main(["run", "ringtest", "-p", "tree", f"mine={tree}", "-p", "rings", "ptr_ring",
                     "-p", "profile", "smoke", "-p", "cpus", "none", "-p", "governor", "false",
                     "-p", "run_cycles", "1000", "-p", "trials", "1", "-p", "warmup", "0",
                     "-p", "cflags", ALLOWED, "--no-build", "--no-progress", "--out", str(out)]) == 0
    env = json.loads((out / "env.json").read_text())
    assert env["parameters"]["cflags"] == ALLOWED
