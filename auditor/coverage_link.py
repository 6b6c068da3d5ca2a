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
    from coverage import CoverageData  # a runtime dependency; imported only for --coverage
    from coverage.exceptions import CoverageException

    if not os.path.isfile(data_file):
        raise InputError("coverage data file not found", SourceLoc(data_file))
    data = CoverageData(basename=data_file)
    base = os.path.realpath(root)
    target = os.path.normpath(os.path.join(base, path))
    found: set[str] = set()
    # A damaged file fails deep inside coverage.py or sqlite3 (bad rows, missing tables, NUL in
    # paths, numbits that are not bytes): every such failure is a bad input, not our bug.
    try:
        data.read()
        for f in data.measured_files():
            if not measures(f, base, target, path):
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


def measures(measured: str, base: str, target: str, path: str) -> bool:
    """Whether a measured file name is the changed file ``path``. A relative name
    (``relative_files = True``, the portable form CI writes) is relative to the checkout root,
    never to the current directory; an absolute one from another machine matches by suffix."""
    if not os.path.isabs(measured):
        return os.path.normpath(os.path.realpath(os.path.join(base, measured))) == target
    return (os.path.normpath(os.path.realpath(measured)) == target
            or measured.endswith("/" + path))
