"""Session fixtures for the inventory tests: the suites written out, scanned and collected."""

from __future__ import annotations

from pathlib import Path

import pytest
from inventory_suites import DEFS, UNIT, write_tree

from testdb.inventory import Inventory, build_static, pytest_rules
from testdb.inventory.collect import collect


@pytest.fixture(scope="session")
def defs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    suites = DEFS
    if not pytest_rules.installed().hidden_param:  # pytest 8.3: the module cannot import
        suites = {k: v for k, v in DEFS.items() if k != "test_hidden.py"}
    return write_tree(tmp_path_factory.mktemp("defs"), suites)


@pytest.fixture(scope="session")
def unit_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # The checkout's tests/ directory: the pytest root is tests/unittest.
    return write_tree(tmp_path_factory.mktemp("checkout") / "tests", UNIT)


@pytest.fixture(scope="session")
def defs_static(defs_dir: Path) -> Inventory:
    return build_static(str(defs_dir), [(".", "")], cache=False)


@pytest.fixture(scope="session")
def defs_collected(defs_dir: Path) -> Inventory:
    return collect(str(defs_dir), ["-p", "no:cacheprovider"])
