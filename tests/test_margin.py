"""The equivalence margin a run's reports test: the run's ``-p margin`` (env.json), stated in
every verdict note it decides."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from ringlab.experiments.params import COMMON_PARAMS
from ringlab.report import analysis
from ringlab.stats.decide import EQUIVALENCE_MARGIN

DATA = Path(__file__).resolve().parent / "data" / "mail"


def test_the_margin_parameter_has_the_documented_default():
    p = {q.name: q for q in COMMON_PARAMS}["margin"]
    assert p.default == EQUIVALENCE_MARGIN * 100 == 1.0 and "equivalence margin" in p.help


def test_a_runs_margin_is_what_its_report_tests_and_says(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(DATA, run)
    plain = analysis.Analysis(run)
    assert plain.margin == EQUIVALENCE_MARGIN
    env = json.loads((run / "env.json").read_text())
    env.setdefault("parameters", {})["margin"] = 50.0
    (run / "env.json").write_text(json.dumps(env))
    wide = analysis.Analysis(run)
    assert wide.margin == 0.5
    rows = wide.comparison[wide.comparison["design"] != "exact"]
    assert len(rows)
    # every CI lies within +-50%: each row is settled against the margin, and its note says which
    assert rows["note"].str.contains("±50% (the equivalence margin)", regex=False).all(), list(rows["note"])
    assert not rows["verdict"].eq("inconclusive").any()
