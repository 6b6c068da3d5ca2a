"""`launch --from audit.json` with guards the tool's own audit names but no test list holds: the
bot skips them with a note, local and Slurm skip them with the reason and a line that runs them by
hand (docs/launch.md), never exit 2 naming a path that is not one; a guard a later list edit
moved is labelled by its own verdict, as `where` says it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.auditor.test_audit import CHUNKED, git
from tests.auditor.test_audit_head_plan import L0_H100, _history
from tests.conftest import EXAMPLE

LISTS = "tests/integration/test_lists"
UNLISTED = CHUNKED.format("FLASHINFER")  # exists in the sources; every line naming it removed


@pytest.fixture
def unlisted_audit(run_cli, tmp_path: Path) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    root = tmp_path / "checkout"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("README.md"))
    for p in (root / LISTS).rglob("*"):
        if p.is_file() and UNLISTED in p.read_text():
            p.write_text("".join(line for line in p.read_text().splitlines(keepends=True)
                                 if UNLISTED not in line))
    res = run_cli("--root", str(root), "where", UNLISTED)
    assert "UNSCHEDULED" in res.out, res.out  # in the sources, in no list
    audit = tmp_path / "audit.json"
    res = run_cli("--root", str(root), "audit", "--diff", f"{EXAMPLE}/pr.diff", "-o", str(audit))
    data = json.loads(audit.read_text())
    assert any(UNLISTED in f["guards"] for f in data["findings"]
               if f["severity"] in ("error", "warning")), res.out
    return root, audit


@pytest.mark.parametrize("backend", ["bot", "local", "slurm"])
def test_an_unscheduled_guard_is_skipped_with_a_reason(run_cli, unlisted_audit: tuple[Path, Path],
                                                      backend: str) -> None:  # type: ignore[no-untyped-def]
    root, audit = unlisted_audit
    res = run_cli("--root", str(root), "launch", "--from", str(audit), "--backend", backend,
                  "--dry-run")
    assert "error:" not in res.err and ".:" not in res.err
    [note] = [line for line in res.err.splitlines() if UNLISTED in line]
    assert note.startswith(f"warning: skipped {UNLISTED} (unscheduled): in no test list")
    if backend == "bot":
        assert note.endswith("the bot cannot start it")
    else:
        assert note.endswith(f"run it by hand: cd {root}/tests/integration/defs && "
                             f"python -m pytest -v '{UNLISTED}'")
    # only the unscheduled guard was selected: nothing to launch, and that is no success
    assert res.code == 1 and res.out.startswith("nothing to launch: the 1 selected guard(s)")
    res = run_cli("--root", str(root), "launch", "--from", str(audit), "--backend", backend,
                  "--dry-run", "--allow-not-runnable", "--format", "json")
    assert res.code == 0
    doc = json.loads(res.out)
    assert doc["items"] == [] and [s["test_id"] for s in doc["skipped"]] == [UNLISTED]
    assert doc["skipped"][0]["verdict"] == "unscheduled"


def test_skipped_beside_runnable_guards_is_a_warning(run_cli, unlisted_audit: tuple[Path, Path]
                                                   ) -> None:  # type: ignore[no-untyped-def]
    root, audit = unlisted_audit
    data = json.loads(audit.read_text())
    other = CHUNKED.format("TRTLLM")  # listed: the launch plans it
    data["findings"].append({"severity": "warning", "rule": "post-merge-guard",
                             "path": L0_H100, "line": 1, "message": "m", "guards": [other]})
    data["behaviours"][0]["guards"]["parameter"].append({**data["behaviours"][0]["guards"][
        "parameter"][0], "test_id": other, "effective": "gated"})
    audit.write_text(json.dumps(data))
    res = run_cli("--root", str(root), "launch", "--from", str(audit), "--dry-run",
                  "--format", "json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert [i["test_id"] for i in doc["items"]] == [other]
    assert [s["test_id"] for s in doc["skipped"]] == [UNLISTED]
    res = run_cli("--root", str(root), "launch", "--from", str(audit), "--backend", "bot")
    assert res.code == 0 and res.out.startswith("/bot run --extra-stage ")
    assert f"warning: skipped {UNLISTED}" in res.err


def test_a_demoted_guard_is_labelled_by_its_own_verdict(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("*.diff", "README.md"))
    _history(root)  # the last commit moves l0_h100's TRTLLM chunked-prefill line to post_merge
    audit = tmp_path / "audit.json"
    run_cli("--root", str(root), "audit", "--base", "HEAD~1", "--head", "HEAD", "-o", str(audit))
    demoted = CHUNKED.format("TRTLLM")
    assert any(f["rule"] == "guard-demoted" and f["guards"] == [demoted]
               for f in json.loads(audit.read_text())["findings"])
    res = run_cli("--root", str(root), "where", demoted, "--format", "json")
    [own] = [t["verdict"] for t in json.loads(res.out)["tests"]]
    assert own == "gated"  # now post-merge in l0_h100, still gated in l0_dgx_h100
    res = run_cli("--root", str(root), "launch", "--from", str(audit), "--dry-run",
                  "--format", "json")
    assert res.code == 0, res.err
    [item] = [i for i in json.loads(res.out)["items"] if i["test_id"] == demoted]
    assert item["verdict"] == own  # as `where` says, not "unscheduled"
    assert git(root, "status", "--porcelain") == ""
