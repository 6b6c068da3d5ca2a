"""git's first answers to an audit of a commit range, asked before click loads
(``auditor.gitearly``): the command line's shape is read exactly as click will read it, or not
at all; ``from_git`` gives the same Change whether its commands were started early or not; a
command started for another directory or other revisions is never taken for this one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditor import gitearly
from auditor.diff import from_git
from reports.warm import range_of
from tests.auditor.test_audit import CREATOR, commit, edit, repo

__all__ = ["repo"]  # the fixture (the example's base tree as a repo)
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("argv", "shape"), [
    (["audit", "--base", "B", "--head", "H"], (".", "B", "H")),
    (["--root", "R", "audit", "--base=B", "--head=H", "--format", "json"], ("R", "B", "H")),
    (["--root=R", "audit", "--base", "B"], ("R", "B", None)),
    (["audit", "--base", "B", "--root", "R"], ("R", "B", None)),  # --root after the command
    (["--no-cache", "--stages", "S", "audit", "--head", "H", "--base", "B"], (".", "B", "H")),
    (["audit", "--base", "B", "--head", ""], (".", "B", None)),  # an empty --head: work tree
    (["audit", "--diff", "p.diff"], None),
    (["audit", "--base", "B", "--diff", "p.diff"], None),  # click refuses it: nothing started
    (["audit", "--diff=p.diff", "--base", "B"], None),
    (["audit", "--head", "H"], None),
    (["audit", "--base"], None),
    (["audit", "--base", "B", "--", "x"], None),
    (["comment", "--base", "B"], None),
    (["where", "--base", "B"], None),
    (["--root"], None),
    ([], None),
])
def test_the_shape_is_read_as_click_reads_it_or_not_at_all(
        argv: list[str], shape: tuple[str, str, str | None] | None) -> None:
    assert range_of(argv) == shape


@pytest.fixture
def changed(repo: Path) -> Path:
    edit(repo, CREATOR, "enable_block_reuse = False", "enable_block_reuse = True")
    commit(repo)
    return repo


@pytest.mark.parametrize("head", ["HEAD", None])
def test_started_early_or_not_the_change_is_the_same(changed: Path, head: str | None) -> None:
    root = str(changed)
    plain = from_git(root, "HEAD~1", head)
    gitearly.start(root, "HEAD~1", head)
    assert len(gitearly._STARTED) == 2
    early = from_git(root, "HEAD~1", head)
    assert not gitearly._STARTED  # both taken
    assert early == plain and early.files


def test_a_command_started_for_another_root_or_range_is_not_taken(changed: Path) -> None:
    root = str(changed)
    gitearly.start(root + "/", "HEAD~1", "HEAD")  # the same checkout, spelled otherwise
    gitearly.start(root, "HEAD", "HEAD~1")  # the other direction
    try:
        got = from_git(root, "HEAD~1", "HEAD")
        assert got == from_git(root, "HEAD~1", "HEAD") and len(gitearly._STARTED) == 4
    finally:
        for proc in gitearly._STARTED.values():
            proc.communicate()
        gitearly._STARTED.clear()


def test_a_failed_early_command_fails_as_the_plain_one(changed: Path) -> None:
    gitearly.start(str(changed), "no-such-rev", "HEAD")
    with pytest.raises(Exception, match="git diff") as early:
        from_git(str(changed), "no-such-rev", "HEAD")
    with pytest.raises(Exception, match="git diff") as plain:
        from_git(str(changed), "no-such-rev", "HEAD")
    assert str(early.value) == str(plain.value) and not gitearly._STARTED


def test_the_console_script_answers_as_the_in_process_command(run_cli, changed: Path,  # type: ignore[no-untyped-def]
                                                              tmp_path: Path) -> None:
    args = ["--root", str(changed), "audit", "--base", "HEAD~1", "--head", "HEAD", "--format",
            "json"]
    inside = run_cli(*args)
    env = {**os.environ, "TESTDB_CACHE_DIR": str(tmp_path / "console-cache"),
           "PYTHONPATH": str(REPO)}
    console = subprocess.run([sys.executable, "-m", "reports", *args], capture_output=True,
                             text=True, env=env, cwd=tmp_path, check=False)
    assert console.returncode == inside.code, console.stderr
    assert json.loads(console.stdout) == json.loads(inside.out)
