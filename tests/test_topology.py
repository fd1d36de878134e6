"""Topology from fake sysfs trees and the real machine; pair classes and select_pairs."""
from __future__ import annotations

import pytest

from fakes import write_topology
from ringlab.experiments.base import ParamError
from ringlab.system.topology import PAIR_CLASSES, Topology, pick_single_cpu, select_pairs


@pytest.fixture
def big(tmp_path):
    """2 sockets x 4 cores x 2 SMT, 2 LLCs per socket: all five classes exist."""
    write_topology(tmp_path, Topology.fake(2, 4, 2, 2))
    return Topology.read(tmp_path)


def test_read_matches_fake(big):
    fake = Topology.fake(2, 4, 2, 2)
    assert big.cpus == list(range(16))
    for c in big.cpus:
        a, b = big.info(c), fake.info(c)
        assert (a.package, a.core, a.smt_siblings, a.llc_cpus, a.numa_node) == \
               (b.package, b.core, b.smt_siblings, b.llc_cpus, b.numa_node)
    d = big.to_dict()
    assert (d["n_packages"], d["n_cores"], d["threads_per_core"], len(d["llc_groups"]), len(d["numa_nodes"])) \
        == (2, 8, 2, 4, 2)


def test_pair_classes(big):
    # Linux numbering: CPU 0's sibling is 8; cores 0,1 share an LLC; socket 1 starts at CPU 4.
    assert big.pair_class(1, 1) == "same-cpu"
    assert big.pair_class(1, 9) == "smt-sibling"
    assert big.pair_class(1, 0) == "same-llc"
    assert big.pair_class(1, 8) == "same-llc"
    assert big.pair_class(1, 2) == "cross-llc"
    assert big.pair_class(1, 5) == "cross-numa"
    assert big.pair_class(-1, 3) == "unpinned"
    assert big.classes_present() == list(PAIR_CLASSES)


def test_auto_one_pair_per_class_avoiding_cpu0(big):
    pairs = select_pairs(big, "auto")
    assert [p[2] for p in pairs] == list(PAIR_CLASSES)
    for a, b, cls in pairs:
        assert big.pair_class(a, b) == cls
        assert 0 not in (a, b) and 8 not in (a, b)   # CPU 0 and its SMT sibling avoided
    assert pick_single_cpu(big) == 1
    assert select_pairs(big, "auto", need_two=False) == [(1, 1, "same-cpu")]


def test_all_none_explicit(big):
    allp = select_pairs(big, "all")
    assert len(allp) == 16 * 15 and all(a != b for a, b, _ in allp)
    assert select_pairs(big, "none") == [(-1, -1, "unpinned")]
    assert select_pairs(big, "1:9, 3:4") == [(1, 9, "smt-sibling"), (3, 4, "cross-numa")]
    assert select_pairs(big, ["1:2", "1:2"]) == [(1, 2, "cross-llc")]


@pytest.mark.parametrize("spec", ["1:99", "1:x", "1-2", "", "1:2:3"])
def test_bad_pairs_name_parameter_and_online_cpus(big, spec):
    with pytest.raises(ParamError) as e:
        select_pairs(big, spec)
    msg = str(e.value)
    assert "'cpus'" in msg and "0-15" in msg


def test_offline_cpu_rejected(tmp_path):
    write_topology(tmp_path, Topology.fake(1, 4, 1, 1), offline=[3])
    topo = Topology.read(tmp_path)
    assert topo.cpus == [0, 1, 2]
    with pytest.raises(ParamError, match=r"CPU 3 .*not online; online CPUs: 0-2"):
        select_pairs(topo, "1:3")


def test_missing_cache_and_numa_info(tmp_path):
    cpu = tmp_path / "devices" / "system" / "cpu"
    cpu.mkdir(parents=True)
    (cpu / "online").write_text("0-3\n")
    topo = Topology.read(tmp_path)
    assert topo.classes_present() == ["same-cpu", "same-llc"]
    assert any("NUMA" in n for n in topo.notes) and any("cache" in n for n in topo.notes)


def test_no_sysfs(tmp_path):
    with pytest.raises(FileNotFoundError):
        Topology.read(tmp_path)


def test_fake_validates():
    with pytest.raises(ValueError, match="llc_per_socket"):
        Topology.fake(1, 3, 1, 2)


def test_real_machine():
    topo = Topology.read("/sys")
    assert topo.cpus and "same-cpu" in topo.classes_present()
    pairs = select_pairs(topo, "auto")
    assert pairs[0][2] == "same-cpu"
    for a, b, cls in pairs:
        assert topo.pair_class(a, b) == cls
    if len(topo.cpus) > 1:
        assert pick_single_cpu(topo) != 0


# -- a real kernel's tree (Debian 6.1 in QEMU: 2 sockets x 2 cores x 2 threads, 2 NUMA nodes) ----------
from pathlib import Path  # noqa: E402

from fakes import sysfs_shape  # noqa: E402

REAL = Path(__file__).resolve().parent / "data" / "sysfs-qemu-2s2c2t-numa"


@pytest.fixture
def real():
    return Topology.read(REAL)


def test_real_tree_topology(real):
    d = real.to_dict()
    assert real.cpus == list(range(8)) and d["notes"] == []
    assert (d["n_packages"], d["n_cores"], d["threads_per_core"]) == (2, 4, 2)
    assert real.cores() == [(0, 1), (2, 3), (4, 5), (6, 7)]     # QEMU numbers siblings next to each other
    assert real.llc_groups() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert real.numa_nodes() == {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}
    assert real.pair_class(1, 0) == "smt-sibling"
    assert real.pair_class(1, 2) == "same-llc"
    assert real.pair_class(1, 5) == "cross-numa"      # the LLC is the socket: no cross-llc pair here
    assert real.classes_present() == ["same-cpu", "smt-sibling", "same-llc", "cross-numa"]


def test_real_tree_pairs(real):
    pairs = select_pairs(real, "auto")
    assert [p[2] for p in pairs] == ["same-cpu", "smt-sibling", "same-llc", "cross-numa"]
    for a, b, cls in pairs:
        assert real.pair_class(a, b) == cls and 0 not in (a, b) and 1 not in (a, b)
    assert pick_single_cpu(real) == 2
    assert len(select_pairs(real, "all")) == 56


def test_real_tree_has_its_own_shape():
    assert sysfs_shape.problems(REAL, REAL) == []


@pytest.mark.parametrize("shape,offline", [((2, 4, 2, 2), []), ((1, 4, 1, 1), [3]), ((2, 2, 2, 1), [5]),
                                           ((1, 8, 2, 2), [])])
def test_hand_made_trees_have_the_kernels_shape(tmp_path, shape, offline):
    write_topology(tmp_path, Topology.fake(*shape), offline=offline)
    assert sysfs_shape.problems(tmp_path, REAL) == []


def test_shape_check_catches_what_the_kernel_never_writes(tmp_path):
    write_topology(tmp_path, Topology.fake(1, 4, 1, 1))
    cpu = tmp_path / "devices" / "system" / "cpu"
    (cpu / "cpu1" / "topology" / "thread_siblings_list").write_text("1,2\n")   # not a sibling, nor kernel form
    (cpu / "cpu2" / "cache" / "index3" / "shared_cpu_list").write_text("0 1 2 3\n")
    (cpu / "cpu3" / "topology" / "siblings").write_text("3\n")
    (cpu / "cpu0" / "cache" / "index2" / "type").unlink()
    (cpu / "online").write_text("0-2\n")                                      # cpu3 offline, tree kept
    got = sysfs_shape.problems(tmp_path, REAL)
    for frag in ("cpu1/topology/thread_siblings_list", "cpu2/cache/index3/shared_cpu_list",
                 "cpu3/topology/siblings: the kernel writes no such file", "cpu0/cache/index2/type: missing",
                 "cpu3/topology: present for an offline CPU"):
        assert any(frag in p for p in got), (frag, got)


REAL_SPLIT = REAL.parent / "sysfs-qemu-1s2llc"
REAL_OFFLINE = REAL.parent / "sysfs-qemu-1s2llc-offline"


def test_real_split_llc_and_offline_trees():
    t = Topology.read(REAL_SPLIT)
    assert t.llc_groups() == [[0, 1, 2, 3], [4, 5, 6, 7]] and t.packages() == [0]
    assert t.classes_present() == ["same-cpu", "smt-sibling", "same-llc", "cross-llc"]
    o = Topology.read(REAL_OFFLINE)     # CPUs 3 and 6 offline
    assert o.cpus == [0, 1, 2, 4, 5, 7]
    assert o.info(2).smt_siblings == (2,) and o.llc_groups() == [[0, 1, 2], [4, 5, 7]]
    assert len(select_pairs(o, "all")) == 30
    for tree in (REAL_SPLIT, REAL_OFFLINE):
        assert sysfs_shape.problems(tree, REAL) == []


def test_hand_made_offline_tree_matches_the_kernels(tmp_path):
    # the same machine by hand: 1 socket, 4 cores in 2 LLCs, 2 threads, QEMU's numbering, 3 and 6 offline
    write_topology(tmp_path, Topology.read(REAL_SPLIT), offline=[3, 6])
    assert sysfs_shape.problems(tmp_path, REAL_OFFLINE) == []
    a, b = Topology.read(tmp_path), Topology.read(REAL_OFFLINE)
    assert a.to_dict()["cpus"] == b.to_dict()["cpus"]
