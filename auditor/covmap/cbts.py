"""TensorRT-LLM's CBTS touch DBs as map input: a TensorRT-LLM user gets measured links from
the post-merge runs that already record them.

The shapes, learnt from ``jenkins/scripts/cbts/`` of NVIDIA/TensorRT-LLM (docs/map.md names
the files and commits; none of their code is used here):

- v1, the merged ``cbts_touchmap.sqlite`` (``coverage_selection/TOUCH_DB_CONTRACT.md``):
  ``touch(test, file, qualname)``, one row per (test, function entered), ``test = ''`` for
  import time, ``file`` product-relative (``tensorrt_llm/...``), ``qualname`` a
  ``co_qualname`` (``<locals>`` frames, lambdas and comprehensions never recorded), and a
  ``meta(key, value)`` table of strings, every key optional. A flat table with a ``stage``
  column (the contract's v2 sizing input) is read the same way.
- v3, the compact normalized schema (``coverage_utils/COLLECTION.md``): ``stage(id, name)``,
  ``case_stage(id, test, stage_id)``, ``file(id, path)``, ``symbol(id, file_id, qualname)``,
  ``touch(case_stage_id, symbol_id)``, ``meta`` with ``schema_version = '3'``; a context is
  ``<STAGE>/<pytest nodeid>``.

A row names a function entered, not lines: its fingerprint comes from the source at the
commit (the ``meta`` keys ``commit``, ``git_commit``, ``commit_sha`` or ``sha``, or
``--commit``); a row whose function that source does not hold is counted, not stored.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator

from auditor.covmap.ingest import Ingest, Sources, is_test_file, test_id
from auditor.covmap.store import FuncRef
from testdb.errors import InputError, SourceLoc

COMMIT_KEYS = ("commit", "git_commit", "commit_sha", "sha")


def _connect(path: str) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True)


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def shape(path: str) -> str | None:
    """'v1' or 'v3' for a CBTS touch DB; None for anything else (a coverage data file)."""
    with open(path, "rb") as fh:
        if fh.read(16) != b"SQLite format 3\x00":
            return None
    try:
        db = _connect(path)
        try:
            touch = _columns(db, "touch")
            if {"test", "file", "qualname"} <= touch:
                return "v1"
            if {"case_stage_id", "symbol_id"} <= touch:
                return "v3"
        finally:
            db.close()
    except sqlite3.Error:
        return None
    return None


def _rows_v1(db: sqlite3.Connection) -> Iterator[tuple[str, str, str]]:
    """(test id, file, qualname) of a flat touch table, the stage prefix taken off when the
    table says the stage."""
    if "stage" in _columns(db, "touch"):
        for t, f, q, st in db.execute("SELECT test, file, qualname, stage FROM touch "
                                      "WHERE test != ''"):
            yield test_id(t, st or ""), f, q
    else:
        for t, f, q in db.execute("SELECT test, file, qualname FROM touch WHERE test != ''"):
            yield test_id(t), f, q


def _rows_v3(db: sqlite3.Connection) -> Iterator[tuple[str, str, str]]:
    need = {"stage": {"id", "name"}, "case_stage": {"id", "test", "stage_id"},
            "file": {"id", "path"}, "symbol": {"id", "file_id", "qualname"}}
    for table, cols in need.items():
        if not cols <= _columns(db, table):
            raise sqlite3.DatabaseError(f"table {table} lacks the columns "
                                        f"{sorted(cols - _columns(db, table))}")
    yield from ((test_id(t, st), f, q) for t, st, f, q in db.execute(
        "SELECT cs.test, st.name, fi.path, sy.qualname FROM touch tc "
        "JOIN case_stage cs ON cs.id = tc.case_stage_id JOIN stage st ON st.id = cs.stage_id "
        "JOIN symbol sy ON sy.id = tc.symbol_id JOIN file fi ON fi.id = sy.file_id "
        "WHERE cs.test != ''"))


def _nested(qual: str, refs: dict[str, FuncRef]) -> bool:
    parts = qual.split(".")
    return any(refs.get(".".join(parts[:i]), _CLASS).kind == "function"
               for i in range(1, len(parts)))


_CLASS = FuncRef("", "", "class", b"")


def read(path: str, kind: str, sources_at: Callable[[str | None], Sources], into: Ingest,
         commit: str | None) -> str | None:
    """Every row of a CBTS touch DB into ``into``; returns the commit measured."""
    try:
        db = _connect(path)
        try:
            meta: dict[str, str] = {}
            if {"key", "value"} <= _columns(db, "meta"):
                meta = {str(k): str(v) for k, v in db.execute("SELECT key, value FROM meta")}
            if kind == "v3" and meta.get("schema_version", "3") != "3":
                raise InputError(f"CBTS touch DB of schema_version {meta['schema_version']!r}; "
                                 "this reads 1 and 3", SourceLoc(path))
            named = next((meta[k] for k in COMMIT_KEYS if meta.get(k)), None)
            if commit and named and not named.startswith(commit) and not commit.startswith(named):
                raise InputError(f"--commit {commit} but the DB's meta says {named}",
                                 SourceLoc(path), "drop --commit, or pass the DB of that commit")
            at = commit or named
            if at is None:
                raise InputError("the CBTS touch DB's meta names no commit", SourceLoc(path),
                                 "pass --commit SHA (the commit its run measured)")
            src = sources_at(at)
            rows = list((_rows_v1 if kind == "v1" else _rows_v3)(db))
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise InputError(f"not a readable CBTS touch DB ({kind}): {exc}", SourceLoc(path),
                         "pass the merged cbts_touchmap.sqlite of a run") from None
    by_file: dict[str, dict[str, FuncRef] | None] = {}
    for tid, file, qual in rows:
        if not tid:
            continue
        into.tests.setdefault(tid, set())
        if file not in by_file:
            rel = src.resolve(file)
            got = src.units(rel) if rel is not None and not is_test_file(rel) else None
            if got is None:
                if rel is None:
                    into.unmatched_files.add(file)
                by_file[file] = None
            else:
                refs = {u.qualname: FuncRef(rel or file, u.qualname, u.kind, u.fp)
                        for u in got[0]}
                # CBTS never records a function nested in another (``<locals>``): that no
                # test entered one says nothing, so it is not part of the scan.
                into.scanned.update(r for q, r in refs.items() if not _nested(q, refs))
                by_file[file] = refs
        funcs = by_file[file]
        if funcs is None:
            continue
        ref = funcs.get(qual)
        if ref is None:
            into.unknown_functions += 1
            continue
        into.tests[tid].add(ref)
    into.commit = at
    return at
