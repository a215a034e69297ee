"""The GPU model runner: prepares inputs, runs the model, samples."""
from typing import Any, Optional

import torch

from vllm import envs
from vllm.config import VllmConfig
from vllm.distributed import get_decode_context_model_parallel_world_size
from vllm.forward_context import set_forward_context
from vllm.logger import init_logger
from vllm.v1.attention.backend import DCPCombineBackend
from vllm.v1.spec_decode.dflash.speculator import DFlashSpeculator
from vllm.v1.worker.gpu.attn_utils import build_attn_metadata, init_attn_backend
from vllm.v1.worker.gpu.block_table import MultiGroupBlockTable
from vllm.v1.worker.gpu.input_batch import InputBatch

logger = init_logger(__name__)


class GPUModelRunner:

    def __init__(self, vllm_config: VllmConfig, device: torch.device):
        self.vllm_config = vllm_config
        self.device = device
        self.dcp_world_size = get_decode_context_model_parallel_world_size()
        self.dcp_combine = DCPCombineBackend(
            getattr(vllm_config.parallel_config, "dcp_comm_backend", "ag_rs"))
        sched = vllm_config.model_config
        self.input_batch = InputBatch(max_num_reqs=8, max_model_len=sched.max_model_len)
        self.block_tables: Optional[MultiGroupBlockTable] = None
        self.attn_builders: list[Any] = []
        self.speculator: Optional[DFlashSpeculator] = None
        spec = vllm_config.speculative_config
        if spec is not None and spec.method in ("dflash", "dspark"):
            self.speculator = DFlashSpeculator(vllm_config, device)
        if envs.VLLM_USE_BREAKABLE_CUDAGRAPH:
            logger.info("breakable CUDA graphs on; DCP combine %s", self.dcp_combine.value)

    def initialize_kv_cache(self, kv_cache_config, backends) -> None:
        self.attn_builders = init_attn_backend(kv_cache_config, self.vllm_config, backends,
                                               self.dcp_combine.value)
        block_sizes = [g.kv_cache_spec.block_size for g in kv_cache_config.kv_cache_groups]
        self.block_tables = MultiGroupBlockTable(block_sizes, 8,
                                                 self.vllm_config.model_config.max_model_len,
                                                 self.dcp_world_size)

    @torch.inference_mode()
    def execute_model(self, model, common, layer_names, input_ids, positions):
        attn_metadata = build_attn_metadata(self.attn_builders, common, layer_names)
        with set_forward_context(attn_metadata, num_tokens=int(input_ids.numel())):
            hidden = model(input_ids, positions)
        if self.speculator is not None:
            return hidden, self.speculator.propose(hidden, positions)
        return hidden, None
