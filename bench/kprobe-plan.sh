#!/usr/bin/env bash
# The kernel probe's plan, timed on this machine (no GPU needed): the same
# image, the same requirements, planned by this tree's library and by
# REV's (default main), in one run, so the figures compare.
#   bench/kprobe-plan.sh [REV] [ROUNDS]
# It builds the DCP2 image in a store of its own (IMGBUILD_STORE, default
# .store) with this tree's imgbuild, then plans the requirements of
# images/dsv41-flash-dcp2 for a GPU of compute capability 9.0 (an H200: the
# sm_90a cubins and NCCL's sm_90 cubin are chosen and extracted; the
# sm_121a ones are "not on this machine").  "cold": the probe's cubin cache
# empty (an image's first build); "warm": planned again.
set -euo pipefail
cd "$(dirname "$0")/.."
REV=${1:-main} ROUNDS=${2:-3}
ROOT=$PWD
export IMGBUILD_STORE=${IMGBUILD_STORE:-$ROOT/.store}
make -s all >/dev/null
build/imgbuild -q dsv41-flash-b12x >/dev/null
build/imgbuild -q dsv41-flash-dcp2 >/dev/null
W=$(mktemp -d /tmp/kprobe-plan-bench.XXXXXX)
trap 'rm -rf "$W"' EXIT
git archive "$REV" | tar -x -C "$W"
make -s -C "$W" -j2 build/libimgbuild.a >/dev/null
LIBS="-larchive -lcjson -lcrypto -lz -lzstd -llz4 -lcurl -lm -lpthread -lstdc++"
CF="-O2 -std=c11 -D_GNU_SOURCE"
# The same program against REV's headers and library (ib_kplan_make's
# interface is the same).
cp bench/kprobe-plan.c "$W/bench/"
# (before 2248f5c, bundle.h was in builder/)
[ -f "$W/smoke/bundle.h" ] || sed -i 's|"../layers/runner/bundle.h"|"../builder/bundle.h"|' "$W/bench/kprobe-plan.c"
# shellcheck disable=SC2086
cc $CF "$W/bench/kprobe-plan.c" -o "$W/plan-before" "$W/build/libimgbuild.a" $LIBS
# shellcheck disable=SC2086
cc $CF bench/kprobe-plan.c -o "$W/plan-after" build/libimgbuild.a $LIBS
mapfile -t REQS < <(sed -n 's/^require \(\/[^ ]*\) /\1 /p' images/dsv41-flash-dcp2/image.conf | grep -v '@')
echo "image dsv41-flash-dcp2:local, GPU 9.0, ${#REQS[@]} requirements; $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
for i in $(seq "$ROUNDS"); do
  "$W/plan-before" "$IMGBUILD_STORE" dsv41-flash-dcp2:local 9.0 1 "${REQS[@]}" | sed "s/^/before ($REV $(git rev-parse --short "$REV")): /"
  "$W/plan-after" "$IMGBUILD_STORE" dsv41-flash-dcp2:local 9.0 1 "${REQS[@]}" | sed "s/^/after (this tree): /"
done
