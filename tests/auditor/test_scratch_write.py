"""Writing a commit's tree into a scratch slot (auditor.replay.gitsource.ScratchTree.checkout)
reads the blobs from one ``git cat-file --batch`` as it answers and writes each file by its
descriptor (issue 25): the slot holds what git holds (content, executable bit, in-tree links;
no link out of the tree), its manifest records each file's own stat, and a missing blob or a
failed git still reads each blob on its own, which says what is wrong."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

import pytest

from auditor.diff import cat_file_batch
from auditor.replay import gitsource
from auditor.replay.gitsource import ScratchTree, _blob_stream, list_tree, tree_of
from testdb.errors import ExternalError
from tests.gitrepo import git, new_repo

# Enough files for the batch read (16 or more), two with the same content, an empty one.
FILES = {f"tests/integration/defs/g{k % 3}/test_{k}.py": f"def test_{k}():\n    assert {k}\n"
         for k in range(20)}
FILES |= {"pkg/__init__.py": "", "pkg/mod.py": "def f():\n    return 1\n",
          "pkg/copy.py": "def f():\n    return 1\n", "run.sh": "#!/bin/sh\necho hi\n"}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = new_repo(tmp_path / "repo", FILES)
    os.chmod(root / "run.sh", 0o755)
    os.symlink("mod.py", root / "pkg" / "alias.py")  # in the tree: a link of the slot
    os.symlink("../../outside", root / "pkg" / "out.py")  # out of the tree: left out
    git(root, "add", "-A")
    git(root, "commit", "-qm", "modes and links")
    return root


def _slot_files(root: str) -> dict[str, tuple[str, bool]]:
    """Each file of a slot but its manifest: (its text or where it links, executable)."""
    out = {}
    for d, _dirs, names in os.walk(root):
        for n in names:
            full = os.path.join(d, n)
            rel = os.path.relpath(full, root)
            if rel.startswith(".testdb-replay-tree"):
                continue
            if os.path.islink(full):
                out[rel] = ("-> " + os.readlink(full), False)
            else:
                out[rel] = (Path(full).read_text(), bool(os.stat(full).st_mode & stat.S_IXUSR))
    return out


def _git_files(repo: Path, rev: str) -> dict[str, tuple[str, bool]]:
    out = {}
    for path, (mode, sha) in list_tree(str(repo), tree_of(str(repo), rev)).items():
        text = git(repo, "cat-file", "blob", sha)
        if mode == "120000":
            if text.startswith("../../"):
                continue
            out[path] = ("-> " + text, False)
        else:
            out[path] = (text, mode == "100755")
    return out


def _manifest_is_each_files_own_stat(root: str) -> None:
    with open(os.path.join(root, ".testdb-replay-tree.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    for path, (_mode, _sha, ino, size, mtime) in doc["files"].items():
        st = os.lstat(os.path.join(root, path))
        assert (ino, size, mtime) == (st.st_ino, st.st_size, st.st_mtime_ns), path


@pytest.mark.parametrize("batched", [True, False])
def test_a_slot_holds_the_commits_files_and_its_manifest_their_stats(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batched: bool) -> None:
    if not batched:  # every blob read on its own, as when git's batch read fails
        monkeypatch.setattr(gitsource, "_answers", lambda out, count: iter(()))
    slot = ScratchTree(str(repo), str(tmp_path / "trees"))
    try:
        written = slot.checkout(tree_of(str(repo), "HEAD"))
        assert len(written) == len(FILES) + 2
        assert _slot_files(slot.root) == _git_files(repo, "HEAD")
        _manifest_is_each_files_own_stat(slot.root)
        # Moved to another commit: a file becomes a directory, a link a file, one is gone.
        (repo / "pkg" / "mod.py").unlink()
        (repo / "pkg" / "mod.py").mkdir()
        (repo / "pkg" / "mod.py" / "inner.py").write_text("x = 1\n")
        (repo / "pkg" / "alias.py").unlink()
        (repo / "pkg" / "alias.py").write_text("y = 2\n")
        (repo / "run.sh").unlink()
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "reshaped")
        slot.checkout(tree_of(str(repo), "HEAD"))
        assert _slot_files(slot.root) == _git_files(repo, "HEAD")
        _manifest_is_each_files_own_stat(slot.root)
    finally:
        slot.close()


def test_the_streamed_blobs_are_the_batch_reads(repo: Path) -> None:
    """In order, duplicates too; None for a missing object and for a tree, as
    ``cat_file_batch`` answers; every one None when fewer than 16 are asked."""
    files = list_tree(str(repo), tree_of(str(repo), "HEAD"))
    shas = [sha for _, sha in files.values()]
    shas += [shas[0], "0" * 40, tree_of(str(repo), "HEAD"), shas[1]]
    with _blob_stream(str(repo), shas) as blobs:
        assert [next(blobs) for _ in shas] == cat_file_batch(str(repo), shas)
        assert next(blobs) is None
    with _blob_stream(str(repo), shas[:15]) as blobs:
        assert [next(blobs) for _ in range(15)] == [None] * 15


def test_a_failed_batch_read_leaves_each_blob_to_be_read_alone(tmp_path: Path) -> None:
    shas = ["1" * 40] * 20
    with _blob_stream(str(tmp_path / "no-repo"), shas) as blobs:
        assert [next(blobs) for _ in shas] == [None] * 20


def test_without_a_temporary_file_each_blob_is_read_alone(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_file() -> None:
        raise OSError("read-only")

    monkeypatch.setattr(tempfile, "TemporaryFile", no_file)
    shas = [sha for _, sha in list_tree(str(repo), tree_of(str(repo), "HEAD")).values()]
    with _blob_stream(str(repo), shas) as blobs:
        assert [next(blobs) for _ in shas] == [None] * len(shas)
    slot = ScratchTree(str(repo), str(tmp_path / "trees"))
    try:
        slot.checkout(tree_of(str(repo), "HEAD"))
        assert _slot_files(slot.root) == _git_files(repo, "HEAD")
    finally:
        slot.close()


def test_a_missing_blob_is_named(repo: Path, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    real = gitsource.list_tree

    def with_a_missing_blob(r: str, tree: str) -> dict[str, tuple[str, str]]:
        return {**real(r, tree), "pkg/gone.py": ("100644", "2" * 40)}

    monkeypatch.setattr(gitsource, "list_tree", with_a_missing_blob)
    slot = ScratchTree(str(repo), str(tmp_path / "trees"))
    try:
        with pytest.raises(ExternalError, match="no object " + "2" * 40):
            slot.checkout(tree_of(str(repo), "HEAD"))
    finally:
        slot.close()
