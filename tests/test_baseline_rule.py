"""One baseline rule (ringlab.rundir.baseline): summary.md, ringlab mail and ringlab.open name
the same baseline for the same run."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

import ringlab
from ringlab.report import mail
from ringlab.errors import ParamError
from ringlab.report import write_report
from ringlab.rundir.baseline import pick_baseline
from tests.committed import committed

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = committed(sorted((ROOT / "results" / "ptr-ring-reorder").glob("*/*/raw.csv")))


def _df(*variants):
    return pd.DataFrame({"variant": list(variants)})


def test_rule_order():
    df = _df("reorder", "batch", "prebatch")
    params = {"parameters": {"variants": "prebatch,batch,reorder"}}
    assert pick_baseline(df, {}) == "reorder"                          # first in raw.csv
    assert pick_baseline(df, params) == "prebatch"                     # first of the variants parameter
    asked = {"parameters": {"variants": "prebatch,batch,reorder", "baseline": "reorder"}}
    assert pick_baseline(df, asked) == "reorder"                       # the run's baseline parameter
    assert pick_baseline(df, dict(params, baseline="batch")) == "batch"  # env.json baseline
    assert pick_baseline(df, dict(params, baseline="batch", report={"baseline": "reorder"})) == "reorder"
    assert pick_baseline(df, dict(params, report={"baseline": "gone"})) == "prebatch"  # not a variant: passed over
    assert pick_baseline(df, dict(params, report={"baseline": "reorder"}), "batch") == "batch"
    assert pick_baseline(_df("batch", "batch"), params) is None        # one variant: nothing to compare
    with pytest.raises(ParamError, match=r"parameter 'baseline': 'nope'.*allowed: batch, prebatch, reorder"):
        pick_baseline(df, {}, "nope")


def _summary_baseline(run_dir: Path) -> str:
    m = re.search(r"^## A/B verdicts \(baseline (\S+)\)", (run_dir / "summary.md").read_text(), re.M)
    assert m, "summary.md has no A/B section"
    return m.group(1)


def _mail_baseline(run_dir: Path) -> str:
    m = re.search(r" against (\S+) on\s", mail.mail_text(run_dir))
    assert m, "mail has no title line"
    return m.group(1)


@pytest.mark.skipif(not COMMITTED, reason="no committed ptr-ring-reorder run")
def test_mail_and_summary_name_the_same_baseline_on_a_committed_run(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(COMMITTED[-1].parent, run_dir)
    env = json.loads((run_dir / "env.json").read_text())
    variants = env["parameters"]["variants"]
    variants = variants.split(",") if isinstance(variants, str) else variants
    # the notebook asked its report for a baseline that is not the first variant: the case
    # where summary.md and the mail used to disagree
    assert env["report"]["baseline"] != variants[0]
    write_report(run_dir, figures=False)
    assert _summary_baseline(run_dir) == _mail_baseline(run_dir) == env["report"]["baseline"]
    assert ringlab.open(run_dir).baseline == env["report"]["baseline"]


@pytest.mark.skipif(not COMMITTED, reason="no committed ptr-ring-reorder run")
def test_mail_and_summary_agree_without_a_report_choice(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(COMMITTED[-1].parent, run_dir)
    env = json.loads((run_dir / "env.json").read_text())
    env.pop("report", None)
    env.pop("baseline", None)
    env["parameters"].pop("baseline", None)
    env["parameters"]["variants"] = "reorder,batch,prebatch,kernel"
    (run_dir / "env.json").write_text(json.dumps(env))
    write_report(run_dir, figures=False)
    assert _summary_baseline(run_dir) == _mail_baseline(run_dir) == "reorder"
