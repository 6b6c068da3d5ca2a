"""``static_and_units``: what ``where`` asks of the inventory, with one check of the tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testdb.inventory import build_static, unit_test_ids
from testdb.inventory.build import static_and_units
from testdb.stamp import Stamp

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    root = tmp_path / "tree"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "gen_synthetic_tests.py"),
                    str(root), "--files", "30"], check=True, capture_output=True)
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path / "cache"))
    return str(root)


def test_cold_then_warm_agree_with_asking_each(tree: str, monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    inv, units = static_and_units(tree)  # cold: built, the ids kept beside it
    want = unit_test_ids(tree)
    assert want and all(u.startswith("unittest/") for u in want)
    assert units == want and inv.ids() == build_static(tree).ids()
    checks = []
    real = Stamp.check

    def counted(self: Stamp) -> object:
        checks.append(self)
        return real(self)

    monkeypatch.setattr(Stamp, "check", counted)
    inv, units = static_and_units(tree)  # warm: one stamp check answers both
    assert units == want and inv.ids() == build_static(tree).ids()
    assert len(checks) == 1 + 1  # ours, and build_static's above


def test_a_changed_test_file_is_seen(tree: str) -> None:
    """The trap: ids kept beside an older inventory must not answer for a changed tree."""
    static_and_units(tree)
    unit = sorted(Path(tree, "tests", "unittest").rglob("test_*.py"))[0]
    unit.write_text(unit.read_text().replace("def test_", "def test_renamed_", 1))
    _, units = static_and_units(tree)
    assert units is not None and any("test_renamed_" in u for u in units)
    assert units == unit_test_ids(tree)
