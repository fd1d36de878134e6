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

from ringlab.report import mail
from ringlab.lab.cli import main as cli_main
from ringlab.experiments import get

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


def test_golden_holds_no_time_of_the_test_run():
    text = GOLDEN.read_text()
    stamps = set(re.findall(r"\d{4}-\d\d-\d\dT[\d:.]+Z", text))
    assert stamps <= {"2026-01-01T00:00:00.000000Z", "2026-01-01T00:01:00.000000Z"}, stamps


@pytest.mark.parametrize("width", [72, 60, 100])
def test_plain_text_within_width(width):
    text = mail.mail_text(DATA, width=width)
    for line in text.splitlines():
        assert len(line) <= width, line
        assert not line.startswith(("#", "|", "```", "- ", "* ")), f"markdown: {line}"
        assert "**" not in line and "`" not in line, f"markdown: {line}"
    assert text.endswith("\n") and "\t" not in text


def test_contents_a_reviewer_needs(text):
    for needle in ("Synthetic CPU (test data)", "Kernel     0.0.0-test", "gcc (Test) 0.0.0",
                   "-O2 -g -std=gnu11 -pthread -Wall -Wextra", "Pinning", "Governor   not set: no cpufreq driver",
                   "9 (1 warm-up, 8 measured)", "patched crash 1", "instr/op", "more", "95% CI",
                   "ringlab run ptr_ring", "papermill notebooks/12-patch-ab.ipynb", "-p patch builtin:flush-delay",
                   "commit 0123456789ab"):
        assert needle in text, needle
    assert "out_dir" not in text and "/tmp/test/run" not in text, "the run folder is not a parameter to reuse"


def test_medians_are_those_of_raw_csv(text):
    """Independent of the golden: each printed median is the median of the ok, non-warm-up trials."""
    df = pd.read_csv(DATA / "raw.csv")
    ok = df[(df["status"] == "ok") & (~df["warmup"]) & df["ns_per_op"].notna()]
    blocks = text.split("\n\n")
    for (v, m), g in ok.groupby(["variant", "mode"]):
        block = next(b for b in blocks if b.lstrip().startswith(f"mode {m} "))
        med = float(np.median(g["ns_per_op"]))
        assert re.search(rf"^\s+{v}\s+{med:.4g} ns\s+\(n = {len(g)},", block, re.M), (v, m, block)
    ic = df[df["icount_source"] == "callgrind"].groupby("variant")["instructions_per_op"].median()
    assert f"base {ic['base']:.2f}, patched {ic['patched']:.2f} ({ic['patched'] - ic['base']:+.2f}" in text


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


def test_run_command_spells_out_every_parameter(text):
    env = json.loads((DATA / "env.json").read_text())
    words = _command(text, "ringlab run")
    assert words[:3] == ["ringlab", "run", "ptr_ring"]
    given = dict(zip(words[4::3], words[5::3]))
    assert words[3::3] == ["-p"] * len(given)
    spec = get("ptr_ring").all_params()
    assert set(given) == set(env["parameters"])
    for k, v in env["parameters"].items():
        assert spec[k].parse(given[k]) == v, k


def test_width_breaks_long_words_with_a_shell_continuation():
    text = mail.mail_text(DATA, width=60)
    words = _command(text, "ringlab run")
    kh = words[words.index("kernel_headers") + 1]
    assert kh == json.loads((DATA / "env.json").read_text())["parameters"]["kernel_headers"]


def test_baseline_defaults_and_choice(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(DATA, run)
    env = json.loads((run / "env.json").read_text())
    env["parameters"]["variants"] = ["patched", "base"]
    (run / "env.json").write_text(json.dumps(env))
    assert mail.mail_text(run).startswith("ringlab A/B: base against patched")
    assert mail.mail_text(run, baseline="base").startswith("ringlab A/B: patched against base")
    with pytest.raises(mail.MailError, match="--baseline: 'nope'.*allowed: base, patched"):
        mail.mail_text(run, baseline="nope")


def test_new_compare_columns_are_shown(monkeypatch):
    real = mail.compare

    def newer(df, baseline, metric="ns_per_op", **kw):
        out = real(df, baseline, metric, **kw)
        out["design"] = "paired by round"
        out["n_pairs"] = out["n_candidate"]
        out["ci_level"] = 0.9
        out["family_size"] = 7
        if metric == mail.INSTR:
            out["verdict"] = "fewer instructions"
        return out
    monkeypatch.setattr(mail, "compare", newer)
    text = " ".join(mail.mail_text(DATA).split())
    assert "design paired by round, 8 pairs" in text and "90% CI [" in text
    assert "7 comparison(s)" in text and "fewer instructions" in text


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
    df = pd.read_csv(run / "raw.csv")
    df[df["icount_source"] != "callgrind"].to_csv(run / "raw.csv", index=False)
    env = json.loads((run / "env.json").read_text())
    env["parameters"]["icount"] = False
    (run / "env.json").write_text(json.dumps(env))
    text = mail.mail_text(run)
    assert "instructions/op: not counted (icount=false" in text and "instr/op" not in text


def test_patch_file_of_the_run_folder_is_named(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(DATA, run)
    patch = tmp_path / "elsewhere" / "fix.patch"
    patch.parent.mkdir()
    patch.write_text("diff --git a/x b/x\n")
    (run / "kept.patch").write_text(patch.read_text())
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


def test_same_binary_for_both_arms_is_flagged(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(DATA, run)
    df = pd.read_csv(run / "raw.csv")
    df["binary_sha256"] = "b" * 64
    df.to_csv(run / "raw.csv", index=False)
    text = " ".join(mail.mail_text(run).split())
    assert "WARNING: base and patched ran the same binary" in text
    assert "WARNING" not in mail.mail_text(DATA)


def test_numbers_formatted_like_the_report_tables(text):
    """p, percentages, CIs and CI levels as ringlab.fmt writes them (summary.md uses the same)."""
    from ringlab import fmt
    from ringlab.stats import compare
    df = pd.read_csv(DATA / "raw.csv")
    cmp = compare(df, "base")
    for _, r in cmp.iterrows():
        line = (f"delta        {fmt.pct(r['delta_pct'])}, {fmt.ci_header(r['ci_level'])} "
                f"{fmt.ci(r['ci_low_pct'], r['ci_high_pct'])}")
        pv = fmt.p(r["p_holm"])
        line += f", p {pv}" if pv.startswith("<") else f", p = {pv}"
        assert line in text, line


def test_layout_runs_show_layouts_states_and_the_fixed_build_caveat():
    import math as _m
    from layout_runs import layout_frame
    df, env = layout_frame(8, effect=(_m.log(1.05),) * 2, sigma_layout=0.02, seed=3)
    text = " ".join(mail._results(df, env, "base", "ns_per_op", 72, None))
    text = " ".join(text.split())
    assert "design layouts" in text and "8 layout pairs, layout spread" in text
    assert "of the CI width squared" in text and "one layout pair measured" not in text
    df1, env1 = layout_frame(1, rounds_per_layout=120, effect=(-0.035, 0.087), sigma_layout=0.0, seed=4)
    text1 = " ".join(" ".join(mail._results(df1, env1, "base", "ns_per_op", 72, None)).split())
    assert ("one layout pair measured (one fixed build): the CI describes this binary pair, "
            "not the code change") in text1
    assert "two machine states" in text1 and "verdict depends on machine state" in text1
    assert all(len(ln) <= 72 for ln in mail._results(df1, env1, "base", "ns_per_op", 72, None))


def test_a_smoke_ab_with_two_layouts_never_says_layouts_1(fakebin, tmp_path, capsys):
    """smoke builds two layouts (``-p layouts 2`` in the mail's reproduce line, as --list-params
    says); its two measured rounds may run one pair: the mail says so, never "layouts=1"."""
    out = tmp_path / "run"
    assert cli_main(["run", "ptr_ring", "-p", "profile", "smoke", "-p", "cpus", "none", "-p", "governor", "false",
                     "-p", "variants", "batch,reorder", "-p", "modes", "0", "--no-build", "--no-progress",
                     "--out", str(out)]) == 0
    env = json.loads((out / "env.json").read_text())
    assert env["parameters"]["layouts"] == 2
    df = pd.read_csv(out / "raw.csv")
    measured = df[~df["warmup"].astype(bool)]
    text = " ".join(mail.mail_text(out).split())
    assert "-p layouts 2" in text and "layouts=1" not in text
    if measured["layout"].nunique() == 1:
        assert "one layout pair measured" in text
    else:
        assert "one layout pair measured" not in text
    capsys.readouterr()
