"""KV cache sizing: how many blocks fit, per group, at a memory budget."""
from typing import NewType

from vllm.config import VllmConfig
from vllm.logger import init_logger
from vllm.utils import cdiv
from vllm.v1.kv_cache_interface import (KVCacheConfig, KVCacheGroupSpec,
                                        KVCacheSpec)

logger = init_logger(__name__)

BlockHash = NewType("BlockHash", bytes)


def get_swa_block_size(block_size: int, window: int) -> int:
    """The sliding-window cache needs only enough blocks for the window, but
    each block keeps the model's block size so the kernels see one layout."""
    if window <= 0:
        raise ValueError("window must be positive")
    return min(block_size, max(16, window))


def hash_block_tokens(parent: bytes, token_ids: tuple[int, ...]) -> BlockHash:
    import hashlib
    h = hashlib.sha256(parent)
    h.update(repr(token_ids).encode())
    return BlockHash(h.digest())


def get_num_blocks(vllm_config: VllmConfig, available_memory: int, page_size: int) -> int:
    dcp = vllm_config.parallel_config.decode_context_parallel_size
    num_blocks = available_memory // page_size
    logger.info("KV cache: %d blocks, %d tokens per DCP group", num_blocks,
                num_blocks * vllm_config.cache_config.block_size * dcp)
    return num_blocks


def get_kv_cache_config(vllm_config: VllmConfig, specs: dict[str, KVCacheSpec],
                        available_memory: int) -> KVCacheConfig:
    page = sum(s.page_size_bytes for s in specs.values())
    groups = [KVCacheGroupSpec([name], spec) for name, spec in specs.items()]
    return KVCacheConfig(get_num_blocks(vllm_config, available_memory, max(page, 1)), groups)


def max_concurrency(kv_cache_config: KVCacheConfig, block_size: int, max_model_len: int) -> float:
    return kv_cache_config.num_blocks / cdiv(max_model_len, block_size)
