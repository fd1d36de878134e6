"""One error hierarchy: every exception class defined in ringlab/ derives from
ringlab.errors.RinglabError, its exit code (2: the user's to fix, 1: a failure) is decided in
ringlab/errors.py, and it carries the input it is about (``input``).

The check reads the source (the AST of every ringlab/**/*.py), so a class is found whether or
not anything imports it; bases are resolved through each module's imports within ringlab."""
from __future__ import annotations

import ast
import builtins
import importlib
import pickle
from pathlib import Path

import pytest

from ringlab import errors

PACKAGE = Path(errors.__file__).resolve().parent
ROOT_CLASS = ("ringlab.errors", "RinglabError")

#: Exceptions allowed outside RinglabError: the signals.  They stand for SIGTERM / SIGINT / SIGHUP
#: and must pass every ``except Exception`` (a trial's, a cleanup's) on their way to the code that
#: ends the run or unloads the module, as Ctrl-C's KeyboardInterrupt does; a RinglabError (an
#: Exception) would be caught there.
SIGNAL_CLASSES = {("ringlab.errors", "RunInterrupted"), ("ringlab.tools.kmod", "_Stop"),
                  ("ringlab.lab.commands.options", "_HandOver")}

_BUILTIN_EXCEPTIONS = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_sources(root: Path = PACKAGE) -> dict[str, str]:
    return {module_name(p, root): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.py"))}


class _Index:
    """Classes and imports of every module of ``sources`` ({module name: source text})."""

    def __init__(self, sources: dict[str, str]):
        self.modules = set(sources)
        self.classes: dict[tuple[str, str], ast.ClassDef] = {}
        self.imports: dict[str, dict[str, tuple[str, str | None]]] = {}   # alias -> (module, name)
        for mod, src in sources.items():
            tree = ast.parse(src)
            imports = self.imports.setdefault(mod, {})
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    self.classes.setdefault((mod, node.name), node)
                elif isinstance(node, ast.Import):
                    for a in node.names:
                        if a.asname:
                            imports[a.asname] = (a.name, None)
                        else:
                            imports[a.name.split(".")[0]] = (a.name.split(".")[0], None)
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        pkg = mod.split(".")[: -node.level] if not self._is_package(mod, sources) \
                            else mod.split(".")[: len(mod.split(".")) - node.level + 1]
                        base = ".".join([*pkg, *([base] if base else [])])
                    for a in node.names:
                        imports[a.asname or a.name] = (base, a.name)

    @staticmethod
    def _is_package(mod: str, sources: dict[str, str]) -> bool:
        return any(m.startswith(mod + ".") for m in sources)

    def lookup(self, mod: str, name: str, seen=()) -> tuple[str, str] | str:
        """``name`` as seen in module ``mod``: (module, class) of a ringlab class, the module name
        of a ringlab module ("module:NAME"), or the dotted name of something outside ringlab."""
        if (mod, name) in self.classes:
            return (mod, name)
        if (mod, name) in seen:
            return f"{mod}.{name}"
        imp = self.imports.get(mod, {}).get(name)
        if imp is None:
            if f"{mod}.{name}" in self.modules:
                return f"module:{mod}.{name}"
            return name if mod not in self.modules else f"{mod}.{name}"
        src_mod, src_name = imp
        if src_name is None:
            return f"module:{src_mod}" if src_mod in self.modules else src_mod
        if f"{src_mod}.{src_name}" in self.modules:
            return f"module:{src_mod}.{src_name}"
        if src_mod in self.modules:
            return self.lookup(src_mod, src_name, (*seen, (mod, name)))
        return f"{src_mod}.{src_name}"

    def resolve(self, mod: str, expr: ast.expr) -> tuple[str, str] | str:
        if isinstance(expr, ast.Name):
            return self.lookup(mod, expr.id)
        if isinstance(expr, ast.Attribute):
            owner = self.resolve(mod, expr.value)
            if isinstance(owner, str) and owner.startswith("module:"):
                return self.lookup(owner[len("module:"):], expr.attr)
            return f"{owner}.{expr.attr}" if isinstance(owner, str) else ast.unparse(expr)
        if isinstance(expr, ast.Subscript):       # Generic[T] and the like
            return self.resolve(mod, expr.value)
        return ast.unparse(expr)

    def bases(self, key: tuple[str, str]) -> list[tuple[str, str] | str]:
        return [self.resolve(key[0], b) for b in self.classes[key].bases]

    def is_exception(self, key, seen=()) -> bool:
        for b in self.bases(key):
            if isinstance(b, tuple):
                if b not in seen and self.is_exception(b, (*seen, key)):
                    return True
            else:
                last = b.rsplit(".", 1)[-1]
                if last in _BUILTIN_EXCEPTIONS or last.endswith(("Error", "Exception", "Warning")):
                    return True
        return False

    def derives_from_root(self, key, seen=()) -> bool:
        if key == ROOT_CLASS:
            return True
        return any(isinstance(b, tuple) and b not in seen and self.derives_from_root(b, (*seen, key))
                   for b in self.bases(key))


def outside_hierarchy(sources: dict[str, str], allowed=frozenset()) -> list[str]:
    """"module.Class" of every exception class of ``sources`` not deriving from RinglabError."""
    ix = _Index(sources)
    return sorted(f"{m}.{c}" for (m, c) in ix.classes
                  if (m, c) not in allowed and ix.is_exception((m, c)) and not ix.derives_from_root((m, c)))


def exception_classes(sources: dict[str, str]) -> list[tuple[str, str]]:
    ix = _Index(sources)
    return sorted(k for k in ix.classes if ix.is_exception(k))


# -- the check can fail: synthetic sources --------------------------------------------------------
_ERRORS = '''
class RinglabError(Exception):
    exit_code = 2
class ParamError(RinglabError, ValueError):
    pass
'''


def test_check_finds_exceptions_outside_the_hierarchy():
    sources = {
        "ringlab.errors": _ERRORS,
        "ringlab.a": (
            "from collections.abc import Mapping\n"
            "import subprocess\n"
            "from ringlab import errors\n"
            "from ringlab.errors import ParamError as _Base, RinglabError\n"
            "class Good(RinglabError): pass\n"
            "class AliasGood(_Base): pass\n"
            "class ModuleGood(errors.ParamError): pass\n"
            "class GoodAgain(AliasGood): pass\n"
            "class Bad(ValueError): pass\n"
            "class BadPlain(Exception): pass\n"
            "class BadSub(Bad): pass\n"
            "class BadExternal(subprocess.SubprocessError): pass\n"
            "class BadSignal(KeyboardInterrupt): pass\n"
            "class NotAnError(Mapping): pass\n"
            "class Plain: pass\n"),
        "ringlab.b": (
            "from ringlab.a import Bad, Good\n"
            "from ringlab import a\n"
            "class ViaImport(Bad): pass\n"
            "class ViaModule(a.BadSub): pass\n"
            "class Fine(Good): pass\n"
            "def f():\n"
            "    class Nested(OSError): pass\n"),
    }
    assert outside_hierarchy(sources) == [
        "ringlab.a.Bad", "ringlab.a.BadExternal", "ringlab.a.BadPlain", "ringlab.a.BadSignal", "ringlab.a.BadSub",
        "ringlab.b.Nested", "ringlab.b.ViaImport", "ringlab.b.ViaModule"]
    assert outside_hierarchy(sources, {("ringlab.a", "BadSignal")})[3] == "ringlab.a.BadSub"
    found = exception_classes(sources)
    assert ("ringlab.a", "NotAnError") not in found and ("ringlab.a", "Plain") not in found
    assert ("ringlab.b", "Fine") in found and ("ringlab.a", "ModuleGood") in found


def test_check_reads_every_module_of_the_package():
    sources = package_sources()
    assert "ringlab.errors" in sources and "ringlab.lab.bisect.steps" in sources
    assert len(exception_classes(sources)) >= 30


# -- the package -------------------------------------------------------------------------------
def test_every_exception_class_of_ringlab_derives_from_ringlab_error():
    assert outside_hierarchy(package_sources(), SIGNAL_CLASSES) == []


def test_signal_classes_are_the_only_exceptions_and_stay_signals():
    sources = package_sources()
    ix = _Index(sources)
    for mod, name in sorted(SIGNAL_CLASSES):
        assert (mod, name) in ix.classes, f"{mod}.{name} is gone: drop it from SIGNAL_CLASSES"
        cls = getattr(importlib.import_module(mod), name)
        assert issubclass(cls, BaseException) and not issubclass(cls, Exception), f"{mod}.{name}"


def test_exit_codes_are_decided_in_errors_py():
    """1 or 2 for every class, and only ringlab/errors.py sets ``exit_code`` in a class body."""
    sources = package_sources()
    ix = _Index(sources)
    for mod, name in exception_classes(sources):
        if (mod, name) in SIGNAL_CLASSES:
            continue
        cls = getattr(importlib.import_module(mod), name, None)
        if cls is None:      # a class defined inside a function
            continue
        assert issubclass(cls, errors.RinglabError), f"{mod}.{name}"
        assert cls.exit_code in (1, 2), f"{mod}.{name}: exit code {cls.exit_code}"
        if mod != "ringlab.errors":
            body = ix.classes[(mod, name)].body
            sets = [t.id for n in body if isinstance(n, (ast.Assign, ast.AnnAssign))
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)]
            assert "exit_code" not in sets, f"{mod}.{name} sets exit_code; decide it in ringlab/errors.py"


@pytest.mark.parametrize("name,code", [
    ("ringlab.errors.ParamError", 2), ("ringlab.errors.DataError", 2), ("ringlab.errors.InputFileError", 2),
    ("ringlab.errors.NotBuiltError", 2), ("ringlab.errors.PatchError", 2), ("ringlab.errors.RunnerError", 1),
    ("ringlab.errors.DiskFullError", 1), ("ringlab.stats.summary.StatsError", 2), ("ringlab.report.mail.MailError", 2),
    ("ringlab.lab.reproduce.ReproduceError", 2), ("ringlab.sources.header_files.KernelHeaderError", 2),
    ("ringlab.sources.kernel_tree.TreeError", 2), ("ringlab.system.governor.StateFileError", 2),
    ("ringlab.build.cflags.BuildError", 1), ("ringlab.build.binaries.StaleBinaryError", 1),
    ("ringlab.build.native.NativeError", 1), ("ringlab.lab.bisect.steps.StepBuildError", 1),
    ("ringlab.tools.kernel_tests.RingtestError", 1),
])
def test_exit_code_of_each_class(name, code):
    mod, cls = name.rsplit(".", 1)
    assert getattr(importlib.import_module(mod), cls).exit_code == code


def test_stdlib_bases_kept_for_callers():
    from ringlab.build.cflags import BuildError
    from ringlab.report.mail import MailError
    from ringlab.sources.builtin_patches import PatchError
    from ringlab.stats import StatsError
    assert issubclass(StatsError, ValueError) and issubclass(MailError, ValueError)
    assert issubclass(PatchError, ValueError) and issubclass(BuildError, RuntimeError)


def test_one_patch_error_and_one_param_error():
    from ringlab.lab import notebook
    from ringlab.sources import builtin_patches, patchmail
    assert builtin_patches.PatchError is patchmail.PatchError is errors.PatchError
    assert notebook.ParamError is errors.ParamError
    classes = [c for (_, c) in exception_classes(package_sources())]
    assert classes.count("PatchError") == 1 and classes.count("ParamError") == 1


# -- the input an error is about -------------------------------------------------------------------
def test_input_is_a_keyword_and_keeps_the_message():
    e = errors.ParamError("parameter 'x': bad; allowed: y", input="x")
    assert (str(e), e.input, e.args) == ("parameter 'x': bad; allowed: y", "x", ("parameter 'x': bad; allowed: y",))
    assert errors.DataError("no input").input is None
    assert errors.DataError("f: bad", input=Path("/a/raw.csv")).input == "/a/raw.csv"
    lock = errors.RunLockedError("run folder d is in use by PID 7", 7, input="d")
    assert (lock.pid, lock.input) == (7, "d")
    back = pickle.loads(pickle.dumps(e))
    assert (type(back), str(back), back.input) == (errors.ParamError, str(e), "x")


def test_a_bad_parameter_names_its_input():
    from ringlab.experiments import get
    with pytest.raises(errors.ParamError) as ei:
        get("ptr_ring").resolve({"modes": "nope"})
    assert ei.value.input == "modes" and "parameter 'modes'" in str(ei.value)


def test_a_bad_file_names_its_input(tmp_path):
    from ringlab.rundir import read_raw
    from ringlab.sources.header_files import KernelHeaderError, read_header_bytes
    bad = tmp_path / "raw.csv"
    bad.write_text("not,a,raw,csv\n1,2,3,4\n")
    with pytest.raises(errors.DataError) as ei:
        read_raw(bad)
    assert ei.value.input == str(bad) and str(bad) in str(ei.value)
    with pytest.raises(KernelHeaderError) as ei:
        read_header_bytes(tmp_path / "missing.h")
    assert ei.value.input == str(tmp_path / "missing.h") and ei.value.exit_code == 2
