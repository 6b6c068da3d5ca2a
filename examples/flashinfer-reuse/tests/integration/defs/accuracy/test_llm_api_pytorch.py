"""Accuracy tests of the PyTorch flow (reduced)."""
from defs.conftest import parametrize_with_ids

from tensorrt_llm.llmapi.llm import LLM


class TestLlama3_1_8BInstruct:
    MODEL = "llama-3.1-8b-instruct"

    @parametrize_with_ids("torch_compile", [False, True])
    @parametrize_with_ids("attn_backend", ["TRTLLM", "FLASHINFER"])
    def test_bfloat16(self, attn_backend, torch_compile):
        llm = LLM(self.MODEL, attn_backend=attn_backend)
        assert llm.generate(["ab"]) == ["ba"]

    @parametrize_with_ids("attn_backend", ["TRTLLM", "FLASHINFER"])
    def test_chunked_prefill(self, attn_backend):
        llm = LLM(self.MODEL, attn_backend=attn_backend, enable_chunked_prefill=True)
        assert llm.generate(["abc"]) == ["cba"]
