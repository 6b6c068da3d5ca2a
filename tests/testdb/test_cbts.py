"""When CBTS acts on a PR's pipeline, and that every answer then says it may narrow it
(testdb/cbts.py; issue 23, items 4 and 5)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tdb_helpers import small_checkout

from testdb.botcmd import parse
from testdb.cbts import CBTS_MAY_NARROW, cbts_state
from testdb.index import CBTS_MAIN, load
from testdb.pipeline import pr_stages

WHERE = "jenkins/scripts/cbts/main.py"


@pytest.mark.parametrize(("bot", "changed", "acts", "why"), [
    # getCbtsResult at 11ea7cc3: a bare /bot run and --post-merge get CBTS ...
    (None, ("a.py",), True, "CBTS may narrow"),
    ("/bot run", ("a.py",), True, "CBTS may narrow"),
    ("/bot run --post-merge", ("a.py",), True, "CBTS may narrow"),
    ("/bot run --reuse-test --debug --high-priority", ("a.py",), True, "CBTS may narrow"),
    # ... --disable-cbts forces a full run, any stage-selection flag defers it
    ("/bot run --disable-cbts", ("a.py",), False, "--disable-cbts forces a full run"),
    ("/bot run --extra-stage A-1", ("a.py",), False, "defers to the bot command (--extra"),
    ("/bot run --stage-list A-1", ("a.py",), False, "--stage-list"),
    ("/bot run --gpu-type A10", ("a.py",), False, "--gpu-type"),
    ("/bot run --test-backend pytorch", ("a.py",), False, "--test-backend"),
    ("/bot run --add-multi-gpu-test", ("a.py",), False, "--add-multi-gpu-test"),
    ("/bot run --only-multi-gpu-test", ("a.py",), False, "--only-multi-gpu-test"),
    ("/bot run --disable-multi-gpu-test", ("a.py",), False, "--disable-multi-gpu-test"),
    ("/bot run --skip-test", ("a.py",), False, "--skip-test"),
    ("/bot run", (), False, "no changed files"),
])
def test_when_cbts_acts(bot: str | None, changed: tuple[str, ...], acts: bool, why: str
                        ) -> None:
    s = cbts_state(WHERE, parse(bot) if bot else None, changed)
    assert (s.present, s.acts) == (True, acts)
    assert why in s.why


def test_no_cbts_in_the_checkout_says_nothing() -> None:
    s = cbts_state("", parse("/bot run"), ("a.py",))
    assert (s.present, s.acts, s.why) == (False, False, "")


def test_a_checkout_with_cbts_carries_the_caveat_unless_it_is_off(tmp_path: Path) -> None:
    root = small_checkout(tmp_path, {CBTS_MAIN: "# CBTS entry point (not run)\n"})
    idx = load(str(root), use_cache=False)
    assert idx.triggers.cbts == CBTS_MAIN
    p = pr_stages(idx.stages, idx.triggers, ["a.py"], parse("/bot run"))
    assert CBTS_MAY_NARROW.format(where=CBTS_MAIN) in p.caveats
    assert "CBTS may narrow this PR's stages" in p.to_json()["headline_caveats"]
    assert p.to_json()["cbts"] == {"present": True, "acts": True, "run": False,
                                   "why": CBTS_MAY_NARROW.format(where=CBTS_MAIN),
                                   "decision": None}
    # GUARDED: --disable-cbts runs every stage shown: no caveat, a note of why
    off = pr_stages(idx.stages, idx.triggers, ["a.py"], parse("/bot run --disable-cbts"))
    assert not any("CBTS" in c for c in off.caveats)
    assert "CBTS off: --disable-cbts forces a full run" in off.notes
    assert off.started == p.started  # the flag itself changes no stage of the set
