"""DFlash speculative decoding: a draft head drafts k tokens per step from
the target's hidden states (DSpark k=5 in the recipe)."""
from typing import Optional

import torch

from vllm.config import VllmConfig
from vllm.logger import init_logger
from vllm.v1.spec_decode.metadata import SpecDecodeMetadata

logger = init_logger(__name__)


class DFlashSpeculator:

    def __init__(self, vllm_config: VllmConfig, device: torch.device):
        spec = vllm_config.speculative_config
        self.num_speculative_tokens = spec.num_speculative_tokens if spec else 0
        self.device = device
        self.draft_head: Optional[torch.nn.Module] = None
        # Exact capture sizes: a padded speculative batch hangs the SM120
        # sparse MLA kernel, so batches must be multiples of k and k + 1.
        k = self.num_speculative_tokens
        self.capture_sizes = sorted({n for m in (k, k + 1) if m for n in range(m, 49, m)})

    def load_draft_head(self, module: torch.nn.Module) -> None:
        self.draft_head = module

    def propose(self, hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        if self.draft_head is None or self.num_speculative_tokens == 0:
            return torch.empty((hidden.shape[0], 0), dtype=torch.long, device=self.device)
        logits = self.draft_head(hidden[:, None, :].expand(-1, self.num_speculative_tokens, -1))
        return logits.argmax(-1)

    def make_metadata(self, draft: torch.Tensor) -> SpecDecodeMetadata:
        n = [int(draft.shape[1])] * int(draft.shape[0])
        cu = torch.tensor(n, device=self.device).cumsum(0)
        return SpecDecodeMetadata(draft.flatten(), n, cu, cu - 1, cu)
