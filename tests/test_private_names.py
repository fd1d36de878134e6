"""No private names across modules: a module of ringlab uses another module's ``_name`` neither
by importing it (``from ringlab.x import _name``) nor through the module (``x._name``).  What a
module shares is public, so that its seams show where they are.  The last test plants a private
import on purpose and must find it."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(pkg: Path) -> list[str]:
    """``file:line module._name`` for every use of another ringlab module's private name."""
    out = []
    for path in sorted(pkg.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        modules: dict[str, str] = {}     # local name -> the ringlab module or object it is bound to
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                for a in n.names:
                    if a.name.startswith("ringlab"):
                        modules[a.asname or a.name.split(".")[0]] = a.name
            elif isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("ringlab"):
                for a in n.names:
                    if _private(a.name):
                        out.append(f"{path.relative_to(pkg.parent)}:{n.lineno} {n.module}.{a.name}")
                    else:
                        modules[a.asname or a.name] = f"{n.module}.{a.name}"
        for n in ast.walk(tree):
            if (isinstance(n, ast.Attribute) and _private(n.attr) and isinstance(n.value, ast.Name)
                    and n.value.id in modules):
                out.append(f"{path.relative_to(pkg.parent)}:{n.lineno} {modules[n.value.id]}.{n.attr}")
    return out


def test_no_module_uses_another_modules_private_names():
    found = private_uses(ROOT / "ringlab")
    assert not found, "make these public (or keep them in their module):\n" + "\n".join(found)


def test_a_planted_private_import_is_found(tmp_path):
    pkg = tmp_path / "ringlab"
    (pkg / "report").mkdir(parents=True)
    (pkg / "report" / "a.py").write_text("def _helper():\n    return 1\n")
    (pkg / "report" / "b.py").write_text("from ringlab.report.a import _helper\n")
    (pkg / "report" / "c.py").write_text("from ringlab.report import a as _a\nx = _a._helper()\n")
    assert private_uses(pkg) == ["ringlab/report/b.py:1 ringlab.report.a._helper",
                                 "ringlab/report/c.py:2 ringlab.report.a._helper"]
