"""``auditor.reach_memo``: the symbol tier's index of what each test module's tests reach is
read back for the same import graph (an audit the audit memo cannot answer) and never for
another one (a new change), and an audit judged from it answers as one judged afresh."""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import pytest

from auditor.reach_memo import ReachMemo
from tests.auditor.test_audit import CREATOR, commit, edit
from tests.auditor.test_warm_audit import changed, repo

__all__ = ["changed", "repo"]  # the fixtures: the example's repository, one commit changed


def _forget_answers() -> None:
    answers = glob.glob(os.path.join(os.environ["TESTDB_CACHE_DIR"], "audit-*"))
    assert answers
    for kept in answers:
        os.unlink(kept)


def test_the_same_graph_reads_the_index_back(run_cli, changed: Path,  # type: ignore[no-untyped-def]
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # a cache of its own: the session's may hold this graph's records from another test
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(changed.parent / "own-cache"))
    args = ("--root", str(changed), "audit", "--base", "HEAD~1", "--head", "HEAD", "--format",
            "json")
    puts: list[str] = []
    real_put = ReachMemo.put
    monkeypatch.setattr(ReachMemo, "put", lambda self, m, e: (puts.append(m),
                                                               real_put(self, m, e))[1])
    first = run_cli(*args)
    assert first.code in (0, 1), first.err
    assert puts, "the first audit indexed no test module"
    assert any(b["guards"].get("symbol") for b in json.loads(first.out)["behaviours"])
    _forget_answers()
    puts.clear()
    again = run_cli(*args)
    assert (again.code, json.loads(again.out)) == (first.code, json.loads(first.out))
    assert puts == [], "the same graph's index was computed again"
    # another change: another graph, whose index is computed afresh
    edit(changed, CREATOR, "enable_block_reuse = True", "enable_block_reuse = None")
    commit(changed)
    other = run_cli(*args)
    assert other.code in (0, 1), other.err
    assert puts, "another graph's index was read from the first one's"


def test_a_damaged_record_is_computed_afresh(tmp_path: Path) -> None:
    memo = ReachMemo.open(str(tmp_path), "graphplain-x.marshal")
    memo.put("tests.test_a", (("pkg.a:f",), ("run",), ("pkg.a:K",)))
    memo.save()
    assert ReachMemo.open(str(tmp_path), "graphplain-x.marshal").get("tests.test_a") == (
        ("pkg.a:f",), ("run",), ("pkg.a:K",))
    assert ReachMemo.open(str(tmp_path), "graphplain-y.marshal").get("tests.test_a") is None
    (path,) = glob.glob(str(tmp_path / "reach-*"))
    Path(path).write_bytes(Path(path).read_bytes()[:-5])
    assert ReachMemo.open(str(tmp_path), "graphplain-x.marshal").get("tests.test_a") is None
