"""Collective operations over the TP and DCP groups.

DCP2 adds the exchanges of decode context parallelism: the all-gather of
log-sum-exps for the `ag_rs` combine, and the grouped all-to-all that moves
[dcp, B, H/dcp, D + LSE lanes] packets for the `a2a` combine.
"""
from typing import Any, Optional

import torch
import torch.distributed as dist

from .parallel_state import get_dcp_group, get_tp_group

DCP_LSE_LANES = 4  # fp32 LSE padded to 16 bytes so a packet row stays aligned


def tensor_model_parallel_all_reduce(input_: torch.Tensor) -> torch.Tensor:
    return get_tp_group().all_reduce(input_)


def tensor_model_parallel_all_gather(input_: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return get_tp_group().all_gather(input_, dim)


def tensor_model_parallel_reduce_scatter(input_: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return get_tp_group().reduce_scatter(input_, dim)


def broadcast_tensor_dict(tensor_dict: Optional[dict[str, Any]] = None,
                          src: int = 0) -> Optional[dict[str, Any]]:
    if not dist.is_initialized() or get_tp_group().world_size == 1:
        return tensor_dict
    obj = [tensor_dict]
    dist.broadcast_object_list(obj, src=src, group=get_tp_group().cpu_group)
    return obj[0]


def dcp_all_gather_lse(lse: torch.Tensor) -> torch.Tensor:
    """[B, H] fp32 on each DCP rank -> [dcp, B, H] on every rank."""
    group = get_dcp_group()
    out = lse.new_empty((group.world_size, *lse.shape))
    dist.all_gather_into_tensor(out, lse.contiguous(), group=group.device_group)
    return out


def dcp_pack_a2a(out: torch.Tensor, lse: torch.Tensor, dcp: int) -> torch.Tensor:
    """Pack the partial output [B, H, D] and its LSE [B, H] as
    [dcp, B, H/dcp, D + lanes]: slice j goes to the DCP rank owning heads j."""
    b, h, d = out.shape
    if h % dcp:
        raise ValueError(f"{h} heads do not split over dcp={dcp}")
    packet = out.new_zeros((dcp, b, h // dcp, d + DCP_LSE_LANES), dtype=torch.float32)
    packet[..., :d] = out.float().view(b, dcp, h // dcp, d).transpose(0, 1)
    packet[..., d] = lse.view(b, dcp, h // dcp).transpose(0, 1)
    return packet


def dcp_a2a_exchange(packet: torch.Tensor) -> torch.Tensor:
    """One grouped send/recv all-to-all over the DCP group."""
    group = get_dcp_group()
    recv = torch.empty_like(packet)
    dist.all_to_all_single(recv, packet, group=group.device_group)
    return recv
