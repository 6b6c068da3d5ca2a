"""Commits and trees read from git objects: the first-parent walk and a scratch tree per worker."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import marshal
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from auditor.diff import run_git
from testdb.errors import ExternalError, UsageError
from testdb.stamp import vouch, withdraw

# A tree entry: (mode, blob sha). Submodules (mode 160000) have no blob and are left out.
TreeEntry = tuple[str, str]
_MANIFEST = ".testdb-replay-tree.json"
# The slot's stamp (beside the slot, not in it: writing it must not change the slot's own
# directory): see ``ScratchTree._stamped``.
_STAMP_VERSION = 1
# A file or directory changed within this window of a stamp's stat may change again in the
# same tick of a coarse file-system clock, unseen: such a slot is not stamped (testdb.stamp's
# RACY_NS, for the same reason).
RACY_NS = 2_000_000_000
# (mode, inode, size, mtime, ctime), ns: lstat, not followed (the slot's links are its own)
FullStat = tuple[int, int, int, int, int]


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


def head_facts(repo: str, rev: str) -> tuple[str, str, str]:
    """(``--show-prefix``, ``repo_key``, ``tree_of(rev)``) from one ``git rev-parse`` (three
    processes each cost ~2-4 ms of a warm audit)."""
    out = git(repo, "rev-parse", "--show-prefix", "--absolute-git-dir", f"{rev}^{{tree}}")
    lines = out.split("\n")
    if len(lines) != 4 or lines[3]:  # a name with a newline in it: asked one by one
        return (git(repo, "rev-parse", "--show-prefix").strip(), repo_key(repo),
                tree_of(repo, rev))
    return (lines[0].strip(), hashlib.sha256(os.path.realpath(lines[1].strip()).encode())
            .hexdigest()[:16], lines[2].strip())


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
        self._blobs: BlobReader | None = None  # started on the first blob read alone
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
        self._stamp_path = os.path.join(base_dir, f"slot{slot}.stamp")
        os.makedirs(self.root, exist_ok=True)
        self.tree: str | None = None
        self.files: dict[str, TreeEntry] = {}
        self._stats: dict[str, tuple[int, int, int]] = {}
        self._saved_tree: str | None = None  # the tree the manifest on disk records
        self._stale = False  # the manifest on disk lists what the slot no longer holds
        self._verified = False
        self._dirs: set[str] = set()  # directories known to be there while writing a checkout
        self._recorded: dict[str, tuple[int, ...]] = {}  # the last stamp's full stat of a file
        self._vouched: list[str] = []  # the paths whose stats the stamp proved (``_vouch``)
        if not self._stamped():
            self._load_manifest()
            self._verify()  # whatever happened to the slot since its last use is put right

    @property
    def blobs(self) -> BlobReader:
        """The ``git cat-file --batch`` process, started when a file is first written without
        a prefetched blob (a slot that already holds the tree reads none)."""
        if self._blobs is None:
            self._blobs = BlobReader(self.repo)
        return self._blobs

    # ---- the slot's stamp --------------------------------------------------------------------
    # Verifying a slot walks it and stats each file against the manifest (~2,000 files and a
    # 0.3 MB JSON manifest for a TensorRT-LLM-sized tree). The stamp proves the same by stat
    # alone: written after a walk that found the slot exactly as its manifest says, it records
    # the stat of every directory (taken before the directory was listed: a file added,
    # removed or renamed in it since changes it), of every file and of the manifest, with the
    # manifest's content. When each still matches, nothing was added, removed or changed, and
    # the slot is as the walk would find it; anything else falls back to the walk. Anything
    # written to the slot removes the stamp first. Files are stat'ed by name relative to their
    # directory's descriptor (half the time of a full path each).
    def _stamped(self) -> bool:
        """Take the slot's state from its stamp when every stat it recorded still matches."""
        try:
            with open(self._stamp_path, "rb") as fh:
                doc = marshal.loads(fh.read())  # (marshal.load of a file reads it piecemeal)
            version, root, tree, manifest, dirs = doc
            if version != _STAMP_VERSION or root != self.root:
                return False
            files = {_join(rel, name): row for rel, _, rows in dirs for name, *row in rows}
        except (OSError, EOFError, ValueError, TypeError):
            return False
        # Should the walk be needed, a file whose full stat differs from the stamp's is
        # rewritten even where the manifest's (inode, size, mtime) still match (an edit that
        # put the mtime back changes the ctime).
        self._recorded = {p: tuple(row[2:]) for p, row in files.items()}
        for rel, st, rows in dirs:
            fd = _open_dir(self.root, rel)
            if fd is None:
                return False
            try:
                if _fd_stat(fd) != st or (rel == "." and _stat_at(_MANIFEST, fd) != manifest):
                    return False
                for name, _mode, _sha, *full in rows:
                    if _stat_at(name, fd) != tuple(full):
                        return False
            finally:
                os.close(fd)
        self.tree, self._saved_tree = None, tree  # as _verify leaves it: known file by file
        self.files = {p: (row[0], row[1]) for p, row in files.items()}
        self._stats = {p: (row[3], row[4], row[5]) for p, row in files.items()}
        self._verified = True
        self._vouch(dirs)
        return True

    def _vouch(self, dirs: list[tuple[str, FullStat, list[Any]]]) -> None:
        """Every stat the stamp just proved, for the stamps of caches of this tree to check
        against without taking them again (``testdb.stamp.vouch``), until the slot is
        written or closed."""
        proven: dict[str, FullStat] = {}
        for rel, st, rows in dirs:
            d = self.root if rel == "." else os.path.join(self.root, rel)
            proven[d] = st
            for name, _mode, _sha, *full in rows:
                proven[os.path.join(d, name)] = tuple(full)  # type: ignore[assignment]
        vouch(proven)
        self._vouched = list(proven)

    def _write_stamp(self, started_ns: int, dirs: list[tuple[str, FullStat, list[Any]]],
                     manifest: FullStat | None) -> None:
        """After a walk that changed nothing and found the slot as its manifest says: every
        stat was taken after ``started_ns``; none may be racy (``RACY_NS``)."""
        if manifest is None or self._saved_tree is None:
            return
        stats = [manifest, *(st for _, st, _ in dirs),
                 *(tuple(row[3:]) for _, _, rows in dirs for row in rows)]
        if any(max(st[3], st[4]) >= started_ns - RACY_NS for st in stats):
            return
        doc = (_STAMP_VERSION, self.root, self._saved_tree, manifest, dirs)
        tmp = self._stamp_path + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(marshal.dumps(doc))
        os.replace(tmp, self._stamp_path)

    def _unstamp(self) -> None:
        """Before the slot is written to: its stamp no longer holds."""
        withdraw(self._vouched)
        self._vouched = []
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._stamp_path)

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
        self._unstamp()
        doc = {"tree": self.tree,
               "files": {p: [m, s, *self._stats.get(p, (0, 0, 0))]
                         for p, (m, s) in self.files.items()}}
        tmp = os.path.join(self.root, _MANIFEST + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(doc))  # (json.dump encodes piecemeal in Python: 4x slower)
        os.replace(tmp, os.path.join(self.root, _MANIFEST))

    def _stat(self, path: str) -> tuple[int, int, int] | None:
        try:
            st = os.lstat(os.path.join(self.root, path))
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _verify(self) -> None:
        """Drop what the manifest does not know and forget files whose stat changed; when
        nothing had to be, stamp the slot (``_stamped``)."""
        started = time.time_ns()
        seen: set[str] = set()
        changed = False
        manifest: FullStat | None = None
        dirs: list[tuple[str, FullStat, list[Any]]] = []  # (dir, its stat, its files' rows)
        todo = ["."]
        while todo:  # os.walk's walk: each directory stat'ed before it is listed
            rel = todo.pop()
            fd = _open_dir(self.root, rel)
            if fd is None:  # gone, or a link now: as os.walk, what is not there is not seen
                changed = True
                continue
            try:
                rows: list[Any] = []
                dirs.append((rel, _fd_stat(fd), rows))
                with os.scandir(fd) as it:
                    entries = list(it)
                for entry in entries:
                    p = _join(rel, entry.name)
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(p)
                        continue
                    if entry.is_symlink() and entry.is_dir():  # a link to a directory
                        self._unstamp()
                        os.unlink(entry.name, dir_fd=fd)  # dropped, as os.walk found it
                        changed = True
                        continue
                    if p in (_MANIFEST, _MANIFEST + ".tmp"):
                        manifest = _stat_at(_MANIFEST, fd) if p == _MANIFEST else manifest
                        continue
                    full = _stat_at(entry.name, fd)
                    if (p not in self.files or full is None
                            or (full[1], full[2], full[3]) != self._stats.get(p)
                            or self._recorded.get(p, full) != full):
                        self._unstamp()
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(entry.name, dir_fd=fd)
                        changed = True
                        self._stale = self._stale or p in self.files
                        self.files.pop(p, None)
                    else:
                        seen.add(p)
                        rows.append((entry.name, *self.files[p], *full))
            finally:
                os.close(fd)
        for p in set(self.files) - seen:
            del self.files[p]
            self._stale = True
        self.tree = None  # the content is known file by file now, not as one tree
        self._verified = True
        if not changed and not self._stale:
            self._write_stamp(started, dirs, manifest)

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
        self._unstamp()  # before anything in the slot is written or removed
        want = list_tree(self.repo, tree)
        changed = sorted(p for p in set(self.files) | set(want)
                         if self.files.get(p) != want.get(p))
        written = {p: want[p] for p in changed if p in want and _safe(p)}
        self._dirs.clear()
        with _blob_stream(self.repo, [sha for _, sha in written.values()]) as blobs:
            for p in changed:
                if p in self.files:
                    self._remove(p)
                if p in written:
                    self._write(p, *written[p], next(blobs))
        self.tree = tree
        if changed or self._stale or self._saved_tree != tree:
            # Not rewritten when nothing changed: writing it changes the slot's own directory,
            # and with it the import graph's stamp of the tree (a warm audit rebuilt the graph).
            self._save_manifest()
            self._saved_tree, self._stale = tree, False
        return changed

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
            st = self._stat(path)
        else:
            st = _write_file(full, data, executable=mode == "100755")
        self.files[path] = (mode, sha)
        if st is not None:
            self._stats[path] = st

    def close(self) -> None:
        withdraw(self._vouched)
        self._vouched = []
        if self._blobs is not None:
            self._blobs.close()
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def _write_file(full: str, data: bytes, *, executable: bool) -> tuple[int, int, int]:
    """Write a file by its descriptor, made executable and stat'ed through it (an open file
    object and a stat by path each cost more than the write): its (inode, size, mtime)."""
    fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        st = os.fstat(fd)
        if executable:
            os.fchmod(fd, st.st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    finally:
        os.close(fd)
    return st.st_ino, st.st_size, st.st_mtime_ns


@contextlib.contextmanager
def _blob_stream(repo: str, shas: list[str]) -> Iterator[Iterator[bytes | None]]:
    """The content of each blob of ``shas``, in order, from one ``git cat-file --batch``
    read as it answers: git reads and inflates the next blobs while the caller writes the
    last (a whole tree's ~2,000 blobs read first, then written, took ~0.1-0.2 s more; one
    request and answer each, longer than writing them). None for a blob it lacks, for every
    blob when few (fewer than 16) or when git cannot be given their names, and for the rest
    once git fails: each is then read on its own, which says what is wrong. The names go in
    through a file, so that git's answers need no reader while they are sent."""
    proc = _batch_reader(repo, shas) if len(shas) >= 16 else None
    if proc is None or proc.stdout is None:
        yield itertools.repeat(None)
        return
    try:
        yield itertools.chain(_answers(proc.stdout, len(shas)), itertools.repeat(None))
    finally:
        proc.stdout.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _batch_reader(repo: str, shas: list[str]) -> subprocess.Popen[bytes] | None:
    """``git cat-file --batch`` started on ``shas``, their names given through a temporary
    file (None when none can be made)."""
    try:
        names = tempfile.TemporaryFile()  # noqa: SIM115 (closed below, once git has it)
    except OSError:
        return None
    with names:
        names.write("".join(f"{s}\n" for s in shas).encode())
        names.seek(0)
        try:
            return subprocess.Popen(["git", "-C", repo, "cat-file", "--batch"], stdin=names,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except FileNotFoundError:
            raise ExternalError("git is not installed", hint="install git") from None


def _answers(out: IO[bytes], count: int) -> Iterator[bytes | None]:
    """``git cat-file --batch``'s answers, up to ``count``, until one is cut short."""
    for _ in range(count):
        line = out.readline()
        if not line.endswith(b"\n"):
            return  # git ended
        if line.endswith((b" missing\n", b" ambiguous\n")):  # "<object> missing"
            yield None
            continue
        _, kind, size = line.rsplit(b" ", 2)  # "<oid> <type> <size>", then the content
        data = out.read(int(size))
        if len(data) != int(size) or out.read(1) != b"\n":
            return
        yield data if kind == b"blob" else None  # a tree: not a file


def _join(rel: str, name: str) -> str:
    return name if rel == "." else f"{rel}/{name}"


def _open_dir(root: str, rel: str) -> int | None:
    """A descriptor of the slot's directory ``rel``, not through a link (None: not there)."""
    try:
        return os.open(root if rel == "." else os.path.join(root, rel),
                       os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None


def _full(st: os.stat_result) -> FullStat:
    return (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _fd_stat(fd: int) -> FullStat:
    return _full(os.fstat(fd))


def _stat_at(name: str, dir_fd: int) -> FullStat | None:
    try:
        return _full(os.lstat(name, dir_fd=dir_fd))
    except OSError:
        return None


@contextlib.contextmanager
def scratch(repo: str, base_dir: str, slot_hint: int = 0) -> Iterator[ScratchTree]:
    tree = ScratchTree(repo, base_dir, slot_hint)
    try:
        yield tree
    finally:
        tree.close()
