"""Sparse + sliding-window MLA backend of DeepSeek V4, with DCP."""
from typing import Any, Optional

from vllm.distributed import get_dcp_group
from vllm.distributed.communication_op import (dcp_a2a_exchange, dcp_all_gather_lse,
                                               dcp_pack_a2a)
from vllm.v1.attention.backend import (AttentionBackend, AttentionImpl,
                                       DCPCombineBackend)
from vllm.v1.attention.backends.mla.indexer import IndexerMetadataBuilder
from vllm.v1.core.kv_cache_utils import get_swa_block_size

SWA_WINDOW = 128


def lse_combine(outs, lses, base2: bool = False):
    """Merge partial attention outputs by their log-sum-exps.

    m = max_i L_i, L = m + log sum exp(L_i - m), O = sum exp(L_i - L) O_i; a
    rank whose weight is 0 (an empty shard, L_i = -inf) adds exactly 0.
    """
    import torch
    exp = torch.exp2 if base2 else torch.exp
    log = torch.log2 if base2 else torch.log
    m = lses.max(0).values
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    total = log(exp(lses - m).sum(0)) + m
    w = exp(lses - total)
    safe = torch.where(w[..., None] > 0, outs.float(), torch.zeros_like(outs, dtype=torch.float32))
    return (w[..., None] * safe).sum(0), total


class SparseSWAImpl(AttentionImpl):

    def __init__(self, num_heads: int, head_size: int, combine: str = "ag_rs"):
        self.num_heads = num_heads
        self.head_size = head_size
        self.combine = DCPCombineBackend(combine)

    def combine_dcp(self, out, lse):
        group = get_dcp_group()
        if group.world_size == 1:
            return out
        if self.combine is DCPCombineBackend.A2A:
            packet = dcp_pack_a2a(out, lse, group.world_size)
            recv = dcp_a2a_exchange(packet)
            d = self.head_size
            merged, _ = lse_combine(recv[..., :d], recv[..., d])
            return merged.to(out.dtype)
        lses = dcp_all_gather_lse(lse)
        scale = (lse - lse_combine(out[None], lses[None])[1]).exp()
        return group.reduce_scatter((out.float() * scale[..., None]).to(out.dtype), dim=1)

    def forward(self, layer: Any, query, key, value, kv_cache, attn_metadata,
                output: Optional[Any] = None):
        out, lse = layer.sparse_attention(query, kv_cache, attn_metadata)
        return self.combine_dcp(out, lse)


class SparseSWABackend(AttentionBackend):
    supports_dcp = True
    supported_dcp_combine = (DCPCombineBackend.AG_RS, DCPCombineBackend.A2A)

    @staticmethod
    def get_name() -> str:
        return "DEEPSEEK_V4_SPARSE_SWA"

    @staticmethod
    def get_impl_cls():
        return SparseSWAImpl

    @staticmethod
    def get_builder_cls():
        return IndexerMetadataBuilder

    @staticmethod
    def get_kv_cache_shape(num_blocks: int, block_size: int, num_kv_heads: int,
                           head_size: int) -> tuple[int, ...]:
        return (num_blocks, get_swa_block_size(block_size, SWA_WINDOW), head_size)
