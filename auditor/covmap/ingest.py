"""Reading measurements for the map: coverage.py data files whose dynamic contexts are test ids
(through coverage.py's ``CoverageData`` API); CBTS touch DBs are ``auditor.covmap.cbts``'s, and
``auditor.covmap.add`` chooses between the two.

Executed lines become functions by the AST spans of the source *at the measured commit*: read
from git objects when the checkout is a git repository that has the commit (never the work
tree, which may be at another commit or dirty), else from the work tree as it is."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import weakref
from array import array
from dataclasses import dataclass, field

from auditor.covmap.fingerprint import Unit, line_owners, units
from auditor.covmap.store import FuncRef
from testdb.errors import InputError, SourceLoc

_PHASES = ("|run", "|setup", "|teardown")
_ID_PREFIXES = ("tests/integration/defs/", "tests/")


def test_id(context: str, stage: str = "") -> str:
    """The test-list id of a dynamic context: pytest-cov's ``tests/x.py::t[p]|run`` ->
    ``x.py::t[p]``-style ids as the lists write them (``tests/integration/defs/`` and
    ``tests/`` dropped: unit tests are ``unittest/...``), a CBTS ``STAGE/nodeid`` without
    its stage. '' for the import-time (empty) context."""
    ctx = context
    for ph in _PHASES:
        if ctx.endswith(ph):
            ctx = ctx[: -len(ph)]
            break
    if stage and ctx.startswith(stage + "/"):
        ctx = ctx[len(stage) + 1:]
    for p in _ID_PREFIXES:
        if ctx.startswith(p):
            return ctx[len(p):]
    return ctx


def is_test_file(path: str) -> bool:
    """Test code is not the project's code: the map links tests to what they test."""
    name = path.rsplit("/", 1)[-1]
    return (name.startswith("test_") or name == "conftest.py" or name.endswith("_test.py")
            or path.startswith("tests/") or "/tests/" in path)


class Sources:
    """The checkout's Python sources at one commit: ``git`` objects, or the work tree."""

    def __init__(self, root: str, commit: str | None) -> None:
        self.root = os.path.realpath(root)
        self.commit = commit or ""
        self._git = False
        self._cat: subprocess.Popen[bytes] | None = None
        self._prefix = ""
        self._paths: set[str] | None = None
        self._units: dict[str, tuple[list[Unit], array[int]] | None] = {}
        if commit is not None and _git_has(self.root, commit):
            self._git = True
            out = _git(self.root, "ls-tree", "-r", "-z", "--name-only", "--full-tree", commit)
            prefix = _git(self.root, "rev-parse", "--show-prefix").strip()
            names = [n for n in out.split("\0") if n.endswith(".py")]
            self._paths = {n[len(prefix):] for n in names if n.startswith(prefix)}
            self._prefix = prefix

    @property
    def from_git(self) -> bool:
        return self._git

    def exists(self, rel: str) -> bool:
        if self._paths is not None:
            return rel in self._paths
        return os.path.isfile(os.path.join(self.root, rel))

    def resolve(self, measured: str) -> str | None:
        """The checkout-relative path of a measured file name: relative names are relative to
        the root; an absolute one under the root by its place, from another machine by the
        longest suffix that is a file of the checkout."""
        m = measured.replace("\\", "/")
        if not os.path.isabs(m):
            rel = os.path.normpath(m)
            return rel if self.exists(rel) else None
        real = os.path.realpath(m)
        if real.startswith(self.root + os.sep):
            rel = os.path.relpath(real, self.root)
            if self.exists(rel):
                return rel
        parts = m.strip("/").split("/")
        for i in range(len(parts)):
            rel = "/".join(parts[i:])
            if self.exists(rel):
                return rel
        return None

    def text(self, rel: str) -> str | None:
        if self._git:
            blob = self._blob(f"{self.commit}:{self._prefix}{rel}")
            if blob is None:
                return None
            try:
                return blob.decode("utf-8")
            except UnicodeDecodeError:
                return None
        try:
            with open(os.path.join(self.root, rel), encoding="utf-8") as fh:
                return fh.read()
        except (OSError, UnicodeDecodeError):
            return None

    def _blob(self, spec: str) -> bytes | None:
        """One object through a ``git cat-file --batch`` kept open: a ``git show`` per file
        cost a process start each, seconds for the thousand files a large run measures."""
        if self._cat is None:
            self._cat = subprocess.Popen(["git", "-C", self.root, "cat-file", "--batch"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            weakref.finalize(self, _close, self._cat)
        cat = self._cat
        assert cat.stdin is not None and cat.stdout is not None
        cat.stdin.write(spec.encode() + b"\n")
        cat.stdin.flush()
        line = cat.stdout.readline()
        if not line or line.endswith((b" missing\n", b" ambiguous\n")):
            return None
        _, kind, size = line.split()  # "<sha> <type> <size>"
        data = cat.stdout.read(int(size) + 1)[:-1]
        return data if kind == b"blob" else None

    def units(self, rel: str) -> tuple[list[Unit], array[int]] | None:
        """The file's units and its line owners; None when it is missing or does not parse."""
        if rel not in self._units:
            src = self.text(rel)
            got: tuple[list[Unit], array[int]] | None = None
            if src is not None:
                try:
                    us = units(src)
                    got = (us, line_owners(us, src.count("\n") + 1))
                except (SyntaxError, ValueError):
                    got = None
            self._units[rel] = got
        return self._units[rel]


def _close(proc: subprocess.Popen[bytes]) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def _git(root: str, *args: str) -> str:
    proc = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                          check=False, timeout=300)
    if proc.returncode != 0:
        raise InputError(f"git {' '.join(args[:2])} failed: {proc.stderr.strip()[:300]}")
    return proc.stdout


def _git_has(root: str, commit: str) -> bool:
    try:
        proc = subprocess.run(["git", "-C", root, "cat-file", "-e", f"{commit}^{{commit}}"],
                              capture_output=True, check=False, timeout=60)
    except FileNotFoundError:
        return False
    return proc.returncode == 0


def resolve_commit(root: str, commit: str | None) -> str | None:
    """A full sha for ``commit`` (or HEAD when None) in a git checkout; ``commit`` as given
    outside one; None when neither is known."""
    rev = commit or "HEAD"
    if _git_has(root, rev):
        return _git(root, "rev-parse", f"{rev}^{{commit}}").strip()
    return commit


@dataclass
class Ingest:
    """What one or more data files measured: per test id the functions it executed; every
    function of each measured file (the ground of "did not execute")."""

    tests: dict[str, set[FuncRef]] = field(default_factory=dict)
    scanned: set[FuncRef] = field(default_factory=set)
    unmatched_files: set[str] = field(default_factory=set)  # measured, not in the checkout
    unknown_functions: int = 0  # CBTS rows naming a function the source does not hold
    commit: str | None = None  # the commit a CBTS DB's meta names


@dataclass
class Part:
    """What one coverage data file measured, its functions numbered by the ``Reader`` that read
    it (compact: a test's functions are an array of those numbers, 4 bytes each, so a worker
    process hands millions of links over cheaply). ``refs`` are the functions the reader
    numbered while reading this file, from ``first`` on; ``scanned``, the numbers of every
    function of the files it measured for the first time."""

    reader: str
    first: int
    refs: list[FuncRef]
    scanned: array[int]
    tests: list[tuple[str, array[int]]]
    unmatched: list[str]


# Files parsed ahead of the reading, numbered once for every reader: (the functions in
# order, per file the numbers of its first unit and of the one after its last and its line
# owners, or None where it does not parse).
Preload = tuple[list[FuncRef], dict[str, tuple[int, int, "array[int]"] | None]]


def measured_rels(path: str, sources: Sources) -> list[str]:
    """The checkout files (not test code) a data file measured; [] for a file that cannot be
    read (its reading says why)."""
    from coverage import CoverageData
    from coverage.exceptions import CoverageException

    try:
        data = CoverageData(basename=path)
        data.read()
        files = data.measured_files()
    except (CoverageException, sqlite3.Error):
        return []
    rels = (sources.resolve(m) for m in files)
    return [r for r in rels if r is not None and not is_test_file(r)]


def parse_files(rels: list[str], sources: Sources
                ) -> list[tuple[str, list[FuncRef] | None, array[int] | None]]:
    """Each file's functions and line owners (None: missing, or does not parse)."""
    out: list[tuple[str, list[FuncRef] | None, array[int] | None]] = []
    for rel in rels:
        got = sources.units(rel)
        if got is None:
            out.append((rel, None, None))
        else:
            us, owner = got
            out.append((rel, [FuncRef(rel, u.qualname, u.kind, u.fp) for u in us], owner))
    return out


def preload(parsed: list[tuple[str, list[FuncRef] | None, array[int] | None]]) -> Preload:
    refs: list[FuncRef] = []
    files: dict[str, tuple[int, int, array[int]] | None] = {}
    for rel, fs, owner in parsed:
        if fs is None or owner is None:
            files[rel] = None
        else:
            files[rel] = (len(refs), len(refs) + len(fs), owner)
            refs += fs
    return refs, files


class Reader:
    """Reads coverage data files against one ``Sources``, numbering each function once
    (``preloaded``: the files parsed ahead, numbered alike for every reader)."""

    def __init__(self, sources: Sources, preloaded: Preload | None = None) -> None:
        self.sources = sources
        self.key = f"{os.getpid()}:{id(self)}"
        self.refs: list[FuncRef] = list(preloaded[0]) if preloaded else []
        self._files: dict[str, tuple[int, int, array[int]] | None] = (
            dict(preloaded[1]) if preloaded else {})
        self._scanned: set[str] = set()

    def _file(self, rel: str) -> tuple[int, int, array[int]] | None:
        """(the numbers of the file's first unit and of the one after its last, its line
        owners), numbered on first use."""
        if rel not in self._files:
            got = self.sources.units(rel)
            if got is None:
                self._files[rel] = None
            else:
                us, owner = got
                self._files[rel] = (len(self.refs), len(self.refs) + len(us), owner)
                self.refs += [FuncRef(rel, u.qualname, u.kind, u.fp) for u in us]
        return self._files[rel]

    def read(self, path: str) -> Part:
        """One coverage.py data file: each non-empty context is a test; each executed line
        is the function whose body holds it."""
        from coverage import CoverageData
        from coverage.exceptions import CoverageException

        first = len(self.refs)
        scanned = array("I")
        unmatched: list[str] = []
        data = CoverageData(basename=path)
        try:
            data.read()
            contexts = [c for c in data.measured_contexts() if c]
            files = data.measured_files()
            if not files:
                raise InputError("the coverage data file measured no file", SourceLoc(path),
                                 "pass the .coverage file of a run (coverage run, pytest --cov)")
            if not contexts:
                raise InputError("the coverage data has no dynamic contexts: the map needs one "
                                 "per test", SourceLoc(path), "collect with pytest-cov's "
                                 "--cov-context=test, or `testdb launch --coverage`")
            ids = {c: test_id(c) for c in contexts}  # a context's test id, worked out once
            tests: dict[str, set[int]] = {t: set() for t in ids.values() if t}
            for measured in sorted(files):
                rel = self.sources.resolve(measured)
                if rel is None:
                    unmatched.append(measured)
                    continue
                if is_test_file(rel):
                    continue
                got = self._file(rel)
                if got is None:
                    unmatched.append(measured)
                    continue
                base, end, owner = got
                if rel not in self._scanned:
                    self._scanned.add(rel)
                    scanned.extend(range(base, end))
                per_ctx: dict[str, set[int]] = {}
                n = len(owner)
                for line, ctxs in data.contexts_by_lineno(measured).items():
                    if 0 < line < n:
                        o = base + owner[line]
                        for ctx in ctxs:
                            got_ctx = per_ctx.get(ctx)
                            if got_ctx is None:
                                got_ctx = per_ctx[ctx] = set()
                            got_ctx.add(o)
                for ctx, owners in per_ctx.items():
                    test = ids.get(ctx)
                    if test:
                        tests[test].update(owners)
        except (CoverageException, sqlite3.Error) as exc:
            raise InputError(f"not a readable coverage data file: {exc}", SourceLoc(path),
                             "pass the .coverage file coverage.py or pytest-cov wrote") from None
        return Part(self.key, first, self.refs[first:], scanned,
                    [(t, array("I", sorted(fs))) for t, fs in tests.items()], unmatched)


def read_coverage(path: str, sources: Sources, into: Ingest) -> None:
    """One coverage.py data file into ``into`` (``Reader.read``, its numbers made functions)."""
    reader = Reader(sources)
    part = reader.read(path)
    refs = reader.refs
    into.scanned.update(refs[i] for i in part.scanned)
    into.unmatched_files.update(part.unmatched)
    for t, fs in part.tests:
        into.tests.setdefault(t, set()).update(refs[i] for i in fs)
