"""Block geometry of the compressed (C4) KV cache of DeepSeek V4 MLA."""
from vllm.utils import cdiv, round_up

COMPRESS_RATIO = 4
MIN_COMPRESSED_BLOCK = 16


def get_compressed_block_size(block_size: int, ratio: int = COMPRESS_RATIO) -> int:
    """Tokens of compressed KV per block: the block shrinks with the
    compression ratio but never below the kernel's minimum tile."""
    if block_size % ratio:
        raise ValueError(f"block size {block_size} is not a multiple of {ratio}")
    return max(block_size // ratio, MIN_COMPRESSED_BLOCK)


def num_compressed_tokens(seq_len: int, ratio: int = COMPRESS_RATIO) -> int:
    return seq_len // ratio


def compressed_slots_needed(seq_len: int, block_size: int) -> int:
    per_block = get_compressed_block_size(block_size)
    return round_up(cdiv(num_compressed_tokens(seq_len), per_block), 1) * per_block
