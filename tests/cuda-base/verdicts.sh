#!/usr/bin/env bash
# Issue 46's verdicts on the real CUDA base, as a new user meets them, with
# each command's exact output kept, and their oracles run beside them.
#
# Usage: tests/cuda-base/verdicts.sh OUT-DIR
# Writes under OUT-DIR, per step NAME: NAME.cmd (the command line),
# NAME.err (stderr), NAME.json or NAME.out (stdout), NAME.rc (exit code),
# NAME.s (wall seconds); oracle-*.txt (CPython in a chroot of the base
# with the overlay, ldd -r, cuobjdump, dpkg-query); facts.txt (the bases).
# Needs root (chroot, overlayfs), build/ (make all).  Nothing is asserted:
# tests/integration/cuda_base.sh asserts what holds.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: verdicts.sh OUT-DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
IB=$ROOT/build/imgbuild
IV=$ROOT/build/imgverify
work=$(mktemp -d /var/tmp/ibcuda.XXXXXX)
export IMGBUILD_STORE=$work/store
cd "$work"

step() { # NAME CMD...: run it, keep what it says
  local name=$1 t0 t1 rc=0
  shift
  printf '%q ' "$@" | sed "s|$work|\$WORK|g; s| $||" >"$out/$name.cmd"
  echo >>"$out/$name.cmd"
  t0=$(date +%s.%N)
  "$@" >"$out/$name.stdout" 2>"$out/$name.err" || rc=$?
  t1=$(date +%s.%N)
  echo "$rc" >"$out/$name.rc"
  echo "$t1 - $t0" | bc >"$out/$name.s"
  if jq -e . "$out/$name.stdout" >/dev/null 2>&1; then mv "$out/$name.stdout" "$out/$name.json"; else mv "$out/$name.stdout" "$out/$name.out"; fi
  echo "$name: exit $rc ($(cat "$out/$name.s") s)" >&2
}

base() { # ARCH: sets rootfs, oci, ref
  eval "$("$ROOT/scripts/real-base.sh" --cuda --arch "$1")"
}

# CMD in a chroot of ROOTFS with DIR/files over its dist-packages
# (overlayfs in a private mount namespace: the base stays as it is), under
# QEMU (a qemu-user binary, "" for none) for a foreign one.
in_image() { # ROOTFS DIR QEMU CMD...
  local rootfs=$1 dir=$2 qemu=$3 mnt=$work/mnt.$$ up=$work/up.$$ rc=0
  shift 3
  rm -rf "$up" && mkdir -p "$up/usr/lib/python3/dist-packages" "$up/qemu" "$mnt"
  [ -z "$dir" ] || cp -a "$dir/files/." "$up/usr/lib/python3/dist-packages/"
  [ -z "$qemu" ] || cp "$qemu" "$up/qemu/qemu"
  unshare -m sh -c 'mount -t overlay overlay -o "lowerdir=$1:$2" "$3" && mount -t proc proc "$3/proc" &&
    shift 3 && exec chroot "$0" "$@"' "$mnt" "$up" "$rootfs" "$mnt" ${qemu:+/qemu/qemu} "$@" || rc=$?
  rm -rf "$up"
  rmdir "$mnt"
  return $rc
}

# ---- amd64 -------------------------------------------------------------
base amd64
A_ROOTFS=$rootfs A_REF=$ref A_OCI=$oci
prog=$("$ROOT/tests/cuda-base/thin.sh" "$A_ROOTFS" "$A_REF" thin-amd64-90 9.0)
"$ROOT/tests/cuda-base/thin.sh" "$A_ROOTFS" "$A_REF" thin-amd64-121 12.1 >/dev/null
cp thin-amd64-90/image.conf "$out/image.conf.amd64-gpu9.0"
step amd64-gpu9.0-default "$IB" --smoke=off --json -t cuda-thin:90 thin-amd64-90
# The driver gate's oracle: which libcuda the image loads once the NVIDIA
# runtime has bound the driver's, on the target's driver and on one older
# than the image's 550; and what `libcuda.so` (the warning) loads.
printf '%s\n' "580.95.05 libcuda.so.1" "545.23.08 libcuda.so.1" "580.95.05 libcuda.so" | while read -r drv name; do
  echo "driver $drv, $name: $("$ROOT/tests/cuda-base/runtime-libcuda.sh" "$A_ROOTFS" "$drv" "$name" 2>&1)"
done >"$out/oracle-runtime-libcuda-amd64.txt"
step amd64-gpu9.0-unsafe "$IB" --smoke=off --json thin-amd64-90
step amd64-gpu12.1-unsafe "$IB" --smoke=off --json -t cuda-thin:121 thin-amd64-121
# Declared, the image's libcuda is not judged (nor is its warning given).
cp -a thin-amd64-90 thin-amd64-libcuda
printf 'libcuda = /usr/lib/x86_64-linux-gnu/libcuda.so\nlibcuda = /usr/lib/x86_64-linux-gnu/libcuda.so.1\n' >>thin-amd64-libcuda/image.conf
step amd64-gpu9.0-libcuda-declared "$IB" --smoke=off --json -t cuda-thin:libcuda thin-amd64-libcuda
{
  echo "# chroot ROOTFS python3 -c (the port's imports), the overlay over the base"
  in_image "$A_ROOTFS" thin-amd64-90 "" /usr/bin/python3 -c "$prog"; echo "rc=$?"
  echo "# the base alone: import torch"
  chroot "$A_ROOTFS" python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.nccl.version())'; echo "rc=$?"
} >"$out/oracle-python-amd64.txt" 2>&1

# The native gate on the objects as a user names them: through /lib (a
# link to usr/lib) and through torch/lib's links (targets with "..").
step amd64-native-user-paths "$IV" --native --json "$A_REF" '/lib/x86_64-linux-gnu/libtorch*.so*' \
  '/lib/x86_64-linux-gnu/libnccl.so*' '/lib/x86_64-linux-gnu/libcudnn*.so*' '/usr/lib/python3/dist-packages/torch/lib/*.so*' \
  '/usr/lib/python3/dist-packages/torch/*.so'
python3 "$ROOT/tests/native/compare_ldd.py" "$A_ROOTFS" "$out/amd64-native-user-paths.json" >"$out/oracle-ldd-amd64.txt" 2>&1
step amd64-native-ldd "$IV" --native --ldd --json "$A_REF" '/usr/lib/x86_64-linux-gnu/libtorch*.so*' \
  '/usr/lib/x86_64-linux-gnu/libnccl.so*' '/usr/lib/x86_64-linux-gnu/libcudnn*.so*' '/usr/lib/python3/dist-packages/torch/*.so'
python3 "$ROOT/tests/native/compare_ldd.py" "$A_ROOTFS" "$out/amd64-native-ldd.json" >"$out/oracle-ldd-amd64-as-ldd.txt" 2>&1

# The kernels: ours against cuobjdump's listing (CUDA 12.4's, the one that
# built torch, from Debian's nvidia-cuda-toolkit: /var/cache/imgbuild/cuda124).
step amd64-kernels "$IV" --kernels --json "$A_REF" '/usr/lib/x86_64-linux-gnu/libnccl.so.2*' '/usr/lib/x86_64-linux-gnu/libtorch_cuda.so*'
step amd64-jit-budget-gb10 "$IV" --jit-budget --json --gpu 12.1 --driver 580.95.05 "$A_REF" '/usr/lib/x86_64-linux-gnu/libnccl.so.2*' '/usr/lib/x86_64-linux-gnu/libtorch_cuda.so*'
step amd64-jit-budget-h200 "$IV" --jit-budget --json --gpu 9.0 --driver 580.95.05 "$A_REF" '/usr/lib/x86_64-linux-gnu/libnccl.so.2*' '/usr/lib/x86_64-linux-gnu/libtorch_cuda.so*'
cuobjdump=${CUOBJDUMP:-/var/cache/imgbuild/cuda124/amd64/usr/bin/cuobjdump}
if [ -x "$cuobjdump" ]; then
  for lib in libnccl.so.2 libtorch_cuda.so.2.6; do
    f=$(readlink -f "$A_ROOTFS/usr/lib/x86_64-linux-gnu/$lib")
    { "$cuobjdump" -all --list-elf "$f"; "$cuobjdump" -all --list-ptx "$f"; } >"$out/oracle-cuobjdump-all-$lib.txt" 2>&1
  done
fi

# The SBOM against dpkg-query in the image itself.
# (the definition that tags: gpu 9.0, the image's libcuda declared)
step amd64-build-for-sbom "$IB" -q --smoke=off -t cuda-thin:sbom thin-amd64-libcuda
chroot "$A_ROOTFS" dpkg-query -W -f '${db:Status-Status} ${Package} ${Version}\n' |
  awk '$1 != "not-installed" && $1 != "config-files" { print $2 " " $3 }' | sort >"$out/oracle-dpkg-query-amd64.txt"
/usr/bin/python3 "$ROOT/tests/attest/check.py" "$IMGBUILD_STORE" "$(cut -d' ' -f2 "$out/amd64-build-for-sbom.out")" \
  >"$out/amd64-attest.json" 2>"$out/amd64-attest.err" || true
jq -r '.artifacts[0].spdx.deb[] | "\(.[0]) \(.[1])"' "$out/amd64-attest.json" 2>/dev/null | sort >"$out/sbom-deb-amd64.txt"
diff "$out/oracle-dpkg-query-amd64.txt" "$out/sbom-deb-amd64.txt" >"$out/sbom-vs-dpkg-query-amd64.diff"; echo "diff rc=$?" >>"$out/sbom-vs-dpkg-query-amd64.diff"

# The whole unchanged torch 2.6 tree as the overlay (1,932 files): the
# symbol gate (0 errors: its imports of torch's internal fb modules, under
# `if config.is_fbcode():`, are warnings naming that condition), then with
# the definition stating those modules absent; CPython imports the five
# modules that import them (config.is_fbcode() is false here) and cannot
# import torch._inductor.fb.
mkdir -p tree/tree
(cd "$A_ROOTFS/usr/lib/python3/dist-packages" && find torch -name '*.py' -type f) | while read -r f; do
  mkdir -p "tree/tree/$(dirname "$f")"
  cp -p "$A_ROOTFS/usr/lib/python3/dist-packages/$f" "tree/tree/$f"
done
printf '[image]\nname = torch-tree:1\nfrom = %s\n[copy]\ntree tree/torch /usr/lib/python3/dist-packages/torch\n[symbols]\npython-path /usr/lib/python3/dist-packages\ncheck-package torch\n' \
  "$A_REF" >tree/image.conf
step amd64-torch-tree "$IB" --smoke=off --json tree
echo 'allow-missing torch._inductor.fb torch._inductor.fx_passes.fb' >>tree/image.conf
cp tree/image.conf "$out/image.conf.amd64-torch-tree-allow-missing"
step amd64-torch-tree-allow-missing "$IB" --smoke=off --json -t torch-tree:2 tree
{
  echo "# the five importers of torch._inductor.fb"
  chroot "$A_ROOTFS" python3 -c 'import torch._inductor.codecache, torch._inductor.compile_fx, torch._inductor.cpp_builder, torch._inductor.graph, torch._inductor.fx_passes.pre_grad
from torch._inductor import config; print("imported; config.is_fbcode() =", config.is_fbcode())'; echo "rc=$?"
  echo "# the module itself"
  chroot "$A_ROOTFS" python3 -c 'import torch._inductor.fb'; echo "rc=$?"
} >"$out/oracle-python-torch-tree.txt" 2>&1

# ---- arm64 -------------------------------------------------------------
base arm64
R_ROOTFS=$rootfs R_REF=$ref
"$ROOT/tests/cuda-base/thin.sh" "$R_ROOTFS" "$R_REF" thin-arm64-90 9.0 >/dev/null
step arm64-gpu9.0-default "$IB" --smoke=off --json thin-arm64-90
step arm64-gpu9.0-unsafe "$IB" --smoke=off --json thin-arm64-90
qemu=$(command -v qemu-aarch64-static || true)
if [ -n "$qemu" ]; then
  { in_image "$R_ROOTFS" thin-arm64-90 "$qemu" /usr/bin/python3 -c "$prog"; echo "rc=$?"; } >"$out/oracle-python-arm64.txt" 2>&1
  # The image's own loader lists what libtorch_cuda.so needs.
  { in_image "$R_ROOTFS" "" "$qemu" /usr/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1 --list \
      /usr/lib/aarch64-linux-gnu/libtorch_cuda.so.2.6.0; echo "rc=$?"; } >"$out/oracle-ldso-list-arm64.txt" 2>&1
fi

# PATH as the kernel resolves it inside ROOTFS (an absolute link stays inside).
in_root_path() { # ROOTFS PATH
  python3 - "$1" "$2" <<'PY'
import os, sys
root, parts, out, hops = sys.argv[1], [p for p in sys.argv[2].split("/") if p], [], 0
while parts:
    p = parts.pop(0)
    if p in (".", ".."):
        if p == ".." and out:
            out.pop()
        continue
    c = root + "/" + "/".join(out + [p])
    if os.path.islink(c) and hops < 40:
        hops += 1
        t = os.readlink(c)
        out = [] if t.startswith("/") else out
        parts = [x for x in t.split("/") if x] + parts
        continue
    out.append(p)
print("/" + "/".join(out))
PY
}

# ---- the bases' facts ----------------------------------------------------
{
  for a in amd64 arm64; do
    base $a
    echo "== $a: $ref"
    m=$(jq -r '.manifests[0].digest' "$oci/index.json")
    jq -r '.layers[] | "layer \(.digest) \(.size) bytes"' "$oci/blobs/sha256/${m#sha256:}"
    echo "rootfs: $(du -sb "$rootfs" | cut -f1) bytes"
    ls "$rootfs/var/lib/dpkg/info/"*.list 2>/dev/null | wc -l | sed 's/^/dpkg info lists: /'
    [ $a = amd64 ] && chroot "$rootfs" dpkg-query -W | wc -l | sed 's/^/dpkg-query -W | wc -l: /'
    [ $a = amd64 ] && chroot "$rootfs" dpkg-query -W python3-torch-cuda libtorch-cuda-2.6 libnccl2 libcublas12 libcudart12 nvidia-cudnn python3.13 libcuda1 2>&1
    for l in libtorch_cuda.so.2.6 libnccl.so.2 libcudnn.so.9 libcuda.so.1; do
      f=$(ls "$rootfs"/usr/lib/*-linux-gnu/$l 2>/dev/null | head -1)
      # (a link is followed inside the image: /etc/alternatives/... is the image's)
      r=$(in_root_path "$rootfs" "${f#$rootfs}")
      if [ -n "$f" ] && [ -e "$rootfs$r" ] && [ ! -L "$rootfs$r" ]; then echo "$l: $(stat -c %s "$rootfs$r") bytes ($r)"
      elif [ -n "$f" ]; then echo "$l: a link that leads nowhere in the image ($(readlink "$f"))"; else echo "$l: absent"; fi
    done
  done
} >"$out/facts.txt" 2>&1
rm -rf "$work"
