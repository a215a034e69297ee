#!/usr/bin/env bash
# qemu-wrap.sh BUILD-DIR: BUILD-DIR/qemu/NAME runs BUILD-DIR/NAME (an
# aarch64 program) under qemu-user, so that tests/run.sh and tests/lib.sh
# run the cross-built tools as they run the native ones (IB_BUILD).  No
# binfmt_misc is needed (containers and CI machines often lack it): the
# wrapper names qemu-aarch64 itself.  The loader and the arm64 libraries
# come from Debian's multiarch packages (/lib/ld-linux-aarch64.so.1,
# /usr/lib/aarch64-linux-gnu); /proc/self/exe under qemu-user is the
# program's own path, so imgbuild still finds dcp2_smoke beside it.
set -eu
dir=${1:?usage: qemu-wrap.sh BUILD-DIR}
qemu=$(command -v qemu-aarch64 || command -v qemu-aarch64-static || true)
[ -n "$qemu" ] || { echo "qemu-wrap: no qemu-aarch64 (apt-get install qemu-user)" >&2; exit 8; }
mkdir -p "$dir/qemu"
abs=$(cd "$dir" && pwd)
for p in imgbuild imgverify dcp2_smoke unit-tests; do
  [ -x "$dir/$p" ] || continue
  printf '#!/bin/sh\nexec %s %s/%s "$@"\n' "$qemu" "$abs" "$p" >"$dir/qemu/$p.tmp"
  chmod 0755 "$dir/qemu/$p.tmp"
  mv "$dir/qemu/$p.tmp" "$dir/qemu/$p"
done
