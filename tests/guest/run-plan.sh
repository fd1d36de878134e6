#!/bin/sh
# Run inside the guest's chroot by init: OUT/plan.json names the steps (tests/guest/inside.py).
out=$1
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p /run/tmp /run/home
export TMPDIR=/run/tmp HOME=/run/home PATH="$here/../../.venv/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# matplotlib's font cache, built on the host (tests/guestvm.py): building it under TCG takes minutes
[ -d "$out/mplconfig" ] && export MPLCONFIGDIR="$out/mplconfig"
exec "$here/../../.venv/bin/python" "$here/inside.py" "$out"
