"""``ringlab mail``: a reply a reviewer can check without summary.md.

Each check below is a class of error a netdev reviewer found in the committed replies: no reply
said how many runs it rests on; three sign conventions (a 9.7-fold cost printed as "+89.7%" or
"-893.5%"); a summary that hid twelve rows pointing one way; no headline in the kernel test
robot's form; row labels cut in half; "Every row: ... lock False" above rows of the lock arm;
no lines to paste into a commit message.  Each check runs on the reply rendered from the
committed raw.csv into tmp_path (``[rendered]``, which must pass) and on the committed mail.txt
(``[committed]``: it holds the committed text to the same rule, so it fails until results/ is
rendered again with this code).
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from ringlab.catalog import is_call
from ringlab.report import mail, tables
from ringlab.report.analysis import Analysis
from ringlab.report.mail_harness import harness_mail_text
from tests.committed import committed

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"
DATA = Path(__file__).resolve().parent / "data" / "mail"


def _runs(*experiments: str) -> list[Path]:
    return committed(sorted(p.parent for e in experiments for p in (RESULTS / e).glob("*/*/mail.txt")))


AB = ("ptr-ring-reorder", "ptr-ring-batch-zeroing", "patch-ab", "page-frag", "perf-ring-buffer")


def _text(run: Path, which: str, tmp_path: Path) -> str:
    """The reply of ``run``: rendered from its raw.csv into tmp_path, or its committed mail.txt."""
    if which == "committed":
        return (run / "mail.txt").read_text()
    if (run / "ringlab-spsc").is_dir():
        from ringlab.studies.harness_compare import side_by_side
        text = harness_mail_text(run, run / "ringlab-spsc", side_by_side(run, run / "ringlab-spsc"))
    else:
        text = mail.mail_text(run)
    (tmp_path / "mail.txt").write_text(text)
    return (tmp_path / "mail.txt").read_text()


def _flat(text: str) -> str:
    return " ".join(text.split())


def _ids(p: Path) -> str:
    return f"{p.parent.parent.name}/{p.parent.name}"


def _both(runs):
    return [pytest.param(r, w, id=f"{_ids(r)}-{w}") for r in runs for w in ("rendered", "committed")]


def _rows(a: Analysis) -> list[pd.Series]:
    """The compared rows of the run's own baseline, the A/A controls left out."""
    from ringlab.report.mail_run import aa_controls
    cmp = a.comparison
    ctl = set(aa_controls(a.env, a.baseline, [str(c) for c in cmp["candidate"].unique()]))
    return [r for _, r in cmp.iterrows() if str(r["candidate"]) not in ctl]


# -- how many ----------------------------------------------------------------------------------
@pytest.mark.parametrize("run, which", _both(_runs(*AB)))
def test_the_reply_says_how_many(run, which, tmp_path):
    """n: the layout pairs and rounds of each row (compare()'s own counts), the trials' length
    (raw.csv's ops per trial), the run's wall time (env.json)."""
    from ringlab.report.mail_run import ops_text, trial_length
    a = Analysis(run)
    flat = _flat(_text(run, which, tmp_path))
    m = re.search(r"\bn: (.+?) per row, (.+?) ops per trial \((.+?)\), run ([\d.]+ (?:s|min|h))\.", flat)
    assert m, f"{run}: no 'n: ... per row, ... ops per trial (...), run ...' in the reply"
    rows = _rows(a)
    pairs = {int(r["n_pairs"]) for r in rows if math.isfinite(float(r["n_pairs"]))}
    assert any(str(p) in m.group(1) for p in pairs) or any(
        str(int(r["layouts"])) in m.group(1) for r in rows), (m.group(1), pairs)
    ops, _ = trial_length(a.df)
    assert m.group(2) == ops_text(ops)


# -- one sign, factors past ±50% ---------------------------------------------------------------
def _cells(text: str) -> list[str]:
    """The %change cells of the tables: a signed percent or a factor between the arms."""
    cell = re.compile(r"^\s+\S+\s+(?:±\d+%)?\s+(\*?(?:[+-]\d+\.\d%|×[\d.]+ \w+)\*?)\s+\S", re.M)
    return cell.findall(text)


@pytest.mark.parametrize("run, which", _both(_runs("perf-ring-buffer", "kernel-tests")))
def test_a_several_fold_effect_is_a_factor_in_the_one_sign(run, which, tmp_path):
    """A 9.7-fold cost read "+89.7%" (perf ring buffer) or "-893.5%" (kernel-tests): every cell
    past ±50% prints as a factor, and its direction follows the arms' figures."""
    text = _text(run, which, tmp_path)
    cells = _cells(text)
    assert cells, f"{run}: no %change cells"
    for c in cells:
        pct = re.search(r"([+-]\d+\.\d)%", c)
        assert not pct or abs(float(pct.group(1))) <= tables.FACTOR_PCT, f"{run}: {c} is a factor"
    assert any("×" in c for c in cells), f"{run}: its several-fold effect prints as a factor"
    assert "+ = better" in _flat(text)


def test_the_factor_is_the_ratio_of_the_arms():
    """The factor of a row is its candidate/baseline ratio (or its inverse), from the one gain rule."""
    for g, lib, want in ((89.7, True, "×9.7 faster"), (-893.5, True, "×9.9 slower"), (11.8, True, "+11.8%"),
                         (-50.0, True, "-50.0%"), (-60.0, False, "×2.5 slower"), (120.0, False, "×2.2 faster")):
        assert tables.change_text(g, lib) == want, (g, lib)
        assert math.isclose(tables.gain_of_ratio(tables.ratio_of_gain(g, lib), lib), g)
    assert tables.change_ci_text(88.9, 90.5, 89.7) == "[×9.0, ×10.5] faster"
    assert tables.change_ci_text(-10.0, 65.0, 55.0) == "[×1.1 slower, ×2.9 faster]"
    assert tables.change_ci_text(-1.0, 2.0, 0.5) == "[-1.0%, +2.0%]"


@pytest.mark.parametrize("run", _runs("perf-ring-buffer"), ids=_ids)
def test_summary_and_notebook_30_use_the_one_sign_and_factors(run):
    """summary.md's comparison table and notebook 30's verdict table print base's 9-fold speed-up
    as "×9.7 faster", never "+89.7%" (nor, + = slower, "-89.7%")."""
    from ringlab.report import vs_published as vp
    a = Analysis(run)
    header, rows = tables.comparison_rows(a.comparison)
    ch = header.index(tables.change_header(a.comparison))
    base_rows = [row for row, (_, r) in zip(rows, a.comparison.iterrows()) if r["candidate"] == "base"]
    assert base_rows and all(row[ch].startswith("×") and row[ch].endswith("faster") for row in base_rows)
    v = vp.perf_rb_verdicts(a)
    assert "delta" not in v.columns
    col = next(c for c in v.columns if c.startswith(tables.CHANGE))
    fwd = v[(v["baseline"] == "base") & (v["candidate"] == "forward")]
    assert len(fwd) and all(t.endswith("slower") for t in fwd[col])


# -- summaries say what the rows say --------------------------------------------------------
@pytest.mark.parametrize("run, which", _both(_runs("page-frag", "ptr-ring-reorder", "perf-ring-buffer")))
def test_the_summary_counts_which_way_the_rows_point(run, which, tmp_path):
    """Twelve rows, every one slower and none decided, read "no change told apart from noise":
    the title says "after is slower in 12 of 12 rows; none decided", or how many changed and
    which way the others point."""
    a = Analysis(run)
    rows = _rows(a)
    called = [r for r in rows if is_call(r["verdict"])]
    rest = [r for r in rows if not is_call(r["verdict"])]
    title = _flat("\n".join(_text(run, which, tmp_path).split("\n\n")[0].splitlines()))
    if not called:
        slower = sum(tables.gain(r) < 0 for r in rows)
        faster = sum(tables.gain(r) > 0 for r in rows)
        if slower == len(rows) or faster == len(rows):
            word = "slower" if slower == len(rows) else "faster"
            assert re.search(rf"is {word} in {len(rows)} of {len(rows)} rows; none decided", title), title
    else:
        assert f"{len(called)} of {len(rows)} rows changed" in title, title
        if rest:
            assert f"the other {len(rest)}:" in title and "none decided" in title, title


# -- the robot's headline ---------------------------------------------------------------------
ROBOT = re.compile(r"^(\S+) vs (\S+): (?:(\d+\.\d)% (?:to (\d+\.\d)% )?(improvement|regression) of|"
                   r"×[\d.]+ (?:to ×[\d.]+ )?\w+ in|no change called)")


@pytest.mark.parametrize("run, which", _both(_runs(*AB)))
def test_each_comparison_has_a_headline_in_the_robots_form(run, which, tmp_path):
    """"prebatch vs batch: 11.8% improvement of ns/op (mode=0 same-cpu), 95% CI [+11.1, +12.5]":
    one line per comparison and direction, the uncalled rows as "no change called"."""
    a = Analysis(run)
    text = _text(run, which, tmp_path)
    heads = [m for m in map(ROBOT.match, text.splitlines()) if m]
    for cand in {str(r["candidate"]) for r in _rows(a)}:
        mine = [m for m in heads if m.group(1) == cand and m.group(2) == a.baseline]
        assert mine, f"{run}: no headline for {cand} vs {a.baseline}"
        called = [r for r in _rows(a) if str(r["candidate"]) == cand and is_call(r["verdict"])]
        for r in called:   # its size is the line's, or inside the line's range
            g = tables.gain(r)
            if not tables.is_factor(g):
                kind = "improvement" if g > 0 else "regression"
                assert any(m.group(5) == kind and float(m.group(3)) - 0.05 <= abs(g) <= float(m.group(4) or m.group(3))
                           + 0.05 for m in mine), (cand, g, [m.group(0) for m in mine])


# -- the block to paste -----------------------------------------------------------------------
def _block(text: str) -> list[str]:
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("To paste into the commit message"))
    out = []
    for ln in lines[i + 1:]:
        if not ln.strip():
            break
        out.append(ln)
    return out


@pytest.mark.parametrize("run, which", _both(_runs("ptr-ring-reorder", "patch-ab")))
def test_a_block_to_paste_into_the_commit_message(run, which, tmp_path):
    """Marked as such: the command and commit, n, before -> after with its 95% CI, where a
    rerun here should land, the data; its figures are the headline row's, its %change and both
    intervals in the table's one sign, which the line states (the block is pasted without the
    mail's header)."""
    text = _text(run, which, tmp_path)
    assert "To paste into the commit message" in text, f"{run}: no block to paste"
    block = _block(text)
    joined = _flat("\n".join(block))
    assert block[0].startswith("Measured with ringlab ") and block[1].startswith("  n: ")
    assert "before -> after: " in joined and "a rerun here should show:" in joined
    i = next(k for k, ln in enumerate(block) if ln.startswith("  data: "))
    data = block[i][len("  data: "):] + "".join(ln.strip() for ln in block[i + 1:])   # broken after a '/'
    assert (ROOT / data).is_file(), data
    a = Analysis(run)
    called = [r for r in _rows(a) if is_call(r["verdict"])]
    # the headline row: the largest called effect; none called: the run's patched arm's first row
    top = max(called, key=lambda r: abs(tables.gain(r))) if called else next(
        (r for r in _rows(a) if str(r["candidate"]) == str(a.patched)), _rows(a)[0])
    b, c = tables.arm_centers(top)
    assert f"{b:#.4g}".rstrip(".") in joined and f"{c:#.4g}".rstrip(".") in joined
    est, ci = tables.row_change_text(top), tables.row_change_ci_text(top, percent_sign=False)
    assert not tables.is_factor(tables.gain(top))   # these runs' headline rows are percents
    assert f"{est} {ci} (95% CI, + = better)" in joined, (est, ci, joined)
    if which == "committed":
        # the interval the run printed: its between-run variance may come from run folders beside
        # it when it ran (the same comparison's earlier runs) that a later set no longer holds
        cmp = pd.read_csv(run / "compare.csv")
        top = cmp[(cmp["group"].astype(str) == str(top["group"]))
                  & (cmp["candidate"].astype(str) == str(top["candidate"]))].iloc[0]
    nlo, nhi = tables.next_gain_ci(top)
    assert f"should show: [{nlo:+.1f}, {nhi:+.1f}]" in joined


def test_the_block_gives_the_next_run_basis_when_the_row_has_one(monkeypatch):
    """The rows' ``next_basis`` (where the next-run interval's between-run part comes from) is
    printed in the block's rerun line; a row without one prints the interval alone."""
    real = Analysis.compare

    def without_basis(self, *args, **kwargs):
        return real(self, *args, **kwargs).drop(columns=["next_basis"], errors="ignore")
    monkeypatch.setattr(Analysis, "compare", without_basis)
    assert any("(next-run interval)" in ln for ln in _block(mail.mail_text(DATA)))

    def with_basis(self, *args, **kwargs):
        cmp = real(self, *args, **kwargs).copy()
        cmp["next_basis"] = "host A/A"
        return cmp
    monkeypatch.setattr(Analysis, "compare", with_basis)
    assert "] (host A/A drift bound)" in _flat("\n".join(_block(mail.mail_text(DATA))))


def test_three_rows_fit_one_screen(tmp_path):
    """A three-row run's reply, block and intervals included, is one screen (at most 60 lines)."""
    text = _text(DATA, "rendered", tmp_path)
    assert len([r for r in _rows(Analysis(DATA))]) == 3
    assert len(text.splitlines()) <= 60, len(text.splitlines())
    for run in _runs("patch-ab"):   # three rows, their A/A control and instruction counts
        assert len(mail.mail_text(run).splitlines()) <= 60, run


# -- labels whole, and what every row shares --------------------------------------------------
@pytest.mark.parametrize("run, which", _both(_runs("page-frag", "perf-ring-buffer")))
def test_row_labels_are_never_cut(run, which, tmp_path):
    """Two rows once read "after align=0 len=2048 same": every configuration's label is whole in
    the table and in the interval lines (a long one wraps instead)."""
    text = _text(run, which, tmp_path)
    lines = text.splitlines()
    assert all(len(ln) <= 72 for ln in lines)
    a = Analysis(run)
    words = set()   # every word of a row's label: its placement class, each "name=value"
    for r in _rows(a):
        words.add(str(r["pair_class"]))
        words |= {f"{mail.SHORT.get(c, c)}={mail.plain_number(r[c])}" for c in a.comparison.attrs.get("group_columns", [])
                  if c not in ("pair_class", "cpu_req_producer", "cpu_req_consumer")}
    for ln in lines:
        if not ln.startswith(" "):
            continue   # table rows, interval lines and their continuations are indented
        for tok in (t.strip(",;:()") for t in ln.split()):
            if len(tok) < 4:
                continue
            cut = [w for w in words if w.startswith(tok) and w != tok]
            assert tok in words or not cut, f"{run}: {tok!r} is a cut label ({cut[0]}): {ln}"


@pytest.mark.parametrize("run, which", _both(_runs("ptr-ring-batch-zeroing")))
def test_every_row_names_only_what_every_printed_row_shares(run, which, tmp_path):
    """"Every row: ... lock False" stood above the lock arm's rows: the sentence names only the
    settings that every printed row, further runs included, has."""
    text = _text(run, which, tmp_path)
    m = re.search(r"Every row: ([^.]*)\.", _flat(text))
    shared = dict(kv.rsplit(" ", 1) for kv in m.group(1).split(", ")) if m else {}
    for sub in sorted(p for p in run.iterdir() if (p / "raw.csv").is_file()):
        if f"{sub.name} " not in text:
            continue   # not a printed row
        raw = pd.read_csv(sub / "raw.csv", low_memory=False)
        for col, val in shared.items():
            assert col in raw.columns and set(raw[col].astype(str)) == {val}, (sub.name, col, val)
