"""Builds the PyTorch executor (reduced from TensorRT-LLM for the testdb-audit example)."""
import logging
from dataclasses import dataclass

from tensorrt_llm._torch.attention_backend import AttentionBackend

logger = logging.getLogger(__name__)


@dataclass
class KvCacheConfig:
    enable_block_reuse: bool = True
    max_tokens: int = 8192


@dataclass
class ExecutorConfig:
    attn_backend: AttentionBackend
    kv_cache_config: KvCacheConfig


def create_py_executor(attn_backend: AttentionBackend, kv_cache_config: KvCacheConfig):
    """Validate the configuration and return the executor config."""
    if attn_backend in (AttentionBackend.FLASHINFER,
                        AttentionBackend.FLASHINFER_STAR_ATTENTION):
        logger.warning("KV cache block reuse is not supported with FlashInfer; disabling it")
        kv_cache_config.enable_block_reuse = False
    return ExecutorConfig(attn_backend, kv_cache_config)


def executor_summary(config: ExecutorConfig) -> str:
    # One line for the logs.
    return f"{config.attn_backend.value} reuse={config.kv_cache_config.enable_block_reuse}"
