"""Decode context parallelism: which rank owns which KV token.

Token at position p is owned by DCP rank (p // I) % dcp, I being the
interleave size; ranks therefore hold interleaved runs of I tokens.
"""
import argparse
import os

from vllm.distributed import (get_decode_context_model_parallel_rank,
                              get_decode_context_model_parallel_world_size)
from vllm.engine.arg_utils import CLI_ARG_HOOKS
from vllm.utils import cdiv


def add_dcp_cli_args(parser: argparse.ArgumentParser) -> None:
    """`vllm serve --dcp-comm-backend`: how DCP ranks combine attention
    partials (ag_rs: all-gather + reduce-scatter; a2a: one all-to-all of
    [dcp, B, H/dcp, D + LSE] packets)."""
    parser.add_argument("--dcp-comm-backend", choices=["ag_rs", "a2a"], default="ag_rs")


CLI_ARG_HOOKS.append(add_dcp_cli_args)


def dcp_stage() -> int:
    """DSV41_DCP_STAGE: how much of the DCP2 machinery is on (3: all)."""
    return int(os.getenv("DSV41_DCP_STAGE", "3"))


def dcp_combine_default() -> str:
    return os.environ.get("DSV41_DCP_COMBINE", "ag_rs")


def dcp_prefill_gather() -> bool:
    return os.getenv("DSV41_DCP_PREFILL_GATHER", "0") == "1"


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
