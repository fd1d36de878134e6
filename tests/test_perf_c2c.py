"""perf c2c report --stdio parser: recorded reports from three perf generations, refusals, ring labels."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ringlab.errors import DataError, ParamError, RinglabError
from ringlab.report import c2c
from ringlab.tools import c2c_ring, perfc2c

ROOT = Path(__file__).resolve().parent.parent
C2C = Path(__file__).resolve().parent / "data" / "perf_c2c"
PERFGO = C2C / "perfgo_amd_ibs_false_sharing.txt"
LEOYAN = C2C / "leoyan_2022_x86_peer.txt"
ANDRES = C2C / "andres_2020_old_columns.txt"
LEOYAN_ARM = C2C / "leoyan_2022_arm_spe_peer.txt"
SYNTH = C2C / "synthetic_ptr_ring.txt"


def one(path):
    reps = perfc2c.parse_file(path)
    assert len(reps) == 1
    return reps[0]


def test_perfgo_recent_perf_table_and_pareto():
    r = one(PERFGO)
    assert r.sort_on == "Tot Hitm"
    assert r.info["Events"] == "ibs_op/ldlat=0/"
    assert r.info["Cachelines sort on"] == "Total HITMs"
    assert r.info["Load Local HITM"] == "2092"
    [ln] = r.lines.to_dict(orient="records")
    assert ln["address"] == 0x20ea08034080 and ln["address_hex"] == "0x20ea08034080"
    assert (ln["node"], ln["pa_cnt"], ln["sort_pct"]) == (0, 1734, 100.0)
    assert (ln["hitm_total"], ln["hitm_local"], ln["hitm_remote"]) == (2096, 2092, 4)
    assert (ln["records"], ln["loads"], ln["stores"]) == (3152, 3152, 0)
    assert (ln["stores_l1hit"], ln["stores_l1miss"], ln["stores_na"]) == (0, 0, 0)
    assert (ln["ld_l1hit"], ln["ld_lclhitm"], ln["ld_rmthitm"]) == (1056, 2092, 4)
    off = r.offsets
    assert list(off["offset"]) == [0x30, 0x38]
    assert list(off["address"]) == [0x20ea08034080 + 0x30, 0x20ea08034080 + 0x38]
    assert list(off["rmt_hitm_pct"]) == [75.0, 25.0] and list(off["lcl_hitm_pct"]) == [49.62, 50.38]
    assert list(off["code_address_hex"]) == ["0x53dc88", "0x53dbc8"]
    assert list(off["cycles_rmt_hitm"]) == [410, 0] and list(off["cycles_lcl_hitm"]) == [75, 75]
    assert list(off["records"]) == [1552, 1600] and list(off["cpu_cnt"]) == [12, 10]
    assert set(off["symbol"]) == {"[.] github.com/perfgo/perfgo/e"}
    assert set(off["object"]) == {"perfgo.test.linux.amd64"}
    assert set(off["source_line"]) == {"go.go:0"} and set(off["nodes"]) == {"0"}
    # the Pareto's record counts add up to the table's
    assert off["records"].sum() == ln["records"]


def test_leoyan_peer_columns_and_mail_indent():
    r = one(LEOYAN)
    t = r.lines
    assert list(t["address_hex"]) == ["0x55c8971f0080", "0x55c8971f00c0"]
    assert list(t["sort_pct"]) == [66.14, 33.86]
    assert list(t["hitm_total"]) == [252, 129] and list(t["hitm_local"]) == [252, 129]
    assert list(t["hitm_remote"]) == [0, 0] and list(t["peer"]) == [0, 0]
    assert list(t["records"]) == [6044, 914] and list(t["loads"]) == [3550, 914]
    assert list(t["stores"]) == [2494, 0] and list(t["stores_l1hit"]) == [2024, 0]
    assert list(t["stores_l1miss"]) == [470, 0] and list(t["pa_cnt"]) == [1967, 1]
    off = r.offsets
    assert list(off["line_index"]) == [0, 0, 0, 0, 1]
    assert list(off["offset"]) == [0, 0, 0, 0x20, 0x20]
    assert list(off["lcl_hitm_pct"]) == [12.30, 0.79, 0.00, 86.90, 100.00]
    assert list(off["store_l1hit_pct"]) == [0.0, 90.51, 9.49, 0.0, 0.0]
    assert list(off["store_l1miss_pct"]) == [0.0, 0.0, 100.0, 0.0, 0.0]
    assert "peer_pct" in off and "cycles_peer" in off
    assert list(off["cycles_lcl_hitm"]) == [1313, 1800, 0, 141, 88]
    assert list(off["source_line"])[-1] == "false_sharing.exe[1455]"
    assert list(off["symbol"])[0] == "[.] 0x00000000000013e9"
    # each line's Pareto records add up to the table's records of that line
    assert off.groupby("line_index")["records"].sum().tolist() == list(t["records"])


def test_leoyan_arm_spe_sorted_on_peer():
    r = one(LEOYAN_ARM)
    assert r.sort_on == "Snoop Peer"
    [ln] = r.lines.to_dict(orient="records")
    assert ln["address_hex"] == "0xaaaac17d6000" and ln["node"] is None and ln["sort_pct"] == 100.0
    assert ln["peer"] == 99 and (ln["hitm_total"], ln["hitm_local"], ln["hitm_remote"]) == (0, 0, 0)
    assert (ln["records"], ln["loads"], ln["stores"], ln["ld_l1hit"], ln["ld_lclhit"]) == (18851, 18851, 0, 18752, 99)
    off = r.offsets
    assert list(off["offset"]) == [0x20, 0x29] and list(off["peer_pct"]) == [6.06, 93.94]
    assert list(off["cycles_peer"]) == [375, 180] and list(off["records"]) == [18469, 135]
    assert off["node"].isna().all() and list(off["object"]) == ["memstress", "memstress"]
    assert list(off["source_line"]) == ["memstress[25ac]", "memstress[3e88]"]
    # the peer column is shown where HITMs are zero
    assert c2c.format_lines(r.lines).splitlines()[0].split() == \
        ["#", "cache", "line", "hitm", "lcl", "rmt", "peer", "loads", "stores"]


def test_andres_old_columns_quoted():
    r = one(ANDRES)
    t = r.lines
    assert r.sort_on == "Tot Hitm" and r.offsets.empty
    assert list(t["index"]) == [0, 1, 2, 3]
    assert list(t["address_hex"]) == ["0x7f0d27ffba00", "0x7f0d27ff61c0", "0x7f0d26d3ec80", "0x7f0d26d3ec00"]
    assert t["node"].isna().all()          # "N/A"
    assert list(t["records"]) == [52, 6353, 71, 98]
    assert list(t["sort_pct"]) == [0.12, 14.04, 0.15, 0.22]
    assert list(t["hitm_total"]) == [13, 1475, 16, 23]
    assert list(t["hitm_local"]) == [6, 801, 4, 17] and list(t["hitm_remote"]) == [7, 674, 12, 6]
    assert list(t["stores"]) == [12, 779, 13, 19]           # "Store Reference Total"
    assert list(t["llc_ld_miss"]) == [14, 1392, 24, 12]
    assert list(t["loads"]) == [40, 5574, 58, 79]
    assert list(t["ld_l1hit"]) == [16, 1967, 20, 40] and list(t["ld_lclhit"]) == [0, 115, 9, 10]
    assert list(t["ld_rmthit"]) == [0, 0, 0, 0]
    assert list(t["dram_rmt"]) == [7, 718, 12, 6]
    assert (t["hitm_total"] == t["hitm_local"] + t["hitm_remote"]).all()
    assert (t["records"] == t["loads"] + t["stores"]).all()


def _text(path):
    return path.read_text()


def test_several_reports_in_one_text():
    text = _text(ANDRES) + "\n" + _text(PERFGO)
    reps = perfc2c.parse(text, "two.txt")
    assert [len(r.lines) for r in reps] == [4, 1]
    assert reps[1].offsets["offset"].tolist() == [0x30, 0x38]


@pytest.mark.parametrize("mangle, expected", [
    (lambda s: "no report here\n", "no 'Shared Data Cache Line Table' found"),
    (lambda s: s.split("=================================================\n           Shared Data")[0],
     "no 'Shared Data Cache Line Table' found (a --stats-only report has no table)"),
    (lambda s: s.replace("#\n      0      0x20ea08034080     0    1734  100.00%",
                         "#\n      0      0x20ea08034080     0    1734"), "expected 23 columns"),
    (lambda s: s.replace("      0      0x20ea08034080     0    1734  100.00%",
                         "      0      20ea08034080zz     0    1734  100.00%"), "expected a hex cache-line address"),
    (lambda s: s.replace("     2096     2092        4     3152", "     2096     many        4     3152"),
     "expected a number in column 'hitm_local'"),
    (lambda s: s.replace("# .....  ..................  ....  ......  .......  .......  .......  .......  .......",
                         "# Index             Address  Node  PA cnt     Hitm    Total  LclHitm  RmtHitm  records", 1),
     "expected the Shared Data Cache Line Table header"),
    (lambda s: s.replace("      0        4     2092        0        0        0      0x20ea08034080",
                         "      0        4     2092        0        0        0      0x20ea08034000"),
     "Pareto cache line 0 is at 0x20ea08034000, but the table's line 0 is at 0x20ea08034080"),
    (lambda s: s.replace("                0x30     0       1", "                  48     0       1"),
     "expected a hex offset (0x...) in the Pareto column 'Offset'"),
    (lambda s: s.replace("          75.00%   49.62%", "           75.00%   49.62"),
     "expected a percentage in the Pareto column"),
])
def test_refusals_name_file_line_and_expectation(mangle, expected):
    bad = mangle(_text(PERFGO))
    with pytest.raises(DataError) as ei:
        perfc2c.parse(bad, "bad.txt")
    msg = str(ei.value)
    assert msg.startswith("bad.txt") and expected in msg
    assert isinstance(ei.value, RinglabError)


def test_refusal_line_number_is_the_bad_line():
    # the fourth row (line 18 of the file) loses its percentage
    text = _text(ANDRES).replace("  3      0x7f0d26d3ec00   N/A       0       98    0.22%",
                                 "  3      0x7f0d26d3ec00   N/A       0       98")
    with pytest.raises(DataError, match=r"andres: line 18: expected 21 columns .* got 20"):
        perfc2c.parse(text, "andres")


def test_table_without_hitm_columns_refused():
    text = _text(ANDRES)
    for a, b in (("----- LLC Load Hitm -----", "----- LLC Load Xxxx -----"),
                 ("-- LLC Load Hit --", "-- LLC Load Zzz --")):
        text = text.replace(a, b)
    with pytest.raises(DataError, match="has no HITM columns"):
        perfc2c.parse(text, "x")


def test_default_layout_is_csrc_ptr_ring():
    # csrc/rings/ptr_ring_batch.h: three 64-byte aligned groups
    src = (ROOT / "csrc" / "rings" / "ptr_ring_batch.h").read_text()
    for name in ("producer", "producer_lock", "consumer_head", "consumer_tail", "consumer_lock",
                 "size", "batch", "queue"):
        assert name in src
    f = c2c_ring.PTR_RING_FIELDS
    assert f["producer"][0] == 0 and f["consumer_head"][0] == 64 and f["size"][0] == 128
    assert max(e for _, e in f.values()) <= 192


def test_labels_synthetic_ring():
    [r] = perfc2c.parse_file(SYNTH)
    lay = c2c_ring.RingLayout.from_spec("base=0x7f3a1c000100,queue=0x7f3a1c001000,size=16")
    t = c2c_ring.label_lines(r, lay)
    assert list(t["ring_group"]) == ["consumer", "producer", "slots", "slots", c2c_ring.OUTSIDE]
    assert list(t["ring_line"]) == ["consumer", "producer", "slots[8-15]", "slots[0-7]", c2c_ring.OUTSIDE]
    assert t["ring_fields"].iloc[0] == "consumer_head consumer_tail consumer_lock"
    assert t["ring_fields"].iloc[1] == "producer producer_lock"
    off = c2c_ring.label_offsets(r, lay)
    assert list(off["ring_fields"]) == ["consumer_head", "consumer_tail", "producer", "slots[10]", "slots[10]",
                                        "slots[7]", c2c_ring.OUTSIDE]
    s = c2c_ring.ring_summary(t, throughput=21.5)
    assert list(s["ring_group"]) == ["producer", "consumer", "slots", c2c_ring.OUTSIDE]
    assert list(s["hitm_total"]) == [600, 900, 450, 50] and list(s["lines"]) == [1, 1, 2, 1]
    assert s["hitm_share_pct"].sum() == pytest.approx(100.0)
    assert set(s["throughput_mops"]) == {21.5}


def test_labels_real_report_with_field_map():
    # the perfgo benchmark's two int64 counters, at offsets 0x30 and 0x38 of the hot line
    r = one(PERFGO)
    lay = c2c_ring.RingLayout(base=0x20ea080340b0, fields={"RequestsTotal": (0, 8), "CronJobRuns": (8, 16)})
    t = c2c_ring.label_lines(r, lay)
    assert t["ring_fields"].tolist() == ["RequestsTotal CronJobRuns"]
    assert c2c_ring.label_offsets(r, lay)["ring_fields"].tolist() == ["RequestsTotal", "CronJobRuns"]
    far = c2c_ring.RingLayout(base=0x1000)
    assert c2c_ring.label_lines(r, far)["ring_group"].tolist() == [c2c_ring.OUTSIDE]


def test_pareto_call_chains_are_skipped():
    text = _text(SYNTH).replace("ptr_ring_bench           ring.h:95    0\n",
                                "ptr_ring_bench           ring.h:95    0\n"
                                "            |\n            ---rl_measured_produce\n"
                                "               |--100.00%--producer_thread\n", 1)
    assert "---rl_measured_produce" in text
    [r] = perfc2c.parse(text, "g.txt")
    assert len(r.offsets) == 7 and list(r.offsets["line_index"]) == [0, 0, 1, 2, 2, 3, 4]


def test_128_byte_lines():
    lay = c2c_ring.RingLayout.from_spec("base=0x1000,queue=0x2000,size=32,line=128")
    [r] = perfc2c.parse_file(SYNTH)
    lab = c2c_ring.label_lines(r, c2c_ring.RingLayout.from_spec(
        "base=0x7f3a1c000100,queue=0x7f3a1c001000,size=16,line=128"))
    # 0x...100 + 128 bytes holds the producer and the consumer groups
    assert lab["ring_group"].iloc[1] == "producer+consumer"
    assert lay.labels(0x2000, 0x2080) == ["slots[0-15]"]


def test_line_straddling_struct_and_slots():
    lay = c2c_ring.RingLayout(base=0x1000, queue=0x10c0, slots=4)
    assert lay.labels(0x1080, 0x10c0) == ["size", "batch", "queue"]
    assert lay.labels(0x10c0, 0x1100) == ["slots[0-3]"]
    lay2 = c2c_ring.RingLayout(base=0x1000, queue=0x1090, slots=2)
    assert lay2.group(lay2.labels(0x1080, 0x10c0)) == "size/batch/queue+slots"


@pytest.mark.parametrize("spec, expected", [
    ("queue=0x10,size=4", "has no base=ADDR"),
    ("base=0x10,queue=0x20", "'queue' and 'size' go together"),
    ("base=zz", "base='zz' is not a number"),
    ("base=0x10,colour=red", "'colour=red'"),
    ("base=0x10,queue=0x20,size=0", "size=0"),
    ("base=0x10,layout=/nonexistent.json", "not a known layout or a readable JSON file"),
    ("base=0x10,line=100", "line=100; allowed: 32, 64, 128 or 256"),
])
def test_ring_spec_refusals(spec, expected):
    with pytest.raises(ParamError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        c2c_ring.RingLayout.from_spec(spec)


def test_ring_spec_layout_file(tmp_path):
    f = tmp_path / "lay.json"
    f.write_text(json.dumps({"head": [0, 8], "tail": [64, 72]}))
    lay = c2c_ring.RingLayout.from_spec(f"base=4096,layout={f}")
    assert lay.labels(4096, 4160) == ["head"] and lay.labels(4160, 4224) == ["tail"]
    assert c2c_ring.RingLayout.from_spec("base=0,layout=prebatch").labels(64, 128) == ["consumer", "consumer_lock"]


def test_table_fits_72_columns():
    [r] = perfc2c.parse_file(SYNTH)
    lay = c2c_ring.RingLayout.from_spec("base=0x7f3a1c000100,queue=0x7f3a1c001000,size=16")
    txt = c2c.format_lines(c2c_ring.label_lines(r, lay))
    assert max(len(x) for x in txt.splitlines()) <= 72
    assert txt.splitlines()[1].split() == ["0", "0x7f3a1c000140", "consumer", "900", "880", "20", "1500", "900"]
    kernel = r.lines.copy()
    kernel["address_hex"] = "0xffff8803f4b1c0c0"
    kernel["ring_line"] = "consumer_head+consumer_tail+something_long+slots[100-107]"
    assert max(len(x) for x in c2c.format_lines(kernel).splitlines()) <= 72


def _cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "ringlab", "import-perf", *args], capture_output=True, text=True,
                          cwd=ROOT, input=stdin)


def test_cli_c2c_csv_and_table(tmp_path):
    out = tmp_path / "c2c.csv"
    p = _cli("--c2c", str(SYNTH), "--ring", "base=0x7f3a1c000100,queue=0x7f3a1c001000,size=16",
             "--throughput", "21.5", "--csv", str(out))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert max(len(x) for x in lines if str(tmp_path) not in x) <= 72
    assert lines[-2:] == [f"rows written to {out}", f"offset rows written to {tmp_path / 'c2c.offsets.csv'}"]
    assert any(x.startswith("producer: 1 line(s), HITM 600 (30.0%") for x in lines)
    assert "throughput: 21.5 Mops/s (as given)" in lines
    df = pd.read_csv(out)
    assert list(df["hitm_total"]) == [900, 600, 300, 150, 50]
    assert list(df["ring_line"]) == ["consumer", "producer", "slots[8-15]", "slots[0-7]", "outside ring"]
    off = pd.read_csv(tmp_path / "c2c.offsets.csv")
    assert len(off) == 7 and off["ring_fields"].iloc[0] == "consumer_head"


def test_cli_c2c_stdin_json():
    p = _cli("--c2c", "-", "--json", stdin=ANDRES.read_text())
    assert p.returncode == 0, p.stderr
    [rep] = json.loads(p.stdout)
    assert rep["source"] == "<stdin>" and [x["hitm_total"] for x in rep["lines"]] == [13, 1475, 16, 23]
    p = _cli("--c2c", str(SYNTH), "--json", "--ring", "base=0x7f3a1c000100,queue=0x7f3a1c001000,size=16")
    [rep] = json.loads(p.stdout)
    assert [x["ring_line"] for x in rep["lines"]][:3] == ["consumer", "producer", "slots[8-15]"]
    assert rep["offsets"][0]["ring_fields"] == "consumer_head" and rep["sort_on"] == "Tot Hitm"


def test_cli_refusals(tmp_path):
    p = _cli("--c2c", str(ROOT / "tests" / "data" / "perf" / "seed000_ptr_ring.txt"))
    assert p.returncode == 2 and "no 'Shared Data Cache Line Table' found" in p.stderr
    p = _cli("--c2c", "--kmod", str(SYNTH))
    assert p.returncode == 2 and "'--c2c' and '--kmod'" in p.stderr
    p = _cli("--ring", "base=0", str(SYNTH))
    assert p.returncode == 2 and "allowed only with --c2c" in p.stderr
    p = _cli("--c2c", str(SYNTH), "--throughput", "-3")
    assert p.returncode == 2 and "--throughput" in p.stderr
    p = _cli("--c2c", str(SYNTH), "--ring", "base=0x0,queue=1")
    assert p.returncode == 2 and "go together" in p.stderr
