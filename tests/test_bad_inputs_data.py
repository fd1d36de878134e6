"""More of the bad-input corpus: values inside raw.csv and env.json, lone surrogates, git sources,
bisect parameters and special files in place of a file option.

Each case, as in tests/test_bad_inputs.py: exit code 2, one line on stderr naming the input, no
traceback, nothing new in the case's folder or in the working directory (build/ and scratch/
aside).  Also: a raw.csv of 10^4 rows is read, and one over the size cap is refused unread.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ringlab.lab import cli
from ringlab.rundir import rawcsv, rawrows, read_raw
from ringlab.errors import DataError

from tests.fakes.cli_runs import in_process_run
from tests.fakes.corpus import Case, check_refused, git_status
from tests.fakes.raw_versions import as_version_3
from tests.test_bad_inputs import GOOD_PARAMS, _put, _raw_edit, _set_cell

COMPARE = ["compare", "RUN/raw.csv", "--baseline", "batch"]
SUMMARIZE = ["summarize", "RUN", "--no-figures"]
MAIL = ["mail", "RUN"]
PROVENANCE = ["provenance", "RUN"]
BISECT = ["bisect", "ptr_ring", "-p", "tree", "TMP/linux", "-p", "good", "v1", "-p", "bad", "v2", "--out", "OUT"]
RUN = ["run", "ptr_ring", "--no-build", "--no-progress", "--out", "OUT"]


def _write_rows(header, rows) -> str:
    return "\n".join(",".join(r) for r in [header] + rows) + "\n"


def _version_3(setup):
    """``setup`` on the run folder rewritten as schema version 3 (every column on every row: the
    run constants that version 4 keeps in env.json included)."""
    def v3(tmp: Path, run: Path) -> None:
        as_version_3(run)
        setup(tmp, run)
    return v3


def _dup_column(col: str):
    def edit(header, rows):
        i = header.index(col)
        return _write_rows(header + [col], [r + [r[i]] for r in rows])
    return _raw_edit(edit)


def _env_text(edit):
    """setup that rewrites env.json's text with ``edit(text) -> text``."""
    def setup(tmp: Path, run: Path) -> None:
        p = run / "env.json"
        p.write_text(edit(p.read_text()), encoding="utf-8", errors="surrogatepass")
    return setup


def _env_raw_field(path: tuple[str, ...], raw: str):
    """setup that puts the JSON text ``raw`` at ``path`` (creating objects on the way)."""
    marker = "__RAW_VALUE__"

    def setup(tmp: Path, run: Path) -> None:
        p = run / "env.json"
        doc = json.loads(p.read_text())
        d = doc
        for k in path[:-1]:
            if not isinstance(d.get(k), dict):
                d[k] = {}
            d = d[k]
        d[path[-1]] = marker
        p.write_text(json.dumps(doc).replace(json.dumps(marker), raw))
    return setup


def _env_dup_key(path: tuple[str, ...]):
    """setup that writes a key twice in the object at ``path`` (() = the top level)."""
    def setup(tmp: Path, run: Path) -> None:
        p = run / "env.json"
        doc = json.loads(p.read_text())
        d = doc
        for k in path:
            if not isinstance(d.get(k), dict):
                d[k] = {"x": 1}
            d = d[k]
        key = next(iter(d)) if d else "x"
        d.setdefault(key, 1)
        text = json.dumps(doc)
        inner = json.dumps(d)
        twice = inner[:-1] + (", " if len(inner) > 2 else "") + f"{json.dumps(key)}: {json.dumps(d[key])}" + "}"
        assert inner in text
        p.write_text(text.replace(inner, twice, 1) if path else twice)
    return setup


def _special(rel: str, kind: str):
    """setup that puts a FIFO or a device (a symlink to /dev/null) at RUN/rel or TMP/rel."""
    def setup(tmp: Path, run: Path) -> None:
        base = run if rel.startswith("RUN/") else tmp
        p = base / rel.split("/", 1)[1]
        if p.exists() or p.is_symlink():
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        if kind == "fifo":
            os.mkfifo(p)
        elif kind == "device":
            p.symlink_to("/dev/null")
        elif kind == "directory":
            p.mkdir()
    return setup


# -- raw.csv: values ------------------------------------------------------------------------------
#: (column, label, value) cells refused in an ok trial row
RAW_VALUES = [("ns_per_op", lbl, v) for lbl, v in (
    ("NaN-word", "NaN"), ("Infinity", "Infinity"), ("minus-Infinity", "-Infinity"), ("1e309", "1e309"),
    ("denormal", "1e-320"), ("min-denormal", "5e-324"), ("tiny", "1e-9"), ("huge", "1e13"), ("hex", "0x10"))]
RAW_VALUES += [("elapsed_ns", lbl, v) for lbl, v in (
    ("NaN-word", "NaN"), ("Infinity", "Infinity"), ("1e309", "1e309"), ("denormal", "1e-320"), ("huge", "1e17"))]
for _col in ("trial", "round", "iteration", "order"):
    RAW_VALUES += [(_col, lbl, v) for lbl, v in (
        ("1e12", "1000000000000"), ("exp", "1e12"), ("negative", "-1"), ("NaN", "NaN"), ("Infinity", "Infinity"),
        ("digits", "9" * 30))]
RAW_VALUES += [("mode", lbl, v) for lbl, v in (
    ("zero-word", "zero"), ("three", "3"), ("negative", "-1"), ("float", "1.5"), ("NaN", "NaN"), ("Infinity", "inf"))]
RAW_VALUES += [("size", lbl, v) for lbl, v in (
    ("zero", "0"), ("one", "1"), ("1e309", "1e309"), ("huge", "99999999999"), ("text", "big"))]
RAW_VALUES += [("count", lbl, v) for lbl, v in (("zero", "0"), ("negative", "-5"), ("huge", "10000000000000"),
                                                ("NaN", "NaN"))]
RAW_VALUES += [("batch", lbl, v) for lbl, v in (("negative", "-1"), ("text", "x"), ("huge", "1000001"))]
#: required or metric columns written twice
DUP_COLUMNS = ["ns_per_op", "run_id", "experiment", "host", "variant", "trial", "round", "status", "elapsed_ns",
               "mode", "size", "stderr_tail"]
#: columns that must hold one value in the whole file
MIXED = [("run_id", "20990101T000000Z-ffffff"), ("experiment", "page_frag"), ("host", "elsewhere")]


def _raw_cases() -> list[Case]:
    out = []
    for col, label, value in RAW_VALUES:
        out.append(Case(f"compare-raw-{col}-{label}", COMPARE, "RUN/raw.csv", _set_cell(col, value), True))
    for col, label, value in RAW_VALUES[:9:2] + [("mode", "zero-word", "zero"), ("round", "1e12", "1000000000000")]:
        out.append(Case(f"summarize-raw-{col}-{label}", SUMMARIZE, "RUN/raw.csv", _set_cell(col, value), True))
        out.append(Case(f"mail-raw-{col}-{label}", MAIL, "RUN/raw.csv", _set_cell(col, value), True))
    for col in DUP_COLUMNS:
        out.append(Case(f"compare-raw-dup-{col}", COMPARE, "RUN/raw.csv", _version_3(_dup_column(col)), True))
    for col in ("ns_per_op", "run_id"):
        out.append(Case(f"summarize-raw-dup-{col}", SUMMARIZE, "RUN/raw.csv", _version_3(_dup_column(col)), True))
    for col, value in MIXED:
        for cmd, argv in (("compare", COMPARE), ("summarize", SUMMARIZE), ("mail", MAIL)):
            out.append(Case(f"{cmd}-raw-mixed-{col}", argv, "RUN/raw.csv",
                            _version_3(_set_cell(col, value, row=2)), True))
    # the UTF-8 bytes of a lone surrogate are not UTF-8
    out.append(Case("compare-raw-surrogate-bytes", COMPARE, "RUN/raw.csv",
                    lambda tmp, run: (run / "raw.csv").write_bytes(
                        (run / "raw.csv").read_bytes().replace(b"reorder,", b"re\xed\xb3\xbforder,", 1)), True))
    for cmd, argv in (("compare", COMPARE), ("summarize", SUMMARIZE), ("mail", MAIL)):
        for kind in ("fifo", "device"):
            out.append(Case(f"{cmd}-raw-{kind}", argv, "RUN/raw.csv", _special("RUN/raw.csv", kind), True))
    return out


# -- env.json: values -----------------------------------------------------------------------------
ENV_NUMBERS = {"NaN": "NaN", "Infinity": "Infinity", "minus-Infinity": "-Infinity", "1e309": "1e309",
               "digits-5000": "9" * 5000}
ENV_PLACES = {"trials-ok": ("trials", "ok"), "parameters-trials": ("parameters", "trials"),
              "parameters-count": ("parameters", "count"), "pid": ("pid",),
              "environment-cpus": ("environment", "cpus")}
ENV_DUP_PLACES = {"top": (), "parameters": ("parameters",), "trials": ("trials",), "environment": ("environment",),
                  "git": ("git",)}


def _env_cases() -> list[Case]:
    out = []
    for place, path in ENV_PLACES.items():
        for label, raw in ENV_NUMBERS.items():
            out.append(Case(f"summarize-env-{place}-{label}", SUMMARIZE, "RUN/env.json",
                            _env_raw_field(path, raw), True))
    for label in ("NaN", "Infinity"):
        for cmd, argv in (("mail", MAIL), ("provenance", PROVENANCE)):
            out.append(Case(f"{cmd}-env-trials-{label}", argv, "RUN/env.json",
                            _env_raw_field(("trials", "ok"), ENV_NUMBERS[label]), True))
    for place, path in ENV_DUP_PLACES.items():
        out.append(Case(f"summarize-env-dup-key-{place}", SUMMARIZE, "RUN/env.json", _env_dup_key(path), True))
    for cmd, argv in (("mail", MAIL), ("provenance", PROVENANCE)):
        out.append(Case(f"{cmd}-env-dup-key-top", argv, "RUN/env.json", _env_dup_key(()), True))
        out.append(Case(f"{cmd}-env-dup-key-parameters", argv, "RUN/env.json", _env_dup_key(("parameters",)), True))
    for field_ in ("host", "run_id", "experiment"):
        out.append(Case(f"summarize-env-surrogate-{field_}", SUMMARIZE, "RUN/env.json",
                        _env_raw_field((field_,), '"x\\udcffy"'), True))
    for place in (("parameters", "variants"), ("environment", "kernel"), ("warnings",)):
        out.append(Case(f"summarize-env-surrogate-{'-'.join(place)}", SUMMARIZE, "RUN/env.json",
                        _env_raw_field(place, '["\\ud800"]' if place == ("warnings",) else '"\\udcff"'), True))
    for cmd, argv in (("mail", MAIL), ("provenance", PROVENANCE)):
        out.append(Case(f"{cmd}-env-surrogate-host", argv, "RUN/env.json", _env_raw_field(("host",), '"\\udcff"'),
                        True))
    for cmd, argv in (("summarize", SUMMARIZE), ("mail", MAIL), ("provenance", PROVENANCE)):
        for kind in ("fifo", "device"):
            out.append(Case(f"{cmd}-env-{kind}", argv, "RUN/env.json", _special("RUN/env.json", kind), True))
    return out


# -- lone surrogates in arguments --------------------------------------------------------------------
SURROGATE = "x\udcffy"


def _surrogate_cases() -> list[Case]:
    return [
        Case("summarize-arg-surrogate-folder", ["summarize", f"TMP/{SURROGATE}", "--no-figures"], "TMP/"),
        Case("summarize-arg-surrogate-metric", [*SUMMARIZE, "--metric", SURROGATE], "--metric", None, True),
        Case("mail-arg-surrogate-folder", ["mail", f"TMP/{SURROGATE}"], "TMP/"),
        Case("mail-arg-surrogate-metric", [*MAIL, "--metric", SURROGATE], "--metric", None, True),
        Case("compare-arg-surrogate-baseline", ["compare", "RUN/raw.csv", "--baseline", SURROGATE], "--baseline",
             None, True),
        Case("compare-arg-surrogate-metric", [*COMPARE, "--metric", SURROGATE], "--metric", None, True),
        Case("compare-arg-surrogate-by", [*COMPARE, "--by", SURROGATE], "--by", None, True),
        Case("provenance-arg-surrogate-folder", ["provenance", f"TMP/{SURROGATE}"], "TMP/"),
        Case("run-arg-surrogate-variants", ["run", "ptr_ring", "-p", "variants", f"batch,{SURROGATE}",
                                            "--no-build", "--no-progress", "--out", "OUT"], "parameter 'variants'"),
        Case("run-arg-surrogate-param-name", ["run", "ptr_ring", "-p", SURROGATE, "1", "--no-build", "--out", "OUT"],
             "x"),
    ]


# -- git sources ------------------------------------------------------------------------------------
GIT_SOURCES = {"nosuchuser": "git:~nosuchuser/linux@v1", "nosuchuser-bare": "git:~nosuchuser@v1",
               "no-tree": "git:@v1", "no-rev": "git:~nosuchuser/linux@", "missing-tree": "git:/nonexistent/linux@v1",
               "dash-rev": "git:/tmp@-rf", "no-at": "git:/nonexistent/linux"}


def _git_cases() -> list[Case]:
    out = []
    for label, src in GIT_SOURCES.items():
        out.append(Case(f"run-kernel_headers-git-{label}", ["run", "ptr_ring", "-p", "variants", "batch,mine",
                                                            "-p", "kernel_headers", f"mine={src}", *RUN[2:]],
                        "parameter 'kernel_headers'"))
    for label in ("nosuchuser", "missing-tree"):
        out.append(Case(f"run-ringtest-tree-git-{label}", ["run", "ringtest", "-p", "tree", GIT_SOURCES[label], *RUN[2:]],
                        "parameter 'tree'"))
    out.append(Case("run-kernel_headers-nosuchuser-path", ["run", "ptr_ring", "-p", "variants", "batch,mine",
                                                           "-p", "kernel_headers", "mine=~nosuchuser/ptr_ring.h",
                                                           *RUN[2:]], "parameter 'kernel_headers'"))
    out.append(Case("bisect-tree-nosuchuser", ["bisect", "ptr_ring", "-p", "tree", "~nosuchuser/linux", "-p", "good",
                                               "v1", "-p", "bad", "v2", "--out", "OUT"], "~nosuchuser"))
    return out


# -- bisect parameters ------------------------------------------------------------------------------
BISECT_BAD = {"step_budget": ["0", "-1", "1.5", "nan", "1e9", "100001", "many"],
              "metric": ["nope", "", "stderr_tail", "variant", SURROGATE],
              "threshold": ["nan", "inf", "-1", "1e9", "lots"],
              "seed": ["x", "-1", str(2**33), "1.5"]}


def _bisect_cases() -> list[Case]:
    out = []
    for name, values in BISECT_BAD.items():
        for i, v in enumerate(values):
            argv = BISECT[:2] + ["-p", name, v] + BISECT[2:]
            out.append(Case(f"bisect-{name}-{i}-{v[:8].encode('ascii', 'replace').decode()}", argv,
                            f"parameter '{name}'"))
    return out


# -- special files in place of a file option ----------------------------------------------------------
def _file_option_cases() -> list[Case]:
    out = []
    for kind in ("directory", "fifo"):
        out.append(Case(f"env-restore-state-file-{kind}", ["env", "--restore", "--state-file", "TMP/state"],
                        "--state-file", _special("TMP/state", kind)))
    for kind in ("directory", "fifo", "device"):
        out.append(Case(f"provenance-against-{kind}", [*PROVENANCE, "--against", "TMP/other"], "TMP/other",
                        _special("TMP/other", kind), True))
    out.append(Case("env-restore-state-file-dev-null", ["env", "--restore", "--state-file", "/dev/null"],
                    "--state-file"))
    out.append(Case("env-restore-state-file-dev-zero", ["env", "--restore", "--state-file", "/dev/zero"],
                    "--state-file"))
    for kind in ("fifo", "device"):
        out.append(Case(f"import-perf-{kind}", ["import-perf", "TMP/perf.txt"], "TMP/perf.txt",
                        _special("TMP/perf.txt", kind)))
    return out


# -- numeric run parameters: digits of other scripts, subnormal numbers ----------------------------------
def _number_cases() -> list[Case]:
    out = []
    for name in ("trials", "seed", "sizes", "count", "batch"):
        out.append(Case(f"run-ptr_ring-{name}-fullwidth", ["run", "ptr_ring", "-p", name, "\uff19", *RUN[2:]],
                        f"parameter '{name}'"))
    for name in ("target_ci", "budget", "quiet_timeout", "timeout"):
        out.append(Case(f"run-ptr_ring-{name}-subnormal", ["run", "ptr_ring", "-p", name, "1e-320", *RUN[2:]],
                        f"parameter '{name}'"))
        out.append(Case(f"run-ptr_ring-{name}-arabic", ["run", "ptr_ring", "-p", name, "\u0665", *RUN[2:]],
                        f"parameter '{name}'"))
    return out


CORPUS = _number_cases() + _raw_cases() + _env_cases() + _surrogate_cases() + _git_cases() + _bisect_cases() + _file_option_cases()


def test_corpus_is_large_and_distinct():
    assert len(CORPUS) >= 150, len(CORPUS)
    assert len({c.id for c in CORPUS}) == len(CORPUS)


@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    yield from in_process_run(tmp_path_factory.mktemp("bad-inputs-data"), GOOD_PARAMS)


@pytest.fixture(scope="module")
def git_before():
    return git_status()


@pytest.mark.parametrize("case", CORPUS, ids=[c.id for c in CORPUS])
def test_bad_input_exits_2_with_one_line(good_run, git_before, tmp_path, monkeypatch, capsys, case):
    check_refused(case, good_run, tmp_path, monkeypatch, capsys, git_before)


# -- size ---------------------------------------------------------------------------------------------
def _big_raw(good: Path, dest: Path, rows: int) -> None:
    """A raw.csv of ``rows`` trial rows: the good run's rows repeated with fresh trial numbers."""
    shutil.copy(good / "env.json", dest.parent / "env.json")   # a version-4 raw.csv's constants
    lines = (good / "raw.csv").read_text().splitlines()
    header, body = lines[0].split(","), [ln.split(",") for ln in lines[1:]]
    ti, ri = header.index("trial"), header.index("round")
    with open(dest, "w") as f:
        f.write(lines[0] + "\n")
        for n in range(rows):
            r = list(body[n % len(body)])
            k = n // len(body)
            r[ti] = r[ri] = str(k)
            f.write(",".join(r) + "\n")


def test_compare_reads_ten_thousand_rows(good_run, tmp_path, capsys):
    raw = tmp_path / "raw.csv"
    _big_raw(good_run, raw, 10_000)
    assert len(read_raw(raw)) == 10_000
    assert cli.main(["compare", str(raw), "--baseline", "batch", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res and all(r["baseline"] == "batch" for r in res)


def test_raw_over_the_size_cap_is_refused_unread(good_run, tmp_path, monkeypatch, capsys):
    raw = tmp_path / "raw.csv"
    _big_raw(good_run, raw, 200)
    monkeypatch.setattr(rawcsv, "MAX_RAW_BYTES", raw.stat().st_size - 1)

    def no_read(*a, **k):   # pragma: no cover - the point is that it is not called
        raise AssertionError("a raw.csv over the cap was read")
    monkeypatch.setattr(rawcsv, "check_rows", no_read)
    with pytest.raises(DataError, match="larger than"):
        read_raw(raw)
    assert cli.main(["compare", str(raw), "--baseline", "batch"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(raw) in err[0] and "GiB" in err[0]


def test_raw_over_the_row_cap_is_refused(good_run, tmp_path, monkeypatch):
    raw = tmp_path / "raw.csv"
    _big_raw(good_run, raw, 50)
    monkeypatch.setattr(rawrows, "MAX_RAW_ROWS", 49)
    with pytest.raises(DataError, match="more than 49 trial rows"):
        read_raw(raw)
