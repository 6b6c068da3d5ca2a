"""Inputs that once ended in a silent exit 0 (issue 13, section 4): a file that is no diff, a
CRLF diff, an empty diff, a root that is no git repository, relative coverage paths, a --root
without test lists. Real git repositories and real coverage.py runs in temp dirs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.auditor.test_audit import CREATOR, behaviour, commit, edit, guard_ids, repo
from tests.conftest import EXAMPLE, REPO

__all__ = ["repo"]  # the fixture, imported for these tests

PR = os.path.join(EXAMPLE, "pr.diff")

NOT_A_DIFF = {
    "prose": "This PR makes FlashInfer skip block reuse.\nPlease review.\n",
    "html": "<!doctype html>\n<html><body><pre>diff of the PR</pre></body></html>\n",
    "json": json.dumps({"schema": "testdb-audit/audit@1", "findings": []}, indent=2) + "\n",
    "a git log": "commit 0123456789abcdef\nAuthor: a <a@b>\n\n    Fix the thing\n",
}


@pytest.mark.parametrize("kind", sorted(NOT_A_DIFF))
def test_a_file_that_holds_no_diff_is_exit_2(run_cli, tmp_path: Path, kind: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "change.diff"
    path.write_text(NOT_A_DIFF[kind])
    res = run_cli("--root", EXAMPLE, "audit", "--diff", str(path))
    assert res.code == 2, res.out
    assert f"{path}:1: not a unified diff" in res.err
    assert "git diff" in res.err and "Traceback" not in res.err


@pytest.mark.parametrize("text", ["", "\n", "\n\n  \n"])
def test_an_empty_diff_is_no_change_and_says_so(run_cli, tmp_path: Path, text: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "empty.diff"
    path.write_text(text)
    res = run_cli("--root", EXAMPLE, "audit", "--diff", str(path), "--format", "json")
    assert res.code == 0, res.err
    data = json.loads(res.out)
    assert data["behaviours"] == [] and data["findings"] == []
    assert "the change is empty: no file differs" in data["notes"]
    text_out = run_cli("--root", EXAMPLE, "audit", "--diff", str(path)).out
    assert "note: the change is empty: no file differs" in text_out


def test_a_crlf_diff_reads_as_its_lf_form(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lf = Path(PR).read_bytes()
    crlf = tmp_path / "pr-crlf.diff"
    crlf.write_bytes(lf.replace(b"\n", b"\r\n"))
    runs = []
    for path in (PR, str(crlf)):
        res = run_cli("--root", EXAMPLE, "audit", "--diff", path, "--format", "json")
        assert res.code == 0, res.err
        data = json.loads(res.out)
        data["provenance"].pop("diff")
        runs.append(data)
    assert runs[0] == runs[1]
    b = behaviour(runs[1], "create_py_executor")
    assert b["status"] == "modified" and b["verdict"] == "pre-merge"
    assert not [u for u in runs[1]["unlinked"] if u["status"] == "renamed"]


def test_base_in_a_root_that_is_no_git_repository(run_cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "plain"
    shutil.copytree(EXAMPLE, root)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    res = run_cli("--root", str(root), "audit", "--base", "origin/main")
    assert res.code == 2
    assert res.err.strip() == f"error: {root} is not a git repository; use --diff FILE"


def test_relative_coverage_paths_resolve_against_the_root(run_cli, repo: Path,  # type: ignore[no-untyped-def]
                                                          tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """coverage.py with ``relative_files = True`` (CI's portable form) records
    ``tensorrt_llm/...`` relative to the checkout; the audit runs from somewhere else."""
    edit(repo, CREATOR, "    max_tokens: int = 8192", "    max_tokens: int = 4096")
    commit(repo)
    (repo / ".coveragerc").write_text("[run]\nrelative_files = True\n")
    test = "unittest/_torch/executor/test_executor_config.py::test_summary"
    subprocess.run([sys.executable, "-m", "coverage", "run", "--rcfile=.coveragerc",
                    f"--context=tests/{test}|run", "-m", "pytest", "-q", "-p",
                    "no:cacheprovider", f"tests/{test}"], cwd=repo, check=True,
                   capture_output=True, env={**os.environ, "PYTHONPATH": str(repo)})
    from coverage import CoverageData

    data_file = repo / ".coverage"
    cov = CoverageData(basename=str(data_file))
    cov.read()
    assert CREATOR in cov.measured_files()  # stored relative, as CI stores it
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    res = run_cli("--root", str(repo), "audit", "--base", "HEAD~1", "--head", "HEAD",
                  "--coverage", str(data_file), "--format", "json")
    assert res.code == 0, res.err
    b = behaviour(json.loads(res.out), "KvCacheConfig")
    assert b["tier"] == "coverage" and guard_ids(b, "coverage") == {test}


def test_coverage_is_a_runtime_dependency() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((Path(REPO) / "pyproject.toml").read_text())["project"]
    assert any(d.split(">")[0].split("=")[0].strip() == "coverage"
               for d in project["dependencies"])


COMMANDS = [
    ["stats"], ["where", "test_x"], ["lint"], ["audit", "--diff", PR],
    ["comment", "--diff", PR], ["report", "--html", "{tmp}/report"], ["inventory"],
    ["launch", "test_x", "--dry-run"], ["promote", "test_x", "--dry-run"],
    ["demote", "test_x", "--dry-run"],
]


@pytest.mark.parametrize("lists_dir", [False, True], ids=["no-lists-dir", "empty-lists-dir"])
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
def test_a_root_without_test_lists_is_exit_2_for_every_command(  # type: ignore[no-untyped-def]
        run_cli, tmp_path: Path, argv: list[str], lists_dir: bool) -> None:
    root = tmp_path / "not-a-checkout"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("x = 1\n")
    if lists_dir:
        (root / "tests/integration/test_lists/test-db").mkdir(parents=True)
    res = run_cli("--root", str(root), *[a.format(tmp=tmp_path) for a in argv])
    assert res.code == 2, (res.out, res.err)
    assert f"no test lists under {root}; pass --root" in res.err
    assert not (tmp_path / "report").exists()
