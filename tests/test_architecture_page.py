"""docs/architecture.md's "who imports whom" table is the code's imports: for every layer, the
layers its modules import are exactly the ones the table's row names (words in parentheses are
comments).  The last test changes a row on purpose and must see the difference."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE = {"catalog", "digest", "fmt", "names", "paths", "schema", "errors"}


def documented(text: str) -> dict[str, set[str]]:
    rows = {}
    body = text[text.index("| layer | imports |"):]
    for line in body.splitlines()[2:]:
        if not line.startswith("|"):
            break
        layer, imports = (c.strip() for c in line.strip("|").split("|"))
        rows[layer] = {w.strip() for w in re.sub(r"\([^)]*\)", "", imports).split(",") if w.strip()}
    return rows


def actual(pkg: Path, layers) -> dict[str, set[str]]:
    out = {layer: set() for layer in layers}
    for path in pkg.rglob("*.py"):
        parts = path.relative_to(pkg).parts
        if len(parts) < 2 or parts[0] not in out:
            continue
        src = parts[0]
        for n in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] == "ringlab":
                names = [n.module] + [f"{n.module}.{a.name}" for a in n.names]
            elif isinstance(n, ast.Import):
                names = [a.name for a in n.names if a.name.split(".")[0] == "ringlab"]
            for name in names:
                q = name.split(".")
                if len(q) > 1 and q[1] != src:
                    if q[1] in out:
                        out[src].add(q[1])
                    elif q[1] in BASE:
                        out[src].add("base")
    return out


def test_the_table_is_the_code():
    doc = documented((ROOT / "docs" / "architecture.md").read_text())
    real = actual(ROOT / "ringlab", doc)
    assert set(doc) | BASE >= {d.name for d in (ROOT / "ringlab").iterdir() if d.is_dir() and (d / "__init__.py").exists()}
    diff = {k: (sorted(doc[k] - real[k]), sorted(real[k] - doc[k])) for k in doc if doc[k] != real[k]}
    assert not diff, "layer: (named but not imported, imported but not named): " + repr(diff)


def test_a_wrong_row_is_seen():
    text = (ROOT / "docs" / "architecture.md").read_text().replace("| system | base |", "| system | rundir, base |")
    doc = documented(text)
    assert doc["system"] != actual(ROOT / "ringlab", doc)["system"]


def row_contracts(pyproject: str) -> dict[str, set[str]]:
    """{layer: the lower layers its forbidden contract names} from pyproject.toml's contracts
    named "<layer> imports only ... (docs/architecture.md)"."""
    import tomllib
    out = {}
    for c in tomllib.loads(pyproject)["tool"]["importlinter"]["contracts"]:
        m = re.match(r"(\w+) imports only .* \(docs/architecture\.md\)$", c["name"])
        if m:
            assert c["type"] == "forbidden" and c["source_modules"] == [f"ringlab.{m.group(1)}"], c
            out[m.group(1)] = {f.split(".")[1] for f in c["forbidden_modules"]}
    return out


def implied(doc: dict[str, set[str]], layers: list[str]) -> dict[str, set[str]]:
    """What each table row forbids: the layers below it (the layers contract's order) it does not name."""
    return {layer: {b for b in layers[layers.index(layer) + 1:] if b not in doc[layer]} for layer in doc}


def _layer_order(pyproject: str) -> list[str]:
    import tomllib
    first = tomllib.loads(pyproject)["tool"]["importlinter"]["contracts"][0]
    assert first["type"] == "layers"
    return [x.split(".")[1] for x in first["layers"] if x.startswith("ringlab.") and "|" not in x and x != "ringlab.errors"]


def test_the_import_linter_contracts_are_the_table():
    pyproject = (ROOT / "pyproject.toml").read_text()
    doc = documented((ROOT / "docs" / "architecture.md").read_text())
    want = {k: v for k, v in implied(doc, _layer_order(pyproject)).items() if v}
    assert row_contracts(pyproject) == want


def test_a_contract_that_drifts_from_the_table_is_seen():
    pyproject = (ROOT / "pyproject.toml").read_text()
    doc = documented((ROOT / "docs" / "architecture.md").read_text().replace("| system | base |",
                                                                             "| system | rundir, base |"))
    want = {k: v for k, v in implied(doc, _layer_order(pyproject)).items() if v}
    assert row_contracts(pyproject) != want
