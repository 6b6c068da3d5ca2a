"""Where the measured map is: ``--map``, else the checkout's own. Apart from the store so that
an audit with no map (the common case) does not import SQLite (~5 ms) to learn that."""

from __future__ import annotations

import hashlib
import os


def default_path(root: str) -> str:
    """The checkout's own map, in the cache directory (``$TESTDB_CACHE_DIR``, default
    ``~/.cache/testdb-audit``), keyed by the checkout's real path."""
    base = os.environ.get("TESTDB_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "testdb-audit")
    key = hashlib.sha256(os.path.realpath(root).encode()).hexdigest()[:16]
    return os.path.join(base, "maps", f"map-{key}.sqlite")


def find_map(root: str, given: str | None) -> str | None:
    """The map an audit reads: ``--map PATH`` (which must exist), else the checkout's default
    one when it exists, else None (static links only)."""
    if given:
        if not os.path.isfile(given):
            from auditor.covmap.store import MapError
            from testdb.errors import SourceLoc

            raise MapError("no map file here", SourceLoc(given),
                           "build it with `testdb map add DATA... --commit SHA --map PATH`")
        return given
    path = default_path(root)
    return path if os.path.isfile(path) else None
