"""pytest plugin: ``--testdb-inventory=PATH`` writes the collected items as JSON."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest

from testdb.files import write_text_atomic

SCHEMA = 1
# One pytest run per process in the intended use (a subprocess); reset on configure anyway.
_errors: list[dict[str, str]] = []
_skipped: list[dict[str, str]] = []  # modules pytest skipped whole (importorskip, skip(allow...))


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("testdb", "testdb-audit inventory")
    group.addoption("--testdb-inventory", dest="testdb_inventory", default=None, metavar="PATH",
                    help="write the collected items (node id, file, line, markers, keywords) "
                         "as JSON to PATH")
    group.addoption("--testdb-import-root", dest="testdb_import_root", default=None,
                    metavar="DIR", help="append DIR to sys.path (after site-packages), so the "
                                        "checkout's own packages import when not installed")


def pytest_configure(config: pytest.Config) -> None:
    _errors.clear()
    _skipped.clear()
    root = config.getoption("testdb_import_root", None)
    if root and root not in sys.path:
        # Appended, not prepended: an installed package (with its compiled parts) still wins
        # over the same package's sources in the checkout.
        sys.path.append(root)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _errors.append({"nodeid": report.nodeid, "error": str(report.longrepr)[-2000:]})
    elif report.skipped:
        longrepr = report.longrepr
        reason = (str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3
                  else str(longrepr))
        _skipped.append({"nodeid": report.nodeid, "reason": reason.removeprefix("Skipped: ")})


def pytest_collection_finish(session: pytest.Session) -> None:
    path = session.config.getoption("testdb_inventory")
    if not path:
        return
    data = {
        "schema": SCHEMA,
        "rootdir": str(session.config.rootpath),
        "items": [_item_json(item) for item in session.items],
        "errors": list(_errors),
        "skipped": list(_skipped),
    }
    write_text_atomic(path, json.dumps(data))


def _item_json(item: pytest.Item) -> dict[str, Any]:
    fspath, lineno, _ = item.location
    classes = [n.name for n in item.listchain() if isinstance(n, pytest.Class)]
    function = getattr(item, "originalname", None) or item.name
    # From the name, not callspec.id: an id of "" still gives ``test_f[]``.
    params = item.name[len(function) + 1 : -1] if item.name != function else None
    return {
        "nodeid": item.nodeid,
        "file": fspath.replace(os.sep, "/"),
        "line": (lineno or 0) + 1,  # pytest's location line is 0-based
        "function": function,
        "classes": classes,
        "params": params,
        "markers": list(dict.fromkeys(m.name for m in item.iter_markers())),
        "keywords": sorted(_keywords(item)),
    }


def _keywords(item: pytest.Item) -> set[str]:
    """The names ``-k`` matches for this item (pytest's own KeywordMatcher)."""
    try:
        from _pytest.mark import KeywordMatcher

        names = KeywordMatcher.from_item(item)._names
        return {str(n) for n in names}
    except (ImportError, AttributeError):  # an older or newer pytest: approximate
        return {*item.listnames(), *(m.name for m in item.iter_markers())}
