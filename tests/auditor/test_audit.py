"""The audit on real git repositories built in temp dirs: one case per evidence tier and the
change shapes reviewers meet (renames, deletions, new test files, gates, C++, bad diffs)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reports.comment import render_comment
from tests.conftest import EXAMPLE
from tests.gitrepo import git

CREATOR = "tensorrt_llm/_torch/pyexecutor/py_executor_creator.py"
CHUNKED = ("accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_chunked_prefill"
           "[attn_backend={}]")



@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The flashinfer-reuse example's base tree as a git repo with one commit."""
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("*.diff", "README.md"))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


def commit(repo: Path, message: str = "change") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


def edit(repo: Path, rel: str, old: str, new: str) -> None:
    p = repo / rel
    text = p.read_text()
    assert old in text, f"{old!r} not in {rel}"
    p.write_text(text.replace(old, new))


def audit(run_cli, repo: Path, *extra: str) -> tuple[int, dict]:  # type: ignore[no-untyped-def]
    res = run_cli("--root", str(repo), "audit", "--base", "HEAD~1", "--head", "HEAD",
                  "--format", "json", *extra)
    assert res.code in (0, 1), res.err
    return res.code, json.loads(res.out)


def behaviour(data: dict, function: str) -> dict:
    return next(b for b in data["behaviours"] if b["function"] == function)


def guard_ids(b: dict, tier: str) -> set[str]:
    return {g["test_id"] for g in b["guards"].get(tier, [])}


def test_example_pr_is_guarded_only_by_the_thin_unit_test(run_cli) -> None:
    res = run_cli("--root", EXAMPLE, "audit", "--diff", f"{EXAMPLE}/pr.diff", "--format", "json")
    assert res.code == 0, res.err
    data = json.loads(res.out)
    b = behaviour(data, "create_py_executor")
    assert b["verdict"] == "pre-merge" and b["tier"] == "parameter"
    assert {"FLASHINFER", "FLASHINFER_STAR_ATTENTION", "enable_block_reuse"} <= set(b["tokens"])
    assert b["pre_merge_guards"] == [
        "unittest/_torch/executor/test_py_executor_creator.py::test_block_reuse_guard"
        f"[{v}]" for v in ("FLASHINFER", "FLASHINFER_STAR_ATTENTION")]
    params = guard_ids(b, "parameter")
    assert CHUNKED.format("FLASHINFER") in params
    assert CHUNKED.format("TRTLLM") not in params  # the sibling is no FlashInfer guard
    warn = [f for f in data["findings"] if f["rule"] == "post-merge-guard"]
    assert len(warn) == 1 and warn[0]["guards"] == [CHUNKED.format("FLASHINFER")]
    assert "[attn_backend=TRTLLM] runs pre-merge" in warn[0]["message"]
    assert warn[0]["path"].endswith("l0_h100.yml")
    assert set(data["missing_stages"]) == {"DGX_H100-PyTorch-Post-Merge-1",
                                           "DGX_H100-4_GPUs-PyTorch-Others-1"}
    thin = [f for f in data["findings"] if f["rule"] == "thin-pre-merge-guard"]
    assert thin and "unit tests" in thin[0]["message"]


def test_example_without_thin_guard_is_an_error(run_cli) -> None:
    res = run_cli("--root", EXAMPLE, "audit", "--diff", f"{EXAMPLE}/pr-no-thin-guard.diff")
    assert res.code == 1
    assert "1 of 1 behaviour change has no pre-merge guard" in res.out
    assert "no-pre-merge-guard" in res.out


def test_fail_on_warning(run_cli) -> None:
    res = run_cli("--root", EXAMPLE, "audit", "--diff", f"{EXAMPLE}/pr.diff",
                  "--fail-on", "warning")
    assert res.code == 1


def test_parameter_tier_links_only_the_matching_parametrization(run_cli, repo: Path) -> None:
    edit(repo, CREATOR, "if attn_backend in (AttentionBackend.FLASHINFER,",
         "if attn_backend in (AttentionBackend.FLASHINFER, AttentionBackend.TRTLLM,")
    commit(repo)
    code, data = audit(run_cli, repo)
    b = behaviour(data, "create_py_executor")
    assert CHUNKED.format("TRTLLM") in guard_ids(b, "parameter")
    # TRTLLM's chunked-prefill parametrization runs pre-merge: guarded.
    assert b["verdict"] == "pre-merge" and code == 0


def test_symbol_tier_from_a_test_that_calls_the_function(run_cli, repo: Path) -> None:
    edit(repo, CREATOR, 'return f"{config.attn_backend.value} reuse=',
         'return f"{config.attn_backend.value} block_reuse=')
    commit(repo)
    code, data = audit(run_cli, repo)
    b = behaviour(data, "executor_summary")
    assert b["tier"] == "symbol"
    assert guard_ids(b, "symbol") == {
        "unittest/_torch/executor/test_executor_config.py::test_summary"}
    assert b["verdict"] == "pre-merge" and code == 0


def test_module_tier_only_when_nothing_more_specific(run_cli, repo: Path) -> None:
    edit(repo, CREATOR, "    max_tokens: int = 8192", "    max_tokens: int = 4096")
    commit(repo)
    _, data = audit(run_cli, repo)
    b = behaviour(data, "KvCacheConfig")
    assert b["tier"] in ("symbol", "module")
    assert b["guards"]["module"]
    # Every module-tier guard carries its import distance.
    assert all(g["distance"] >= 1 for g in b["guards"]["module"])


def test_declared_tier_for_a_changed_test(run_cli, repo: Path) -> None:
    # A new helper no test calls by name; the PR's own test change reaches its module.
    edit(repo, "tensorrt_llm/llmapi/llm.py", "    def generate(self, prompts):\n"
         "        return [p[::-1] for p in prompts]",
         "    def generate(self, prompts):\n        return [p[::-1].strip() for p in prompts]")
    edit(repo, "tests/integration/defs/accuracy/test_llm_api_pytorch.py",
         'assert llm.generate(["ab"]) == ["ba"]', 'assert llm.generate(["ab "]) == ["ba"]')
    commit(repo)
    _, data = audit(run_cli, repo)
    b = behaviour(data, "LLM.generate")
    assert any(t.startswith("accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::"
                            "test_bfloat16") for t in guard_ids(b, "declared"))
    assert data["changed_tests"][0]["function"] == "TestLlama3_1_8BInstruct.test_bfloat16"


def test_coverage_tier_wins(run_cli, repo: Path, tmp_path: Path) -> None:
    coverage = pytest.importorskip("coverage")
    edit(repo, CREATOR, "    max_tokens: int = 8192", "    max_tokens: int = 4096")
    commit(repo)
    data_file = tmp_path / ".coverage"
    cov = coverage.CoverageData(basename=str(data_file))
    cov.set_context("tests/unittest/_torch/executor/test_executor_config.py::test_summary|run")
    line = (repo / CREATOR).read_text().splitlines().index("    max_tokens: int = 4096") + 1
    cov.add_lines({str(repo / CREATOR): [line]})
    cov.write()
    _, data = audit(run_cli, repo, "--coverage", str(data_file))
    b = behaviour(data, "KvCacheConfig")
    assert b["tier"] == "coverage"
    assert guard_ids(b, "coverage") == {
        "unittest/_torch/executor/test_executor_config.py::test_summary"}
    assert b["verdict"] == "pre-merge"


def test_renamed_file_and_deleted_function(run_cli, repo: Path) -> None:
    git(repo, "mv", "tensorrt_llm/llmapi/llm.py", "tensorrt_llm/llmapi/llm_api.py")
    edit(repo, "tensorrt_llm/llmapi/llm_api.py", "    def generate(self, prompts):\n"
         "        return [p[::-1] for p in prompts]\n", "")
    commit(repo)
    _, data = audit(run_cli, repo)
    b = behaviour(data, "LLM.generate")
    assert b["status"] == "deleted" and b["path"] == "tensorrt_llm/llmapi/llm_api.py"


def test_new_test_file_is_a_changed_test(run_cli, repo: Path) -> None:
    (repo / "tests/unittest/_torch/executor/test_new.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('x', [1, 2])\ndef test_new(x):\n"
        "    assert x\n")
    commit(repo)
    code, data = audit(run_cli, repo)
    assert data["changed_tests"] == [{
        "path": "tests/unittest/_torch/executor/test_new.py", "function": "test_new",
        "lines": [3, 4, 5], "status": "added",
        "ids": ["unittest/_torch/executor/test_new.py::test_new[1]",
                "unittest/_torch/executor/test_new.py::test_new[2]"]}]
    assert data["behaviours"] == [] and code == 0


def test_change_that_opens_the_multi_gpu_gate(run_cli, repo: Path) -> None:
    edit(repo, CREATOR, "if attn_backend in (AttentionBackend.FLASHINFER,\n"
         "                        AttentionBackend.FLASHINFER_STAR_ATTENTION):",
         "if attn_backend == AttentionBackend.FLASHINFER_STAR_ATTENTION:")
    commit(repo)
    _, closed = audit(run_cli, repo)
    assert closed["gates"]["multi_gpu"] is False
    # Touch a path on the multi-GPU list in the same change: the 4-GPU stage now runs.
    (repo / "tensorrt_llm/mapping.py").write_text("WORLD = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "--amend", "-qm", "change + mapping")
    _, opened = audit(run_cli, repo)
    assert opened["gates"]["multi_gpu"] is True
    g = next(g for g in behaviour(opened, "create_py_executor")["guards"]["parameter"]
             if g["test_id"] == CHUNKED.format("FLASHINFER"))
    assert g["verdict"] == "gated" and g["effective"] == "pre-merge"


def test_cpp_file_is_reported_unlinked_never_dropped(run_cli, repo: Path) -> None:
    (repo / "cpp").mkdir()
    (repo / "cpp/kernel.cu").write_text("__global__ void k() {}\n")
    commit(repo)
    _, data = audit(run_cli, repo)
    assert data["unlinked"] == [{"path": "cpp/kernel.cu", "status": "added",
                                 "why": "no path rule links this file to tests"}]
    assert any(f["rule"] == "unlinked-file" for f in data["findings"])


def test_comment_only_change_is_no_behaviour(run_cli, repo: Path) -> None:
    edit(repo, CREATOR, '"""Validate the configuration and return the executor config."""',
         '"""Validate the configuration; return the executor config."""  # doc')
    commit(repo)
    code, data = audit(run_cli, repo)
    assert data["behaviours"] == [] and code == 0
    assert any("only in whitespace, comments or docstrings" in n for n in data["notes"])


def test_list_line_moved_to_post_merge_is_a_warning(run_cli, repo: Path) -> None:
    path = "tests/integration/test_lists/test-db/l0_h100.yml"
    line = ("  - accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_bfloat16"
            "[attn_backend=TRTLLM-torch_compile=True]\n")
    text = (repo / path).read_text()
    text = text.replace(line, "")
    text = text.replace("  # ------------- PyTorch tests ---------------\n",
                        "  # PyTorch\n" + line, 1)
    (repo / path).write_text(text)
    commit(repo)
    code, data = audit(run_cli, repo)
    assert code == 0  # a warning alone does not fail by default
    moved = [c for c in data["list_changes"] if c["kind"] == "moved-to-post-merge"]
    assert [c["test"] for c in moved] == [line.strip()[2:]]
    assert any(f["rule"] == "guard-demoted" for f in data["findings"])


def test_empty_diff(run_cli, repo: Path) -> None:
    git(repo, "commit", "--allow-empty", "-qm", "nothing")
    code, data = audit(run_cli, repo)
    assert code == 0 and data["behaviours"] == [] and data["findings"] == []
    assert data["summary"]["sentence"] == "No behaviour change found in this diff"


def test_diff_that_does_not_apply(run_cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.diff"
    bad.write_text((Path(EXAMPLE) / "pr.diff").read_text().replace(
        " def create_py_executor(", " def create_executor("))
    res = run_cli("--root", EXAMPLE, "audit", "--diff", str(bad))
    assert res.code == 2
    assert "does not apply" in res.err and "Traceback" not in res.err


def test_not_a_diff(run_cli, tmp_path: Path) -> None:
    bad = tmp_path / "x.diff"
    bad.write_text("@@ -1,2 +1,2 @@\n-x\n")
    res = run_cli("--root", EXAMPLE, "audit", "--diff", str(bad))
    assert res.code == 2 and "Traceback" not in res.err


def test_diff_paths_cannot_leave_the_root(run_cli, tmp_path: Path) -> None:
    evil = tmp_path / "evil.diff"
    evil.write_text("--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n")
    res = run_cli("--root", EXAMPLE, "audit", "--diff", str(evil))
    assert res.code == 2 and "leaves the checkout root" in res.err


def test_base_or_diff_is_required(run_cli) -> None:
    res = run_cli("--root", EXAMPLE, "audit")
    assert res.code == 2 and "--base" in res.err


def test_path_rule_links_a_cpp_file_to_tests(run_cli, repo: Path) -> None:  # type: ignore[no-untyped-def]
    (repo / "ci/audit-rules.yml").write_text(
        "path_rules:\n"
        "- paths: ['cpp/kernels/*flashinfer*']\n"
        "  tests: ['test_chunked_prefill[attn_backend=FLASHINFER]']\n")
    commit(repo, "rules")
    (repo / "cpp/kernels").mkdir(parents=True)
    (repo / "cpp/kernels/flashinfer.cu").write_text("__global__ void k() {}\n")
    commit(repo)
    code, data = audit(run_cli, repo)
    [b] = data["behaviours"]
    assert (b["path"], b["function"], b["tier"]) == ("cpp/kernels/flashinfer.cu", "<file>",
                                                     "path-rule")
    assert [g["test_id"] for g in b["guards"]["path-rule"]] == [CHUNKED.format("FLASHINFER")]
    assert b["verdict"] == "gated" and code == 1  # its only guard is post-merge / gated
    assert data["unlinked"] == []
    assert any(f["rule"] == "no-pre-merge-guard" and f["path"] == "cpp/kernels/flashinfer.cu"
               for f in data["findings"])


def test_bad_rules_file_is_a_clear_error(run_cli, repo: Path) -> None:  # type: ignore[no-untyped-def]
    (repo / "ci/audit-rules.yml").write_text("path_rules:\n- paths: []\n  tests: [x]\n")
    commit(repo, "rules")
    (repo / "cpp").mkdir()
    (repo / "cpp/a.cu").write_text("x\n")
    commit(repo)
    res = run_cli("--root", str(repo), "audit", "--base", "HEAD~1", "--head", "HEAD")
    assert res.code == 2 and "ci/audit-rules.yml:2" in res.err and "Traceback" not in res.err


def _many_guards(root: Path, call: bool) -> None:
    """60 pre-merge unit-test parametrizations and 3 post-merge integration ones, all importing
    ``pkg.core``; with ``call`` their test functions call the changed ``f`` (symbol tier)."""
    units = ", ".join(str(i) for i in range(60))
    body = "    assert pkg.core.f(n)\n" if call else "    assert n >= 0\n"
    files = {
        "pkg/__init__.py": "",
        "pkg/core.py": "def f(x):\n    return x + 1\n",
        "tests/unittest/test_units.py":
            f"import pytest\nimport pkg.core\n\n\n@pytest.mark.parametrize('n', [{units}])\n"
            "def test_unit(n):\n" + body,
        "tests/integration/defs/test_integ.py":
            "import pytest\nimport pkg.core\n\n\n@pytest.mark.parametrize('n', [1, 2, 3])\n"
            "def test_big(n):\n" + body,
        "tests/integration/test_lists/test-db/l0_a10.yml":
            "l0_a10:\n- condition:\n    terms:\n      stage: pre_merge\n  tests:\n"
            "  - unittest/test_units.py\n- condition:\n    terms:\n      stage: post_merge\n"
            "  tests:\n  - test_integ.py::test_big\n",
        "ci/stages.yml":
            "stages:\n- {name: A10-PyTorch-1, platform: a10, context: l0_a10}\n"
            "- {name: A10-PyTorch-Post-Merge-1, platform: a10, context: l0_a10}\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "init", "-q", "-b", "main")
    commit(root, "base")
    edit(root, "pkg/core.py", "x + 1", "x + 2")
    commit(root)


def test_every_guard_is_counted_not_only_the_shown_ones(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A verdict covers all its guards, though the JSON shows 50: here 60 pre-merge unit-test
    guards (shown first) and 3 integration guards that run only post-merge. The thin-guard
    finding must count those 3 (it once counted only the shown 50: none)."""
    root = tmp_path / "repo"
    _many_guards(root, call=True)
    code, data = audit(run_cli, root)
    b = behaviour(data, "f")
    assert (b["tier"], b["verdict"], code) == ("symbol", "pre-merge", 0)
    assert b["guard_counts"]["symbol"] == 63 and len(b["guards"]["symbol"]) == 50
    assert b["pre_merge_guard_count"] == 60 and len(b["pre_merge_guards"]) == 50
    [thin] = [f for f in data["findings"] if f["rule"] == "thin-pre-merge-guard"]
    assert "its 3 integration guard(s)" in thin["message"] and len(thin["guards"]) == 50


def test_module_imports_alone_never_guard(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """QA item 1, the trap: every test imports the changed module and 60 run pre-merge, none
    calls it. Not green: exit 1, no pre-merge guard, the 60 are weak links (all counted, 50
    shown), an error finding says why, and no /bot run line is suggested."""
    root = tmp_path / "repo"
    _many_guards(root, call=False)
    code, data = audit(run_cli, root)
    b = behaviour(data, "f")
    assert (b["tier"], b["verdict"], code) == ("module", "unguarded", 1)
    assert data["summary"]["unguarded"] == 1 and "guarded pre-merge" not in (
        data["summary"]["sentence"])
    assert b["decided_by"]["can_guard"] is False and b["decided_by"]["guards"] == 63
    assert (b["pre_merge_guards"], b["pre_merge_guard_count"]) == ([], 0)
    assert b["weak_link_count"] == 60 and len(b["weak_links"]) == 50
    assert all(t.startswith("unittest/test_units.py::test_unit[") for t in b["weak_links"])
    [err] = [f for f in data["findings"] if f["function"] == "f"]
    assert (err["severity"], err["rule"], err["guards"], err["stages"]) == (
        "error", "weak-evidence-only", [], [])
    assert ("only because they import its module (60 of 63 linked parametrizations run "
            "pre-merge)") in err["message"]
    assert "--coverage" in err["message"] and "a test that calls f" in err["message"]
    assert data["suggestion"] == {} and data["missing_stages"] == []
    text = run_cli("--root", str(root), "audit", "--base", "HEAD~1", "--head", "HEAD")
    assert text.code == 1
    flat = " ".join(text.out.split())
    assert flat.startswith("1 of 1 behaviour change has no pre-merge guard")
    assert "weak links that run pre-merge: " in flat and "pre-merge guards:" not in flat
    assert "weak links, cannot guard: test module imports the changed module (63)" in flat
    assert "decides the verdict" not in flat and "Run the missing guards" not in flat
    md = render_comment(data)
    assert "weak links, cannot guard — test module imports the changed module" in md
    assert "only because they import its module" in md and "Run the missing guards" not in md
    from reports.comment import decided_words  # the HTML report's evidence column too

    assert decided_words(b) == ("decided by: test module imports the changed module "
                                "(weak links, cannot guard)")


def test_module_imports_that_run_late_keep_their_verdict_and_suggest_nothing(  # type: ignore[no-untyped-def]
        run_cli, tmp_path: Path) -> None:
    """The weak level's best verdict is worse than pre-merge: that verdict stands (red), but
    starting its stages would only start more tests that cannot guard: nothing is suggested."""
    root = tmp_path / "repo"
    _many_guards(root, call=False)
    lists = root / "tests/integration/test_lists/test-db/l0_a10.yml"
    lists.write_text(lists.read_text().replace("stage: pre_merge", "stage: post_merge"))
    git(root, "commit", "-qam", "all post-merge")
    edit(root, "pkg/core.py", "x + 2", "x + 3")
    commit(root)
    code, data = audit(run_cli, root)
    b = behaviour(data, "f")
    assert (b["tier"], b["verdict"], code, b["weak_links"]) == (
        "module", "post-merge-only", 1, [])
    [err] = [f for f in data["findings"] if f["function"] == "f"]
    assert err["rule"] == "no-pre-merge-guard" and err["stages"] == []
    assert "could not guard even where they ran pre-merge" in err["message"]
    assert data["suggestion"] == {} and data["missing_stages"] == []


# ---- strength inside a tier (issue 13, section 1) ------------------------------------------
# A tree of TensorRT-LLM's shape where one token is shared by tests that exercise the change and
# tests that merely carry the same parameter value. Every case edits one source function; the
# verdict must come from the strongest (tier, rank) that links, weaker links being context.

RANKED_TREE = {
    "tensorrt_llm/__init__.py": "",
    "tensorrt_llm/cuda_graph.py":
        "def resolve_cuda_graph(moe_backend, use_cuda_graph):\n"
        "    \"\"\"Whether CUDA graphs are captured for this MoE backend.\"\"\"\n"
        "    if moe_backend == \"TRTLLM\":\n"
        "        return False\n"
        "    return use_cuda_graph\n",
    "tensorrt_llm/attention.py":
        "def workspace_size(backend):\n"
        "    if backend == \"FLASHINFER\":\n"
        "        return 2\n"
        "    return 1\n\n\n"
        "def get_attention_backend(backend_name):\n"
        "    if backend_name == \"TRTLLM\":\n"
        "        return \"trtllm\"\n"
        "    return \"vanilla\"\n",
    "tensorrt_llm/kernels.py":
        "def select_kernel(backend):\n"
        "    if backend == \"FLASHINFER\":\n"
        "        return \"fi\"\n"
        "    return \"default\"\n",
    "tensorrt_llm/llm.py":
        "from tensorrt_llm.attention import workspace_size\n"
        "from tensorrt_llm.cuda_graph import resolve_cuda_graph\n"
        "from tensorrt_llm.kernels import select_kernel\n\n\n"
        # The LLM keeps its arguments and calls none of the three: a test that builds it
        # reaches none of them (auditor.resolve), so its links are by value only.
        "class LLM:\n"
        "    def __init__(self, model, moe_backend='CUTLASS', attn_backend='TRTLLM',\n"
        "                 cuda_graph=False):\n"
        "        self.args = (moe_backend, cuda_graph, attn_backend)\n",
    "tests/integration/defs/conftest.py":
        (Path(EXAMPLE) / "tests/integration/defs/conftest.py").read_text(),
    "tests/integration/defs/accuracy/test_llm_api_pytorch.py":
        "from defs.conftest import parametrize_with_ids\n\n"
        "from tensorrt_llm.llm import LLM\n\n\n"
        "class TestDeepSeekV3Lite:\n"
        "    @parametrize_with_ids(\"cuda_graph\", [False, True])\n"
        "    @parametrize_with_ids(\"moe_backend\", [\"CUTLASS\", \"TRTLLM\"])\n"
        "    def test_nvfp4(self, moe_backend, cuda_graph):\n"
        "        assert LLM(\"ds\", moe_backend=moe_backend, cuda_graph=cuda_graph)\n\n\n"
        "class TestQwen3_8B:\n"
        "    @parametrize_with_ids(\"attn_backend\", [\"TRTLLM\", \"FLASHINFER\", \"VANILLA\"])\n"
        "    def test_auto_dtype(self, attn_backend):\n"
        "        assert LLM(\"qwen\", attn_backend=attn_backend)\n",
    "tests/integration/defs/test_kernels.py":
        "from defs.conftest import parametrize_with_ids\n\n"
        "from tensorrt_llm.kernels import select_kernel\n\n\n"
        "@parametrize_with_ids(\"attn_backend\", [\"FLASHINFER\", \"TRTLLM\"])\n"
        "def test_select(attn_backend):\n"
        "    assert select_kernel(attn_backend)\n",
    "tests/integration/test_lists/test-db/l0_h100.yml":
        "l0_h100:\n"
        "- condition:\n    terms:\n      stage: pre_merge\n  tests:\n"
        "  - accuracy/test_llm_api_pytorch.py::TestQwen3_8B::test_auto_dtype[attn_backend=TRTLLM]\n"
        "  - accuracy/test_llm_api_pytorch.py::TestQwen3_8B::test_auto_dtype"
        "[attn_backend=FLASHINFER]\n"
        "  - accuracy/test_llm_api_pytorch.py::TestQwen3_8B::test_auto_dtype"
        "[attn_backend=VANILLA]\n"
        "  - accuracy/test_llm_api_pytorch.py::TestDeepSeekV3Lite::test_nvfp4"
        "[moe_backend=CUTLASS-cuda_graph=True]\n"
        "- condition:\n    terms:\n      stage: post_merge\n  tests:\n"
        "  - accuracy/test_llm_api_pytorch.py::TestDeepSeekV3Lite::test_nvfp4"
        "[moe_backend=TRTLLM-cuda_graph=False]\n"
        "  - accuracy/test_llm_api_pytorch.py::TestDeepSeekV3Lite::test_nvfp4"
        "[moe_backend=TRTLLM-cuda_graph=True]\n"
        "  - test_kernels.py::test_select[attn_backend=FLASHINFER]\n"
        "  - test_kernels.py::test_select[attn_backend=TRTLLM]\n",
    "ci/stages.yml":
        "stages:\n- {name: DGX_H100-PyTorch-1, platform: h100, context: l0_h100}\n"
        "- {name: DGX_H100-PyTorch-Post-Merge-1, platform: h100, context: l0_h100}\n",
}
NVFP4 = "accuracy/test_llm_api_pytorch.py::TestDeepSeekV3Lite::test_nvfp4[{}]"
AUTO_DTYPE = "accuracy/test_llm_api_pytorch.py::TestQwen3_8B::test_auto_dtype[attn_backend={}]"
SELECT = "test_kernels.py::test_select[attn_backend={}]"

RANK_CASES = [
    # (case, file, old text, new text, function, decided by, verdict, deciding guards,
    #  weaker parameter links shown as context)
    pytest.param(
        "tensorrt_llm/cuda_graph.py",
        "    if moe_backend == \"TRTLLM\":\n        return False\n", "",
        "resolve_cuda_graph", {"tier": "parameter", "rank": 1}, "post-merge-only",
        {NVFP4.format("moe_backend=TRTLLM-cuda_graph=False"),
         NVFP4.format("moe_backend=TRTLLM-cuda_graph=True")},
        {AUTO_DTYPE.format("TRTLLM"): 3},
        id="trap: a pre-merge test sharing only the token TRTLLM does not guard"),
    pytest.param(
        "tensorrt_llm/attention.py",
        "    if backend == \"FLASHINFER\":\n", "    if backend == \"FLASHINFER\" or not backend:\n",
        "workspace_size", {"tier": "parameter", "rank": 3}, "unguarded",
        {AUTO_DTYPE.format("FLASHINFER")}, {},
        id="recall: value-only links decide when nothing stronger links, and cannot guard"),
    pytest.param(
        "tensorrt_llm/kernels.py",
        "    if backend == \"FLASHINFER\":\n", "    if backend == \"FLASHINFER\" or not backend:\n",
        "select_kernel", {"tier": "parameter", "rank": 2}, "post-merge-only",
        {SELECT.format("FLASHINFER")}, {AUTO_DTYPE.format("FLASHINFER"): 3},
        id="reach: the value-only test that calls the changed function decides"),
    pytest.param(
        "tensorrt_llm/kernels.py",
        "    return \"default\"\n",
        "    if backend == \"VANILLA\":\n        return \"plain\"\n    return \"default\"\n",
        "select_kernel", {"tier": "symbol", "rank": 1}, "post-merge-only",
        {SELECT.format("FLASHINFER"), SELECT.format("TRTLLM")}, {AUTO_DTYPE.format("VANILLA"): 3},
        id="symbol: a caller of the changed function outranks a test sharing only a value"),
]


@pytest.fixture
def ranked(tmp_path: Path) -> Path:
    root = tmp_path / "ranked"
    for rel, text in RANKED_TREE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "init", "-q", "-b", "main")
    commit(root, "base")
    return root


@pytest.mark.parametrize(("path", "old", "new", "function", "decided_by", "verdict", "deciding",
                          "context"), RANK_CASES)
def test_the_strongest_rank_decides(run_cli, ranked: Path, path: str, old: str, new: str,  # type: ignore[no-untyped-def]
                                    function: str, decided_by: dict, verdict: str,
                                    deciding: set[str], context: dict[str, int]) -> None:
    from auditor.evidence import CAN_GUARD, LEVEL_TITLES, Level

    edit(ranked, path, old, new)
    commit(ranked)
    code, data = audit(run_cli, ranked)
    b = behaviour(data, function)
    assert b["verdict"] == verdict and code == (0 if verdict == "pre-merge" else 1)
    assert {k: b["decided_by"][k] for k in ("tier", "rank")} == decided_by
    can_guard = CAN_GUARD[Level(decided_by["tier"], decided_by["rank"])]
    assert b["decided_by"]["can_guard"] is can_guard
    if not can_guard:  # its pre-merge links are weak links, never pre-merge guards
        assert b["pre_merge_guards"] == [] and set(b["weak_links"]) <= deciding
        rules = [f["rule"] for f in data["findings"] if f["function"] == function]
        assert rules == (["weak-evidence-only"] if b["weak_links"] else ["no-pre-merge-guard"])
    assert b["decided_by"]["guards"] == len(deciding)
    tier = b["guards"][decided_by["tier"]]
    assert {g["test_id"] for g in tier if g["decides"]} == deciding
    assert all(g["rank"] == decided_by["rank"] for g in tier if g["decides"])
    params = {g["test_id"]: g for g in b["guards"].get("parameter", [])}
    for tid, rank in context.items():
        assert params[tid]["rank"] == rank and not params[tid]["decides"]
    # Context never shows up as a pre-merge guard, nor in a finding's guard list.
    assert set(b["pre_merge_guards"]) <= deciding
    for f in data["findings"]:
        if f["function"] == function and f["rule"] == "no-pre-merge-guard":
            assert set(f["guards"]) == deciding
    text = run_cli("--root", str(ranked), "audit", "--base", "HEAD~1", "--head", "HEAD").out
    # The levels in words (their codes are in the JSON only), the deciding one said so once.
    flat = " ".join(text.split())
    title = LEVEL_TITLES[Level(decided_by["tier"], decided_by["rank"])]
    lead = "decides the verdict" if can_guard else "weak links, cannot guard"
    assert flat.count(f"{lead}: ") == 1
    assert f"{lead}: {title} ({len(deciding)})" in flat
    for rank in {r for r in context.values()}:
        assert f"also linked, not counted: {LEVEL_TITLES[Level('parameter', rank)]}" in flat
    assert "parameter/" not in text
    markdown = render_comment(data)
    for tid in context:  # the PR comment lists weaker links only as context
        rows = [ln for ln in markdown.splitlines() if f"`{tid}`" in ln]
        assert rows and all("also linked, not counted" in ln for ln in rows)


def test_a_listed_name_that_names_no_test_never_guards(run_cli, ranked: Path) -> None:  # type: ignore[no-untyped-def]
    """Stale list lines (a parametrization the checkout no longer has) carry the changed token
    and its parameter name: they must neither turn the verdict green nor bring their stages
    into the suggestion (CI ignores them)."""
    stale = NVFP4.format("moe_backend=TRTLLM-cuda_graph=Maybe")
    old = NVFP4.format("moe_backend=TRTLLM-cuda_graph=Never")
    lists = ranked / "tests/integration/test_lists/test-db"
    text = (lists / "l0_h100.yml").read_text()
    (lists / "l0_h100.yml").write_text(text.replace(
        "  tests:\n", f"  tests:\n  - {stale}\n", 1))
    (lists / "l0_a100.yml").write_text(
        f"l0_a100:\n- condition:\n    terms:\n      stage: post_merge\n  tests:\n  - {old}\n")
    with (ranked / "ci/stages.yml").open("a") as f:
        f.write("- {name: DGX_A100-PyTorch-Post-Merge-1, platform: a100, context: l0_a100}\n")
    commit(ranked, "stale lines")
    edit(ranked, "tensorrt_llm/cuda_graph.py", "    if moe_backend == \"TRTLLM\":\n"
         "        return False\n", "")
    commit(ranked)
    code, data = audit(run_cli, ranked)
    b = behaviour(data, "resolve_cuda_graph")
    params = {g["test_id"]: g for g in b["guards"]["parameter"]}
    assert params[stale]["effective"] == params[old]["effective"] == "invalid"
    assert not params[stale]["decides"] and not params[old]["decides"]
    assert (b["verdict"], code, b["decided_by"]["guards"]) == ("post-merge-only", 1, 2)
    assert stale not in b["pre_merge_guards"]
    assert "DGX_A100-PyTorch-Post-Merge-1" not in data["missing_stages"]
    assert "DGX_A100" not in json.dumps(data.get("suggestion"))
    assert all(old not in f["guards"] and stale not in f["guards"] for f in data["findings"])
    # QA 12a: the text's count is the finding's (2), the invalid links said apart.
    text = run_cli("--root", str(ranked), "audit", "--base", "HEAD~1", "--head", "HEAD").out
    flat = " ".join(text.split())
    assert "its 2 guard(s) by a parameter value" in flat
    assert ("decides the verdict: a parameter value and its name are on the changed lines "
            "(2; +2 invalid listed ids, not counted)") in flat


def test_a_value_shared_under_another_parameter_never_guards(run_cli, ranked: Path) -> None:  # type: ignore[no-untyped-def]
    """QA item 2, the trap: an attention-backend change (``backend_name.upper() == "TRTLLM"``)
    whose only links are tests carrying TRTLLM under other parameters' names, an MoE test
    (moe_backend=TRTLLM) and an attention test (attn_backend=TRTLLM), that run pre-merge and
    never call it. Not green: exit 1, the links are weak links, the finding says why."""
    lists = ranked / "tests/integration/test_lists/test-db/l0_h100.yml"
    moe = NVFP4.format("moe_backend=TRTLLM-cuda_graph=True")
    text = lists.read_text().replace(f"  - {moe}\n", "")
    lists.write_text(text.replace("  tests:\n", f"  tests:\n  - {moe}\n", 1))  # pre-merge
    commit(ranked, "the MoE TRTLLM test runs pre-merge")
    edit(ranked, "tensorrt_llm/attention.py", 'if backend_name == "TRTLLM":',
         'if backend_name.upper() == "TRTLLM":')
    commit(ranked)
    code, data = audit(run_cli, ranked)
    b = behaviour(data, "get_attention_backend")
    assert (b["verdict"], code, b["decided_by"]["tier"], b["decided_by"]["rank"]) == (
        "unguarded", 1, "parameter", 3)
    assert b["pre_merge_guards"] == []
    assert set(b["weak_links"]) == {moe, AUTO_DTYPE.format("TRTLLM")}
    assert {g["test_id"] for g in b["guards"]["parameter"] if g["decides"]} == {
        moe, AUTO_DTYPE.format("TRTLLM"), NVFP4.format("moe_backend=TRTLLM-cuda_graph=False")}
    [err] = [f for f in data["findings"] if f["function"] == "get_attention_backend"]
    assert (err["severity"], err["rule"], err["guards"], err["stages"]) == (
        "error", "weak-evidence-only", [], [])
    assert ("only because they share the value TRTLLM (2 of 3 linked parametrizations run "
            "pre-merge)") in err["message"]
    assert "names its parameter" in err["message"] and "--coverage" in err["message"]
    assert data["suggestion"] == {}
    # test_kernels.py carries attn_backend=TRTLLM but does not import tensorrt_llm.attention.
    assert ("1 parametrization(s) name TRTLLM but their test modules do not import "
            "tensorrt_llm.attention; not linked") in data["notes"]


def test_a_head_file_that_does_not_parse_cannot_be_judged(run_cli, ranked: Path) -> None:  # type: ignore[no-untyped-def]
    """QA item 1's other half: a syntax error left in a changed module once became module-tier
    evidence (green, no word of it). Now: an error naming path:line, nothing linked, exit 1."""
    path = ranked / "tensorrt_llm/attention.py"
    path.write_text(path.read_text() + "\n\ndef broken(:\n    pass\n")
    commit(ranked)
    code, data = audit(run_cli, ranked)
    [b] = data["behaviours"]
    assert (b["path"], b["verdict"], b["tier"], b["guards"], code) == (
        "tensorrt_llm/attention.py", "unguarded", None, {}, 1)
    line = path.read_text().splitlines().index("def broken(:") + 1
    [err] = data["findings"]
    assert (err["severity"], err["rule"], err["line"]) == ("error", "unparsable-change", line)
    assert err["message"].startswith(
        f"tensorrt_llm/attention.py:{line}: the changed file does not parse (")
    assert "its behaviour cannot be judged" in err["message"]
    # the fixture has no gate rules: the headline says so (testdb.caveats)
    assert data["summary"]["sentence"].startswith("1 of 1 behaviour change has no pre-merge "
                                                  "guard (gate rules unknown")


def test_a_value_no_importer_carries_says_why_nothing_links(run_cli, ranked: Path) -> None:  # type: ignore[no-untyped-def]
    """QA item 11: parametrizations carry the changed value, but their test modules do not
    import the changed module: not linked, and the finding and a note say so."""
    (ranked / "tensorrt_llm/lonely.py").write_text(
        "def pick(kind):\n    return kind == 'VANILLA'\n")
    commit(ranked, "a module no test imports")
    edit(ranked, "tensorrt_llm/lonely.py", "kind == 'VANILLA'", "kind in ('VANILLA', 'X')")
    commit(ranked)
    code, data = audit(run_cli, ranked)
    b = behaviour(data, "pick")
    assert (b["verdict"], code) == ("unguarded", 1)
    [err] = [f for f in data["findings"] if f["function"] == "pick"]
    assert err["rule"] == "no-guard"
    assert err["message"].endswith("; 1 parametrization(s) name VANILLA but their test modules "
                                   "do not import tensorrt_llm.lonely")
    assert ("1 parametrization(s) name VANILLA but their test modules do not import "
            "tensorrt_llm.lonely; not linked") in data["notes"]
