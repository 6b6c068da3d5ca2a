"""The synthetic TensorRT-LLM-sized tree: generator counts and scan speed (full size on request)."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path
from types import ModuleType

import pytest

from testdb.inventory import build_static
from testdb.inventory.cache import FileCache

GEN = Path(__file__).resolve().parents[3] / "benchmarks" / "gen_synthetic_tests.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_synthetic_tests", GEN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generator_counts_match_the_static_inventory(tmp_path: Path) -> None:
    n_files, n_items = _generator().generate(tmp_path, 60, seed=3)
    inv = build_static(str(tmp_path), cache=False)
    assert len(inv.files()) == n_files == 60
    assert len(inv) == n_items
    assert not any(i.indeterminate for i in inv)


@pytest.mark.skipif(not os.environ.get("TESTDB_PERF"),
                    reason="full-size timing: set TESTDB_PERF=1 (takes ~10 s)")
def test_full_size_tree_within_budget(tmp_path: Path) -> None:
    n_files, n_items = _generator().generate(tmp_path / "tree", 2000)
    assert n_files >= 2000 and n_items >= 100_000
    store = FileCache(tmp_path / "cache")
    start = time.perf_counter()
    inv = build_static(str(tmp_path / "tree"), cache=store)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    build_static(str(tmp_path / "tree"), cache=store)
    warm = time.perf_counter() - start
    load = os.getloadavg()[0]
    report = f"{n_files} files, {len(inv)} items: cold {cold:.2f} s, warm {warm:.2f} s, load {load}"
    print("\n" + report)
    assert len(inv) == n_items
    # wall-clock budget for an otherwise idle 2-core machine
    assert cold <= 5.0 and warm <= cold, report
