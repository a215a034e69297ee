"""Candidate blocks: the KV blocks a query may attend to in sparse MLA,
narrowed before the indexer's top-k (new in the DCP2 overlay)."""
from dataclasses import dataclass
from typing import Optional

import torch

from vllm.utils import cdiv


@dataclass
class CandidateBlocks:
    block_size: int
    max_blocks: int
    sink_blocks: int = 1
    recent_blocks: int = 4
    allowed: Optional[torch.Tensor] = None

    def build(self, seq_lens: torch.Tensor) -> torch.Tensor:
        n = torch.tensor([cdiv(int(s), self.block_size) for s in seq_lens.tolist()])
        idx = torch.arange(self.max_blocks)[None, :]
        self.allowed = idx < n[:, None]
        return self.allowed

    def mask(self, scores: torch.Tensor) -> torch.Tensor:
        if self.allowed is None:
            return scores
        allowed = self.allowed[:, : scores.shape[-1]].to(scores.device)
        return scores.masked_fill(~allowed, float("-inf"))

    def always_keep(self, num_blocks: int) -> list[int]:
        sinks = list(range(min(self.sink_blocks, num_blocks)))
        recent = list(range(max(num_blocks - self.recent_blocks, 0), num_blocks))
        return sorted(set(sinks + recent))
