"""The module tier's file parts are kept between audits (auditor.part_memo): a warm audit
reads them back instead of judging thousands of links, and gives the cold answer; a part is
never used for other items (a test file changed), another plan or another pipeline (a git
repo in a temp dir; each case is checked against a cold audit with an empty cache)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import auditor.linking
from tests.audits import behaviour, empty_cache
from tests.gitrepo import git, new_repo

FILES = {
    "tensorrt_llm/__init__.py": "",
    "tensorrt_llm/core.py": """\
        def step(x):
            return x + 1


        def other(n):
            return n > 0
        """,
    # Both test modules import core and neither names step: only the module tier links.
    "tests/integration/defs/test_a.py": """\
        import pytest

        from tensorrt_llm import core


        @pytest.mark.parametrize("n", [1, 2])
        def test_a(n):
            assert core.other(n)
        """,
    "tests/integration/defs/test_b.py": """\
        from tensorrt_llm import core


        def test_b():
            assert core.other(1)
        """,
    "tests/integration/test_lists/test-db/l0_a10.yml": """\
        version: 0.0.1
        l0_a10:
        - condition:
            terms: {stage: pre_merge, backend: pytorch}
          tests:
          - test_a.py::test_a[1]
        - condition:
            terms: {stage: post_merge, backend: pytorch}
          tests:
          - test_b.py::test_b
        """,
    "tests/integration/test_lists/waives.txt": "",
    "ci/stages.yml": """\
        stages:
        - {name: A10-PyTorch-1, platform: a10, context: l0_a10}
        - {name: A10-PyTorch-Post-Merge-1, platform: a10, context: l0_a10}
        """,
}
CORE = "tensorrt_llm/core.py"
TEST_A = "tests/integration/defs/test_a.py"



def change(repo: Path, rel: str, old: str, new: str, message: str) -> None:
    p = repo / rel
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new))
    git(repo, "commit", "-qam", message)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = new_repo(tmp_path / "repo", FILES)
    change(root, CORE, "return x + 1", "return x + 2", "step by two")
    return root


def audit(run_cli: Any, repo: Path, base: str = "HEAD~1", *extra: str) -> dict[str, Any]:
    # The same audit asked again is read back whole (reports.audit_memo): forgotten here, so
    # that each audit judges, and the part memo is what is tested.
    for kept in Path(os.environ["TESTDB_CACHE_DIR"]).glob("audit-*.marshal"):
        kept.unlink()
    got = run_cli("--root", str(repo), "audit", "--base", base, "--head", "HEAD",
                  "--format", "json", *extra)
    assert got.code in (0, 1), got.err
    data: dict[str, Any] = json.loads(got.out)
    return data


def cold(run_cli: Any, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
         *args: str) -> dict[str, Any]:
    """The same audit with an empty cache."""
    with empty_cache(monkeypatch, tmp_path):
        return audit(run_cli, repo, *args)


def step_of(data: dict[str, Any]) -> dict[str, Any]:
    return behaviour(data, "step")


def refuse_module_links(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("the module tier was judged afresh")

    monkeypatch.setattr(auditor.linking, "module_links", refuse)


def test_a_warm_audit_reads_the_module_tier_back(run_cli, repo: Path,  # type: ignore[no-untyped-def]
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    first = audit(run_cli, repo)
    b = step_of(first)
    # the trap stays shut when warm too: importing the module guards nothing
    assert (b["tier"], b["verdict"]) == ("module", "unguarded")
    assert b["weak_links"] == ["test_a.py::test_a[1]"]
    refuse_module_links(monkeypatch)
    assert audit(run_cli, repo) == first


def test_a_changed_test_file_is_judged_afresh(run_cli, repo: Path, tmp_path: Path,  # type: ignore[no-untyped-def]
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    before = step_of(audit(run_cli, repo))
    # The same plan and pipeline, but test_a[1] is gone: its listed line names no test now;
    # then step changes again (the diff audited holds no test file: the module tier decides).
    change(repo, TEST_A, "[1, 2]", "[2, 3]", "other parameters")
    change(repo, CORE, "return x + 2", "return x + 3", "step by three")
    warm = audit(run_cli, repo)
    assert warm == cold(run_cli, repo, tmp_path, monkeypatch)
    after = step_of(warm)
    assert before["weak_links"] == ["test_a.py::test_a[1]"] and after["weak_links"] == []
    assert after["verdict"] == "post-merge-only"  # test_b, post-merge, is all that runs


def test_another_pipeline_is_another_memo(run_cli, repo: Path, tmp_path: Path,  # type: ignore[no-untyped-def]
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    audit(run_cli, repo)
    bot = ("--bot-command", "/bot run --stage-list A10-PyTorch-Post-Merge-1")
    warm = audit(run_cli, repo, "HEAD~1", *bot)
    assert warm == cold(run_cli, repo, tmp_path, monkeypatch, "HEAD~1", *bot)
    # only the post-merge stage starts: test_b runs in this pipeline, test_a[1] does not
    assert step_of(warm)["weak_links"] == ["test_b.py::test_b"]


def test_another_plan_is_another_memo(run_cli, repo: Path, tmp_path: Path,  # type: ignore[no-untyped-def]
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert step_of(audit(run_cli, repo))["weak_links"] == ["test_a.py::test_a[1]"]
    # the plan waives test_a[1]; then step changes again (no list in the diff)
    (repo / "tests/integration/test_lists/waives.txt").write_text(
        "test_a.py::test_a[1] SKIP (https://nvbugs/1)\n")
    git(repo, "commit", "-qam", "waive test_a[1]")
    change(repo, CORE, "return x + 2", "return x + 3", "step by three")
    warm = audit(run_cli, repo)
    assert warm == cold(run_cli, repo, tmp_path, monkeypatch)
    b = step_of(warm)
    assert (b["tier"], b["verdict"], b["weak_links"]) == ("module", "post-merge-only", [])


def test_a_damaged_memo_is_a_miss(run_cli, repo: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first = audit(run_cli, repo)
    memos = list(Path(os.environ["TESTDB_CACHE_DIR"]).rglob("parts-*.marshal"))
    assert memos
    for m in memos:
        data = bytearray(m.read_bytes())
        data[len(data) // 2] ^= 0xFF
        m.write_bytes(bytes(data))
    assert audit(run_cli, repo) == first
