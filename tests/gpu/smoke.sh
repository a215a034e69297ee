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
# DCP groups of 2 on four), on two GPUs (one group), with a planted error in
# the combine kernel (must fail, tag nothing) and without NCCL (must fail),
# then compares imgverify --kernels with cuobjdump.
set -u
CARRY=$(readlink -f "$1"); OUT=$2
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$CARRY/lib PATH=$CARRY/bin:/usr/local/cuda/bin:$PATH
export IMGBUILD_STORE=/tmp/ib-store NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
IB=$CARRY/build/imgbuild IV=$CARRY/build/imgverify
rm -rf "$IMGBUILD_STORE" /tmp/ib-defs && cp -a "$CARRY/store" "$IMGBUILD_STORE"
nvidia-smi -L | tee "$OUT/gpus.txt"
ngpu=$(nvidia-smi -L | wc -l)
step() { echo "== $*" | tee -a "$OUT/summary.txt"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
result() { echo "   exit $1 ($2 s)" | tee -a "$OUT/summary.txt"; }

step "base: stand-in + this machine's NCCL"
"$IB" tests/gpu/nccl-layer >"$OUT/base.txt" 2>&1; result $? -

step "imgbuild dsv41-flash-dcp2 --smoke=required, $ngpu ranks"
t0=$(now)
"$IB" --smoke=required dsv41-flash-dcp2 -t dcp2-all:1 >"$OUT/smoke-all.txt" 2>&1; rc=$?
result $rc "$(since "$t0")"
grep -E '^(case|nccl|kernel|dcp2_smoke)|tagged|error' "$OUT/smoke-all.txt" | tail -60

cp -a images /tmp/ib-defs && ln -sfn "$PWD/kernels" /tmp/kernels
step "the same on 2 ranks (one DCP group)"
sed -i 's/^timeout 600/timeout 600\nranks 2/' /tmp/ib-defs/dsv41-flash-dcp2/image.conf
t0=$(now)
"$IB" --smoke=required /tmp/ib-defs/dsv41-flash-dcp2 -t dcp2-two:1 >"$OUT/smoke-two.txt" 2>&1; rc=$?
result $rc "$(since "$t0")"
grep -E '^(case|nccl|kernel|dcp2_smoke)|tagged|error' "$OUT/smoke-two.txt" | tail -40

step "planted error in the combine kernels (a test-only build flag): must fail, tag nothing"
sed -i 's/^arch sm_121a sm_90a/arch sm_121a sm_90a\nflags -DDCP2_PLANTED_ERROR/' /tmp/ib-defs/dsv41-flash-dcp2/image.conf
"$IB" --smoke=required /tmp/ib-defs/dsv41-flash-dcp2 -t dcp2-planted:1 >"$OUT/smoke-planted.txt" 2>&1; result $? -
grep -E 'error|FAIL' "$OUT/smoke-planted.txt" | head -5
"$IV" --kernels dcp2-planted:1 >/dev/null 2>&1 && echo "   TAGGED (wrong)" | tee -a "$OUT/summary.txt" || echo "   not tagged" | tee -a "$OUT/summary.txt"

step "an image without NCCL: must fail"
sed -i '/libnccl.so\* ncclDevKernel/d; /^flags -DDCP2_PLANTED_ERROR/d' /tmp/ib-defs/dsv41-flash-dcp2/image.conf
"$IB" --smoke=required /tmp/ib-defs/dsv41-flash-dcp2 --from dsv41-flash-b12x:no-nccl -t dcp2-nonccl:1 >"$OUT/smoke-nonccl.txt" 2>&1; result $? -
grep error "$OUT/smoke-nonccl.txt"

step "imgverify --kernels against cuobjdump"
so=$(find /tmp/ib-store/imgbuild/rootfs -name 'libflashinfer_dcp.so' | head -1)
fb=$(find /tmp/ib-store/imgbuild/rootfs -name 'dcp2_kernels.fatbin' | head -1)
cuobjdump --list-elf /usr/lib/x86_64-linux-gnu/libnccl.so.2 | head -3 >>"$OUT/cuobjdump.txt"
cuobjdump --list-elf /usr/lib/x86_64-linux-gnu/libnccl.so.2 | awk '{print $NF}' | sort | uniq -c | sort -rn | head -3 >>"$OUT/cuobjdump.txt"
python3 kernels/tools/compare_cuobjdump.py "$IV" /usr/lib/x86_64-linux-gnu/libnccl.so.2 "$so" "$fb" 2>&1 | tee -a "$OUT/cuobjdump.txt"
echo "exit ${PIPESTATUS[0]}" | tee -a "$OUT/summary.txt"
