"""Unit tests of the executor configuration."""
import pytest

from tensorrt_llm._torch.attention_backend import AttentionBackend
from tensorrt_llm._torch.pyexecutor.py_executor_creator import KvCacheConfig, ExecutorConfig, executor_summary


@pytest.mark.part0
def test_summary():
    cfg = ExecutorConfig(AttentionBackend.TRTLLM, KvCacheConfig())
    assert executor_summary(cfg) == "TRTLLM reuse=True"
