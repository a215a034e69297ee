"""NVIDIA-specific kernels of DeepSeek V4.1."""
from .flashinfer_sparse import flashinfer_sparse_mla_decode, has_flashinfer_sparse

__all__ = ["flashinfer_sparse_mla_decode", "has_flashinfer_sparse"]
