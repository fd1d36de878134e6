"""One warm-up/ok filter: which raw.csv rows a statistic reads is decided in ``ringlab.schema``
alone, the same for a frame read back from CSV (text) as for one kept in memory (bool)."""
from __future__ import annotations

import ast
import io
from pathlib import Path

import pandas as pd

from ringlab import schema

PKG = Path(__file__).resolve().parent.parent / "ringlab"


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"warmup": [True, False, False, False, True],
                         "status": ["ok", "ok", "crash", "ok", "timeout"],
                         "ns_per_op": [1.0, 2.0, 3.0, 4.0, 5.0]})


def test_measured_rows_are_the_same_in_memory_and_read_back():
    df = _frame()
    buf = io.StringIO()
    df.to_csv(buf, index=False)
    back = pd.read_csv(io.StringIO(buf.getvalue()), dtype=str, keep_default_na=False)
    assert schema.measured(df)["ns_per_op"].tolist() == [2.0, 4.0]
    assert pd.to_numeric(schema.measured(back)["ns_per_op"]).tolist() == [2.0, 4.0]
    # the spellings older files used
    old = back.assign(warmup=["1", "0", "0", "no", "yes"])
    assert pd.to_numeric(schema.measured(old)["ns_per_op"]).tolist() == [2.0, 4.0]


def test_measured_keeps_warmups_or_failures_only_when_asked():
    df = _frame()
    assert schema.measured(df, warmup=True)["ns_per_op"].tolist() == [1.0, 2.0, 4.0]
    assert schema.measured(df, failed=True)["ns_per_op"].tolist() == [2.0, 3.0, 4.0]
    assert len(schema.measured(df, warmup=True, failed=True)) == 5


def test_frames_without_the_columns_keep_every_row():
    df = pd.DataFrame({"ns_per_op": [1.0, 2.0]})
    assert schema.measured(df).equals(df)


def test_no_module_outside_schema_reads_the_warmup_column_itself():
    offenders = []
    for path in sorted(PKG.rglob("*.py")):
        if path.name == "schema.py" and path.parent == PKG:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            # a column method on the flag (``df["warmup"].astype(str)...``): a parameter's count
            # (``values["warmup"] + trials``) is not the column
            col = node.value if isinstance(node, ast.Attribute) else None
            if (isinstance(col, ast.Subscript) and isinstance(col.slice, ast.Constant)
                    and col.slice.value == "warmup"):
                offenders.append(f"{path.relative_to(PKG.parent)}:{node.lineno}")
    assert not offenders, "read the warm-up flag through ringlab.schema.measured: " + ", ".join(offenders)
