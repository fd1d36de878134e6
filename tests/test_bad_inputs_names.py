"""Bad names and outputs: every one ends in exit code 2, one line naming the input, nothing written.

Names never become paths (``ringlab.names``: host ids, node names, run ids, variant names, labels),
outputs never land on a run's inputs (``ringlab.rundir.outputs``), compiler options that write
files are refused (``ringlab.build.cflags.writes_files``), and text from data files reaches a
terminal, a mail or markdown without control characters (``ringlab.fmt.printable``).

Each case is an argv for ``ringlab.cli.main`` (in this process), with the placeholders RUN (the
case's copy of a good run folder), OUT (a path that must stay absent) and TMP (the case's
folder), an optional environment and an optional ``setup(tmp, run)``.  For every case: exit code 2,
one line on stderr naming the input, no traceback, nothing new or changed below TMP (results/
and scratch/ point there) and the checkout's ``git status`` unchanged.
"""
from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from ringlab import fmt, names, schema
from ringlab.lab import cli
from ringlab.lab.commands.bisect import bisect_label

from tests.fakes.cli_runs import in_process_run
from tests.fakes.corpus import Case, check_refused, git_status
from tests.fakes.raw_versions import as_version_3

ROOT = Path(__file__).resolve().parent.parent
GOOD = ["-p", "profile", "smoke", "-p", "cpus", "none", "-p", "governor", "false",
        "-p", "modes", "0", "-p", "trials", "2", "-p", "warmup", "0"]
GOOD_PARAMS = GOOD + ["-p", "variants", "batch,reorder"]
RUN_PTR = ["run", "ptr_ring", *GOOD, "--no-build", "--no-progress"]


#: names that are not names: a path, a separator, shell text, escapes, markup, too long ...
HOSTILE = {
    "dotdot_deep": "../../../../tmp/x", "dotdot": "..", "dot": ".", "parent": "../x", "slash": "a/b",
    "abs": "/tmp/x", "semicolon": "a;b", "space": "a b", "newline": "a\nb", "tab": "a\tb",
    "long65": "a" * 65, "long1000": "n" * 1000, "hidden": ".hidden", "dash": "-lab2", "inner_dotdot": "a..b",
    "unicode": "h\u00e9te", "ansi": "a\x1b[31mred", "osc": "\x1b]0;title\x07x", "html": "<b>x</b>",
    "subst": "$(id)", "backquote": "`id`", "glob": "a*", "tilde": "~root", "nul": "a\x00b",
}


def _rewrite_raw(col: str, value: str, row: int = 0):
    """setup: RUN/raw.csv with ``col`` of data row ``row`` set to ``value`` (CSV-quoted as needed)."""
    def setup(tmp: Path, run: Path) -> None:
        if col in schema.RUN_CONSTANT_COLUMNS:     # kept in env.json since version 4: the older layout has it
            as_version_3(run)
        rows = list(csv.reader(io.StringIO((run / "raw.csv").read_text())))
        rows[1 + row][rows[0].index(col)] = value
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        (run / "raw.csv").write_text(buf.getvalue())
    return setup


def _rewrite_env(**fields):
    def setup(tmp: Path, run: Path) -> None:
        doc = json.loads((run / "env.json").read_text())
        for k, v in fields.items():
            if k == "variants":
                doc.setdefault("parameters", {})["variants"] = v
            elif k.startswith("run_constants."):     # raw.csv's run constants, kept in env.json
                doc["run_constants"][k.split(".", 1)[1]] = v
            else:
                doc[k] = v
        (run / "env.json").write_text(json.dumps(doc))
    return setup


def _link_to(name: str):
    def setup(tmp: Path, run: Path) -> None:
        (tmp / "link").symlink_to(run / name)
    return setup


def _figures(tmp: Path, run: Path) -> None:
    (run / "figures").mkdir()


def _perf_file(tmp: Path, run: Path) -> None:
    shutil.copyfile(ROOT / "ringlab" / "data" / "seed000_perfstat.txt", tmp / "perf.txt")


def _cases() -> list[Case]:
    out: list[Case] = []
    # host ids: --host, $RINGLAB_HOST
    for k in ("dotdot_deep", "dotdot", "parent", "slash", "abs", "semicolon", "newline", "long1000",
              "hidden", "ansi", "html", "unicode", "subst"):
        out.append(Case(f"host-option-{k}", ["reproduce", "--only", "00", "--host", HOSTILE[k]], "--host"))
    out.append(Case("host-option-empty", ["reproduce", "--only", "00", "--host", ""], "--host"))
    out.append(Case("host-option-dash", ["reproduce", "--only", "00", "--host=-lab2"], "--host"))
    for k in ("dotdot_deep", "parent", "slash", "semicolon", "newline", "long1000", "hidden", "dash",
              "ansi", "osc", "unicode"):
        out.append(Case(f"host-env-{k}", ["env", "--no-probe"], "$RINGLAB_HOST", env={"RINGLAB_HOST": HOSTILE[k]}))
    out.append(Case("host-env-run", [*RUN_PTR, "-p", "variants", "batch", "--out", "OUT"], "$RINGLAB_HOST",
                    env={"RINGLAB_HOST": "../../etc"}))
    # node names: fleet submit --nodes
    for k in ("dotdot_deep", "dotdot", "parent", "slash", "semicolon", "space", "newline", "long1000", "unicode",
              "subst", "hidden", "html"):
        out.append(Case(f"nodes-{k}", ["fleet", "submit", f"--nodes={HOSTILE[k]}", "--", "run", "ptr_ring"],
                        "'--nodes'"))
    out.append(Case("nodes-second-of-list", ["fleet", "submit", "--nodes", "a,../../etc", "--", "run", "ptr_ring"],
                    "'--nodes'"))
    out.append(Case("nodes-dash", ["fleet", "submit", "--nodes=-x", "--", "run", "ptr_ring"], "'--nodes'"))
    out.append(Case("nodes-empty", ["fleet", "submit", "--nodes", ",", "--", "run", "ptr_ring"], "'--nodes'"))
    # fleet and run ids
    for k in ("parent", "slash", "dotdot"):
        out.append(Case(f"fleet-id-{k}", ["fleet", "status", HOSTILE[k]], "FLEET-ID"))
    # variant names on the command line
    for k in ("parent", "slash", "ansi", "osc", "newline", "html", "long65", "hidden", "unicode", "dash", "space",
              "inner_dotdot"):
        out.append(Case(f"variants-option-{k}", [*RUN_PTR, "-p", "variants", "batch," + HOSTILE[k], "--out", "OUT"],
                        "parameter 'variants'"))
    out.append(Case("variants-signed-off-by", [*RUN_PTR, "-p", "variants", "batch,x\nSigned-off-by: evil <e@x>",
                                               "--out", "OUT"], "parameter 'variants'"))
    out.append(Case("variants-page-frag", ["run", "page_frag", "-p", "variants", "../x", "--no-build", "--out", "OUT"],
                    "parameter 'variants'"))
    out.append(Case("kernel-header-name", [*RUN_PTR, "-p", "variants", "batch,..x", "-p", "kernel_headers",
                                           "..x=TMP/h.h", "--out", "OUT"], "'variants'"))
    # names read back from raw.csv, through compare, mail and summarize
    for k in ("ansi", "osc", "newline", "html", "parent", "slash", "long65"):
        v = "x\nSigned-off-by: evil <e@x>" if k == "newline" else HOSTILE[k]
        for cmd, argv in (("compare", ["compare", "RUN/raw.csv", "--baseline", "batch"]), ("mail", ["mail", "RUN"]),
                          ("summarize", ["summarize", "RUN", "--no-figures"])):
            if cmd == "summarize" and k not in ("html", "ansi", "newline"):
                continue
            out.append(Case(f"raw-variant-{k}-{cmd}", argv, "column 'variant'", _rewrite_raw("variant", v),
                            needs_run=True))
    for col in ("host", "run_id"):
        for k in ("dotdot_deep", "ansi"):
            out.append(Case(f"raw-{col}-{k}", ["mail", "RUN"], f"column '{col}'", _rewrite_raw(col, HOSTILE[k]),
                            needs_run=True))
            out.append(Case(f"constants-{col}-{k}", ["mail", "RUN"], f"column '{col}'",
                            _rewrite_env(**{f"run_constants.{col}": HOSTILE[k]}), needs_run=True))
    # names read back from env.json
    out += [
        Case("env-host-parent", ["mail", "RUN"], "field 'host'", _rewrite_env(host="../../x"), needs_run=True),
        Case("env-host-ansi", ["mail", "RUN"], "field 'host'", _rewrite_env(host="\x1b[2Jx"), needs_run=True),
        Case("env-run-id-slash", ["mail", "RUN"], "field 'run_id'", _rewrite_env(run_id="a/b"), needs_run=True),
        Case("env-baseline-newline", ["mail", "RUN"], "field 'baseline'", _rewrite_env(baseline="a\nb"),
             needs_run=True),
        Case("env-variants-osc", ["mail", "RUN"], "field 'parameters.variants'",
             _rewrite_env(variants=["batch", "\x1b]8;;http://e\x07x"]), needs_run=True),
        Case("env-variants-html", ["summarize", "RUN", "--no-figures"], "field 'parameters.variants'",
             _rewrite_env(variants="batch,<img src=x>"), needs_run=True),
    ]
    # summarize labels
    for i, item in enumerate(("../x=y", "batch=a\nb", "batch=<b>x</b>", "batch=\x1b[31mx", "a/b=c")):
        out.append(Case(f"summarize-label-{i}", ["summarize", "RUN", "--no-figures", "--label", item], "--label",
                        needs_run=True))
    # outputs on a run's inputs
    for name in ("env.json", "raw.csv", "summary.md", "compare.csv"):
        out.append(Case(f"mail-o-{name}", ["mail", "RUN", "-o", f"RUN/{name}"], "'-o'", needs_run=True))
    out += [
        Case("mail-o-folder", ["mail", "RUN", "-o", "RUN"], "'-o'", needs_run=True),
        Case("mail-o-link-to-env", ["mail", "RUN", "-o", "TMP/link"], "'-o'", _link_to("env.json"), needs_run=True),
        Case("mail-o-figures", ["mail", "RUN", "-o", "RUN/figures/mail.txt"], "'-o'", _figures, needs_run=True),
        Case("import-perf-csv-raw", ["import-perf", "TMP/perf.txt", "--csv", "RUN/raw.csv"], "'--csv'", _perf_file,
             needs_run=True),
        Case("import-perf-csv-env", ["import-perf", "TMP/perf.txt", "--csv", "RUN/env.json"], "'--csv'",
             _perf_file, needs_run=True),
        Case("run-out-raw", [*RUN_PTR, "-p", "variants", "batch", "--out", "RUN/raw.csv"], "'--out'", needs_run=True),
        Case("run-out-inside", [*RUN_PTR, "-p", "variants", "batch", "--out", "RUN/sub"], "'--out'", needs_run=True),
        Case("calibrate-out-env", ["calibrate", "--from", "RUN", "--out", "RUN/env.json"], "'--out'", needs_run=True),
        Case("bisect-out-inside", ["bisect", "ptr_ring", "-p", "tree", "TMP", "-p", "good", "a", "-p", "bad", "b",
                                   "--out", "RUN/steps"], "'--out'", needs_run=True),
    ]
    # compiler options that write files
    for opt in ("-fopt-info-all=victim.txt", "-fopt-info", "-fdump-tree-all", "-save-temps", "-fstack-usage",
                "-fcallgraph-info", "-MD", "-Wa,-adhln=x", "-Wl,-Map=x", "-Xassembler", "-fprofile-generate",
                "-fsave-optimization-record", "-gsplit-dwarf", "-fdiagnostics-format=sarif-file", "-aux-info"):
        out.append(Case(f"cflags{opt}", [*RUN_PTR, "-p", "variants", "batch", "-p", "cflags", f"-O2 {opt}",
                                         "--out", "OUT"], "parameter 'cflags'"))
    return out


CORPUS = _cases()


def test_corpus_is_large_and_distinct():
    assert len(CORPUS) >= 100, len(CORPUS)
    assert len({c.id for c in CORPUS}) == len(CORPUS)


@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    yield from in_process_run(tmp_path_factory.mktemp("bad-names"), GOOD_PARAMS)


@pytest.fixture(scope="module")
def git_before():
    return git_status()


@pytest.mark.parametrize("case", CORPUS, ids=[c.id for c in CORPUS])
def test_bad_name_exits_2_with_one_line(good_run, git_before, tmp_path, monkeypatch, capsys, case):
    check_refused(case, good_run, tmp_path, monkeypatch, capsys, git_before)


# -- the validator ---------------------------------------------------------------------------------
@pytest.mark.parametrize("good", ["batch", "reorder", "v6.1", "my_box-2", "A", "a" * 64, "x.y.z", "0", "_x",
                                  "20261130T043821Z-1a2b3c", "ptr_ring_test-batch"])
def test_names_pass_unchanged(good):
    assert names.name_problem(good) is None and names.check_name(good, "--host") == good


@pytest.mark.parametrize("key", sorted(HOSTILE))
def test_hostile_names_are_refused_naming_the_input_and_the_rule(key):
    with pytest.raises(names.BadNameError) as e:
        names.check_name(HOSTILE[key], "--host")
    msg = str(e.value)
    assert msg.startswith("--host: ") and names.NAME_RULE in msg and "\n" not in msg and "\x1b" not in msg
    assert len(msg) < 400
    assert e.value.exit_code == 2


@pytest.mark.parametrize("bad", ["", None, 3, ["a"], "a" * 65])
def test_not_names(bad):
    assert names.name_problem(bad) is not None


def test_data_names_name_the_file_and_the_field():
    with pytest.raises(names.BadDataNameError) as e:
        names.check_data_name("../x", "RUN/raw.csv", "column 'variant' (row 3):")
    assert str(e.value).startswith("RUN/raw.csv: column 'variant' (row 3): '../x' is not a name")


def test_bisect_label_is_a_name():
    assert bisect_label("ptr_ring", "v6.1", "v6.2") == "ptr_ring-v6.1-v6.2"
    for good, bad in (("origin/master", "HEAD~3"), ("../../etc", "a" * 40), ("a\nb", "$(id)"), ("..", "...")):
        label = bisect_label("ptr_ring", good, bad)
        assert names.name_problem(label) is None, label


# -- the sanitiser ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text, shown", [
    ("plain text", "plain text"), ("a\x1b[31mred\x1b[0m", "ared"), ("x\x1b]0;title\x07y", "xy"),
    ("x\x1b]8;;http://e\x1b\\link\x1b]8;;\x1b\\", "xlink"), ("del\x7f", "del?"), ("c1\x85x", "c1?x"),
    ("csi\x9b2Jx", "csix"), ("a\nb\tc", "a?b?c"), ("bell\x07", "bell?"), ("nul\x00", "nul?"),
    ("sur\udc80x", "sur?x"), ("\u00e9t\u00e9", "\u00e9t\u00e9"), (None, ""), (12, "12"),
])
def test_printable_strips_controls_and_escapes(text, shown):
    assert fmt.printable(text) == shown


def test_printable_keeps_lines_when_asked_and_escapes_html():
    assert fmt.printable("a\nb\tc\r\x1b[1m", multiline=True) == "a\nb\tc?"
    assert fmt.printable("<b>x</b> & y", html=True) == "&lt;b&gt;x&lt;/b&gt; &amp; y"
    assert fmt.printable("<b>x</b>") == "<b>x</b>"


def test_markdown_cells_are_printable():
    table = fmt.md_table(["variant"], [["a\x1b[31mb"], ["c|d"], ["e\nf"]])
    assert "\x1b" not in table and "c\\|d" in table and "e f" in table


def test_mail_into_its_own_file_of_the_run(good_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(good_run, run)
    env_before = (run / "env.json").read_bytes()
    assert cli.main(["mail", str(run), "-o", str(run / "mail.txt")]) == 0
    text = (run / "mail.txt").read_text()
    assert "batch" in text and "\x1b" not in text and capsys.readouterr().out == ""
    assert (run / "env.json").read_bytes() == env_before


@pytest.mark.parametrize("key", ["dotdot_deep", "slash", "newline", "long1000", "hidden"])
def test_notebook_host_parameter_is_a_name(tmp_path, monkeypatch, key):
    from ringlab.errors import ParamError
    from ringlab.lab import notebook
    monkeypatch.setenv("RINGLAB_SCRATCH", str(tmp_path / "scratch"))
    with pytest.raises(ParamError, match=r"^parameter 'host': .* is not a name"):
        notebook.run_dir("", "ptr-ring-reorder", HOSTILE[key])
    assert not (tmp_path / "scratch").exists()
    assert notebook.run_dir("", "ptr-ring-reorder", "lab2").parent.name == "lab2"


def test_provenance_prints_no_escapes(good_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(good_run, run)
    doc = json.loads((run / "env.json").read_text())
    doc["status_reason"] = "x\x1b]0;pwned\x07y"
    doc.setdefault("git", {})["subject"] = "\x1b[2Jsubject"
    (run / "env.json").write_text(json.dumps(doc))
    cli.main(["provenance", str(run)])
    cap = capsys.readouterr()
    assert "\x1b" not in cap.out + cap.err and cap.out
