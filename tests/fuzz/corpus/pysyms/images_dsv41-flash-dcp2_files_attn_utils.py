"""Attention set-up for the GPU worker: backends per KV cache group and the
metadata each step builds."""
from typing import Any

from vllm.config import VllmConfig
from vllm.v1.attention.backend import AttentionBackend, DCPCombineBackend
from vllm.v1.attention.backends.utils import CommonAttentionMetadata
from vllm.v1.kv_cache_interface import KVCacheConfig
from vllm.v1.worker.cp_utils import get_dcp_local_seq_lens


def init_attn_backend(kv_cache_config: KVCacheConfig, vllm_config: VllmConfig,
                      backends: dict[str, type[AttentionBackend]],
                      dcp_combine: str = DCPCombineBackend.AG_RS.value):
    dcp = vllm_config.parallel_config.decode_context_parallel_size
    builders = []
    for group in kv_cache_config.kv_cache_groups:
        backend = backends[group.layer_names[0]]
        if dcp > 1:
            backend.check_dcp(dcp_combine)
        builders.append(backend.get_builder_cls()(group.kv_cache_spec, group.layer_names,
                                                  vllm_config, "cuda"))
    return builders


def build_attn_metadata(builders, common: CommonAttentionMetadata,
                        layer_names: list[list[str]], dcp_interleave: int = 1
                        ) -> dict[str, Any]:
    if common.dcp_local_seq_lens is None:
        common.dcp_local_seq_lens = get_dcp_local_seq_lens(list(common.seq_lens),
                                                           dcp_interleave)
    out: dict[str, Any] = {}
    for builder, names in zip(builders, layer_names):
        md = builder.build(0, common)
        for name in names:
            out[name] = md
    return out
