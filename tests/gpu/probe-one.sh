#!/usr/bin/env bash
# The kernel probe of the smoke gate (issue 16, item 1) on a machine with ONE
# GPU, where tests/gpu/smoke.sh cannot run (a DCP group needs two GPUs):
#   tests/gpu/probe-one.sh CARRY OUT
# CARRY as for smoke.sh (tests/gpu/prepare-carry.sh DIR --pack).  The
# definitions of tests/gpu/defs/planted-smem are given `dcp 1` and `ranks 1`,
# so the gate runs one rank on the one GPU; the probe runs before NCCL, so
# what it proves does not depend on the DCP cases that follow it:
#   1. control: the image's own fatbin: the probe loads every required
#      kernel and fails none;
#   2. the sm_90a cubin of dcp2_attn_partial_f32 asks for 256 KiB of shared
#      memory: the static kernel gate passes, the probe fails the build (7)
#      naming the kernel, nothing tagged;
#   3. the attributes (.nv.info) of dcp2_a2a_combine_f32 corrupted: 7, the
#      cubin named with its kernels (CUDA refuses the whole cubin and does
#      not say which kernel broke it);
#   4-7. a fault planted in each of the eight required kernels of the
#      fatbin in turn (launch bounds below its launch's block; missing from
#      the sm_90a cubin; the second kernel with static shared memory; missing
#      from every cubin, for the static gate): each build fails naming that
#      kernel alone.
# Step 1 also times the first smoke on this fresh machine and a warm one.
# Exit 0 when every step did as it must, 1 otherwise, 2 when it cannot run.
set -euo pipefail
[ $# = 2 ] || { echo "usage: tests/gpu/probe-one.sh CARRY OUT" >&2; exit 2; }
source "$(dirname "$0")/lib.sh"
gpu_setup "$1" "$2" /tmp/ib-gdefs
show() { grep -E "$1" "$2" | tail -"${3:-20}" | tee -a "$OUT/summary.txt" || true; }

step "base: stand-in + this machine's NCCL; dsv41-flash-dcp2 built with --smoke=off (one GPU: no DCP group)"
expect 0 base "$OUT/base.txt" "$IB" tests/gpu/nccl-layer
expect 0 image "$OUT/image.txt" "$IB" --smoke=off dsv41-flash-dcp2 -t dcp2-all:1
mkdir -p /tmp/ib-gdefs && cp -r tests/gpu/defs/. /tmp/ib-gdefs/
D=/tmp/ib-gdefs/planted-smem
sed -i 's/^dcp 2$/dcp 1\nranks 1/' "$D/image.conf"
grep -q '^ranks 1$' "$D/image.conf"
# The prebaked fatbin, read out of the image's layers (no rootfs was
# unpacked: the build had no smoke test).
fb=/tmp/ib-gdefs/dcp2_kernels.fatbin
python3 - "$IMGBUILD_STORE" dcp2-all:1 "$fb" <<'PY'
import json, os, sys, tarfile
store, tag, out = sys.argv[1:4]
blob = lambda d: os.path.join(store, "blobs", *d.split(":"))
man = next(m for m in json.load(open(os.path.join(store, "index.json")))["manifests"]
           if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag)
want = "usr/local/lib/python3.12/dist-packages/vllm/prebaked/dcp2/dcp2_kernels.fatbin"
data = None
for layer in json.load(open(blob(man["digest"])))["layers"]:
    with tarfile.open(blob(layer["digest"])) as t:
        for m in t:
            if m.name.lstrip("./") == want and m.isfile():
                data = t.extractfile(m).read()
open(out, "wb").write(data)
PY

step "1. control: the image's own fatbin, one rank: the probe fails no kernel, and launches every sm_90a one (dcp_lse_combine too)"
cp "$fb" "$D/planted.fatbin"
t0=$(now)
# (--json's report to a file of its own; the step's log keeps stderr)
json_to() { local f=$1; shift; "$@" >"$f"; }
expect any control "$OUT/control.txt" json_to "$OUT/control.json" "$IB" --smoke=required --json "$D" -t dcp2-control:1
echo "control build (the first smoke on this machine): $(since "$t0") s" | tee -a "$OUT/summary.txt"
# One rank has no peer: NCCL names no transport, and the default
# expect-transport P2P fails the gate (7) with that reason, after the probe
# and the DCP cases; nothing else may fail it.
# Every kernel that the definition gives a launch recipe (the eight DCP2
# kernels and FlashInfer's dcp_lse_combine) was launched on this GPU's
# sm_90a code, none failed; NCCL's kernels are loaded and measured (NCCL
# launches them itself in the cases that follow).
python3 - "$OUT/control.json" "$D/image.conf" <<'PY' | tee -a "$OUT/summary.txt" || fail "control: the gate failed for another reason than the one rank's transport, a kernel failed, or one with a launch recipe was not launched on sm_90a"
import json, sys
report = json.load(open(sys.argv[1]))
r = report["smoke"]
ks = r["kernels"]
gate = next(g for g in report["gates"] if g["name"] == "smoke")
print("gate smoke", gate["status"], gate.get("detail", gate.get("reason", "")))
why_ok = gate["status"] == "fail" and "expect-transport P2P: NCCL's log (NCCL_DEBUG=INFO) names no transport" in gate.get("detail", "")
recipes = {l.split()[1] for l in open(sys.argv[2]) if l.startswith("launch ")}
for k in ks:
    print("  ", k["status"], k["kernel"], k.get("arch", "-"), k.get("launch", "-"))
failed = [k["kernel"] for k in ks if k["status"] == "fail"]
launched = {k["kernel"] for k in ks if k.get("arch", "").startswith("sm_90") and k.get("launch", "").startswith("launched")}
print("smoke seconds", r.get("seconds"), "kernels", len(ks), "failed", failed or "none",
      "with a recipe, not launched:", sorted(recipes - launched) or "none")
sys.exit(0 if why_ok and not failed and len(recipes) == 9 and recipes <= launched and "dcp_lse_combine" in launched else 1)
PY
# The same build again on a warm machine: the smoke's time once the driver,
# the image's rootfs and the page cache are warm.
t0=$(now)
expect any control-warm "$OUT/control-warm.txt" json_to "$OUT/control-warm.json" "$IB" --smoke=required --json "$D" -t dcp2-control:2
echo "control build again (warm): $(since "$t0") s" | tee -a "$OUT/summary.txt"
python3 -c 'import json,sys; print("smoke seconds, fresh:", json.load(open(sys.argv[1]))["smoke"].get("seconds"), "warm:", json.load(open(sys.argv[2]))["smoke"].get("seconds"))' \
  "$OUT/control.json" "$OUT/control-warm.json" | tee -a "$OUT/summary.txt" || true

step "2. planted: the sm_90a cubin of dcp2_attn_partial_f32 asks for 256 KiB of shared memory: static gate passes, probe fails (7)"
python3 tests/gpu/plant-cubin.py "$fb" "$D/planted.fatbin" --sm 90 --kernel dcp2_attn_partial_f32 smem 262144 | tee -a "$OUT/summary.txt"
expect 7 planted-smem "$OUT/planted-smem.txt" "$IB" --smoke=required "$D"
expect_in "$OUT/planted-smem.txt" 'gate kernels +pass' planted-smem
expect_in "$OUT/planted-smem.txt" 'error: .*kernel probe failed in the container: kernel dcp2_attn_partial_f32 \(/usr/local/lib/python3.12/dist-packages/vllm/prebaked/dcp2/dcp2_kernels.fatbin, sm_90a\)' planted-smem
show 'kprobe\tfail|error' "$OUT/planted-smem.txt" 4
not_tagged dcp2-planted-smem:1

step "3. planted: the attributes (.nv.info) of dcp2_a2a_combine_f32 corrupted: 7, naming the kernel"
python3 tests/gpu/plant-cubin.py "$fb" "$D/planted.fatbin" --sm 90 --kernel dcp2_a2a_combine_f32 corrupt | tee -a "$OUT/summary.txt"
expect 7 planted-corrupt "$OUT/planted-corrupt.txt" "$IB" --smoke=required "$D"
expect_in "$OUT/planted-corrupt.txt" 'gate kernels +pass' planted-corrupt
# Exact: the cubin that does not load is named, with the corrupted kernel
# among its kernels; no single other kernel is blamed for it.
expect_in "$OUT/planted-corrupt.txt" 'error: .*the sm_90a cubin of /usr/local/lib/python3.12/dist-packages/vllm/prebaked/dcp2/dcp2_kernels.fatbin does not load on GPU 0 .*its kernels: .*dcp2_a2a_combine_f32' planted-corrupt
show 'error' "$OUT/planted-corrupt.txt" 3
not_tagged dcp2-planted-smem:1

# only_kernel LOG K: the build's error names kernel K alone (no other
# kernel failed with it: "(and N more kernels)" would say so).
only_kernel() {
  expect_in "$1" "error: .*kernel probe failed in the container: kernel $2 \\(/usr/local/lib/python3.12/dist-packages/vllm/prebaked/dcp2/dcp2_kernels.fatbin, sm_90a\\)" "$3"
  if grep -Eq 'kernel probe failed in the container: .*\(and [0-9]+ more kernels?\)' "$1"; then
    fail "$3: more kernels than $2 failed"
  fi
}
KERNELS="dcp2_attn_partial_f32 dcp2_attn_partial_bf16 dcp2_a2a_pack_f32 dcp2_a2a_pack_bf16 dcp2_a2a_combine_f32 dcp2_a2a_combine_bf16 dcp2_agrs_rescale_f32 dcp2_agrs_rescale_bf16"

step "4. planted in each required kernel: its launch bounds say 64 threads, its recipe launches 128: 7, naming that kernel alone"
for k in $KERNELS; do
  python3 tests/gpu/plant-cubin.py "$fb" "$D/planted.fatbin" --sm 90 --kernel "$k" threads 64 >>"$OUT/summary.txt"
  expect 7 "threads-$k" "$OUT/planted-threads-$k.txt" "$IB" --smoke=required "$D"
  only_kernel "$OUT/planted-threads-$k.txt" "$k" "threads-$k"
  show 'error' "$OUT/planted-threads-$k.txt" 1
done
not_tagged dcp2-planted-smem:1

step "5. planted in each required kernel: missing from the sm_90a cubin (the static gate judges sm_121a and passes): 7, naming that kernel"
for k in $KERNELS; do
  python3 tests/gpu/plant-cubin.py "$fb" "$D/planted.fatbin" --sm 90 --kernel "$k" rename >>"$OUT/summary.txt"
  expect 7 "missing-sm90-$k" "$OUT/planted-missing-sm90-$k.txt" "$IB" --smoke=required "$D"
  expect_in "$OUT/planted-missing-sm90-$k.txt" 'gate kernels +pass' "missing-sm90-$k"
  # The probe finds no sm_90a code for it (not on this machine: the image
  # targets sm_121a, which has it); the DCP case that needs it then fails
  # naming it.
  expect_in "$OUT/planted-missing-sm90-$k.txt" "error: .*dcp2_smoke: rank 0: kernel $k is not in the prebaked kernels that this GPU loaded" "missing-sm90-$k"
  show 'error' "$OUT/planted-missing-sm90-$k.txt" 1
done
not_tagged dcp2-planted-smem:1

step "6. planted: the other kernel with static shared memory, dcp2_attn_partial_bf16, asks for 256 KiB: 7, naming it alone"
python3 tests/gpu/plant-cubin.py "$fb" "$D/planted.fatbin" --sm 90 --kernel dcp2_attn_partial_bf16 smem 262144 >>"$OUT/summary.txt"
expect 7 planted-smem-bf16 "$OUT/planted-smem-bf16.txt" "$IB" --smoke=required "$D"
only_kernel "$OUT/planted-smem-bf16.txt" dcp2_attn_partial_bf16 planted-smem-bf16
show 'error' "$OUT/planted-smem-bf16.txt" 1

step "7. planted in each required kernel: missing from every cubin: the static kernel gate fails (6) naming it, before any container"
for k in $KERNELS; do
  python3 tests/gpu/plant-cubin.py "$fb" "$D/planted.fatbin" --sm 0 --kernel "$k" rename >>"$OUT/summary.txt"
  expect 6 "missing-$k" "$OUT/planted-missing-$k.txt" "$IB" --smoke=required "$D"
  expect_in "$OUT/planted-missing-$k.txt" "gate kernels +fail .*kernel $k has no SASS" "missing-$k"
done
not_tagged dcp2-planted-smem:1

gpu_finish
