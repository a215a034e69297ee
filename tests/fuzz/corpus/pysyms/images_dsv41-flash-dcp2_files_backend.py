"""The interface every v1 attention backend implements."""
from abc import ABC, abstractmethod
from enum import Enum
from typing import Any, ClassVar, Generic, Optional, TypeVar

from vllm.v1.attention.backends.utils import (AttentionMetadataBuilder,
                                              CommonAttentionMetadata)

T = TypeVar("T", bound="AttentionMetadata")


class DCPCombineBackend(str, Enum):
    """How the partial outputs of decode context parallel ranks are merged."""
    AG_RS = "ag_rs"  # all-gather LSEs, rescale, reduce-scatter over heads
    A2A = "a2a"      # one all-to-all of [dcp, B, H/dcp, D + LSE] packets


class AttentionType:
    DECODER = "decoder"
    ENCODER_ONLY = "encoder_only"


class AttentionMetadata:
    pass


class AttentionBackend(ABC):
    accept_output_buffer: ClassVar[bool] = False
    supports_dcp: ClassVar[bool] = False
    supported_dcp_combine: ClassVar[tuple[DCPCombineBackend, ...]] = ()

    @staticmethod
    @abstractmethod
    def get_name() -> str:
        raise NotImplementedError

    @staticmethod
    @abstractmethod
    def get_impl_cls() -> type["AttentionImpl"]:
        raise NotImplementedError

    @staticmethod
    @abstractmethod
    def get_builder_cls() -> type[AttentionMetadataBuilder]:
        raise NotImplementedError

    @staticmethod
    @abstractmethod
    def get_kv_cache_shape(num_blocks: int, block_size: int, num_kv_heads: int,
                           head_size: int) -> tuple[int, ...]:
        raise NotImplementedError

    @classmethod
    def check_dcp(cls, combine: Optional[str]) -> None:
        if combine is None:
            return
        if not cls.supports_dcp:
            raise ValueError(f"{cls.get_name()} does not support decode context parallelism")
        if DCPCombineBackend(combine) not in cls.supported_dcp_combine:
            raise ValueError(f"{cls.get_name()} does not support --dcp-comm-backend {combine}")


class AttentionImpl(ABC, Generic[T]):
    dcp_world_size: int = 1
    dcp_rank: int = 0

    @abstractmethod
    def forward(self, layer: Any, query, key, value, kv_cache, attn_metadata: T,
                output=None):
        raise NotImplementedError


def common_metadata_fields() -> tuple[str, ...]:
    return tuple(CommonAttentionMetadata.__dataclass_fields__)
