"""The test inventory: every pytest item of a checkout, from source (static) or from pytest."""

from __future__ import annotations

from testdb.inventory.build import DEFAULT_DIRS, build_static, find_test_files
from testdb.inventory.config import DEFAULT_CONFIG, StaticConfig
from testdb.inventory.model import Inventory, InventoryItem, merge
from testdb.inventory.static import scan_source

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
]
