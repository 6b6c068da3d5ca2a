"""Has the checkout test sources, and are they unchanged since its inventory was built? Light.

A warm ``stats`` of a checkout with test sources counts verdicts checked against them: its
cache is keyed by the plan and by the inventory, whose key the inventory's stamp proves. This
module holds what that check needs and nothing heavier (the builder, the records and the
scanner cost more to import than a warm answer may take); ``testdb.inventory.build`` writes
the stamp this one reads.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import testdb
from testdb.stamp import Stamp, code_stamp

# Bump when the scanner's output for the same input changes (per-file cache keys, the
# inventory's cache directory): 4: a file that does not parse keeps its error (line, message).
SCHEMA = 4
INTEGRATION_DIR = "tests/integration/defs"
SOURCE_DIRS = (INTEGRATION_DIR, "tests/unittest")


def default_cache_dir() -> Path:
    env = os.environ.get("TESTDB_CACHE_DIR")
    base = Path(env) if env else Path.home() / ".cache" / "testdb-audit"
    return base / f"inventory-v{SCHEMA}"


def has_test_sources(root: str, dirs: tuple[str, ...] = SOURCE_DIRS) -> bool:
    """Whether the checkout has test sources to check ids against: a Python file or a
    directory in one of the pytest roots ``dirs`` (a checkout of lists only has neither;
    looking at the roots' own entries keeps a ``where`` of such a checkout from importing the
    scanner)."""
    for rel in dirs:
        try:
            with os.scandir(os.path.join(root, rel)) as it:
                if any(e.name.endswith(".py") or (e.is_dir() and not e.name.startswith("."))
                       for e in it):
                    return True
        except OSError:
            continue
    return False


def whole_format() -> str:
    """What the whole-inventory cache's layout depends on: its format and this code."""
    return f"whole-v3;{code_stamp(os.path.dirname(os.path.abspath(__file__)))}"


def inventory_stamp(root: str, dirs: Sequence[tuple[str, str]] | None, fingerprint: str,
                    directory: str) -> Stamp:
    """The stamp of one checkout's test tree, as ``build_static`` writes it (``dirs`` and
    ``fingerprint``: its arguments; ``directory``: the inventory's cache directory)."""
    return Stamp(directory, [
        testdb.__version__, str(SCHEMA), fingerprint, repr(dirs), whole_format(),
        os.path.abspath(root), os.path.realpath(root)], digest=_bytes_digest)


def inventory_key(root: str) -> str | None:
    """The content key of the checkout's default static inventory (``build_static(root)``)
    while its stamp proves the test tree unchanged since that build; else None."""
    from testdb.inventory.config import DEFAULT_CONFIG

    hit = inventory_stamp(root, None, DEFAULT_CONFIG.fingerprint(),
                          str(default_cache_dir())).check()
    return hit[1] if hit is not None else None


def _bytes_digest(path: str) -> str:
    import hashlib

    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()
