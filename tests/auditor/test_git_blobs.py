"""`audit --base` reads every changed file's two sides with one `git cat-file --batch`: the
texts are the ones `git show REV:./PATH` gives (decoded, newlines translated as before), a
side that does not exist is None, and --root may be a folder inside the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.diff import _git_show, _git_show_many, from_git
from tests.auditor.test_audit import git

FILES = {  # name: (base content, head content); None: absent on that side
    "pkg/plain.py": (b"def f():\n    return 1\n", b"def f():\n    return 2\n"),
    "pkg/crlf.py": (b"x = 1\r\ny = 2\r\n", b"x = 1\r\ny = 3\r\n"),
    "pkg/with space.py": (b"a = 1\n", b"a = 2\n"),
    "pkg/added.py": (None, b"new = True\n"),
    "pkg/removed.py": (b"gone = True\n", None),
    "pkg/empty.py": (b"", b"now = 'not empty'\n"),
    "pkg/no_newline.py": (b"v = 1", b"v = 2"),
}


def _write(top: Path, side: int) -> None:
    for name, contents in FILES.items():
        path = top / "sub" / name.encode("latin-1").decode("utf-8")
        if contents[side] is None:
            path.unlink(missing_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(contents[side])  # type: ignore[arg-type]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    top = tmp_path / "repo"
    top.mkdir()
    _write(top, 0)
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "base")
    _write(top, 1)
    git(top, "add", "-A")
    git(top, "commit", "-qm", "head")
    return top


@pytest.mark.parametrize("root", [".", "sub"])
def test_both_sides_are_what_git_show_gives(repo: Path, root: str) -> None:
    here = str(repo / root)
    change = from_git(here, "HEAD~1", "HEAD")
    prefix = "sub/" if root == "." else ""
    assert {f.path for f in change.files} == {
        prefix + n.encode("latin-1").decode("utf-8") for n in FILES}
    for f in change.files:
        want_old = _git_show(here, "HEAD~1", f.old_path) if f.old_path else None
        want_new = _git_show(here, "HEAD", f.new_path) if f.new_path else None
        assert (f.old_text, f.new_text) == (want_old, want_new), f.path
    sides = {f.path.rsplit("/", 1)[-1]: (f.old_text, f.new_text) for f in change.files}
    assert sides["added.py"] == (None, "new = True\n")
    assert sides["removed.py"] == ("gone = True\n", None)
    assert sides["with space.py"] == ("a = 1\n", "a = 2\n")
    assert sides["no_newline.py"] == ("v = 1", "v = 2")
    crlf = next(f for f in change.files if f.path.endswith("crlf.py"))
    assert crlf.new_text == "x = 1\ny = 3\n"  # as subprocess's text mode has always read it


def test_missing_revisions_and_paths_are_none(repo: Path) -> None:
    wanted = [("HEAD", "sub/pkg/plain.py"), ("HEAD", "sub/pkg/nothing here.py"),
              ("no-such-rev", "sub/pkg/plain.py"), ("HEAD~1", "sub/pkg/removed.py"),
              ("HEAD", "sub/pkg/removed.py")]
    assert _git_show_many(str(repo), wanted) == [_git_show(str(repo), r, p) for r, p in wanted]
    assert _git_show_many(str(repo), wanted)[:2] == ["def f():\n    return 2\n", None]
