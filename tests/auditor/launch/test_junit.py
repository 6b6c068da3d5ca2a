"""Tests of JUnit reading and of the outcome decision."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.launch.junit import JUnitSummary, decide_outcome, read_junit

PYTEST_JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4">
<testcase classname="t" name="test_ok" time="0.1"/>
<testcase classname="t" name="test_bad"><failure message="assert 1 == 2">trace</failure></testcase>
<testcase classname="t" name="test_skip"><skipped message="needs 8 GPUs"/></testcase>
<testcase classname="t" name="test_err"><error message="fixture">boom</error></testcase>
</testsuite></testsuites>
"""

COLLECTION_ERROR = """<testsuites><testsuite name="pytest" errors="1" failures="0" tests="1">
</testsuite></testsuites>"""


def test_read_junit_counts_testcases(tmp_path: Path) -> None:
    path = tmp_path / "j.xml"
    path.write_text(PYTEST_JUNIT)
    summary = read_junit(path)
    assert summary == JUnitSummary(4, 1, 1, 1, ("t::test_bad", "t::test_err"), "needs 8 GPUs")


def test_read_junit_sees_collection_errors(tmp_path: Path) -> None:
    path = tmp_path / "j.xml"
    path.write_text(COLLECTION_ERROR)
    summary = read_junit(path)
    assert summary is not None and summary.errors == 1 and summary.tests == 0


def test_read_junit_of_missing_or_truncated_file_is_none(tmp_path: Path) -> None:
    assert read_junit(tmp_path / "nope.xml") is None
    (tmp_path / "half.xml").write_text(PYTEST_JUNIT[:120])
    assert read_junit(tmp_path / "half.xml") is None


def s(tests: int = 1, failures: int = 0, errors: int = 0, skipped: int = 0) -> JUnitSummary:
    names = tuple(f"t::f{i}" for i in range(failures + errors))
    return JUnitSummary(tests, failures, errors, skipped, names, "no GPU" if skipped else "")


@pytest.mark.parametrize(("junit", "rc", "expect", "outcome", "words"), [
    (s(3), 0, True, "passed", "3 passed"),
    (s(3, failures=1), 1, True, "failed", "t::f0"),
    (s(3, failures=5), 1, True, "failed", "and 2 more"),
    (s(3, errors=1), 1, True, "error", "1 error"),
    (s(3), 1, True, "failed", "although JUnit"),          # crash after the tests
    (s(3), -11, True, "failed", "signal 11"),
    (s(3), 4, True, "error", "usage error"),
    (s(0), 0, True, "error", "no tests"),
    (s(2, skipped=2), 0, True, "not-runnable", "skipped: no GPU"),
    (s(2), None, True, "passed", "per JUnit"),
    (None, 0, True, "error", "no JUnit"),
    (None, 0, False, "passed", "exit 0"),
    (None, 1, True, "failed", "exit 1"),
    (None, 5, True, "error", "no tests collected"),
    (None, 5, False, "failed", "exit 5"),
    (None, None, True, "error", "no exit code"),
])
def test_decide_outcome(junit: JUnitSummary | None, rc: int | None, expect: bool, outcome: str,
                        words: str) -> None:
    got, detail = decide_outcome(junit, rc, expect_junit=expect)
    assert got == outcome
    assert words in detail
