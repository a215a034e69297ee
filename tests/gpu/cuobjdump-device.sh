#!/usr/bin/env bash
# On the GPU machine (it has the CUDA toolkit): NVIDIA's cuobjdump against
# this commit's imgverify --kernels --json for libtorch_cuda.so and Debian's
# libnccl.so.2 of the real CUDA base (issue 48), through the skeletons that
# tests/gpu/prepare-cuobj-carry.sh made where the files are:
#   tests/gpu/cuobjdump-device.sh CARRY OUT
# OUT gets cuobjdump's version, one comparison per file (the loadable
# entries, every entry with -all, the PTX ISA versions of a sample of
# torch's whole PTX entries) and the carry's commit.  Exit 0 when all are
# equal, 1 when one differs, 2 when cuobjdump is missing.
set -uo pipefail
C=$(readlink -f "$1") OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
export PATH=/usr/local/cuda/bin:$PATH
mkdir -p "$OUT"
command -v cuobjdump >/dev/null || { echo "cuobjdump is not on PATH" >&2; exit 2; }
cuobjdump --version >"$OUT/cuobjdump-version.txt" 2>&1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cp "$C"/* "$T/" && xz -d "$T"/*.xz
rc=0
python3 "$HERE/cuobjdump-lists.py" "$T/libnccl.so.2.skel" "$C/nccl.imgverify.json" >"$OUT/cuobjdump-nccl.txt" 2>&1 || rc=1
python3 "$HERE/cuobjdump-lists.py" "$T/libtorch_cuda.so.skel" "$C/torch.imgverify.json" "$T/torch-ptx-sample.fatbin" \
  >"$OUT/cuobjdump-torch.txt" 2>&1 || rc=1
cp "$C/commit" "$C/nccl.path" "$C/torch.path" "$OUT/"
cat "$OUT/cuobjdump-version.txt" "$OUT/cuobjdump-nccl.txt" "$OUT/cuobjdump-torch.txt"
echo "cuobjdump-device.sh rc $rc"
exit $rc
