"""B12X MoE backend: MXFP4 experts with block-12 scaling for SM12x GPUs."""
from typing import Optional

import torch

from vllm import envs
from vllm.logger import init_logger
from vllm.model_executor.layers.fused_moe.layer import (FusedMoE,
                                                        FusedMoEMethodBase)
from vllm.platforms import current_platform

logger = init_logger(__name__)

B12X_BLOCK = 32
# SM12x parts have 99 KiB of shared memory per block: the fused top-k kernel
# must not be launched with more experts per token than fit.
SM12X_MAX_TOPK = 8


def _sm12x_topk_guard(top_k: int) -> int:
    if current_platform.is_sm12x() and top_k > SM12X_MAX_TOPK:
        logger.warning("top_k %d exceeds the SM12x limit, clamping to %d", top_k,
                       SM12X_MAX_TOPK)
        return SM12X_MAX_TOPK
    return top_k


def b12x_cache_dir() -> str:
    import os
    return os.getenv("B12X_CACHE_DIR", os.path.join(envs.VLLM_CACHE_ROOT, "b12x"))


class B12xFusedMoEMethod(FusedMoEMethodBase):

    def __init__(self, activation: str = "silu"):
        self.activation = activation

    def create_weights(self, layer: FusedMoE, num_experts: int, hidden_size: int,
                       intermediate_size: int) -> None:
        blocks = hidden_size // B12X_BLOCK
        layer.w13 = torch.empty((num_experts, 2 * intermediate_size, hidden_size // 2),
                                dtype=torch.uint8)
        layer.w13_scale = torch.empty((num_experts, 2 * intermediate_size, blocks),
                                      dtype=torch.uint8)
        layer.w2 = torch.empty((num_experts, hidden_size, intermediate_size // 2),
                               dtype=torch.uint8)

    def apply(self, layer: FusedMoE, x: torch.Tensor, router_logits: torch.Tensor,
              top_k: int) -> torch.Tensor:
        top_k = _sm12x_topk_guard(top_k)
        weights, ids = torch.topk(router_logits.softmax(-1), top_k, dim=-1)
        return b12x_moe_forward(x, layer.w13, layer.w2, weights, ids)


def b12x_moe_forward(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor,
                     topk_weights: torch.Tensor, topk_ids: torch.Tensor,
                     out: Optional[torch.Tensor] = None) -> torch.Tensor:
    ops = torch.ops._b12x_C
    out = torch.empty_like(x) if out is None else out
    ops.b12x_fused_moe(out, x, w13, w2, topk_weights, topk_ids.to(torch.int32))
    return out
