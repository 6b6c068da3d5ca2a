"""Issue 22's two cases through the CLI on real git repos in TensorRT-LLM's layout: a pre-merge
test that builds the changed method's class but calls another method, or calls `generate` of
the unrelated `LLM` class, is no guard (the verdict is not green); its guarded twin, a
pre-merge test that really calls the changed method through a resolved receiver, is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.audits import behaviour
from tests.gitrepo import git, new_repo

LISTS = """\
    version: 0.0.1
    l0_a10:
    - condition:
        terms: {{stage: pre_merge, backend: pytorch}}
      tests:
      - {pre}
    - condition:
        terms: {{stage: post_merge, backend: pytorch}}
      tests:
      - {post}
    """
STAGES = {
    "ci/stages.yml": """\
        stages:
        - {name: A10-PyTorch-1, platform: a10, context: l0_a10}
        - {name: A10-PyTorch-Post-Merge-1, platform: a10, context: l0_a10}
        """,
    "tests/integration/test_lists/waives.txt": "",
}

RESOURCE_MANAGER = """\
    class BaseResourceManager:
        def shutdown(self):
            return None


    class KVCacheManager(BaseResourceManager):
        def __init__(self, num_blocks, window=64):
            self.num_blocks = num_blocks
            self.window = window

        def get_num_kv_blocks(self):
            return self.num_blocks

        def get_attention_window(self):
            return self.window
    """
KV_TESTS = """\
    from tensorrt_llm._torch.pyexecutor.resource_manager import KVCacheManager


    def test_num_kv_blocks():
        mgr = KVCacheManager(8)
        assert mgr.get_num_kv_blocks() == 8


    def test_attention_window():
        mgr = KVCacheManager(8, window=32)
        assert mgr.get_attention_window() == 32
    """
KV_FILE = "integration/defs/test_resource_manager.py"

NGRAM = """\
    class NGramDrafter:
        def __init__(self, max_draft_len):
            self.max_draft_len = max_draft_len

        def generate(self, tokens):
            return tokens[-self.max_draft_len:]
    """
LLM = """\
    class LLM:
        def __init__(self, model):
            self.model = model

        def generate(self, prompts):
            return [p[::-1] for p in prompts]
    """
ACCURACY = """\
    from tensorrt_llm import LLM


    class TestLlama3_1_8B:
        def test_auto_dtype(self):
            llm = LLM("llama")
            assert llm.generate(["ab"]) == ["ba"]
    """
NGRAM_TEST = """\
    from tensorrt_llm._torch.speculative.ngram import NGramDrafter


    def test_ngram_generate():
        drafter = NGramDrafter(2)
        assert drafter.generate([1, 2, 3]) == [2, 3]
    """


def _kv_repo(root: Path, pre: str, post: str) -> Path:
    files = {
        "tensorrt_llm/__init__.py": "",
        "tensorrt_llm/_torch/__init__.py": "",
        "tensorrt_llm/_torch/pyexecutor/__init__.py": "",
        "tensorrt_llm/_torch/pyexecutor/resource_manager.py": RESOURCE_MANAGER,
        f"tests/{KV_FILE}": KV_TESTS,
        "tests/integration/test_lists/test-db/l0_a10.yml": LISTS.format(pre=pre, post=post),
        **STAGES,
    }
    root = new_repo(root, files)
    rm = root / "tensorrt_llm/_torch/pyexecutor/resource_manager.py"
    rm.write_text(rm.read_text().replace("return self.window", "return min(self.window, 4096)"))
    git(root, "commit", "-qam", "cap the attention window")
    return root


def _ngram_repo(root: Path, pre: str, post: str, accuracy: str = ACCURACY,
                ngram_test: bool = True) -> Path:
    files = {
        "tensorrt_llm/__init__.py": "from .llmapi import LLM\n"
                                    "from ._torch.speculative.ngram import NGramDrafter\n",
        "tensorrt_llm/llmapi/__init__.py": "from .llm import LLM\n",
        "tensorrt_llm/llmapi/llm.py": LLM,
        "tensorrt_llm/_torch/__init__.py": "",
        "tensorrt_llm/_torch/speculative/__init__.py": "",
        "tensorrt_llm/_torch/speculative/ngram.py": NGRAM,
        "tests/integration/defs/accuracy/test_llm_api_pytorch.py": accuracy,
        **({"tests/integration/defs/speculative/test_ngram.py": NGRAM_TEST} if ngram_test
           else {}),
        "tests/integration/test_lists/test-db/l0_a10.yml": LISTS.format(pre=pre, post=post),
        **STAGES,
    }
    root = new_repo(root, files)
    ng = root / "tensorrt_llm/_torch/speculative/ngram.py"
    ng.write_text(ng.read_text().replace("tokens[-self.max_draft_len:]",
                                         "tokens[-self.max_draft_len:] or tokens"))
    git(root, "commit", "-qam", "ngram: never draft nothing")
    return root


def _audit(run_cli, root: Path, function: str) -> tuple[int, dict[str, Any]]:  # type: ignore[no-untyped-def]
    res = run_cli("--root", str(root), "audit", "--base", "HEAD~1", "--head", "HEAD",
                  "--format", "json")
    assert res.code in (0, 1), res.err
    return res.code, behaviour(json.loads(res.out), function)


PRE_NUM = "test_resource_manager.py::test_num_kv_blocks"
PRE_WIN = "test_resource_manager.py::test_attention_window"
ACC = "accuracy/test_llm_api_pytorch.py::TestLlama3_1_8B::test_auto_dtype"
NG = "speculative/test_ngram.py::test_ngram_generate"


def test_a_test_that_builds_the_class_but_calls_another_method_is_no_guard(  # type: ignore[no-untyped-def]
        run_cli, tmp_path: Path) -> None:
    """Issue 22, case 1: the pre-merge test calls only get_num_kv_blocks."""
    root = _kv_repo(tmp_path / "repo", pre=PRE_NUM, post=PRE_WIN)
    code, b = _audit(run_cli, root, "KVCacheManager.get_attention_window")
    assert (code, b["verdict"]) == (1, "post-merge-only")
    assert (b["tier"], b["rank"]) == ("symbol", 1)  # the real guard decides: post-merge only
    assert b["pre_merge_guards"] == []
    [weak] = [g for g in b["guards"]["symbol"] if g["test_id"] == PRE_NUM]
    assert (weak["rank"], weak["decides"]) == (2, False)
    assert weak["reason"] == ("names KVCacheManager without a call that reaches "
                              "KVCacheManager.get_attention_window")


def test_a_test_that_calls_the_changed_method_through_its_receiver_guards(  # type: ignore[no-untyped-def]
        run_cli, tmp_path: Path) -> None:
    """Case 1's guarded twin: the pre-merge test calls get_attention_window."""
    root = _kv_repo(tmp_path / "repo", pre=PRE_WIN, post=PRE_NUM)
    code, b = _audit(run_cli, root, "KVCacheManager.get_attention_window")
    assert (code, b["verdict"], b["tier"], b["rank"]) == (0, "pre-merge", "symbol", 1)
    assert b["pre_merge_guards"] == [PRE_WIN]


def test_generate_of_an_unrelated_class_is_no_guard(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Issue 22, case 2: the pre-merge accuracy test calls LLM.generate (imported from the
    package's re-exports); the test of NGramDrafter.generate runs post-merge only."""
    root = _ngram_repo(tmp_path / "repo", pre=ACC, post=NG)
    code, b = _audit(run_cli, root, "NGramDrafter.generate")
    assert (code, b["verdict"]) == (1, "post-merge-only")
    assert b["pre_merge_guards"] == []
    linked = {g["test_id"] for gs in b["guards"].values() for g in gs if g["tier"] == "symbol"}
    assert ACC not in linked and NG in linked


def test_an_unresolved_llm_generate_is_weak(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Case 2 with `llm` a parameter that resolves to nothing: two classes define generate,
    so the call is the weak level; the verdict is not green though the test runs pre-merge."""
    taking = ACCURACY.replace('def test_auto_dtype(self):\n            llm = LLM("llama")',
                              "def test_auto_dtype(self, llm):")
    assert taking != ACCURACY
    root = _ngram_repo(tmp_path / "repo", pre=ACC, post=ACC, accuracy=taking, ngram_test=False)
    code, b = _audit(run_cli, root, "NGramDrafter.generate")
    assert (code, b["verdict"], b["tier"], b["rank"]) == (1, "unguarded", "symbol", 2)
    assert b["pre_merge_guards"] == [] and b["weak_links"] == [ACC]
    [g] = [g for g in b["guards"]["symbol"] if g["test_id"] == ACC]
    assert g["reason"] == "an unresolved call of generate, a name 2 units define"


def test_the_drafter_test_guards_its_generate(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Case 2's guarded twin: the pre-merge test builds an NGramDrafter and calls generate."""
    root = _ngram_repo(tmp_path / "repo", pre=NG, post=ACC)
    code, b = _audit(run_cli, root, "NGramDrafter.generate")
    assert (code, b["verdict"], b["tier"], b["rank"]) == (0, "pre-merge", "symbol", 1)
    assert b["pre_merge_guards"] == [NG]
