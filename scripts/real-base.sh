#!/usr/bin/env bash
# A real base image made from Debian packages, for the tests that judge the
# gates by the real thing (CPython importing in a chroot of the image, glibc's
# ldd -r, dpkg-query): debootstrap of a Debian suite, the packages asked for
# installed over it, and an OCI image layout of that file system made by
# umoci (a tool nobody here wrote), so imgbuild reads it as it reads any
# other base.  Two layers, as an image built FROM a Debian base has them:
# the bootstrapped system, then what the packages added and changed (umoci
# unpack + repack makes the diff).
#
# Usage: scripts/real-base.sh [--arch amd64|arm64] [--suite bookworm|trixie]
#                             [--components C1,C2,...] [--packages P1,P2,...]
#                             [--name NAME] [--cuda]
# Default: amd64 bookworm (component main) with python3-torch,python3-scipy
# (PyTorch 1.13 with its C extensions and libtorch*.so, SciPy's extension
# modules), name "real".
# --cuda: the real CUDA base (docs/cuda-base.md): Debian 13 trixie with
# main,contrib,non-free,non-free-firmware and python3-torch-cuda (PyTorch
# 2.6 built with CUDA 12.4, cuBLAS 12, NCCL 2.22.3), name "cuda".
#
# Prints three lines on stdout:
#   rootfs=DIR        the file system (chroot into it: the oracle's side)
#   oci=DIR           an OCI image layout of it (dev/ emptied, apt's caches dropped)
#   ref=oci:DIR:NAME  the reference for --from, imgverify, skopeo
#
# Cached by (suite, arch, components, packages, name, this script) in
# $IMGBUILD_REALBASE_CACHE (default /var/cache/imgbuild/realbase): a second
# call returns at once, also across test runs.  Concurrent callers wait on
# a lock; a half-made base is never seen (made in a temporary folder,
# renamed when complete).  The .deb files are kept apart, per suite and
# architecture (debs/SUITE-ARCH), and outlive a change of this script: a
# base made again downloads only what it lacks.
#
# On the host's architecture the packages are installed by apt-get in a
# chroot, with no network while their maintainer scripts run (the base is
# made offline from the .deb files): an installer package that downloads in
# its postinst fails there.  nvidia-cudnn is one (the cuDNN that
# python3-torch-cuda needs): for amd64 the cuDNN 9 libraries of
# $IMGBUILD_CUDNN_DIR (default /usr/local/cuda/lib64) are copied where its
# installer puts them (/usr/lib/x86_64-linux-gnu, the list of them in
# /var/lib/nvidia-cudnn/filelist.txt), its postinst is made a no-op and
# `dpkg --configure -a` finishes the rest.
#
# --arch arm64 on an x86-64 host: debootstrap --foreign downloads the arm64
# packages and every .deb is unpacked with dpkg -x (no maintainer scripts run:
# the files are the packages' own, unconfigured, plus the links of their
# `update-alternatives --install` lines; enough for the file-level gates and
# for a process run under qemu-aarch64-static in a chroot, not for dpkg).
# There nvidia-cudnn installs nothing: the arm64 CUDA base has no cuDNN
# (libtorch_cuda.so needs libcudnn.so.9), a real broken base.
# Needs root (debootstrap), debootstrap and umoci (installed when missing).
set -euo pipefail

arch=amd64
suite=bookworm
components=main
packages=python3-torch,python3-scipy
name=real
while [ $# -gt 0 ]; do
  case $1 in
    --arch) arch=$2; shift 2 ;;
    --suite) suite=$2; shift 2 ;;
    --components) components=$2; shift 2 ;;
    --packages) packages=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --cuda) suite=trixie components=main,contrib,non-free,non-free-firmware packages=python3-torch-cuda name=cuda; shift ;;
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
key=$( (echo "$suite $arch $components $packages $name"; cat "$0") | sha256sum | cut -c1-16)
dir=$cache/$suite-$arch-$key
debs=$cache/debs/$suite-$arch
cudnn=${IMGBUILD_CUDNN_DIR:-/usr/local/cuda/lib64}
mkdir -p "$cache" "$debs"

exec 9>"$cache/.lock-$key"
flock 9
if [ ! -f "$dir/complete" ]; then
  # One writer of a suite's .deb files at a time.
  exec 8>"$debs/.lock"
  flock 8
  tmp=$(mktemp -d "$cache/.tmp-$key.XXXXXX")
  # A step that fails may leave file systems mounted in the trees.
  unmount_in() { # ROOT
    local m
    for m in var/cache/apt/archives proc sys dev/pts dev; do umount -l "$1/$m" 2>/dev/null || true; done
  }
  cleanup() {
    unmount_in "$tmp/rootfs"
    unmount_in "$tmp/bundle/rootfs"
    rm -rf "$tmp"
  }
  trap cleanup EXIT
  log=$tmp/build.log
  fail() { tail -30 "$log" >&2; echo "real-base: $*" >&2; exit 8; }
  echo "real-base: debootstrap $suite/$arch ($components) with $packages (minutes, once)" >&2
  mirror=http://deb.debian.org/debian
  foreign=
  [ "$arch" = "$(dpkg --print-architecture)" ] || foreign=--foreign
  # Foreign: the packages come with debootstrap's own download (its first
  # stage unpacks only the essential ones); native: apt-get installs them.
  include=
  [ -z "$foreign" ] || include=--include=$packages
  debootstrap $foreign --variant=minbase --arch="$arch" --components="$components" --cache-dir="$debs" $include \
    "$suite" "$tmp/rootfs" "$mirror" >>"$log" 2>&1 || fail "debootstrap failed"
  mkdir -p "$tmp/pool"
  if [ -n "$foreign" ]; then
    mv "$tmp"/rootfs/var/cache/apt/archives/*.deb "$tmp/pool/"
    rm -rf "$tmp/rootfs/debootstrap"
  fi
  rm -f "$tmp"/rootfs/var/cache/apt/archives/*.deb

  # Layer 1: the bootstrapped system.  The layer holds what an image from a
  # registry holds: no device nodes (the container runtime makes /dev),
  # nothing in proc/ or sys/.
  umoci init --layout "$tmp/oci"
  umoci new --image "$tmp/oci:$name"
  umoci config --image "$tmp/oci:$name" --architecture="$arch" --os=linux \
    --config.env="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" --config.cmd=/bin/bash
  cp -al "$tmp/rootfs" "$tmp/stage"
  find "$tmp/stage/dev" "$tmp/stage/proc" "$tmp/stage/sys" -mindepth 1 -delete 2>/dev/null || true
  umoci insert --image "$tmp/oci:$name" --history.created_by "debootstrap --variant=minbase $suite" "$tmp/stage" /
  rm -rf "$tmp/stage"

  # Layer 2: the packages, installed into umoci's unpacked bundle of layer 1.
  umoci unpack --image "$tmp/oci:$name" "$tmp/bundle" >>"$log" 2>&1
  r=$tmp/bundle/rootfs
  if [ -n "$foreign" ]; then
    for deb in "$tmp"/pool/*.deb; do dpkg -x "$deb" "$r"; done
    # No maintainer script runs, but the links they make with
    # update-alternatives are files the loader follows (libblas.so.3 and
    # liblapack.so.3 are OpenBLAS's through them): replay every package's
    # literal `update-alternatives --install` against the tree.
    mkdir -p "$r/etc/alternatives" "$r/var/lib/dpkg/alternatives" "$r/var/log"
    for deb in "$tmp"/pool/*.deb; do
      dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./postinst 2>/dev/null |
        sed -e ':a' -e '/\\$/{N;s/\\\n//;ba' -e '}' |
        grep -E '^[[:space:]]*update-alternatives --install ' | grep -v '[$`]' || true
    done | while read -r _ _ link name path prio rest; do
      [ -z "$rest" ] || continue  # slaves: none in what the gates need
      update-alternatives --root "$r" --install "$link" "$name" "$path" "$prio" >/dev/null 2>&1 ||
        echo "real-base: update-alternatives $name: not replayed" >&2
    done
  else
    mount --bind /dev "$r/dev"
    mount -t proc proc "$r/proc"
    mount --bind "$debs" "$r/var/cache/apt/archives"
    in_root() { DEBIAN_FRONTEND=noninteractive chroot "$r" "$@" >>"$log" 2>&1; }
    in_root apt-get update || fail "apt-get update failed"
    in_root apt-get install -y --no-install-recommends --download-only ${packages//,/ } || fail "download failed"
    # Offline from here: what a maintainer script would fetch is not fetched.
    unshare -n chroot "$r" env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y --no-install-recommends ${packages//,/ } >>"$log" 2>&1 ||
      echo "real-base: apt-get install failed offline; finishing what can be finished" >>"$log"
    st=$(chroot "$r" dpkg-query -W -f '${db:Status-Status}' nvidia-cudnn 2>/dev/null || true)
    if [ -n "$st" ] && [ "$st" != installed ]; then
      multiarch=x86_64-linux-gnu
      [ "$arch" = amd64 ] && compgen -G "$cudnn/libcudnn*.so.9*" >/dev/null ||
        fail "nvidia-cudnn cannot download cuDNN offline, and there is no cuDNN 9 for $arch in $cudnn"
      mkdir -p "$r/var/lib/nvidia-cudnn"
      for f in "$cudnn"/libcudnn*.so*; do
        cp -a "$f" "$r/usr/lib/$multiarch/"
        echo "/usr/lib/$multiarch/$(basename "$f")"
      done >"$r/var/lib/nvidia-cudnn/filelist.txt"
      printf '#!/bin/sh\n# real-base.sh: cuDNN copied in offline (see /var/lib/nvidia-cudnn/filelist.txt)\nexit 0\n' \
        >"$r/var/lib/dpkg/info/nvidia-cudnn.postinst"
      echo "real-base: cuDNN 9 from $cudnn copied in, nvidia-cudnn's postinst a no-op" >&2
    fi
    in_root dpkg --configure -a || fail "dpkg --configure -a failed"
    [ -z "$(chroot "$r" dpkg-query -W -f '${db:Status-Status}\n' | grep -v '^installed$' || true)" ] ||
      fail "packages left unconfigured"
    unmount_in "$r"
    rm -rf "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/*.bin
  fi
  umoci repack --image "$tmp/oci:$name" --history.created_by "install ${packages//,/ }" \
    --mask-path /dev --mask-path /proc --mask-path /sys "$tmp/bundle" >>"$log" 2>&1 || fail "umoci repack failed"
  umoci gc --layout "$tmp/oci"
  # The chroot keeps the bootstrapped /dev for the oracle.
  cp -a "$tmp/rootfs/dev/." "$r/dev/" 2>/dev/null || true
  rm -rf "$tmp/rootfs" "$tmp/pool"
  mv "$r" "$tmp/rootfs"
  rm -rf "$tmp/bundle"
  echo "$suite $arch $components $packages" >"$tmp/complete"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  trap - EXIT
fi
echo "rootfs=$dir/rootfs"
echo "oci=$dir/oci"
echo "ref=oci:$dir/oci:$name"
