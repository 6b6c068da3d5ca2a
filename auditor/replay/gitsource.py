"""Commits and trees read from git objects: the first-parent walk and a scratch tree per worker."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from auditor.diff import cat_file_batch, run_git
from testdb.errors import ExternalError, UsageError

# A tree entry: (mode, blob sha). Submodules (mode 160000) have no blob and are left out.
TreeEntry = tuple[str, str]
_MANIFEST = ".testdb-replay-tree.json"


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    tree: str
    parent: str | None  # the first parent; None for a root commit
    parents: int  # how many parents (2+: a merge)
    subject: str
    date: str  # committer date, ISO 8601


def git(repo: str, *args: str, input_text: str | None = None) -> str:
    return run_git(repo, *args, input_text=input_text, timeout=300, missing_hint="install git")


def first_parent_commits(repo: str, rev_range: str) -> list[CommitInfo]:
    """The first-parent commits of ``A..B`` (or of everything reachable from one revision),
    oldest first: each a merged PR, or a commit of a linear history."""
    if not rev_range.strip() or rev_range.startswith("-"):
        raise UsageError(f"not a revision range: {rev_range!r}", hint="give A..B, e.g. v1.0..main")
    spec = rev_range.replace("...", "..")  # a first-parent walk has no symmetric difference
    try:
        out = git(repo, "log", "--first-parent", "--reverse", "-z",
                  "--format=%H%x01%T%x01%P%x01%cI%x01%s", spec, "--")
    except ExternalError as exc:
        raise UsageError(f"cannot walk {rev_range!r}: {exc.bare.split(': ', 1)[-1]}",
                         hint="give A..B with revisions of this repository") from None
    commits = []
    for rec in out.split("\0"):
        rec = rec.strip("\n")
        if not rec:
            continue
        sha, tree, parents, date, subject = [*rec.split("\x01"), "", "", "", ""][:5]
        ps = parents.split()
        commits.append(CommitInfo(sha, tree, ps[0] if ps else None, len(ps), subject, date))
    return commits


def tree_of(repo: str, rev: str) -> str:
    return git(repo, "rev-parse", f"{rev}^{{tree}}").strip()


def repo_key(repo: str) -> str:
    """Names this repository's scratch trees: its git directory, resolved."""
    gitdir = git(repo, "rev-parse", "--absolute-git-dir").strip()
    return hashlib.sha256(os.path.realpath(gitdir).encode()).hexdigest()[:16]


def list_tree(repo: str, tree: str) -> dict[str, TreeEntry]:
    out = git(repo, "ls-tree", "-r", "-z", "--full-tree", tree)
    files: dict[str, TreeEntry] = {}
    for rec in out.split("\0"):
        if not rec:
            continue
        meta, path = rec.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind == "blob":
            files[path] = (mode, sha)
    return files


class BlobReader:
    """One ``git cat-file --batch`` process: blob contents by sha, without a process each."""

    def __init__(self, repo: str) -> None:
        self._proc = subprocess.Popen(["git", "-C", repo, "cat-file", "--batch"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def read(self, sha: str) -> bytes:
        stdin, stdout = self._pipes()
        stdin.write(sha.encode() + b"\n")
        stdin.flush()
        header = stdout.readline().split()
        if len(header) != 3:
            raise ExternalError(f"git cat-file: no object {sha}", hint="is the repository whole?")
        data = stdout.read(int(header[2]))
        stdout.read(1)  # the newline after each object
        return data

    def _pipes(self) -> tuple[IO[bytes], IO[bytes]]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        return self._proc.stdin, self._proc.stdout

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._pipes()[0].close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=5)
        if self._proc.poll() is None:
            self._proc.kill()


def _safe(path: str) -> bool:
    parts = path.split("/")
    return not (path.startswith("/") or any(p in ("", ".", "..", ".git") for p in parts))


class ScratchTree:
    """A directory outside the user's work tree holding one commit's files, moved from commit
    to commit by writing only the files that differ. It lives under the cache directory in a
    numbered slot (locked while in use), so the caches keyed by checkout path (the plan's
    stamp, the inventory's stamp, the import graph) stay warm from one replay to the next. A
    manifest records each file's blob and stat; anything else found in the slot, or changed
    behind our back, is put right before use."""

    def __init__(self, repo: str, base_dir: str, slot_hint: int = 0) -> None:
        self.repo = repo
        self.blobs = BlobReader(repo)
        self._lock: IO[str] | None = None
        os.makedirs(base_dir, exist_ok=True)
        slot = slot_hint
        while True:
            lock = open(os.path.join(base_dir, f"slot{slot}.lock"), "w")  # noqa: SIM115
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.close()
                slot += 1
                continue
            self._lock = lock
            break
        self.root = os.path.join(base_dir, f"slot{slot}")
        os.makedirs(self.root, exist_ok=True)
        self.tree: str | None = None
        self.files: dict[str, TreeEntry] = {}
        self._stats: dict[str, tuple[int, int, int]] = {}
        self._saved_tree: str | None = None  # the tree the manifest on disk records
        self._stale = False  # the manifest on disk lists what the slot no longer holds
        self._verified = False
        self._dirs: set[str] = set()  # directories known to be there while writing a checkout
        self._load_manifest()
        self._verify()  # whatever happened to the slot since its last use is put right

    # ---- manifest ----------------------------------------------------------------------------
    def _load_manifest(self) -> None:
        try:
            with open(os.path.join(self.root, _MANIFEST), encoding="utf-8") as fh:
                doc = json.load(fh)
            self.tree = self._saved_tree = doc["tree"]
            self.files = {p: (m, s) for p, (m, s, *_rest) in doc["files"].items()}
            self._stats = {p: (int(v[2]), int(v[3]), int(v[4]))
                           for p, v in doc["files"].items()}
        except (OSError, ValueError, KeyError, TypeError):
            self.tree, self.files, self._stats = None, {}, {}

    def _save_manifest(self) -> None:
        doc = {"tree": self.tree,
               "files": {p: [m, s, *self._stats.get(p, (0, 0, 0))]
                         for p, (m, s) in self.files.items()}}
        tmp = os.path.join(self.root, _MANIFEST + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
        os.replace(tmp, os.path.join(self.root, _MANIFEST))

    def _stat(self, path: str) -> tuple[int, int, int] | None:
        try:
            st = os.lstat(os.path.join(self.root, path))
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _verify(self) -> None:
        """Drop what the manifest does not know and forget files whose stat changed."""
        seen: set[str] = set()
        for d, dirs, names in os.walk(self.root):
            rel = os.path.relpath(d, self.root)
            prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            for n in names:
                p = prefix + n
                if p in (_MANIFEST, _MANIFEST + ".tmp"):
                    continue
                if p not in self.files or self._stat(p) != self._stats.get(p):
                    os.unlink(os.path.join(d, n))
                    self._stale = self._stale or p in self.files
                    self.files.pop(p, None)
                else:
                    seen.add(p)
            for n in list(dirs):
                full = os.path.join(d, n)
                if os.path.islink(full):
                    os.unlink(full)
                    dirs.remove(n)
        for p in set(self.files) - seen:
            del self.files[p]
            self._stale = True
        self.tree = None  # the content is known file by file now, not as one tree
        self._verified = True

    # ---- moving to a commit ------------------------------------------------------------------
    def checkout(self, tree: str) -> list[str]:
        """Make the slot hold ``tree``; returns the paths written or removed."""
        if self.tree == tree:
            return []
        if self.tree is None and not self._verified:  # (__init__ has just verified it)
            self._verify()
        if self.tree is None and self._saved_tree == tree and not self._stale:
            # Verified just now against a manifest of this very tree: nothing to write.
            self.tree = tree
            return []
        want = list_tree(self.repo, tree)
        changed = [p for p in set(self.files) | set(want) if self.files.get(p) != want.get(p)]
        blobs = self._prefetch([want[p][1] for p in changed if p in want and _safe(p)])
        self._dirs.clear()
        for p in sorted(changed):
            if p in self.files:
                self._remove(p)
            if p in want and _safe(p):
                self._write(p, *want[p], blobs.get(want[p][1]))
        self.tree = tree
        if changed or self._stale or self._saved_tree != tree:
            # Not rewritten when nothing changed: writing it changes the slot's own directory,
            # and with it the import graph's stamp of the tree (a warm audit rebuilt the graph).
            self._save_manifest()
            self._saved_tree, self._stale = tree, False
        return changed

    def _prefetch(self, shas: list[str]) -> dict[str, bytes]:
        """Many blobs in one ``git cat-file --batch`` exchange (a whole tree's files, one
        request and answer each, took longer than writing them); empty when few or on failure
        (each is then read on its own, which says what is wrong)."""
        if len(shas) < 16:
            return {}
        found = cat_file_batch(self.repo, shas, hint="install git")
        return {s: b for s, b in zip(shas, found, strict=True) if b is not None} if found else {}

    def _remove(self, path: str) -> None:
        self._dirs.clear()  # the directories it empties are removed too
        full = os.path.join(self.root, path)
        with contextlib.suppress(FileNotFoundError):
            if os.path.isdir(full) and not os.path.islink(full):
                shutil.rmtree(full)
            else:
                os.unlink(full)
        self.files.pop(path, None)
        self._stats.pop(path, None)
        d = os.path.dirname(full)
        while d != self.root and d.startswith(self.root):
            try:
                os.rmdir(d)
            except OSError:
                break
            d = os.path.dirname(d)

    def _write(self, path: str, mode: str, sha: str, data: bytes | None = None) -> None:
        full = os.path.join(self.root, path)
        parent = os.path.dirname(full)
        if parent not in self._dirs:  # (made, or found a directory, since the last removal)
            # A path that was a file in the last tree may be a directory now, and the reverse.
            probe = parent
            while probe != self.root:
                if os.path.isfile(probe) or os.path.islink(probe):
                    os.unlink(probe)
                    break
                probe = os.path.dirname(probe)
            os.makedirs(parent, exist_ok=True)
            while parent.startswith(self.root) and parent not in self._dirs:
                self._dirs.add(parent)
                parent = os.path.dirname(parent)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        if data is None:
            data = self.blobs.read(sha)
        if mode == "120000":
            target = data.decode("utf-8", "surrogateescape")
            inside = os.path.normpath(os.path.join(os.path.dirname(path), target))
            if os.path.isabs(target) or inside.startswith(".."):
                return  # a link out of the tree: the plan loader would refuse it anyway
            os.symlink(target, full)
        else:
            with open(full, "wb") as fh:
                fh.write(data)
            if mode == "100755":
                os.chmod(full, os.stat(full).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        self.files[path] = (mode, sha)
        st = self._stat(path)
        if st is not None:
            self._stats[path] = st

    def close(self) -> None:
        self.blobs.close()
        if self._lock is not None:
            self._lock.close()
            self._lock = None


@contextlib.contextmanager
def scratch(repo: str, base_dir: str, slot_hint: int = 0) -> Iterator[ScratchTree]:
    tree = ScratchTree(repo, base_dir, slot_hint)
    try:
        yield tree
    finally:
        tree.close()
