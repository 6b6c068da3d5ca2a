"""The map file: which functions each test executed, at which commit, measured when.

One SQLite file through the standard library. Strings are interned once (commits, files,
functions, tests) and every link is a pair of integer keys in a ``WITHOUT ROWID`` table keyed
(function, test): the audit's question, "which tests executed this function", is one range of
that key. The other direction (``where TEST --map``, replacing a test's links when it is
measured again) reads the test's row, whose ``funcs`` column holds its function ids, sorted,
as zlib-compressed deltas (about 1-2 bytes a link), so no second index doubles the map.
A hand-written packing because SQLite has no integer-set type and an index (test, function)
would cost as much again as the links themselves (docs/map.md has the figures).

Rules (docs/map.md):
- a function is (file, qualified name, fingerprint): an unchanged function keeps its links
  at any later commit; a changed one keeps them under its old fingerprint ("measured at an
  older version"); one that no longer exists is never asked for, so its links drop out.
- a test's links are those of its newest measurement: measurements of the same commit (other
  stages, other CI nodes) are joined; a newer commit's replaces an older one's; an older one
  than the map holds is ignored.
- ``scans`` records which functions each measured file held at each commit, so "this test,
  measured at C, did not execute f" is said only when f existed at C.

Each ``add`` or ``merge`` is one SQLite transaction (its rollback journal makes the commit
atomic: an interrupted write leaves the old map); a new map file (``create``, ``merge -o``)
is built under a temporary name and renamed into place. A file that is not a map, of another
format version or damaged raises MapError (exit 2), never reads as an empty map.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
import time
import zlib
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import NamedTuple

from testdb.errors import InputError, SourceLoc

FORMAT = "testdb-audit map"
VERSION = "1"
KIND_CODE = {"function": 0, "class": 1, "module": 2}
KIND_NAME = {v: k for k, v in KIND_CODE.items()}

_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE commits(id INTEGER PRIMARY KEY, sha TEXT NOT NULL UNIQUE);
CREATE TABLE files(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
CREATE TABLE funcs(id INTEGER PRIMARY KEY, file_id INTEGER NOT NULL, qualname TEXT NOT NULL,
                   kind INTEGER NOT NULL, fp BLOB NOT NULL, UNIQUE(file_id, qualname, fp));
CREATE TABLE scans(func_id INTEGER NOT NULL, commit_id INTEGER NOT NULL,
                   PRIMARY KEY(func_id, commit_id)) WITHOUT ROWID;
CREATE TABLE tests(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
                   commit_id INTEGER NOT NULL, measured_at INTEGER NOT NULL,
                   funcs BLOB NOT NULL);
CREATE TABLE links(func_id INTEGER NOT NULL, test_id INTEGER NOT NULL,
                   PRIMARY KEY(func_id, test_id)) WITHOUT ROWID;
"""
_TABLES = {"meta", "commits", "files", "funcs", "scans", "tests", "links"}


class MapError(InputError):
    """The map file cannot be used: not a map, another version, damaged."""


def pack(ids: Iterable[int]) -> bytes:
    """Sorted, distinct ids as zlib-compressed deltas (uint32)."""
    s = sorted(set(ids))
    deltas = array("I", [b - a for a, b in zip([0, *s], s, strict=False)])
    return zlib.compress(deltas.tobytes(), 1)


def unpack(blob: bytes) -> list[int]:
    a = array("I")
    a.frombytes(zlib.decompress(blob))
    return list(accumulate(a))


class FuncRef(NamedTuple):
    """A function as the ingest saw it at a commit (a tuple: hashed in C, for the millions
    of set and dict operations of a large ingest)."""

    path: str
    qualname: str
    kind: str
    fp: bytes


@dataclass(frozen=True, slots=True)
class Link:
    """A test that executed a function (any fingerprint of it), measured at ``commit``."""

    test_id: str
    fp: bytes
    commit: str
    measured_at: int  # unix seconds


@dataclass(frozen=True, slots=True)
class AddResult:
    added: int = 0  # tests new to the map
    joined: int = 0  # tests measured again at the same commit: links joined
    replaced: int = 0  # tests measured at a newer commit: links replaced
    older: int = 0  # measurements older than the map's: ignored
    links: int = 0  # links written


@dataclass(frozen=True, slots=True)
class Stats:
    tests: int
    functions: int
    files: int
    commits: tuple[tuple[str, int, int, int], ...]  # sha, tests, oldest, newest measured_at
    links: int
    bytes: int

    @property
    def bytes_per_link(self) -> float:
        return self.bytes / self.links if self.links else 0.0


def age(measured_at: int, now: int | None = None) -> str:
    """``3 days ago``, ``5 hours ago``, ``just now``."""
    s = max(0, (int(time.time()) if now is None else now) - measured_at)
    for unit, n in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if s >= n:
            k = s // n
            return f"{k} {unit}{'s' if k > 1 else ''} ago"
    return "just now"


def _damaged(path: str, exc: Exception) -> MapError:
    return MapError(f"the map file cannot be read ({exc})", SourceLoc(path),
                    "it is damaged or not a testdb map: rebuild it with `testdb map add` or "
                    "`testdb map merge`, or pass another with --map")


class MapStore:
    """An open map file. Use ``open`` (an existing map) or ``create`` (a new, empty one)."""

    def __init__(self, path: str, db: sqlite3.Connection) -> None:
        self.path = path
        self.db = db
        self._file_ids: dict[str, int] = {}
        self._commit_ids: dict[str, int] = {}
        self._func_ids: dict[tuple[int, str, bytes], int] = {}
        self._by_commit: dict[int, set[str]] | None = None  # read-side index, once

    # ---- opening -----------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str, *, write: bool = False) -> MapStore:
        if not os.path.isfile(path):
            raise MapError("no map file here", SourceLoc(path),
                           "build one with `testdb map add DATA... --commit SHA`")
        try:
            with open(path, "rb") as fh:
                head = fh.read(16)
            if head != b"SQLite format 3\x00":
                raise MapError("not a testdb map (not an SQLite file)", SourceLoc(path),
                               "pass the file `testdb map add` wrote")
            uri = f"file:{os.path.abspath(path)}" + ("" if write else "?mode=ro")
            db = sqlite3.connect(uri, uri=True, isolation_level=None)
            _tune(db)
            tables = {r[0] for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "meta" not in tables:
                raise MapError("not a testdb map (no meta table)", SourceLoc(path),
                               "pass the file `testdb map add` wrote")
            meta = dict(db.execute("SELECT key, value FROM meta"))
            if meta.get("format") != FORMAT:
                raise MapError("not a testdb map", SourceLoc(path),
                               "pass the file `testdb map add` wrote")
            if meta.get("version") != VERSION:
                raise MapError(f"map format version {meta.get('version')!r}; this testdb "
                               f"reads version {VERSION}", SourceLoc(path),
                               "rebuild the map with this version of testdb")
            if _TABLES - tables:
                raise MapError(f"the map lacks the tables {sorted(_TABLES - tables)}",
                               SourceLoc(path), "rebuild it with `testdb map add`")
        except sqlite3.Error as exc:
            raise _damaged(path, exc) from None
        return cls(path, db)

    @classmethod
    def create(cls, path: str) -> MapStore:
        """A new empty map at ``path`` (written under a temporary name, then renamed)."""
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".map-", suffix=".tmp", dir=d)
        os.close(fd)
        try:
            db = sqlite3.connect(tmp, isolation_level=None)
            db.executescript(_SCHEMA)
            db.executemany("INSERT INTO meta VALUES (?, ?)",
                           [("format", FORMAT), ("version", VERSION)])
            db.close()
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return cls.open(path, write=True)

    @classmethod
    def open_or_create(cls, path: str) -> MapStore:
        return cls.open(path, write=True) if os.path.exists(path) else cls.create(path)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> MapStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise _damaged(self.path, exc) from None
        except zlib.error as exc:
            raise _damaged(self.path, exc) from None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic write: everything in it is committed, or nothing."""
        with self._reading():
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self.db.execute("ROLLBACK")
                self._file_ids.clear()
                self._commit_ids.clear()
                self._func_ids.clear()
                raise
            self.db.execute("COMMIT")
            self._by_commit = None

    # ---- interning ---------------------------------------------------------------------------
    def _intern(self, cache: dict[str, int], table: str, col: str, value: str) -> int:
        hit = cache.get(value)
        if hit is None:
            row = self.db.execute(f"SELECT id FROM {table} WHERE {col} = ?", (value,)).fetchone()
            if row is None:
                cur = self.db.execute(f"INSERT INTO {table}({col}) VALUES (?)", (value,))
                hit = int(cur.lastrowid or 0)
            else:
                hit = int(row[0])
            cache[value] = hit
        return hit

    def commit_id(self, sha: str) -> int:
        return self._intern(self._commit_ids, "commits", "sha", sha)

    def func_ids(self, funcs: Iterable[FuncRef]) -> dict[FuncRef, int]:
        out: dict[FuncRef, int] = {}
        for f in funcs:
            fid = self._intern(self._file_ids, "files", "path", f.path)
            key = (fid, f.qualname, f.fp)
            hit = self._func_ids.get(key)
            if hit is None:
                self.db.execute("INSERT OR IGNORE INTO funcs(file_id, qualname, kind, fp) "
                                "VALUES (?, ?, ?, ?)", (fid, f.qualname, KIND_CODE[f.kind], f.fp))
                row = self.db.execute("SELECT id FROM funcs WHERE file_id = ? AND qualname = ? "
                                      "AND fp = ?", key).fetchone()
                hit = self._func_ids[key] = int(row[0])
            out[f] = hit
        return out

    # ---- writing -----------------------------------------------------------------------------
    def record_scan(self, commit_id: int, func_ids: Iterable[int]) -> None:
        """The functions a measured file held at a commit."""
        self.db.executemany("INSERT OR IGNORE INTO scans VALUES (?, ?)",
                            ((f, commit_id) for f in sorted(set(func_ids))))

    def put_test(self, name: str, commit_id: int, measured_at: int, func_ids: Iterable[int],
                 links: _Pending | None = None) -> str:
        """One test's measurement, by the rules above; returns what happened (``AddResult``'s
        field names). ``links``: collect the link rows to write (``_Pending.flush``) instead
        of writing them now: sorted, the b-tree is written in order."""
        pending = links if links is not None else _Pending()
        try:
            return self._put(name, commit_id, measured_at, set(func_ids), pending)
        finally:
            if links is None:
                pending.flush(self.db)

    def _put(self, name: str, commit_id: int, measured_at: int, new: set[int],
             pending: _Pending) -> str:
        row = self.db.execute("SELECT id, commit_id, measured_at, funcs FROM tests "
                              "WHERE name = ?", (name,)).fetchone()
        if row is None:
            cur = self.db.execute("INSERT INTO tests(name, commit_id, measured_at, funcs) "
                                  "VALUES (?, ?, ?, ?)", (name, commit_id, measured_at,
                                                          pack(new)))
            pending.add(int(cur.lastrowid or 0), new)
            return "added"
        tid, old_commit, old_when, blob = row
        old = set(unpack(blob))
        if old_commit == commit_id:
            self.db.execute("UPDATE tests SET measured_at = ?, funcs = ? WHERE id = ?",
                            (max(old_when, measured_at), pack(old | new), tid))
            pending.add(tid, new - old)
            return "joined"
        if measured_at < old_when:
            return "older"
        pending.drop(tid, old - new)
        pending.add(tid, new - old)
        self.db.execute("UPDATE tests SET commit_id = ?, measured_at = ?, funcs = ? "
                        "WHERE id = ?", (commit_id, measured_at, pack(new), tid))
        return "replaced"

    def add(self, commit: str, measured_at: int | None,
            tests: dict[str, set[FuncRef]], scanned: Iterable[FuncRef]) -> AddResult:
        """One ingest, atomically: ``tests`` maps each test id to the functions it executed;
        ``scanned``: every function of the files measured (the negative evidence's ground)."""
        with self.adding(commit, measured_at) as w:
            all_funcs = set(scanned).union(*tests.values()) if tests else set(scanned)
            ordered = sorted(all_funcs)
            ids = dict(zip(ordered, w.func_ids(ordered), strict=True))
            w.scan(ids[f] for f in scanned)
            for name in sorted(tests):
                w.test(name, [ids[f] for f in tests[name]])
        return w.result()

    @contextlib.contextmanager
    def adding(self, commit: str, measured_at: int | None) -> Iterator[Adding]:
        """One ingest fed piece by piece (functions, scans, tests as a reader finds them) in
        one transaction: ``map add`` stores what its workers have read while they read on.
        The links are written when the transaction ends (or when many are pending), sorted
        by key, so the b-tree is written in order."""
        with self.transaction():
            w = Adding(self, self.commit_id(commit),
                       int(time.time()) if measured_at is None else measured_at)
            yield w
            w.pending.flush(self.db)

    def merge_from(self, other: MapStore) -> AddResult:
        """Every measurement of ``other`` put into this map (one transaction), by the rules of
        ``put_test``; linear in the size of ``other``."""
        counts = dict.fromkeys(("added", "joined", "replaced", "older"), 0)
        links = 0
        with self.transaction(), other._reading():
            files = dict(other.db.execute("SELECT id, path FROM files"))
            commits = {i: self.commit_id(sha) for i, sha in
                       other.db.execute("SELECT id, sha FROM commits")}
            fmap: dict[int, int] = {}
            refs = [(i, FuncRef(files[fid], q, KIND_NAME[k], bytes(fp))) for i, fid, q, k, fp in
                    other.db.execute("SELECT id, file_id, qualname, kind, fp FROM funcs")]
            ids = self.func_ids(r for _, r in refs)
            for i, r in refs:
                fmap[i] = ids[r]
            self.db.executemany("INSERT OR IGNORE INTO scans VALUES (?, ?)",
                                ((fmap[f], commits[c]) for f, c in
                                 other.db.execute("SELECT func_id, commit_id FROM scans")))
            pending = _Pending()
            for name, cid, when, blob in other.db.execute(
                    "SELECT name, commit_id, measured_at, funcs FROM tests"):
                fids = [fmap[f] for f in unpack(blob)]
                what = self.put_test(name, commits[cid], when, fids, pending)
                counts[what] += 1
                links += len(fids) if what != "older" else 0
                if len(pending) > 2_000_000:  # bounded memory for a large input
                    pending.flush(self.db)
            pending.flush(self.db)
        return AddResult(links=links, **counts)

    # ---- reading -----------------------------------------------------------------------------
    def tests_executing(self, path: str, qualname: str) -> list[Link]:
        """Every test that executed any fingerprint of the function, with that fingerprint."""
        with self._reading():
            rows = self.db.execute(
                "SELECT t.name, f.fp, c.sha, t.measured_at FROM files fi "
                "JOIN funcs f ON f.file_id = fi.id AND f.qualname = ? "
                "JOIN links l ON l.func_id = f.id "
                "JOIN tests t ON t.id = l.test_id "
                "JOIN commits c ON c.id = t.commit_id WHERE fi.path = ?",
                (qualname, path)).fetchall()
        return [Link(n, bytes(fp), sha, when) for n, fp, sha, when in rows]

    def tests_not_executing(self, path: str, qualname: str,
                            executing: Iterable[str] | None = None) -> set[str]:
        """Tests of the map measured at a commit whose scan held the function (any
        fingerprint) and that did not execute it. ``executing``: the names
        ``tests_executing`` gave (else asked again). Worked out in sets over a per-commit
        index of the tests read once: a NOT EXISTS per test cost 150 ms for 20 functions
        at 5,000 tests."""
        with self._reading():
            commits = [r[0] for r in self.db.execute(
                "SELECT DISTINCT s.commit_id FROM files fi JOIN funcs f ON f.file_id = fi.id "
                "AND f.qualname = ? JOIN scans s ON s.func_id = f.id WHERE fi.path = ?",
                (qualname, path))]
            if not commits:
                return set()
            if self._by_commit is None:
                by: dict[int, set[str]] = {}
                for name, cid in self.db.execute("SELECT name, commit_id FROM tests"):
                    by.setdefault(cid, set()).add(name)
                self._by_commit = by
        ran = set(executing) if executing is not None else {
            ln.test_id for ln in self.tests_executing(path, qualname)}
        return set().union(*(self._by_commit.get(c, set()) for c in commits)) - ran

    def test_names(self) -> set[str]:
        with self._reading():
            return {r[0] for r in self.db.execute("SELECT name FROM tests")}

    def measurement(self, test: str) -> tuple[str, int] | None:
        """(commit, measured_at) of a test's links, or None: not in the map."""
        with self._reading():
            row = self.db.execute("SELECT c.sha, t.measured_at FROM tests t JOIN commits c "
                                  "ON c.id = t.commit_id WHERE t.name = ?", (test,)).fetchone()
        return (row[0], int(row[1])) if row else None

    def functions_of(self, test: str) -> list[tuple[str, str, str]]:
        """(path, qualname, kind) of every function the test executed, by path."""
        with self._reading():
            row = self.db.execute("SELECT funcs FROM tests WHERE name = ?", (test,)).fetchone()
            if row is None:
                return []
            ids = unpack(row[0])
            out: list[tuple[str, str, str]] = []
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                out += [(p, q, KIND_NAME[k]) for p, q, k in self.db.execute(
                    "SELECT fi.path, f.qualname, f.kind FROM funcs f JOIN files fi "
                    f"ON fi.id = f.file_id WHERE f.id IN ({','.join('?' * len(chunk))})",
                    chunk)]
        return sorted(out)

    def commits(self) -> list[tuple[str, int, int]]:
        """(sha, tests measured at it, newest measured_at), newest first."""
        with self._reading():
            return [(sha, n, hi) for sha, n, hi in self.db.execute(
                "SELECT c.sha, COUNT(t.id), MAX(t.measured_at) FROM commits c JOIN tests t "
                "ON t.commit_id = c.id GROUP BY c.id ORDER BY MAX(t.measured_at) DESC")]

    def each_test(self) -> Iterator[tuple[str, list[int]]]:
        """(test id, its function ids) of every test of the map."""
        with self._reading():
            rows = self.db.execute("SELECT name, funcs FROM tests").fetchall()
            for name, blob in rows:
                yield name, unpack(blob)

    def scanned_functions(self) -> set[int]:
        """Ids of every function (not class or module body) of the files measured."""
        with self._reading():
            return {r[0] for r in self.db.execute(
                "SELECT DISTINCT s.func_id FROM scans s JOIN funcs f ON f.id = s.func_id "
                "WHERE f.kind = ?", (KIND_CODE["function"],))}

    def stats(self) -> Stats:
        with self._reading():
            one = self.db.execute
            commits = tuple((sha, n, lo, hi) for sha, n, lo, hi in one(
                "SELECT c.sha, COUNT(t.id), MIN(t.measured_at), MAX(t.measured_at) "
                "FROM commits c JOIN tests t ON t.commit_id = c.id GROUP BY c.id "
                "ORDER BY MAX(t.measured_at) DESC"))
            return Stats(one("SELECT COUNT(*) FROM tests").fetchone()[0],
                         one("SELECT COUNT(DISTINCT func_id) FROM links").fetchone()[0],
                         one("SELECT COUNT(*) FROM files").fetchone()[0], commits,
                         one("SELECT COUNT(*) FROM links").fetchone()[0],
                         os.path.getsize(self.path))

    def generation(self) -> str:
        """Changes whenever the map's content does (for the audit memo's key)."""
        with self._reading():
            dv = self.db.execute("PRAGMA data_version").fetchone()[0]
            n = self.db.execute("SELECT COUNT(*), COALESCE(MAX(measured_at), 0) "
                                "FROM tests").fetchone()
        st = os.stat(self.path)
        return f"{st.st_size}:{st.st_mtime_ns}:{dv}:{n[0]}:{n[1]}"


class Adding:
    """One ``MapStore.adding`` ingest in progress. A test met again in the same ingest (another
    data file measured it too) is joined: counted once, its links the union of the parts."""

    def __init__(self, store: MapStore, commit_id: int, when: int) -> None:
        self.store = store
        self.commit_id = commit_id
        self.when = when
        self.pending = _Pending()
        self.counts = dict.fromkeys(("added", "joined", "replaced", "older"), 0)
        self.links = 0
        # this ingest's function ids per test (compact: 4 bytes a link), for a test met again
        self._seen: dict[str, tuple[str, array[int]]] = {}

    def func_ids(self, funcs: Iterable[FuncRef]) -> list[int]:
        """The map's ids of the functions, in their order (interned when new)."""
        refs = list(funcs)
        got = self.store.func_ids(refs)
        return [got[f] for f in refs]

    def scan(self, func_ids: Iterable[int]) -> None:
        self.store.record_scan(self.commit_id, func_ids)

    def test(self, name: str, func_ids: Iterable[int]) -> None:
        new = set(func_ids)
        seen = self._seen.get(name)
        if seen is None:
            what = self.store._put(name, self.commit_id, self.when, new, self.pending)
            self.counts[what] += 1
            if what != "older":
                self.links += len(new)
            self._seen[name] = (what, array("I", sorted(new)))
        elif seen[0] != "older":
            before = set(seen[1])
            more = new - before
            if more:
                self.store._put(name, self.commit_id, self.when, more, self.pending)
                self.links += len(more)
                self._seen[name] = (seen[0], array("I", sorted(before | more)))
        if len(self.pending) > _FLUSH_AT:  # bounded memory for a large ingest
            self.pending.flush(self.store.db)

    def result(self) -> AddResult:
        return AddResult(links=self.links, **self.counts)


# Pending link rows written in one sorted pass once this many are collected (about 40 MB).
_FLUSH_AT = 4_000_000


class _Pending:
    """Link rows to write, collected over many tests and written sorted by key: per function
    the test ids (compact arrays, 4 bytes a row), so the rows come out in key order without
    sorting millions of tuples."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.new: dict[int, array[int]] = {}
        self.gone: dict[int, array[int]] = {}
        self._n = 0
        self._last = {"new": -1, "gone": -1}
        self._ordered = {"new": True, "gone": True}

    def __len__(self) -> int:
        return self._n

    def _put(self, into: dict[int, array[int]], which: str, tid: int, funcs: set[int]) -> None:
        if not funcs:
            return
        if tid < self._last[which]:  # rows of an earlier test: each list needs sorting
            self._ordered[which] = False
        self._last[which] = tid
        for f in funcs:
            a = into.get(f)
            if a is None:
                a = into[f] = array("I")
            a.append(tid)
        self._n += len(funcs)

    def add(self, tid: int, funcs: set[int]) -> None:
        self._put(self.new, "new", tid, funcs)

    def drop(self, tid: int, funcs: set[int]) -> None:
        self._put(self.gone, "gone", tid, funcs)

    @staticmethod
    def _rows(by: dict[int, array[int]], ordered: bool) -> Iterator[tuple[int, int]]:
        for f in sorted(by):
            ts = by[f] if ordered else sorted(by[f])
            for t in ts:
                yield f, t

    def flush(self, db: sqlite3.Connection) -> None:
        # Drops first: a test replaced and then re-added in one batch keeps its new rows.
        if self.gone:
            db.executemany("DELETE FROM links WHERE func_id = ? AND test_id = ?",
                           self._rows(self.gone, self._ordered["gone"]))
        if self.new:
            db.executemany("INSERT OR IGNORE INTO links VALUES (?, ?)",
                           self._rows(self.new, self._ordered["new"]))
        self._reset()


def _tune(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA cache_size = -262144")  # 256 MiB: a map of 10 M links fits
    db.execute("PRAGMA temp_store = MEMORY")


def merge_files(inputs: list[str], output: str) -> AddResult:
    """``map merge A B ... -o C``: a new map built under a temporary name from the inputs in
    order, renamed over ``output`` once complete (an input may be the output)."""
    d = os.path.dirname(os.path.abspath(output))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".map-merge-", suffix=".tmp", dir=d)
    os.close(fd)
    os.unlink(tmp)
    total = AddResult()
    try:
        opened = [MapStore.open(p) for p in inputs]  # every input checked before any work
        out = MapStore.create(tmp)
        try:
            for src in opened:
                r = out.merge_from(src)
                total = AddResult(*(a + b for a, b in zip(
                    (total.added, total.joined, total.replaced, total.older, total.links),
                    (r.added, r.joined, r.replaced, r.older, r.links), strict=True)))
                src.close()
            with out._reading():
                out.db.execute("VACUUM")
        finally:
            out.close()
        os.replace(tmp, output)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return total


# Finding the map and naming it for a memo key need only this module: a kept answer is looked
# up without importing the audit (auditor.measured).
def map_token(path: str) -> str:
    """The map's identity for a memo key: its path and a generation that changes with it."""
    with MapStore.open(path) as store:
        return f"{os.path.realpath(path)}:{store.generation()}"
