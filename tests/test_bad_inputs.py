"""A corpus of bad inputs: every one ends in exit code 2 and one line naming the input.

Each case is an argv for ``ringlab.cli.main`` (run in this process) and, for file-shaped
inputs, the bytes (or the kind of file) put in place of raw.csv, env.json, a run folder or
an input file.  For every case: exit code 2, exactly one line on stderr, no traceback, the
line names the parameter or the file, and a refused run leaves no run folder behind.

One good run folder (the mock ptr_ring binaries of tests/fakes) is made once for the module;
each case gets a copy of its two files.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

import pytest

import ringlab
from ringlab.errors import RinglabError

from tests.fakes.cli_runs import in_process_run
from tests.fakes.corpus import Case, check_refused, git_status

GOOD_PARAMS = ["-p", "profile", "smoke", "-p", "cpus", "none", "-p", "governor", "false",
               "-p", "variants", "batch,reorder", "-p", "modes", "0", "-p", "trials", "2", "-p", "warmup", "0"]


# -- what replaces a file -------------------------------------------------------------------------
def _put(rel: str, kind: str, content: bytes = b""):
    """setup that replaces RUN/rel (rel '' = the folder itself, via TMP/target) by ``kind``."""
    def setup(tmp: Path, run: Path) -> None:
        p = run / rel
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        elif p.exists() or p.is_symlink():
            p.unlink()
        if kind == "missing":
            return
        if kind == "bytes":
            p.write_bytes(content)
        elif kind == "directory":
            p.mkdir()
        elif kind == "passwd":
            p.write_bytes(Path("/etc/passwd").read_bytes() if Path("/etc/passwd").is_file()
                          else b"root:x:0:0:root:/root:/bin/bash\n")
        elif kind == "devzero":
            p.symlink_to("/dev/zero")
        elif kind == "loop":
            p.symlink_to(p.name)
        else:  # pragma: no cover
            raise AssertionError(kind)
    return setup


#: contents and kinds that no reader of a file accepts
FILE_KINDS = {"missing": ("missing", b""), "directory": ("directory", b""), "empty": ("bytes", b""),
              "non_utf8": ("bytes", b"\xff\xfe\x00bad\n"), "passwd": ("passwd", b""),
              "devzero": ("devzero", b""), "loop": ("loop", b"")}


def _raw_edit(edit: Callable[[list[str], list[list[str]]], str]):
    """setup that rewrites raw.csv from (header, rows) -> text."""
    def setup(tmp: Path, run: Path) -> None:
        lines = (run / "raw.csv").read_text().splitlines()
        header, rows = lines[0].split(","), [ln.split(",") for ln in lines[1:]]
        (run / "raw.csv").write_text(edit(header, rows))
    return setup


def _set_cell(col: str, value: str, row: int = 1):
    def edit(header, rows):
        rows[row][header.index(col)] = value
        return "\n".join(",".join(r) for r in [header] + rows) + "\n"
    return _raw_edit(edit)


def _extra_column(header, rows):
    return "\n".join(",".join(r) for r in [header + ["surprise"]] + [r + ["1"] for r in rows]) + "\n"


def _torn(header, rows):
    return "\n".join(",".join(r) for r in [header] + rows) + "\n" + ",".join(rows[0][:5])


def _short_row(header, rows):
    return "\n".join(",".join(r) for r in [header, rows[0], ["x", "y", "z"]] + rows[1:]) + "\n"


def _all_metric(col: str, value: str):
    def edit(header, rows):
        for r in rows:
            r[header.index(col)] = value
        return "\n".join(",".join(r) for r in [header] + rows) + "\n"
    return _raw_edit(edit)


RAW_CONTENTS = {
    "header_only": lambda h, r: ",".join(h) + "\n",
    "extra_column": _extra_column,
    "torn_last_row": _torn,
    "short_row": _short_row,
    "nul_byte": lambda h, r: "\n".join(",".join(x) for x in [h] + r) + "\n\x00\n",
}
RAW_CELLS = {
    "ns_nan": ("ns_per_op", "nan"), "ns_text": ("ns_per_op", "fast"), "ns_zero": ("ns_per_op", "0"),
    "ns_negative": ("ns_per_op", "-12.5"), "ns_inf": ("ns_per_op", "inf"), "ns_huge": ("ns_per_op", "1e400"),
    "elapsed_negative": ("elapsed_ns", "-1"), "elapsed_text": ("elapsed_ns", "abc"),
    "trial_text": ("trial", "two"), "round_float": ("round", "1.5"),
}


def _env_json(text: str | bytes):
    def setup(tmp: Path, run: Path) -> None:
        (run / "env.json").write_bytes(text.encode() if isinstance(text, str) else text)
    return setup


def _env_field(**fields):
    def setup(tmp: Path, run: Path) -> None:
        import json
        doc = json.loads((run / "env.json").read_text())
        doc.update(fields)
        (run / "env.json").write_text(json.dumps(doc))
    return setup


ENV_CONTENTS = {
    "list": _env_json("[1, 2, 3]"), "string": _env_json('"env"'), "number": _env_json("42"),
    "null": _env_json("null"), "truncated": _env_json('{"run_id": "x",\n "experiment": '),
    "deep_nesting": _env_json("[" * 100_000 + "]" * 100_000),
    "deep_object": _env_json('{"a":' * 40 + "1" + "}" * 40),
    "env_version_999": _env_field(env_version=999), "schema_999": _env_field(schema_version=999),
    "other_experiment": _env_field(experiment="page_frag"),
    "parameters_text": _env_field(parameters="trials=2"), "environment_list": _env_field(environment=[1, 2]),
    "status_number": _env_field(status=5), "trials_text": _env_field(trials="many"),
    "run_id_number": _env_field(run_id=7), "status_unknown": _env_field(status="exploded"),
    "warnings_object": _env_field(warnings={"a": 1}), "kind_unknown": _env_field(kind="banana"),
}

#: commands that read a run folder: argv, whether they read env.json
READERS = {
    "mail": (["mail", "RUN"], True),
    "summarize": (["summarize", "RUN", "--no-figures"], True),
    "provenance": (["provenance", "RUN"], True),
    "compare": (["compare", "RUN/raw.csv", "--baseline", "batch"], False),
}


def _file_cases() -> list[Case]:
    out = []
    for cmd, (argv, reads_env) in READERS.items():
        for kind, (how, content) in FILE_KINDS.items():
            if cmd == "provenance" and kind == "missing":
                continue   # provenance of a folder with env.json and no raw.csv is a provenance report
            out.append(Case(f"{cmd}-raw-{kind}", argv, "RUN/raw.csv", _put("raw.csv", how, content), True))
        for name, edit in RAW_CONTENTS.items():
            out.append(Case(f"{cmd}-raw-{name}", argv, "RUN/raw.csv", _raw_edit(edit), True))
        for name, (col, value) in RAW_CELLS.items():
            out.append(Case(f"{cmd}-raw-{name}", argv, "RUN/raw.csv", _set_cell(col, value), True))
        if reads_env:
            for kind, (how, content) in FILE_KINDS.items():
                if kind == "missing":
                    continue   # a run folder without env.json is still reported on
                out.append(Case(f"{cmd}-env-{kind}", argv, "RUN/env.json", _put("env.json", how, content), True))
            for name, setup in ENV_CONTENTS.items():
                out.append(Case(f"{cmd}-env-{name}", argv, "RUN/env.json", setup, True))
        # the folder itself
        for kind in ("missing", "passwd", "devzero", "loop"):
            how, content = FILE_KINDS[kind]
            target = [a.replace("RUN/raw.csv", "TMP/target").replace("RUN", "TMP/target") for a in argv]
            out.append(Case(f"{cmd}-folder-{kind}", target, "TMP/target",
                            lambda tmp, run, how=how, content=content: _put("target", how, content)(tmp, tmp)))
    # metric columns without a value, or a --metric that is not one
    out.append(Case("compare-metric-all-nan", READERS["compare"][0], "RUN/raw.csv", _all_metric("ns_per_op", ""),
                    True))
    out.append(Case("compare-metric-unknown", READERS["compare"][0] + ["--metric", "nope"], "nope", None, True))
    out.append(Case("summarize-metric-unknown", ["summarize", "RUN", "--metric", "nope", "--no-figures"],
                    "nope", None, True))
    out.append(Case("summarize-metric-text", ["summarize", "RUN", "--metric", "stderr_tail", "--no-figures"],
                    "stderr_tail", None, True))
    out.append(Case("mail-metric-unknown", ["mail", "RUN", "--metric", "nope"], "nope", None, True))
    # provenance --against a bad folder
    for kind in ("missing", "passwd", "loop"):
        how, content = FILE_KINDS[kind]
        out.append(Case(f"provenance-against-{kind}", ["provenance", "RUN", "--against", "TMP/target"],
                        "TMP/target", lambda tmp, run, how=how, content=content: _put("target", how, content)(tmp, tmp),
                        True))
    # --resume into a broken folder
    out.append(Case("resume-env-other_experiment", ["run", "ptr_ring", "--no-build", "--no-progress", "--out",
                                                     "RUN", "--resume"], "--resume", ENV_CONTENTS["other_experiment"],
                    True))
    for name in ("list", "deep_nesting", "truncated"):
        out.append(Case(f"resume-env-{name}", ["run", "ptr_ring", "--no-build", "--no-progress", "--out", "RUN",
                                               "--resume"], "RUN/env.json", ENV_CONTENTS[name], True))
    for name in ("non_utf8", "directory", "loop", "devzero"):
        how, content = FILE_KINDS[name]
        out.append(Case(f"resume-raw-{name}", ["run", "ptr_ring", "--no-build", "--no-progress", "--out", "RUN",
                                               "--resume"], "RUN/raw.csv", _put("raw.csv", how, content), True))
    # outputs
    for cmd in ("mail",):
        out.append(Case(f"{cmd}-o-missing-folder", [cmd, "RUN", "-o", "TMP/nowhere/out.txt"], "-o", None, True))
        out.append(Case(f"{cmd}-o-directory", [cmd, "RUN", "-o", "TMP"], "-o", None, True))
        out.append(Case(f"{cmd}-o-under-a-file", [cmd, "RUN", "-o", "RUN/raw.csv/out.txt"], "-o", None, True))
    out.append(Case("mail-width-huge", ["mail", "RUN", "--width", str(10**12)], "--width", None, True))
    out.append(Case("mail-width-small", ["mail", "RUN", "--width", "-5"], "--width", None, True))
    for opt, val in (("--noise", "nan"), ("--noise", "-1"), ("--noise", "inf"), ("--alpha", "nan"),
                     ("--alpha", "0"), ("--alpha", "1.5")):
        out.append(Case(f"compare{opt}-{val}", READERS["compare"][0] + [opt, val], opt, None, True))
    # import-perf
    for kind, (how, content) in FILE_KINDS.items():
        if kind == "devzero":
            out.append(Case("import-perf-devzero", ["import-perf", "/dev/zero"], "/dev/zero"))
            continue
        out.append(Case(f"import-perf-{kind}", ["import-perf", "TMP/target"], "TMP/target",
                        lambda tmp, run, how=how, content=content: _put("target", how, content)(tmp, tmp)))
    out.append(Case("import-perf-text", ["import-perf", "TMP/target"], "TMP/target",
                    lambda tmp, run: (tmp / "target").write_text("no counters here\n" * 10)))
    out.append(Case("import-perf-csv-missing-folder", ["import-perf", "TMP/perf.txt", "--csv", "TMP/no/out.csv"],
                    "--csv", lambda tmp, run: (tmp / "perf.txt").write_text(_PERF_TEXT)))
    out.append(Case("import-perf-csv-directory", ["import-perf", "TMP/perf.txt", "--csv", "TMP"],
                    "--csv", lambda tmp, run: (tmp / "perf.txt").write_text(_PERF_TEXT)))
    return out


_PERF_TEXT = """
 Performance counter stats for './a.out':

          1,000.00 msec task-clock                #    1.000 CPUs utilized
     3,000,000,000      cycles                    #    3.000 GHz

       1.000000000 seconds time elapsed
"""


# -- run parameters -------------------------------------------------------------------------------
#: (experiment, parameter): values that must be refused (0 where the minimum is above it)
NUMERIC = {
    "ptr_ring": ["trials", "warmup", "repeats", "timeout", "seed", "icount_ops", "icount_trials", "target_ci",
                 "budget", "quiet_timeout", "count", "batch", "sizes", "modes"],
    "page_frag": ["nr_test", "aligns", "alloc_lens"],
    "ringtest": ["ring_sizes", "run_cycles", "batch", "outstanding", "param"],
    "perf_rb": ["count"],
}
BAD_NUMBERS = {"minus1": "-1", "huge": "1e308", "nan": "nan", "inf": "inf", "text": "lots",
               "over": str(10**12 + 1)}


def _param_cases() -> list[Case]:
    from ringlab.experiments import get
    out = []
    base_argv = ["--no-build", "--no-progress", "--out", "OUT"]
    for exp, names in NUMERIC.items():
        specs = get(exp).all_params()
        for name in names:
            vals = dict(BAD_NUMBERS)
            p = specs[name]
            if p.min is not None and p.min > 0 or (p.choices and 0 not in p.choices):
                vals["zero"] = "0"
            for label, v in vals.items():
                out.append(Case(f"run-{exp}-{name}-{label}", ["run", exp, "-p", name, v, *base_argv],
                                f"parameter '{name}'"))
    more = [
        ("trials-1e9", ["-p", "trials", "1000000000"], "parameter 'trials'"),
        ("target-budget-1e308", ["-p", "variants", "batch,reorder", "-p", "target_ci", "50", "-p", "budget", "1e308"],
         "parameter 'budget'"),
        ("budget-without-target", ["-p", "profile", "smoke", "-p", "budget", "10"], "parameter 'budget'"),
        ("baseline-not-a-variant", ["-p", "variants", "batch,reorder", "-p", "baseline", "prebatch"],
         "parameter 'baseline'"),
        ("plan-too-large", ["-p", "trials", "100000", "-p", "sizes", ",".join(str(i) for i in range(2, 40))],
         "parameter 'trials'"),
        ("header-name-300", ["-p", "kernel_headers", "a" * 300 + "=/x/ptr_ring.h"], "parameter 'kernel_headers'"),
        ("header-name-65", ["-p", "kernel_headers", "a" * 65 + "=/x/ptr_ring.h"], "parameter 'kernel_headers'"),
        ("header-name-slash", ["-p", "kernel_headers", "a/b=/x/ptr_ring.h"], "parameter 'kernel_headers'"),
        ("header-name-dotdot", ["-p", "kernel_headers", "..=/x/ptr_ring.h"], "parameter 'kernel_headers'"),
        ("header-name-space", ["-p", "kernel_headers", "my header=/x/ptr_ring.h"], "parameter 'kernel_headers'"),
        ("header-missing-file", ["-p", "variants", "batch,mine", "-p", "kernel_headers", "mine=/nonexistent/h.h"],
         "parameter 'kernel_headers'"),
        ("header-path-too-long", ["-p", "variants", "batch,mine", "-p", "kernel_headers", "mine=/" + "x" * 5000],
         "parameter 'kernel_headers'"),
        ("unknown-param", ["-p", "nope", "1"], "nope"),
        ("param-twice", ["-p", "trials", "2", "-p", "trials", "3"], "parameter 'trials'"),
        ("profile-unknown", ["-p", "profile", "huge"], "parameter 'profile'"),
        ("variants-empty-element", ["-p", "variants", "batch,,reorder"], "parameter 'variants'"),
        ("sizes-empty-element", ["-p", "sizes", "16,,64"], "parameter 'sizes'"),
        ("cpus-negative", ["-p", "cpus", "-1:0"], "parameter 'cpus'"),
        ("bool-text", ["-p", "counters", "maybe"], "parameter 'counters'"),
        ("quiet-unknown", ["-p", "quiet", "loud"], "parameter 'quiet'"),
    ]
    for label, params, names in more:
        out.append(Case(f"run-ptr_ring-{label}", ["run", "ptr_ring", *params, *base_argv], names))
    out.append(Case("run-unknown-experiment", ["run", "nope", *base_argv], "nope"))
    out.append(Case("run-out-exists", ["run", "ptr_ring", "--no-build", "--out", "TMP"], "--out"))
    out.append(Case("run-out-under-a-file", ["run", "ptr_ring", "--no-build", "--out", "RUN/raw.csv/x"], "--out",
                    None, True))
    out.append(Case("run-resume-no-out", ["run", "ptr_ring", "--no-build", "--resume"], "--resume"))
    out.append(Case("run-resume-empty-folder", ["run", "ptr_ring", "--no-build", "--resume", "--out", "TMP"],
                    "--resume"))
    out.append(Case("run-resume-other-experiment", ["run", "page_frag", "--no-build", "--resume", "--out", "RUN"],
                    "--resume", None, True))
    # ringtest: trees, tarballs, revisions and ring names the user names
    for label, tree in (("missing-folder", "/nonexistent/linux"), ("missing-tarball", "/nonexistent/linux.tar.xz"),
                        ("missing-git", "git:/nonexistent/linux@v6.1"), ("named-missing", "mine=/nonexistent")):
        out.append(Case(f"run-ringtest-tree-{label}", ["run", "ringtest", "-p", "tree", tree, *base_argv],
                        "parameter 'tree'"))
    for label, rings in (("bad-name", "ptr ring!"), ("twice", "ptr_ring,ptr_ring")):
        out.append(Case(f"run-ringtest-rings-{label}", ["run", "ringtest", "-p", "rings", rings, *base_argv],
                        "parameter 'rings'"))
    out.append(Case("run-ringtest-ring-size-not-pow2", ["run", "ringtest", "-p", "ring_sizes", "100", *base_argv],
                    "parameter 'ring_sizes'"))
    # kmod: modules the user names
    kmod_argv = ["-p", "cpus", "none", "-p", "profile", "smoke"]
    for label, setup, module in (
            ("missing", None, "TMP/missing.ko"),
            ("directory", lambda tmp, run: (tmp / "dir.ko").mkdir(), "TMP/dir.ko"),
            ("not-ko", lambda tmp, run: (tmp / "module.txt").write_text("text\n"), "TMP/module.txt"),
            ("not-elf", lambda tmp, run: (tmp / "fake.ko").write_text("not elf\n"), "TMP/fake.ko"),
            ("empty", lambda tmp, run: (tmp / "empty.ko").write_bytes(b""), "TMP/empty.ko"),
            ("name-without-tree", None, "page_frag_test")):
        out.append(Case(f"run-kmod-module-{label}", ["run", "kmod", "-p", "module", module, *kmod_argv, *base_argv],
                        "parameter 'module'", setup))
    out.append(Case("run-kmod-module-none", ["run", "kmod", *kmod_argv, *base_argv], "parameter 'module'"))
    out.append(Case("run-kmod-args-bad", ["run", "kmod", "-p", "module", "/x.ko", "-p", "args", "novalue",
                                          *kmod_argv, *base_argv], "parameter 'args'"))
    return out


def _cflags_refusal(opt: str, why: str) -> str:
    from ringlab.build.cflags import cflags_allowed
    return f"parameter 'cflags': option {opt!r} {why}; allowed: {cflags_allowed()}"


#: refusals whose whole error line is the contract: (label, experiment, -p words, the line after
#: "ringlab run: error: "); each is also a corpus case (exit 2, one line, nothing written)
EXACT = [
    # parameters that cannot work together, refused before any build or trial
    ("batch-over-size", "ptr_ring", ["-p", "variants", "batch,reorder", "-p", "sizes", "512", "-p", "batch", "1000000"],
     "parameter 'batch': 1000000 exceeds the ring size 'sizes' 512 (ptr_ring_test refuses -b above -s: every trial "
     "of variant batch would fail); allowed: 0 (the ring's default) or 1..size (here 1..512)"),
    ("batch-over-smallest-size", "ptr_ring", ["-p", "variants", "batch", "-p", "sizes", "1000,64", "-p", "batch", "100"],
     "parameter 'batch': 100 exceeds the ring size 'sizes' 64 (ptr_ring_test refuses -b above -s: every trial of "
     "variant batch would fail); allowed: 0 (the ring's default) or 1..size (here 1..64, the smallest of sizes)"),
    # one rule for every list parameter: a value given twice is refused
    ("modes-twice", "ptr_ring", ["-p", "modes", "0,0"],
     "parameter 'modes': listed twice: 0 in '0,0'; allowed: each value once, one of 0, 1, 2 (comma-separated list)"),
    ("sizes-twice", "ptr_ring", ["-p", "sizes", "64,1000,64"],
     "parameter 'sizes': listed twice: 64 in '64,1000,64'; allowed: each value once, a comma-separated list of "
     "integers in [2, 10000000]"),
    ("variants-twice", "ptr_ring", ["-p", "variants", "batch,reorder,batch"],
     "parameter 'variants': listed twice: batch in 'batch,reorder,batch'; allowed: each value once, a "
     "comma-separated list"),
    ("alloc-lens-twice", "page_frag", ["-p", "alloc_lens", "12,12"],
     "parameter 'alloc_lens': listed twice: 12 in '12,12'; allowed: each value once, a comma-separated list of "
     "integers in [1, 4096]"),
    ("placements-twice", "perf_rb", ["-p", "placements", "none,none"],
     "parameter 'placements': listed twice: none in 'none,none'; allowed: each value once, one of none, same-core, "
     "split, smt-sibling, same-llc, cross-llc, cross-numa, auto (comma-separated list)"),
    # plain decimal integers and ',' only
    ("trials-underscore", "ptr_ring", ["-p", "trials", "1_0"],
     "parameter 'trials': not an integer in plain decimal digits: '1_0'; allowed: an integer in [1, 100000]"),
    ("seed-hex", "ptr_ring", ["-p", "seed", "0x10"],
     "parameter 'seed': not an integer in plain decimal digits: '0x10'; allowed: an integer in [0, 4294967295]"),
    ("count-exponent", "ptr_ring", ["-p", "count", "1e8"],
     "parameter 'count': not an integer in plain decimal digits: '1e8'; allowed: an integer in [1, 1000000000000]"),
    ("trials-plus", "ptr_ring", ["-p", "trials", "+5"],
     "parameter 'trials': not an integer in plain decimal digits: '+5'; allowed: an integer in [1, 100000]"),
    ("timeout-underscore", "ptr_ring", ["-p", "timeout", "1_0"],
     "parameter 'timeout': not a number in plain decimal notation: '1_0'; allowed: a number in [0.1, 86400]"),
    ("sizes-semicolon", "ptr_ring", ["-p", "sizes", "64;128"],
     "parameter 'sizes': ';' in '64;128' is not a list separator; allowed: a comma-separated list of integers "
     "in [2, 10000000] (',' only between the values)"),
    ("modes-semicolon", "ptr_ring", ["-p", "modes", "0;1"],
     "parameter 'modes': ';' in '0;1' is not a list separator; allowed: one of 0, 1, 2 (comma-separated list) "
     "(',' only between the values)"),
]


def _exact_cases() -> list[Case]:
    base_argv = ["--no-build", "--no-progress", "--out", "OUT"]
    out = [Case(f"run-{exp}-{label}", ["run", exp, "-p", "profile", "smoke", *params, *base_argv], msg)
           for label, exp, params, msg in EXACT]
    # compiler options that stop before an object file or change the link model
    for opt, why in (("-fsyntax-only", "stops the compiler after checking syntax, before it writes an object file"),
                     ("-flto", "changes the link model (link-time optimization: the objects hold compiler "
                               "bytecode, which the build's layout copies and link step do not handle)"),
                     ("-flto=auto", "changes the link model (link-time optimization: the objects hold compiler "
                                    "bytecode, which the build's layout copies and link step do not handle)"),
                     ("-fwhole-program", "changes the link model (each object is compiled as if it were the whole "
                                         "program)"),
                     ("-S", "stops the compiler at assembly, before it writes an object file"),
                     ("-E", "stops the compiler after preprocessing, before it writes an object file"),
                     ("-c", "stops before linking; the build passes -c itself and then links"),
                     ("-shared", "changes the link model (a shared library, not an executable)")):
        out.append(Case(f"run-ptr_ring-cflags{opt}", ["run", "ptr_ring", "-p", "cflags", opt, *base_argv],
                        _cflags_refusal(opt, why)))
    return out


CORPUS = _file_cases() + _param_cases() + _exact_cases()


def test_corpus_is_large_and_distinct():
    assert len(CORPUS) >= 300, len(CORPUS)
    assert len({c.id for c in CORPUS}) == len(CORPUS)


@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    yield from in_process_run(tmp_path_factory.mktemp("bad-inputs"), GOOD_PARAMS)


@pytest.fixture(scope="module")
def git_before():
    return git_status()


@pytest.mark.parametrize("case", CORPUS, ids=[c.id for c in CORPUS])
def test_bad_input_exits_2_with_one_line(good_run, git_before, tmp_path, monkeypatch, capsys, case):
    check_refused(case, good_run, tmp_path, monkeypatch, capsys, git_before)


@pytest.mark.parametrize("label,exp,params,msg", EXACT, ids=[e[0] for e in EXACT])
def test_refusal_is_the_exact_line(fakebin, tmp_path, capsys, label, exp, params, msg):
    """The whole error line, not only the parameter's name: what and why and the allowed values."""
    from ringlab.lab import cli
    rc = cli.main(["run", exp, "-p", "profile", "smoke", *params, "--no-build", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and err == f"ringlab run: error: {msg}\n", err
    assert not (tmp_path / "out").exists()


def test_list_params_shows_that_a_run_draws_a_fresh_seed(capsys):
    from ringlab.lab import cli
    assert cli.main(["run", "ptr_ring", "--list-params"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("seed "))
    assert line.split()[1:9] == "fresh random seed per run (recorded in env.json)".split()
    assert " 1 " not in line.split("seed", 1)[1][:30]


# -- ringlab.open ----------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/", "/etc", "/nonexistent/results"])
def test_open_refuses_a_folder_that_is_not_a_run_or_results_folder(path):
    with pytest.raises(RinglabError, match="allowed: a run folder"):
        ringlab.open(path)


def test_open_refuses_a_corrupt_run(good_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(good_run, run)
    (run / "env.json").write_text("[1]")
    with pytest.raises(RinglabError, match="env.json"):
        ringlab.open(run).summary()


# -- a tracefs this user may not read ----------------------------------------------------------------
def test_unreadable_tracefs_is_a_missing_capability(monkeypatch):
    from ringlab.tools import perfrecord
    real = Path.is_dir

    def is_dir(self):
        if "tracing/events" in str(self):
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)
    monkeypatch.setattr(Path, "is_dir", is_dir)
    reason = perfrecord.tracefs_reason()
    assert reason is not None and reason.startswith("tracepoints: not readable as this user")


def test_unreadable_tracefs_is_reported_by_the_environment_probe(monkeypatch):
    from ringlab.system import perfprobe
    real = Path.is_dir

    def is_dir(self):
        if "tracing/events" in str(self):
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)
    monkeypatch.setattr(Path, "is_dir", is_dir)
    tp = perfprobe.tracepoints()
    assert tp["raw_syscalls"] is False and tp["reason"].startswith("tracepoints: not readable as this user")
