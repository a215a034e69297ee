#!/usr/bin/env bash
# Make the folder that tests/gpu/cuobjdump-device.sh needs on the GPU machine
# (issue 48: NVIDIA's cuobjdump there against imgverify --kernels here, on
# files too large to carry): for libtorch_cuda.so (1.18 GB) and Debian's
# libnccl.so.2 of the real CUDA base (scripts/real-base.sh --cuda), each
# file's skeleton (tests/gpu/fatbin-skeleton.py: every fatbin and entry
# header kept, the code zeroed, xz), imgverify's entries of the real file
# as this commit's imgverify reads them out of the base's OCI layout, and a
# sample of torch's whole PTX entries for their ISA versions.
#   tests/gpu/prepare-cuobj-carry.sh DIR [BASE-DIR]
# BASE-DIR: the real-base.sh --cuda cache folder (default: the one that
# script names, built if it is not there).  ~18 MB.
set -euo pipefail
D=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# (The newest trixie-amd64-* folder may be the plain Python 3.13 base of
# real-base.sh without --cuda: the script names the CUDA one.)
B=${2:-$(dirname "$("$ROOT/scripts/real-base.sh" --cuda --arch amd64 | sed -n 's/^oci=//p')")}
[ -f "$B/complete" ] || { echo "no real CUDA base at '$B': run scripts/real-base.sh --cuda" >&2; exit 2; }
rm -rf "$D" && mkdir -p "$D"
L=/usr/lib/x86_64-linux-gnu
"$ROOT/build/imgverify" --kernels --json "oci:$B/oci:cuda" "$L/libnccl.so.2*" "$L/libtorch_cuda.so*" >"$D/imgverify-kernels.json"
git -C "$ROOT" rev-parse HEAD >"$D/commit"
python3 - "$D" <<'PY'
import json, os, sys
d = sys.argv[1]
for f in json.load(open(os.path.join(d, "imgverify-kernels.json")))["files"]:
    name = "torch" if "libtorch_cuda" in f["path"] else "nccl"
    keep = ("kind", "sm", "variant", "relocatable", "offset", "ptx_version")
    json.dump([{k: e.get(k) for k in keep} for e in f["entries"]], open(os.path.join(d, name + ".imgverify.json"), "w"))
    open(os.path.join(d, name + ".path"), "w").write(f["path"] + "\n")
    print(name, f["path"], len(f["entries"]), "entries")
PY
# (the paths imgverify read: the links resolved inside the image)
python3 "$ROOT/tests/gpu/fatbin-skeleton.py" "$B/rootfs$(cat "$D/nccl.path")" "$D/libnccl.so.2.skel"
python3 "$ROOT/tests/gpu/fatbin-skeleton.py" "$B/rootfs$(cat "$D/torch.path")" "$D/libtorch_cuda.so.skel" \
  "$D/torch-ptx-sample.fatbin" 10
xz -9 -T2 "$D/libnccl.so.2.skel" "$D/libtorch_cuda.so.skel"
rm "$D/imgverify-kernels.json"
du -sh "$D"
