"""A pytest plugin that gives coverage.py one dynamic context per test: the test's id as the
checkout names it (``tests/integration/defs/accuracy/x.py::T::t[p]``; ``testdb map add``
reads it as the list id ``accuracy/x.py::T::t[p]``), whatever pytest's rootdir is.

coverage's own ``dynamic_context = test_function`` names the test *function* (no file, no
parametrization), and pytest-cov's ``--cov-context=test`` uses pytest's node id, which is
relative to a rootdir that differs between an integration run (``tests/integration/defs``) and
a unit-test run (the common folder of its arguments); so this plugin, loaded with
``-p auditor.covmap.plugin``:

- with ``TESTDB_COVERAGE_FILE`` set, starts coverage.py itself (``source``: the checkout,
  ``TESTDB_COVERAGE_ROOT``, default pytest's rootdir) and saves that data file at the end
  (``testdb launch --coverage`` sets both, one file per job);
- else, under ``coverage run -m pytest -p auditor.covmap.plugin``, switches the contexts of
  the coverage.py already running.
Between tests (collection, session fixtures) the context is empty: that is import time.

Processes a test spawns run code on its behalf (``subprocess.run([sys.executable, ...])``, a
``torch.multiprocessing`` spawn, an MPI launcher passing the environment on). When this
plugin runs coverage itself, it measures the Python ones through coverage.py's own start-up
hook (``a1_coverage.pth``, installed with coverage 7.10 and later: it starts coverage in any
Python process whose environment names a configuration in ``COVERAGE_PROCESS_START``): around
each test it points that variable at a configuration whose static ``context`` is the test's
context, so a child's lines carry its parent test's id (coverage's dynamic contexts are per
process: a child has no pytest to switch them). Children write their own data files beside
the job's (``parallel``), combined into it at the end: still one data file per job. A process
forked without exec (``multiprocessing``'s fork method) keeps the parent's tracer but never
saves it: not measured.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from collections.abc import Generator
from typing import Any

import pytest

CHILD_VAR = "COVERAGE_PROCESS_START"  # read by coverage's a1_coverage.pth in a new process

_STATE: dict[str, Any] = {}


def _root(config: pytest.Config) -> str:
    return os.path.realpath(os.environ.get("TESTDB_COVERAGE_ROOT") or str(config.rootpath))


def pytest_configure(config: pytest.Config) -> None:
    import coverage

    data_file = os.environ.get("TESTDB_COVERAGE_FILE")
    root = _root(config)
    if data_file:
        os.makedirs(os.path.dirname(os.path.abspath(data_file)), exist_ok=True)
        if coverage.version_info < (7, 10):  # no a1_coverage.pth: children start unmeasured
            config.issue_config_time_warning(pytest.PytestWarning(
                f"testdb: coverage.py {coverage.__version__} does not start itself in the "
                "processes a test spawns (7.10 and later do): their code is not measured; "
                "upgrade coverage"), stacklevel=2)
        cov = coverage.Coverage(data_file=data_file, source=[root], config_file=False)
        cov.start()
        _STATE.update(cov=cov, own=True, root=root, data_file=os.path.abspath(data_file),
                      rc_dir=tempfile.mkdtemp(prefix="testdb-child-coverage-"), rcs=0)
    else:
        running = coverage.Coverage.current()
        if running is not None:
            _STATE.update(cov=running, own=False, root=root)


def context_of(item: pytest.Item, root: str) -> str:
    """``<file relative to root>::<the node id's rest>``."""
    rest = item.nodeid.split("::", 1)[1] if "::" in item.nodeid else ""
    rel = os.path.relpath(os.path.realpath(str(item.path)), root).replace(os.sep, "/")
    return f"{rel}::{rest}" if rest else rel


def _ini_value(text: str) -> str:
    """A value for coverage's configuration file: ``$`` doubled (coverage expands environment
    variables in values), line breaks (no test id has one) made spaces."""
    return text.replace("$", "$$").replace("\r", " ").replace("\n", " ")


def child_config(context: str) -> str:
    """A configuration file for the Python processes the test spawns: the job's source, its
    data file's name with ``.child`` (each child adds its own suffix) and the test's context
    as the static context."""
    _STATE["rcs"] += 1
    path = os.path.join(_STATE["rc_dir"], f"child-{_STATE['rcs']}.coveragerc")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("[run]\n"
                 f"data_file = {_ini_value(_STATE['data_file'] + '.child')}\n"
                 "parallel = true\n"
                 f"source = {_ini_value(_STATE['root'])}\n"
                 f"context = {_ini_value(context)}\n")
    return path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None
                            ) -> Generator[None, None, None]:
    cov = _STATE.get("cov")
    before = os.environ.get(CHILD_VAR)
    if cov is not None:
        ctx = context_of(item, _STATE["root"])
        cov.switch_context(ctx)
        if _STATE.get("own"):
            os.environ[CHILD_VAR] = child_config(ctx)
    try:
        yield
    finally:
        if cov is not None:
            cov.switch_context("")
            if _STATE.get("own"):  # the next test's children are not this one's
                if before is None:
                    os.environ.pop(CHILD_VAR, None)
                else:
                    os.environ[CHILD_VAR] = before


def pytest_unconfigure(config: pytest.Config) -> None:
    cov = _STATE.pop("cov", None)
    if cov is not None and _STATE.pop("own", False):
        cov.stop()
        cov.save()
        children = sorted(glob.glob(glob.escape(_STATE["data_file"] + ".child") + ".*"))
        if children:  # the spawned processes' data joined into the job's one file
            cov.combine(children, keep=False)
            cov.save()
        shutil.rmtree(_STATE.pop("rc_dir"), ignore_errors=True)
