# The runner and the smoke gate (issue "DCP2 kernels and the in-container
# NCCL smoke test"), on a machine without GPUs: the bundle and runc with CPU
# programs inside the stand-in image, the gate's policies, and an image
# without NCCL.  The GPU half runs on the GPU machine: tests/gpu/smoke.sh.

hello_program() {
  cat >hello.c <<'C'
#include <stdio.h>
#include <unistd.h>
int main (int argc, char **argv)
{
  FILE *f = fopen (argv[1], "r");
  if (!f) { perror (argv[1]); return 3; }
  char b[4096]; size_t n;
  while ((n = fread (b, 1, sizeof b, f))) fwrite (b, 1, n, stdout);
  /* The image's root is read-only. */
  if (fopen ("/written-by-the-test", "w")) { puts ("ROOT IS WRITABLE"); return 4; }
  printf ("pid %d\n", (int) getpid ());
  return 0;
}
C
  cc -O2 hello.c -o hello
}

t_runner_runs_a_program_inside_the_image() {
  build_base
  "$IB" -q dsv41-flash-dcp2 >/dev/null
  hello_program
  "$IV" --run dsv41-flash-dcp2:local -- "$PWD/hello" "$SITE/vllm/v1/attention/backends/mla/sparse_swa.py" >out.txt
  head -n -1 out.txt | cmp - "$ROOT/images/dsv41-flash-dcp2/files/sparse_swa.py"
  # Its own pid namespace: the program is pid 1.
  tail -1 out.txt | grep -qx 'pid 1'
  # The program's exit status comes back.
  rc=0
  "$IV" --run dsv41-flash-dcp2:local -- "$PWD/hello" /no/such/file >/dev/null 2>&1 || rc=$?
  [ "$rc" = 3 ]
  # Layers were extracted once: a second run reuses them.  Seen from
  # outside: the second run opens none of the layer blobs (extracting is
  # the only reason to read them), and the folders are the same ones.
  ls "$IMGBUILD_STORE/imgbuild/rootfs" | sort >dirs1
  [ "$(wc -l <dirs1)" = 3 ]
  stat -c '%n %i' "$IMGBUILD_STORE"/imgbuild/rootfs/*/ >t1
  traced -f -qq -e trace=openat,open -o opens.txt \
    "$IV" --run dsv41-flash-dcp2:local -- "$PWD/hello" "$SITE/vllm/v1/attention/backends/mla/sparse_swa.py" >out2.txt
  head -n -1 out2.txt | cmp - "$ROOT/images/dsv41-flash-dcp2/files/sparse_swa.py"
  grep -q "$IMGBUILD_STORE/index.json" opens.txt # the trace saw the run's opens
  for l in $(skopeo inspect --raw "oci:$IMGBUILD_STORE:dsv41-flash-dcp2:local" | jq -r '.layers[].digest' | cut -d: -f2); do
    refute grep -q "blobs/sha256/$l" opens.txt
  done
  stat -c '%n %i' "$IMGBUILD_STORE"/imgbuild/rootfs/*/ | cmp - t1
  # Nothing is left mounted or behind.
  refute grep -q "$IMGBUILD_STORE" /proc/mounts
  [ -z "$(ls "$IMGBUILD_STORE/imgbuild/run")" ]
}

# imgverify (or imgbuild's smoke gate) killed while its container runs:
# the reaper, a process of its own session, kills and deletes the
# container and removes its bundle.  Before it, the container ran on.
t_killed_runner_leaves_no_container() {
  build_base
  "$IB" -q dsv41-flash-dcp2 >/dev/null
  name=sleeper-$$
  printf '#include <unistd.h>\nint main (void) { sleep (300); return 0; }\n' >s.c
  cc -O2 s.c -o "$name"
  "$IV" --run dsv41-flash-dcp2:local -- "$PWD/$name" >out.txt 2>&1 &
  pid=$!
  # (its output comes back when it ends: the process itself is the sign)
  for _ in $(seq 600); do pgrep -f "/opt/imgbuild/$name" >/dev/null && break; sleep 0.1; done
  pgrep -f "/opt/imgbuild/$name" >/dev/null
  kill -KILL "$pid"
  wait "$pid" || true
  gone=no
  for _ in $(seq 300); do
    if ! pgrep -f "/opt/imgbuild/$name" >/dev/null && [ -z "$(ls "$IMGBUILD_STORE/imgbuild/run")" ]; then
      gone=yes
      break
    fi
    sleep 0.1
  done
  # (a failed run must not leave its sleeper behind for the next test)
  [ "$gone" = yes ] || pkill -KILL -f "/opt/imgbuild/$name" || true
  log "container gone after imgverify was killed: $gone"
  [ "$gone" = yes ]
  refute grep -q "$IMGBUILD_STORE" /proc/mounts
}

t_smoke_program_starts_in_the_image_and_names_what_is_missing() {
  build_base
  "$IB" -q dsv41-flash-dcp2 >/dev/null
  rc=0
  "$IV" --run dsv41-flash-dcp2:local -- "$ROOT/${IB_BUILD:-build}/dcp2_smoke" --kernels "$SITE/vllm/prebaked/dcp2/dcp2_kernels.fatbin" \
    --nccl "$SITE/nvidia/nccl/lib/libnccl.so.2" >out.txt 2>&1 || rc=$?
  cat out.txt
  [ "$rc" = 2 ]
  # It ran (the image's glibc works) and stopped at the missing GPU driver.
  grep -q 'cannot load the CUDA driver (libcuda.so.1)' out.txt
}

t_smoke_auto_skips_without_gpus_and_says_so() {
  [ ! -e /dev/nvidia0 ] || skip_test "this host has a GPU: tests/gpu/smoke.sh tests it"
  build_base
  "$IB" dsv41-flash-dcp2 --json >report.json 2>err.txt
  jq -e '.status == "pass" and .smoke.status == "skip"' report.json
  jq -e '.gates[] | select(.name == "smoke") | .status == "skip"' report.json
  "$IB" dsv41-flash-dcp2 2>err.txt >/dev/null
  # The row says skip and why, in the table and in the JSON.
  grep -q 'gate smoke *skip .*this machine has no GPU' err.txt
  jq -e '.gates[] | select(.name == "smoke") | .reason | startswith("this machine has no GPU")' report.json
}

# --smoke=off: the smoke gate is a skip whose reason is the flag, in the
# table and the JSON, the image is tagged, and the record says "off" (what
# imgverify shows).  Not vacuous: the same definition's smoke test, run,
# fails (the image has no NCCL), so only the flag kept it from running;
# on a machine with GPUs as without.
t_smoke_off_is_a_skip_naming_the_flag() {
  mkdir t
  echo hello >t/hello.txt
  printf '[image]\nname = sm:1\nfrom = scratch\nplatform = linux/amd64\n[copy]\nfile hello.txt /etc/hello.txt\n[new]\n/\n[smoke]\nkernels /opt/k.fatbin\nnccl /usr/lib/libnccl.so.2\n' \
    >t/image.conf
  expect_fail 7 'gate smoke: the image has no NCCL: /usr/lib/libnccl.so.2 is not in it' "$IB" t -t run:1
  "$IB" --smoke=off --json t >r.json
  validate r.json
  jq -e '.status == "pass" and .exit_code == 0 and .smoke.status == "off"
         and ([.gates[] | select(.name == "smoke")] | length == 1 and .[0].status == "skip" and .[0].reason == "--smoke=off")
         and ([.problems[] | select(.gate == "smoke")] | length == 0)' r.json
  "$IB" --smoke=off t -t sm:2 >/dev/null 2>err.txt
  grep -Eq 'gate smoke +skip .*--smoke=off$' err.txt
  refute grep -Eq 'gate smoke +pass' err.txt
  skopeo inspect "oci:$IMGBUILD_STORE:sm:1" >/dev/null
  skopeo inspect "oci:$IMGBUILD_STORE:sm:2" >/dev/null
  refute skopeo inspect "oci:$IMGBUILD_STORE:run:1" >/dev/null 2>&1
  "$IV" sm:1 >/dev/null 2>v.err
  grep -q 'recorded smoke test: off' v.err
}

t_smoke_required_without_gpus_refuses_to_tag() {
  [ ! -e /dev/nvidia0 ] || skip_test "this host has a GPU: tests/gpu/smoke.sh tests it"
  build_base
  expect_fail 7 'smoke: --smoke=required, but this machine has no GPU .*nothing is tagged' \
    "$IB" --smoke=required dsv41-flash-dcp2
  refute skopeo inspect "oci:$IMGBUILD_STORE:dsv41-flash-dcp2:local" >/dev/null 2>&1
  # off: not run, not a skip of a requirement.
  "$IB" --smoke=off --json dsv41-flash-dcp2 | jq -e '.smoke.status == "off"'
}

t_image_without_nccl_fails_the_smoke_gate() {
  copy_images d
  sed -i '/libnccl.so.2/d' d/dsv41-flash-b12x/image.conf
  "$IB" -q d/dsv41-flash-b12x -t no-nccl:1 >/dev/null
  sed -i '/^nccl /d; /libnccl.so\* ncclDevKernel/d' d/dsv41-flash-dcp2/image.conf
  expect_fail 7 'smoke: the image has no NCCL: no libnccl.so\* in its file system' \
    "$IB" d/dsv41-flash-dcp2 --from no-nccl:1 -t dcp2-no-nccl:1
  refute skopeo inspect "oci:$IMGBUILD_STORE:dcp2-no-nccl:1" >/dev/null 2>&1
}

# A CUDA driver and an NCCL of a few lines, for what the program does when a
# rank fails (no GPU here): every driver call succeeds on two "GPUs";
# NCCL's init fails on rank 1, by an error or a crash (MODE), and waits for
# its peers forever on rank 0, as the real NCCL does when a peer is gone.
stub_driver_and_nccl() {
  cat >cuda.c <<'C'
typedef int CUresult;
#define OK(name, ...) CUresult name (__VA_ARGS__) { return 0; }
CUresult cuInit (unsigned f) { (void) f; return 0; }
CUresult cuDeviceGetCount (int *n) { *n = 2; return 0; }
CUresult cuDeviceGet (int *d, int i) { *d = i; return 0; }
CUresult cuDeviceGetAttribute (int *v, int a, int d) { (void) d; *v = a == 75 ? 9 : 0; return 0; }
CUresult cuDeviceGetName (char *s, int n, int d) { (void) d; if (n > 5) __builtin_memcpy (s, "stub", 5); return 0; }
CUresult cuGetErrorString (CUresult r, const char **s) { (void) r; *s = "stub"; return 0; }
OK (cuDevicePrimaryCtxRetain, void **c, int d) OK (cuCtxSetCurrent, void *c) OK (cuCtxSynchronize, void)
OK (cuModuleLoadData, void **m, const void *p) OK (cuModuleGetFunction, void **f, void *m, const char *n)
OK (cuMemAlloc_v2, unsigned long long *p, unsigned long n) OK (cuMemFree_v2, unsigned long long p)
OK (cuMemcpyHtoD_v2, unsigned long long d, const void *s, unsigned long n)
OK (cuMemcpyDtoH_v2, void *d, unsigned long long s, unsigned long n)
OK (cuMemsetD8_v2, unsigned long long d, unsigned char c, unsigned long n)
OK (cuLaunchKernel, void *f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e, unsigned g, unsigned h,
    void *s, void **p, void **x)
OK (cuStreamCreate, void **s, unsigned f) OK (cuStreamSynchronize, void *s) OK (cuEventCreate, void **e, unsigned f)
OK (cuEventRecord, void *e, void *s) OK (cuEventSynchronize, void *e) OK (cuEventElapsedTime, float *t, void *a, void *b)
C
  cat >nccl.c <<'C'
#include <signal.h>
#include <unistd.h>
typedef struct { char internal[128]; } ncclUniqueId;
int ncclGetVersion (int *v) { *v = 22803; return 0; }
int ncclGetUniqueId (ncclUniqueId *id) { __builtin_memset (id, 7, sizeof (*id)); return 0; }
const char *ncclGetErrorString (int r) { (void) r; return "internal error (the stub's rank 1)"; }
int ncclCommInitRank (void **comm, int n, ncclUniqueId id, int rank)
{
  (void) comm, (void) n, (void) id;
  if (rank == 1)
    {
#ifdef CRASH
      raise (SIGSEGV);
#endif
      return 3;
    }
  for (;;)
    pause ();
}
#define NOP(name) int name (void) { return 0; }
NOP (ncclCommSplit) NOP (ncclAllGather) NOP (ncclReduceScatter) NOP (ncclSend) NOP (ncclRecv)
NOP (ncclGroupStart) NOP (ncclGroupEnd) NOP (ncclCommDestroy)
C
  cc -shared -fPIC -w -Wl,-soname,libcuda.so.1 cuda.c -o libcuda.so.1
  cc -shared -fPIC -w nccl.c -o libnccl-exit.so
  cc -shared -fPIC -w -DCRASH nccl.c -o libnccl-crash.so
}

t_smoke_program_stops_the_other_ranks_when_one_fails() {
  build_base
  "$IB" -q dsv41-flash-dcp2 >/dev/null
  mkdir -p def && cd def
  stub_driver_and_nccl
  cat >image.conf <<'CONF'
[image]
name = rank-stub:1
from = dsv41-flash-dcp2:local

[copy]
file libcuda.so.1 /usr/lib/libcuda.so.1
file libnccl-exit.so /opt/stub/libnccl-exit.so
file libnccl-crash.so /opt/stub/libnccl-crash.so

[new]
/usr/lib/libcuda.so.1
/opt/stub/
CONF
  cd ..
  "$IB" -q def >/dev/null
  local mode rc
  for mode in exit crash; do
    # Without the stop, rank 0 waits in NCCL for ever: the timeout (124) fails the test.
    rc=0
    timeout 120 "$IV" --run rank-stub:1 -- "$ROOT/${IB_BUILD:-build}/dcp2_smoke" \
      --kernels "$SITE/vllm/prebaked/dcp2/dcp2_kernels.fatbin" --nccl /opt/stub/libnccl-$mode.so --ranks 2 --dcp 2 \
      >$mode.txt 2>&1 || rc=$?
    cat $mode.txt
    [ "$rc" = 1 ]
    case $mode in
      exit) grep -q '^dcp2_smoke: rank 1: ncclCommInitRank.* failed: internal error (the stub.s rank 1)$' $mode.txt
            grep -q '^dcp2_smoke: rank 1 exited with 2$' $mode.txt ;;
      crash) grep -q '^dcp2_smoke: rank 1 killed by signal 11$' $mode.txt ;;
    esac
    grep -q '^dcp2_smoke: rank 0 killed by signal 9 (stopped: another rank had failed)$' $mode.txt
    grep -q '^dcp2_smoke: FAIL (1 of 2 ranks failed, rank 1 first; 1 stopped)$' $mode.txt
  done
  # Nothing is left running or mounted.
  refute grep -q "$IMGBUILD_STORE" /proc/mounts
  [ -z "$(ls "$IMGBUILD_STORE/imgbuild/run")" ]
}

# Issue 16: the kernel probe, NCCL's configuration, the launch contract.

t_static_kernel_gate_passes_a_planted_fatbin() {
  # The fault the kernel probe exists for: a cubin whose names and
  # architectures are right (the static gate reads those) but that asks for
  # 256 KiB of shared memory, more than any GPU gives a block.  Built here,
  # the static gate passes it; on the GPU machine the probe fails it
  # (tests/gpu/smoke.sh, results in tests/gpu/results/h200x2-issue16).
  local nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  build_base
  "$IB" -q dsv41-flash-dcp2 -t dcp2-all:1 >/dev/null
  "$nvcc" -fatbin -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_121a,code=sm_121a \
    -o good.fatbin "$ROOT/kernels/dcp2/dcp2_kernels.cu"
  mkdir -p def
  python3 "$ROOT/tests/gpu/plant-cubin.py" good.fatbin def/planted.fatbin --sm 90 --kernel dcp2_attn_partial_f32 smem 262144
  # The ELF section's size, and nothing else, changed.
  [ "$(cmp -l good.fatbin def/planted.fatbin | wc -l)" -ge 1 ]
  [ "$(cmp -l good.fatbin def/planted.fatbin | wc -l)" -le 8 ]
  sed 's/^from = .*/from = dcp2-all:1/' "$ROOT/tests/gpu/defs/planted-smem/image.conf" >def/image.conf
  "$IB" --json def >report.json 2>err.txt
  jq -e '.gates[] | select(.name == "kernels") | .status == "pass"' report.json
  jq -e '.gates[] | select(.name == "smoke") | .status == "skip"' report.json
  # Without a GPU the probe cannot run: --smoke=required refuses to tag.
  expect_fail 7 'smoke: --smoke=required, but this machine has no GPU' "$IB" --smoke=required def -t planted:2
}

t_nccl_configuration_of_the_image_is_warned_about() {
  build_base
  "$IB" -q dsv41-flash-dcp2 -t dcp2-all:1 >/dev/null
  mkdir -p def
  printf 'NCCL_IGNORE_CPU_AFFINITY=1\nNCCL_SOCKET_IFNAME=eth0\n' >def/nccl.conf
  cat >def/image.conf <<'CONF'
[image]
name = conf:1
from = dcp2-all:1

[copy]
file nccl.conf /etc/nccl.conf

[new]
/etc/nccl.conf

[env]
NCCL_P2P_DISABLE = 1
DSV41_DCP_STAGE = 3

[smoke]
kernels /usr/local/lib/python3.12/dist-packages/vllm/prebaked/dcp2/dcp2_kernels.fatbin
CONF
  "$IB" def 2>err.txt >/dev/null
  grep -q 'smoke: warning: the image sets NCCL_P2P_DISABLE=1' err.txt
  grep -q 'smoke: warning: the image has /etc/nccl.conf (NCCL reads it on every node): NCCL_IGNORE_CPU_AFFINITY=1 NCCL_SOCKET_IFNAME=eth0' err.txt
  refute grep -q 'DSV41_DCP_STAGE' err.txt
  "$IB" --json def -t conf:2 >report.json 2>/dev/null
  jq -e '[.problems[] | select(.gate == "smoke" and .severity == "warning")] | length == 2' report.json
  jq -e '.smoke.nccl_config | length == 2' report.json
  jq -e '.smoke.nccl_config[1].file == "/etc/nccl.conf"' report.json
  # The same image without them: no warning.
  "$IB" dsv41-flash-dcp2 2>err2.txt >/dev/null
  refute grep -q 'NCCL' err2.txt
}

t_launch_contract_is_recorded_and_used_by_the_runner() {
  build_base
  hello_program
  copy_images d
  # The default: /dev/shm 8 GiB, no capabilities.
  "$IB" -q d/dsv41-flash-dcp2 -t plain:1 >/dev/null
  "$IV" --run plain:1 -- "$PWD/hello" /proc/mounts >mounts.txt
  grep -Eq '^shm /dev/shm tmpfs .*size=8388608k' mounts.txt
  "$IV" --run plain:1 -- "$PWD/hello" /proc/self/status >status.txt
  grep -Eq '^CapEff:\s+0000000000000000$' status.txt
  # [run] and [smoke] write the contract; the provenance keeps it, and
  # imgverify --run uses it: a 96 MiB /dev/shm, CAP_IPC_LOCK (not 64 MiB:
  # that is Docker's default, the host's own /dev/shm when the suite runs
  # in a container, which the ipc-host case below must tell apart).
  printf '\n[run]\nshm-size 96m\ncap-add IPC_LOCK\n' >>d/dsv41-flash-dcp2/image.conf
  "$IB" --json d/dsv41-flash-dcp2 -t contract:1 >report.json 2>/dev/null
  jq -e '.smoke.contract == {"shm_size":"96m","ipc":"private","devices":"all","memlock":"keep","capabilities":["CAP_IPC_LOCK"]}' report.json
  "$IV" --run contract:1 -- "$PWD/hello" /proc/mounts >mounts.txt
  grep -Eq '^shm /dev/shm tmpfs .*size=98304k' mounts.txt
  "$IV" --run contract:1 -- "$PWD/hello" /proc/self/status >status.txt
  grep -Eq '^CapEff:\s+0000000000004000$' status.txt
  # ipc host: no IPC namespace of its own, the host's /dev/shm.
  sed -i 's/^shm-size 96m$/ipc host/' d/dsv41-flash-dcp2/image.conf
  "$IB" -q d/dsv41-flash-dcp2 -t hostipc:1 >/dev/null
  "$IV" --run hostipc:1 -- "$PWD/hello" /proc/self/ns/ipc >/dev/null 2>&1 || true
  "$IV" --run hostipc:1 -- "$PWD/hello" /proc/mounts >mounts.txt
  refute grep -Eq '^shm /dev/shm tmpfs .*size=98304k' mounts.txt
  # A contract line that is wrong stops the build at the definition.
  sed -i 's/^ipc host$/shm-size lots/' d/dsv41-flash-dcp2/image.conf
  expect_fail 3 "image.conf:[0-9]+: shm-size \`lots\` is not a size" "$IB" d/dsv41-flash-dcp2
}

t_kernel_probe_without_a_driver_says_so() {
  build_base
  "$IB" -q dsv41-flash-dcp2 >/dev/null
  mkdir -p probe
  printf '0\tx.cubin\tsm_90a\t/f.fatbin\tk\t-\n' >probe/manifest
  rc=0
  "$IV" --run dsv41-flash-dcp2:local -- "$ROOT/${IB_BUILD:-build}/dcp2_smoke" --kernels "$SITE/vllm/prebaked/dcp2/dcp2_kernels.fatbin" \
    --nccl "$SITE/nvidia/nccl/lib/libnccl.so.2" --probe /tmp >out.txt 2>&1 || rc=$?
  cat out.txt
  [ "$rc" = 2 ]
  # It says what the container got of its contract, then why it stopped.
  grep -Eq '^dcp2_smoke: container: /dev/shm 8589934592 bytes, memlock' out.txt
  grep -q 'dcp2_smoke: kernel probe: cannot load the CUDA driver' out.txt
}
