#!/usr/bin/env bash
# Stop the one-node cluster .ci/slurm/start.sh started (by its pid files), waiting at most 10 s.
set -u
D=${RINGLAB_SLURM_DIR:-/tmp/ringlab-slurm}
for pf in "$D/slurmd.pid" "$D/slurmctld.pid" "$D/munge/munged.pid"; do
  [ -f "$pf" ] || continue
  pid=$(cat "$pf")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 10); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && { echo "slurm: pid $pid ($pf) still running after 10 s" >&2; exit 1; }
  fi
  rm -f "$pf"
done
echo "slurm: stopped"
