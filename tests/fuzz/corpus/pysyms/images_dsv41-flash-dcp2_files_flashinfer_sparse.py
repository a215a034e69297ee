"""Sparse MLA decode through FlashInfer's SM12x kernels, with the DCP
all-to-all combine (FlashInfer's trtllm_dcp_alltoall) when dcp > 1."""
from typing import Optional

import torch

from vllm import envs
from vllm.distributed import get_dcp_group
from vllm.logger import init_logger
from vllm.platforms import current_platform
from vllm.v1.attention.backend import DCPCombineBackend

logger = init_logger(__name__)


def has_flashinfer_sparse() -> bool:
    try:
        import flashinfer  # noqa: F401
    except ImportError:
        return False
    return current_platform.is_sm12x() or bool(envs.VLLM_HAS_FLASHINFER_CUBIN)


def _dcp_alltoall(out: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    from flashinfer.cake_dcp import trtllm_dcp_alltoall
    group = get_dcp_group()
    return trtllm_dcp_alltoall(out, lse, group.device_group, group.rank_in_group)


def flashinfer_sparse_mla_decode(q: torch.Tensor, kv_cache: torch.Tensor,
                                 indices: torch.Tensor, sm_scale: float,
                                 combine: Optional[str] = None) -> torch.Tensor:
    import flashinfer
    out, lse = flashinfer.mla.sparse_decode(q, kv_cache, indices, sm_scale, return_lse=True)
    if combine is not None and get_dcp_group().world_size > 1:
        if DCPCombineBackend(combine) is DCPCombineBackend.A2A:
            return _dcp_alltoall(out, lse)
    return out
