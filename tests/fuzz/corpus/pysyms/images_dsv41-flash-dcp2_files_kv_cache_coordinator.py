"""Coordinates the KV cache managers of the attention groups of a model."""
from typing import Optional

from vllm.logger import init_logger
from vllm.utils import cdiv
from vllm.v1.core.block_pool import BlockPool, KVCacheBlock
from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheSpec

logger = init_logger(__name__)


class KVCacheCoordinator:

    def __init__(self, kv_cache_config: KVCacheConfig, max_model_len: int,
                 enable_caching: bool, dcp_world_size: int = 1):
        self.kv_cache_config = kv_cache_config
        self.max_model_len = max_model_len
        self.dcp_world_size = dcp_world_size
        self.block_pool = BlockPool(kv_cache_config.num_blocks, enable_caching)
        self.req_blocks: dict[str, list[KVCacheBlock]] = {}

    def blocks_needed(self, spec: KVCacheSpec, num_tokens: int) -> int:
        # With DCP each rank holds every dcp-th token, so a rank needs the
        # blocks of ceil(num_tokens / dcp) tokens.
        local_tokens = cdiv(num_tokens, self.dcp_world_size)
        return cdiv(local_tokens, spec.block_size)

    def allocate(self, req_id: str, num_tokens: int) -> Optional[list[KVCacheBlock]]:
        spec = self.kv_cache_config.kv_cache_groups[0].kv_cache_spec
        have = len(self.req_blocks.get(req_id, []))
        need = self.blocks_needed(spec, num_tokens) - have
        if need > self.block_pool.get_num_free_blocks():
            return None
        new = self.block_pool.get_new_blocks(max(need, 0))
        self.req_blocks.setdefault(req_id, []).extend(new)
        return new

    def free(self, req_id: str) -> None:
        self.block_pool.free_blocks(self.req_blocks.pop(req_id, []))
