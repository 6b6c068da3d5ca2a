"""Attention backends (reduced from TensorRT-LLM for the testdb-audit example)."""
from enum import Enum


class AttentionBackend(str, Enum):
    TRTLLM = "TRTLLM"
    FLASHINFER = "FLASHINFER"
    FLASHINFER_STAR_ATTENTION = "FLASHINFER_STAR_ATTENTION"
