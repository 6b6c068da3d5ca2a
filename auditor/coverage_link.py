"""Tier 1: tests whose coverage context executed the changed lines (coverage.py's API)."""

from __future__ import annotations

import os
import sqlite3

from testdb.errors import InputError, SourceLoc

_PHASES = ("|run", "|setup", "|teardown")


def context_to_id(ctx: str, known: set[str]) -> str | None:
    """pytest-cov contexts look like ``tests/x.py::test_f[p]|run``; map to a list id."""
    for ph in _PHASES:
        if ctx.endswith(ph):
            ctx = ctx[: -len(ph)]
    for prefix in ("tests/integration/defs/", "tests/"):
        cand = ctx[len(prefix):] if ctx.startswith(prefix) else None
        if cand and cand in known:
            return cand
    return ctx if ctx in known else (ctx or None)


def covering_tests(data_file: str, root: str, path: str, lines: set[int], known: set[str]
                   ) -> list[str]:
    try:
        from coverage import CoverageData
        from coverage.exceptions import CoverageException
    except ImportError:
        raise InputError("--coverage needs the coverage package", SourceLoc(data_file),
                         "pip install coverage") from None
    if not os.path.isfile(data_file):
        raise InputError("coverage data file not found", SourceLoc(data_file))
    data = CoverageData(basename=data_file)
    target = os.path.normpath(os.path.join(os.path.realpath(root), path))
    found: set[str] = set()
    # A damaged file fails deep inside coverage.py or sqlite3 (bad rows, missing tables, NUL in
    # paths, numbits that are not bytes): every such failure is a bad input, not our bug.
    try:
        data.read()
        for f in data.measured_files():
            if os.path.normpath(os.path.realpath(f)) != target and not f.endswith("/" + path):
                continue
            by_line = data.contexts_by_lineno(f)
            for ln in lines:
                for ctx in by_line.get(ln, []):
                    tid = context_to_id(str(ctx), known)
                    if tid:
                        found.add(tid)
    except (CoverageException, sqlite3.Error, ValueError, TypeError, KeyError,
            AttributeError) as exc:
        raise InputError(f"not a readable coverage data file: {exc}", SourceLoc(data_file),
                         "pass the .coverage file `coverage run --context=...` or pytest-cov "
                         "wrote") from None
    return sorted(found)
