"""Experiments and built-in ring variants are named once, in ``ringlab.catalog``: no module of
ringlab spells one as a string literal of its own (nor a binary built from one, ``ptr_ring_test-``),
except the catalog and the experiment's own module (``ringlab/experiments/<name>.py``, which may
name itself and its arms).  A study's arms are the catalog's (``SEED000``, ``SEED003``).

Some words name something else as well: ``batch`` is also a raw.csv parameter column (a literal
used as a column, a key or a parameter name is that), and the few other homonyms are listed in
:data:`HOMONYMS` with what they name there."""
from __future__ import annotations

import ast
from pathlib import Path

from ringlab import catalog, schema

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ringlab"

#: (module path or folder under ringlab/, word) -> what the word names there instead
HOMONYMS = {
    ("experiments/ringtest.py", "ptr_ring"): "ringtest's own program tools/virtio/ringtest/ptr_ring.c",
    ("tools/kernel_tests.py", "ptr_ring"): "ringtest's program ptr_ring.c",
    ("studies/harness_compare.py", "ptr_ring"): "the rows of ringtest's ptr_ring program",
    ("tools/kernel_tests.py", "ringtest"): "the kernel's tools/virtio/ringtest: its build folder, its wrapper's label",
    ("tools/kmod.py", "kmod"): "the label of ringlab's kmod wrapper in its JSON line",
    ("system/envinfo.py", "kmod"): "env.json's 'kmod' field (modules left loaded)",
    ("system/modules.py", "kmod"): "the cache folder of ringlab's kmod tool",
    ("report/c2c.py", "kmod"): "import-perf's --kmod option",
    ("report/", "spsc"): "the SPSC throughput figure's id",
    ("lab/bisect/testrepo.py", "reorder"): "a kind of commit in the bisect test repository (two definitions swapped)",
    ("build/native.py", "batch"): "the in-process harness's batch argument",
}


def _owners() -> dict[str, set[str]]:
    """word -> the modules (under ringlab/) that may spell it: its experiment's own module."""
    out: dict[str, set[str]] = {}
    for e in catalog.EXPERIMENTS:
        out.setdefault(e.name, set()).add(f"experiments/{e.name}.py")
    for v in catalog.VARIANT_NAMES:
        out.setdefault(v, set()).add(f"experiments/{catalog.RING_EXPERIMENT}.py")
    return out


def _binary_prefixes() -> dict[str, str]:
    """The fixed start of each experiment's per-arm binary name (``ptr_ring_test-``) -> its experiment."""
    return {e.binary.partition("{variant}")[0]: e.name for e in catalog.EXPERIMENTS if "{variant}" in e.binary}


def _column_names() -> set[str]:
    cols = set(schema.NON_PARAM_COLUMNS) | {"variant"}
    for e in catalog.EXPERIMENTS:
        cols |= set(e.param_columns) | set(e.extra_columns)
    for lay in catalog.LAYOUTS:
        cols |= set(lay.ranges())
    return cols


def _as_column(node: ast.Constant, parent: ast.AST | None, columns: set[str]) -> bool:
    """Whether the literal is used as a column, key or parameter name: a subscript, a dict key,
    ``.get(NAME)``, a catalog entry's ``.bound(NAME)``, ``Param(NAME, ...)``, ``NAME in frame.columns``, or one of a literal list of
    columns."""
    if isinstance(parent, ast.Subscript) and parent.slice is node:
        return True
    if isinstance(parent, ast.Dict) and node in parent.keys:
        return True
    if isinstance(parent, ast.Call) and parent.args and parent.args[0] is node:
        f = parent.func
        return (isinstance(f, ast.Attribute) and f.attr in ("get", "pop", "setdefault", "bound")) or \
            (isinstance(f, ast.Name) and f.id == "Param")
    if isinstance(parent, ast.Compare) and parent.left is node and \
            all(isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops):
        return True
    if isinstance(parent, (ast.Tuple, ast.List, ast.Set)):
        return any(isinstance(e, ast.Constant) and e is not node and e.value in columns for e in parent.elts)
    return False


def _allowed_homonym(rel: str, word: str) -> bool:
    return any(word == w and (rel == where or (where.endswith("/") and rel.startswith(where)))
               for where, w in HOMONYMS)


def violations(rel: str, source: str) -> list[str]:
    """The literals of module ``rel`` (its path under ringlab/) that name an experiment, a
    built-in variant or a binary of one, outside the modules allowed to."""
    if rel.startswith("catalog/"):
        return []
    owners, prefixes, columns = _owners(), _binary_prefixes(), _column_names()
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in docs:
            continue
        word = node.value
        if word in owners and rel not in owners[word] and not _allowed_homonym(rel, word) and \
                not (word in columns and _as_column(node, parents.get(node), columns)):
            out.append(f"{rel}:{node.lineno}: {word!r}")
        for prefix, exp in prefixes.items():
            if prefix in word and rel != f"experiments/{exp}.py":
                out.append(f"{rel}:{node.lineno}: {word!r} (a binary of {exp})")
    return out


def walk(package: Path) -> list[str]:
    out = []
    for path in sorted(package.rglob("*.py")):
        out += violations(path.relative_to(package).as_posix(), path.read_text())
    return out


def test_no_module_names_an_experiment_or_variant_of_its_own():
    found = walk(PACKAGE)
    assert not found, "name these through ringlab.catalog:\n" + "\n".join(found)


def test_a_planted_name_is_found(tmp_path):
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "planted.py").write_text(
        '"""A docstring may say ptr_ring_test-batch."""\n'
        'ARMS = ("batch", "reorder")\n'
        'def f(env):\n'
        '    return env.experiment == "page_frag" or f"ptr_ring_test-{env.arm}"\n'
        'COLUMNS = ("mode", "batch")\n'
        'def g(df):\n'
        '    return df["batch"] if "batch" in df.columns else df.get("batch")\n')
    found = walk(tmp_path)
    assert found == ["report/planted.py:2: 'batch'", "report/planted.py:2: 'reorder'",
                     "report/planted.py:4: 'page_frag'",
                     "report/planted.py:4: 'ptr_ring_test-' (a binary of ptr_ring)"], found


def test_the_owners_may_name_themselves():
    assert violations("experiments/ptr_ring.py", 'V = ("prebatch", "spsc")\nB = f"ptr_ring_test-{v}"\nN = "ptr_ring"') == []
    assert violations("experiments/page_frag.py", 'N = "page_frag"\nB = f"page_frag_test-{v}"') == []
    assert violations("experiments/page_frag.py", 'V = "spsc"') == ["experiments/page_frag.py:1: 'spsc'"]
    assert violations("catalog/anything.py", 'V = "reorder"') == []
    assert violations("report/figures.py", 'F = "spsc"') == []
    assert violations("stats/x.py", 'F = "spsc"') == ["stats/x.py:1: 'spsc'"]
