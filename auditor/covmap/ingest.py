"""Reading measurements for the map: coverage.py data files whose dynamic contexts are test ids
(through coverage.py's ``CoverageData`` API), and CBTS touch DBs (``auditor.covmap.cbts``).

Executed lines become functions by the AST spans of the source *at the measured commit*: read
from git objects when the checkout is a git repository that has the commit (never the work
tree, which may be at another commit or dirty), else from the work tree as it is."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from array import array
from collections.abc import Callable
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
            try:
                return _git(self.root, "show", f"{self.commit}:./{rel}")
            except InputError:
                return None
        try:
            with open(os.path.join(self.root, rel), encoding="utf-8") as fh:
                return fh.read()
        except (OSError, UnicodeDecodeError):
            return None

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


def _refs(rel: str, us: list[Unit]) -> list[FuncRef]:
    return [FuncRef(rel, u.qualname, u.kind, u.fp) for u in us]


def read_coverage(path: str, sources: Sources, into: Ingest) -> None:
    """One coverage.py data file: each non-empty context is a test; each executed line is
    the function whose body holds it."""
    from coverage import CoverageData
    from coverage.exceptions import CoverageException

    data = CoverageData(basename=path)
    try:
        data.read()
        contexts = [c for c in data.measured_contexts() if c]
        if not data.measured_files():
            raise InputError("the coverage data file measured no file", SourceLoc(path),
                             "pass the .coverage file of a run (coverage run, pytest --cov)")
        if not contexts:
            raise InputError("the coverage data has no dynamic contexts: the map needs one per "
                             "test", SourceLoc(path), "collect with pytest-cov's "
                             "--cov-context=test, or `testdb launch --coverage`")
        ids = {c: test_id(c) for c in contexts}  # a context's test id, worked out once
        for tid in ids.values():
            if tid:
                into.tests.setdefault(tid, set())
        for measured in data.measured_files():
            rel = sources.resolve(measured)
            if rel is None:
                into.unmatched_files.add(measured)
                continue
            if is_test_file(rel):
                continue
            got = sources.units(rel)
            if got is None:
                into.unmatched_files.add(measured)
                continue
            us, owner = got
            refs = _refs(rel, us)
            into.scanned.update(refs)
            per_ctx: dict[str, set[int]] = {}
            n = len(owner)
            for line, ctxs in data.contexts_by_lineno(measured).items():
                if 0 < line < n:
                    o = owner[line]
                    for ctx in ctxs:
                        per_ctx.setdefault(ctx, set()).add(o)
            for ctx, owners in per_ctx.items():
                test = ids.get(ctx)
                if test:
                    into.tests[test].update(refs[o] for o in owners)
    except (CoverageException, sqlite3.Error) as exc:
        raise InputError(f"not a readable coverage data file: {exc}", SourceLoc(path),
                         "pass the .coverage file coverage.py or pytest-cov wrote") from None


def read_any(path: str, sources_at: Callable[[str | None], Sources], into: Ingest,
             commit: str | None, head: str | None = None) -> str | None:
    """A coverage data file or a CBTS touch DB (told apart by their tables); returns the
    commit it was measured at: ``commit`` (``--commit``), else for a coverage data file the
    checkout's ``head``, for a CBTS DB its meta's (never the checkout's HEAD: CI measured it
    at a commit of its own)."""
    from auditor.covmap import cbts

    if not os.path.isfile(path):
        raise InputError("data file not found", SourceLoc(path))
    shape = cbts.shape(path)
    if shape is None:
        read_coverage(path, sources_at(commit or head), into)
        return commit or head
    return cbts.read(path, shape, sources_at, into, commit)


def ingest(data_files: list[str], root: str, commit: str | None, *,
           work_tree: bool = False) -> tuple[Ingest, str]:
    """Every data file read (``read_any``) against the checkout ``root``; returns the
    measurements and the commit they were measured at. Data files of different commits are
    separate ``map add`` calls. ``work_tree``: the tests ran on the work tree as it is
    (``launch --coverage``): its files give the fingerprints, HEAD names the commit (a dirty
    function's links are then those of its edited fingerprint, which is what ran)."""
    into = Ingest()
    cache: dict[str | None, Sources] = {}

    def sources_at(c: str | None) -> Sources:
        if c not in cache:
            cache[c] = Sources(root, None if work_tree else c)
        return cache[c]

    given = resolve_commit(root, commit) if commit is not None else None
    head = resolve_commit(root, None) if given is None else None
    seen: set[str] = set()
    from auditor.covmap import cbts

    for p in data_files:
        if not os.path.isfile(p):
            raise InputError("data file not found", SourceLoc(p))
    coverage_files = [p for p in data_files if cbts.shape(p) is None]
    others = [p for p in data_files if p not in set(coverage_files)]
    if coverage_files:
        at = given or head
        src_commit = None if work_tree else at
        for part in _read_groups(coverage_files, root, src_commit, sources_at):
            _join(into, part)
        if at is not None:
            seen.add(at)
    for p in others:
        at = read_any(p, sources_at, into, given, head)
        if at is not None:
            seen.add(at)
    full = {resolve_commit(root, c) or c for c in seen}
    if len(full) > 1:
        raise InputError(f"the data files were measured at {len(full)} commits "
                         f"({', '.join(sorted(c[:12] for c in full))})",
                         hint="run `testdb map add` once per commit")
    at_commit = next(iter(full), None)
    if at_commit is None and work_tree:
        at_commit = "work-tree"
    if at_commit is None:
        raise InputError("no commit for the measurements", hint="pass --commit SHA (the commit "
                         "the tests ran at); outside a git checkout it is required")
    return into, at_commit


def _join(into: Ingest, part: Ingest) -> None:
    for t, fs in part.tests.items():
        into.tests.setdefault(t, set()).update(fs)
    into.scanned |= part.scanned
    into.unmatched_files |= part.unmatched_files
    into.unknown_functions += part.unknown_functions


def _read_group(job: tuple[list[str], str, str | None]) -> Ingest:
    """One worker's share of the data files (module level: pickled by name)."""
    paths, root, commit = job
    src = Sources(root, commit)
    into = Ingest()
    for p in paths:
        read_coverage(p, src, into)
    return into


def _read_groups(paths: list[str], root: str, commit: str | None,
                 sources_at: Callable[[str | None], Sources]) -> list[Ingest]:
    """The coverage data files read in worker processes, a group each, when there are
    several files and CPUs: coverage.py's per-file context read dominates an ingest."""
    from testdb.parallel import parallel_map, usable_cpus

    n = min(usable_cpus(), len(paths))
    if n <= 1:
        into = Ingest()
        src = sources_at(commit)
        for p in paths:
            read_coverage(p, src, into)
        return [into]
    groups = [paths[i::n] for i in range(n)]
    return list(parallel_map(_read_group, [(g, root, commit) for g in groups], workers=n,
                             min_items=2))
