"""whole: where's whole-function answer, its summary, "did you mean" and bracket checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from tdb_helpers import DATA

from testdb.inventory import Inventory, InventoryItem
from testdb.whole import (
    VERDICT_ORDER,
    did_you_mean,
    has_test_sources,
    unbalanced,
    verdict_counts,
    whole_functions,
)

IDS = [
    "a/test_x.py::TestA::test_fp8[tp=1-pp=1]",
    "a/test_x.py::TestA::test_fp8[tp=4-pp=1]",
    "a/test_x.py::TestA::test_bf16",
    "a/test_x.py::TestB::test_fp8[tp=1-pp=1]",
    "b/test_y.py::test_plain",
]


@pytest.mark.parametrize("pattern, want", [
    ("TestA::test_fp8[tp=2-pp=1]", ["a/test_x.py::TestA::test_fp8[tp=1-pp=1]",
                                    "a/test_x.py::TestA::test_fp8[tp=4-pp=1]"]),
    ("a/test_x.py::TestA::test_fp8[tp=4]", ["a/test_x.py::TestA::test_fp8[tp=4-pp=1]",
                                            "a/test_x.py::TestA::test_fp8[tp=1-pp=1]"]),
    # the nearest function names (at most three), the pattern's own class first
    ("TestA::test_fp9", ["a/test_x.py::TestA::test_fp8", "a/test_x.py::TestB::test_fp8",
                         "a/test_x.py::TestA::test_bf16"]),
    ("TestB::test_fp9", ["a/test_x.py::TestB::test_fp8", "a/test_x.py::TestA::test_fp8",
                         "a/test_x.py::TestA::test_bf16"]),
    # within a few edits only: test_fp8 is no suggestion for test_plian (QA 12d)
    ("test_plian", ["b/test_y.py::test_plain"]),
    ("test_bf1*", ["a/test_x.py::TestA::test_bf16"]),  # wildcards left out
    ("zzz_nothing_like_it", []),
    # a class or a file that names nothing: the scopes near it
    ("TestC", ["a/test_x.py::TestA", "a/test_x.py::TestB"]),
    ("test_xx.py", ["a/test_x.py", "b/test_y.py"]),  # 1 edit, then 2
    ("a/test_x.py::TestAA", ["a/test_x.py::TestA", "a/test_x.py::TestB"]),
    ("TestLagunaXS_2_1::test_fp8_dflash", []),
    ("*", []),
])
def test_did_you_mean(pattern: str, want: list[str]) -> None:
    assert did_you_mean(IDS, pattern) == want


@pytest.mark.parametrize("pattern, bad", [
    ("a.py::t[x", True), ("a.py::t[x]", False), ("a.py::t[[1]-x]", False), ("t]", True),
    ("*t[[1]*", True), ("plain", False),
])
def test_unbalanced(pattern: str, bad: bool) -> None:
    assert unbalanced(pattern) is bad


def test_sources_are_seen_only_where_tests_live(tmp_path: Path) -> None:
    assert not has_test_sources(str(DATA))  # lists and .test_durations only
    defs = tmp_path / "tests" / "integration" / "defs"
    defs.mkdir(parents=True)
    (defs / ".test_durations").write_text("{}")
    assert not has_test_sources(str(tmp_path))
    (defs / "accuracy").mkdir()
    assert has_test_sources(str(tmp_path))


def _record(tid: str, verdict: str) -> dict[str, object]:
    return {"id": tid, "verdict": verdict, "via": None, "placements": [
        {"kind": "test-db", "path": "l0.yml", "line": 3, "stages": [{"name": "S-1"}]}]}


def test_whole_functions_checks_listed_and_adds_unlisted() -> None:
    base = "t.py::test_f"
    inv = Inventory([InventoryItem(f"{base}[{n}]", "t.py", 1, "test_f", (), str(n))
                     for n in (1, 2, 3)])
    got = whole_functions([_record(f"{base}[1]", "pre-merge"), _record(f"{base}[9]", "gated")],
                          "test_f", inv)
    assert [(r["id"][len(base):], r["verdict"]) for r in got] == [
        ("[1]", "pre-merge"), ("[2]", "unscheduled"), ("[3]", "unscheduled"), ("[9]", "invalid")]
    assert got[3]["schedule_verdict"] == "gated" and got[3]["placements"][0]["stages"] == []
    assert verdict_counts(got) == {"pre-merge": 1, "unscheduled": 2, "invalid": 1}
    # no sources: records stand, each saying it was not checked
    plain = whole_functions([_record(f"{base}[9]", "gated")], "test_f", Inventory())
    assert plain[0]["verdict"] == "gated" and plain[0]["check"]["status"] == "not-checked"


def test_the_verdict_order_is_the_schedules() -> None:
    from testdb.schedule import VERDICTS

    assert VERDICT_ORDER == VERDICTS


def test_without_sources_the_reason_is_the_name_checkers() -> None:
    from testdb.names import NameChecker
    from testdb.whole import NO_SOURCES

    assert NameChecker(Inventory()).check("t.py::test_f[1]").reason == NO_SOURCES
