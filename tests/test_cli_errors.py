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
        cli.main(["nope"])


def test_a_command_loads_only_its_own_module(monkeypatch, capsys):
    monkeypatch.setitem(cli.COMMANDS, "nope", ("ringlab.lab.commands.no_such_module", "a command that cannot load"))
    assert cli.main(["env", "--json", "--no-probe"]) == 0
    assert '"topology"' in capsys.readouterr().out


def test_param_error_is_importable_from_its_old_home():
    from ringlab.experiments.base import ParamError
    from ringlab.system import topology
    assert ParamError is errors.ParamError and topology.ParamError is errors.ParamError


@pytest.mark.parametrize("argv, line", [
    ([], "ringlab: error: the following arguments are required: COMMAND; allowed: env, build, run,"),
    (["nope"], "ringlab: error: argument COMMAND: invalid choice: 'nope'; allowed: env, build, run,"),
    (["run", "ptr_ring", "--bogus"], "ringlab run: error: unrecognized arguments: --bogus; allowed: -p/--parameter,"),
    (["run", "ptr_ring", "extra"], "ringlab run: error: unrecognized arguments: extra"),
    (["run"], "ringlab run: error: the following arguments are required: experiment"),
    (["run", "ptr_ring", "--no"], "ringlab run: error: ambiguous option: --no could match --no-build, --no-progress"),
    (["reproduce", "--profile", "fast"],
     "ringlab reproduce: error: argument --profile: invalid choice: 'fast'; allowed: smoke, quick, full"),
    (["compare", "raw.csv"], "ringlab compare: error: the following arguments are required: --baseline"),
    (["mail", "d", "--width", "wide"], "ringlab mail: error: argument --width: 'wide' is not a valid integer"),
    (["fleet"], "ringlab fleet: error: the following arguments are required: ACTION; allowed: submit, status, collect"),
    (["fleet", "status"], "ringlab fleet status: error: the following arguments are required: FLEET-ID"),
])
def test_usage_errors_are_one_line_exit_2(capsys, argv, line):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(line), err


def test_help_and_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip().startswith("ringlab ")
    assert cli.main(["-h"]) == 0
    out = capsys.readouterr().out
    assert [n for n in cli.COMMANDS if f"  {n} " in out] == list(cli.COMMANDS)
    assert out.index("  env ") < out.index("  build ") < out.index("  fleet ")   # COMMANDS order, not sorted
    assert cli.main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    for opt in ("-p, --parameter NAME VALUE", "--out DIR", "--resume", "--no-build", "--progress / --no-progress",
                "--list-params", "experiment name (ptr_ring, page_frag, perf_rb, ringtest, kmod)"):
        assert opt in out, out


@pytest.mark.parametrize("argv, attr, value", [
    (["reproduce", "--only", "10", "11", "--profile", "smoke"], "only", ["10", "11"]),
    (["reproduce", "--profile", "smoke"], "only", []),
    (["fleet", "submit", "--nodes", "a", "--", "run", "ptr_ring", "-p", "cflags", "-O3"], "cmd",
     ["run", "ptr_ring", "-p", "cflags", "-O3"]),
    (["fleet", "submit", "--nodes", "a", "reproduce", "--only", "10"], "cmd", ["reproduce", "--only", "10"]),
    (["run", "ptr_ring", "--no-prog"], "progress", False),
    (["run", "ptr_ring"], "progress", None),
    (["calibrate", "--from", "-r", "-p", "count", "5"], "from_run", "-r"),
])
def test_parsed_arguments(argv, attr, value):
    assert getattr(cli.parse_args(argv), attr) == value


def test_bench_words_go_to_the_benchmark_command(capsys):
    args = cli.parse_args(["bench", "stats", "--rows", "10", "--budget", "-1"])
    assert (args.rows, args.groups, args.budget) == (10, 40, -1.0)
    assert cli.main(["bench", "stats", "--rows", "many"]) == 2
    assert "ringlab bench stats: error: argument --rows: 'many' is not a valid integer" in capsys.readouterr().err
    assert cli.main(["bench", "fidelity", "--icount-only", "--no-icount"]) == 2
    assert "argument --no-icount: not allowed with argument --icount-only" in capsys.readouterr().err
