"""The topology code on a real kernel: Debian's kernel booted under QEMU (TCG) with our users' shapes.

One boot per shape (session-scoped), every check inside it run by one plan (tests/guestvm.py):

* ``2s-2c-2t-numa``: 2 sockets x 2 cores x 2 threads, one L3 per socket, one NUMA node per socket,
  ``-cpu Skylake-Server``.  ``ringlab env`` must report 8 CPUs, the SMT pairs, 2 LLC groups and
  2 NUMA nodes; ``ringlab run ptr_ring -p profile smoke`` with ``cpus auto`` and ``cpus all`` must
  record ``actual_pair_class`` equal to the requested class on every trial; the c2c-latency probe
  and notebook 00's topology figure must run.  Here the LLC is the socket, so a pair in different
  LLCs is in different nodes: ``cross-numa``.
* ``1s-2llc``: one socket whose L3 is split in two (QEMU shares the L3 per die), one NUMA node:
  the ``cross-llc`` class; then two CPUs are taken offline and ``cpus all`` must use only the
  online ones.

The guest's timings mean nothing (TCG translates the guest's code; no cache, no coherence
traffic, no PMU, no cpufreq): only placement and topology are checked.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from ringlab import rundir
from ringlab.system import envinfo
from ringlab.system.topology import Topology
from tests import guestvm

pytestmark = pytest.mark.skipif(guestvm.unavailable() is not None, reason=str(guestvm.unavailable()))

#: one seed for the host's build and the guest's run: a run given none draws its own layouts,
#: which the guest (build/ read-only, --no-build) could not build
RUN_PARAMS = ["-p", "profile", "smoke", "-p", "counters", "false", "-p", "governor", "false",
              "-p", "quiet", "off", "-p", "seed", "1"]
#: cpus=all is 56 ordered pairs here: one ring, the SPSC mode, one trial each
ALL_PARAMS = ["-p", "variants", "spsc", "-p", "modes", "1", "-p", "trials", "1", "-p", "warmup", "0",
              "-p", "layouts", "1"]
C2C = ("import json, sys\nfrom ringlab.tools import latency\n"
       "pairs = [tuple(map(int, p.split(':'))) for p in sys.argv[1:]]\n"
       "print(json.dumps({f'{a}:{b}': latency.run_probe(a, b, iterations=2000, rounds=3, timeout=120)"
       " for a, b in pairs}))\n")
FIGURE = ("import json, sys\nfrom pathlib import Path\nfrom ringlab import rundir\n"
          "from ringlab.studies import envreport\n"
          "env = json.loads(Path(sys.argv[1]).read_text())\n"
          "rundir.write_figure(sys.argv[2], 'topology', envreport.topology_figure(env))\n"
          "print(env['topology']['n_cpus'])\n")


def _ringlab_run(out: Path, name: str, extra: list[str]) -> dict:
    # the probe's figure means nothing under TCG: a tenth of the round trips keeps the boot short
    return {"name": name, "timeout": 900, "env": {"RINGLAB_C2C_ITERATIONS": "2000"},
            "argv": [guestvm.RINGLAB, "run", "ptr_ring", *RUN_PARAMS, *extra, "--no-build",
                     "--no-progress", "--out", str(out / name)]}


def _host_build(tmp: Path, extra: list[str]) -> None:
    """Build, here, the binaries a run with these parameters uses (build/ is read-only in the guest)."""
    import subprocess
    p = subprocess.run([guestvm.RINGLAB, "run", "ptr_ring", *RUN_PARAMS, *extra, "-p", "cpus", "none",
                        "-p", "trials", "1", "-p", "warmup", "0", "-p", "count", "1000",
                        "--no-progress", "--out", str(tmp)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]


@pytest.fixture(scope="session")
def two_sockets(tmp_path_factory):
    work = tmp_path_factory.mktemp("guest-2s")
    _host_build(work / "build", [])
    out = work / "out"
    out.mkdir()
    steps = [
        {"name": "sysfs", "capture_sysfs": True},
        {"name": "env_json", "argv": [guestvm.RINGLAB, "env", "--json", "--no-probe"], "timeout": 300},
        _ringlab_run(out, "run_auto", ["-p", "cpus", "auto"]),
        _ringlab_run(out, "run_all", ["-p", "cpus", "all", *ALL_PARAMS]),
        {"name": "c2c", "argv": [guestvm.PY, "-c", C2C, "1:5", "1:2", "1:6"], "timeout": 300},
        {"name": "figure", "argv": [guestvm.PY, "-c", FIGURE, str(out / "env_json.out"), str(out / "envrun")],
         "timeout": 600},
    ]
    return guestvm.boot(guestvm.TWO_SOCKETS, out, steps, work)


@pytest.fixture(scope="session")
def split_llc(tmp_path_factory):
    work = tmp_path_factory.mktemp("guest-llc")
    _host_build(work / "build", [])
    out = work / "out"
    out.mkdir()
    steps = [
        {"name": "sysfs", "capture_sysfs": True},
        {"name": "offline", "offline": [3, 6]},
        {"name": "sysfs_offline", "capture_sysfs": True},
        _ringlab_run(out, "run_all", ["-p", "cpus", "all", *ALL_PARAMS]),
    ]
    return guestvm.boot(guestvm.SPLIT_LLC, out, steps, work)


def _ok(run: guestvm.GuestRun, name: str) -> None:
    rec = run.step(name)
    assert rec["rc"] == 0, f"{name}: {rec}\n{run.text(name, 'err')[-3000:]}\n{run.text(name)[-2000:]}"


def _env(run, name="env_json") -> dict:
    _ok(run, name)
    return json.loads(run.text(name))


def _trials(run, name) -> pd.DataFrame:
    _ok(run, name)
    d = rundir.read_raw(run.out / name / "raw.csv", strict=False)
    assert len(d), f"{name}: no trials"
    return d


def _check_placement(d: pd.DataFrame, topo: dict) -> None:
    ok = d[d["status"] == "ok"]
    assert len(ok) == len(d), d[d["status"] != "ok"][["status", "stderr_tail"]].to_string()
    wrong = d[d["actual_pair_class"].astype(str) != d["pair_class"].astype(str)]
    assert wrong.empty, wrong[["cpu_req_producer", "cpu_req_consumer", "pair_class", "actual_pair_class",
                               "cpu_producer_start", "cpu_consumer_start"]].to_string()
    online = {c["cpu"] for c in topo["cpus"]}
    two = d[d["mode"] != 0]
    assert set(two["cpu_producer_start"]) <= online and set(two["cpu_consumer_start"]) <= online
    assert (two["cpu_producer_start"] == two["cpu_req_producer"]).all()
    assert (two["cpu_consumer_start"] == two["cpu_req_consumer"]).all()


# -- 2 sockets x 2 cores x 2 threads, 2 NUMA nodes -------------------------------------------------
def test_env_reports_the_guest_topology(two_sockets):
    t = _env(two_sockets)["topology"]
    assert t["n_cpus"] == 8 and t["online"] == "0-7"
    assert t["n_packages"] == 2 and t["n_cores"] == 4 and t["threads_per_core"] == 2
    # Linux numbers an Intel server's threads socket-major: SMT siblings are (0,1), (2,3), ...
    cores = sorted(tuple(c["smt_siblings"]) for c in t["cpus"])
    assert sorted(set(cores)) == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert t["llc_groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert t["numa_nodes"] == {"0": [0, 1, 2, 3], "1": [4, 5, 6, 7]}
    assert t["classes_present"] == ["same-cpu", "smt-sibling", "same-llc", "cross-numa"]
    assert t["notes"] == []


def test_env_text_and_no_container_in_the_guest(two_sockets):
    env = _env(two_sockets)
    v = env["host"]["virtualization"]
    assert v["container"] in (None, "none"), v
    text = envinfo.format_text(env)
    assert "container:" not in text and "qemu" in text


def test_cpus_auto_places_every_class(two_sockets):
    d = _trials(two_sockets, "run_auto")
    _check_placement(d, _env(two_sockets)["topology"])
    assert set(d["pair_class"]) == {"same-cpu", "smt-sibling", "same-llc", "cross-numa"}


def test_cpus_all_places_every_ordered_pair(two_sockets):
    d = _trials(two_sockets, "run_all")
    _check_placement(d, _env(two_sockets)["topology"])
    pairs = set(zip(d["cpu_req_producer"], d["cpu_req_consumer"]))
    assert pairs == {(a, b) for a in range(8) for b in range(8) if a != b}
    assert d["c2c_latency_ns"].notna().all()


def test_c2c_latency_runs_on_each_class(two_sockets):
    _ok(two_sockets, "c2c")
    res = json.loads(two_sockets.text("c2c"))
    assert set(res) == {"1:5", "1:2", "1:6"}
    for k, doc in res.items():
        assert doc["one_way_ns"] > 0, (k, doc)


def test_notebook00_topology_figure(two_sockets):
    _ok(two_sockets, "figure")
    assert two_sockets.text("figure").strip() == "8"
    fig = two_sockets.out / "envrun" / "figures" / "topology.png"
    assert fig.exists() and fig.stat().st_size > 1000


# -- one socket, L3 split in two, then two CPUs offline ---------------------------------------------
def test_split_llc_has_cross_llc(split_llc):
    _ok(split_llc, "sysfs")
    t = Topology.read(split_llc.out / "sysfs").to_dict()
    assert t["n_cpus"] == 8 and t["n_packages"] == 1 and t["threads_per_core"] == 2
    assert t["llc_groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert t["numa_nodes"] == {"0": list(range(8))}
    assert t["classes_present"] == ["same-cpu", "smt-sibling", "same-llc", "cross-llc"]


def test_offline_cpus_are_left_out(split_llc):
    _ok(split_llc, "offline")
    d = _trials(split_llc, "run_all")
    # the run's own env.json: the topology ringlab read in the guest, CPUs 3 and 6 offline
    t = json.loads((split_llc.out / "run_all" / "env.json").read_text())["environment"]["topology"]
    assert t["online"] == "0-2,4-5,7" and t["n_cpus"] == 6
    by_cpu = {c["cpu"]: c for c in t["cpus"]}
    assert by_cpu[2]["smt_siblings"] == [2] and by_cpu[7]["smt_siblings"] == [7]
    assert t["llc_groups"] == [[0, 1, 2], [4, 5, 7]]
    assert Topology.read(split_llc.out / "sysfs_offline").to_dict()["llc_groups"] == t["llc_groups"]
    _check_placement(d, t)
    online = [0, 1, 2, 4, 5, 7]
    assert set(zip(d["cpu_req_producer"], d["cpu_req_consumer"])) == \
        {(a, b) for a in online for b in online if a != b}


# -- the committed trees (tests/data/sysfs-qemu-*) are what this kernel writes ---------------------
DATA = guestvm.ROOT / "tests" / "data"


def _same_tree(captured: Path, fixture: Path) -> None:
    from tests.fakes import sysfs_shape
    a, b = Topology.read(captured).to_dict(), Topology.read(fixture).to_dict()
    a.pop("source"), b.pop("source")
    assert a == b
    assert sysfs_shape.problems(fixture, captured) == []


def test_fixture_is_the_captured_tree(two_sockets):
    _ok(two_sockets, "sysfs")
    _same_tree(two_sockets.out / "sysfs", DATA / "sysfs-qemu-2s2c2t-numa")


def test_split_llc_fixtures_are_the_captured_trees(split_llc):
    _ok(split_llc, "sysfs_offline")
    _same_tree(split_llc.out / "sysfs", DATA / "sysfs-qemu-1s2llc")
    _same_tree(split_llc.out / "sysfs_offline", DATA / "sysfs-qemu-1s2llc-offline")
