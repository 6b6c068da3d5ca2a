"""Block reuse stays on for FlashInfer and off for FlashInfer Star Attention."""
import pytest

from tensorrt_llm._torch.attention_backend import AttentionBackend
from tensorrt_llm._torch.pyexecutor.py_executor_creator import KvCacheConfig, create_py_executor


@pytest.mark.parametrize("attn_backend", ["FLASHINFER", "FLASHINFER_STAR_ATTENTION"])
def test_block_reuse_guard(attn_backend):
    config = create_py_executor(AttentionBackend(attn_backend), KvCacheConfig())
    expected = attn_backend != "FLASHINFER_STAR_ATTENTION"
    assert config.kv_cache_config.enable_block_reuse is expected
