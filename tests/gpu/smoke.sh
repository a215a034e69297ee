#!/usr/bin/env bash
# The GPU half of the smoke test, on the GPU machine (kinds nvidia-h200-x2 or
# -x4), run from the repository root:
#   tests/gpu/smoke.sh CARRY OUT
# CARRY holds what this machine cannot build (it has no package registry):
# build/ (imgbuild, imgverify, dcp2_smoke), lib/ (their shared libraries and
# runc's), bin/runc, and store/ with the stand-in base built without NCCL
# (tests/gpu/prepare-carry.sh makes it).  OUT receives the logs.
#
# It builds dsv41-flash-dcp2 with --smoke=required on all GPUs (TP 4 = two
# DCP groups of 2 on four), on two GPUs (one group), verifies the result with
# imgverify --smoke, builds it with a planted error in the combine kernel and
# without NCCL, then compares imgverify --kernels with cuobjdump.
#
# A test, not a log: each step has the exit code it must have (0 for the
# builds that must pass, 7 for the smoke failures, which must also tag
# nothing); the script exits 1 when any step did otherwise, listing them at
# the end of OUT/summary.txt, 0 when all did, and 2 when it cannot run at
# all (usage, no GPU: never a silent pass).
set -euo pipefail
[ $# = 2 ] || { echo "usage: tests/gpu/smoke.sh CARRY OUT" >&2; exit 2; }
CARRY=$(readlink -f "$1"); OUT=$2
mkdir -p "$OUT"
: >"$OUT/summary.txt"
export LD_LIBRARY_PATH=$CARRY/lib PATH=$CARRY/bin:/usr/local/cuda/bin:$PATH
export IMGBUILD_STORE=/tmp/ib-store NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
IB=$CARRY/build/imgbuild IV=$CARRY/build/imgverify
if [ ! -e /dev/nvidia0 ] || ! nvidia-smi -L >"$OUT/gpus.txt"; then
  echo "smoke.sh: this machine has no usable GPU: nothing was tested" >&2
  exit 2
fi
cat "$OUT/gpus.txt"
ngpu=$(wc -l <"$OUT/gpus.txt")
rm -rf "$IMGBUILD_STORE" /tmp/ib-defs && cp -a "$CARRY/store" "$IMGBUILD_STORE"
FAILED=()
STEPS=0
step() { echo "== $*" | tee -a "$OUT/summary.txt"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
fail() { FAILED+=("$*"); echo "   FAIL: $*" | tee -a "$OUT/summary.txt"; }
# Lines of a log worth seeing; never an assertion (no match is fine).
show() { grep -E "$1" "$2" | tail -"${3:-40}" || true; }

# expect CODE NAME LOG CMD...: CMD must exit with CODE.
expect() {
  local want=$1 name=$2 log=$3 t0 rc=0
  shift 3
  STEPS=$((STEPS + 1))
  t0=$(now)
  "$@" >"$log" 2>&1 || rc=$?
  echo "   exit $rc, must be $want ($(since "$t0") s)" | tee -a "$OUT/summary.txt"
  if [ "$rc" != "$want" ]; then
    fail "$name: exit $rc, must be $want (log: $log)"
    tail -20 "$log" >&2
  fi
}

# expect_in LOG REGEX NAME: the log of a step must say REGEX.
expect_in() {
  grep -Eq -- "$2" "$1" || fail "$3: \`$2\` not in $1"
}

# not_tagged TAG: a failed build left no tag (imgverify: 9, does not resolve).
not_tagged() {
  local rc=0
  "$IV" --kernels "$1" >/dev/null 2>&1 || rc=$?
  if [ "$rc" = 9 ]; then
    echo "   $1 not tagged" | tee -a "$OUT/summary.txt"
  else
    fail "$1: imgverify --kernels exit $rc, must be 9 (the tag must not exist)"
  fi
}

[ "$ngpu" -ge 2 ] || fail "$ngpu GPU(s): the smoke test needs a DCP group of 2"

step "base: stand-in + this machine's NCCL"
expect 0 base "$OUT/base.txt" "$IB" tests/gpu/nccl-layer

step "imgbuild dsv41-flash-dcp2 --smoke=required, $ngpu ranks"
expect 0 smoke-all "$OUT/smoke-all.txt" "$IB" --smoke=required dsv41-flash-dcp2 -t dcp2-all:1
expect_in "$OUT/smoke-all.txt" 'smoke: pass' smoke-all
expect_in "$OUT/smoke-all.txt" 'tagged dcp2-all:1' smoke-all
show '^(case|nccl|kernel|dcp2_smoke)|tagged|error' "$OUT/smoke-all.txt" 60

step "imgverify --smoke dcp2-all:1: the same test on the tagged image"
expect 0 verify-smoke "$OUT/verify-smoke.txt" "$IV" --smoke dcp2-all:1
expect_in "$OUT/verify-smoke.txt" 'gate smoke +pass' verify-smoke

cp -a images /tmp/ib-defs && ln -sfn "$PWD/kernels" /tmp/kernels
step "the same on 2 ranks (one DCP group)"
sed -i 's/^timeout 600/timeout 600\nranks 2/' /tmp/ib-defs/dsv41-flash-dcp2/image.conf
grep -q '^ranks 2$' /tmp/ib-defs/dsv41-flash-dcp2/image.conf
expect 0 smoke-two "$OUT/smoke-two.txt" "$IB" --smoke=required /tmp/ib-defs/dsv41-flash-dcp2 -t dcp2-two:1
expect_in "$OUT/smoke-two.txt" 'smoke: 2 ranks' smoke-two
show '^(case|nccl|kernel|dcp2_smoke)|tagged|error' "$OUT/smoke-two.txt"

step "planted error in the combine kernels (a test-only build flag): must fail (7), tag nothing"
sed -i 's/^arch sm_121a sm_90a/arch sm_121a sm_90a\nflags -DDCP2_PLANTED_ERROR/' /tmp/ib-defs/dsv41-flash-dcp2/image.conf
grep -q '^flags -DDCP2_PLANTED_ERROR$' /tmp/ib-defs/dsv41-flash-dcp2/image.conf
expect 7 smoke-planted "$OUT/smoke-planted.txt" "$IB" --smoke=required /tmp/ib-defs/dsv41-flash-dcp2 -t dcp2-planted:1
expect_in "$OUT/smoke-planted.txt" 'error: .*gate smoke: smoke test failed in the container' smoke-planted
show 'error|FAIL' "$OUT/smoke-planted.txt" 5
not_tagged dcp2-planted:1

step "an image without NCCL: must fail (7), tag nothing"
sed -i '/libnccl.so\* ncclDevKernel/d; /^flags -DDCP2_PLANTED_ERROR/d' /tmp/ib-defs/dsv41-flash-dcp2/image.conf
expect 7 smoke-nonccl "$OUT/smoke-nonccl.txt" "$IB" --smoke=required /tmp/ib-defs/dsv41-flash-dcp2 \
  --from dsv41-flash-b12x:no-nccl -t dcp2-nonccl:1
expect_in "$OUT/smoke-nonccl.txt" 'error: .*the image has no NCCL' smoke-nonccl
not_tagged dcp2-nonccl:1

step "imgverify --kernels against cuobjdump"
so=$(find /tmp/ib-store/imgbuild/rootfs -name 'libflashinfer_dcp.so' | head -1)
fb=$(find /tmp/ib-store/imgbuild/rootfs -name 'dcp2_kernels.fatbin' | head -1)
[ -n "$so" ] || fail "no libflashinfer_dcp.so in the extracted layers"
[ -n "$fb" ] || fail "no dcp2_kernels.fatbin in the extracted layers"
cuobjdump --list-elf /usr/lib/x86_64-linux-gnu/libnccl.so.2 >"$OUT/cuobjdump-list.txt"
head -3 "$OUT/cuobjdump-list.txt" >>"$OUT/cuobjdump.txt"
awk '{print $NF}' "$OUT/cuobjdump-list.txt" | sort | uniq -c | sort -rn | head -3 >>"$OUT/cuobjdump.txt"
expect 0 cuobjdump "$OUT/compare.txt" python3 kernels/tools/compare_cuobjdump.py "$IV" \
  /usr/lib/x86_64-linux-gnu/libnccl.so.2 "$so" "$fb"
cat "$OUT/compare.txt" | tee -a "$OUT/cuobjdump.txt"
[ "$(grep -c '^SAME ' "$OUT/compare.txt")" = 3 ] || fail "cuobjdump: not all 3 files SAME"

if [ ${#FAILED[@]} -gt 0 ]; then
  { echo "FAILED: ${#FAILED[@]} check(s) of $STEPS steps:"; printf '  %s\n' "${FAILED[@]}"; } | tee -a "$OUT/summary.txt"
  exit 1
fi
echo "PASSED: all $STEPS steps as they must be" | tee -a "$OUT/summary.txt"
