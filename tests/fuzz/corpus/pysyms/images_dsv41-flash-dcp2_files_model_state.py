"""Per-step state of DeepSeek V4.1 that lives outside the CUDA graph.

Engram rows are staged in prepare_inputs (prestage), so the whole decode
step can be captured as one graph (VLLM_USE_BREAKABLE_CUDAGRAPH=1).
"""
from typing import Optional

import numpy as np

from vllm import envs

from .engram import EngramTable


class DeepseekV41ModelState:

    def __init__(self, engram: Optional[EngramTable]):
        self.engram = engram
        self.staged: Optional[np.ndarray] = None
        self.graph_safe = bool(envs.VLLM_USE_BREAKABLE_CUDAGRAPH)

    def ngram_rows(self, input_ids) -> np.ndarray:
        ids = np.asarray(input_ids.cpu() if hasattr(input_ids, "cpu") else input_ids)
        if ids.size < 2 or self.engram is None:
            return np.empty(0, dtype=np.int64)
        pairs = ids[:-1].astype(np.int64) * 131071 + ids[1:]
        return pairs % self.engram.num_rows

    def prestage(self, input_ids) -> None:
        if self.engram is None:
            return
        self.staged = self.engram.read_rows(self.ngram_rows(input_ids))
