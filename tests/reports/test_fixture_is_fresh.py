"""The frozen audit fixture is what the tool says today about the diff it names (issue 25,
item 19: `fixtures/flashinfer-audit.json` said "1 of 1 behaviour change has no pre-merge
guard" for `pr.diff`, which the tool judges "guarded pre-merge, 1 warning").

Six test modules and the fuzz tests read the file (a path, as `comment --audit FILE` and
`report --audit FILE` do); this test audits the diff in its provenance afresh, once per session,
and requires the same document. When the tool's output changes on purpose, regenerate it:

    testdb --root examples/flashinfer-reuse audit \\
        --diff examples/flashinfer-reuse/pr-no-thin-guard.diff --format json \\
        -o tests/reports/fixtures/flashinfer-audit.json

(from the checkout's top directory), then refresh the comment goldens (test_comment.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "fixtures" / "flashinfer-audit.json"


@pytest.fixture(scope="session")
def fresh_audit() -> Iterator[dict[str, Any]]:
    """A fresh audit of the diff the fixture names, run as the regenerate command runs it."""
    import os
    import subprocess
    import sys

    frozen = json.loads(FIXTURE.read_text(encoding="utf-8"))
    prov = frozen["provenance"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    res = subprocess.run([sys.executable, "-m", "reports", "--root", prov["root"], "audit",
                          "--diff", prov["diff"], "--format", "json"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode in (0, 1), res.stderr
    yield json.loads(res.stdout)


def test_the_fixture_is_a_fresh_audit_of_its_diff(fresh_audit: dict[str, Any]) -> None:
    frozen = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert frozen["provenance"]["diff"] == "examples/flashinfer-reuse/pr-no-thin-guard.diff"
    assert frozen["summary"] == fresh_audit["summary"]
    stale = sorted(k for k in set(frozen) | set(fresh_audit) if frozen.get(k) != fresh_audit.get(k))
    assert stale == [], f"the fixture is stale in {stale}: regenerate it (see this module)"


def test_the_fixture_says_what_the_example_readme_says(fresh_audit: dict[str, Any]) -> None:
    # examples/flashinfer-reuse/README.md: without the thin guard, exit 1 with this sentence
    assert fresh_audit["summary"]["sentence"] == (
        "1 of 1 behaviour change has no pre-merge guard, 1 warning: the FLASHINFER half of the "
        "guard runs only post-merge")
    assert [(f["severity"], f["rule"]) for f in fresh_audit["findings"]][:2] == [
        ("error", "no-pre-merge-guard"), ("warning", "post-merge-guard")]
