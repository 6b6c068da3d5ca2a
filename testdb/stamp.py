"""Is the test plan unchanged since the last run? Answered by ``stat``, without reading a file.

Proving the content-keyed caches fresh by reading and hashing all ~150 inputs costs more than
a warm ``testdb where`` may take. Like git's index, a *stamp* remembers, per checkout, each
input's ``stat`` (inode, size, mtime, ctime) and its content hash, and each directory the
discovery listed; when every one still matches, the plan's content key is the remembered one.
Anything that changed (a file edited, added, removed or renamed, a directory replaced by a
link) changes a recorded stat, and the caller falls back to discovering and hashing.

A file written within ``RACY_NS`` of the stamp may be changed again with the same size in the
same timestamp tick (coarse file-system clocks); such "racily clean" files are hashed again on
every check, as git does. A directory inside that window makes the stamp unusable.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from testdb.cachestore import Store
from testdb.files import read_text, sha256_text

VERSION = 1
RACY_NS = 2_000_000_000  # FAT's 2 s clock is the coarsest a checkout is likely to live on
KEEP = 64  # stamps kept: one per checkout (and explicit input paths) in use
PLAN_SCHEMA = 3  # the layout of the plan's caches (index pickle, stats); in their keys

Stat = tuple[int, int, int, int, int]


def cache_dir() -> str:
    """Where every cache file lives: ``$TESTDB_CACHE_DIR``, else the user's cache dir."""
    return os.environ.get("TESTDB_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "testdb-audit")


def testdb_code_stamp() -> str:
    """``code_stamp`` of the testdb package: what parses the plan and computes its records."""
    return code_stamp(os.path.dirname(os.path.abspath(__file__)))


def plan_stamp(root: str, stages: str | None = None, triggers: str | None = None,
               platform_facts: str | None = None) -> Stamp:
    """The stamp of one checkout's test plan (``testdb.index.locate`` writes it); here, in a
    module of few imports, so that a warm answer can check it without loading the index."""
    import testdb

    given = [os.path.abspath(p) if p else "-" for p in (stages, triggers, platform_facts)]
    return Stamp(cache_dir(), [testdb.__version__, str(PLAN_SCHEMA), testdb_code_stamp(),
                               os.path.abspath(root), os.path.realpath(root), *given])


def tool_key() -> str:
    """What every answer of the whole tool depends on besides its inputs: its version, the
    stamps of all its package directories (``testdb``, ``auditor``, ``reports`` and theirs),
    Python's version and pytest's (unit tests' selections are pytest's expressions). The key
    part of the caches that keep a command's answers (the audit memo, the module tier's
    parts, replay records)."""
    import sys

    import _pytest._version

    import testdb

    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parts = [testdb.__version__, sys.version, _pytest._version.version]
    for pkg in ("testdb", "auditor", "reports"):
        for d, subdirs, _ in os.walk(os.path.join(top, pkg)):
            subdirs[:] = sorted(n for n in subdirs if n != "__pycache__")
            parts.append(f"{os.path.relpath(d, top)}={code_stamp(d)}")
    return "\0".join(parts)


def code_stamp(package_dir: str) -> str:
    """A package's modules and their mtimes: an editable install changes the code that builds
    (and the records a cache holds) without changing the version."""
    try:
        names = sorted(n for n in os.listdir(package_dir) if n.endswith(".py"))
        return ";".join(f"{n}:{os.stat(os.path.join(package_dir, n)).st_mtime_ns}"
                        for n in names)
    except OSError:
        return ""


def text_digest(path: str) -> str:
    """The plan's digest of an input: sha256 of its text (as ``testdb.index.read_all`` has it)."""
    return sha256_text(read_text(path))


# Stats that a caller in this process proved a moment ago, by path, for as long as it holds
# what it proved. A scratch slot whose own stamp holds has just stat'ed every directory and
# file in it (auditor/replay/gitsource.py); the plan's, the import graph's and the
# inventory's stamps of the same tree would stat them all again (~4,000 stats, ~15 ms of a
# warm audit of a 2,000-file tree). The slot withdraws them before it writes a file, and when
# it is closed. A proven stat is a link's own (lstat): it answers for a followed file only
# where that is a regular file.
_PROVEN: dict[str, Stat] = {}


def vouch(stats: Mapping[str, Stat]) -> None:
    """Record stats just taken (``stat_of`` answers them until ``withdraw``)."""
    _PROVEN.update(stats)


def withdraw(paths: Iterable[str]) -> None:
    for path in paths:
        _PROVEN.pop(path, None)


def stat_of(path: str, *, follow: bool) -> Stat | None:
    """What identifies this version of a file: mode, inode, size, mtime and ctime (ns).
    Files are followed through links (a link's target may change); directories are not."""
    proven = _PROVEN.get(path)
    if proven is not None and (not follow or stat.S_ISREG(proven[0])):
        return proven
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except (OSError, ValueError):
        return None
    return (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class Stamp:
    """The stamp file of one checkout root and one set of explicit input paths."""

    def __init__(self, directory: str, identity: Iterable[str],
                 digest: Callable[[str], str] = text_digest) -> None:
        """``digest``: what the recorded digests are of a file (read again when racy)."""
        self.digest = digest
        self._store = Store("stamp", VERSION, directory, keep=KEEP)
        # a path that is not UTF-8 has lone surrogates (surrogateescape): cache_key keeps them
        self._key = self._store.key(identity=list(identity))[:32]
        self.path = self._store.path(self._key)

    def _read(self) -> Any:
        return self._store.load(self._key)

    def check(self) -> tuple[dict[str, object], str] | None:
        """``(what was recorded, content key)`` when nothing recorded has changed, else None."""
        try:
            written, dirs, files, extra, key = self._read()
        except (ValueError, TypeError):  # missing, damaged, or another layout
            return None
        for path, st in dirs:
            if stat_of(path, follow=False) != st or (st and _racy(st, written)):
                return None
        rehashed = False
        for path, st, digest in files:
            if stat_of(path, follow=True) != st:
                return None
            if _racy(st, written):
                try:
                    if self.digest(path) != digest:
                        return None
                except Exception:  # unreadable now: let the full path report it
                    return None
                rehashed = True
        if rehashed and not any(_racy(st, time.time_ns()) for _, st, _ in files):
            # Verified by content, and now outside the window: later checks need no hashing.
            self._store.dump(self._key, (time.time_ns(), dirs, files, extra, key))
        return extra, key

    def recorded_key(self) -> str | None:
        """The key of the last stamp written, whether or not it still holds: what was built
        last time (a builder may reuse the parts of it that did not change)."""
        try:
            key = self._read()[4]
        except (TypeError, IndexError, KeyError):
            return None
        return key if isinstance(key, str) else None

    @staticmethod
    def stat_dirs(dirs: Iterable[str]) -> list[tuple[str, Stat | None]]:
        """Taken *before* discovery lists them: a change made meanwhile shows up next time."""
        return [(d, stat_of(d, follow=False)) for d in dirs]

    @staticmethod
    def stat_files(paths: Iterable[str]) -> list[tuple[str, Stat | None]]:
        """Taken *before* the files are read, for the same reason."""
        return [(p, stat_of(p, follow=True)) for p in paths]

    def write(self, dirs: list[tuple[str, Stat | None]], files: list[tuple[str, Stat | None]],
              digests: dict[str, str], extra: dict[str, object], key: str) -> None:
        """Remember the plan; ``digests`` maps each path of ``files`` to its content hash.
        Nothing is written when a file vanished or could not be read."""
        if any(st is None or p not in digests for p, st in files):
            return
        rows = [(p, st, digests[p]) for p, st in files]
        self._store.dump(self._key, (time.time_ns(), dirs, rows, extra, key))


def _racy(st: Stat, written_ns: int) -> bool:
    return max(st[3], st[4]) >= written_ns - RACY_NS
