"""Decode context parallelism: which rank owns which KV token.

Token at position p is owned by DCP rank (p // I) % dcp, I being the
interleave size; ranks therefore hold interleaved runs of I tokens.
"""
from vllm.distributed import (get_decode_context_model_parallel_rank,
                              get_decode_context_model_parallel_world_size)
from vllm.utils import cdiv


def dcp_token_owner(pos: int, dcp: int, interleave: int = 1) -> int:
    return (pos // interleave) % dcp


def dcp_local_seq_len(seq_len: int, rank: int, dcp: int, interleave: int = 1) -> int:
    """Tokens of a sequence of SEQ_LEN that DCP rank RANK holds."""
    full_rounds, rest = divmod(seq_len, dcp * interleave)
    local = full_rounds * interleave
    start = rank * interleave
    return local + min(max(rest - start, 0), interleave)


def get_dcp_local_seq_lens(seq_lens: list[int], interleave: int = 1) -> list[int]:
    dcp = get_decode_context_model_parallel_world_size()
    rank = get_decode_context_model_parallel_rank()
    return [dcp_local_seq_len(s, rank, dcp, interleave) for s in seq_lens]


def dcp_num_local_blocks(seq_len: int, block_size: int, dcp: int) -> int:
    return cdiv(cdiv(seq_len, dcp), block_size)
