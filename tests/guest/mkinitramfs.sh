#!/bin/sh
# Build the guest's initramfs: busybox-static, the kernel's own virtio and 9p modules, and init.
#   mkinitramfs.sh KERNEL_RELEASE OUTPUT.cpio.gz
# Exit 3 with one line on stderr naming what is missing (the tests skip with that line).
set -eu
kver=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
busybox=/bin/busybox
[ -x "$busybox" ] || busybox=$(command -v busybox || true)
# ldd exits non-zero ("not a dynamic executable") for a static binary
if [ -z "$busybox" ] || ldd "$busybox" >/dev/null 2>&1; then
  echo "mkinitramfs: no statically linked busybox (install busybox-static)" >&2
  exit 3
fi
moddir=/lib/modules/$kver
[ -d "$moddir" ] || { echo "mkinitramfs: no $moddir (install linux-image-$kver)" >&2; exit 3; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/proc" "$work/sys" "$work/dev" "$work/host" "$work/modules"
cp "$busybox" "$work/bin/busybox"
# Load order: each module after the ones it needs.
: > "$work/modules/order"
for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci netfs fscache \
         9pnet 9pnet_virtio 9p; do
  f=$(find "$moddir/kernel" -name "$m.ko*" | head -n 1)
  if [ -z "$f" ]; then
    # built into this kernel, or absent: init tries the next one
    continue
  fi
  case "$f" in
    *.ko.xz) xz -dc "$f" > "$work/modules/$m.ko" ;;
    *.ko.zst) zstd -qdc "$f" > "$work/modules/$m.ko" ;;
    *.ko.gz) gzip -dc "$f" > "$work/modules/$m.ko" ;;
    *) cp "$f" "$work/modules/$m.ko" ;;
  esac
  echo "$m" >> "$work/modules/order"
done
cp "$here/init" "$work/init"
chmod 755 "$work/init"
(cd "$work" && find . | cpio -o -H newc --quiet) | gzip -1 > "$out"
