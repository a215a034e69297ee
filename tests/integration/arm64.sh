# aarch64 (issue 19): DGX Spark's platform.  The images of linux/arm64 that
# imgbuild makes on this x86-64 machine (the stand-in base from Debian's arm64
# packages, the DCP2 image over it), the platform rules (an image keeps its
# base's platform; an index resolves by --platform, else its one platform,
# else the host's), and the aarch64 tools of build-arm64/ run under
# qemu-aarch64, which must build the same digests as the x86-64 tools.
# `make test-arm64` runs this suite with $IB the aarch64 tools; `make test`
# with the x86-64 ones (the tests that need build-arm64/ then skip).

IBA=$ROOT/build-arm64/qemu/imgbuild
# The x86-64 tools: those of this run (build-asan/ under SANITIZE=1), or
# with make test-arm64, where $IB is the aarch64 one, IB_NATIVE_BUILD.
IBX=$ROOT/${IB_NATIVE_BUILD:-${IB_BUILD:-build}}/imgbuild
SIA=$ROOT/images/dsv41-flash-b12x/native/arm64

# The arm64 stand-in's inputs (make stand-in-arm64) and qemu-user.
arm64_stand_in_ready() {
  [ -f "$SIA/busybox" ] && [ -f "$SIA/libnccl.so.2" ] && [ -f /usr/lib/aarch64-linux-gnu/libstdc++.so.6 ] ||
    skip_test "no arm64 stand-in inputs (make test-arm64 makes them)"
}
arm64_tools_ready() {
  arm64_stand_in_ready
  [ -x "$IBA" ] && command -v qemu-aarch64 >/dev/null || skip_test "no aarch64 tools in build-arm64/ (make test-arm64)"
}

# The arm64 stand-in base and the DCP2 image over it, built once per run by
# $IB into a seed store; each test gets a copy made of hard links.
ARM64_SEED=$T_TOP/seed-arm64
arm64_images() {
  if [ ! -f "$ARM64_SEED/index.json" ]; then
    IMGBUILD_STORE=$ARM64_SEED "$IB" -q --platform linux/arm64 dsv41-flash-b12x >"$T_TOP/arm64-base.out"
    IMGBUILD_STORE=$ARM64_SEED "$IB" dsv41-flash-dcp2 >"$T_TOP/arm64-dcp2.out" 2>"$T_TOP/arm64-dcp2.err"
  fi
  mkdir -p "$IMGBUILD_STORE"
  cp -al "$ARM64_SEED/." "$IMGBUILD_STORE/"
  cp "$T_TOP/arm64-dcp2.out" "$T_TOP/arm64-dcp2.err" .
}

# The e_machine of every ELF file under DIR, one "MACHINE PATH" a line.
elf_machines() {
  find "$1" -type f -print0 | while IFS= read -r -d '' f; do
    [ "$(head -c4 "$f" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] || continue
    echo "$(od -An -tu2 -j18 -N2 "$f" | tr -d ' ') $f"
  done
}

t_arm64_dcp2_image_is_arm64_and_passes_its_gates() {
  arm64_stand_in_ready
  arm64_images
  # Every gate that needs no GPU ran and passed; the smoke test says why
  # not; the definition has no [native] (imgverify --native runs it below).
  local g
  for g in definition symbols kernels ptx jit-budget; do
    grep -q "gate $g *pass" arm64-dcp2.err
  done
  # Nothing for these to judge in the stand-in (no CUDA toolchain, runtime
  # or CUDA variables): a skip with its reason, never a pass (issue 45).
  grep -q 'gate toolchains *skip .*no CUDA toolchain in the image' arm64-dcp2.err
  grep -q 'gate driver *skip .*nothing that asks anything of the driver' arm64-dcp2.err
  grep -q 'gate smoke *skip .*this machine has no GPU' arm64-dcp2.err
  # The symbol gate read the aarch64 extension's versioned symbols, the
  # kernel gate the aarch64 FlashInfer and NCCL objects.
  grep -Eq 'symbols: .* 1 shared objects' arm64-dcp2.err
  grep -Eq 'kernels: 9 files, 14 kernel checks' arm64-dcp2.err
  # The link gate on the image's three aarch64 objects: FlashInfer loads the
  # arm64 libstdc++ and glibc of the base, nothing fails.
  "$IV" --native --json dsv41-flash-dcp2:local '/usr/local/lib/python3.12/dist-packages/**.so*' >native.json
  jq -e '.objects | length == 3 and all(.problems == [])' native.json
  jq -e '.objects[] | select(.path | endswith("libflashinfer_dcp.so")) | .loaded | map(.path)
    | index("/usr/lib/aarch64-linux-gnu/libstdc++.so.6") and index("/lib/aarch64-linux-gnu/libc.so.6")' native.json
  local ref=oci:$IMGBUILD_STORE:dsv41-flash-dcp2:local
  skopeo inspect --config "$ref" | jq -e '.architecture == "arm64" and .os == "linux"'
  skopeo inspect --override-arch arm64 "$ref" | jq -e '.Architecture == "arm64" and .Os == "linux"'
  [ "dsv41-flash-dcp2:local $(skopeo inspect "$ref" | jq -r .Digest)" = "$(cat arm64-dcp2.out)" ]
  umoci unpack --image "$IMGBUILD_STORE:dsv41-flash-dcp2:local" bundle >/dev/null
  [ "$(qemu-aarch64 bundle/rootfs/bin/busybox echo dgx-spark)" = dgx-spark ]
  qemu-aarch64 bundle/rootfs/bin/busybox uname -m | grep -qx aarch64
  # Every ELF object in the image is aarch64 (183): busybox, glibc, the
  # extension, FlashInfer, NCCL; none is x86-64 (62).
  elf_machines bundle/rootfs >machines
  cat machines
  [ "$(awk '$1 == 183' machines | wc -l)" -ge 12 ]
  [ -z "$(awk '$1 != 183' machines)" ]
  grep -q ' bundle/rootfs/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2$' machines
  # imgverify runs the recorded gates again on the arm64 image.
  "$IV" --json dsv41-flash-dcp2:local >verify.json
  jq -e '.gates[] | select(.name == "kernels" or .name == "symbols") | .status == "pass"' verify.json
  validate verify.json
}

t_arm64_dcp2_layers_add_only_aarch64_elf_objects() {
  arm64_stand_in_ready
  arm64_images
  # The two layers the DCP2 build adds (overlay, prebake): every ELF in them
  # is aarch64 or GPU code (EM_CUDA 190: cubins are device code).
  local ref=oci:$IMGBUILD_STORE:dsv41-flash-dcp2:local n=0 d
  for d in $(skopeo inspect --raw "$ref" | jq -r '.layers[1:][] | .digest | sub("sha256:"; "")'); do
    mkdir -p "l$n"
    tar -xzf "$IMGBUILD_STORE/blobs/sha256/$d" -C "l$n"
    n=$((n + 1))
  done
  [ "$n" = 2 ]
  elf_machines l0 >added
  elf_machines l1 >>added
  cat added
  [ -z "$(awk '$1 != 183 && $1 != 190' added)" ]
  # The prebake layer holds the fatbins the kernel gate read.
  [ -s l1/usr/local/lib/python3.12/dist-packages/vllm/prebaked/dcp2/dcp2_kernels.fatbin ]
}

t_arm64_tools_build_the_same_digests_as_x86_64() {
  arm64_tools_ready
  file -L "$ROOT/build-arm64/imgbuild" | grep -q 'ARM aarch64'
  file -L "$IBX" | grep -q 'x86-64'
  local t
  for t in "$IBX" "$IBA"; do
    IMGBUILD_STORE=$PWD/s-$(basename "$(dirname "$t")") "$t" -q --platform linux/arm64 dsv41-flash-b12x >>base.out
    IMGBUILD_STORE=$PWD/s-$(basename "$(dirname "$t")") "$t" -q dsv41-flash-dcp2 >>dcp2.out
  done
  cat base.out dcp2.out
  [ "$(wc -l <base.out)" = 2 ]
  [ "$(sort -u base.out | wc -l)" = 1 ]
  [ "$(wc -l <dcp2.out)" = 2 ]
  [ "$(sort -u dcp2.out | wc -l)" = 1 ]
  grep -q '^dsv41-flash-dcp2:local sha256:[0-9a-f]\{64\}$' dcp2.out
}

# A scratch image with one file, of PLATFORM.
tiny_image() { # DIR NAME:TAG PLATFORM
  mkdir -p "$1"
  echo "$3" >"$1/what"
  printf '[image]\nname = %s\nfrom = scratch\nplatform = %s\n[copy]\nfile what /what\n[new]\n/\n' "$2" "$3" >"$1/image.conf"
  "$IB" -q "$1" >/dev/null
}

# An index NAME in the layout DIR over the images REF... of the store.
make_index() { # DIR NAME REF...
  local dir=$1 name=$2 r m list='[]'
  shift 2
  for r in "$@"; do
    skopeo copy -q "oci:$IMGBUILD_STORE:$r" "oci:$dir:$r"
    m=$(skopeo inspect --raw "oci:$dir:$r")
    list=$(jq -c --argjson l "$list" --arg d "sha256:$(printf '%s' "$m" | sha256sum | cut -d' ' -f1)" \
      --argjson s "$(printf '%s' "$m" | wc -c)" --argjson p "$(skopeo inspect --config "oci:$dir:$r" |
        jq -c '{os, architecture} + (if .variant then {variant} else {} end)')" \
      -n '$l + [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $d, size: $s, platform: $p}]')
  done
  jq -cn --argjson m "$list" '{schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json", manifests: $m}' \
    | tr -d '\n' >index.blob
  local d
  d=$(sha256sum index.blob | cut -d' ' -f1)
  cp index.blob "$dir/blobs/sha256/$d"
  jq --arg d "sha256:$d" --argjson s "$(wc -c <index.blob)" --arg n "$name" \
    '.manifests += [{mediaType: "application/vnd.oci.image.index.v1+json", digest: $d, size: $s,
       annotations: {"org.opencontainers.image.ref.name": $n}}]' "$dir/index.json" >"$dir/index.new"
  mv "$dir/index.new" "$dir/index.json"
}

arch_of() { # NAME:TAG -> os/architecture[/variant] of its config
  skopeo inspect --config "oci:$IMGBUILD_STORE:$1" | jq -r '[.os, .architecture, (.variant // empty)] | join("/")'
}

t_arm64_platform_rules_of_bases_and_indexes() {
  tiny_image amd tiny:amd linux/amd64
  tiny_image arm tiny:arm linux/arm64/v8
  [ "$(arch_of tiny:arm)" = linux/arm64/v8 ]
  # An image keeps its base's platform, variant included.
  mkdir over
  echo overlay >over/extra
  printf '[image]\nname = over:1\nfrom = tiny:arm\n[copy]\nfile extra /extra\n[new]\n/extra\n' >over/image.conf
  "$IB" -q over >/dev/null
  [ "$(arch_of over:1)" = linux/arm64/v8 ]
  # --platform does not relabel a single image of another platform.
  expect_fail 9 'tiny:arm.: it is linux/arm64/v8, not the platform linux/amd64 asked for' "$IB" --platform linux/amd64 over
  refute skopeo inspect "oci:$IMGBUILD_STORE:over:2" >/dev/null 2>&1
  # An index: --platform picks; without it, the only platform, else the host's.
  make_index lay both tiny:amd tiny:arm
  make_index lay one tiny:arm
  "$IB" -q --from oci:lay:both --platform linux/arm64 -t from-both:arm over >/dev/null
  [ "$(arch_of from-both:arm)" = linux/arm64/v8 ]
  "$IB" -q --from oci:lay:both --platform linux/amd64 -t from-both:amd over >/dev/null
  [ "$(arch_of from-both:amd)" = linux/amd64 ]
  "$IB" -q --from oci:lay:one -t from-one:1 over >/dev/null
  [ "$(arch_of from-one:1)" = linux/arm64/v8 ]
  expect_fail 9 'image index has no manifest for linux/s390x' "$IB" --from oci:lay:both --platform linux/s390x over
  # The host's: x86-64 for the x86-64 tools; aarch64 for the aarch64 tools
  # (under qemu-user the machine is aarch64).
  "$IBX" -q --from oci:lay:both -t host:x over >/dev/null
  [ "$(arch_of host:x)" = linux/amd64 ]
  sed -i '/^platform/d' amd/image.conf
  "$IBX" -q -t scratch:x amd >/dev/null
  [ "$(arch_of scratch:x)" = linux/amd64 ]
  if [ -x "$IBA" ]; then
    "$IBA" -q --from oci:lay:both -t host:a over >/dev/null
    [ "$(arch_of host:a)" = linux/arm64/v8 ]
    "$IBA" -q -t scratch:a amd >/dev/null
    [ "$(arch_of scratch:a)" = linux/arm64 ]
  fi
}

t_arm64_definition_platform_sections() {
  mkdir d
  echo amd >d/amd.txt
  echo all >d/all.txt
  cat >d/image.conf <<'EOF'
[image]
name = plat:1
from = scratch
[copy]
file all.txt /all
[copy linux/amd64]
file amd.txt /only-amd
[copy linux/arm64]
file missing-arm.txt /only-arm
tree no-such-folder /tree
[new]
/
EOF
  # The lines of another platform are never read: their sources need not exist.
  "$IB" -q --platform linux/amd64 d >/dev/null
  [ "$(arch_of plat:1)" = linux/amd64 ]
  skopeo copy -q "oci:$IMGBUILD_STORE:plat:1" "oci:lay:plat"
  umoci unpack --image lay:plat b >/dev/null
  [ -f b/rootfs/all ]
  [ -f b/rootfs/only-amd ]
  [ ! -e b/rootfs/only-arm ]
  # Those of the platform built are checked as any [copy] line.
  expect_fail 3 'image.conf:10: .*no-such-folder' "$IB" --platform linux/arm64 -t plat:2 d
  sed -i '/no-such-folder/d' d/image.conf
  expect_fail 3 'image.conf:9: source .*missing-arm.txt' "$IB" --platform linux/arm64 -t plat:2 d
  refute skopeo inspect "oci:$IMGBUILD_STORE:plat:2" >/dev/null 2>&1
  # A definition with platform sections names the platforms it is for.
  expect_fail 3 'no \[copy OS/ARCH\] section for linux/riscv64' "$IB" --platform linux/riscv64 -t plat:3 d
  printf '[copy arm64]\nfile all.txt /x\n' >>d/image.conf
  expect_fail 3 'image.conf:13: section \[copy arm64\]: platform .arm64. is not OS/ARCH' "$IB" --platform linux/amd64 d
}

t_arm64_native_and_kernel_checks_read_debian_arm64_objects() {
  arm64_stand_in_ready
  arm64_images
  local lib=/usr/lib/aarch64-linux-gnu py=libpython3.11.so.1.0
  [ -f "$lib/$py" ] || skip_test "no libpython3.11:arm64 (make test-arm64 installs it)"
  file -L "$lib/$py" | grep -q 'ARM aarch64'
  # An extension built against Debian's arm64 libpython3.11 and libstdc++6.
  mkdir -p src
  cat >src/ext.c <<'EOF'
const char *Py_GetVersion (void);
void _ZNSt9exceptionD2Ev (void *);
const char *ext_version (void) { return Py_GetVersion (); }
void ext_drop (void *e) { _ZNSt9exceptionD2Ev (e); }
EOF
  aarch64-linux-gnu-gcc -O1 -fPIC -shared -Wl,--no-as-needed src/ext.c -L"$lib" -Wl,-rpath-link,"$lib" \
    -l:$py -l:libstdc++.so.6 -o src/_ext.so
  mkdir good
  {
    printf '[image]\nname = ext:1\nfrom = dsv41-flash-b12x:local\n[copy]\n'
    echo "file $PWD/src/_ext.so /usr/local/lib/python3.12/dist-packages/extpkg/_ext.so"
    for f in $py libexpat.so.1 libz.so.1; do echo "file $(readlink -f $lib/$f) /usr/lib/aarch64-linux-gnu/$f"; done
    printf '[new]\n/usr/local/lib/python3.12/dist-packages/extpkg/\n/usr/lib/aarch64-linux-gnu/\n'
    printf '[native]\ncheck /usr/lib/aarch64-linux-gnu/*.so.*\n'
    printf '[kernels]\ntarget 12.1\nrequire /usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2 ncclDevKernel_SendRecv\n'
    printf 'require /usr/local/lib/python3.12/dist-packages/flashinfer/libflashinfer_dcp.so trtllm_dcp_alltoall\n'
  } >good/image.conf
  "$IB" --json good >good.json 2>good.err
  jq -e '.gates[] | select(.name == "native" or .name == "kernels") | .status == "pass"' good.json
  [ "$(jq '[.gates[] | select(.name == "native" or .name == "kernels")] | length' good.json)" = 2 ]
  "$IV" --native --json ext:1 /usr/local/lib/python3.12/dist-packages/extpkg/_ext.so >ext.json
  jq -e '.objects[0].loaded | map(.path) | (index("/usr/lib/aarch64-linux-gnu/libpython3.11.so.1.0") and index("/usr/lib/aarch64-linux-gnu/libstdc++.so.6"))' ext.json
  # Without libexpat, libpython3.11 does not link: named with where it looked.
  cp -r good noexpat
  sed -i '/libexpat/d; s/^name = ext:1/name = ext:2/' noexpat/image.conf
  expect_fail 5 'libpython3.11.so.1.0: needs libexpat.so.1, which is not in the image' "$IB" noexpat
  # dcp_lse_combine is only compute_120 PTX in the base: a GB10 would JIT it.
  cp -r good jit
  sed -i 's/^name = ext:1/name = ext:3/; s/trtllm_dcp_alltoall$/dcp_lse_combine/' jit/image.conf
  expect_fail 6 'dcp_lse_combine' "$IB" jit
}
