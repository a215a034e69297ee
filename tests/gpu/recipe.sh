#!/usr/bin/env bash
# Issue 23, on the GPU machine (nvidia-h200-x2), from the repository root:
#   tests/gpu/recipe.sh CARRY OUT
# CARRY as for tests/gpu/smoke.sh (tests/gpu/prepare-carry.sh makes it).
# A copy of dsv41-flash-dcp2 that names the seed's recipe ([recipe] file =)
# is built with --smoke=required: the recipe gate must pass and the smoke
# test must run with the recipe's DCP 2 and its shm_size (32gb) for
# /dev/shm, on as many of the recipe's 4 ranks as there are GPUs (the report
# says so).  Exit 0 when every expectation holds, 1 otherwise, 2 when it
# cannot run (no GPU).
set -uo pipefail
[ $# = 2 ] || { echo "usage: tests/gpu/recipe.sh CARRY OUT" >&2; exit 2; }
CARRY=$(readlink -f "$1"); OUT=$2
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$CARRY/lib PATH=$CARRY/bin:/usr/local/cuda/bin:$PATH
export IMGBUILD_STORE=/tmp/ib-store NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
IB=$CARRY/build/imgbuild
nvidia-smi -L >"$OUT/gpus.txt" || { echo "recipe.sh: no usable GPU: nothing was tested" >&2; exit 2; }
ngpu=$(wc -l <"$OUT/gpus.txt")
rm -rf "$IMGBUILD_STORE" /tmp/ib-defs && cp -a "$CARRY/store" "$IMGBUILD_STORE"
"$IB" tests/gpu/nccl-layer >"$OUT/base.txt" 2>&1 || { echo "base failed" >&2; tail "$OUT/base.txt"; exit 1; }
cp -a images /tmp/ib-defs && ln -sfn "$PWD/kernels" /tmp/kernels
cp tests/recipes/dsv41-flash-4x-dcp2.toml /tmp/ib-defs/dsv41-flash-dcp2/recipe.toml
printf '\n[recipe]\nfile = recipe.toml\n' >>/tmp/ib-defs/dsv41-flash-dcp2/image.conf
rc=0
"$IB" --smoke=required /tmp/ib-defs/dsv41-flash-dcp2 -t dcp2-recipe:1 >"$OUT/recipe-smoke.txt" 2>&1 || rc=$?
bad=0
check() { if grep -Eq -- "$1" "$OUT/recipe-smoke.txt"; then echo "ok: $1"; else echo "MISSING: $1"; bad=1; fi; }
echo "imgbuild exit $rc (must be 0)"; [ "$rc" = 0 ] || bad=1
check 'gate recipe +pass'
check "smoke: shape of .*recipe.toml: TP 4 x PP 1 = 4 ranks over 4 nodes, DCP 2, shm 32gb; this machine has $ngpu GPUs: $ngpu ranks run here, fewer than the 4 served"
check "dcp2_smoke: $ngpu ranks, dcp 2 \\(1 groups\\).*/dev/shm 32.0 GiB"
check 'smoke: pass'
check 'tagged dcp2-recipe:1'
grep -E '^(case|dcp2_smoke)|smoke:|gate |tagged|error' "$OUT/recipe-smoke.txt" | tail -40
exit $bad
