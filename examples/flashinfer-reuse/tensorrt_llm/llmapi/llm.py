"""The LLM API entry point (reduced)."""
from tensorrt_llm._torch.attention_backend import AttentionBackend
from tensorrt_llm._torch.pyexecutor.py_executor_creator import KvCacheConfig, create_py_executor


class LLM:
    def __init__(self, model: str, attn_backend: str = "TRTLLM", enable_chunked_prefill=False,
                 kv_cache_config: KvCacheConfig | None = None):
        self.model = model
        self.config = create_py_executor(AttentionBackend(attn_backend),
                                         kv_cache_config or KvCacheConfig())
        self.enable_chunked_prefill = enable_chunked_prefill

    def generate(self, prompts):
        return [p[::-1] for p in prompts]
