"""The ``testdb`` process ends without the interpreter's teardown (reports.entry.console): its
scan workers must end with it. Left waiting for work, they would hold its stdout and stderr
open, and a caller reading them to the end (CI, a bot, ``subprocess.run``) would hang.
Real processes: a cold scan of enough test files to start workers, read through pipes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testdb.parallel import MIN_ITEMS, usable_cpus
from tests.conftest import REPO

TEST_FILE = """\
import pytest


@pytest.mark.parametrize("x", [1, 2])
def test_{n}(x):
    pass
"""
PLAN = """\
version: 0.0.1
l0_a10:
- condition:
    terms: {stage: pre_merge}
  tests:
  - test_m0.py::test_0
"""


@pytest.mark.skipif(usable_cpus() < 2, reason="one CPU: scans run in this process")
@pytest.mark.parametrize("cache", [False, True], ids=["no-cache", "cached"])
def test_a_cold_scan_ends_with_the_process(tmp_path: Path, cache: bool) -> None:
    defs = tmp_path / "tests/integration/defs"
    defs.mkdir(parents=True)
    for n in range(MIN_ITEMS + 10):  # enough to scan in worker processes
        (defs / f"test_m{n}.py").write_text(TEST_FILE.format(n=n))
    lists = tmp_path / "tests/integration/test_lists/test-db"
    lists.mkdir(parents=True)
    (lists / "l0_a10.yml").write_text(PLAN)
    env = {**os.environ, "TESTDB_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "reports", "--root", str(tmp_path),
                           *(() if cache else ("--no-cache",)), "inventory"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"{MIN_ITEMS + 10} test files, {2 * (MIN_ITEMS + 10)} items" in proc.stdout


@pytest.mark.skipif(usable_cpus() < 2, reason="one CPU: no worker processes")
def test_workers_left_waiting_are_ended_with_the_process() -> None:
    """Workers whose results were never read to the end (a command that failed midway) have
    not been told to go: the process ends them before its fast exit."""
    probe = ("import sys\n"
             "from testdb.parallel import parallel_map\n"
             "from reports.entry import console\n"
             "left = parallel_map(abs, list(range(1000)), workers=2, min_items=1)\n"
             "next(left)\n"  # one result read; the workers wait for more work
             "sys.argv = ['testdb', '--version']\n"
             "console()\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=REPO, timeout=30)
    assert (proc.returncode, proc.stdout.split()[:1]) == (0, ["testdb,"]), proc.stderr
