"""MLA indexer backend: builds the metadata the sparse indexer needs."""
from dataclasses import dataclass
from typing import Any, Optional

from vllm.v1.attention.backend import AttentionBackend, DCPCombineBackend
from vllm.v1.attention.backends.mla.compressor_utils import get_compressed_block_size
from vllm.v1.attention.backends.utils import (AttentionMetadataBuilder,
                                              CommonAttentionMetadata,
                                              split_decodes_and_prefills)


@dataclass
class IndexerMetadata:
    num_decodes: int
    num_prefills: int
    seq_lens: Any
    block_table: Any
    compressed_block_size: int
    dcp_local_seq_lens: Optional[Any] = None


class IndexerMetadataBuilder(AttentionMetadataBuilder[IndexerMetadata]):
    reorder_batch_threshold = 1

    def build(self, common_prefix_len: int, common: CommonAttentionMetadata) -> IndexerMetadata:
        d, p = split_decodes_and_prefills(common, self.reorder_batch_threshold)
        return IndexerMetadata(d, p, common.seq_lens, common.block_table_tensor,
                               get_compressed_block_size(self.kv_cache_spec.block_size),
                               common.dcp_local_seq_lens)


class IndexerBackend(AttentionBackend):
    supports_dcp = True
    supported_dcp_combine = (DCPCombineBackend.AG_RS, DCPCombineBackend.A2A)

    @staticmethod
    def get_name() -> str:
        return "DEEPSEEK_V4_INDEXER"

    @staticmethod
    def get_impl_cls():
        raise NotImplementedError("the indexer has no attention impl")

    @staticmethod
    def get_builder_cls():
        return IndexerMetadataBuilder

    @staticmethod
    def get_kv_cache_shape(num_blocks: int, block_size: int, num_kv_heads: int,
                           head_size: int) -> tuple[int, ...]:
        return (num_blocks, get_compressed_block_size(block_size), head_size)
