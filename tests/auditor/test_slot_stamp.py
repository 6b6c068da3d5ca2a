"""The scratch tree's stamp (auditor.replay.gitsource.ScratchTree): a slot proven unchanged by
stat alone is taken as it is, without the walk; a slot edited behind its back in any way is
still put right (the stamp only ever sends it back to the walk), and a slot written within
the racy window is not stamped at all."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from auditor.replay import gitsource
from auditor.replay.gitsource import ScratchTree, tree_of
from testdb import stamp
from tests.gitrepo import git, new_repo

FILES = {
    "README.md": "top\n",
    "pkg/__init__.py": "",
    "pkg/mod.py": "def f(x):\n    return x + 1\n",
    "tests/integration/defs/test_a.py": "def test_a():\n    assert True\n",
    "tests/integration/defs/sub/test_b.py": "def test_b():\n    assert 1\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = new_repo(tmp_path / "repo", FILES)
    os.symlink("mod.py", root / "pkg" / "alias.py")  # a link in the tree: a file of the slot
    git(root, "add", "-A")
    git(root, "commit", "-qm", "link")
    return root


@pytest.fixture
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests write a slot and stamp it within milliseconds: the 2 s window would keep it
    from being stamped (that rule has its own test below)."""
    monkeypatch.setattr(gitsource, "RACY_NS", 0)


def _content(root: Path) -> dict[str, str]:
    """Every file and link of a slot (but its manifest): its text, or where a link points."""
    out: dict[str, str] = {}
    for d, dirs, names in os.walk(root):
        for n in [*names, *(x for x in dirs if os.path.islink(os.path.join(d, x)))]:
            full = os.path.join(d, n)
            rel = os.path.relpath(full, root)
            if rel.startswith(".testdb-replay-tree"):
                continue
            out[rel] = ("-> " + os.readlink(full)) if os.path.islink(full) else Path(
                full).read_text()
    return out


def _stamped_slot(repo: Path, base: str) -> tuple[str, dict[str, str], str]:
    """A slot holding HEAD, verified once more so that it is stamped: (tree, content, root)."""
    tree = tree_of(str(repo), "HEAD")
    first = ScratchTree(str(repo), base)
    first.checkout(tree)
    first.close()
    time.sleep(0.05)  # past a coarse clock's tick: an edit below changes a time stamp
    again = ScratchTree(str(repo), base)  # the walk finds it as its manifest says: stamped
    assert again.checkout(tree) == []
    again.close()
    assert os.path.exists(again._stamp_path)
    time.sleep(0.05)
    return tree, _content(Path(again.root)), again.root


def _refuse_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    def walk(_self: ScratchTree) -> None:
        raise AssertionError("the slot was walked although its stamp holds")

    monkeypatch.setattr(ScratchTree, "_verify", walk)


def test_an_unchanged_slot_is_taken_from_its_stamp(repo: Path, tmp_path: Path,
                                                   no_racy_window: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    tree, want, root = _stamped_slot(repo, str(tmp_path / "trees"))
    before = os.stat(root)
    _refuse_walk(monkeypatch)
    warm = ScratchTree(str(repo), str(tmp_path / "trees"))
    assert warm.checkout(tree) == []
    assert warm._blobs is None  # nothing to read: no `git cat-file` process was started
    warm.close()
    assert _content(Path(root)) == want
    assert want["pkg/mod.py"] == FILES["pkg/mod.py"] and want["pkg/alias.py"] == "-> mod.py"
    after = os.stat(root)
    assert (after.st_mtime_ns, after.st_ctime_ns) == (before.st_mtime_ns, before.st_ctime_ns)


def _edit_same_size_keep_mtime(root: Path) -> None:
    p = root / "pkg" / "mod.py"
    st = p.stat()
    p.write_text(FILES["pkg/mod.py"].replace("+ 1", "- 1"))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # inode, size and mtime as they were


def _replace_by_rename(root: Path) -> None:
    tmp = root / "pkg" / "new.tmp"
    tmp.write_text(FILES["pkg/mod.py"].replace("+ 1", "+ 2"))
    os.replace(tmp, root / "pkg" / "mod.py")


def _dir_to_link(root: Path) -> None:
    sub = root / "tests" / "integration" / "defs" / "sub"
    (root / "elsewhere").mkdir()
    (root / "elsewhere" / "test_b.py").write_text("def test_b():\n    assert 0\n")
    for f in sub.iterdir():
        f.unlink()
    sub.rmdir()
    os.symlink(root / "elsewhere", sub)


def _retarget_link(root: Path) -> None:
    (root / "pkg" / "alias.py").unlink()
    os.symlink("__init__.py", root / "pkg" / "alias.py")


def _stray_directory(root: Path) -> None:
    os.makedirs(root / "tests" / "new")
    (root / "tests" / "new" / "test_x.py").write_text("")


def _directory_deleted(root: Path) -> None:
    sub = root / "tests" / "integration" / "defs" / "sub"
    for f in sub.iterdir():
        f.unlink()
    sub.rmdir()


EDITS: dict[str, Callable[[Path], object]] = {
    "content, another size": lambda r: (r / "pkg" / "mod.py").write_text("def f(x):\n    pass\n"),
    "content, same size, mtime put back": _edit_same_size_keep_mtime,
    "file replaced by a rename": _replace_by_rename,
    "stray file in a directory": lambda r: (r / "pkg" / "stray.py").write_text("x = 1\n"),
    "stray file at the top": lambda r: (r / "conftest.py").write_text("import os\n"),
    "stray directory": _stray_directory,
    "file deleted": lambda r: (r / "tests" / "integration" / "defs" / "test_a.py").unlink(),
    "directory deleted": _directory_deleted,
    "directory replaced by a link": _dir_to_link,
    "link retargeted": _retarget_link,
    "the stamp itself garbled": lambda r: Path(str(r) + ".stamp").write_bytes(b"\x00junk"),
}


@pytest.mark.parametrize("edit", EDITS, ids=list(EDITS))
def test_a_slot_edited_behind_its_back_is_put_right(repo: Path, tmp_path: Path,
                                                    no_racy_window: None, edit: str) -> None:
    """TRAP: a stamp must never vouch for a slot that differs from its tree."""
    base = str(tmp_path / "trees")
    tree, want, root = _stamped_slot(repo, base)
    EDITS[edit](Path(root))
    assert _content(Path(root)) != want or edit == "the stamp itself garbled"
    again = ScratchTree(str(repo), base)
    again.checkout(tree)
    again.close()
    assert _content(Path(root)) == want
    extra = Path(root) / "elsewhere"
    assert not extra.exists() or edit == "directory replaced by a link"
    # and the slot put right is taken from a stamp again once it has been walked clean
    third = ScratchTree(str(repo), base)
    assert third.checkout(tree) == []
    third.close()
    assert _content(Path(root)) == want


def test_a_slot_written_within_the_racy_window_is_not_stamped(repo: Path,
                                                               tmp_path: Path) -> None:
    """TRAP: a directory changed within a coarse clock's tick of its stat looks unchanged."""
    base = str(tmp_path / "trees")
    tree = tree_of(str(repo), "HEAD")
    for _ in range(2):
        st = ScratchTree(str(repo), base)
        st.checkout(tree)
        st.close()
    assert not os.path.exists(st._stamp_path)  # written just now: walked each time


def test_moving_the_slot_to_another_tree_drops_the_stamp(repo: Path, tmp_path: Path,
                                                         no_racy_window: None) -> None:
    base = str(tmp_path / "trees")
    old_tree, _, root = _stamped_slot(repo, base)
    (repo / "pkg" / "mod.py").write_text("def f(x):\n    return x\n")
    (repo / "pkg" / "new.py").write_text("y = 2\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "next")
    st = ScratchTree(str(repo), base)
    assert sorted(st.checkout(tree_of(str(repo), "HEAD"))) == ["pkg/mod.py", "pkg/new.py"]
    assert not os.path.exists(st._stamp_path)  # removed before the first file was written
    st.close()
    assert (Path(root) / "pkg" / "new.py").read_text() == "y = 2\n"
    back = ScratchTree(str(repo), base)  # walked (no stamp), then back to the first tree
    assert sorted(back.checkout(old_tree)) == ["pkg/mod.py", "pkg/new.py"]
    back.close()
    assert _content(Path(root))["pkg/mod.py"] == FILES["pkg/mod.py"]
    assert not (Path(root) / "pkg" / "new.py").exists()


def _real(path: str, follow: bool) -> tuple[int, ...]:
    st = os.stat(path) if follow else os.lstat(path)
    return (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def test_a_stamped_slot_vouches_its_stats_until_written_or_closed(
        repo: Path, tmp_path: Path, no_racy_window: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stats a slot's stamp proved answer the stamps of the caches of that tree
    (testdb.stamp.stat_of) without a second stat; never a link followed (its target's stat is
    not what the slot's lstat proved), nothing once the slot is written, nothing once closed."""
    base = str(tmp_path / "trees")
    tree, _, root = _stamped_slot(repo, base)
    warm = ScratchTree(str(repo), base)
    assert warm.checkout(tree) == []
    mod, link = os.path.join(root, "pkg", "mod.py"), os.path.join(root, "pkg", "alias.py")
    real_mod, real_dir = _real(mod, follow=True), _real(os.path.join(root, "pkg"), follow=False)
    real_stat = os.stat

    def refused(path: str, *a: object, **k: object) -> os.stat_result:
        if str(path).startswith(root) and path != link:
            raise AssertionError(f"stat'ed again: {path}")
        return real_stat(path, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(stamp.os, "stat", refused)
    monkeypatch.setattr(stamp.os, "lstat", refused)
    assert stamp.stat_of(mod, follow=True) == real_mod
    assert stamp.stat_of(os.path.join(root, "pkg"), follow=False) == real_dir
    assert stamp.stat_of(link, follow=True) == real_mod  # followed: stat'ed, to its target
    monkeypatch.undo()
    (repo / "pkg" / "mod.py").write_text("def f(x):\n    return x * 2 + 10\n")
    git(repo, "commit", "-qam", "next")
    assert warm.checkout(tree_of(str(repo), "HEAD")) == ["pkg/mod.py"]
    assert stamp.stat_of(mod, follow=True) == _real(mod, follow=True) != real_mod
    warm.close()
    assert not any(p.startswith(root) for p in stamp._PROVEN)
    again = ScratchTree(str(repo), base)  # walked (the stamp was dropped): vouches nothing
    assert not any(p.startswith(root) for p in stamp._PROVEN)
    again.close()


@pytest.mark.parametrize("below", ["", "pkg"], ids=["top", "subfolder"])
def test_head_facts_are_what_the_three_calls_say(repo: Path, below: str) -> None:
    """``audit --head`` asks git once for the prefix, the slots' key and the commit's tree."""
    from auditor.replay.gitsource import head_facts, repo_key
    from auditor.replay.options import replay_dir, trees_dir

    root = str(repo / below) if below else str(repo)
    prefix, key, tree = head_facts(root, "HEAD")
    assert prefix == git(Path(root), "rev-parse", "--show-prefix").strip() == (
        f"{below}/" if below else "")
    assert (key, tree) == (repo_key(root), tree_of(root, "HEAD"))
    assert os.path.join(replay_dir(), "trees", key) == trees_dir(root)
