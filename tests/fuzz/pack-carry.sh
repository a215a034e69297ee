#!/usr/bin/env bash
# Pack the libFuzzer harnesses for a machine that cannot build them (the GPU
# machine has no package registry): tests/fuzz/pack-carry.sh DIR makes
# DIR/fuzz.tar.xz with bin/ (the harnesses of build-fuzz/fuzz), lib/ (every
# shared library they load, the dynamic loader included) and fuzz/, one
# wrapper per harness that runs it through that loader, so tests/fuzz/run.sh
# runs there unchanged:
#   tar xJf DIR/fuzz.tar.xz -C /tmp/fz
#   IB_FUZZ_BUILD=/tmp/fz IB_FUZZ_WORK=/tmp/w1 tests/fuzz/run.sh 600 cudabin
# (one run.sh per process, each with its own IB_FUZZ_WORK; RUNS.md).
set -euo pipefail
[ $# = 1 ] || { echo "usage: tests/fuzz/pack-carry.sh DIR" >&2; exit 2; }
cd "$(dirname "$0")/../.."
ls build-fuzz/fuzz/fuzz_* >/dev/null 2>&1 || { echo "pack-carry: no harnesses: make SANITIZE=fuzz fuzzers" >&2; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/lib" "$tmp/fuzz"
cp build-fuzz/fuzz/fuzz_* "$tmp/bin/"
for f in build-fuzz/fuzz/fuzz_*; do ldd "$f"; done |
  awk '/=> \// { print $3 } /^\t\/.*ld-linux/ { print $1 }' | sort -u |
  while read -r l; do cp -L "$l" "$tmp/lib/"; done
for f in "$tmp"/bin/fuzz_*; do
  n=$(basename "$f")
  printf '#!/bin/sh\nd=$(dirname "$(readlink -f "$0")")/..\nexec "$d/lib/%s" --library-path "$d/lib" "$d/bin/%s" "$@"\n' \
    "$(basename "$(ls "$tmp"/lib/ld-linux*)")" "$n" >"$tmp/fuzz/$n"
  chmod +x "$tmp/fuzz/$n"
done
tar cJf "$out/fuzz.tar.xz" -C "$tmp" bin lib fuzz
ls -l "$out/fuzz.tar.xz" >&2
