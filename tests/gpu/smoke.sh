#!/usr/bin/env bash
# The GPU half of the smoke test, on the GPU machine (kinds nvidia-h200-x2 or
# -x4), run from the repository root:
#   tests/gpu/smoke.sh CARRY OUT
# CARRY (a folder, or the carry.tgz that prepare-carry.sh --pack makes) holds what this machine cannot build (it has no package registry):
# build/ (imgbuild, imgverify, dcp2_smoke), lib/ (their shared libraries and
# runc's), bin/runc, and store/ with the stand-in base built without NCCL
# (tests/gpu/prepare-carry.sh makes it).  OUT receives the logs.
#
# It builds dsv41-flash-dcp2 with --smoke=required on all GPUs (TP 4 = two
# DCP groups of 2 on four), on two GPUs (one group), verifies the result with
# imgverify --smoke, builds it with a planted error in the combine kernel and
# without NCCL, then compares imgverify --kernels with cuobjdump.  The kernel
# probe and NCCL's transports (issue 16): every required sm_90a kernel is
# loaded and measured in the container, the sm_121a ones are "not on this
# machine"; a fatbin whose sm_90a cubin asks for 256 KiB of shared memory
# passes the static kernel gate and fails the probe, naming the kernel; an
# image that turns P2P and SHM off fails expect-transport (NCCL fell back to
# sockets); an /etc/nccl.conf is warned about; a contract with a tiny
# /dev/shm fails with NCCL's own error.
#
# A test, not a log: each step has the exit code it must have (0 for the
# builds that must pass, 7 for the smoke failures, which must also tag
# nothing); the script exits 1 when any step did otherwise, listing them at
# the end of OUT/summary.txt, 0 when all did, and 2 when it cannot run at
# all (usage, no GPU: never a silent pass).
set -euo pipefail
[ $# = 2 ] || { echo "usage: tests/gpu/smoke.sh CARRY OUT" >&2; exit 2; }
source "$(dirname "$0")/lib.sh"
gpu_setup "$1" "$2" /tmp/ib-defs
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cat "$OUT/gpus.txt"
ngpu=$(wc -l <"$OUT/gpus.txt")
# Lines of a log worth seeing; never an assertion (no match is fine).
show() { grep -E "$1" "$2" | tail -"${3:-40}" || true; }

[ "$ngpu" -ge 2 ] || fail "$ngpu GPU(s): the smoke test needs a DCP group of 2"

step "base: stand-in + this machine's NCCL"
expect 0 base "$OUT/base.txt" "$IB" tests/gpu/nccl-layer

step "imgbuild dsv41-flash-dcp2 --smoke=required, $ngpu ranks"
IMGBUILD_SMOKE_LOG=$OUT/smoke-all.raw.log expect 0 smoke-all "$OUT/smoke-all.txt" "$IB" --smoke=required dsv41-flash-dcp2 -t dcp2-all:1
expect_in "$OUT/smoke-all.txt" 'smoke: pass' smoke-all
expect_in "$OUT/smoke-all.txt" 'tagged dcp2-all:1' smoke-all
show '^(case|nccl|kernel|dcp2_smoke)|tagged|error|smoke:' "$OUT/smoke-all.txt" 60
# The kernel probe: every sm_90a kernel proven on the H200s, the sm_121a
# ones of the FlashInfer stand-in not on this machine, NCCL over P2P.
expect_in "$OUT/smoke-all.txt" 'dcp2_smoke: kernel probe: 0 of [0-9]+ kernels failed' probe
expect_in "$OUT/smoke-all.txt" 'smoke: kernels: [0-9]+ proven on GPU 0 NVIDIA H200 \(9\.0\)' probe
expect_in "$OUT/smoke-all.txt" 'smoke: NCCL 0\[0\] -> 1\[1\] via P2P' transport
expect_in "$OUT/smoke-all.txt" 'smoke: NCCL [0-9.]+\+cuda[0-9.]+ loaded' nccl-version
grep -a 'NCCL INFO' "$OUT/smoke-all.txt" >/dev/null && fail "smoke-all: NCCL's INFO lines were shown to people"
"$IV" --json dcp2-all:1 >"$OUT/verify.json" 2>"$OUT/verify.txt" || true
"$IV" dcp2-all:1 >>"$OUT/verify.txt" 2>&1 || true
expect_in "$OUT/verify.txt" 'kernel dcp2_a2a_combine_f32: pass \(NVIDIA H200, 9\.0\), sm_90a, launched' recorded
expect_in "$OUT/verify.txt" 'kernel trtllm_dcp_alltoall: not on this machine' recorded
step "the smoke report of dcp2-all:1 (its JSON)"
"$IB" --smoke=required --json dsv41-flash-dcp2 -t dcp2-json:1 >"$OUT/smoke-all.json" 2>/dev/null || fail "smoke --json"
# (python3: the GPU machine has no jq)
python3 - "$OUT/smoke-all.json" >"$OUT/kernels.txt" <<'PY' || fail "smoke-all: the kernel probe's results are not as they must be"
import json, sys
r = json.load(open(sys.argv[1]))["smoke"]
ks = r["kernels"]
for k in ks:
    print("\t".join(str(k.get(f, "-")) for f in ("status", "kernel", "arch", "gpu_name", "compute_capability", "registers",
                                                   "shared_static", "max_dynamic_shared", "max_threads", "launch", "error")))
n = r["nccl"]
print("nccl", n["version"], json.dumps(n["communicators"]), json.dumps(n["pairs"]), json.dumps(n["settings"]))
print("smoke seconds", r["seconds"], "contract", json.dumps(r["contract"]))
proven = [k for k in ks if k["status"] == "pass" and k.get("arch", "").startswith("sm_90")]
absent = [k for k in ks if k["status"] == "not on this machine"]
launched = [k for k in proven if k.get("launch", "").startswith("launched")]
bad = [k for k in ks if k["status"] not in ("pass", "not on this machine")]
# Every required sm_90a kernel is launched, not only loaded (each has a recipe).
unlaunched = [k["kernel"] for k in proven if k["arch"] == "sm_90a" and not k.get("launch", "").startswith("launched")]
print("proven", len(proven), "launched", len(launched), "not on this machine", len(absent), "bad", len(bad),
      "sm_90a not launched", unlaunched or "none")
sys.exit(0 if len(proven) >= 12 and len(launched) >= 9 and len(absent) >= 2 and not bad and not unlaunched else 1)
PY
cat "$OUT/kernels.txt" | tee -a "$OUT/summary.txt"

# The smoke gate's time (issue 16: within 2x of the 6.6 s it took before the
# probe): the first build (its cubins not yet in the store's cache) and the
# second (the JSON one, caches warm).  Reported, never asserted.
cold=$(sed -n 's/^imgbuild: smoke: pass in \([0-9.]*\)s.*/\1/p' "$OUT/smoke-all.txt")
plan=$(sed -n 's/^imgbuild: smoke: kernel probe plan: .* in \([0-9.]*\)s$/\1/p' "$OUT/smoke-all.txt")
warm=$(python3 -c 'import json,sys; print("%.1f" % json.load(open(sys.argv[1]))["smoke"]["seconds"])' "$OUT/smoke-all.json" || echo "?")
awk -v c="${cold:-999}" -v w="$warm" -v p="${plan:-?}" 'BEGIN { printf "smoke time: first build %s s (plan %s s), warm %s s; 2x of 6.6 s is 13.2 s: %s\n", c, p, w, (c + 0 <= 13.2 && w + 0 <= 13.2) ? "within" : "OVER" }' \
  | tee -a "$OUT/summary.txt"

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

mkdir -p /tmp/ib-gdefs && cp -r tests/gpu/defs/. /tmp/ib-gdefs/
step "planted: the sm_90a cubin of dcp2_attn_partial_f32 asks for 256 KiB of shared memory: static gate passes, probe fails (7)"
fb=$(find /tmp/ib-store/imgbuild/rootfs -name 'dcp2_kernels.fatbin' | head -1)
python3 tests/gpu/plant-cubin.py "$fb" /tmp/ib-gdefs/planted-smem/planted.fatbin --sm 90 --kernel dcp2_attn_partial_f32 smem 262144 \
  | tee -a "$OUT/summary.txt"
expect 7 planted-smem "$OUT/planted-smem.txt" "$IB" --smoke=required /tmp/ib-gdefs/planted-smem
expect_in "$OUT/planted-smem.txt" 'gate kernels +pass' planted-smem
expect_in "$OUT/planted-smem.txt" 'error: .*kernel probe failed in the container: kernel dcp2_attn_partial_f32 \(/usr/local/lib/python3.12/dist-packages/vllm/prebaked/dcp2/dcp2_kernels.fatbin, sm_90a\)' planted-smem
show 'kprobe\tfail|error|kernel probe' "$OUT/planted-smem.txt" 5
not_tagged dcp2-planted-smem:1
step "planted: the same cubin's attributes (.nv.info) corrupted: must fail (7) naming the kernel"
python3 tests/gpu/plant-cubin.py "$fb" /tmp/ib-gdefs/planted-smem/planted.fatbin --sm 90 --kernel dcp2_a2a_combine_f32 corrupt \
  | tee -a "$OUT/summary.txt"
expect 7 planted-corrupt "$OUT/planted-corrupt.txt" "$IB" --smoke=required /tmp/ib-gdefs/planted-smem
expect_in "$OUT/planted-corrupt.txt" 'gate kernels +pass' planted-corrupt
expect_in "$OUT/planted-corrupt.txt" 'error: .*kernel (probe failed|dcp2_a2a_combine_f32)' planted-corrupt
show 'error|kernel probe' "$OUT/planted-corrupt.txt" 5

step "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 in the image: expect-transport P2P fails (7), naming the fallback"
IMGBUILD_SMOKE_LOG=$OUT/p2p-off.raw.log expect 7 p2p-off "$OUT/p2p-off.txt" "$IB" --smoke=required /tmp/ib-gdefs/p2p-off
expect_in "$OUT/p2p-off.txt" 'warning: the image sets NCCL_P2P_DISABLE=1' p2p-off
expect_in "$OUT/p2p-off.txt" 'error: .*expect-transport P2P: NCCL connected .* via NET/Socket' p2p-off
show 'warning|smoke: NCCL|error' "$OUT/p2p-off.txt" 12
not_tagged dcp2-p2p-off:1

step "/etc/nccl.conf in the image: warned about, passes (0)"
expect 0 nccl-conf "$OUT/nccl-conf.txt" "$IB" --smoke=required /tmp/ib-gdefs/nccl-conf
expect_in "$OUT/nccl-conf.txt" 'warning: the image has /etc/nccl.conf' nccl-conf
show 'warning|smoke: NCCL' "$OUT/nccl-conf.txt" 8

for size in 8g 64m 1m; do
  sed "s/SHM_SIZE/$size/" tests/gpu/defs/tiny-shm/image.conf >/tmp/ib-gdefs/tiny-shm/image.conf
  export IMGBUILD_SMOKE_LOG=$OUT/shm-$size.raw.log
  case $size in
    8g)
      step "NCCL over SHM (P2P off in the image), the contract's /dev/shm 8g: passes (0), expect-transport SHM"
      expect 0 shm-8g "$OUT/shm-8g.txt" "$IB" --smoke=required /tmp/ib-gdefs/tiny-shm -t dcp2-shm8g:1
      expect_in "$OUT/shm-8g.txt" 'smoke: NCCL 0\[0\] -> 1\[1\] via SHM' shm-8g
      expect_in "$OUT/shm-8g.txt" 'smoke: the container had a /dev/shm of 85899[0-9]+ bytes' shm-8g ;;
    64m)
      step "the same with a 64 MB /dev/shm (what NCCL does with it, recorded)"
      t0=$(now)
      if "$IB" --smoke=required /tmp/ib-gdefs/tiny-shm -t dcp2-shm64m:1 >"$OUT/shm-64m.txt" 2>&1; then
        echo "   64m: pass ($(since "$t0") s)" | tee -a "$OUT/summary.txt"
      else
        echo "   64m: exit $? ($(since "$t0") s)" | tee -a "$OUT/summary.txt"
        # A failed rank stops the others (they waited in NCCL until the
        # timeout before): the program names the rank that failed first.
        expect_in "$OUT/shm-64m.txt" 'dcp2_smoke: FAIL \([0-9]+ of [0-9]+ ranks failed, rank [0-9]+ first' shm-64m
      fi ;;
    1m)
      step "the same with a 1 MB /dev/shm: fails (7) with NCCL's own message"
      expect 7 shm-1m "$OUT/shm-1m.txt" "$IB" --smoke=required /tmp/ib-gdefs/tiny-shm -t dcp2-shm1m:1
      expect_in "$OUT/shm-1m.txt" 'smoke: the container had a /dev/shm of 1048576 bytes' shm-1m
      expect_in "$OUT/shm-1m.txt" 'error: .*NCCL said: .*' shm-1m
      not_tagged dcp2-shm1m:1 ;;
  esac
  show 'error|NCCL WARN|smoke: (pass|FAIL|NCCL)' "$OUT/shm-$size.txt" 6
done
unset IMGBUILD_SMOKE_LOG

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

gpu_finish
