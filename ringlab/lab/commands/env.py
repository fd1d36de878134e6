"""What this machine can and cannot do (topology, governor, boost, counters, isolation, load).

``--headers`` prints the kernel header trees found here, newest first (exit 1: none).

Exit codes: 0 report printed (or state restored / nothing to restore), 1 restore failed or the
state file was refused (not yours, writable by others, or naming anything but a cpufreq governor
or boost knob under the sysfs root: nothing is written then), 2 a --state-file that is a directory,
a FIFO or a device.
"""
from __future__ import annotations

import json
import os
import stat
import sys

import click

from ringlab.errors import ParamError
from ringlab.lab.commands import options
from ringlab.sources import kernel_header as kh
from ringlab.system import envinfo
from ringlab.system.governor import restore_saved_state


@click.command(cls=options.Command)
@click.option("--json", is_flag=True, help="print the collected information as JSON")
@click.option("--restore", is_flag=True,
              help="put back governor/boost values saved by a run that was killed (SIGKILL)")
@click.option("--state-file", default=None, metavar="STATE_FILE",
              help="tuning state file (default $RINGLAB_STATE_DIR/tuning-state.json or "
                   "~/.cache/ringlab/tuning-state.json)")
@click.option("--headers", is_flag=True,
              help="print the kernel header trees found on this machine (/usr/src/*/include/linux/"
                   "ptr_ring.h), one per line, newest first; exit 1 if there is none")
@click.option("--no-probe", is_flag=True, help="do not open perf counters to probe them")
def command(**params) -> int:
    return run(options.Args(params))


def run(args) -> int:
    if args.headers:
        return _headers()
    if args.restore:
        _check_state_file(args.state_file)
        res = restore_saved_state(args.state_file)
        if args.json:
            print(json.dumps(res, indent=2))
        else:
            print(f"ringlab env --restore: {res['status']} ({res['state_file']})")
            for m in res["messages"]:
                print(f"  {m}")
        return 1 if res["status"] in ("failed", "refused") else 0
    info = envinfo.collect(probe_counters=not args.no_probe)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
    else:
        print(envinfo.format_text(info), end="")
    return 0


def _check_state_file(path: str | None) -> None:
    """ParamError (exit 2) for a --state-file that is there but is a folder, a FIFO or a device."""
    if not path:
        return
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return   # nothing to restore
    except OSError as e:
        raise ParamError(f"parameter '--state-file': {path!r}: {e.strerror}; allowed: a regular file") from None
    if stat.S_ISLNK(st.st_mode) or stat.S_ISREG(st.st_mode):
        return   # a symbolic link is refused by the state file's own checks (exit 1)
    kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
            else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a regular file")
    raise ParamError(f"parameter '--state-file': {path!r} is {kind}; allowed: a regular file (the tuning state "
                     "file a tuned run writes)")


def _headers() -> int:
    trees = kh.header_trees()
    if not trees:
        print(f"ringlab env --headers: no kernel header tree found (no {kh.USR_SRC}/*/{kh.IN_TREE}); "
              "install one, e.g. Debian's linux-headers-<version>-common, or pass a kernel tree "
              "as a header source", file=sys.stderr)
        return 1
    for t in trees:
        print(t)
    return 0
