#!/usr/bin/env python3
"""Fake sbatch/sacct/squeue/scancel/sinfo (one script, named by the link that runs it).

Every call is appended to $FAKE_SLURM_DIR/calls.jsonl.  sbatch prints job ids 101, 102, ...;
sacct prints $FAKE_SLURM_DIR/sacct.txt (exit 1 "accounting storage is disabled" when absent; the
same for ``sacct -c`` with jobcomp.txt); squeue prints squeue.txt; sinfo prints sinfo.txt.
"""
import json
import os
import sys
from pathlib import Path

d = Path(os.environ["FAKE_SLURM_DIR"])
tool = Path(sys.argv[0]).name
with open(d / "calls.jsonl", "a") as f:
    f.write(json.dumps([tool, *sys.argv[1:]]) + "\n")


def show(name: str, missing: str = "") -> int:
    p = d / name
    if not p.is_file():
        if missing:
            print(missing, file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(p.read_text())
    return 0


if tool == "sbatch":
    if (d / "sbatch_refuse").is_file():
        print("sbatch: error: Invalid node name specified", file=sys.stderr)
        sys.exit(1)
    counter = d / "next_job"
    n = int(counter.read_text()) if counter.is_file() else 101
    counter.write_text(str(n + 1))
    print(f"{n};cluster")
elif tool == "sacct":
    sys.exit(show("jobcomp.txt" if "-c" in sys.argv else "sacct.txt", "Slurm accounting storage is disabled"))
elif tool == "squeue":
    sys.exit(show("squeue.txt"))
elif tool == "sinfo":
    sys.exit(show("sinfo.txt"))
elif tool == "scancel":
    sys.exit(0)
