"""Block tables of the GPU worker: per request, the KV blocks it uses.

With decode context parallelism a rank stores only its own tokens, so the
slot of position p is computed from the rank-local position p // dcp (or its
interleaved variant).
"""
import numpy as np

from vllm.utils import cdiv
from vllm.v1.worker.cp_utils import dcp_token_owner


class BlockTable:

    def __init__(self, block_size: int, max_num_reqs: int, max_num_blocks: int,
                 dcp_world_size: int = 1, dcp_rank: int = 0, interleave: int = 1):
        self.block_size = block_size
        self.table = np.zeros((max_num_reqs, max_num_blocks), dtype=np.int32)
        self.num_blocks = np.zeros(max_num_reqs, dtype=np.int32)
        self.dcp_world_size = dcp_world_size
        self.dcp_rank = dcp_rank
        self.interleave = interleave

    def append_row(self, block_ids: list[int], row: int) -> None:
        start = self.num_blocks[row]
        self.table[row, start:start + len(block_ids)] = block_ids
        self.num_blocks[row] += len(block_ids)

    def local_position(self, pos: int) -> int:
        dcp, i = self.dcp_world_size, self.interleave
        return (pos // (dcp * i)) * i + pos % i

    def slot_mapping(self, row: int, positions: list[int]) -> np.ndarray:
        slots = np.full(len(positions), -1, dtype=np.int64)
        for k, pos in enumerate(positions):
            if dcp_token_owner(pos, self.dcp_world_size, self.interleave) != self.dcp_rank:
                continue
            local = self.local_position(pos)
            block = self.table[row, local // self.block_size]
            slots[k] = block * self.block_size + local % self.block_size
        return slots

    def blocks_for(self, seq_len: int) -> int:
        return cdiv(cdiv(seq_len, self.dcp_world_size), self.block_size)


class MultiGroupBlockTable:

    def __init__(self, block_sizes: list[int], max_num_reqs: int, max_model_len: int,
                 dcp_world_size: int = 1, dcp_rank: int = 0, interleave: int = 1):
        self.tables = [BlockTable(bs, max_num_reqs, cdiv(max_model_len, bs),
                                  dcp_world_size, dcp_rank, interleave)
                       for bs in block_sizes]

    def __getitem__(self, i: int) -> BlockTable:
        return self.tables[i]
