"""No private names across modules: a module of ringlab uses another module's ``_name`` neither
by importing it (``from ringlab.x import _name``) nor through the module (``x._name``).  What a
module shares is public, so that its seams show where they are.  Nor does ringlab (or a benchmark
script) use another package's private names (``from click.parser import _OptionParser``,
``click.parser._OptionParser``, ``import click._compat``): they change or go without notice in any
release.  The planted tests put private uses in on purpose and must find them."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


#: names that begin with "_" but are documented as public
DOCUMENTED = {"os._exit", "sys._getframe"}


def _private_names(pkg: Path, checked, documented=frozenset()) -> list[str]:
    """``file:line dotted.name`` for every private name of a package ``checked(top-level name)``
    accepts that a module of ``pkg`` imports (``from m import _x``, ``import m._x``) or reaches
    through a name an import bound (``m._x``, ``m.sub._x``)."""
    out = []
    for path in sorted(pkg.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        where = str(path.relative_to(pkg.parent))
        bound: dict[str, str] = {}       # local name -> the checked module or object it is bound to
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                for a in n.names:
                    if not checked(a.name.split(".")[0]):
                        continue
                    if any(_private(part) for part in a.name.split(".")):
                        out.append(f"{where}:{n.lineno} {a.name}")
                    local = a.asname or a.name.split(".")[0]
                    bound[local] = a.name if a.asname else local
            elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module and checked(n.module.split(".")[0]):
                if any(_private(part) for part in n.module.split(".")):
                    out.append(f"{where}:{n.lineno} {n.module}")
                for a in n.names:
                    if _private(a.name):
                        out.append(f"{where}:{n.lineno} {n.module}.{a.name}")
                    else:
                        bound[a.asname or a.name] = f"{n.module}.{a.name}"
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and _private(n.attr):
                chain, base = [n.attr], n.value
                while isinstance(base, ast.Attribute):
                    chain.insert(0, base.attr)
                    base = base.value
                if isinstance(base, ast.Name) and base.id in bound:
                    name = ".".join([bound[base.id], *chain])
                    if name not in documented:
                        out.append(f"{where}:{n.lineno} {name}")
    return out


def private_uses(pkg: Path) -> list[str]:
    """``file:line module._name`` for every use of another ringlab module's private name."""
    return _private_names(pkg, lambda top: top == "ringlab")


def other_packages_private_uses(pkg: Path) -> list[str]:
    """``file:line package.module._name`` for every private name of a package other than ringlab
    (and benchmarks) that a module imports or reaches through an imported module."""
    return _private_names(pkg, lambda top: top not in ("ringlab", "benchmarks"), DOCUMENTED)


def test_no_module_uses_another_packages_private_names():
    found = other_packages_private_uses(ROOT / "ringlab") + other_packages_private_uses(ROOT / "benchmarks")
    assert not found, "use the package's public API instead:\n" + "\n".join(found)


def test_planted_private_uses_of_other_packages_are_found(tmp_path):
    pkg = tmp_path / "ringlab"
    pkg.mkdir()
    (pkg / "a.py").write_text("from click.parser import _OptionParser\n")
    (pkg / "b.py").write_text("import click\nimport click.parser as cp\n"
                              "x = click.parser._OptionParser\ny = cp._Option\n")
    (pkg / "c.py").write_text("import click._compat\nfrom click._compat import term_len\n")
    (pkg / "d.py").write_text("import os\nimport click\nfrom ringlab.x import y\n"
                              "os._exit(0)\nclick.Command.parse_args\n")
    assert other_packages_private_uses(pkg) == [
        "ringlab/a.py:1 click.parser._OptionParser",
        "ringlab/b.py:3 click.parser._OptionParser",
        "ringlab/b.py:4 click.parser._Option",
        "ringlab/c.py:1 click._compat",
        "ringlab/c.py:2 click._compat",
    ]


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
