"""``audit --base --head`` answers are kept (reports.audit_memo): the same audit asked again is
read back, and any input that can change the answer is in the key, so no kept answer stands
for another audit. The traps: a guard that was pre-merge stops being so while both commits
stay the same (the stage table outside the checkout edited in place, another /bot run), and
the kept answer must not keep the verdict green. Real git repositories in temp dirs; each
case is checked against the same audit with an empty cache."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import auditor.audit
import testdb.stamp
from auditor.diff import Change, FileChange
from reports import audit_memo
from tests.audits import behaviour, empty_cache
from tests.gitrepo import git, new_repo

FILES = {
    "tensorrt_llm/__init__.py": "",
    "tensorrt_llm/core.py": """\
        def step(x):
            return x + 1
        """,
    # test_a names step: the symbol tier links it, and it can guard.
    "tests/integration/defs/test_a.py": """\
        from tensorrt_llm.core import step


        def test_a():
            assert step(1) == 2
        """,
    "tests/integration/test_lists/test-db/l0_a10.yml": """\
        version: 0.0.1
        l0_a10:
        - condition:
            terms: {stage: pre_merge, backend: pytorch}
          tests:
          - test_a.py::test_a
        """,
    "tests/integration/test_lists/waives.txt": "",
}
PRE_MERGE_STAGES = """\
stages:
- {name: A10-PyTorch-1, platform: a10, context: l0_a10}
"""
POST_MERGE_ONLY_STAGES = """\
stages:
- {name: A10-PyTorch-Post-Merge-1, platform: a10, context: l0_a10}
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path / "cache"))  # this test's answers
    root = new_repo(tmp_path / "repo", FILES)
    core = root / "tensorrt_llm/core.py"
    core.write_text(core.read_text().replace("x + 1", "x + 2"))
    git(root, "commit", "-qam", "step by two")
    (tmp_path / "stages.yml").write_text(PRE_MERGE_STAGES)
    return root


def audit(run_cli: Any, repo: Path, *extra: str, fmt: str = "json", cache: bool = True) -> Any:
    got = run_cli("--root", str(repo), "--stages", str(repo.parent / "stages.yml"),
                  *(() if cache else ("--no-cache",)), "audit",
                  "--base", "HEAD~1", "--head", "HEAD", "--format", fmt, *extra)
    assert got.code in (0, 1), got.err
    return json.loads(got.out) if fmt == "json" else (got.code, got.out)


def cold(run_cli: Any, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
         *extra: str) -> Any:
    """The same audit with an empty cache."""
    with empty_cache(monkeypatch, tmp_path):
        return audit(run_cli, repo, *extra)


def kept() -> list[Path]:
    return sorted(Path(os.environ["TESTDB_CACHE_DIR"]).glob("audit-*.marshal"))


def step_of(data: dict[str, Any]) -> dict[str, Any]:
    return behaviour(data, "step")


def refuse_to_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the audit was judged afresh")

    monkeypatch.setattr(auditor.audit, "run_audit", refuse)


def test_the_same_audit_is_read_back(run_cli, repo: Path,  # type: ignore[no-untyped-def]
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    first = audit(run_cli, repo)
    text = audit(run_cli, repo, fmt="text")
    assert (step_of(first)["tier"], step_of(first)["verdict"]) == ("symbol", "pre-merge")
    assert len(kept()) == 1  # one answer, whatever the format it is printed in
    refuse_to_judge(monkeypatch)
    assert audit(run_cli, repo) == first
    assert audit(run_cli, repo, fmt="text") == text


def test_a_stage_table_edited_in_place_is_judged_afresh(  # type: ignore[no-untyped-def]
        run_cli, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert step_of(audit(run_cli, repo))["verdict"] == "pre-merge"
    # The same two commits; the stage table outside the checkout now has only the post-merge
    # stage: test_a's block runs in no stage this PR starts.
    (tmp_path / "stages.yml").write_text(POST_MERGE_ONLY_STAGES)
    warm = audit(run_cli, repo)
    assert warm == cold(run_cli, repo, tmp_path, monkeypatch)
    assert step_of(warm)["verdict"] != "pre-merge"
    assert len(kept()) == 2


def test_another_bot_command_is_judged_afresh(  # type: ignore[no-untyped-def]
        run_cli, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "stages.yml").write_text(PRE_MERGE_STAGES + POST_MERGE_ONLY_STAGES.replace(
        "stages:\n", ""))
    assert step_of(audit(run_cli, repo))["verdict"] == "pre-merge"
    bot = ("--bot-command", "/bot run --stage-list A10-PyTorch-Post-Merge-1")
    warm = audit(run_cli, repo, *bot)
    assert warm == cold(run_cli, repo, tmp_path, monkeypatch, *bot)
    assert step_of(warm)["verdict"] != "pre-merge"  # only the post-merge stage starts


def test_no_cache_neither_reads_nor_writes_it(run_cli, repo: Path) -> None:  # type: ignore[no-untyped-def]
    first = audit(run_cli, repo, cache=False)
    assert kept() == []
    # An answer kept under this audit's key, altered: read back with the cache, not without.
    audit(run_cli, repo)
    [path] = kept()
    key = path.name.removeprefix("audit-").removesuffix(".marshal")
    got = audit_memo.get(key)
    assert got is not None
    data, diags = got
    data["notes"] = ["altered"]
    audit_memo.put(key, data, diags)
    assert audit(run_cli, repo)["notes"] == ["altered"]
    assert audit(run_cli, repo, cache=False) == first


def test_a_damaged_answer_is_a_miss(run_cli, repo: Path) -> None:  # type: ignore[no-untyped-def]
    first = audit(run_cli, repo)
    [path] = kept()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert audit_memo.get(path.name.removeprefix("audit-").removesuffix(".marshal")) is None
    assert audit(run_cli, repo) == first


BASE_CHANGE = Change("/r", "b" * 40, "h" * 40, [FileChange("a.py", "a.py", frozenset({2}),
                                                           frozenset({2}), "x\n", "y\n")],
                     source="git")
BASE_ARGS: dict[str, Any] = {"root": "/r", "options_key": "k", "coverage": None,
                             "bot_command": None}


@pytest.mark.parametrize(("what", "change", "args"), [
    ("another head", replace(BASE_CHANGE, head="i" * 40), {}),
    ("another base", replace(BASE_CHANGE, base="c" * 40), {}),
    ("another changed line", replace(BASE_CHANGE, files=[
        replace(BASE_CHANGE.files[0], added=frozenset({3}))]), {}),
    ("another old text", replace(BASE_CHANGE, files=[
        replace(BASE_CHANGE.files[0], old_text="z\n")]), {}),
    ("another new text", replace(BASE_CHANGE, files=[
        replace(BASE_CHANGE.files[0], new_text="z\n")]), {}),
    ("a rename", replace(BASE_CHANGE, files=[
        replace(BASE_CHANGE.files[0], old_path="b.py")]), {}),
    ("a file outside --root", replace(BASE_CHANGE, outside_root=("x/y.py",)), {}),
    ("another root", BASE_CHANGE, {"root": "/s"}),
    ("other plan inputs", BASE_CHANGE, {"options_key": "l"}),
    ("a bot command", BASE_CHANGE, {"bot_command": "/bot run"}),
])
def test_every_input_is_in_the_key(what: str, change: Change, args: dict[str, Any]) -> None:
    assert audit_memo.memo_key(change, **{**BASE_ARGS, **args}) != audit_memo.memo_key(
        BASE_CHANGE, **BASE_ARGS), what


def test_coverage_data_and_code_are_in_the_key(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / ".coverage"
    data.write_bytes(b"one")
    first = audit_memo.memo_key(BASE_CHANGE, **{**BASE_ARGS, "coverage": str(data)})
    assert first != audit_memo.memo_key(BASE_CHANGE, **BASE_ARGS)
    data.write_bytes(b"two")  # the same path, other data
    assert audit_memo.memo_key(BASE_CHANGE, **{**BASE_ARGS, "coverage": str(data)}) != first
    data.unlink()  # unreadable: not memoized (the audit says what is wrong)
    assert audit_memo.memo_key(BASE_CHANGE, **{**BASE_ARGS, "coverage": str(data)}) is None
    before = audit_memo.memo_key(BASE_CHANGE, **BASE_ARGS)
    # a module of a subpackage edited (an editable install): another key
    real = testdb.stamp.code_stamp
    monkeypatch.setattr(testdb.stamp, "code_stamp", lambda d: real(d) + (
        ":edited" if d.endswith(os.path.join("auditor", "replay")) else ""))
    assert audit_memo.memo_key(BASE_CHANGE, **BASE_ARGS) != before
