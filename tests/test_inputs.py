"""Bad or awkward inputs on the command line: exit code 2, a message naming the parameter and
the allowed values, no traceback; values that begin with '-' are accepted."""
from __future__ import annotations

import pytest

from ringlab.lab.cli import main, parse_args
from ringlab.errors import ParamError
from ringlab.experiments.params import MAX_OPS, Param
from ringlab.experiments.page_frag import PageFrag
from ringlab.experiments.ptr_ring import MODE_DESCRIPTIONS, PtrRing


def cli(capsys, *argv):
    """(exit code, stdout, stderr) of ``ringlab ARGV``, run in this process."""
    try:
        rc = main(list(argv))
    except SystemExit as e:           # argparse's own usage errors
        rc = e.code
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return rc, out.out, out.err


@pytest.fixture
def header(tmp_path):
    h = tmp_path / "ptr_ring.h"
    h.write_text("/* a user's header */\nstruct ptr_ring {\n\tint producer;\n\tint consumer_head;\n};\n")
    return h


@pytest.mark.parametrize("argv, words", [
    (["ptr_ring", "-p", "count", str(10**30)], ["parameter 'count'", "too large", f"in [1, {MAX_OPS}]"]),
    (["ptr_ring", "-p", "count", str(MAX_OPS + 1)], ["parameter 'count'", f"in [1, {MAX_OPS}]"]),
    (["page_frag", "-p", "nr_test", str(10**13)], ["parameter 'nr_test'", f"in [1, {MAX_OPS}]"]),
    (["ptr_ring", "-p", "count", "1e8"], ["parameter 'count'", "not an integer in plain decimal digits", "'1e8'"]),
    (["ptr_ring", "-p", "sizes", "16,,64"],
     ["parameter 'sizes'", "empty element", "'16,,64'", "comma-separated list of integers in [2, 10000000]"]),
    (["ptr_ring", "-p", "sizes", "16,64,"], ["parameter 'sizes'", "empty element", "comma-separated list"]),
    (["ptr_ring", "-p", "variants", "batch,,reorder"], ["parameter 'variants'", "empty element", "allowed"]),
    (["page_frag", "-p", "alloc_lens", ",12"], ["parameter 'alloc_lens'", "empty element", "[1, 4096]"]),
    (["ptr_ring", "-p", "cpus", "-1:0"],
     ["parameter 'cpus'", "'-1:0'", "allowed: auto, all, none, or pairs PRODUCER:CONSUMER"]),
    (["page_frag", "-p", "cpus", "-1:0"], ["parameter 'cpus'", "'-1:0'", "allowed: auto, all, none, or pairs PUSH:POP"]),
    (["ptr_ring", "-p", "cpus=-1:0"], ["parameter 'cpus'", "'-1:0'", "allowed: auto, all, none"]),
    (["ptr_ring", "-p", "timeout", "nan"], ["parameter 'timeout'", "not a finite number", "a number in [0.1, 86400]"]),
    (["ptr_ring", "-p", "cflags", "-O3", "-p", "modes", "3"], ["parameter 'modes'", "one of 0, 1, 2"]),
])
def test_bad_run_parameter(capsys, tmp_path, argv, words):
    out = tmp_path / "run"
    rc, _, err = cli(capsys, "run", *argv, "--no-build", "--out", str(out))
    assert rc == 2, err
    assert err.startswith("ringlab run: error: "), err
    for w in words:
        assert w in err, err
    assert not out.exists()          # refused before anything is written


def test_kernel_header_name_not_in_variants_is_refused(capsys, tmp_path, header):
    rc, _, err = cli(capsys, "run", "ptr_ring", "-p", "variants", "batch,reorder",
                     "-p", "kernel_headers", f"mine={header}", "--no-build", "--out", str(tmp_path / "r"))
    assert rc == 2
    assert "parameter 'kernel_headers': NAME 'mine' is not in variants (batch,reorder)" in err
    assert "allowed: NAMEs listed in variants (add it: variants=batch,reorder,mine)" in err
    # listed in variants, the same header is accepted
    v = PtrRing.resolve({"variants": "batch,mine", "kernel_headers": f"mine={header}"})
    assert v["variants"] == ["batch", "mine"]


# -- values that begin with '-' ---------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["run", "ptr_ring", "-p", "cflags", "-O3"],
    ["run", "ptr_ring", "-p", "cflags=-O3"],
    ["run", "ptr_ring", "--parameter", "cflags", "-O3"],
    ["run", "ptr_ring", "--parameter=cflags=-O3"],
    ["run", "-p", "cflags", "-O3", "ptr_ring"],
])
def test_run_parameter_value_may_begin_with_dash(argv):
    a = parse_args(argv)
    assert a.experiment == "ptr_ring" and a.parameter == [("cflags", "-O3")]


def test_run_parameters_in_both_spellings_mix():
    a = parse_args(["run", "ptr_ring", "-p", "cflags", "-O2 -DX=1", "-p", "cpus=-1:0",
                                   "-p", "seed", "-1", "-p", "kernel_headers", "a=/x,b=/y=z", "--no-build"])
    assert a.parameter == [("cflags", "-O2 -DX=1"), ("cpus", "-1:0"), ("seed", "-1"),
                           ("kernel_headers", "a=/x,b=/y=z")]
    assert a.no_build is True
    assert PtrRing.resolve({"cflags": "-O3"})["cflags"] == "-O3"


@pytest.mark.parametrize("argv, words", [
    (["run", "ptr_ring", "-p", "cflags"], ["argument -p", "expected NAME VALUE or NAME=VALUE", "'cflags'"]),
    (["run", "ptr_ring", "-p", "cflags", "--no-build"], ["expected NAME VALUE or NAME=VALUE"]),
    (["run", "ptr_ring", "-p"], ["argument -p", "expected one argument"]),
    (["run", "ptr_ring", "--out", "--resume"], ["argument --out", "expected one argument"]),
    (["build", "--cflags"], ["argument --cflags", "expected one argument"]),
])
def test_missing_values_still_say_so(capsys, argv, words):
    rc, _, err = cli(capsys, *argv)
    assert rc == 2
    for w in words:
        assert w in err, err


@pytest.mark.parametrize("argv", [["build", "--cflags", "-O3"], ["build", "--cflags=-O3"], ["build", "--cfl", "-O3"]])
def test_build_cflags_may_begin_with_dash(argv):
    a = parse_args(argv + ["--json"])
    assert a.cflags == "-O3" and a.json is True


@pytest.mark.parametrize("argv, attr, value", [
    (["compare", "raw.csv", "--baseline", "-x"], "baseline", "-x"),
    (["compare", "raw.csv", "--baseline", "a", "--noise", "-0.1"], "noise", -0.1),
    (["compare", "raw.csv", "--baseline", "a", "--by", "-mode"], "by", "-mode"),
    (["summarize", "d", "--label", "-x=y"], "label", ["-x=y"]),
    (["summarize", "d", "--metric", "-m"], "metric", "-m"),
    (["provenance", "d", "--against", "-other"], "against", "-other"),
    (["env", "--restore", "--state-file", "-s.json"], "state_file", "-s.json"),
])
def test_other_commands_take_values_beginning_with_dash(argv, attr, value):
    assert getattr(parse_args(argv), attr) == value


def test_compare_baseline_beginning_with_dash_is_checked(capsys, tmp_path):
    raw = tmp_path / "raw.csv"
    raw.write_text("variant,mode,trial,warmup,status,ns_per_op\n" +
                   "".join(f"{v},0,{t},False,ok,{10 + t}\n" for v in ("a", "b") for t in range(3)))
    rc, _, err = cli(capsys, "compare", str(raw), "--baseline", "-x")
    assert rc == 2 and "baseline" in err and "'-x'" in err and "allowed: a, b" in err


# -- parameter parsing ------------------------------------------------------------------------
@pytest.mark.parametrize("kind, raw", [("int_list", "16,,64"), ("int_list", ",16"), ("int_list", "16,"),
                                       ("int_list", "16;;64"), ("str_list", "a, ,b"), ("float_list", "1.5,,2"),
                                       ("int_list", ["16", ""])])
def test_empty_list_elements_are_refused(kind, raw):
    with pytest.raises(ParamError, match=r"parameter 'x': .*allowed: a comma-separated list"):
        Param("x", kind, None, "").parse(raw)


def test_lists_still_parse():
    assert Param("x", "int_list", None, "").parse(" 16 , 64,128 ") == [16, 64, 128]
    with pytest.raises(ParamError, match="';' in ' 16 , 64;128 ' is not a list separator"):   # ',' only
        Param("x", "int_list", None, "").parse(" 16 , 64;128 ")
    assert Param("x", "int_list", None, "").parse(16) == [16]
    with pytest.raises(ParamError, match="empty list"):
        Param("x", "int_list", None, "").parse("")


def test_count_bounds_match_the_binaries():
    for exp, name in ((PtrRing, "count"), (PageFrag, "nr_test")):
        p = exp.all_params()[name]
        assert (p.min, p.max) == (1, MAX_OPS) == (1, 10**12)
        assert p.parse(str(MAX_OPS)) == MAX_OPS
        assert p.allowed() == "an integer in [1, 1000000000000]"


# -- one description of the ptr_ring modes ----------------------------------------------------
def test_mode_descriptions_are_one(capsys):
    assert MODE_DESCRIPTIONS[2].startswith("near-full")
    rc, out, _ = cli(capsys, "run", "ptr_ring", "--list-params")
    assert rc == 0
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("modes "))
    for m, d in MODE_DESCRIPTIONS.items():
        assert f"{m} {d}" in line
    assert "spinlocked" not in line
    assert PtrRing.all_params()["modes"].choices == tuple(MODE_DESCRIPTIONS)
