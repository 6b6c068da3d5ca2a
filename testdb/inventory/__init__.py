"""The test inventory: every pytest item of a checkout, from source (static) or from pytest.

Names are imported from their modules on first use (PEP 562): ``testdb where`` needs only the
unit-test ids of a warm cache, and importing the scanner would cost more than answering.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from testdb.inventory.build import (
        DEFAULT_DIRS,
        build_static,
        find_test_files,
        start_static,
        unit_test_ids,
    )
    from testdb.inventory.config import DEFAULT_CONFIG, StaticConfig
    from testdb.inventory.model import Inventory, InventoryItem, merge
    from testdb.inventory.static import scan_source

_HOME = {
    "DEFAULT_DIRS": "build", "build_static": "build", "find_test_files": "build",
    "start_static": "build", "unit_test_ids": "build", "DEFAULT_CONFIG": "config",
    "StaticConfig": "config",
    "Inventory": "model", "InventoryItem": "model", "merge": "model", "scan_source": "static",
}

__all__ = [
    "DEFAULT_CONFIG",
    "DEFAULT_DIRS",
    "Inventory",
    "InventoryItem",
    "StaticConfig",
    "build_static",
    "find_test_files",
    "merge",
    "scan_source",
    "start_static",
    "unit_test_ids",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
