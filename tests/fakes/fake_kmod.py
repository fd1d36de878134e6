#!/usr/bin/env python3
"""Stand-ins for insmod, rmmod, modinfo and dmesg (link this file under those names).

The "kernel" is two files: RINGLAB_PROC_MODULES (the /proc/modules lines of
loaded modules) and RINGLAB_KMSG (kernel log records, /dev/kmsg's
``prio,seq,usec,flags;text`` form).  ringlab reads both through those
variables, so a fake module can be loaded, print its result and be unloaded
on a machine that cannot load modules.

insmod PATH [key=value ...]   FAKE_INSMOD_MODE selects the behaviour:
  ok       load (state Live), log seed 002's result line, exit 0
  eagain   log the result line, do not stay loaded, exit 1 (an init that fails on purpose)
  fail     log nothing, do not load, exit 1 with insmod's error
  noline   load, log an unrelated line only
  hang     load (Live), then never return (SIGTERM ignored)
  The line is "<nr_test> of iterations for <aligned|non-aligned> testing took: <us>us" with
  nr_test from the args (default 1000), aligned when test_align=1, and us = FAKE_KMOD_US
  (default nr_test // 100): fixture values for parser tests, never measurements.
  FAKE_KMOD_ARGV=PATH appends "insmod ARGS" lines to PATH (placement tests).
rmmod NAME    FAKE_RMMOD_MODE=fail: exit 1 "Module is in use"; else remove NAME
modinfo -F vermagic PATH   FAKE_VERMAGIC, or "<uname -r> SMP preempt mod_unload"
dmesg         the log's texts, one per line
Stdlib only.
"""
import os
import signal
import sys
import time


def _modules():
    return os.environ["RINGLAB_PROC_MODULES"]


def _loaded():
    try:
        with open(_modules()) as f:
            return [ln.split()[0] for ln in f if ln.strip()]
    except FileNotFoundError:
        return []


def _set_loaded(name, on):
    lines = []
    try:
        with open(_modules()) as f:
            lines = [ln for ln in f if ln.strip() and ln.split()[0] != name]
    except FileNotFoundError:
        pass
    if on:
        lines.append(f"{name} 16384 0 - Live 0x0000000000000000\n")
    tmp = _modules() + ".tmp"
    with open(tmp, "w") as f:
        f.writelines(lines)
    os.replace(tmp, _modules())


def _klog(text):
    with open(os.environ["RINGLAB_KMSG"], "a") as f:
        f.write(f"6,{int(time.time() * 1000) % 100000},{int(time.monotonic() * 1e6)},-;{text}\n")


def _name(path):
    return os.path.basename(path).split(".ko")[0].replace("-", "_")


def insmod(argv):
    if not argv:
        print("Usage: insmod filename [args]", file=sys.stderr)
        return 1
    path, args = argv[0], argv[1:]
    name = _name(path)
    if os.environ.get("FAKE_KMOD_ARGV"):
        with open(os.environ["FAKE_KMOD_ARGV"], "a") as f:
            f.write("insmod " + " ".join(args) + "\n")
    if not os.path.isfile(path):
        print(f"insmod: ERROR: could not load module {path}: No such file or directory", file=sys.stderr)
        return 1
    if name in _loaded():
        print(f"insmod: ERROR: could not insert module {path}: File exists", file=sys.stderr)
        return 1
    kv = dict(a.split("=", 1) for a in args if "=" in a)
    nr = int(kv.get("nr_test", "1000"))
    us = int(os.environ.get("FAKE_KMOD_US", str(max(1, nr // 100))))
    kind = "aligned" if kv.get("test_align") == "1" else "non-aligned"
    line = f"{nr} of iterations for {kind} testing took: {us}us"
    mode = os.environ.get("FAKE_INSMOD_MODE", "ok")
    if mode == "fail":
        print(f"insmod: ERROR: could not insert module {path}: Invalid parameters", file=sys.stderr)
        return 1
    if mode == "eagain":
        _klog(line)
        print(f"insmod: ERROR: could not insert module {path}: Resource temporarily unavailable",
              file=sys.stderr)
        return 1
    _set_loaded(name, True)
    if mode == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(1)
    _klog(line if mode == "ok" else f"{name}: module loaded")
    return 0


def rmmod(argv):
    name = _name(argv[0]) if argv else ""
    if name not in _loaded():
        print(f"rmmod: ERROR: Module {name} is not currently loaded", file=sys.stderr)
        return 1
    if os.environ.get("FAKE_RMMOD_MODE") == "fail":
        print(f"rmmod: ERROR: Module {name} is in use", file=sys.stderr)
        return 1
    _set_loaded(name, False)
    return 0


def modinfo(argv):
    path = argv[-1] if argv else ""
    if not os.path.isfile(path):
        print(f"modinfo: ERROR: Module {path} not found.", file=sys.stderr)
        return 1
    vermagic = os.environ.get("FAKE_VERMAGIC") or f"{os.uname().release} SMP preempt mod_unload"
    if "-F" in argv:
        field = argv[argv.index("-F") + 1]
        print(vermagic if field == "vermagic" else _name(path) if field == "name" else "")
    else:
        print(f"filename:       {os.path.abspath(path)}\nname:           {_name(path)}\nvermagic:       {vermagic}")
    return 0


def dmesg(argv):
    try:
        with open(os.environ["RINGLAB_KMSG"]) as f:
            for ln in f:
                print(ln.rstrip("\n").partition(";")[2])
    except FileNotFoundError:
        pass
    return 0


if __name__ == "__main__":
    tool = os.path.basename(sys.argv[0])
    fn = {"insmod": insmod, "rmmod": rmmod, "modinfo": modinfo, "dmesg": dmesg}.get(tool)
    if fn is None:
        print(f"fake_kmod: link me as insmod, rmmod, modinfo or dmesg (called as {tool})", file=sys.stderr)
        sys.exit(2)
    sys.exit(fn(sys.argv[1:]))
