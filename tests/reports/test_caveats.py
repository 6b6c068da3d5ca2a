"""The pipeline's caveats (gate rules unknown, CBTS may narrow) reach the audit's first line,
its JSON and its notes; a guarded audit never reads green on them (issue 23, items 3, 5)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from click.testing import CliRunner

from auditor.model import Audit, BehaviourResult
from reports.cli import cli
from reports.render_audit import audit_json, audit_text, headline_colour
from testdb.botcmd import parse
from testdb.cbts import CBTS_MAY_NARROW
from testdb.pipeline import pr_stages
from testdb.stages import Stage
from testdb.triggers import GATES_UNKNOWN, Triggers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testdb"))  # the shared helpers
from tdb_helpers import small_checkout

STAGES = [Stage("A10-PyTorch-1", "a10", "l0_a10")]


def guarded_audit(triggers: Triggers, bot: str = "/bot run") -> Audit:
    pipe = pr_stages(STAGES, triggers, ["a.py"], parse(bot))
    b = BehaviourResult("a.py", "a", "f", "function", "modified", 1, (1,), (), ("x",),
                        verdict="pre-merge", pre_merge_guards=["t.py::test_f"])
    return Audit(provenance={"diff": "x.diff"}, behaviours=[b], pipeline=pipe.to_json())


def test_gate_rules_unknown_is_in_the_headline_json_and_notes() -> None:
    a = guarded_audit(Triggers())
    data = audit_json(a)
    assert data["summary"]["sentence"] == \
        f"The behaviour change is guarded pre-merge ({GATES_UNKNOWN})"
    assert data["pipeline"]["caveats"] == [GATES_UNKNOWN]
    assert headline_colour(data["summary"]) == "yellow"  # TRAP: not green on a guess
    text = audit_text(data)
    assert text.splitlines()[0].endswith(f"({GATES_UNKNOWN})")
    assert f"note: {GATES_UNKNOWN}"[:60] in text
    assert "gate rules unknown: none are read" in text


def test_cbts_may_narrow_a_green_headline() -> None:
    where = "jenkins/scripts/cbts/main.py"
    a = guarded_audit(Triggers(source="ci/pr-triggers.yml", cbts=where))
    data = audit_json(a)
    assert data["summary"]["sentence"].endswith("(CBTS may narrow this PR's stages)")
    assert headline_colour(data["summary"]) == "yellow"
    assert CBTS_MAY_NARROW.format(where=where) in data["pipeline"]["caveats"]
    # GUARDED: known gates and CBTS off: a clean audit is green
    off = audit_json(guarded_audit(Triggers(source="ci/pr-triggers.yml", cbts=where),
                                   "/bot run --disable-cbts"))
    assert off["summary"]["sentence"] == "The behaviour change is guarded pre-merge"
    assert headline_colour(off["summary"]) == "green"


def test_where_says_when_its_gates_are_unknown(tmp_path: Path) -> None:
    def where(root: Path, pattern: str, fmt: str) -> str:
        r = CliRunner().invoke(cli, ["--root", str(root), "--no-cache", "where", pattern,
                                     "--format", fmt], standalone_mode=False,
                               catch_exceptions=False)
        return r.output

    bare = small_checkout(tmp_path / "bare")
    # TRAP: post-merge-only may be wrong without the rules (an auto-trigger tag no rule names
    # could open the stage): the first line and the JSON say so
    assert json.loads(where(bare, "a.py::test_post", "json"))["caveats"] == [GATES_UNKNOWN]
    assert where(bare, "a.py::test_post", "text").splitlines()[0].endswith(f"({GATES_UNKNOWN})")
    # GUARDED: a pre-merge verdict holds without the rules (a PR that changes nothing starts
    # the stage), and with the rules found nothing is owned up to
    assert json.loads(where(bare, "a.py::test_a", "json"))["caveats"] == []
    gated = small_checkout(tmp_path / "gated", {
        "ci/pr-triggers.yml": "multi_gpu_file_changed:\n  related_paths: [cpp/]\n"})
    assert json.loads(where(gated, "a.py::test_post", "json"))["caveats"] == []
    assert GATES_UNKNOWN not in where(gated, "a.py::test_post", "text")


def test_stats_says_when_its_gates_are_unknown(tmp_path: Path) -> None:
    def stats(root: Path, fmt: str) -> str:
        return CliRunner().invoke(cli, ["--root", str(root), "--no-cache", "stats", "--format",
                                        fmt], standalone_mode=False,
                                  catch_exceptions=False).output

    bare = small_checkout(tmp_path / "bare")  # holds a post-merge-only test
    assert json.loads(stats(bare, "json"))["caveats"] == [GATES_UNKNOWN]
    assert f"({GATES_UNKNOWN})" in stats(bare, "text")
    gated = small_checkout(tmp_path / "gated", {
        "ci/pr-triggers.yml": "multi_gpu_file_changed:\n  related_paths: [cpp/]\n"})
    assert json.loads(stats(gated, "json"))["caveats"] == []
