#!/usr/bin/env bash
# A fresh machine of the kind CI uses, as a chroot: Debian 12 (bookworm) with only python3, gcc
# (and the C library headers it compiles against), make and git, nothing ringlab's set-up installs.
# It checks the README's promise that `git clone` then `make reproduce` and `make test` do all the
# set-up, in the folder a root user clones into by default (/root/ringlab).
#
#   bash .ci/fresh-machine.sh DIR                    # make the chroot in DIR (about 2 minutes)
#   bash .ci/fresh-machine.sh DIR -- 'make reproduce && make test'
#                                                    # clone this checkout's HEAD into DIR/root/ringlab
#                                                    # (a fresh clone each time) and run the commands there
#   RINGLAB_INSTALL=0 bash .ci/fresh-machine.sh DIR -- 'make test'
#                                                    # the same with the set-up's installing turned off
#   bash .ci/fresh-machine.sh DIR --same-clone -- 'make test'
#                                                    # in the clone an earlier call made (what it wrote kept)
#
# Needs root and debootstrap (apt-get install debootstrap).  The chroot gets the host's CA bundle
# (a TLS-inspecting proxy would otherwise refuse pip and apt) and /proc, /sys, /dev mounted while
# the commands run; nothing else of the host.  Its output goes to the terminal; the exit status is
# the commands'.
set -euo pipefail

usage() { echo "usage: $0 DIR [--same-clone] [-- 'COMMANDS']" >&2; exit 2; }
[ $# -ge 1 ] || usage
root=$(realpath -m "$1"); shift
same=0
if [ "${1:-}" = "--same-clone" ]; then same=1; shift; fi
cmds=""
if [ $# -gt 0 ]; then
  [ "$1" = "--" ] && [ $# -eq 2 ] || usage
  cmds=$2
fi
[ "$(id -u)" = 0 ] || { echo "$0: needs root (debootstrap, chroot, mounts)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "$0: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }

repo=$(cd "$(dirname "$0")/.." && pwd)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if [ ! -x "$root/usr/bin/python3" ]; then
  echo "fresh-machine: debootstrap bookworm into $root (python3 gcc libc6-dev make git)"
  mkdir -p "$root"
  debootstrap --variant=minbase --include=python3,gcc,libc6-dev,make,git,ca-certificates \
    bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 \
    || { tail -n 20 "$root.debootstrap.log" >&2; exit 1; }
  cp /etc/apt/sources.list.d/debian.sources "$root/etc/apt/sources.list.d/" 2>/dev/null || true
fi
# the host's CA bundle: behind a TLS-inspecting proxy pip and apt need it
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > "$root/etc/pip.conf"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

[ -n "$cmds" ] || { echo "fresh-machine: $root is ready"; exit 0; }

mounted=()
cleanup() {
  for ((i=${#mounted[@]}-1; i>=0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
for m in proc sys dev dev/pts; do
  mkdir -p "$root/$m"
  case $m in
    proc) mount -t proc proc "$root/proc" ;;
    *)    mount --bind "/$m" "$root/$m" ;;
  esac
  mounted+=("$root/$m")
done

# a fresh clone of HEAD where root clones by default, as a new user would make it
if [ "$same" = 1 ] && [ -d "$root/root/ringlab/.git" ]; then
  echo "fresh-machine: the same clone as before, at $(git -C "$root/root/ringlab" rev-parse --short HEAD)"
else
  rm -rf "$root/root/ringlab"
  git clone -q --no-local "$repo" "$root/root/ringlab"
  git -C "$root/root/ringlab" checkout -q --detach "$(git -C "$repo" rev-parse HEAD)"
fi
chmod 700 "$root/root"

echo "fresh-machine: in $root as root, cd /root/ringlab && $cmds"
env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb LANG=C.UTF-8 \
  ${RINGLAB_INSTALL:+RINGLAB_INSTALL=$RINGLAB_INSTALL} \
  chroot "$root" /bin/bash -c "cd /root/ringlab && $cmds"
