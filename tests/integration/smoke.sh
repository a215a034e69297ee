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
