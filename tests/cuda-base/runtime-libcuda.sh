#!/usr/bin/env bash
# Which libcuda file the program of an image loads once the NVIDIA container
# runtime has done its part (libnvidia-container, which `docker run --gpus`
# calls): the driver's libcuda.so.DRIVER bound into the multiarch folder, a
# libcuda.so link made unless one exists, then the image's ldconfig run
# with that folder first.  Done in an overlay over ROOTFS (a private mount
# namespace: the base stays as it is); the image's own ldconfig and CPython
# then load NAME (default libcuda.so.1) and print the file it is.
#   tests/cuda-base/runtime-libcuda.sh ROOTFS DRIVER [NAME] [LIBDIR]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 ROOTFS DRIVER-VERSION [NAME] [LIBDIR]" >&2; exit 2; }
rootfs=$1 driver=$2 name=${3:-libcuda.so.1} lib=${4:-/usr/lib/x86_64-linux-gnu}
work=$(mktemp -d /var/tmp/ib-runtime.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/up$lib" "$work/wk" "$work/mnt"
echo 'int cuInit (int f) { return f; }' >"$work/driver.c"
gcc -shared -fPIC -Wl,-soname,libcuda.so.1 "$work/driver.c" -o "$work/up$lib/libcuda.so.$driver"
unshare -m sh -c 'mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3" "$4" && mount -t proc proc "$4/proc" &&
  { [ -e "$4$5/libcuda.so" ] || [ -L "$4$5/libcuda.so" ] || ln -s libcuda.so.1 "$4$5/libcuda.so"; } &&
  chroot "$4" /sbin/ldconfig -f /etc/ld.so.conf -C /etc/ld.so.cache "$5" &&
  exec chroot "$4" /usr/bin/python3 -c "
import ctypes, os, sys
ctypes.CDLL(sys.argv[1])
print([os.path.realpath(l.split()[-1]) for l in open(\"/proc/self/maps\") if \"libcuda\" in l][0])" "$6"' \
  sh "$rootfs" "$work/up" "$work/wk" "$work/mnt" "$lib" "$name"
