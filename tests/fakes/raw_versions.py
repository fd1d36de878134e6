"""A run folder's raw.csv rewritten in the layout of schema version 3 (every column on every row),
as an older ringlab wrote it: for the tests of version-3 files and of the columns version 4 keeps in
env.json (``ringlab.rundir.rawconstants``)."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from ringlab import schema

REFS = {c + schema.REF_SUFFIX: c for c in schema.REF_COLUMNS}


def as_version_3(folder: Path, keep: int | None = None) -> list[str]:
    """Rewrite ``folder``'s raw.csv (version 4) with full rows, keeping its first ``keep`` rows (all
    by default), and env.json without the constants (``schema_version`` 3); the full header.  A
    version-3 folder is left as it is."""
    with open(folder / "raw.csv", newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        stored = next(reader)
        rows = list(reader)
    if not set(REFS) & set(stored):
        return stored
    env = json.loads((folder / "env.json").read_text())
    consts, values = env.pop("run_constants"), env.pop("raw_values")
    header = list(schema.RUN_CONSTANT_COLUMNS) + [REFS.get(c, c) for c in stored]
    with open(folder / "raw.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for r in rows[:keep]:
            cells = [consts[c] for c in schema.RUN_CONSTANT_COLUMNS]
            cells += [values[REFS[c]][int(v)] if c in REFS else v for c, v in zip(stored, r)]
            w.writerow(cells)
    env["schema_version"] = 3
    (folder / "env.json").write_text(json.dumps(env, indent=1))
    return header
