"""``ringlab mail``: the run as plain text for a mailing-list reply.

The golden file comes from the SYNTHETIC run folder in tests/data/mail (test data
written by make_data.py, not a measurement).  When the statistics or the layout
change on purpose, regenerate it and review the diff:

    RINGLAB_REGEN_GOLDEN=1 pytest tests/test_mail.py
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ringlab import rundir
from ringlab.report import mail
from ringlab.report.mailfmt import path_lines
from ringlab.lab.cli import main as cli_main
from ringlab.experiments import get
from tests.committed import committed

DATA = Path(__file__).resolve().parent / "data" / "mail"
GOLDEN = DATA / "expected.txt"
REGEN = os.environ.get("RINGLAB_REGEN_GOLDEN") == "1"


@pytest.fixture(scope="module")
def text() -> str:
    return mail.mail_text(DATA)


def test_matches_golden_file():
    text = mail.mail_text(DATA)
    if REGEN:
        GOLDEN.write_text(text)
        pytest.skip(f"regenerated {GOLDEN}")
    assert text == GOLDEN.read_text(), "ringlab mail output changed: review, then RINGLAB_REGEN_GOLDEN=1"


@pytest.mark.parametrize("width", [72, 60, 100])
def test_plain_text_within_width(width):
    text = mail.mail_text(DATA, width=width)
    for line in text.splitlines():
        assert len(line) <= width, line
        assert not line.startswith(("#", "|", "```", "- ", "* ")), f"markdown: {line}"
        assert "**" not in line and "`" not in line, f"markdown: {line}"
    assert text.endswith("\n") and "\t" not in text


def test_contents_a_reviewer_needs(text):
    lines = text.splitlines()
    assert lines[0].startswith("ringlab ptr_ring: patched against base on synthetic-test-host")
    assert "PMU" in text.split("\n\n")[0], "the PMU line comes right after the headlines"
    for needle in ("test machine: ", " threads ", " socket (Synthetic CPU (test data))", "kernel 0.0.0-test",
                   "noise floor:", "%change", "base", "patched", "ns/op", "mode=0 same-cpu", "instr/op mode=0 (callgrind)",
                   "not measured here:", "papermill notebooks/12-patch-ab.ipynb", "-p patch builtin:flush-delay",
                   "ringlab 0123456789ab", "summary.md"):
        assert needle in text, needle
    assert "out_dir" not in text and "/tmp/test/run" not in text, "the run folder is not a parameter to reuse"
    assert "sha256" not in text, "hashes go to env.json and summary.md"


#: a %change as the mail prints it: a signed percent, or past ±50% a factor ("×9.7 faster")
_CHANGE = r"(?:[+-]\d+\.\d%|×[\d.]+ \w+)"


def _rows(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if re.match(r"^\s+\S+\s+(±\d+%)?\s+(\*?[+-]\d|\*?×\d|\|Δ\|)", ln)]


def _next_rows(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if re.match(rf"^  {_CHANGE} \[[^]]+\]\s+next \[[^]]+\]", ln)]


def test_each_compared_row_gives_its_ci_and_next_run_interval(text):
    """One line per compared row: this run's 95% CI and the next-run interval, both + = better,
    read from the Comparison fields; a header says what each interval means."""
    from ringlab.report.tables import gain_ci, next_gain_ci
    from ringlab.rundir.calibration import with_host_next_run
    from ringlab.stats import compare
    cmp = with_host_next_run(compare(pd.read_csv(DATA / "raw.csv"), "base"), "synthetic-test-host")
    nexts = _next_rows(text)
    words = " ".join(text.split())
    assert len(nexts) == len(cmp) and "[95% CI]: this run, the verdicts'" in words and "next: another run here, 95%" in words
    for (_, r), ln in zip(cmp.iterrows(), nexts):
        lo, hi = gain_ci(r)
        nlo, nhi = next_gain_ci(r)
        assert f"[{lo:+.1f}, {hi:+.1f}]" in ln and f"next [{nlo:+.1f}, {nhi:+.1f}]" in ln, ln
        assert nlo <= lo and hi <= nhi, "the next run's interval holds this run's CI"


def test_change_and_arms_are_the_comparison_fields(text):
    """Independent of the golden: each row prints the Comparison's arm figures and its %change
    with + = better (gain_pct), marked *..* exactly when the verdict is significant."""
    from ringlab.stats import compare
    from ringlab.stats.contract import SIGNIFICANT
    df = pd.read_csv(DATA / "raw.csv")
    cmp = compare(df, "base")
    rows = _rows(text)
    for _, r in cmp.iterrows():
        g = f"{r['gain_pct']:+.1f}%"
        g = f"*{g}*" if r["verdict"] in SIGNIFICANT else g
        hit = [ln for ln in rows if f"mode={r['mode']} " in ln and "instr" not in ln]
        base, cand = r["center_baseline"], r["center_candidate"]      # the figures the %change is made of
        assert any(f"{base:.4g}" in ln and g in ln and f"{cand:.4g}" in ln for ln in hit), (g, hit)
        assert abs((base - cand) / base * 100 - r["gain_pct"]) < 1e-6 * max(1.0, abs(r["gain_pct"]))
        assert (r["gain_pct"] > 0) == (r["delta_pct"] < 0), "+ means faster for a time metric"
    ic = df[df["icount_source"] == "callgrind"].groupby("variant")["instructions_per_op"].median()
    assert any(f"{ic['base']:.4g}" in ln and f"{ic['patched']:.4g}" in ln and "instr/op" in ln for ln in rows)


def test_noise_floor_is_the_calibrations_bound(tmp_path, monkeypatch):
    cal = tmp_path / "results" / "calibration" / "synthetic-test-host"
    cal.mkdir(parents=True)
    (cal / "calibration.json").write_text(json.dumps({"sigma_layout": 0.01, "round_sd": 0.02, "layouts": 8,
                                                       "aa_ci": [-0.02, 0.0285], "run_id": "AA-RUN"}))
    monkeypatch.setenv("RINGLAB_RESULTS", str(tmp_path / "results"))
    from ringlab import paths
    monkeypatch.setattr(paths, "results_dir", lambda: tmp_path / "results")
    text = " ".join(mail.mail_text(DATA).split())
    assert "noise floor: |Δ| < 2.9% (A/A, calibration AA-RUN, 8 layout pairs)" in text
    monkeypatch.setattr(paths, "results_dir", lambda: tmp_path / "nowhere")
    assert "noise floor: not calibrated on synthetic-test-host" in " ".join(mail.mail_text(DATA).split())


def _committed_ab_runs() -> list[Path]:
    root = Path(__file__).resolve().parent.parent / "results"
    out = []
    for exp in ("ptr-ring-reorder", "ptr-ring-batch-zeroing", "patch-ab", "page-frag", "perf-ring-buffer"):
        out += committed(sorted(p for p in (root / exp).glob("*/*") if (p / "raw.csv").is_file()))
    return out


def _committed_mails() -> list[Path]:
    """Every committed mail.txt, the kernel-tests replies included."""
    root = Path(__file__).resolve().parent.parent / "results"
    return committed(sorted(root.glob("*/*/*/mail.txt")))


#: one screen: a reply of three compared rows or fewer fits SCREEN lines
SCREEN = 60


def screen_limit(text: str) -> int:
    """The most lines a reply may have (docs/cli.md, "A reply for the list"): SCREEN, plus two for
    each compared row past three (its table row and its interval line), one for each other table
    row (instruction counts, an A/A control, a further run's row) and three for each table past
    the first (its head, its rule and a blank line), and past three compared rows the lines of a
    warning the run raised (what disturbed the measurement is never cut to fit)."""
    rows, nexts = len(_rows(text)), len(_next_rows(text))
    compared = nexts or rows
    tables = sum(1 for ln in text.splitlines() if ln.startswith("-----"))
    warned = _warning_lines(text) if compared > 3 else 0
    return SCREEN + 2 * max(0, compared - 3) + max(0, rows - max(compared, 3)) + 3 * max(0, tables - 1) + warned


def _warning_lines(text: str) -> int:
    """The lines of the reply's ``warning:`` paragraph (it runs to the next blank line or the next
    line that starts a statement of its own)."""
    lines, n, inside = text.splitlines(), 0, False
    for ln in lines:
        if ln.startswith("warning: "):
            inside = True
        elif inside and (not ln.strip() or ln.startswith(("reproduce ", "not measured", "Published", "To paste"))):
            inside = False
        n += inside
    return n


def test_a_warning_adds_its_lines_to_the_screen_past_three_rows():
    six = "\n".join(["  +1.0% [-1, +3]    next [-2, +4]    a mode=0 same-cpu"] * 6)
    assert screen_limit(six + "\nwarning: other work ran\n  on the CPUs\n\nreproduce (x)\n") == screen_limit(six) + 2
    three = "\n".join(["  +1.0% [-1, +3]    next [-2, +4]    a mode=0 same-cpu"] * 3)
    assert screen_limit(three + "\nwarning: other work ran\n") == screen_limit(three), "three rows: one screen, 60 lines"


def _list_shape(text: str, where: str) -> None:
    """The reply's shape: 72 columns, a %change table, one screen (``screen_limit``), the machine
    line, the noise floor, n, the one sign stated, the PMU up front, the block to paste into a commit
    message, tree paths."""
    lines = text.splitlines()
    rows = _rows(text)
    nexts = _next_rows(text)   # each comparison's two intervals: the second half of its table row
    assert rows, f"{where}: a %change table"
    assert len(nexts) <= len(rows), f"{where}: one interval line per compared row at most"
    assert all(len(ln) <= 72 for ln in lines), f"{where}: " + max(lines, key=len)
    assert len(lines) <= screen_limit(text), f"{where}: {len(lines)} lines, one screen is {screen_limit(text)} here"
    if len(nexts or rows) <= 3:
        assert len(lines) <= SCREEN, f"{where}: {len(lines)} lines for {len(nexts or rows)} rows"
    assert any(ln.startswith("test machine: ") and " threads " in ln and re.search(r" sockets? \(", ln)
               for ln in lines), f"{where}: the machine line"
    flat = " ".join(text.split())
    assert "noise floor: " in text and "%change" in text and "PMU" in text.split("\n\n")[0], where
    assert re.search(r"\bn: \d", flat), f"{where}: no 'n: ...' line (how many runs the rows rest on)"
    assert "+ = better" in flat and "mail sign" not in flat, f"{where}: the one sign convention, stated"
    assert "To paste into the commit message" in text and "Measured with ringlab " in text, \
        f"{where}: no block to paste into a commit message"
    assert "/work/" not in text, f"{where}: paths relative to the tree"


@pytest.mark.committed_run
@pytest.mark.parametrize("mail_file", _committed_mails(), ids=lambda p: f"{p.parts[-4]}/{p.parts[-3]}")
def test_every_committed_mail_is_in_the_lists_shape(mail_file):
    """n, the block to paste, the one sign and one screen, in every committed reply as it was
    rendered (not as today's code would render it: a layout change does not rewrite results/)."""
    _list_shape(mail_file.read_text(), str(mail_file))


@pytest.mark.parametrize("run", _committed_ab_runs(), ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_every_committed_ab_runs_mail_recomputes(run):
    """Every number of the committed mail.txt that ``ringlab verify`` checks recomputes from the
    run's raw.csv (one analysis: the reply cannot drift from the data), whatever layout it was
    rendered in."""
    from ringlab.report import verify
    committed = run / "mail.txt"
    assert committed.is_file(), f"{run}: no mail.txt (ringlab mail {run} -o {committed})"
    res = verify.verify(run)
    assert "mail.txt" in res.files
    wrong = [f for f in res.findings if f.file == "mail.txt"]
    assert not wrong, f"{committed}:\n" + "\n".join(map(str, wrong))


def test_the_shape_check_can_fail():
    good = mail.mail_text(DATA)
    _list_shape(good, "synthetic")
    long = good.replace("\n\n", "\n\n" + "filler\n" * (SCREEN - len(good.splitlines()) + 1), 1)
    for bad in (good.replace("noise floor: ", "floor "), good + "x" * 73 + "\n",
                "\n".join(ln for ln in good.splitlines() if not ln.startswith("test machine: ")),
                good.replace("To paste into the commit message", "To paste"), good.replace("+ = better", "+ = slower"),
                re.sub(r"\bn: ", "count: ", good), long):
        with pytest.raises(AssertionError):
            _list_shape(bad, "broken")
    row = "    2.93  ±18%    +0.9%        2.902  ±13%  mode=0 same-cpu"
    nxt = "  +0.9% [+0.2, +1.7]    next [-3.4, +5.2]    mode=0 same-cpu"

    def made(compared: int, other: int, tables: int) -> str:
        return "\n".join(["-" * 62] * tables + [row] * (compared + other) + [nxt] * compared)
    assert screen_limit(made(3, 0, 1)) == SCREEN and screen_limit(made(2, 0, 1)) == SCREEN
    assert screen_limit(made(5, 0, 1)) == SCREEN + 4          # two lines for each compared row past three
    assert screen_limit(made(3, 2, 1)) == SCREEN + 2          # one for each other row
    assert screen_limit(made(3, 0, 3)) == SCREEN + 6          # three for each table past the first
    assert screen_limit("\n".join(["-" * 62, row])) == SCREEN  # a table without intervals (kernel-tests)


def _command(text: str, first: str) -> list[str]:
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.strip().startswith(first))
    cmd = []
    for ln in lines[i:]:
        cmd.append(ln)
        if not ln.endswith("\\"):
            break
    # the shell drops backslash-newline, wherever it is
    return shlex.split("\n".join(cmd).replace("\\\n", ""))


def _without_notebook(tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(DATA, run)
    (run / "12-patch-ab.ipynb").unlink()
    return run


def test_run_command_spells_out_every_parameter(tmp_path):
    env = json.loads((DATA / "env.json").read_text())
    words = _command(mail.mail_text(_without_notebook(tmp_path)), "ringlab run")
    assert words[:3] == ["ringlab", "run", "ptr_ring"]
    given = dict(zip(words[4::3], words[5::3]))
    assert words[3::3] == ["-p"] * len(given)
    spec = get("ptr_ring").all_params()
    assert set(given) == set(env["parameters"])
    for k, v in env["parameters"].items():
        assert spec[k].parse(given[k]) == v, k


def test_width_breaks_long_words_with_a_shell_continuation(tmp_path):
    text = mail.mail_text(_without_notebook(tmp_path), width=60)
    words = _command(text, "ringlab run")
    kh = words[words.index("kernel_headers") + 1]
    assert kh == json.loads((DATA / "env.json").read_text())["parameters"]["kernel_headers"]


def test_baseline_defaults_and_choice(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(DATA, run)
    env = json.loads((run / "env.json").read_text())
    env["parameters"]["variants"] = ["patched", "base"]
    (run / "env.json").write_text(json.dumps(env))
    assert mail.mail_text(run).startswith("ringlab ptr_ring: base against patched")
    assert mail.mail_text(run, baseline="base").startswith("ringlab ptr_ring: patched against base")
    with pytest.raises(mail.MailError, match="--baseline: 'nope'.*allowed: base, patched"):
        mail.mail_text(run, baseline="nope")


def test_cli(tmp_path, capsys, text):
    assert cli_main(["mail", str(DATA)]) == 0
    assert capsys.readouterr().out == text
    out = tmp_path / "m.txt"
    assert cli_main(["mail", str(DATA), "--width", "64", "-o", str(out)]) == 0
    assert max(len(ln) for ln in out.read_text().splitlines()) <= 64


@pytest.mark.parametrize("argv, msg", [
    (["--baseline", "nope"], "--baseline: 'nope'"),
    (["--width", "20"], "--width: 20 is too narrow"),
    (["--candidate", "base"], "--candidate: base"),
])
def test_cli_bad_input(argv, msg, capsys):
    assert cli_main(["mail", str(DATA), *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and "allowed" in err and "Traceback" not in err


def test_cli_not_a_run_folder(tmp_path, capsys):
    assert cli_main(["mail", str(tmp_path)]) == 2
    assert "RUN: no raw.csv" in capsys.readouterr().err


def test_no_instruction_counts_says_so(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(DATA, run)
    df = rundir.read_raw(run / "raw.csv", strict=False)
    df[df["icount_source"] != "callgrind"].to_csv(run / "raw.csv", index=False)
    env = json.loads((run / "env.json").read_text())
    env["parameters"]["icount"] = False
    (run / "env.json").write_text(json.dumps(env))
    (run / "12-patch-ab.ipynb").unlink()
    text = " ".join(mail.mail_text(run).split())
    assert "no callgrind counts in this run (icount=false)" in text and "instr/op" not in text


def test_patch_file_of_the_run_folder_is_named(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(DATA, run)
    patch = tmp_path / "elsewhere" / "fix.patch"
    patch.parent.mkdir()
    patch.write_text("diff --git a/x b/x\n")
    (run / "kept.patch").write_text(patch.read_text())
    (run / "12-patch-ab.ipynb").unlink()
    env = json.loads((run / "env.json").read_text())
    env["parameters"]["kernel_headers"] = f"base=/src/linux,patched=/src/linux+{patch}"
    (run / "env.json").write_text(json.dumps(env))
    squeezed = "".join(mail.mail_text(run).split())   # long paths are wrapped
    assert f"{patch}isthefilekept.patchintherunfolder(sha256" in squeezed


def test_notebook_line_given_by_a_running_notebook(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(DATA, run)
    (run / "12-patch-ab.ipynb").unlink()
    assert "papermill" not in mail.mail_text(run)
    text = mail.mail_text(run, notebook=("12-patch-ab.ipynb", {"profile": "full", "base": "/src/linux",
                                                               "patch": "builtin:flush-delay:32"}))
    words = _command(text, "papermill")
    assert words[:5] == ["papermill", "notebooks/12-patch-ab.ipynb", "out.ipynb", "-k", "python3"]
    assert words[5:] == ["-p", "profile", "full", "-p", "base", "/src/linux", "-p", "patch", "builtin:flush-delay:32"]


def test_a_smoke_ab_with_two_layouts_never_says_layouts_1(fakebin, tmp_path, capsys):
    """smoke builds two layouts (``-p layouts 2`` in the mail's reproduce line, as --list-params
    says); its two measured rounds may run one pair: the mail says so, never "layouts=1"."""
    out = tmp_path / "run"
    assert cli_main(["run", "ptr_ring", "-p", "profile", "smoke", "-p", "cpus", "none", "-p", "governor", "false",
                     "-p", "variants", "batch,reorder", "-p", "modes", "0", "--no-build", "--no-progress",
                     "--out", str(out)]) == 0
    env = json.loads((out / "env.json").read_text())
    assert env["parameters"]["layouts"] == 2
    df = rundir.read_raw(out / "raw.csv", strict=False)
    measured = df[~df["warmup"].astype(bool)]
    text = " ".join(mail.mail_text(out).split())
    assert "-p layouts 2" in text and "layouts=1" not in text
    assert len(measured)
    capsys.readouterr()


def test_published_instruction_counts_are_set_beside_ours():
    """Seed 000's perf stat (174 -> 161 instructions/op) beside callgrind's counts of a run of
    batch and reorder: the mail says whether they agree."""
    df = pd.read_csv(DATA / "raw.csv")
    df["variant"] = df["variant"].map({"base": "batch", "patched": "reorder"})
    env = {"experiment": "ptr_ring"}
    ic = df[df["icount_source"] == "callgrind"].groupby("variant")["instructions_per_op"].median()
    ours = (ic["reorder"] / ic["batch"] - 1) * 100
    text = mail.published_counts_text(df, env, "batch", ["reorder"])
    assert "174 -> 161 instructions/op (-7.5%)" in text
    assert f"{ic['batch']:.2f} -> {ic['reorder']:.2f} ({ours:+.2f}%)" in text
    assert text.startswith("Published counts disagree" if ours > 0 else "Published counts")
    assert mail.published_counts_text(df, env, "batch", []) == ""


def test_hot_loop_is_the_for_loop_not_the_cold_paths():
    from ringlab.report.mail_objdump import hot_loop, trimmed
    text = ["10: mov %rdi,%rbx", "14: mov (%rbx),%eax", "18: jge 40 <f+0x30>", "1c: add $0x1,%rbp",
            "20: cmp %rbp,%r13", "24: jge 14 <f+0x4>", "28: ret", "40: movl $0x0,(%rbx)",
            "44: jl 1c <f+0xc>", "48: jmp 14 <f+0x4>"]
    assert hot_loop(text) == text[1:6]
    assert hot_loop(text[:3]) == text[:3]
    assert trimmed(text, 2, 2) == text[:2] + ["... 6 instructions left out ..."] + text[-2:]


@pytest.mark.committed_run
@pytest.mark.parametrize("run", committed(sorted((Path(__file__).resolve().parent.parent / "results" / "kernel-tests")
                                                 .glob("*/*/ringlab-spsc"))), ids=lambda p: p.parent.parent.name)
def test_kernel_tests_reply_sets_ringtest_beside_the_spsc(run):
    """The committed reply's row of each ring size and CPU pair gives the SPSC's and ringtest's
    times and their %change that the two runs' raw.csv give (to the digits printed), and the
    reply is in the list's shape."""
    from ringlab.report import tables
    from ringlab.report.verify import tolerance
    from ringlab.studies.harness_compare import side_by_side
    committed = run.parent / "mail.txt"
    assert committed.is_file(), f"{run.parent}: no mail.txt (ringlab mail {run.parent} -o {committed})"
    text = committed.read_text()
    lines = text.splitlines()
    assert lines[0].startswith("ringlab kernel-tests: ringtest ptr_ring beside ringlab's SPSC")
    assert "PMU" in " ".join(lines[:6]) and "ringtest vs spsc: " in text
    assert "%change" in lines[lines.index(next(ln for ln in lines if "spsc ns/op" in ln))]
    row = re.compile(rf"^\s+([\d.]+)\s+±\d+%\s+\*?({_CHANGE})\*?\s+([\d.]+)\s+±\d+%\s+size=(\d+) (\d+:\d+)", re.M)
    found = row.findall(text)
    table = side_by_side(run.parent, run)
    assert len(found) == len(table), "one row per ring size and pair"
    for spsc, change, ringtest, size, cpus in found:
        (r,) = [r for _, r in table.iterrows() if int(r["ring_size"]) == int(size) and r["cpus"] == cpus]
        assert abs(float(spsc) - r["spsc_ns_per_op"]) <= tolerance(spsc) * 1.0001, (size, cpus, spsc)
        assert abs(float(ringtest) - r["ringtest_ns_per_item"]) <= tolerance(ringtest) * 1.0001, (size, cpus, ringtest)
        assert change == tables.change_text(tables.gain_of_ratio(r["ratio"])), (size, cpus, change)
    _list_shape(text, str(committed))


@pytest.mark.parametrize("ratio, lo, hi, change", [
    (1.1, 1.05, 1.15, "-10.0% [-15.0, -5.0] (95% CI, + = ringtest takes less)"),
    (3.15, 2.47, 3.88, "×3.1 slower [×2.5, ×3.9] (95% CI)")])
def test_the_kernel_tests_block_gives_the_change_in_the_tables_sign_and_says_so(ratio, lo, hi, change):
    """The block to paste prints the table's %change (+ = ringtest takes less; past ±50% a factor
    with its word) and says the sign in the line: it is pasted without the mail's header."""
    from ringlab.report.analysis import Analysis
    from ringlab.report.mail_harness import paste_block
    from ringlab.studies.harness_compare import side_by_side
    run = committed(sorted((Path(__file__).resolve().parent.parent / "results" / "kernel-tests")
                           .glob("*/*/ringlab-spsc")))[0]
    table = side_by_side(run.parent, run).head(1).assign(ratio=ratio, ratio_ci_low=lo, ratio_ci_high=hi)
    joined = " ".join(" ".join(paste_block(Analysis.for_run(run.parent), table, 72)).split())
    assert f" ns per item, {change}" in joined, joined


@pytest.mark.parametrize("mail_file", _committed_mails(), ids=lambda p: f"{p.parts[-4]}/{p.parts[-3]}")
def test_todays_reply_of_every_committed_run_is_in_the_lists_shape(mail_file, tmp_path):
    """The reply today's code renders from each committed run's raw.csv (into tmp_path) has n, the
    block to paste, the one sign and fits one screen: what a re-made run will commit."""
    run = mail_file.parent
    if (run / "ringlab-spsc").is_dir():
        from ringlab.report.mail_harness import harness_mail_text
        from ringlab.studies.harness_compare import side_by_side
        text = harness_mail_text(run, run / "ringlab-spsc", side_by_side(run, run / "ringlab-spsc"))
    else:
        text = mail.mail_text(run)
    _list_shape(text, f"{run} (rendered today)")


def test_notebook_mail_and_ringlab_mail_print_the_same_text(tmp_path, capsys):
    from ringlab.lab import notebook
    run = tmp_path / "run"
    shutil.copytree(DATA, run)
    (run / "12-patch-ab.ipynb").unlink()     # as while the notebook runs: papermill writes it elsewhere
    given = ("12-patch-ab.ipynb", {"profile": "full", "patch": "builtin:flush-delay:32", "seed": 1})
    text = notebook.write_mail(run, baseline="base", notebook=given)
    assert (run / "mail.txt").read_text() == text
    assert cli_main(["mail", str(run)]) == 0
    assert capsys.readouterr().out == text
    assert "-p patch builtin:flush-delay:32" in text


def test_reproduce_line_gives_the_seed_the_run_drew(tmp_path):
    """A notebook run with ``seed -1`` draws its seed; the reply's line carries the drawn one, so a
    reviewer rebuilds the same layouts, and an explicit seed is left as given."""
    from ringlab.report import mail_reproduce
    run = tmp_path / "run"
    shutil.copytree(DATA, run)
    env = json.loads((run / "env.json").read_text())
    env.setdefault("parameters", {})["seed"] = 123456789
    drawn = mail_reproduce.reproduce_lines(run, env, 72, ("12-patch-ab.ipynb", {"profile": "full", "seed": -1}))
    assert "-p seed 123456789" in " ".join(drawn) and "-p seed -1" not in " ".join(drawn)
    given = mail_reproduce.reproduce_lines(run, env, 72, ("12-patch-ab.ipynb", {"profile": "full", "seed": 7}))
    assert "-p seed 7" in " ".join(given)


def test_reproduce_line_leaves_out_the_notebooks_defaults_at_the_runs_commit(tmp_path):
    """Parameters equal to the notebook's defaults at the run's commit are left out (the line stays
    short and still rebuilds the run); with a commit this clone does not hold, every one stays."""
    import subprocess
    from ringlab import paths
    from ringlab.report import mail_reproduce
    run = tmp_path / "run"
    shutil.copytree(DATA, run)
    head = subprocess.run(["git", "-C", str(paths.ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    given = ("12-patch-ab.ipynb", {"profile": "quick", "patch": "builtin:flush-delay", "modes": "0", "count": 0,
                                   "budget": 0.0, "control": True, "interleave": True, "seed": 5})
    text = " ".join(mail_reproduce.reproduce_lines(run, {"git": {"commit": head}}, 72, given))
    assert "-p profile quick" in text and "-p modes 0 " in text + " " and "-p interleave True" in text
    assert "-p seed 5" in text
    for default in ("-p patch", "-p count", "-p budget", "-p control"):
        assert default not in text, default
    unknown = " ".join(mail_reproduce.reproduce_lines(run, {"git": {"commit": "0" * 40}}, 72, given))
    assert "-p patch builtin:flush-delay" in unknown and "-p count 0" in unknown


def test_further_runs_in_the_folder_get_their_rows_and_an_instruction_count_does_not(tmp_path):
    """A notebook's further runs (sub-folders with their own raw.csv, as notebook 11's lock arm and
    batch sweep) follow the table, one row per configuration labelled by folder, each its own Holm
    family; a sub-run of callgrind counts (icount) is not a timing comparison and is left out."""
    run = tmp_path / "run"
    shutil.copytree(DATA, run)
    plain = mail.mail_text(run)
    for name, icount in (("lock", False), ("icount", True)):
        sub = run / name
        sub.mkdir()
        shutil.copy(DATA / "raw.csv", sub / "raw.csv")
        env = json.loads((DATA / "env.json").read_text())
        env["parameters"]["icount"] = icount
        (sub / "env.json").write_text(json.dumps(env))
    text = mail.mail_text(run)
    assert "Further runs in this folder" not in plain and "Further runs in this folder" in text
    further = text.split("Further runs in this folder")[1].split("To paste into the commit message")[0]
    labelled = [ln for ln in _rows(further) if ln.rstrip().split("  ")[-1].startswith("lock")]
    assert labelled and len(labelled) == len([ln for ln in _rows(plain) if "callgrind" not in ln])
    assert "icount" not in further
    assert all(len(ln) <= 72 for ln in text.splitlines())


@pytest.mark.parametrize("width", [72, 48, 30])
def test_a_long_path_breaks_only_after_a_slash(width):
    path = "results/ptr-ring-batch-zeroing/epyc-kvm-2vcpu/20261202T213850Z-62ea16/"
    lines = path_lines(path, width)
    assert "".join(ln.strip() for ln in lines) == path
    assert all(len(ln) <= width and ln.startswith("  ") and ln.endswith("/") for ln in lines), lines
    assert (len(lines) == 1) == (width == 72), lines


def test_a_sub_run_that_counts_instructions_gives_its_rows_and_the_counters_line(tmp_path):
    """A folder whose own run has no callgrind counts but whose ``icount`` sub-run has (notebook
    11): the second line says where callgrind counted, and the sub-run's instructions per op are
    rows of the further runs' table."""
    run = tmp_path / "run"
    shutil.copytree(DATA, run)
    raw = rundir.read_raw(run / "raw.csv", strict=False)
    cg = raw["icount_source"].astype(str) == "callgrind"
    env = json.loads((run / "env.json").read_text())
    (run / "icount").mkdir()
    raw[cg].to_csv(run / "icount" / "raw.csv", index=False)
    sub_env = dict(env, parameters=dict(env.get("parameters") or {}, icount=True))
    (run / "icount" / "env.json").write_text(json.dumps(sub_env))
    raw[~cg].to_csv(run / "raw.csv", index=False)
    env["parameters"] = dict(env.get("parameters") or {}, icount=False)
    (run / "env.json").write_text(json.dumps(env))
    text = mail.mail_text(run)
    flat = " ".join(text.split())
    assert "callgrind counts the instructions of the measured region instead, in icount/" in flat
    rows = [ln for ln in text.splitlines() if "instr/op" in ln]
    assert rows and all("%" in ln for ln in rows), text
    # without the sub-run the same folder says it has no counts
    shutil.rmtree(run / "icount")
    assert "no callgrind counts in this run" in " ".join(mail.mail_text(run).split())


def _bound_written(tmp: Path, host: str, hi: float) -> None:
    cal = tmp / "calibration" / host
    cal.mkdir(parents=True)
    (cal / "calibration.json").write_text(json.dumps({"sigma_layout": 0.01, "round_sd": 0.02, "layouts": 8,
                                                       "aa_ci": [-0.01, hi], "run_id": f"AA-{hi}"}))


def _quoted(run: Path) -> tuple[tuple[str, str], tuple[str, str]]:
    """(host, bound) as summary.md and as mail.txt quote them."""
    from ringlab.report import write_report
    write_report(run, figures=False)
    md = " ".join((run / "summary.md").read_text().split())
    text = " ".join(mail.mail_text(run).split())
    m1 = re.search(r"Noise floor of (\S+): .*? < ([\d.]+)%", md)
    m2 = re.search(r" on (\S+): .*?noise floor: \|Δ\| < ([\d.]+)%", text)
    assert m1 and m2, (md[:300], text[:300])
    return m1.groups(), m2.groups()


def test_summary_and_mail_quote_the_same_noise_floor_and_host(tmp_path, monkeypatch):
    """Both reports of one run find the host and its calibration by one rule: the results folder
    the run lies in first, else the checkout's."""
    from ringlab import paths
    host = "synthetic-test-host"
    checkout = tmp_path / "checkout-results"
    _bound_written(checkout, host, 0.0513)
    monkeypatch.setattr(paths, "results_dir", lambda: checkout)
    tree = tmp_path / "results"
    run = tree / "ptr-ring" / host / "20260101T000000Z-test00"
    shutil.copytree(DATA, run)
    _bound_written(tree, host, 0.0285)            # beside the run: this one is quoted
    md, txt = _quoted(run)
    assert md == txt == (host, "2.9"), (md, txt)
    shutil.rmtree(tree / "calibration" / host)    # the run's results folder holds another host's only
    _bound_written(tree, "another-host", 0.0285)
    md, txt = _quoted(run)
    assert md == txt == (host, "5.3"), (md, txt)


def test_the_floor_line_names_each_arm_inside_the_bound(tmp_path, monkeypatch):
    """Rows called faster or slower whose effect is smaller than the A/A bound are named in the
    noise-floor line, arm and configuration, those of one configuration together."""
    from ringlab import paths
    _bound_written(tmp_path, "synthetic-test-host", 0.0105)          # |Δ| < 1.1%
    monkeypatch.setattr(paths, "results_dir", lambda: tmp_path)
    rows = [({"candidate": "kernel", "verdict": "faster", "gain_pct": 0.5}, "mode=0 same-cpu"),
            ({"candidate": "reorder", "verdict": "faster", "gain_pct": 0.8}, "mode=0 same-cpu"),
            ({"candidate": "prebatch", "verdict": "faster", "gain_pct": 9.1}, "mode=0 same-cpu"),
            ({"candidate": "reorder", "verdict": "inconclusive", "gain_pct": -0.3}, "mode=1 same-llc"),
            ({"candidate": "kernel", "verdict": "slower", "gain_pct": -0.9}, "mode=1 same-llc")]
    text = " ".join(mail.floor_lines({"host": "synthetic-test-host"}, pd.DataFrame(), {"gains": rows}, 72,
                                     tmp_path / "nowhere"))
    assert text.endswith("; below it: kernel, reorder mode=0 same-cpu; kernel mode=1 same-llc"), text


def test_a_first_runs_own_noise_is_one_range_per_mode():
    """Without a calibration the floor line quotes the half-widths the run reached, one range per
    mode (three arms must not make it three numbers per mode)."""
    from ringlab.report.mail import _own_floor
    from ringlab.rundir import RunEnv
    rows = [{"group": f"mode={m},size=1000", "candidate": c, "half_width_pct": hw, "target_pct": 0.5,
             "target_met": False, "decided": None, "judged": True}
            for m, c, hw in [(0, "a", 0.53), (0, "b", 0.68), (0, "c", 0.64), (1, "a", 2.24), (1, "b", 2.24)]]
    env = RunEnv.of({"stopping": {"target_ci": 0.5, "layouts": 57, "rounds_per_layout": 3, "rows": rows,
                                  "stages": [{"stage": 0, "layouts": 57, "rounds_per_layout": 3}]}})
    assert _own_floor(env) == "95% CI half-width ±0.53-0.68% in mode 0, ±2.24% in mode 1 at 57 layouts x 3 rounds"


def test_the_next_run_basis_of_a_row_is_said_in_a_few_words():
    from ringlab.stats.replication import NO_BETWEEN_TEXT
    assert mail._short_source({"next_basis": "none", "next_source": NO_BETWEEN_TEXT}) == \
        "no between-run information: a rerun if nothing drifted"
    assert mail._short_source({"next_basis": "host A/A", "next_source": "host A/A upper bound from 6 runs"}) == \
        "host A/A upper bound"
    assert mail._short_source({"next_basis": "runs", "next_source": "from 4 runs of this comparison"}) == \
        "from 4 runs of this comparison"


def test_the_arms_of_ringlabs_own_code_are_one_brace_pattern_in_the_tested_line(tmp_path):
    """Arms built from ringlab's own headers share one shell brace pattern; an arm built from
    other code keeps its name and path; a single own-code arm is named as the others."""
    from ringlab.report.mail_run import tested_line
    from ringlab.rundir import RunEnv
    hdr = "/usr/src/linux-headers-6.1/include/linux/ptr_ring.h"
    env = RunEnv.of({"experiment": "ptr_ring", "parameters": {"kernel_headers": f"kernel={hdr}"}})
    line = tested_line(env, "batch", ["kernel", "prebatch", "reorder"], tmp_path)
    assert line.startswith(f"tested: csrc/rings/ptr_ring_{{batch,prebatch,reorder}}.h; kernel: {hdr}; ringlab "), line
    one = tested_line(env, "batch", ["kernel"], tmp_path)
    assert one.startswith(f"tested: batch: csrc/rings/ptr_ring_batch.h; kernel: {hdr}; ringlab "), one


def test_the_commit_blocks_cpu_model_leaves_out_trademarks_and_the_word_processor():
    from ringlab.report.mail_run import cpus_text
    from ringlab.rundir import RunEnv
    env = {"environment": {"cpu": {"model": "Intel(R) Xeon(R) Processor"}, "topology": {"n_cpus": 2}}}
    assert cpus_text(RunEnv.of(env)) == "2 CPUs (Intel Xeon)"
    env["environment"]["cpu"]["model"] = "AMD EPYC 7763 64-Core Processor"
    assert cpus_text(RunEnv.of(env)) == "2 CPUs (AMD EPYC 7763 64-Core)"


def test_the_legend_explains_a_factor_only_where_a_row_prints_one(tmp_path):
    """"past ±50% a factor (×2.1 faster)" in the header paragraph where a table row prints a
    factor; a run whose changes are all percents leaves it out."""
    plain = mail.mail_text(DATA)
    assert "×" not in plain and "past ±50% a factor" not in " ".join(plain.split())
    run = tmp_path / "run"
    shutil.copytree(DATA, run)
    raw = pd.read_csv(run / "raw.csv")
    cand = raw["variant"] != raw["variant"].iloc[0]
    raw.loc[cand, "ns_per_op"] /= 3          # three times faster: a factor in the table
    raw.to_csv(run / "raw.csv", index=False)
    text = mail.mail_text(run)
    assert "×" in text and "past ±50% a factor (×2.1 faster)" in " ".join(text.split())
