"""``map add``: data files of either kind read into one measurement. A coverage data file goes
to ``auditor.covmap.ingest`` (in worker processes when many), a CBTS touch DB to
``auditor.covmap.cbts``; both readers share ``ingest``'s records, so the choice between them
lives here, above both (no import cycle)."""

from __future__ import annotations

import os
from collections.abc import Callable

from auditor.covmap import cbts
from auditor.covmap.ingest import Ingest, Sources, read_coverage, resolve_commit
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
