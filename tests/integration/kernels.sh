# kernels (issue "kernels"): the inspector against what nvcc compiled here,
# the kernel gate on every compatibility case, prebake and its cache.

NVCC_REAL=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
K_SRC='extern "C" __global__ void trtllm_dcp_alltoall(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }
__global__ void cpp_kernel(int *y) { y[threadIdx.x] = threadIdx.x; }'

# "kind sm variant compression kernel,kernel" per entry, sorted.
entries() {
  "$IV" --kernels --json "$@" | jq -r '.files[].entries[] | "\(.kind) \(.sm) \(.variant) \(.compression) \(.kernels | sort | join(","))"' | sort
}

t_inspector_reports_what_nvcc_compiled() {
  echo "$K_SRC" >k.cu
  local K=_Z10cpp_kernelPi,trtllm_dcp_alltoall
  "$NVCC_REAL" -fatbin -gencode arch=compute_121a,code=sm_121a -gencode arch=compute_90a,code=sm_90a \
    -gencode arch=compute_120,code=sm_120 -gencode arch=compute_120,code=compute_120 k.cu -o multi.fatbin
  [ "$(entries multi.fatbin)" = "$(printf '%s\n' "ptx 120  zstd $K" "sass 120  none $K" "sass 121 a none $K" "sass 90 a none $K")" ]
  "$NVCC_REAL" -fatbin --compress-mode=none -gencode arch=compute_120,code=compute_120 k.cu -o ptx-none.fatbin
  [ "$(entries ptx-none.fatbin)" = "ptx 120  none $K" ]
  "$NVCC_REAL" -fatbin --compress-mode=size -Xfatbin -compress-all -gencode arch=compute_120f,code=sm_120f k.cu -o size.fatbin
  [ "$(entries size.fatbin)" = "sass 120 f zstd $K" ]
  "$NVCC_REAL" -fatbin --compress-mode=speed -Xfatbin -compress-all -gencode arch=compute_100a,code=sm_100a k.cu -o speed.fatbin
  [ "$(entries speed.fatbin)" = "sass 100 a lz4 $K" ]
  "$NVCC_REAL" -cubin -arch=sm_121a k.cu -o k.cubin
  [ "$(entries k.cubin)" = "sass 121 a none $K" ]
  "$NVCC_REAL" -cubin -arch=sm_89 k.cu -o k89.cubin
  [ "$(entries k89.cubin)" = "sass 89  none $K" ]
  # Relocatable device code in a host object: __nv_relfatbin.
  "$NVCC_REAL" -c -rdc=true -Xcompiler -fPIC -gencode arch=compute_121a,code=sm_121a \
    -gencode arch=compute_121a,code=compute_121a k.cu -o rdc.o
  [ "$(entries rdc.o)" = "$(printf '%s\n' "ptx 121 a zstd $K" "sass 121 a zstd $K")" ]
  # ... which is nvlink's input, never loaded: marked, and apart in the table.
  "$IV" --kernels --json rdc.o | jq -e '[.files[].entries[].relocatable] == [true, true]'
  "$IV" --kernels rdc.o | grep -q 'and 2 relocatable entries in __nv_relfatbin'
  [ "$("$IV" --kernels rdc.o | grep -c sm_121a || true)" = 0 ]
  "$IV" --kernels --json multi.fatbin | jq -e '[.files[].entries[] | select(.kind == "ptx") | .ptx_version] | length == 1 and .[0] != "0.0"' 
  # A shared object: .nv_fatbin (nvcc adds an sm_75 link stub without kernels).
  "$NVCC_REAL" -shared -Xcompiler -fPIC -gencode arch=compute_90,code=sm_90 k.cu -o libk.so
  entries libk.so | grep -qx "sass 90  none $K"
  # Host code without GPU code, and not an ELF at all: nothing, no error.
  [ -z "$(entries "$IB")" ]
  [ -z "$(entries k.cu)" ]
  # A damaged fatbin is an error, not a silent "nothing".
  head -c 600 multi.fatbin >cut.fatbin
  refute "$IV" --kernels cut.fatbin 2>err.txt
  grep -q 'runs past' err.txt
}

# Where each entry lies (offset, stored): what the kernel probe's plan reads
# a chosen cubin back by, without parsing the rest of the file.  Checked
# with other tools: dd cuts the stored bytes out, zstd uncompresses them,
# readelf reads the cubin.
entry_at() { # FILE OFFSET STORED COMPRESSION -> the entry's bytes on stdout
  dd if="$1" bs=1M iflag=skip_bytes,count_bytes skip="$2" count="$3" status=none |
    case $4 in zstd) zstd -dcq ;; none) cat ;; *) return 1 ;; esac
}

t_inspector_records_where_each_entry_lies() {
  echo "$K_SRC" >k.cu
  "$NVCC_REAL" -fatbin -gencode arch=compute_121a,code=sm_121a -gencode arch=compute_90a,code=sm_90a \
    -gencode arch=compute_120,code=compute_120 k.cu -o multi.fatbin
  "$NVCC_REAL" -fatbin --compress-mode=size -Xfatbin -compress-all -gencode arch=compute_120f,code=sm_120f k.cu -o size.fatbin
  "$NVCC_REAL" -cubin -arch=sm_89 k.cu -o k89.cubin
  local nccl n=0
  nccl=$(ls /usr/local/cuda/lib64/libnccl.so.2 /usr/local/cuda/lib/libnccl.so.2 2>/dev/null | head -1)
  # NCCL: its biggest sm_90 cubin (105 MB, zstd), the one the probe loads on an H200.
  for f in multi.fatbin size.fatbin k89.cubin ${nccl:+"$nccl"}; do
    "$IV" --kernels --json "$f" | jq -r --arg f "$f" '[.files[].entries[] | select(.kind == "sass" and (.relocatable | not))]
      | (if $f | endswith("libnccl.so.2") then [max_by(.uncompressed_size)] else . end)[]
      | "\(.offset) \(.stored) \(.compression) \(.uncompressed_size) \(.kernels[0])"' >places.txt
    [ -s places.txt ]
    while read -r off stored comp usize kernel; do
      entry_at "$f" "$off" "$stored" "$comp" >e.cubin
      [ "$(stat -c %s e.cubin)" = "$usize" ]
      readelf -hW e.cubin | grep -q 'Machine: *NVIDIA CUDA architecture'
      readelf -sW e.cubin | grep -qF " $kernel"
      n=$((n + 1))
    done <places.txt
  done
  log "$n entries read back by their recorded place"
  [ "$n" -ge 4 ]
  # Every place lies inside the file.
  "$IV" --kernels --json multi.fatbin | jq -e '[.files[].entries[] | .offset + .stored] | max <= '"$(stat -c %s multi.fatbin)"
}

# A base with k.fatbin compiled by GENCODE at /opt/k/, and a thin image over
# it that requires trtllm_dcp_alltoall for compute 12.1.
gate_case() { # NAME GENCODE... -> exit status of the build
  local name=$1
  shift
  mkdir -p "$name/base" "$name/top"
  echo "$K_SRC" >"$name/base/k.cu"
  "$NVCC_REAL" -fatbin "$@" "$name/base/k.cu" -o "$name/base/k.fatbin"
  printf '[image]\nname = kbase-%s:1\nfrom = scratch\n[copy]\nfile k.fatbin /opt/k/k.fatbin\n[new]\n/\n' "$name" >"$name/base/image.conf"
  "$IB" -q "$name/base" >/dev/null
  echo x >"$name/top/x"
  printf '[image]\nname = ktop-%s:1\nfrom = kbase-%s:1\n[copy]\nfile x /opt/x\n[new]\n/opt/x\n[kernels]\ntarget 12.1\nrequire /opt/k/* trtllm_dcp_alltoall\n' \
    "$name" "$name" >"$name/top/image.conf"
}

# NCCL's device code: a 130 MB linked cubin per arch, and __nv_relfatbin
# with the relocatable cubins of every object file.  Read within 64 MiB, and
# only the .nv_fatbin entries count as loadable.
t_inspector_streams_nccl_within_64_mib() {
  local nccl
  nccl=$(ls /usr/local/cuda/lib64/libnccl.so.2 /usr/local/cuda/lib/libnccl.so.2 2>/dev/null | head -1)
  [ -n "$nccl" ] || { log "no libnccl.so.2 in /usr/local/cuda"; return 1; }
  /usr/bin/time -v "$IV" --kernels --json "$nccl" >nccl.json 2>time.txt
  local kb
  kb=$(awk '/Maximum resident set size/ {print $NF}' time.txt)
  log "peak RSS reading $nccl: $kb KiB"
  # Under ASan the figure is the sanitizer's (shadow memory, quarantine):
  # the bound is checked on the normal build, the rest below on both.
  [ -n "${IB_SANITIZE:-}" ] || [ "$kb" -lt 65536 ]
  # What the file's own section headers say: entries in both sections.
  readelf -SW "$nccl" | grep -q ' __nv_relfatbin '
  jq -e '[.files[].entries[] | select(.relocatable)] | length > 0' nccl.json
  jq -e '[.files[].entries[] | select(.relocatable | not) | select(.kind == "sass")] | length > 0' nccl.json
  # The biggest entry is larger than the whole limit: it was streamed.
  jq -e '[.files[].entries[].uncompressed_size] | max > 67108864' nccl.json
}

rdc_case() { # NAME FILE: a base with FILE at /opt/k/, a thin image requiring the kernel
  mkdir -p "$1/base" "$1/top"
  cp "$2" "$1/base/"
  printf '[image]\nname = kbase-%s:1\nfrom = scratch\n[copy]\nfile %s /opt/k/%s\n[new]\n/\n' "$1" "$2" "$2" >"$1/base/image.conf"
  "$IB" -q "$1/base" >/dev/null
  echo x >"$1/top/x"
  printf '[image]\nname = ktop-%s:1\nfrom = kbase-%s:1\n[copy]\nfile x /opt/x\n[new]\n/opt/x\n[kernels]\nrequire /opt/k/* trtllm_dcp_alltoall\n' "$1" "$1" >"$1/top/image.conf"
}

t_kernel_gate_never_takes_relocatable_sass() {
  echo "$K_SRC" >k.cu
  "$NVCC_REAL" -c -rdc=true -Xcompiler -fPIC -gencode arch=compute_121a,code=sm_121a k.cu -o k.o
  rdc_case obj k.o
  expect_fail 6 'trtllm_dcp_alltoall has no SASS .*: sm_121a SASS \(relocatable, -rdc\) in /opt/k/k.o' "$IB" obj/top
  # Linked into a shared object (nvcc device-links it), the same code is
  # loadable and passes.
  "$NVCC_REAL" -shared -Xcompiler -fPIC -rdc=true -gencode arch=compute_121a,code=sm_121a k.cu -o libk.so
  rdc_case so libk.so
  "$IB" -q so/top >/dev/null
}

# Issue 46 (NCCL 2.22.3 on a GB10): what is there instead lists the code a
# process can load before the relocatable objects' (-rdc), and says how
# many entries it left out: 8 relocatable cubins first in path order no
# longer hide the loadable sm_90 SASS after them.
t_kernel_gate_lists_loadable_code_first_and_counts_the_rest() {
  mkdir -p many/base many/top
  echo "$K_SRC" >many/base/k.cu
  "$NVCC_REAL" -c -rdc=true -Xcompiler -fPIC $(for a in 75 80 86 87 89 90 100 120; do echo "-gencode arch=compute_$a,code=sm_$a"; done) \
    many/base/k.cu -o many/base/a.o
  "$NVCC_REAL" -fatbin -gencode arch=compute_90,code=sm_90 many/base/k.cu -o many/base/k.fatbin
  printf '[image]\nname = kbase-many:1\nfrom = scratch\n[copy]\nfile a.o /opt/k/a.o\nfile k.fatbin /opt/k/k.fatbin\n[new]\n/\n' >many/base/image.conf
  "$IB" -q many/base >/dev/null
  echo x >many/top/x
  printf '[image]\nname = ktop-many:1\nfrom = kbase-many:1\n[copy]\nfile x /opt/x\n[new]\n/opt/x\n[kernels]\ntarget 12.1\nrequire /opt/k/* trtllm_dcp_alltoall\n' >many/top/image.conf
  expect_fail 6 'has no SASS that runs on compute capability 12.1 without a JIT in /opt/k/\*: sm_90 SASS in /opt/k/k.fatbin, sm_75 SASS \(relocatable, -rdc\) in /opt/k/a.o, .*, and 1 more entries not listed$' \
    "$IB" many/top
}

retarget() { # NAME TARGET...: the [kernels] target line of NAME's thin image
  local name=$1
  shift
  sed -i "s/^target .*/target $*/" "$name/top/image.conf"
}

t_kernel_gate_applies_binary_compatibility() {
  gate_case ptx -gencode arch=compute_121a,code=compute_121a
  expect_fail 6 'kernel trtllm_dcp_alltoall has no SASS that runs on compute capability 12.1 without a JIT in /opt/k/\*: compute_121a PTX in /opt/k/k.fatbin' \
    "$IB" ptx/top
  gate_case sm90 -gencode arch=compute_90,code=sm_90
  expect_fail 6 'trtllm_dcp_alltoall has no SASS .*: sm_90 SASS in /opt/k/k.fatbin' "$IB" sm90/top
  gate_case sm120a -gencode arch=compute_120a,code=sm_120a
  expect_fail 6 'trtllm_dcp_alltoall has no SASS .*: sm_120a SASS in /opt/k/k.fatbin' "$IB" sm120a/top
  gate_case sm120 -gencode arch=compute_120,code=sm_120 -gencode arch=compute_120,code=compute_120
  "$IB" -q sm120/top >/dev/null # plain sm_120 runs on 12.1
  gate_case sm120f -gencode arch=compute_120f,code=sm_120f
  "$IB" -q sm120f/top >/dev/null # the 12.x family
  gate_case sm121a -gencode arch=compute_121a,code=sm_121a
  "$IB" -q sm121a/top >/dev/null
  # Plain SASS of a higher minor than the target does not run on it: sm_121
  # passes for 12.1 and fails for 12.0 (and for a target list holding 12.0).
  gate_case sm121 -gencode arch=compute_121,code=sm_121
  "$IB" -q sm121/top >/dev/null
  retarget sm121 12.0
  expect_fail 6 'trtllm_dcp_alltoall has no SASS that runs on compute capability 12.0 .*: sm_121 SASS in /opt/k/k.fatbin' \
    "$IB" sm121/top -t ktop-sm121:2
  retarget sm121 12.1 12.0
  expect_fail 6 'compute capability 12.0 .*: sm_121 SASS' "$IB" sm121/top -t ktop-sm121:3
  # Every target of a list is checked: sm_120 runs on both 12.0 and 12.1,
  # sm_121a on 12.1 only.
  retarget sm120 12.0 12.1
  "$IB" -q sm120/top -t ktop-sm120:2 >/dev/null
  retarget sm121a 12.1 12.0
  expect_fail 6 'compute capability 12.0 .*: sm_121a SASS' "$IB" sm121a/top -t ktop-sm121a:2
  refute grep -q 'compute capability 12.1' stderr.txt
  # A family SASS of another family: sm_100f does not run on 12.1.
  gate_case sm100f -gencode arch=compute_100f,code=sm_100f
  expect_fail 6 'trtllm_dcp_alltoall has no SASS .*: sm_100f SASS in /opt/k/k.fatbin' "$IB" sm100f/top
  retarget sm121a 12.1
  # Nothing was tagged for the failures.
  for n in sm121:2 sm121:3 sm121a:2 sm100f:1; do refute skopeo inspect "oci:$IMGBUILD_STORE:ktop-$n" >/dev/null 2>&1; done
  for n in ptx sm90 sm120a; do refute skopeo inspect "oci:$IMGBUILD_STORE:ktop-$n:1" >/dev/null 2>&1; done
  # A kernel missing altogether, and a glob that matches nothing.
  sed -i 's/require \/opt\/k\/\* trtllm_dcp_alltoall/require \/opt\/k\/* no_such_kernel/' sm121a/top/image.conf
  expect_fail 6 'kernel no_such_kernel has no SASS .*: the kernel is in none of them' "$IB" sm121a/top
  sed -i 's/require \/opt\/k\/\* no_such_kernel/require \/opt\/nothing\/* x/' sm121a/top/image.conf
  expect_fail 6 'no file in the image matches /opt/nothing/\*' "$IB" sm121a/top
}

# Issue 45: a `[kernels]` requirement never checks nothing.  Each
# `require` line names at least one kernel (without one it is a definition
# error, 3), and each named kernel is checked in the files the glob
# matches: over files that hold no GPU code, or a glob that matches no
# file, the gate fails (6).  It is never a pass, and never the gate's skip
# "checked no kernel", a guard that no definition reaches.
t_kernel_requirement_over_nothing_fails_never_passes() {
  mkdir k
  echo 'not an ELF object' >k/plain.so
  printf '[image]\nname = knone:1\nfrom = scratch\nplatform = linux/amd64\n[copy]\nfile plain.so /opt/k/plain.so\n[new]\n/\n[kernels]\ntarget 12.1\nrequire /opt/k/* some_kernel\n' \
    >k/image.conf
  expect_fail 6 'kernel some_kernel has no SASS that runs on compute capability 12.1 without a JIT in /opt/k/\*: the kernel is in none of them' \
    "$IB" k
  "$IB" --json k >r.json || true
  validate r.json
  jq -e '.exit_code == 6 and (.gates[] | select(.name == "kernels") | .status == "fail")' r.json
  sed -i 's|^require .*|require /opt/nothing/* some_kernel|' k/image.conf
  expect_fail 6 'image.conf:[0-9]+: no file in the image matches /opt/nothing/\*' "$IB" k
  "$IB" --json k >r2.json || true
  jq -e '.exit_code == 6 and (.gates[] | select(.name == "kernels") | .status == "fail")' r2.json
  refute skopeo inspect "oci:$IMGBUILD_STORE:knone:1" >/dev/null 2>&1
  sed -i 's|^require .*|require /opt/k/*|' k/image.conf
  expect_fail 3 'image.conf:[0-9]+: expected `target 12.1 ...` or `require /PATH-OR-GLOB KERNEL...`' "$IB" k
}

# A counting nvcc: logs each run, and the most that ran at once.
counting_nvcc() {
  cat >nvcc-count <<SH
#!/bin/bash
exec 9>>"$PWD/nvcc.lock"
flock 9; n=\$((\$(cat "$PWD/nvcc.now" 2>/dev/null || echo 0) + 1)); echo \$n >"$PWD/nvcc.now"
m=\$(cat "$PWD/nvcc.max" 2>/dev/null || echo 0); [ \$n -gt \$m ] && echo \$n >"$PWD/nvcc.max"; echo "\$*" >>"$PWD/nvcc.log"; flock -u 9
"$NVCC_REAL" "\$@"; rc=\$?
flock 9; echo \$((\$(cat "$PWD/nvcc.now") - 1)) >"$PWD/nvcc.now"; flock -u 9
exit \$rc
SH
  chmod +x nvcc-count
  export NVCC=$PWD/nvcc-count
}

t_prebake_adds_the_missing_kernel_and_caches() {
  gate_case bake -gencode arch=compute_121a,code=compute_121a
  expect_fail 6 'compute_121a PTX' "$IB" bake/top
  counting_nvcc
  # The same thin image, with prebake compiling the kernel for sm_121a.
  for i in 1 2 3 4; do sed "s/trtllm_dcp_alltoall/k$i/" bake/base/k.cu >bake/top/k$i.cu; done
  cat >>bake/top/image.conf <<'CONF'
[prebake]
arch sm_121a sm_90a
jobs 2
source ../base/k.cu /opt/k/prebaked/k.fatbin
source k1.cu /opt/k/prebaked/k1.fatbin
source k2.cu /opt/k/prebaked/k2.fatbin
source k3.cu /opt/k/prebaked/k3.fatbin
source k4.cu /opt/k/prebaked/k4.fatbin
CONF
  sed -i 's/^require \/opt\/k\/\* trtllm_dcp_alltoall$/require \/opt\/k\/* trtllm_dcp_alltoall k1 k2 k3 k4/' bake/top/image.conf
  cp -al "$IMGBUILD_STORE" store1 # the base alone, for the `jobs 1` build
  # MAX_JOBS asks for 8: the definition's `jobs 2` must win, and 2 did run
  # at once (5 sources), never more.
  MAX_JOBS=8 "$IB" bake/top --json >first.json
  jq -e '.status == "pass" and .prebake.compiled == 5 and .prebake.jobs == 2' first.json
  [ "$(cat nvcc.max)" = 2 ]
  runs=$(wc -l <nvcc.log)
  [ "$runs" -ge 6 ]
  # The layer holds the fatbins and a SHA256SUMS that checks.
  umoci unpack --image "$IMGBUILD_STORE:ktop-bake:1" bundle >/dev/null
  (cd bundle/rootfs/opt/k/prebaked && sha256sum -c SHA256SUMS)
  entries bundle/rootfs/opt/k/prebaked/k.fatbin | grep -q '^sass 121 a none .*trtllm_dcp_alltoall'
  # Nothing changed: nvcc runs zero times, and the digest is the same.
  "$IB" bake/top --json -t ktop-bake:2 >second.json
  [ "$(wc -l <nvcc.log)" = "$runs" ]
  jq -e '.prebake.compiled == 0 and .prebake.cached == 5 and .prebake.nvcc_runs == 0' second.json
  [ "$(jq -r .manifest first.json)" = "$(jq -r .manifest second.json)" ]
  # A header change is seen through the remembered include list: the kernel
  # uses SCALE, so k1.fatbin changes and nothing else does.
  echo '#define SCALE 3.0f' >bake/top/scale.h
  sed -i '1i #include "scale.h"' bake/top/k1.cu
  sed -i 's/x\[i\] \*= 2.0f/x[i] *= SCALE/' bake/top/k1.cu
  grep -q 'x\[i\] \*= SCALE' bake/top/k1.cu
  "$IB" bake/top --json -t ktop-bake:3 >third.json
  jq -e '.prebake.compiled == 1 and .prebake.cached == 4' third.json
  echo '#define SCALE 4.0f' >bake/top/scale.h
  "$IB" bake/top --json -t ktop-bake:4 >fourth.json
  jq -e '.prebake.compiled == 1 and .prebake.cached == 4' fourth.json
  umoci unpack --image "$IMGBUILD_STORE:ktop-bake:3" b3 >/dev/null
  umoci unpack --image "$IMGBUILD_STORE:ktop-bake:4" b4 >/dev/null
  refute cmp -s b3/rootfs/opt/k/prebaked/k1.fatbin b4/rootfs/opt/k/prebaked/k1.fatbin
  for k in k k2 k3 k4; do cmp b3/rootfs/opt/k/prebaked/$k.fatbin b4/rootfs/opt/k/prebaked/$k.fatbin; done
  # `jobs 1`: one nvcc at a time, whatever MAX_JOBS says.
  rm -f nvcc.max nvcc.now
  sed -i 's/^jobs 2$/jobs 1/' bake/top/image.conf
  IMGBUILD_STORE=$PWD/store1 MAX_JOBS=8 "$IB" bake/top --json -t ktop-bake:5 >one.json
  jq -e '.status == "pass" and .prebake.compiled == 5 and .prebake.jobs == 1' one.json
  [ "$(cat nvcc.max)" = 1 ]
}

t_prebake_without_nvcc_says_what_it_needs() {
  gate_case none -gencode arch=compute_121a,code=sm_121a
  printf '[prebake]\narch sm_121a\nsource ../base/k.cu /opt/k/p.fatbin\n' >>none/top/image.conf
  NVCC=/nonexistent/nvcc expect_fail 8 'NVCC is `/nonexistent/nvcc`, which is not an executable' "$IB" none/top
  # A source that does not compile: nvcc's own message, nothing tagged.
  echo 'this is not CUDA' >none/base/k.cu
  expect_fail 6 'nvcc -(M|fatbin) of .*k.cu failed: .*error: expected a declaration' "$IB" none/top
}

t_imgverify_kernels_inside_an_image() {
  build_base
  "$IB" -q dsv41-flash-dcp2 >/dev/null
  "$IV" --kernels --json dsv41-flash-dcp2:local '*flashinfer*' >k.json
  jq -e '[.files[] | select(.path | endswith("dcp_lse_combine.fatbin")) | .entries[] | "\(.kind) \(.sm)\(.variant)"] | sort == ["sass 121a", "sass 90a"]' k.json
  jq -e '[.files[] | select(.path | endswith("libflashinfer_dcp.so")) | .entries[] | select(.kind == "ptx") | .kernels[]] == ["dcp_lse_combine"]' k.json
  "$IV" --kernels dsv41-flash-dcp2:local '*.so' | grep -q 'sm_121a .*trtllm_dcp_alltoall'
}
