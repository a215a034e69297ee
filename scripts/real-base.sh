#!/usr/bin/env bash
# A real base image made from Debian packages, for the tests that judge the
# gates by the real thing (CPython importing in a chroot of the image, glibc's
# ldd -r, dpkg-query): debootstrap of a Debian suite with the packages asked
# for, and an OCI image layout of that file system made by umoci (a tool
# nobody here wrote), so imgbuild reads it as it reads any other base.
#
# Usage: scripts/real-base.sh [--arch amd64|arm64] [--suite bookworm|trixie]
#                             [--packages P1,P2,...] [--name NAME]
# Default: amd64 bookworm with python3-torch,python3-scipy (PyTorch 1.13 with
# its C extensions and libtorch*.so, SciPy's extension modules), name "real".
#
# Prints three lines on stdout:
#   rootfs=DIR        the file system (chroot into it: the oracle's side)
#   oci=DIR           an OCI image layout of it (dev/ emptied, apt's caches dropped)
#   ref=oci:DIR:NAME  the reference for --from, imgverify, skopeo
#
# Cached by (suite, arch, packages, this script) in $IMGBUILD_REALBASE_CACHE
# (default /var/cache/imgbuild/realbase): a second call returns at once, also
# across test runs.  Concurrent callers wait on a lock; a half-made base is
# never seen (made in a temporary folder, renamed when complete).
#
# --arch arm64 on an x86-64 host: debootstrap --foreign downloads the arm64
# packages and every .deb is unpacked with dpkg -x (no maintainer scripts run:
# the files are the packages' own, unconfigured, plus the links of their
# `update-alternatives --install` lines; enough for the file-level gates, not
# for a chroot, which would need qemu-user's binfmt).
# Needs root (debootstrap), debootstrap and umoci (installed when missing).
set -euo pipefail

arch=amd64
suite=bookworm
packages=python3-torch,python3-scipy
name=real
while [ $# -gt 0 ]; do
  case $1 in
    --arch) arch=$2; shift 2 ;;
    --suite) suite=$2; shift 2 ;;
    --packages) packages=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "real-base: unknown argument: $1" >&2; exit 2 ;;
  esac
done

need() { # COMMAND PACKAGE
  command -v "$1" >/dev/null && return 0
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$2" >/dev/null
}
need debootstrap debootstrap
need umoci umoci

cache=${IMGBUILD_REALBASE_CACHE:-/var/cache/imgbuild/realbase}
key=$( (echo "$suite $arch $packages $name"; cat "$0") | sha256sum | cut -c1-16)
dir=$cache/$suite-$arch-$key
mkdir -p "$cache"

exec 9>"$cache/.lock-$key"
flock 9
if [ ! -f "$dir/complete" ]; then
  tmp=$(mktemp -d "$cache/.tmp-$key.XXXXXX")
  # A debootstrap that fails may leave proc/ and sys/ mounted in the tree.
  cleanup() {
    local m
    for m in proc sys dev/pts; do umount -l "$tmp/rootfs/$m" 2>/dev/null || true; done
    rm -rf "$tmp"
  }
  trap cleanup EXIT
  echo "real-base: debootstrap $suite/$arch with $packages (a few minutes, once)" >&2
  mirror=http://deb.debian.org/debian
  if [ "$arch" = "$(dpkg --print-architecture)" ]; then
    debootstrap --variant=minbase --arch="$arch" --include="$packages" "$suite" "$tmp/rootfs" "$mirror" \
      >"$tmp/debootstrap.log" 2>&1 || { tail -20 "$tmp/debootstrap.log" >&2; exit 8; }
  else
    debootstrap --foreign --variant=minbase --arch="$arch" --include="$packages" "$suite" "$tmp/rootfs" "$mirror" \
      >"$tmp/debootstrap.log" 2>&1 || { tail -20 "$tmp/debootstrap.log" >&2; exit 8; }
    for deb in "$tmp"/rootfs/var/cache/apt/archives/*.deb; do dpkg -x "$deb" "$tmp/rootfs"; done
    # No maintainer script runs, but the links they make with
    # update-alternatives are files the loader follows (libblas.so.3 and
    # liblapack.so.3 are OpenBLAS's through them): replay every package's
    # literal `update-alternatives --install` against the tree.
    mkdir -p "$tmp/rootfs/etc/alternatives" "$tmp/rootfs/var/lib/dpkg/alternatives" "$tmp/rootfs/var/log"
    for deb in "$tmp"/rootfs/var/cache/apt/archives/*.deb; do
      dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./postinst 2>/dev/null |
        sed -e ':a' -e '/\\$/{N;s/\\\n//;ba' -e '}' |
        grep -E '^[[:space:]]*update-alternatives --install ' | grep -v '[$`]' || true
    done | while read -r _ _ link name path prio rest; do
      [ -z "$rest" ] || continue  # slaves: none in what the gates need
      update-alternatives --root "$tmp/rootfs" --install "$link" "$name" "$path" "$prio" >/dev/null 2>&1 ||
        echo "real-base: update-alternatives $name: not replayed" >&2
    done
    rm -rf "$tmp/rootfs/debootstrap"
  fi
  rm -f "$tmp"/rootfs/var/cache/apt/archives/*.deb
  # The layer holds what an image from a registry holds: no device nodes
  # (the container runtime makes /dev), nothing in proc/ or sys/.  A copy of
  # hard links, so the chroot keeps its /dev for the oracle.
  cp -al "$tmp/rootfs" "$tmp/stage"
  find "$tmp/stage/dev" "$tmp/stage/proc" "$tmp/stage/sys" -mindepth 1 -delete 2>/dev/null || true
  umoci init --layout "$tmp/oci"
  umoci new --image "$tmp/oci:$name"
  umoci config --image "$tmp/oci:$name" --architecture="$arch" --os=linux \
    --config.env="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" --config.cmd=/bin/bash
  umoci insert --image "$tmp/oci:$name" "$tmp/stage" /
  umoci gc --layout "$tmp/oci"
  rm -rf "$tmp/stage"
  echo "$suite $arch $packages" >"$tmp/complete"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  trap - EXIT
fi
echo "rootfs=$dir/rootfs"
echo "oci=$dir/oci"
echo "ref=oci:$dir/oci:$name"
