"""ringlab.cli: user errors end in one line and their exit code; a command module that cannot be imported raises."""
from __future__ import annotations

import pytest

from ringlab import errors
from ringlab.lab import cli


@pytest.mark.parametrize("err,code", [
    (errors.ParamError("parameter 'x': bad; allowed: y"), 2),
    (errors.DataError("raw.csv: line 3: column 'trial' is 'a'; expected an integer"), 2),
    (errors.RunLockedError("run folder d is in use by PID 7", 7), 2),
    (errors.CpuBusyError("CPU 1 is measured by another ringlab run (PID 7)", 7), 2),
    (errors.RunnerError("build failed: cc1 exploded"), 1),
    (errors.RunInterrupted(15), 143),
    (errors.RunInterrupted(1), 129),
    (KeyboardInterrupt(), 130),
])
def test_errors_map_to_exit_codes_without_traceback(monkeypatch, capsys, err, code):
    def boom(args):
        raise err
    mod = cli._load("env")
    monkeypatch.setattr(mod, "run", boom)
    assert cli.main(["env"]) == code
    out = capsys.readouterr().err
    assert "Traceback" not in out and len(out.strip().splitlines()) == 1
    if isinstance(err, errors.RinglabError):
        assert out.strip() == f"ringlab env: error: {err}"


def test_unloadable_command_fails_loudly(monkeypatch):
    monkeypatch.setitem(cli.COMMANDS, "nope", ("ringlab.lab.commands.no_such_module", "a command that cannot load"))
    with pytest.raises(ModuleNotFoundError, match="no_such_module"):
        cli.main(["--help"])
    with pytest.raises(ModuleNotFoundError, match="no_such_module"):
        cli.main(["env"])


def test_param_error_is_importable_from_its_old_home():
    from ringlab.experiments.base import ParamError
    from ringlab.system import topology
    assert ParamError is errors.ParamError and topology.ParamError is errors.ParamError
