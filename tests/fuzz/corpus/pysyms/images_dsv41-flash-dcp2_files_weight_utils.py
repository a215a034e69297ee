"""Weight loading helpers: safetensors iteration and default loaders."""
import glob
import os
from typing import Generator, Iterable

import torch

from vllm.logger import init_logger

logger = init_logger(__name__)


def safetensors_weights_iterator(
        hf_weights_files: Iterable[str]) -> Generator[tuple[str, torch.Tensor], None, None]:
    from safetensors import safe_open
    for path in sorted(hf_weights_files):
        with safe_open(path, framework="pt") as f:
            for name in f.keys():
                yield name, f.get_tensor(name)


def find_weight_files(model_dir: str, pattern: str = "*.safetensors") -> list[str]:
    files = sorted(glob.glob(os.path.join(model_dir, pattern)))
    if not files:
        raise FileNotFoundError(f"no {pattern} in {model_dir}")
    return files


def default_weight_loader(param: torch.Tensor, loaded_weight: torch.Tensor) -> None:
    if param.numel() == 1 and loaded_weight.numel() == 1:
        param.data.fill_(loaded_weight.item())
        return
    if param.size() != loaded_weight.size():
        raise ValueError(f"shape mismatch: {tuple(param.size())} vs "
                         f"{tuple(loaded_weight.size())}")
    param.data.copy_(loaded_weight)
