"""The DeepSeek V4.1 model."""
from typing import Optional

import torch

from vllm.config import VllmConfig
from vllm.distributed import (get_decode_context_model_parallel_world_size,
                              get_tensor_model_parallel_world_size)
from vllm.model_executor.layers.fused_moe import FusedMoE
from vllm.model_executor.layers.fused_moe.b12x import B12xFusedMoEMethod
from vllm.model_executor.layers.sparse_attn_indexer import SparseAttnIndexer
from vllm.model_executor.models.utils import make_layers, maybe_prefix
from vllm.v1.attention.backends.mla.sparse_swa import SparseSWAImpl

from .engram import EngramTable, engram_enabled
from .model_state import DeepseekV41ModelState


class DeepseekV41DecoderLayer:

    def __init__(self, config, prefix: str, combine: str):
        self.prefix = prefix
        heads = config.num_attention_heads // get_tensor_model_parallel_world_size()
        self.attn = SparseSWAImpl(heads, config.kv_lora_rank, combine)
        self.indexer = SparseAttnIndexer(config.index_topk, 128, 8192)
        self.mlp = FusedMoE(config.n_routed_experts, config.num_experts_per_tok,
                            config.hidden_size, config.moe_intermediate_size,
                            B12xFusedMoEMethod(), maybe_prefix(prefix, "mlp"))


class DeepseekV41Model:

    def __init__(self, vllm_config: VllmConfig, prefix: str = ""):
        config = vllm_config.model_config.hf_config
        combine = getattr(vllm_config.parallel_config, "dcp_comm_backend", "ag_rs")
        self.dcp_world_size = get_decode_context_model_parallel_world_size()
        self.layers = make_layers(config.num_hidden_layers,
                                  lambda p: DeepseekV41DecoderLayer(config, p, combine),
                                  prefix=maybe_prefix(prefix, "model"))
        self.engram: Optional[EngramTable] = None
        if engram_enabled():
            self.engram = EngramTable.from_config(config)
        self.state = DeepseekV41ModelState(self.engram)


class DeepseekV41ForCausalLM:

    def __init__(self, vllm_config: VllmConfig, prefix: str = ""):
        self.model = DeepseekV41Model(vllm_config, prefix)

    def prepare_inputs(self, input_ids: torch.Tensor) -> None:
        self.model.state.prestage(input_ids)
