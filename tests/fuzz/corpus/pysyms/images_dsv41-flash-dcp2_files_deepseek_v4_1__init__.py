"""DeepSeek V4.1: MoE with MXFP4 experts, Engram n-gram memory on disk,
sparse MLA with a sliding window, and decode context parallelism."""
from vllm.model_executor.models import ModelRegistry

from .modeling import DeepseekV41ForCausalLM, DeepseekV41Model

ModelRegistry.register_model("DeepseekV41ForCausalLM", "deepseek_v4_1",
                             "DeepseekV41ForCausalLM")

__all__ = ["DeepseekV41ForCausalLM", "DeepseekV41Model"]
