"""Engram n-gram memory, kept on disk (DSV41_ENGRAM_DISK=1).

The two FP8 tables are 203 GB each; rows are read on demand with a pool of
pread threads (DSV41_ENGRAM_DISK_THREADS, default 32) in chunks of
DSV41_ENGRAM_DISK_CHUNK MiB, from node-local copies when DSV41_ENGRAM_LOCAL
is set, else from the shared model folder.
"""
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional

import numpy as np

from vllm.logger import init_logger

logger = init_logger(__name__)

_POOL: Optional[ThreadPoolExecutor] = None
_POOL_LOCK = threading.Lock()


def engram_enabled() -> bool:
    return os.getenv("DSV41_ENGRAM_DISK", "0") == "1"


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.getenv(name, str(default)))
    except ValueError:
        return default


def _kai_pool() -> ThreadPoolExecutor:
    """The pread pool, created on first use so that forked workers each get
    their own threads."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(_env_int("DSV41_ENGRAM_DISK_THREADS", 32),
                                       thread_name_prefix="engram-pread")
        return _POOL


@dataclass
class EngramTable:
    path: str
    row_bytes: int
    num_rows: int
    fd: int = -1

    @staticmethod
    def from_config(config) -> "EngramTable":
        root = os.getenv("DSV41_ENGRAM_DIR") if os.getenv("DSV41_ENGRAM_LOCAL") == "1" else None
        root = root or getattr(config, "name_or_path", ".")
        path = os.path.join(root, "engram.bin")
        return EngramTable(path, config.engram_dim, config.engram_rows)

    def open(self) -> None:
        if self.fd < 0:
            self.fd = os.open(self.path, os.O_RDONLY)
            logger.info("Engram DISK mode: %s, %d rows", self.path, self.num_rows)

    def _read_run(self, first: int, count: int) -> bytes:
        return os.pread(self.fd, count * self.row_bytes, first * self.row_bytes)

    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        self.open()
        chunk_rows = max(1, (_env_int("DSV41_ENGRAM_DISK_CHUNK", 16) << 20) // self.row_bytes)
        rows = np.sort(np.unique(rows))
        runs, start = [], 0
        for i in range(1, len(rows) + 1):
            if i == len(rows) or rows[i] != rows[i - 1] + 1 or i - start == chunk_rows:
                runs.append((int(rows[start]), i - start))
                start = i
        parts = list(_kai_pool().map(lambda r: self._read_run(*r), runs))
        return np.frombuffer(b"".join(parts), dtype=np.uint8).reshape(-1, self.row_bytes)
