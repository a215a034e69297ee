"""KV cache specifications: what each attention layer stores per token."""
from dataclasses import dataclass, field

from vllm.utils import cdiv


@dataclass(frozen=True)
class KVCacheSpec:
    block_size: int

    @property
    def page_size_bytes(self) -> int:
        raise NotImplementedError

    def max_memory_usage_bytes(self, max_model_len: int) -> int:
        return cdiv(max_model_len, self.block_size) * self.page_size_bytes


@dataclass(frozen=True)
class FullAttentionSpec(KVCacheSpec):
    num_kv_heads: int = 1
    head_size: int = 128
    dtype_size: int = 2

    @property
    def page_size_bytes(self) -> int:
        return 2 * self.block_size * self.num_kv_heads * self.head_size * self.dtype_size


@dataclass(frozen=True)
class MLAAttentionSpec(FullAttentionSpec):
    cache_dtype_str: str = "auto"

    @property
    def page_size_bytes(self) -> int:
        return self.block_size * self.head_size * self.dtype_size


@dataclass(frozen=True)
class SlidingWindowMLASpec(MLAAttentionSpec):
    sliding_window: int = 128

    def max_memory_usage_bytes(self, max_model_len: int) -> int:
        tokens = min(self.sliding_window + self.block_size, max_model_len)
        return cdiv(tokens, self.block_size) * self.page_size_bytes


@dataclass
class KVCacheGroupSpec:
    layer_names: list[str]
    kv_cache_spec: KVCacheSpec


@dataclass
class KVCacheConfig:
    num_blocks: int
    kv_cache_groups: list[KVCacheGroupSpec] = field(default_factory=list)
