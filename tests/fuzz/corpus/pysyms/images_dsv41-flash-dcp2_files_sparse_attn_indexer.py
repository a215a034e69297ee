"""The sparse attention indexer of DeepSeek V4: scores compressed KV blocks
and keeps the top-k per query (the SM12x top-k guard lives here)."""
from typing import Optional

import torch

from vllm.platforms import current_platform
from vllm.v1.attention.backends.mla.compressor_utils import get_compressed_block_size
from vllm.v1.core.candidate_blocks import CandidateBlocks

SM12X_TOPK_ROW_LIMIT = 2048  # the SM12x top-k kernel was validated up to this width


def sparse_topk(scores: torch.Tensor, k: int) -> torch.Tensor:
    if current_platform.is_sm12x() and scores.shape[-1] > SM12X_TOPK_ROW_LIMIT:
        # Wide rows: two-pass top-k keeps the kernel inside its validated width.
        chunks = scores.split(SM12X_TOPK_ROW_LIMIT, dim=-1)
        partial = torch.cat([c.topk(min(k, c.shape[-1]), dim=-1).values for c in chunks], -1)
        threshold = partial.topk(k, dim=-1).values[..., -1:]
        return (scores >= threshold).nonzero()[..., -1]
    return scores.topk(min(k, scores.shape[-1]), dim=-1).indices


class SparseAttnIndexer:

    def __init__(self, topk: int, block_size: int, prefill_buffer_tokens: int):
        self.topk = topk
        self.compressed_block = get_compressed_block_size(block_size)
        self.prefill_buffer_tokens = prefill_buffer_tokens
        self.candidates: Optional[CandidateBlocks] = None

    def forward(self, q_idx: torch.Tensor, k_idx: torch.Tensor) -> torch.Tensor:
        scores = torch.einsum("bhd,nd->bn", q_idx, k_idx)
        if self.candidates is not None:
            scores = self.candidates.mask(scores)
        return sparse_topk(scores, self.topk)
