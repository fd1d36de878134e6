"""Compute once, then render: summary.md, mail.txt and the notebook tables of one run are
rendered from one :class:`ringlab.report.analysis.Analysis`, and give the same text as when each
is made from the run folder on its own."""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from ringlab.report import analysis, mail, report
from ringlab.report import vs_published as vp

DATA = Path(__file__).resolve().parent / "data" / "mail"


@pytest.fixture
def run(tmp_path) -> Path:
    d = tmp_path / "run"
    shutil.copytree(DATA, d)
    return d


@pytest.fixture
def calls(monkeypatch) -> dict[str, Counter]:
    """Every compare(), noise-floor and next-run call, counted (compare by baseline and metric)."""
    seen = {"compare": Counter(), "floor": Counter(), "drift": Counter()}

    def counting(name, fn, key):
        def wrapped(*args, **kwargs):
            seen[name][key(*args, **kwargs)] += 1
            return fn(*args, **kwargs)
        return wrapped
    monkeypatch.setattr(analysis, "compare", counting("compare", analysis.compare,
                                                      lambda df, base, metric="ns_per_op", **kw: (base, metric)))
    monkeypatch.setattr(analysis, "run_noise_floor", counting("floor", analysis.run_noise_floor, lambda *a: "floor"))
    monkeypatch.setattr(analysis, "with_host_next_run", counting("drift", analysis.with_host_next_run,
                                                                 lambda cmp, *a, **kw: "drift"))
    return seen


def test_summary_and_mail_of_one_run_come_from_one_computation(run, calls):
    rep = report(run, figures=False)
    assert calls["compare"] and set(calls["compare"].values()) == {1}, calls["compare"]
    made = sum(calls["compare"].values())
    text = mail.mail_text(rep)
    table = vp.mail_table(rep, baseline=rep.baseline, patched="patched")
    again = vp.mail_table(rep, baseline=rep.baseline, patched="patched")
    assert table.equals(again)
    counts = mail.published_counts(rep)
    # the mail, the notebook table and the published counts compared nothing again, except the
    # instruction counts of the mail's table (one compare() of instructions per op)
    timing = {k: v for k, v in calls["compare"].items() if k[1] != analysis.INSTR}
    assert timing == {(rep.baseline, rep.metric): 1}, calls["compare"]
    assert sum(calls["compare"].values()) <= made + 1
    assert all(v == 1 for v in calls["compare"].values()), calls["compare"]
    assert calls["floor"] == {"floor": 1} and calls["drift"] == {"drift": 1}, calls
    # the same text as each renders from the run folder alone
    assert text == mail.mail_text(run)
    assert (run / "summary.md").read_text() == rep.markdown
    assert counts == mail.published_counts(run)
    assert table.equals(vp.mail_table(run, baseline=rep.baseline, patched="patched"))


def test_a_report_renders_its_summary_without_computing_again(run, calls):
    a = analysis.Analysis(run).compute()
    first = report(a, figures=False)
    n = sum(calls["compare"].values())
    second = report(a, figures=False)
    assert sum(calls["compare"].values()) == n == 1
    assert first.markdown == second.markdown and first.analysis is second.analysis is a


def test_the_notebook_mail_renders_the_report_it_is_given(run, calls, capsys):
    from ringlab.lab import notebook
    from ringlab.lab.cli import main as cli_main
    rep = notebook.report(run)
    n = calls["compare"].copy()
    given = ("12-patch-ab.ipynb", {"profile": "full", "patch": "builtin:flush-delay:32", "seed": 1})
    text = notebook.write_mail(rep, notebook=given)
    assert [k for k in calls["compare"] if k[1] != analysis.INSTR] == [k for k in n if k[1] != analysis.INSTR]
    assert (run / "mail.txt").read_text() == text
    assert cli_main(["mail", str(run)]) == 0
    assert capsys.readouterr().out == text


def test_a_report_into_an_output_folder_leaves_the_run_folder_as_it_was(run, tmp_path):
    before = sorted(p.name for p in run.iterdir())
    out = tmp_path / "out"
    out.mkdir()
    rep = report(run, figures=False, out_dir=out)
    assert sorted(p.name for p in run.iterdir()) == before
    assert (out / "summary.md").read_text() == rep.markdown == rep.files["summary.md"]
