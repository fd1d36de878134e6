"""raw.csv schema version 4: run constants kept once in env.json, filled back by the reader.

A version-4 raw.csv has no ``run_id``, ``experiment`` and ``host`` columns and holds
``<column>_ref`` indexes for ``counter_errors``, ``binary_sha256`` and ``source_sha256``; reading
it gives the frame its version-3 twin gives.  Committed (version-3) runs read as pandas reads
them.  ``--resume`` keeps writing the layout the raw.csv's header has.
"""
from __future__ import annotations

import csv
import json
import shutil
import tempfile
import sys
from pathlib import Path

import pandas as pd
import pytest

from ringlab import rundir, schema
from ringlab import run as runner
from ringlab.errors import DataError
from ringlab.rundir.rawconstants import stored_columns

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"
FAKES = Path(__file__).resolve().parent / "fakes"
sys.path.insert(0, str(FAKES))

from fakes.cli_runs import KEY, N_TRIALS, PARAMS  # noqa: E402
from fakes.raw_versions import as_version_3  # noqa: E402
from tests.committed import committed

MOVED = set(schema.RUN_CONSTANT_COLUMNS) | set(schema.REF_COLUMNS)
#: committed version-3 runs (the hosts' sets made before version 4): ptr_ring with two
#: counter_errors values and binaries per layout, ringtest (source_sha256), a bisection step


#: where committed version-4 runs are written again as version 3 when no committed run is
_V3 = Path(tempfile.mkdtemp(prefix="ringlab-raw-v3-"))


def _version_3(pattern: str) -> list[Path]:
    """The first committed raw.csv's folder matching ``pattern`` that is version 3 (its run
    constants on every row); else the first committed folder matching it, copied and rewritten as
    version 3 (``as_version_3``)."""
    found = committed(sorted(RESULTS.glob(pattern)))
    for p in found:
        with open(p, newline="", encoding="utf-8") as f:
            if "run_id" in next(csv.reader(f)):
                return [p.parent]
    for p in found:
        dst = _V3 / p.parent.relative_to(RESULTS)
        shutil.copytree(p.parent, dst, ignore=shutil.ignore_patterns("*.ipynb", "*.png", "*.svg"))
        as_version_3(dst)
        return [dst]
    return []


COMMITTED = [*_version_3("ptr-ring-reorder/*/*/raw.csv"), *_version_3("kernel-tests/*/*/raw.csv"),
             *_version_3("bisect/**/raw.csv")]


def _rows_of(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        return header, [dict(zip(header, r)) for r in reader]


def _rewrite(src: Path, dst: Path, split: int | None = None) -> list[str]:
    """The run folder ``src`` written again by RunFolder (schema version 4) into ``dst``, one
    trial row per append; with ``split``, the rows after it by a --resume.  Its full header."""
    header, rows = _rows_of(src / "raw.csv")
    env = json.loads((src / "env.json").read_text())
    parts = [rows] if split is None else [rows[:split], rows[split:]]
    for i, part in enumerate(parts):
        with rundir.RunFolder(dst, mode="create" if i == 0 else "resume") as f:
            if i == 0:
                f.write_env(**{k: env[k] for k in ("run_id", "experiment", "host") if k in env})
            # the configuration columns, as the experiment writes them: between host and trial
            f.open_csv(header, header[header.index("host") + 1:header.index("trial")])
            for r in part:
                f.append([r])
    return header


@pytest.mark.parametrize("rel", COMMITTED)
def test_a_version_4_file_reads_as_its_version_3_twin(rel, tmp_path):
    src = RESULTS / rel
    header = _rewrite(src, tmp_path / "v4")
    got, want = rundir.read_raw(tmp_path / "v4" / "raw.csv"), rundir.read_raw(src / "raw.csv")
    stored = next(csv.reader(open(tmp_path / "v4" / "raw.csv", encoding="utf-8")))
    assert stored == stored_columns(header) and not MOVED & set(stored)
    assert {c + schema.REF_SUFFIX for c in schema.REF_COLUMNS if c in header} <= set(stored)
    pd.testing.assert_frame_equal(got, want)
    assert list(got.columns) == list(want.columns)
    env = json.loads((tmp_path / "v4" / "env.json").read_text())
    assert env["schema_version"] == 4
    assert env["run_constants"] == {c: want[c].iloc[0] for c in schema.RUN_CONSTANT_COLUMNS}
    assert set(env["raw_values"]["binary_sha256"]) == set(want["binary_sha256"].fillna("").astype(str))
    # the run folder's own reader and a resumed write read the same
    _rewrite(src, tmp_path / "resumed", split=len(want) // 3)
    pd.testing.assert_frame_equal(rundir.RunOutput(tmp_path / "resumed").raw, want)
    assert (tmp_path / "v4" / "raw.csv").stat().st_size < 0.8 * (src / "raw.csv").stat().st_size


@pytest.mark.parametrize("rel", COMMITTED)
def test_a_committed_version_3_file_reads_as_before(rel):
    path = RESULTS / rel / "raw.csv"
    header = next(csv.reader(open(path, encoding="utf-8")))
    assert MOVED & set(header) and not any(c.endswith(schema.REF_SUFFIX) for c in header)
    pd.testing.assert_frame_equal(rundir.read_raw(path), pd.read_csv(path, low_memory=False))


def test_a_version_4_file_without_its_constants_is_a_data_error(tmp_path):
    src = RESULTS / COMMITTED[0]
    _rewrite(src, tmp_path / "v4")
    raw = tmp_path / "v4" / "raw.csv"
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(raw, lone / "raw.csv")
    with pytest.raises(DataError, match="without its env.json"):
        rundir.read_raw(lone / "raw.csv")
    env = json.loads((tmp_path / "v4" / "env.json").read_text())
    env["raw_values"]["counter_errors"] = env["raw_values"]["counter_errors"][:0]
    (tmp_path / "v4" / "env.json").write_text(json.dumps(env))
    with pytest.raises(DataError, match="counter_errors_ref.*expected an index"):
        rundir.read_raw(raw)


def _run(out: Path, resume: bool = False):
    params = dict(zip(PARAMS[1::3], PARAMS[2::3]))
    return runner.run_experiment("ptr_ring", {} if resume else params, out, resume=resume, build=False,
                                 progress=False, log=lambda m: None)


def test_resume_of_a_version_4_run(fakebin, tmp_path):
    _run(tmp_path / "whole")
    whole = rundir.read_raw(tmp_path / "whole" / "raw.csv")
    _run(tmp_path / "run")
    raw = tmp_path / "run" / "raw.csv"
    lines = raw.read_text().splitlines(keepends=True)
    raw.write_text("".join(lines[:5]) + lines[5][:20])          # killed mid-row
    res = _run(tmp_path / "run", resume=True)
    assert res.already_done == 4 and len(res.counts) and res.counts.get("ok") == N_TRIALS - 4
    df = rundir.read_raw(raw)
    header = next(csv.reader(open(raw, encoding="utf-8")))
    assert not MOVED & set(header) and json.loads((tmp_path / "run" / "env.json").read_text())["schema_version"] == 4
    assert len(df) == N_TRIALS and not df.duplicated(KEY).any()
    assert set(df["run_id"]) == {json.loads((tmp_path / "run" / "env.json").read_text())["run_id"]}
    assert df.sort_values("order")[KEY].values.tolist() == whole.sort_values("order")[KEY].values.tolist()
    assert df["binary_sha256"].str.len().eq(64).all()


def test_resume_of_a_version_3_run_keeps_writing_version_3(fakebin, tmp_path):
    out = tmp_path / "run"
    _run(out)
    header = as_version_3(out, keep=5)
    env = json.loads((out / "env.json").read_text())
    (out / "env.json").write_text(json.dumps(dict(env, status="interrupted")))
    res = _run(out, resume=True)
    assert res.already_done == 5 and res.counts.get("ok") == N_TRIALS - 5
    got_header, rows = _rows_of(out / "raw.csv")
    assert got_header == header and MOVED & set(header)
    assert all(r["binary_sha256"] and r["run_id"] for r in rows)
    env = json.loads((out / "env.json").read_text())
    assert env["schema_version"] == 3 and "raw_values" not in env and "run_constants" not in env
    df = rundir.read_raw(out / "raw.csv")
    assert len(df) == N_TRIALS and not df.duplicated(KEY).any() and df["status"].eq("ok").all()
    pd.testing.assert_frame_equal(df, pd.read_csv(out / "raw.csv", low_memory=False))


def test_there_are_version_3_runs_to_check():
    assert len(COMMITTED) == 3, ("fewer committed version-3 runs than the checks above need: point them "
                                 "at a rewrite of a version-4 run (tests/fakes/raw_versions.as_version_3)")
