"""``ringlab verify``: the printed numbers of a run folder recomputed from raw.csv and env.json.

A run folder rendered with today's code verifies; a wrong number planted in compare.csv,
summary.md or mail.txt is named (file, row, field); the second implementation's rank tests and
layouts fit agree with ringlab.stats on random data; every committed run verifies (marked
``committed_run``: what a committed run promises, docs/results.md; its reports are held to their
numbers, never to the bytes today's renderer would write).
"""
from __future__ import annotations

import json
import re
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ringlab import fmt
from ringlab.lab import cli
from ringlab.report import write_report
from ringlab.report import verify as V
from ringlab.report.mail import mail_text
from ringlab.report.mailfmt import sig4
from committed import RESULTS, committed

PRINTED = ("compare.csv", "summary.md", "mail.txt")


def committed_run(experiment: str, host: str) -> Path:
    """The one committed run folder of ``experiment`` on ``host`` (found by pattern, not by run id:
    a re-made set replaces the folder)."""
    (run,) = committed(sorted(p.parent for p in (RESULTS / experiment / host).glob("*/raw.csv")))
    return run


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    """A committed run's raw.csv and env.json, rendered with today's code."""
    source = committed_run("ptr-ring-reorder", "xeon-kvm-2vcpu")
    run = tmp_path_factory.mktemp("verify") / "run"
    run.mkdir()
    shutil.copy(source / "raw.csv", run / "raw.csv")
    env = json.loads((source / "env.json").read_text())
    env.pop("rerendered", None)     # rendered here with today's code, as when a run is made
    (run / "env.json").write_text(json.dumps(env))
    write_report(run, figures=False)
    (run / "mail.txt").write_text(mail_text(run))
    return run


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_a_freshly_rendered_run_verifies(rendered):
    res = V.verify(rendered)
    assert res.ok, res.text()
    assert set(PRINTED) <= set(res.files)
    assert res.checked > 150
    # the numbers it cannot recompute from the folder are listed, not skipped silently
    assert any("trials_needed" in w for w in res.not_checked)
    assert cli.main(["verify", str(rendered)]) == 0


def _plant(run: Path, name: str, old: str, new: str) -> None:
    text = (run / name).read_text()
    assert old in text, f"{old!r} not in {name}"
    (run / name).write_text(text.replace(old, new, 1))


def _prebatch_slower_row(run: Path) -> pd.Series:
    cmp = pd.read_csv(run / "compare.csv")
    return cmp[(cmp["candidate"] == "prebatch") & (cmp["mode"] == 1)].iloc[0]


def test_a_wrong_number_in_compare_csv_is_named(rendered, tmp_path, capsys):
    run = _copy(rendered, tmp_path / "run")
    cmp = pd.read_csv(run / "compare.csv")
    i = cmp.index[(cmp["candidate"] == "prebatch") & (cmp["mode"] == 1)][0]
    cmp.loc[i, "ci_high_pct"] += 0.05
    cmp.to_csv(run / "compare.csv", index=False)
    res = V.verify(run)
    assert not res.ok
    (f,) = res.findings
    assert (f.file, f.field) == ("compare.csv", "ci_high_pct")
    assert "mode=1" in f.row and "prebatch" in f.row
    assert cli.main(["verify", str(run)]) == 1
    assert "DISAGREES compare.csv" in capsys.readouterr().out


def test_a_wrong_verdict_in_compare_csv_is_named(rendered, tmp_path):
    run = _copy(rendered, tmp_path / "run")
    cmp = pd.read_csv(run / "compare.csv")
    i = cmp.index[(cmp["candidate"] == "prebatch") & (cmp["mode"] == 1)][0]
    cmp.loc[i, "verdict"] = "inconclusive"
    cmp.to_csv(run / "compare.csv", index=False)
    found = [(f.file, f.field, f.printed) for f in V.verify(run).findings]
    assert found == [("compare.csv", "verdict", "inconclusive")]


def test_a_wrong_number_in_summary_md_is_named(rendered, tmp_path):
    run = _copy(rendered, tmp_path / "run")
    r = _prebatch_slower_row(run)
    p, g = fmt.p(r["p_holm"]), f"{r['gain_pct']:+.1f}%"      # as summary.md prints them ("< 0.001" too)
    line = next(ln for ln in (run / "summary.md").read_text().splitlines()
                if f"| {p} |" in ln and f"| {g} |" in ln and "prebatch" in ln)
    _plant(run, "summary.md", line, line.replace(f"| {p} |", "| 0.500 |"))
    (f,) = V.verify(run).findings
    assert (f.file, f.field, f.printed) == ("summary.md", "p (Holm)", "0.500")
    assert "prebatch" in f.row and "mode=1" in f.row


def test_a_wrong_percent_in_summary_md_is_named(rendered, tmp_path):
    run = _copy(rendered, tmp_path / "run")
    r = _prebatch_slower_row(run)
    g = f"{r['gain_pct']:+.1f}%"
    wrong = f"{r['gain_pct'] + 0.3:+.1f}%"
    line = next(ln for ln in (run / "summary.md").read_text().splitlines() if f"| {g} |" in ln and "prebatch" in ln)
    _plant(run, "summary.md", line, line.replace(f"| {g} |", f"| {wrong} |"))
    (f,) = V.verify(run).findings
    assert f.file == "summary.md" and f.field.startswith("%change") and f.printed == wrong


def test_a_wrong_number_in_the_mail_table_is_named(rendered, tmp_path):
    run = _copy(rendered, tmp_path / "run")
    r = _prebatch_slower_row(run)
    g = f"{r['gain_pct']:+.1f}%"
    line = next(ln for ln in (run / "mail.txt").read_text().splitlines()
                if f"*{g}*" in ln and "mode=1" in ln and "next" not in ln)
    wrong = f"{r['gain_pct'] - 0.4:+.1f}%"
    _plant(run, "mail.txt", line, line.replace(f"*{g}*", f"*{wrong}*"))
    found = V.verify(run).findings
    assert [(f.file, f.field, f.printed) for f in found] == [("mail.txt", "%change", wrong)]
    assert "prebatch" in found[0].row and "mode=1" in found[0].row


def test_a_wrong_next_run_interval_in_the_mail_is_named(rendered, tmp_path):
    run = _copy(rendered, tmp_path / "run")
    line = next(ln for ln in (run / "mail.txt").read_text().splitlines() if " next [" in ln and "reorder" in ln
                and "mode=0" in ln)
    nxt = line[line.index("next [") + 5:line.index("]", line.index("next [")) + 1]
    lo, hi = (float(x) for x in nxt.strip("[]").split(","))
    wrong = f"[{lo:+.1f}, {hi + 1:+.1f}]"
    _plant(run, "mail.txt", line, line.replace(nxt, wrong))
    (f,) = V.verify(run).findings
    assert (f.file, f.field) == ("mail.txt", "next high") and "reorder" in f.row


def test_wrong_centers_in_the_mail_are_named(rendered, tmp_path):
    run = _copy(rendered, tmp_path / "run")
    r = _prebatch_slower_row(run)
    after = sig4(r["center_candidate"])                     # as the commit block prints it
    text = (run / "mail.txt").read_text()
    assert f"-> {after} " in text           # the commit block's before -> after
    _plant(run, "mail.txt", f"-> {after} ", f"-> {sig4(float(after) * 1.01)} ")
    found = V.verify(run).findings
    assert [(f.file, f.field) for f in found] == [("mail.txt", "after")], found


def _block_line(run: Path) -> str:
    """The commit block's before -> after line, its continuation joined."""
    lines = (run / "mail.txt").read_text().splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("  before -> after: "))
    return lines[i] + "\n" + lines[i + 1] if lines[i + 1].startswith("    ") else lines[i]


def test_a_wrong_change_in_the_commit_block_is_named(rendered, tmp_path):
    run = _copy(rendered, tmp_path / "run")
    r = _prebatch_slower_row(run)
    g = f"{r['gain_pct']:+.1f}%"
    line = _block_line(run)
    assert f", {g} [" in line and "(95% CI, + = better)" in line    # the table's sign, stated in the line
    wrong = f"{r['gain_pct'] - 0.4:+.1f}%"
    _plant(run, "mail.txt", line, line.replace(f", {g} [", f", {wrong} ["))
    found = V.verify(run).findings
    assert [(f.file, f.field, f.printed) for f in found] == [("mail.txt", "change", wrong)], found
    assert "(commit block)" in found[0].row


def test_a_commit_block_in_the_arrows_sign_is_named(rendered, tmp_path):
    """after / before - 1, the sign of the arrow, is not the mail's: its change, both intervals and
    the missing sign statement are each named."""
    run = _copy(rendered, tmp_path / "run")
    r = _prebatch_slower_row(run)
    line = _block_line(run)
    flat = " ".join(line.split())
    lo, hi = r["gain_low_pct"], r["gain_high_pct"]
    arrow = flat.replace(f"{r['gain_pct']:+.1f}% [{lo:+.1f}, {hi:+.1f}] (95% CI, + = better)",
                         f"{r['delta_pct']:+.1f}% [{r['ci_low_pct']:+.1f}, {r['ci_high_pct']:+.1f}] (95% CI)")
    assert arrow != flat
    _plant(run, "mail.txt", line, arrow)
    nxt = re.search(r"should show: (\[[^\]]*\])", (run / "mail.txt").read_text()).group(1)
    nlo, nhi = (float(x) for x in nxt.strip("[]").split(","))
    _plant(run, "mail.txt", f"should show: {nxt}", f"should show: [{-nhi:+.1f}, {-nlo:+.1f}]")
    found = {f.field for f in V.verify(run).findings if "(commit block)" in f.row}
    assert found == {"change", "95% CI low", "95% CI high", "sign stated", "next run low", "next run high"}, found


def test_bad_input_exits_2_naming_what_is_needed(tmp_path, capsys):
    assert cli.main(["verify", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no raw.csv" in err and str(tmp_path) in err
    with pytest.raises(V.VerifyError):
        V.verify(tmp_path / "missing")


def test_tolerance_is_half_a_unit_of_the_last_printed_digit():
    assert V.tolerance("+1.3%") == pytest.approx(0.05 + 1e-9)
    assert V.tolerance("0.027") == pytest.approx(0.0005 + 1e-9)
    assert V.tolerance("4.074") == pytest.approx(0.0005 + 1e-9)
    assert V.tolerance("12") == pytest.approx(0.5 + 1e-9)
    assert V.tolerance("2e-05") == pytest.approx(0.5e-5 + 1e-9)


# -- the second implementation against ringlab.stats ----------------------------------------------

@pytest.mark.parametrize("n", [5, 12, 40, 450])
def test_signed_rank_agrees_with_ringlab_stats(n):
    from ringlab.stats import ranktests
    rng = np.random.default_rng(n)
    d = np.round(rng.normal(0.01, 0.03, n), 4)        # rounded: ties and zeros happen
    for level in (0.95, 0.99):
        ours = V.signed_rank(d, level)
        theirs = ranktests.signed_rank(d, level)
        assert ours == pytest.approx((theirs["estimate"], theirs["ci_low"], theirs["ci_high"], theirs["p"]),
                                     rel=1e-9, abs=1e-12, nan_ok=True)


@pytest.mark.parametrize("nx,ny", [(4, 6), (20, 25), (60, 70)])
def test_rank_sum_agrees_with_ringlab_stats(nx, ny):
    from ringlab.stats import ranktests
    rng = np.random.default_rng(nx * ny)
    x, y = rng.normal(0, 0.05, nx), rng.normal(0.03, 0.05, ny)
    ours = V.rank_sum(x, y, 0.95)
    theirs = ranktests.rank_sum(x, y, 0.95)
    assert ours == pytest.approx((theirs["estimate"], theirs["ci_low"], theirs["ci_high"], theirs["p"]), rel=1e-9)


@pytest.mark.parametrize("balanced", [True, False])
def test_layouts_fit_agrees_with_ringlab_stats(balanced):
    from ringlab.stats import fit
    rng = np.random.default_rng(7 + balanced)
    K = 8
    n_k = np.full(K, 4) if balanced else rng.integers(2, 7, K)
    layout = np.repeat(np.arange(K), n_k)
    d = 0.02 + rng.normal(0, 0.02, K)[layout] + rng.normal(0, 0.03, len(layout))
    ours = V.layouts_fit(d, layout)
    theirs = fit.fit(d, layout)
    assert (ours["theta"], ours["se"], ours["df"]) == pytest.approx((theirs.theta, theirs.se, theirs.df), rel=1e-4)
    assert ours["s2l"] == pytest.approx(theirs.sigma2_layout, rel=1e-3, abs=1e-9)


def _synthetic(tmp_path: Path, incomplete: bool) -> Path:
    """A run folder of one build per arm (no layout column); ``incomplete``: the candidate's
    rounds are other rounds than the baseline's (unpaired)."""
    from ringlab.stats.compare import compare
    from ringlab.stats.replication import with_next_run
    rng = np.random.default_rng(3)
    rows = []
    for size in (64, 1024):
        for rnd in range(16):
            for v, eff in (("base", 1.0), ("cand", 1.04), ("same", 1.0)):
                if incomplete and v != "base" and rnd < 12:
                    continue
                for it in range(3):
                    moved = 100 if incomplete and v != "base" else 0    # no round in common with base
                    rows.append({"variant": v, "size": size, "trial": rnd, "round": rnd + moved,
                                 "status": "ok", "warmup": False,
                                 "ns_per_op": 10 * eff * math.exp(rng.normal(0, 0.02))})
    raw = pd.DataFrame(rows)
    run = tmp_path / ("unpaired" if incomplete else "paired")
    run.mkdir()
    raw.to_csv(run / "raw.csv", index=False)
    (run / "env.json").write_text(json.dumps({"parameters": {"variants": "base,cand,same"}}))
    with_next_run(compare(raw, "base")).to_csv(run / "compare.csv", index=False)
    return run


@pytest.mark.parametrize("incomplete", [False, True], ids=["paired", "unpaired"])
def test_one_build_designs_verify_and_a_planted_p_is_named(tmp_path, incomplete):
    run = _synthetic(tmp_path, incomplete)
    cmp = pd.read_csv(run / "compare.csv")
    assert set(cmp["design"]) == {"unpaired" if incomplete else "paired"}
    res = V.verify(run)
    assert res.ok, res.text()
    assert res.checked >= 4 * 20
    cmp.loc[0, "p_value"] *= 1.5
    cmp.to_csv(run / "compare.csv", index=False)
    assert [(f.file, f.field) for f in V.verify(run).findings] == [("compare.csv", "p_value")]


# -- every committed run -------------------------------------------------------------------------

def committed_rendered_runs() -> list[Path]:
    found = sorted(p.parent for p in RESULTS.rglob("raw.csv") if any((p.parent / f).is_file() for f in PRINTED))
    return committed(found)


@pytest.mark.committed_run
@pytest.mark.parametrize("run", committed_rendered_runs(), ids=lambda p: str(p.relative_to(RESULTS)))
def test_every_committed_run_verifies(run):
    """A committed run promises that every number it prints recomputes (docs/results.md), and that
    a notebook older than its reports (env.json's ``rerendered`` record) is listed as not checked."""
    res = V.verify(run)
    assert res.ok, "committed run does not recompute:\n" + res.text()
    assert res.checked or not (run / "compare.csv").is_file(), f"{run}: verify checked no number"
    from ringlab.rundir import RunOutput
    if RunOutput(run).env.rerendered.get("commit"):
        for nb in run.glob("*.ipynb"):
            assert any(s.startswith(f"{nb.name}: ") for s in res.not_checked), f"{nb.name}: not listed as not checked"
            assert nb.name not in res.files


def test_a_notebooks_ab_tables_are_checked_and_a_wrong_cell_named(rendered, tmp_path):
    """An executed notebook's A/B tables: the report's markdown and a DataFrame's HTML output."""
    from ringlab.report import report
    from ringlab.report import vs_published as vp
    run = _copy(rendered, tmp_path / "run")
    table = vp.mail_table(report(run, baseline="batch"), "batch", "reorder")

    def write(html: str) -> None:
        nb = {"cells": [{"cell_type": "code", "source": [], "metadata": {}, "execution_count": 1, "outputs": [
            {"output_type": "display_data", "metadata": {}, "data": {"text/html": [html]}},
            {"output_type": "display_data", "metadata": {},
             "data": {"text/markdown": [(run / "summary.md").read_text()]}}]}],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
        (run / "10-ptr-ring-reorder.ipynb").write_text(json.dumps(nb))

    write(table.to_html())
    res = V.verify(run)
    assert res.ok, res.text()
    before = V.verify(rendered).checked
    assert res.checked >= before + 2 * 8 + 4 * 8     # both tables' rows
    col = next(c for c in table.columns if c.startswith("patched (reorder)"))
    table.loc[1, col] = table.loc[1, col] * 1.01
    write(table.to_html())
    (f,) = V.verify(run).findings
    assert (f.file, f.field) == ("10-ptr-ring-reorder.ipynb", "candidate center") and "mode=1" in f.row


def test_exact_and_too_few_rows_verify(tmp_path):
    """Deterministic counts (exact: the difference of the medians) and an arm of one round."""
    from ringlab.stats.compare import compare
    from ringlab.stats.replication import with_next_run
    rng = np.random.default_rng(1)
    rows = [{"variant": v, "size": size, "trial": rnd, "round": rnd, "status": "ok", "warmup": False,
             "instructions_per_op": val, "ns_per_op": 10 + rng.normal(0, 0.1)}
            for size in (64, 128) for rnd in range(10)
            for v, val in (("base", 100.0), ("fewer", 90.0), ("same", 100.0), ("one", 95.0)) if v != "one" or rnd == 0]
    raw = pd.DataFrame(rows)
    for metric, designs in (("instructions_per_op", {"exact"}), ("ns_per_op", {"paired", "unpaired"})):
        run = tmp_path / metric
        run.mkdir()
        raw.to_csv(run / "raw.csv", index=False)
        (run / "env.json").write_text("{}")
        cmp = with_next_run(compare(raw, "base", metric=metric))
        assert set(cmp["design"]) == designs
        cmp.to_csv(run / "compare.csv", index=False)
        res = V.verify(run)
        assert res.ok, res.text()
        cmp.loc[cmp["candidate"] == "fewer", "delta_pct"] += 0.01
        cmp.to_csv(run / "compare.csv", index=False)
        assert {(f.field, f.row.split()[-1]) for f in V.verify(run).findings} == {("delta_pct", "fewer")}


@pytest.mark.parametrize("basis", ["runs", "early runs", "host A/A"])
def test_the_next_run_interval_uses_the_tau_and_basis_the_row_states(tmp_path, basis):
    from ringlab.stats.compare import compare
    from ringlab.stats.replication import Between, with_next_run
    run = _synthetic(tmp_path, incomplete=False)
    raw = pd.read_csv(run / "raw.csv")
    text, df = {"runs": ("from 4 runs of this comparison", 2.0),
                "early runs": ("from 2 runs of this comparison (Q-profile 40% bound)", math.inf),
                "host A/A": ("host A/A upper bound from 6 runs, 70% one-sided", math.inf)}[basis]
    b = Between(tau2=0.01 ** 2, df=df, basis="host A/A" if basis == "host A/A" else "runs", runs=4, text=text)
    cmp = with_next_run(compare(raw, "base"), b)
    cmp.to_csv(run / "compare.csv", index=False)
    assert V.verify(run).ok
    cmp["next_between_sd_pct"] *= 1.2            # another tau than the interval was made with
    cmp.to_csv(run / "compare.csv", index=False)
    fields = {f.field for f in V.verify(run).findings}
    # a wider interval may also reach across 0 where the printed one did not
    assert {"next_low_pct", "next_high_pct"} <= fields <= {"next_low_pct", "next_high_pct", "sign_reproducible"}


def test_a_rerendered_runs_notebook_keeps_its_tables_and_is_listed_not_checked(rendered, tmp_path):
    """Reports re-rendered after the run (env.json's ``rerendered`` record): the executed notebook's
    tables, printed with the code of the run, are listed as not checked, with who re-rendered
    what; without the record the same notebook's wrong cell is named."""
    from ringlab.report import report
    from ringlab.report import vs_published as vp
    run = _copy(rendered, tmp_path / "run")
    table = vp.mail_table(report(run, baseline="batch"), "batch", "reorder")
    col = next(c for c in table.columns if c.startswith("patched (reorder)"))
    table.loc[1, col] = table.loc[1, col] * 1.01
    nb = {"cells": [{"cell_type": "code", "source": [], "metadata": {}, "execution_count": 1, "outputs": [
        {"output_type": "display_data", "metadata": {}, "data": {"text/html": [table.to_html()]}}]}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (run / "10-ptr-ring-reorder.ipynb").write_text(json.dumps(nb))
    assert not V.verify(run).ok
    env = json.loads((run / "env.json").read_text())
    env["rerendered"] = {"commit": "0123456789abcdef", "utc": "2026-12-07T19:00:00Z",
                         "files": ["summary.md", "compare.csv", "mail.txt"]}
    (run / "env.json").write_text(json.dumps(env))
    res = V.verify(run)
    assert res.ok, res.text()
    (line,) = [s for s in res.not_checked if s.startswith("10-ptr-ring-reorder.ipynb")]
    assert "0123456789ab" in line and "nothing re-measured" in line


def test_a_further_runs_rows_in_the_mail_are_checked_against_its_sub_run(rendered, tmp_path):
    """The mail's "Further runs" rows (labelled by the sub-run folder's name) recompute from that
    folder's raw.csv; a wrong one is named."""
    run = _copy(rendered, tmp_path / "run")
    _copy(rendered, run / "again")
    (run / "again" / "mail.txt").unlink()
    text = (run / "mail.txt").read_text()
    head = text.index("%change      reorder")       # the reorder table's rows follow its head
    row = next(line for line in text[head:].splitlines() if re.match(r"^\s+[\d.]+\s+±\S+\s+\*?[+-][\d.]+%", line)
               and "mode=1" in line)
    (run / "mail.txt").write_text(text + "\nFurther runs in this folder:\n  batch ±%sd   %change   reorder ±%sd  ns/op\n"
                                  + "-" * 62 + "\n" + row.replace("mode=1", "again mode=1") + "\n")
    before = V.verify(run)
    assert before.ok, before.text()
    assert before.checked >= V.verify(rendered).checked + 3
    pct = re.search(r"[+-][\d.]+%", row).group(0)
    wrong = f"{float(pct[:-1]) + 5:+.1f}%"
    (run / "mail.txt").write_text((run / "mail.txt").read_text().replace(
        row.replace("mode=1", "again mode=1"), row.replace("mode=1", "again mode=1").replace(pct, wrong, 1)))
    assert any(f.file == "mail.txt" and "again" in f.row and f.field == "%change" for f in V.verify(run).findings)


def test_a_notebook_row_of_a_sub_run_build_is_checked_against_that_sub_run(tmp_path):
    """A notebook table's rows whose ``build`` cell names a sub-run folder (verdict-check's
    ``aligned`` build, measured into RUN/aligned with its own raw.csv and no report) recompute from
    that folder, the other rows from the run; a wrong number in the sub-run's row is named."""
    from ringlab import fmt
    from ringlab.stats.compare import compare
    from ringlab.stats.replication import with_next_run
    from ringlab.studies import verdict_check as vc
    run = _synthetic(tmp_path, incomplete=False)
    raw = pd.read_csv(run / "raw.csv")
    sub = run / "aligned"
    sub.mkdir()
    other = raw[raw["variant"] != "same"].copy()
    other.loc[other["variant"] == "cand", "ns_per_op"] *= 1.1      # another effect than the run's own
    other.to_csv(sub / "raw.csv", index=False)
    (sub / "env.json").write_text(json.dumps({"parameters": {"variants": "base,cand"}}))
    default = vc.verdict_table(with_next_run(compare(raw, "base")), "default")
    aligned = vc.verdict_table(with_next_run(compare(other, "base")), "aligned")

    def write(tables) -> None:
        nb = {"cells": [{"cell_type": "code", "source": [], "metadata": {}, "execution_count": 1, "outputs": [
            {"output_type": "display_data", "metadata": {}, "data": {"text/markdown": [fmt.df_to_markdown(t, ".4g")]}}
            for t in tables]}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
        (run / "14-verdict-check.ipynb").write_text(json.dumps(nb))

    before = V.verify(run).checked
    write([default, aligned])
    res = V.verify(run)
    assert res.ok, res.text()
    assert res.checked >= before + 2 * 6 + 2 * 6          # the default table's rows and the aligned one's
    assert any(s.startswith("14-verdict-check.ipynb (aligned) next run here") for s in res.not_checked)
    col = next(c for c in aligned.columns if c.startswith("%change"))
    aligned.loc[1, col] = f"{float(aligned.loc[1, col].rstrip('%')) + 1:+.1f}%"
    write([default, aligned])
    (f,) = V.verify(run).findings
    assert (f.file, f.field) == ("14-verdict-check.ipynb (aligned)", col) and "size=1024" in f.row


def test_a_notebook_row_against_another_variant_is_checked_against_that_variants_family(tmp_path):
    """A table whose ``baseline`` cell names another variant than the run's ("each against base")
    is recomputed against that variant, and one whose arm columns are named by the arm and the
    unit ("base ns/op") has its centers checked; a planted wrong number in either is named."""
    from ringlab.report import tables as tab
    from ringlab.stats.compare import compare
    run = _synthetic(tmp_path, False)
    raw = pd.read_csv(run / "raw.csv")

    def rows(baseline: str, arms: bool) -> pd.DataFrame:
        cmp = compare(raw, baseline)
        cmp = cmp[cmp["candidate"] == "cand"]
        out = []
        for _, r in cmp.iterrows():
            cb, cc = tab.arm_centers(r)
            arm = ({f"{baseline} ns/op": sig4(cb), "cand ns/op": sig4(cc)} if arms
                   else {"baseline": baseline, "candidate": r["candidate"]})
            out.append({"size": r["size"], **arm, tab.change_header(cmp): tab.row_change_text(r),
                        "p (Holm)": f"{r['p_holm']:.3g}", "verdict": r["verdict"]})
        return pd.DataFrame(out)

    def write(tables: list[pd.DataFrame]) -> None:
        nb = {"cells": [{"cell_type": "code", "source": [], "metadata": {}, "execution_count": 1, "outputs": [
            {"output_type": "display_data", "metadata": {}, "data": {"text/html": [t.to_html(index=False)]}}
            for t in tables]}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
        (run / "99-tables.ipynb").write_text(json.dumps(nb))

    against_same, own = rows("same", arms=False), rows("base", arms=True)
    write([own, against_same])
    res = V.verify(run)
    assert res.ok, res.text()
    assert res.checked >= V.verify(tmp_path / "paired").checked
    col = next(c for c in against_same.columns if c.startswith("%change"))
    against_same.loc[1, col] = f"{float(against_same.loc[1, col].rstrip('%')) + 1:+.1f}%"
    write([own, against_same])
    (f,) = V.verify(run).findings
    assert f.field == col and "size=1024" in f.row and "vs same" in f.row
    own.loc[0, "cand ns/op"] = sig4(float(own.loc[0, "cand ns/op"]) * 1.01)
    write([own, rows("same", arms=False)])
    (f,) = V.verify(run).findings
    assert f.field == "candidate center" and "size=64" in f.row
