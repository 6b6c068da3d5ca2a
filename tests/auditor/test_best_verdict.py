"""``auditor.guards.best``: the best verdict of a test's runs (or of a level's links) by
``testdb.schedule.VERDICTS``' order; of equals (verdicts it does not know) the first."""

from __future__ import annotations

import pytest

from auditor.guards import best

CASES = [
    ([], "unscheduled"),
    (["gated"], "gated"),
    (["post-merge-only", "gated", "post-merge-only"], "gated"),
    (["waived", "qa-only", "pre-merge", "gated"], "pre-merge"),
    (["unscheduled", "invalid"], "unscheduled"),
    (["invalid", "waived"], "waived"),
    # not in VERDICTS: ranked after every known one, the first of them wins
    (["unguarded", "other"], "unguarded"),
    (["other", "unguarded", "other"], "other"),
    (["other", "invalid"], "invalid"),
    (["pre-merge"] * 5000 + ["gated"] * 5000, "pre-merge"),
]


@pytest.mark.parametrize(("verdicts", "want"), CASES)
def test_best(verdicts: list[str], want: str) -> None:
    assert best(verdicts) == want
