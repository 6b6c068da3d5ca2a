"""``map add``: data files of either kind read into one measurement. A coverage data file goes
to ``auditor.covmap.ingest`` (in worker processes when many), a CBTS touch DB to
``auditor.covmap.cbts``; both readers share ``ingest``'s records, so the choice between them
lives here, above both (no import cycle)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from array import array
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from auditor.covmap import cbts
from auditor.covmap.ingest import (
    Ingest,
    Part,
    Preload,
    Reader,
    Sources,
    measured_rels,
    parse_files,
    preload,
    read_coverage,
    resolve_commit,
)
from auditor.covmap.store import AddResult, FuncRef, MapStore
from testdb.errors import InputError, SourceLoc


def read_any(path: str, sources_at: Callable[[str | None], Sources], into: Ingest,
             commit: str | None, head: str | None = None) -> str | None:
    """A coverage data file or a CBTS touch DB (told apart by their tables); returns the
    commit it was measured at: ``commit`` (``--commit``), else for a coverage data file the
    checkout's ``head``, for a CBTS DB its meta's (never the checkout's HEAD: CI measured it
    at a commit of its own)."""
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


def _read_groups(paths: list[str], root: str, commit: str | None,
                 sources_at: Callable[[str | None], Sources]) -> list[Ingest]:
    """The coverage data files read into one ``Ingest`` (the path of CBTS inputs and of
    ``ingest``'s callers; ``add_files`` stores while it reads)."""
    into = Ingest()
    reading = _Reading(paths, root, commit, sources_at(commit))
    refs: dict[str, list[Any]] = {}
    for part in reading.parts():
        table = refs.setdefault(part.reader, list(reading.preloaded))
        table += part.refs
        into.scanned.update(table[i] for i in part.scanned)
        into.unmatched_files.update(part.unmatched)
        for t, fs in part.tests:
            into.tests.setdefault(t, set()).update(table[i] for i in fs)
    return [into]


# ---- map add: read in worker processes, store in this one meanwhile -------------------------
_WORKER: dict[str, Reader] = {}


def _worker_init(root: str, commit: str | None, preloaded: Preload | None) -> None:
    import gc

    gc.disable()  # the reader builds millions of small objects and frees none until it exits
    _WORKER["reader"] = Reader(Sources(root, commit), preloaded)


def _worker_read(path: str) -> Part:
    return _WORKER["reader"].read(path)


def _worker_measured(path: str) -> list[str]:
    return measured_rels(path, _WORKER["reader"].sources)


def _worker_parse(rels: list[str]) -> list[tuple[str, list[FuncRef] | None, array[int] | None]]:
    return parse_files(rels, _WORKER["reader"].sources)


class _Reading:
    """The data files read (``Reader.read``), in order, streamed (``parts``): in worker
    processes when there are several files and CPUs, the caller storing a file's part while
    the workers read the next ones. There, the files the data measured are first parsed once,
    shared out among the workers (each data file of a large run measures most of the
    project's files: every reader parsing them all cost seconds a call), and handed to every
    reader numbered alike: ``preloaded`` are those functions, numbers 0 on."""

    def __init__(self, paths: list[str], root: str, commit: str | None, sources: Sources,
                 workers: int | None = None) -> None:
        from testdb.parallel import usable_cpus

        self.paths, self.root, self.commit, self.sources = paths, root, commit, sources
        self.cpus = usable_cpus() if workers is None else workers
        self.n = min(self.cpus, len(paths))  # readers: a data file is read by one
        self.preloaded: list[FuncRef] = []

    def _pool(self, n: int, preloaded: Preload | None) -> Any:
        try:
            from concurrent.futures import ProcessPoolExecutor

            return ProcessPoolExecutor(max_workers=n, initializer=_worker_init,
                                       initargs=(self.root, self.commit, preloaded))
        except (OSError, RuntimeError, NotImplementedError):
            return None  # no process pool here (a sandbox): serially is correct

    def parts(self) -> Generator[Part, None, None]:
        pool = self._pool(self.cpus, None) if self.cpus > 1 else None
        if pool is None:
            reader = Reader(self.sources)
            for p in self.paths:
                yield reader.read(p)
            return
        with pool:  # even one data file: its thousand sources parse on every CPU
            rels = sorted(set().union(*pool.map(_worker_measured, self.paths)))
            size = max(1, -(-len(rels) // (self.cpus * 4)))
            chunks = [rels[i:i + size] for i in range(0, len(rels), size)]
            shared = preload([x for got in pool.map(_worker_parse, chunks) for x in got])
        self.preloaded = shared[0]
        pool = self._pool(self.n, shared) if self.n > 1 else None
        if pool is None:
            reader = Reader(self.sources, shared)
            for p in self.paths:
                yield reader.read(p)
            return
        done = False
        try:
            futures = [pool.submit(_worker_read, p) for p in self.paths]
            for f in futures:
                yield f.result()
            done = True
        finally:
            # Not waiting for the workers to exit: each holds a large heap that takes a
            # while to tear down, and every result is in.
            pool.shutdown(wait=False, cancel_futures=not done)


@dataclass
class Added:
    """What a ``map add`` did: the store's counts, the commit, and what it could not map."""

    result: AddResult
    commit: str
    tests: int
    unmatched_files: set[str] = field(default_factory=set)
    unknown_functions: int = 0


def add_files(data_files: list[str], root: str, commit: str | None, map_path: str, *,
              measured_at: int | None = None, work_tree: bool = False,
              workers: int | None = None) -> Added:
    """``testdb map add``: the data files read and stored in the map at ``map_path`` as one
    atomic write. Coverage data files are read in worker processes while this process stores
    what they have read (the store's b-tree inserts and the readers' ``contexts_by_lineno``
    are each about half of an ingest: overlapped, the slower one sets the pace). A CBTS
    touch DB names its commit in its meta, so inputs with one are read first, then stored
    (``ingest``). A new map file is built under a temporary name and renamed into place, so
    a failed first add leaves no map behind."""
    if not data_files:
        raise InputError("no data file to add", hint="pass coverage data files or CBTS DBs")
    for p in data_files:
        if not os.path.isfile(p):
            raise InputError("data file not found", SourceLoc(p))
    if any(cbts.shape(p) is not None for p in data_files):
        got, sha = ingest(data_files, root, commit, work_tree=work_tree)
        with _writing(map_path) as store:
            res = store.add(sha, measured_at, got.tests, got.scanned)
        return Added(res, sha, len(got.tests), got.unmatched_files, got.unknown_functions)
    given = resolve_commit(root, commit) if commit is not None else None
    at = given or resolve_commit(root, None)
    src_commit = None if work_tree else at
    if at is None and work_tree:
        at = "work-tree"
    if at is None:
        raise InputError("no commit for the measurements", hint="pass --commit SHA (the commit "
                         "the tests ran at); outside a git checkout it is required")
    names: set[str] = set()
    unmatched: set[str] = set()
    reading = _Reading(data_files, root, src_commit, Sources(root, src_commit), workers)
    parts = reading.parts()
    try:
        first = next(parts)  # a file that cannot be read fails before the map is touched
        with _writing(map_path) as store, store.adding(at, measured_at) as w:
            shared = w.func_ids(reading.preloaded)
            ids: dict[str, list[int]] = {}  # per reader: its function numbers -> map ids
            for part in _chain(first, parts):
                table = ids.get(part.reader)
                if table is None:
                    table = ids[part.reader] = list(shared)
                assert len(table) == part.first, "a reader's numbers out of step"
                table += w.func_ids(part.refs)
                w.scan(table[i] for i in part.scanned)
                unmatched.update(part.unmatched)
                for name, fs in part.tests:
                    names.add(name)
                    w.test(name, [table[i] for i in fs])
        res = w.result()
    finally:
        parts.close()
    return Added(res, at, len(names), unmatched)


def _chain(first: Part, rest: Iterator[Part]) -> Iterator[Part]:
    yield first
    yield from rest


@contextlib.contextmanager
def _writing(path: str) -> Iterator[MapStore]:
    """The map to add to: an existing one (each add is its own transaction), or a new one
    built beside ``path`` under a temporary name and renamed into place once complete."""
    if os.path.exists(path):
        with MapStore.open(path, write=True) as store:
            yield store
        return
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".map-new-", suffix=".tmp", dir=d)
    os.close(fd)
    os.unlink(tmp)
    try:
        with MapStore.create(tmp) as store:
            yield store
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
