"""Read a JUnit XML file and decide a run's outcome from it and the return code."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from auditor.launch.model import Outcome

# pytest's exit codes that mean "nothing was tested", as opposed to "a test failed".
_PYTEST_NOT_TESTED = {2: "interrupted", 3: "internal error", 4: "usage error",
                      5: "no tests collected"}
_NAMES_SHOWN = 3


@dataclass(frozen=True)
class JUnitSummary:
    tests: int
    failures: int
    errors: int
    skipped: int
    failed_names: tuple[str, ...] = ()
    skip_message: str = ""


def read_junit(path: Path) -> JUnitSummary | None:
    """Summarise a JUnit file; None when it is missing or unreadable (a crash mid-write)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    tests = failures = errors = skipped = 0
    failed: list[str] = []
    skip_message = ""
    # Count the testcases themselves: suite-level attributes differ between writers.
    for case in root.iter("testcase"):
        tests += 1
        name = "::".join(p for p in (case.get("classname", ""), case.get("name", "")) if p)
        if case.find("failure") is not None:
            failures += 1
            failed.append(name)
        elif case.find("error") is not None:
            errors += 1
            failed.append(name)
        elif (skip := case.find("skipped")) is not None:
            skipped += 1
            skip_message = skip_message or skip.get("message", "")
    # A collection error is reported as a suite-level error with no testcase.
    for suite in root.iter("testsuite"):
        if not list(suite.iter("testcase")):
            errors += int(suite.get("errors", "0") or 0)
    return JUnitSummary(tests, failures, errors, skipped, tuple(failed), skip_message)


def _names(summary: JUnitSummary) -> str:
    shown = ", ".join(summary.failed_names[:_NAMES_SHOWN])
    more = len(summary.failed_names) - _NAMES_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def decide_outcome(junit: JUnitSummary | None, returncode: int | None,
                   *, expect_junit: bool) -> tuple[Outcome, str]:
    """The outcome of a run that ended on its own, with a one-line reason.

    Both pieces of evidence must agree on success: a clean JUnit with a non-zero exit is a
    failure (a crash in teardown), and an all-skipped run proves nothing, so it is reported as
    not runnable here rather than passed.
    """
    rc_text = "exit code unknown" if returncode is None else f"exit {returncode}"
    if returncode is not None and returncode < 0:
        rc_text = f"killed by signal {-returncode}"
    if junit is not None:
        if junit.failures:
            return "failed", f"{junit.failures} failed of {junit.tests}: {_names(junit)}"
        if junit.errors:
            names = _names(junit)
            return "error", f"{junit.errors} error(s){': ' + names if names else ''}"
        if returncode not in (0, None):
            why = _PYTEST_NOT_TESTED.get(returncode, "")
            return ("error" if why else "failed"), (
                f"{rc_text}{' (' + why + ')' if why else ''} although JUnit reports no failure")
        if junit.tests == 0:
            return "error", "JUnit lists no tests (nothing was selected)"
        if junit.skipped == junit.tests:
            msg = f": {junit.skip_message}" if junit.skip_message else ""
            return "not-runnable", f"all {junit.tests} test(s) skipped{msg}"
        if returncode is None:
            return "passed", f"{junit.tests} test(s) passed per JUnit ({rc_text})"
        return "passed", f"{junit.tests - junit.skipped} passed, {junit.skipped} skipped"
    if returncode is None:
        return "error", "no JUnit XML and no exit code"
    if returncode == 0:
        if expect_junit:
            return "error", "exit 0 but no JUnit XML was written"
        return "passed", "exit 0"
    if returncode in _PYTEST_NOT_TESTED and expect_junit:
        return "error", f"{rc_text} ({_PYTEST_NOT_TESTED[returncode]}), no JUnit XML"
    return "failed", f"{rc_text}{', no JUnit XML' if expect_junit else ''}"
