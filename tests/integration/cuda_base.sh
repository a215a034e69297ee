# Issue 46: the real CUDA base (scripts/real-base.sh --cuda: Debian 13 with
# python3-torch-cuda 2.6, CUDA 12.4, NCCL 2.22.3) for amd64 and arm64, and
# the thin definition of six changed torch files over it
# (tests/cuda-base/thin.sh), each verdict held to its oracle: CPython in a
# chroot of the base (the image's own 3.13; under qemu-aarch64-static for
# arm64), glibc's ldd -r, dpkg-query.  The long tier only (tall_*, make
# test-all): the bases are 4.2-4.7 GB of layers, built once per machine
# (~20 minutes each here), and a cold build reads all of it.
# docs/cuda-base.md says what each verdict is and why.

cuda_base() { # ARCH: sets rootfs, oci, ref
  eval "$("$ROOT/scripts/real-base.sh" --cuda --arch "$1")"
}

# The thin definition over the ARCH base in DIR, targeting GPU; ORACLE gets
# the python3 program that imports what it changed.
cuda_thin() { # ARCH DIR GPU
  cuda_base "$1"
  "$ROOT/tests/cuda-base/thin.sh" "$rootfs" "$ref" "$2" "$3" >"$2.oracle.py"
}

# CPython's verdict on DIR's files over ROOTFS: the program of
# DIR.oracle.py in a chroot (overlayfs in a private mount namespace), under
# QEMU when given.
cuda_oracle() { # ROOTFS DIR [QEMU]
  local up=$PWD/$2.up mnt=$PWD/$2.mnt rc=0
  rm -rf "$up" && mkdir -p "$up/usr/lib/python3/dist-packages" "$up/qemu" "$mnt"
  cp -a "$2/files/." "$up/usr/lib/python3/dist-packages/"
  [ -z "${3:-}" ] || cp "$3" "$up/qemu/"
  unshare -m sh -c 'mount -t overlay overlay -o "lowerdir=$1:$2" "$3" && mount -t proc proc "$3/proc" &&
    exec chroot "$3" $5 /usr/bin/python3 -c "$4"' \
    sh "$up" "$1" "$mnt" "$(cat "$2.oracle.py")" "${3:+/qemu/$(basename "${3:-x}")}" >"$2.oracle.out" 2>&1 || rc=$?
  rm -rf "$up"
  rmdir "$mnt"
  return $rc
}

# amd64 over the base as it comes: its setuid files (all in the first
# layer: the bootstrapped system) are counted, refused only with
# --strict-base (issue 45); every gate of the six files passes, as CPython does
# (it imports them), and it is tagged.  The libcuda that the package pulls
# in (Debian's libcuda1 550) is no fault: the image's libcuda.so.1 is a link
# in the folder where the NVIDIA runtime binds the driver's, so the
# runtime's ldconfig points it at the driver's, older or newer (the image's
# own ldconfig and CPython show it: tests/cuda-base/runtime-libcuda.sh).
tall_cuda_base_amd64_thin_definition_verdicts() {
  cuda_thin amd64 d 9.0
  # The base's entries are judged before any gate: with --strict-base, exit 4,
  # setuid files of layer 1.
  expect_fail 4 'has [0-9]+ unsafe entries .*--strict-base' "$IB" --smoke=off --strict-base d
  layer1=$(jq -r '.manifests[0].digest' "$oci/index.json")
  layer1=$(jq -r '.layers[0].digest' "$oci/blobs/sha256/${layer1#sha256:}")
  [ "$(grep -c "base: layer $layer1: entry .*setuid or setgid file" stderr.txt)" -gt 5 ]
  refute grep -q 'base: layer .*' <(grep -v "$layer1" stderr.txt)
  # With no flag: every gate passes, and it is tagged.
  "$IB" --smoke=off --json -t cuda-thin:1 d >r.json 2>r.err
  for g in symbols native kernels toolchains driver; do jq -e --arg g $g '.gates[] | select(.name == $g) | .status == "pass"' r.json; done
  skopeo inspect "oci:$IMGBUILD_STORE:cuda-thin:1" >/dev/null
  # One warning about it: libcuda.so, which CUDA does not load, leads to the
  # image's own 550 (a program that opens it by that name gets error 803).
  [ "$(grep -c 'libcuda' r.err)" = 1 ]
  grep -q 'driver: warning: /usr/lib/x86_64-linux-gnu/libcuda.so: leads to the image.s own libcuda, not to /usr/lib/x86_64-linux-gnu/libcuda.so.1' r.err
  [ -L "$rootfs/usr/lib/x86_64-linux-gnu/libcuda.so.1" ] # -> /etc/alternatives/nvidia--libcuda.so.1-x86_64-linux-gnu
  [ -f "$rootfs/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.550.163.01" ]
  # The driver gate's pass is the runtime's: on the target's 580.95.05 and
  # on a driver older than the image's 550, libcuda.so.1 loads the driver's.
  for v in 580.95.05 545.23.08; do
    [ "$("$ROOT/tests/cuda-base/runtime-libcuda.sh" "$rootfs" $v)" = "/usr/lib/x86_64-linux-gnu/libcuda.so.$v" ]
  done
  [ "$("$ROOT/tests/cuda-base/runtime-libcuda.sh" "$rootfs" 580.95.05 libcuda.so)" = /usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.550.163.01 ]
  # The symbol gate's pass is CPython's: the port's modules import.
  cuda_oracle "$rootfs" d
  grep -q '^oracle: torch 2.6.0' d.oracle.out
  # And the base itself imports torch (cuDNN 9 copied in, NCCL 2.22.3).
  chroot "$rootfs" python3 -c 'import torch; assert torch.backends.cudnn.version() >= 90000; print(torch.cuda.nccl.version())' >v.out 2>/dev/null
  grep -q '^(2, 22, 3)$' v.out
  keep r.json r.err d.oracle.out v.out
  figure "amd64 thin definition, gpu 9.0: --strict-base exit 4 (layer 1's setuid files); no flag: every gate passes, tagged; Debian's libcuda1 550 replaced by the driver's under the runtime's ldconfig (580.95.05 and 545.23.08); CPython imports the six files ($(head -1 d.oracle.out)); torch's NCCL $(grep '^(' v.out)"
}

# The same definition targeting GB10 (compute 12.1): NCCL has SASS for
# sm_50-sm_90 only and no PTX that is not relocatable, so its required
# collectives cannot run there: the kernel gate fails, naming them.
tall_cuda_base_gb10_fails_on_nccl() {
  cuda_thin amd64 d 12.1
  expect_fail 6 'gate kernels: image.conf:[0-9]+: kernel ncclDevKernel_SendRecv has no SASS that runs on compute capability 12.1' \
    "$IB" --smoke=off d
  grep -q 'kernel ncclDevKernel_AllGather_RING_LL has no SASS that runs on compute capability 12.1' stderr.txt
  # What is there instead: NCCL's loadable SASS first (sm_50-sm_90), then
  # the relocatable entries, and how many it left out.
  grep -q 'kernel ncclDevKernel_SendRecv has no SASS .*: sm_50 SASS in /usr/lib/x86_64-linux-gnu/libnccl.so.2.22.3, sm_60 SASS in .*, sm_90 SASS in /usr/lib/x86_64-linux-gnu/libnccl.so.2.22.3, sm_50 SASS (relocatable, -rdc) in .*, and [0-9]* more entries not listed' stderr.txt
  keep stderr.txt
  figure "the same definition for GB10 (12.1): exit 6, $(grep -c 'has no SASS that runs on compute capability 12.1' stderr.txt) required NCCL kernels named without code for it"
}

# arm64: no cuDNN (nvidia-cudnn's installer has nothing offline), so
# libtorch_cuda.so cannot load, and CPython cannot import torch: the
# native gate must fail naming libcudnn.so.9.
tall_cuda_base_arm64_fails_naming_libcudnn() {
  cuda_thin arm64 d 9.0
  # nvidia-cudnn's own links, libcudnn.so.9 -> libcudnn.so.9.0.0, lead nowhere.
  [ -L "$rootfs/usr/lib/aarch64-linux-gnu/libcudnn.so.9" ]
  [ ! -e "$rootfs/usr/lib/aarch64-linux-gnu/libcudnn.so.9" ]
  rc=0
  "$IB" --smoke=off --json d >r.json 2>r.err || rc=$?
  [ "$rc" = 5 ]
  jq -e '.gates[] | select(.name == "native") | .status == "fail"' r.json
  grep -q 'error: build .*gate native: ' r.err
  grep -q '^imgbuild: native: /usr/lib/aarch64-linux-gnu/libtorch_cuda.so.2.6.0: needs libcudnn.so.9, which is not in the image' r.err
  grep -q 'libtorch_cuda.so.2.6.0: undefined symbol cudnnGetVersion@libcudnn.so.9' r.err
  # The oracle: the image's own CPython, under qemu-user, cannot import torch for it.
  command -v qemu-aarch64-static >/dev/null || skip_test "no qemu-aarch64-static (apt-get install qemu-user-static)"
  refute cuda_oracle "$rootfs" d "$(command -v qemu-aarch64-static)"
  grep -q 'libcudnn.so.9: cannot open shared object file' d.oracle.out
  keep r.err d.oracle.out
  figure "arm64 thin definition: exit 5, native gate names libcudnn.so.9 for libtorch_cuda.so; CPython under qemu-aarch64: $(grep -o 'libcudnn.so.9: cannot open shared object file' d.oracle.out | head -1)"
}

# The native gate on objects named as a user names them: through /lib (a
# link to usr/lib here) and through torch/lib's links (targets with ".."):
# every one checked (0 before), each verdict equal to ldd -r's.
tall_cuda_base_native_through_links_equals_ldd_r() {
  cuda_base amd64
  "$IV" --native --json "$ref" '/lib/x86_64-linux-gnu/libnccl.so*' '/lib/x86_64-linux-gnu/libcudnn*.so*' \
    '/lib/x86_64-linux-gnu/libtorch_cuda.so*' '/usr/lib/python3/dist-packages/torch/lib/*.so' >n.json 2>n.err || true
  [ "$(jq '.objects | length' n.json)" -ge 15 ]
  jq -e '[.objects[].path] | map(select(test("libtorch_cuda.so"))) | length == 1' n.json
  python3 "$ROOT/tests/native/compare_ldd.py" "$rootfs" n.json | tee cmp.out
  grep -Eq '^native-ldd: ([0-9]+) objects, \1 equal, 0 differ' cmp.out
  keep cmp.out
  figure "$(grep '^native-ldd:' cmp.out) (CUDA base objects named through /lib and torch/lib links)"
}

# The SBOM of an image over the base equals dpkg-query -W in a chroot of it.
tall_cuda_base_sbom_equals_dpkg_query() {
  cuda_thin amd64 d 9.0
  # Without [kernels] and [target] (their verdicts are tested above), it tags.
  sed -i '/^\[kernels\]/,$d' d/image.conf
  "$IB" -q --smoke=off d >out.txt
  /usr/bin/python3 "$ROOT/tests/attest/check.py" "$IMGBUILD_STORE" "$(cut -d' ' -f2 out.txt)" >a.json
  chroot "$rootfs" dpkg-query -W -f '${db:Status-Status} ${Package} ${Version}\n' |
    awk '$1 != "not-installed" && $1 != "config-files" { print $2 " " $3 }' | sort >dpkg.txt
  jq -r '.artifacts[0].spdx.deb[] | "\(.[0]) \(.[1])"' a.json | sort >sbom.txt
  diff dpkg.txt sbom.txt
  [ "$(wc -l <dpkg.txt)" -gt 250 ]
  grep -q '^python3-torch-cuda 2.6.0' sbom.txt
  keep dpkg.txt
  figure "SBOM = dpkg-query -W on $(wc -l <dpkg.txt) packages of the CUDA base"
}

# The whole unchanged torch 2.6 tree through the symbol gate (issue 46,
# item 2): 0 errors.  Its imports of torch's internal fb modules sit under
# `if config.is_fbcode():` (or its else), which only the run decides: each
# is a warning naming its condition, and the image's CPython checks every
# such statement: the importer imports, the condition is false in it, and
# the module it names is absent.  Stated absent (allow-missing), the same
# imports warn naming the line.
tall_cuda_base_torch_tree_no_errors_each_warning_checked_by_cpython() {
  cuda_base amd64
  local site=usr/lib/python3/dist-packages
  mkdir -p t/tree
  (cd "$rootfs/$site" && find torch -name '*.py' -type f) | while read -r f; do
    mkdir -p "t/tree/$(dirname "$f")"
    cp -p "$rootfs/$site/$f" "t/tree/$f"
  done
  printf '[image]\nname = torch-tree:1\nfrom = %s\n[copy]\ntree tree/torch /%s/torch\n[symbols]\npython-path /%s\ncheck-package torch\n' \
    "$ref" "$site" "$site" >t/image.conf
  "$IB" --smoke=off --report json:r1.json -t torch-tree:1 t 2>e1.err >/dev/null
  grep -q 'gate symbols *pass' e1.err
  # Issue 46's 64 MiB, the base listed and 31 MB of Python handed to the
  # image's CPython (its input was one copy of every source: 88 MiB before).
  [ "$(jq .resources.peak_rss_kib r1.json)" -le 65536 ]
  grep 'which a static reading cannot decide' e1.err >warnings.txt
  [ "$(wc -l <warnings.txt)" -ge 5 ]
  refute grep -v -e 'module torch._inductor.fb[. ]' -e 'from torch._inductor.fx_passes import fb: fb is not defined' warnings.txt
  # CPython's word on each: the importer imports, the condition is false
  # there, the module is absent.
  chroot "$rootfs" python3 -c '
import importlib, importlib.util, re, sys
n = 0
for line in sys.stdin:
    m = re.search(r"(torch/\S+)\.py:\d+: (?:from|import) (\S+?):? .*under the condition `(.*)` at line \d+, which", line)
    assert m, line
    path, module, cond = m.groups()
    mod = importlib.import_module(path.replace("/", "."))
    assert eval(cond, vars(mod)) is False, (path, cond)
    missing = re.search(r"module (\S+) is not in the image", line)
    name = missing.group(1) if missing else module + "." + re.search(r"import (\w+): \w+ is not defined", line).group(1)
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:  # its parent package is absent too
        spec = None
    assert spec is None, name
    n += 1
print(n, "warnings checked by CPython")' <warnings.txt | tail -1 >cpython.txt
  [ "$(cut -d' ' -f1 cpython.txt)" = "$(wc -l <warnings.txt)" ]
  echo 'allow-missing torch._inductor.fb torch._inductor.fx_passes.fb' >>t/image.conf
  "$IB" --smoke=off -t torch-tree:2 t 2>e2.err >/dev/null
  grep -q 'gate symbols *pass' e2.err
  [ "$(grep -c 'allow-missing torch._inductor.f.* in the definition: a warning' e2.err)" = "$(wc -l <warnings.txt)" ]
  n=$(sed -n 's/.*symbols: \([0-9]*\) overlay files.*/\1/p' e1.err)
  [ "$n" -gt 1900 ]
  local never
  never=$(sed -n 's/.*, \([0-9]*\) never run by this Python.*/\1/p' e1.err)
  keep warnings.txt cpython.txt
  figure "unchanged torch 2.6: $n overlay files, 0 errors; $(wc -l <warnings.txt) warnings under if config.is_fbcode() (or its else), each checked by CPython ($(cat cpython.txt)); $never imports never run by Python 3.13"
}

# The GPU-code listings over the whole CUDA base within issue 18's 64 MiB:
# --jit-budget with a store of its own (every library inspected in one read
# of the layers), again from the records, and --kernels --json, by GNU
# time's peak (the program and all it ran).  A record's kernel names kept
# once (kernels/cudabin.h) took --jit-budget from 76 MiB to under 40, and
# the JSON written a file at a time; the JIT budget's verdict is the same
# bytes cold and warm.
tall_cuda_base_kernel_listings_within_64_mib() {
  cuda_base amd64
  local s=$PWD/ks
  rm -rf "$s"
  IMGBUILD_STORE=$s /usr/bin/time -f '%M' -o cold.kib "$IV" --jit-budget --json --gpu 12.1 "$ref" >cold.json
  IMGBUILD_STORE=$s /usr/bin/time -f '%M' -o warm.kib "$IV" --jit-budget --json --gpu 12.1 "$ref" >warm.json
  IMGBUILD_STORE=$s /usr/bin/time -f '%M' -o kern.kib "$IV" --kernels --json "$ref" >kern.json
  cmp cold.json warm.json
  # torch 2.6 for GB10: its kernels JIT from PTX, NCCL's have nothing for it.
  jq -e '.files[] | select(.path | test("libtorch_cuda.so")) | .jit > 10000' cold.json
  jq -e '.files[] | select(.path | test("libnccl.so")) | .neither > 0' cold.json
  jq -e '[.files[].entries | length] | add > 2730' kern.json
  local c w k
  c=$(tail -1 cold.kib) w=$(tail -1 warm.kib) k=$(tail -1 kern.kib)
  rm -rf "$s"
  [ "$c" -le 65536 ]
  [ "$w" -le 65536 ]
  [ "$k" -le 65536 ]
  figure "CUDA base, peak RSS: --jit-budget --gpu 12.1 cold $((c / 1024)) MiB, warm $((w / 1024)) MiB; --kernels --json $((k / 1024)) MiB (bound 64)"
}
