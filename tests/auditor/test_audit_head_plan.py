"""``audit --base X --head Y`` judges with the test plan and the test sources of Y, read from git
objects (a scratch tree, as replay's), never from the work tree; without --head, the work tree."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.auditor.test_audit import CHUNKED, CREATOR, behaviour, commit, edit, git
from tests.conftest import EXAMPLE

L0_H100 = "tests/integration/test_lists/test-db/l0_h100.yml"
TESTS = "tests/integration/defs/accuracy/test_llm_api_pytorch.py"
STAGES = "ci/stages.yml"
TRTLLM_LINE = f"  - {CHUNKED.format('TRTLLM')} TIMEOUT (90)\n"
POST_MERGE_AT = f"  - {CHUNKED.format('FLASHINFER')} TIMEOUT (90)\n"  # in the post_merge block


def _history(root: Path, top: Path | None = None) -> None:
    """In a repository at ``top`` (default: ``root``) holding the checkout ``root``: base; PR: a
    change the TRTLLM chunked-prefill test guards pre-merge; then a later commit that demotes
    that test to the post_merge block."""
    git(top or root, "init", "-q", "-b", "main")
    commit(root, "base")
    edit(root, CREATOR, "if attn_backend in (AttentionBackend.FLASHINFER,",
         "if attn_backend in (AttentionBackend.FLASHINFER, AttentionBackend.TRTLLM,")
    commit(root, "PR: TRTLLM reuses blocks too")
    text = (root / L0_H100).read_text()
    assert TRTLLM_LINE in text and POST_MERGE_AT in text
    (root / L0_H100).write_text(text.replace(TRTLLM_LINE, "").replace(
        POST_MERGE_AT, POST_MERGE_AT + TRTLLM_LINE))
    commit(root, "later: demote the TRTLLM chunked-prefill test")


@pytest.fixture
def history(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("*.diff", "README.md"))
    _history(root)
    return root


def _state(repo: Path) -> tuple[str, str]:
    return git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain", "--untracked=all")


def _sha256_at(repo: Path, rev: str, path: str) -> str:
    return hashlib.sha256(git(repo, "show", f"{rev}:./{path}").encode()).hexdigest()


def test_head_reads_the_plan_and_the_sources_of_head_not_the_work_tree(run_cli, history: Path
                                                                        ) -> None:  # type: ignore[no-untyped-def]
    # The work tree is at the later commit and dirty besides: the test file is gone and the
    # stage table is garbage. Neither may change the audit of the earlier range.
    (history / TESTS).unlink()
    (history / STAGES).write_text("stages: [unclosed\n")
    before = _state(history)
    pr = git(history, "rev-parse", "HEAD~1").strip()
    res = run_cli("--root", str(history), "--stages", str(history / STAGES), "audit",
                  "--base", "HEAD~2", "--head", "HEAD~1", "--format", "json")
    assert res.code == 0, res.err
    data = json.loads(res.out)
    b = behaviour(data, "create_py_executor")
    # pre-merge at the PR's head, whatever the later commit did to the list
    assert CHUNKED.format("TRTLLM") in b["pre_merge_guards"] and b["verdict"] == "pre-merge"
    prov = data["provenance"]
    assert prov["head"] == pr and prov["plan_from"] == pr
    assert prov["root"] == str(history)
    assert prov["data_files"][L0_H100] == _sha256_at(history, pr, L0_H100)
    assert prov["data_files"][STAGES] == _sha256_at(history, pr, STAGES)
    assert not any(f["rule"] == "guard-demoted" for f in data["findings"])
    assert "replay" not in res.out and "slot" not in res.out  # no scratch path leaks out
    assert _state(history) == before  # HEAD and the work tree untouched


def test_the_later_range_sees_the_demotion(run_cli, history: Path) -> None:  # type: ignore[no-untyped-def]
    git(history, "checkout", "-q", "HEAD~2")  # the work tree elsewhere: the earlier base
    res = run_cli("--root", str(history), "audit", "--base", "main~1", "--head", "main",
                  "--format", "json")
    data = json.loads(res.out)
    assert any(f["rule"] == "guard-demoted" for f in data["findings"]), res.err
    main = git(history, "rev-parse", "main").strip()
    assert data["provenance"]["plan_from"] == main
    assert data["provenance"]["data_files"][L0_H100] == _sha256_at(history, main, L0_H100)


def test_without_head_the_plan_is_the_work_tree(run_cli, history: Path) -> None:  # type: ignore[no-untyped-def]
    # An uncommitted edit of the list: base against the work tree judges with it.
    text = (history / L0_H100).read_text()
    (history / L0_H100).write_text(text.replace("TIMEOUT (90)\n", "TIMEOUT (91)\n", 1))
    res = run_cli("--root", str(history), "audit", "--base", "HEAD~2", "--format", "json")
    assert res.code in (0, 1), res.err
    prov = json.loads(res.out)["provenance"]
    assert prov["plan_from"] == "work tree"
    assert prov["data_files"][L0_H100] == hashlib.sha256(
        (history / L0_H100).read_bytes()).hexdigest()


def test_head_with_root_below_the_top_of_the_repository(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    top = tmp_path / "mono"
    shutil.copytree(EXAMPLE, top / "trtllm", ignore=shutil.ignore_patterns("*.diff", "README.md"))
    (top / "README.md").write_text("a repository holding the checkout in a folder\n")
    _history(top / "trtllm", top)
    res = run_cli("--root", str(top / "trtllm"), "audit", "--base", "HEAD~2", "--head", "HEAD~1",
                  "--format", "json")
    assert res.code == 0, res.err
    data = json.loads(res.out)
    assert CHUNKED.format("TRTLLM") in behaviour(data, "create_py_executor")["pre_merge_guards"]


def test_a_plan_file_given_inside_the_checkout_but_not_in_head_is_exit_2(run_cli, history: Path
                                                                          ) -> None:  # type: ignore[no-untyped-def]
    shutil.copy(history / STAGES, history / "ci/mine.yml")  # untracked: in no commit's tree
    res = run_cli("--root", str(history), "--stages", str(history / "ci/mine.yml"), "audit",
                  "--base", "HEAD~2", "--head", "HEAD~1")
    assert res.code == 2 and res.out == ""
    assert res.err.startswith("error: ci/mine.yml: --stages ci/mine.yml is not in the tree of ")
    assert res.err.rstrip().endswith("commit the file, or give a path outside the checkout")
