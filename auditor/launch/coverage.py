"""``testdb launch --coverage``: every planned test runs under coverage.py with one dynamic
context per test (``auditor.covmap.plugin``), each job writing its own data file, on either
backend; when the run ends the data files of the tests that ran go into the map."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from auditor.launch.model import RunItem, RunResult

PLUGIN = "auditor.covmap.plugin"
# Outcomes whose data file is a measurement: the test ran to its end (passed or failed). A
# test that was skipped, timed out, was cancelled or lost its node executed only part of what
# it would: what it did not execute says nothing, so its file is left out.
MEASURED = frozenset({"passed", "failed"})
_TOOL_ROOT = str(Path(__file__).resolve().parents[2])


def data_file(run_dir: Path, key: str) -> Path:
    return Path(run_dir).resolve() / "coverage" / f"{key}.coverage"


def with_coverage(items: Iterable[RunItem], run_dir: Path, root: str) -> list[RunItem]:
    """The items with the plugin loaded into their pytest and their own data file."""
    out = []
    pythonpath = os.pathsep.join(p for p in (_TOOL_ROOT, os.environ.get("PYTHONPATH", "")) if p)
    for it in items:
        argv = list(it.argv)
        at = next((i for i in range(len(argv) - 1) if argv[i] == "-m" and argv[i + 1] == "pytest"),
                  None)
        if at is None:  # not a pytest command: it runs as planned, unmeasured
            out.append(it)
            continue
        argv[at + 2:at + 2] = ["-p", PLUGIN]
        env = dict(it.env)
        env.update({"TESTDB_COVERAGE_FILE": str(data_file(run_dir, it.key)),
                    "TESTDB_COVERAGE_ROOT": os.path.realpath(root),
                    "PYTHONPATH": os.pathsep.join(p for p in (pythonpath, env.get("PYTHONPATH"))
                                                  if p)})
        out.append(replace(it, argv=tuple(argv), env=tuple(sorted(env.items()))))
    return out


def measured_files(results: Iterable[RunResult], run_dir: Path) -> tuple[list[str], list[str]]:
    """(data files to add, test ids left out and why) of a finished run."""
    keep: list[str] = []
    left: list[str] = []
    for r in results:
        f = data_file(run_dir, r.key)
        if r.outcome not in MEASURED:
            left.append(f"{r.test_id} ({r.outcome})")
        elif not f.is_file():
            left.append(f"{r.test_id} (no data file)")
        else:
            keep.append(str(f))
    return keep, left
