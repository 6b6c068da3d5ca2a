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
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

_STATE: dict[str, Any] = {}


def _root(config: pytest.Config) -> str:
    return os.path.realpath(os.environ.get("TESTDB_COVERAGE_ROOT") or str(config.rootpath))


def pytest_configure(config: pytest.Config) -> None:
    import coverage

    data_file = os.environ.get("TESTDB_COVERAGE_FILE")
    root = _root(config)
    if data_file:
        os.makedirs(os.path.dirname(os.path.abspath(data_file)), exist_ok=True)
        cov = coverage.Coverage(data_file=data_file, source=[root], config_file=False)
        cov.start()
        _STATE.update(cov=cov, own=True, root=root)
    else:
        running = coverage.Coverage.current()
        if running is not None:
            _STATE.update(cov=running, own=False, root=root)


def context_of(item: pytest.Item, root: str) -> str:
    """``<file relative to root>::<the node id's rest>``."""
    rest = item.nodeid.split("::", 1)[1] if "::" in item.nodeid else ""
    rel = os.path.relpath(os.path.realpath(str(item.path)), root).replace(os.sep, "/")
    return f"{rel}::{rest}" if rest else rel


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None
                            ) -> Generator[None, None, None]:
    cov = _STATE.get("cov")
    if cov is not None:
        cov.switch_context(context_of(item, _STATE["root"]))
    try:
        yield
    finally:
        if cov is not None:
            cov.switch_context("")


def pytest_unconfigure(config: pytest.Config) -> None:
    cov = _STATE.pop("cov", None)
    if cov is not None and _STATE.pop("own", False):
        cov.stop()
        cov.save()
