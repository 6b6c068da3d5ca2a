"""``auditor.diff._rev_facts``: the prefix, head, base and merge base that ``from_git`` reads
from one ``git rev-parse`` are what the four calls it replaces answer, in every shape of
history; where one call cannot say (several merge bases, unrelated histories, a bad
revision) it answers None and ``from_git`` asks one by one."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.diff import _rev_facts, from_git
from testdb.errors import ExternalError
from tests.gitrepo import git, new_repo


def _four_calls(root: Path, base: str, head: str | None) -> tuple[str, str, str, str]:
    head_sha = git(root, "rev-parse", head or "HEAD").strip()
    base_sha = git(root, "rev-parse", base).strip()
    merge_base = git(root, "merge-base", base, head).strip() if head else base_sha
    return git(root, "rev-parse", "--show-prefix").strip(), head_sha, base_sha, merge_base


def _commit(repo: Path, name: str, text: str) -> None:
    (repo / "pkg" / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", name)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """main: base, m1; topic (from base): t1, t2; an annotated tag on base."""
    root = new_repo(tmp_path / "repo", {"pkg/__init__.py": "", "pkg/a.py": "x = 1\n"})
    git(root, "tag", "-a", "v1", "-m", "v1")
    git(root, "checkout", "-qb", "topic")
    _commit(root, "t1.py", "t = 1\n")
    _commit(root, "t2.py", "t = 2\n")
    git(root, "checkout", "-q", "-")
    _commit(root, "m1.py", "m = 1\n")
    return root


@pytest.mark.parametrize(("base", "head", "below"), [
    ("HEAD~1", "HEAD", ""),
    ("HEAD", "topic", ""),  # a merge base that is neither side
    ("topic", "HEAD", "pkg"),  # --root a folder inside the repository
    ("v1", "topic", ""),  # an annotated tag: rev-parse names the tag object, as before
    ("HEAD", "HEAD", ""),
    ("topic~1", None, ""),  # against the work tree
    ("v1", None, "pkg"),
])
def test_one_call_answers_what_four_did(repo: Path, base: str, head: str | None,
                                        below: str) -> None:
    root = repo / below if below else repo
    want = _four_calls(root, base, head)
    assert _rev_facts(str(root), base, head) == want
    change = from_git(str(root), base, head)
    assert (change.head, change.base) == (want[1], want[2])


def test_several_merge_bases_are_asked_one_by_one(repo: Path) -> None:
    """A criss-cross merge has two merge bases: ``git merge-base`` picks one, which the
    single call cannot know."""
    git(repo, "checkout", "-qb", "x", "topic")
    git(repo, "merge", "-q", "--no-edit", "main")
    git(repo, "checkout", "-qb", "y", "main")
    git(repo, "merge", "-q", "--no-edit", "topic")
    _commit(repo, "y.py", "y = 1\n")
    git(repo, "checkout", "-q", "x")
    _commit(repo, "x.py", "x = 1\n")
    assert len(git(repo, "merge-base", "--all", "x", "y").split()) == 2
    assert _rev_facts(str(repo), "x", "y") is None
    change = from_git(str(repo), "x", "y")
    assert change.head == git(repo, "rev-parse", "y").strip()


def test_unrelated_histories_and_bad_revisions_fail_as_before(repo: Path) -> None:
    git(repo, "checkout", "-q", "--orphan", "other")
    _commit(repo, "o.py", "o = 1\n")
    assert _rev_facts(str(repo), "main", "other") is None
    with pytest.raises(ExternalError, match="no merge base"):
        from_git(str(repo), "main", "other")
    assert _rev_facts(str(repo), "no-such-rev", "main") is None
    with pytest.raises(ExternalError, match="git diff"):
        from_git(str(repo), "no-such-rev", "main")
