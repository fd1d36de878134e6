"""Every committed compare.csv, summary.md and notebook table under results/ shows one estimator
in one sign at one stated CI level.

* compare.csv: the arm centers (``center_baseline``, ``center_candidate``) give the row's
  effect (their ratio is delta_pct), ``gain_pct`` is + = better, and its CI holds it; every
  printed CI is at one level, inside the Holm CI the verdict rests on;
* summary.md: the A/B table's arm columns have the sign of its ``%change`` column (+ = better),
  one sign convention is stated once, no second convention ("mail sign", a "delta" column) is
  left, one CI level is stated, and the host's noise floor is given;
* the notebooks' tables (``report(run).tables["ab"]``, seed 000's mail table and the
  cross-machine table of notebook 90), rendered from the committed raw.csv with this code:
  the same checks.
"""
from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
CHANGE_RE = re.compile(r"^%change \(\+ = (.+)\)$")
LEVEL_RE = re.compile(r"(\d+(?:\.\d+)?)% CI\b")
NUM_RE = re.compile(r"^[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _committed(pattern: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", pattern], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / p for p in out.stdout.split()]


COMPARE = _committed("results/*compare.csv")
SUMMARIES = [p for p in _committed("results/*summary.md") if (p.parent / "raw.csv").is_file()]
#: compare-runs' summary.md (notebook 90's cross-machine table), re-rendered from the runs' raw.csv
CROSS = _committed("results/compare-runs/*summary.md")
RUNS = [p.parent for p in COMPARE]


def _id(p: Path) -> str:
    return str(p.relative_to(RESULTS))


def test_there_are_committed_tables_to_check():
    assert len(COMPARE) >= 10 and len(SUMMARIES) >= 10


def _number(cell) -> float:
    if isinstance(cell, (int, float)):
        return float(cell)
    m = NUM_RE.match(str(cell).split(": ")[-1].strip())
    return float(m.group(0)) if m else math.nan


def _pct(cell) -> float:
    s = str(cell).strip()
    return float(s.rstrip("%")) if s.endswith("%") and NUM_RE.match(s) else math.nan


def check_arms(base, cand, change: float, lower_is_better: bool, where: str, tol: float = 0.15) -> None:
    """The arm figures beside an effect have its sign (+ = better) and give its size."""
    b, c = _number(base), _number(cand)
    if not (math.isfinite(b) and math.isfinite(c) and math.isfinite(change)) or b == 0:
        return
    implied = ((b - c) if lower_is_better else (c - b)) / abs(b) * 100
    assert abs(implied - change) <= tol + 0.002 * abs(change), \
        f"{where}: arms {base} -> {cand} give {implied:+.2f}%, the effect says {change:+.2f}%"
    if abs(change) > tol:
        assert (implied > 0) == (change > 0), f"{where}: arms {base} -> {cand} against %change {change:+.2f}%"


@pytest.mark.parametrize("path", COMPARE, ids=_id)
def test_compare_csv_arm_centers_give_the_effect(path):
    df = pd.read_csv(path)
    for col in ("center_baseline", "center_candidate", "gain_pct", "gain_low_pct", "gain_high_pct"):
        assert col in df.columns, f"{_id(path)}: no {col} column (re-render it with `ringlab summarize`)"
    for i, r in df.iterrows():
        d, cb, cc = r["delta_pct"], r["center_baseline"], r["center_candidate"]
        where = f"{_id(path)} row {i} ({r['group']})"
        if not (math.isfinite(d) and math.isfinite(cb) and cb != 0):
            continue
        assert (cc / cb - 1) * 100 == pytest.approx(d, abs=1e-6), where
        lib = bool(r["lower_is_better"])
        assert r["gain_pct"] == pytest.approx(-d if lib else d), where
        if math.isfinite(r["ci_low_pct"]):
            assert r["gain_low_pct"] <= r["gain_pct"] <= r["gain_high_pct"], where
            want = (-r["ci_high_pct"], -r["ci_low_pct"]) if lib else (r["ci_low_pct"], r["ci_high_pct"])
            assert (r["gain_low_pct"], r["gain_high_pct"]) == pytest.approx(want), where
        check_arms(cb, cc, r["gain_pct"], lib, where, tol=1e-6)


@pytest.mark.parametrize("path", COMPARE, ids=_id)
def test_compare_csv_prints_one_ci_level(path):
    """Every row's printed CI is at one level; the verdict's Holm CI contains it."""
    df = pd.read_csv(path)
    assert "holm_ci_level" in df.columns, f"{_id(path)}: no Holm CI columns (re-render it with `ringlab summarize`)"
    has = df["ci_low_pct"].notna()
    assert df.loc[has, "ci_level"].round(6).nunique() <= 1, f"{_id(path)}: CI levels {sorted(set(df['ci_level']))}"
    h = df[has & df["holm_ci_low_pct"].notna()]
    assert (h["holm_ci_low_pct"] <= h["ci_low_pct"] + 1e-9).all() and (h["ci_high_pct"] <= h["holm_ci_high_pct"] + 1e-9).all()


@pytest.mark.parametrize("path", COMPARE, ids=_id)
def test_compare_csv_rows_not_called_stand_beside_a_ci_that_includes_0(path):
    """No row reads "inconclusive" or "no significant difference" beside a printed CI that excludes
    0, and no called row beside one that includes it."""
    df = pd.read_csv(path)
    excl = (df["ci_low_pct"] > 0) | (df["ci_high_pct"] < 0)
    quiet = df["verdict"].isin(["inconclusive", "no significant difference"])
    assert not (quiet & excl).any(), f"{_id(path)}: {df.loc[quiet & excl, ['group', 'candidate', 'verdict']]}"
    called = df["verdict"].isin(["faster", "slower"]) & df["ci_low_pct"].notna()
    assert (excl | ~called).all(), f"{_id(path)}: {df.loc[called & ~excl, ['group', 'candidate', 'verdict']]}"


def _md_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    out, cur = [], []
    for ln in text.splitlines() + [""]:
        if ln.startswith("|"):
            cur.append([c.strip() for c in ln.strip().strip("|").split("|")])
        elif cur:
            if len(cur) >= 2 and set("".join(cur[1])) <= set("-: "):
                out.append((cur[0], cur[2:]))
            cur = []
    return out


def check_table(header: list[str], rows: list[list], where: str) -> str | None:
    """The arm columns of an A/B table have its %change's sign; returns what + means (None
    when the table shows no effect)."""
    ch = [i for i, h in enumerate(header) if CHANGE_RE.match(str(h))]
    if not ch:
        return None
    assert len(ch) == 1, f"{where}: more than one effect column: {header}"
    i = ch[0]
    better = CHANGE_RE.match(header[i]).group(1)
    lib = better in ("faster", "fewer instructions") or better.startswith("lower ")
    assert i + 1 < len(header) and "CI" in str(header[i + 1]), f"{where}: the CI does not follow %change"
    arms = [j for j, h in enumerate(header[:i]) if h not in ("design", "n_pairs")][-2:]
    for r in rows:
        check_arms(r[arms[0]], r[arms[1]], _pct(r[i]), lib, f"{where}: {r}")
    return better


def check_conventions(text: str, where: str) -> None:
    """One sign convention and one stated CI level in a file's text."""
    assert "mail sign" not in text, f"{where}: a second sign convention ('mail sign')"
    levels = set(LEVEL_RE.findall(text))
    assert len(levels) <= 1, f"{where}: CI levels {sorted(levels)} stated; one per report"


@pytest.mark.parametrize("path", SUMMARIES, ids=_id)
def test_summary_md_one_sign_one_level(path):
    text = path.read_text()
    where = _id(path)
    check_conventions(text, where)
    tables = _md_tables(text)
    signs = {check_table(h, rows, where) for h, rows in tables} - {None}
    has_ab = "## A/B verdicts" in text
    if has_ab:
        assert len(signs) == 1, f"{where}: sign conventions {signs}"
        assert text.count("Sign: + means better") == 1, f"{where}: the sign convention is not stated once"
    assert "Noise floor" in text, f"{where}: no noise floor"
    for h, _ in tables:
        assert "delta" not in h and not any(str(c).startswith("gain") for c in h), f"{where}: {h}"


@pytest.mark.parametrize("path", CROSS, ids=_id)
def test_compare_runs_summary_one_sign_one_level(path):
    text = path.read_text()
    where = _id(path)
    check_conventions(text, where)
    signs = {check_table(h, rows, where) for h, rows in _md_tables(text)} - {None}
    assert signs == {"faster"}, f"{where}: sign conventions {signs}"
    assert text.count("Sign: + means better") == 1
    csv = pd.read_csv(path.parent / "cross_machine.csv")
    check_table(list(csv.columns), csv.values.tolist(), f"{where} cross_machine.csv")
    check_conventions(" ".join(csv.columns), f"{where} cross_machine.csv")


def _noise_floor_holds(text: str) -> None:
    m = re.search(r"\|%change\| < (\d+(?:\.\d+)?)%; an effect smaller", text)
    if not m:
        return
    bound = float(m.group(1))
    for h, rows in _md_tables(text):
        ch = [i for i, c in enumerate(h) if CHANGE_RE.match(c)]
        if not ch or "verdict" not in h:
            continue
        for r in rows:
            g = _pct(r[ch[0]])
            if math.isfinite(g) and abs(g) < bound - 0.05 and "exact" not in r[h.index("verdict")]:
                assert "below this host's noise floor" in r[h.index("verdict")], r


@pytest.mark.parametrize("path", SUMMARIES, ids=_id)
def test_summary_md_verdicts_below_the_noise_floor_say_so(path):
    _noise_floor_holds(path.read_text())


def _render(run: Path):
    from ringlab.report.summary import _render, compute
    return _render(compute(run))[0]


@pytest.mark.parametrize("run", RUNS, ids=_id)
def test_notebook_ab_table_rendered_from_raw_csv(run):
    rep = _render(run)
    ab = rep.tables["ab"]
    where = f"{_id(run)} (report tables['ab'])"
    assert check_table(list(ab.columns), ab.values.tolist(), where) is not None
    check_conventions(" ".join(map(str, ab.columns)) + "\n" + rep.markdown, where)


def _ptr_ring_runs(experiment: str) -> list[Path]:
    return [r for r in RUNS if r.parts[-3] == experiment]


@pytest.mark.parametrize("run", _ptr_ring_runs("ptr-ring-reorder"), ids=_id)
def test_seed000_mail_table_rendered_from_raw_csv(run):
    from ringlab.report import vs_published
    t = vs_published.mail_table(run, "batch", "reorder")
    where = f"{_id(run)} (mail_table)"
    assert check_table(list(t.columns), t.values.tolist(), where) == "faster"
    check_conventions(" ".join(t.columns), where)


@pytest.mark.parametrize("run", _ptr_ring_runs("ptr-ring-batch-zeroing"), ids=_id)
def test_size_sweep_table_rendered_from_raw_csv(run):
    from ringlab.report import vs_published
    t = vs_published.size_sweep_table(run, baseline="prebatch")
    where = f"{_id(run)} (size_sweep_table)"
    assert check_table(list(t.columns), t.values.tolist(), where) == "faster"
    check_conventions(" ".join(t.columns), where)


@pytest.mark.parametrize("run", _ptr_ring_runs("page-frag"), ids=_id)
def test_by_placement_table_rendered_from_raw_csv(run):
    from ringlab.report import vs_published
    t = vs_published.by_placement_table(run, "before")
    where = f"{_id(run)} (by_placement_table)"
    assert check_table(list(t.columns), t.values.tolist(), where) == "faster"
    check_conventions(" ".join(t.columns), where)


def test_cross_machine_table_rendered_from_raw_csv():
    from ringlab.rundir import RunOutput
    from ringlab.studies import compare_runs
    runs = [RunOutput(r) for r in _ptr_ring_runs("ptr-ring-reorder")]
    if not runs:
        pytest.skip("no committed ptr-ring-reorder run")
    t = compare_runs.cross_machine_table(runs)
    assert len(t)
    assert check_table(list(t.columns), t.values.tolist(), "cross_machine_table") == "faster"
    check_conventions(" ".join(t.columns), "cross_machine_table")


def test_check_arms_can_fail():
    check_arms(10.0, 9.0, 10.0, True, "ok")
    with pytest.raises(AssertionError):
        check_arms(10.0, 11.0, 10.0, True, "opposite sign")
    with pytest.raises(AssertionError):
        check_conventions("a 95% CI and a 97.5% CI", "two levels")
    with pytest.raises(AssertionError):
        check_table(["a", "b", "%change (+ = faster)", "95% CI of %change"],
                    [["3.548 ns", "3.403 ns", "-0.2%", "[-1%, +1%]"]], "the old compare.csv row")
