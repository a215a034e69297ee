#!/usr/bin/env bash
# The thin definition of issue 46 over the real CUDA base
# (scripts/real-base.sh --cuda): six changed torch files, as a DCP-like
# port changes them (a helper in distributed_c10d.py; an LSE all-gather in
# _functional_collectives.py that imports it; device_mesh.py and
# tensor/_redistribute.py importing what the port added; helpers in
# cuda/nccl.py and nn/functional.py), every gate on: symbols (the torch
# package), native (torch's extension modules and what they load), kernels
# (NCCL's collectives required on the target) and [target].
#
# Usage: tests/cuda-base/thin.sh ROOTFS REF DIR [GPU [DRIVER]]
#   ROOTFS, REF  the base's file system and reference (real-base.sh's lines)
#   DIR          written: DIR/image.conf, DIR/files/torch/... (the six files,
#                the base's own with the port's lines appended)
#   GPU          [target] gpu (default 9.0); DRIVER (default 580.95.05)
# Prints the python3 -c program that imports what the port changed: the
# oracle, run by CPython in a chroot of the base with DIR/files over it.
set -euo pipefail
rootfs=${1:?usage: thin.sh ROOTFS REF DIR [GPU [DRIVER]]}
ref=${2:?}
dir=${3:?}
gpu=${4:-9.0}
driver=${5:-580.95.05}
site=usr/lib/python3/dist-packages
mkdir -p "$dir/files"
add() { # FILE (under torch/): the base's, with stdin appended
  mkdir -p "$dir/files/torch/$(dirname "$1")"
  cp "$rootfs/$site/torch/$1" "$dir/files/torch/$1"
  cat >>"$dir/files/torch/$1"
}
add distributed/distributed_c10d.py <<'PY'


# DCP port: the ranks of a decode-context-parallel group.
def dcp_group_ranks(group=None):
    return get_process_group_ranks(group if group is not None else _get_default_group())
PY
add distributed/_functional_collectives.py <<'PY'


# DCP port: the LSE shards gathered across the DCP group.
from torch.distributed.distributed_c10d import dcp_group_ranks  # noqa: E402


def dcp_all_gather_lse(lse, group=None):
    return all_gather_tensor(lse, 0, dcp_group_ranks(group))
PY
add distributed/device_mesh.py <<'PY'

# DCP port: the world size of a mesh dimension's group.
from torch.distributed.distributed_c10d import get_world_size as _dcp_world_size  # noqa: E402,F401
PY
add distributed/tensor/_redistribute.py <<'PY'

# DCP port: redistribution of the LSE goes through the port's all-gather.
from torch.distributed._functional_collectives import dcp_all_gather_lse  # noqa: E402,F401
PY
add cuda/nccl.py <<'PY'


def dcp_nccl_version_tuple():
    return tuple(version())
PY
add nn/functional.py <<'PY'


def dcp_lse_combine(lse_a: Tensor, lse_b: Tensor) -> Tensor:
    return torch.logaddexp(lse_a, lse_b)
PY
{
  printf '[image]\nname = cuda-thin:1\nfrom = %s\n\n[copy]\n' "$ref"
  (cd "$dir/files" && find . -type f | sed 's|^\./||' | sort) | while read -r f; do
    echo "file files/$f /$site/$f"
  done
  cat <<CONF

[symbols]
python-path /$site
check-package torch
python torch/distributed/distributed_c10d.py dcp_group_ranks
python torch/distributed/_functional_collectives.py dcp_all_gather_lse

[native]
package torch

[kernels]
# A DCP port needs NCCL's collectives to run on the target's GPUs.
require /usr/lib/*/libnccl.so* ncclDevKernel_SendRecv ncclDevKernel_AllGather_RING_LL

[target]
gpu = $gpu
driver = $driver
CONF
} >"$dir/image.conf"
echo 'import torch, torch.distributed.device_mesh, torch.distributed.tensor._redistribute
import torch.distributed._functional_collectives as fc, torch.cuda.nccl as nccl, torch.nn.functional as F
assert callable(fc.dcp_all_gather_lse) and callable(nccl.dcp_nccl_version_tuple) and callable(F.dcp_lse_combine)
print("oracle: torch", torch.__version__, "imports the port")'
