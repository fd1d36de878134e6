"""perf stat parsers on the seeds' pasted blocks, recorded VM output and a synthetic bare-metal one."""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ringlab.tools import perfstat

ROOT = Path(__file__).resolve().parent.parent
PERF = Path(__file__).resolve().parent / "data" / "perf"


def blocks(name):
    return perfstat.parse((PERF / name).read_text())


def test_seed000_blocks():
    bl = blocks("seed000_ptr_ring.txt")
    # The mail has 4 unpatched runs and 5 patched runs.
    assert len(bl) == 9
    assert [b.label for b in bl].count("unpatched ptr_ring.c") == 4
    assert [b.label for b in bl].count("patched ptr_ring.c") == 5
    b = bl[0]
    assert b.command == "./ptr_ring_test -s 1000 -m 0 -N 100000000" and b.runs is None
    assert b.program_output == "ptr_ring(size:1000) perf simple test for 100000000 times, took 2385198 us"
    assert b.events["instructions"]["value"] == 17424187640
    assert b.events["cycles"]["value"] == 6202023521
    assert b.events["task-clock"] == {"value": 2385.49, "unit": "msec", "variance_pct": None, "supported": True,
                                      "counted": True, "multiplexed_pct": None, "metric": "1.000 CPUs utilized"}
    assert b.events["branches"]["value"] is None and b.events["branches"]["supported"] is False
    assert (b.elapsed_s, b.user_s, b.sys_s) == (2.385785170, 2.384014, 0.0)
    assert bl[4].command.startswith("./ptr_ring_test_opt") and bl[4].events["instructions"]["value"] == 16124164124


def test_seed002_blocks():
    bl = blocks("seed002_page_frag.txt")
    assert len(bl) == 8
    assert [b.runs for b in bl] == [200] * 4 + [10] * 4
    assert [b.label for b in bl] == ["Before this patchset"] * 2 + ["After this patchset"] * 4 + \
        ["Before this patchset"] * 2
    b = bl[0]
    assert "test_push_cpu=16 test_pop_cpu=17" in b.command
    assert b.events["task-clock"]["value"] == 17.990790 and b.events["task-clock"]["unit"] == "msec"
    assert b.events["task-clock"]["variance_pct"] == 0.19
    assert b.events["cpu-migrations"]["variance_pct"] == 100.0      # "( +-100.00% )"
    assert b.events["instructions"]["value"] == 34466157
    assert (b.elapsed_s, b.elapsed_var_pct) == (6.382252558, 0.07)
    # trailing mail text after the last block does not break it
    assert bl[-1].elapsed_s == 8.118897296 and bl[-1].events["cpu-migrations"]["variance_pct"] is None


def test_rows_seed000():
    df = perfstat.blocks_to_rows(blocks("seed000_ptr_ring.txt"))
    assert len(df) == 9
    assert df.loc[0, "instructions"] == 17424187640
    assert math.isnan(df.loc[0, "branches"])            # <not supported> is NaN, never 0
    assert df.loc[0, "counter_errors"] == "branches: not supported"
    assert df.loc[0, "task_clock"] == 2385.49           # msec, as perf prints it
    assert df.loc[0, "ipc"] == pytest.approx(17424187640 / 6202023521)
    assert math.isnan(df.loc[0, "branch_miss_rate"])
    for col in ("branch_misses", "context_switches", "cpu_migrations", "page_faults", "cycles"):
        assert col in df.columns


def test_rows_seed002_rel_sd():
    df = perfstat.blocks_to_rows(blocks("seed002_page_frag.txt"))
    assert df.loc[0, "task_clock_var_pct"] == 0.19
    # perf's +- is the standard error: sd = se * sqrt(runs)
    assert df.loc[0, "elapsed_rel_sd_pct"] == pytest.approx(0.07 * math.sqrt(200))
    assert df.loc[0, "branch_miss_rate"] == pytest.approx(39913 / 8011755)


def test_synthetic_baremetal_multiplexed_text_and_csv():
    t = blocks("baremetal_multiplexed.txt")
    c = blocks("baremetal_multiplexed_csv.txt")
    assert len(t) == len(c) == 1
    assert t[0].runs == 5 and t[0].elapsed_s == 1.20123 and t[0].elapsed_var_pct == 0.12
    for b in (t[0], c[0]):
        ev = b.events
        assert ev["cycles"]["value"] == 4801234567 and ev["cycles"]["multiplexed_pct"] == 71.43
        assert ev["cycles"]["variance_pct"] == 0.10
        assert ev["cache-misses"]["multiplexed_pct"] == 57.14
        assert ev["task-clock"]["value"] == 1200.50 and ev["task-clock"]["multiplexed_pct"] is None
        assert ev["L1-dcache-load-misses"]["value"] is None
        assert ev["L1-dcache-load-misses"]["supported"] and not ev["L1-dcache-load-misses"]["counted"]
    df = perfstat.blocks_to_rows(t + c)
    assert df["counters_multiplexed"].tolist() == [True, True]
    assert (df["cycles"] == 4801234567).all()
    assert df.loc[0, "counter_errors"] == "l1_dcache_load_misses: not counted"


def test_recorded_vm_output():
    csv = blocks("vm_x86_csv_r5.txt")
    assert len(csv) == 1 and csv[0].source == "csv"
    ev = csv[0].events
    assert ev["cycles"]["supported"] is False and ev["cycles"]["value"] is None
    assert ev["task-clock"]["unit"] == "msec" and ev["task-clock"]["variance_pct"] == 4.56
    single = blocks("vm_x86_csv_single.txt")
    assert single[0].events["task-clock"]["variance_pct"] is None
    assert single[0].events["task-clock"]["value"] == 1.18
    text = blocks("vm_x86_text_r5.txt")
    assert text[0].runs == 5 and text[0].command == "sleep 0.01"
    assert text[0].elapsed_s == 0.013598 and text[0].elapsed_var_pct == 6.66
    assert text[0].events["cycles"]["supported"] is False
    assert text[0].events["page-faults"]["variance_pct"] == 0.33


def test_csv_several_blocks_and_program_output():
    text = "hello\n1.0,msec,task-clock,1,100.00,,\n5,,page-faults,1,100.00,,\n" \
           "world\n2.0,msec,task-clock,1,100.00,,\n6,,page-faults,1,100.00,,\n"
    bl = perfstat.parse_perf_csv(text)
    assert [b.events["task-clock"]["value"] for b in bl] == [1.0, 2.0]
    assert [b.program_output for b in bl] == ["hello", "world"]


def test_thousands_separators_and_old_units():
    text = ("Performance counter stats for 'x':\n"
            "  6,202,023,521      cycles:u   # 2.6 GHz\n"
            "  17.990790 task-clock (msec) # 0.003 CPUs utilized ( +- 0.19% )\n"
            "  1.5 seconds time elapsed\n")
    b = perfstat.parse_perf_stat(text)[0]
    assert b.events["cycles:u"]["value"] == 6202023521
    assert b.events["task-clock"]["unit"] == "msec"
    df = perfstat.blocks_to_rows([b])
    assert df.loc[0, "cycles"] == 6202023521 and df.loc[0, "task_clock"] == 17.990790


def test_normalize_event():
    assert perfstat.normalize_event("branch-misses") == "branch_misses"
    assert perfstat.normalize_event("cpu_core/cycles/") == "cycles"
    assert perfstat.normalize_event("L1-dcache-load-misses") == "l1_dcache_load_misses"


def test_empty_text():
    assert perfstat.parse("nothing here\n") == []
    assert perfstat.blocks_to_rows([]).empty


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "ringlab", "import-perf", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def test_import_perf_cli(tmp_path):
    out = tmp_path / "rows.csv"
    r = _cli(str(PERF / "seed002_page_frag.txt"), "--csv", str(out))
    assert r.returncode == 0, r.stderr
    assert "8 block(s)" in r.stdout and "34466157" in r.stdout
    df = pd.read_csv(out)
    assert len(df) == 8 and df.loc[0, "instructions"] == 34466157 and df.loc[0, "runs"] == 200
    r = _cli(str(PERF / "seed000_ptr_ring.txt"), "--json")
    assert r.returncode == 0 and '"value": 17424187640' in r.stdout.replace(".0,", ",")


def test_import_perf_cli_errors(tmp_path):
    r = _cli(str(tmp_path / "missing.txt"))
    assert r.returncode == 2 and "'FILE'" in r.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("no perf here\n")
    r = _cli(str(empty))
    assert r.returncode == 2 and "no perf stat output" in r.stderr
