"""Run in the QEMU guest: the steps of OUT/plan.json, each one's output and exit code into OUT.

A step is ``{"name": N, "argv": [...], "timeout": S}`` (a command, run from the checkout) or
``{"name": N, "capture_sysfs": true}`` (copy the topology part of /sys into OUT/N/), or
``{"name": N, "offline": [cpus]}`` (write 0 to cpuN/online).  OUT/started is written first (the
host's boot watchdog waits for it).  OUT/N.json records
{"rc", "wall_s"} and OUT/N.out, OUT/N.err the output.  The guest powers off afterwards.
"""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

#: what of /sys the topology code reads, and what the kernel puts beside it
SYSFS_GLOBS = (
    "devices/system/cpu/online", "devices/system/cpu/possible", "devices/system/cpu/present",
    "devices/system/cpu/offline", "devices/system/cpu/kernel_max",
    "devices/system/cpu/cpu[0-9]*/online", "devices/system/cpu/cpu[0-9]*/topology/*",
    "devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/*",
    "devices/system/node/online", "devices/system/node/possible", "devices/system/node/has_cpu",
    "devices/system/node/has_memory", "devices/system/node/has_normal_memory",
    "devices/system/node/node[0-9]*/cpulist", "devices/system/node/node[0-9]*/cpumap",
)


def capture_sysfs(dest: Path) -> dict:
    import glob
    n = 0
    for pat in SYSFS_GLOBS:
        for src in sorted(glob.glob("/sys/" + pat)):
            if not os.path.isfile(src) or src.endswith("/uevent"):
                continue
            try:
                with open(src) as f:
                    text = f.read()
            except OSError:
                continue   # write-only or unreadable attributes are left out
            rel = os.path.relpath(src, "/sys")
            p = dest / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
            n += 1
    return {"rc": 0, "files": n}


def main(out: Path) -> int:
    plan = json.loads((out / "plan.json").read_text())
    # the host's boot watchdog (tests/guestvm.py): the guest has reached the plan
    (out / "started").write_text("ok\n")
    checkout = Path(__file__).resolve().parent.parent.parent
    for step in plan["steps"]:
        name = step["name"]
        t0 = time.monotonic()
        if step.get("capture_sysfs"):
            rec = capture_sysfs(out / name)
        elif "offline" in step:
            for c in step["offline"]:
                Path(f"/sys/devices/system/cpu/cpu{c}/online").write_text("0")
            rec = {"rc": 0}
        else:
            env = dict(os.environ, **step.get("env", {}))
            with open(out / f"{name}.out", "w") as so, open(out / f"{name}.err", "w") as se:
                try:
                    rec = {"rc": subprocess.run(step["argv"], stdout=so, stderr=se, cwd=checkout, env=env,
                                                timeout=step.get("timeout", 600)).returncode}
                except subprocess.TimeoutExpired:
                    rec = {"rc": "timeout"}
        rec["wall_s"] = round(time.monotonic() - t0, 2)
        (out / f"{name}.json").write_text(json.dumps(rec))
        print(f"guest step {name}: {rec}", flush=True)
    (out / "done").write_text("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
