"""A warm `audit --base B --head H` rebuilds nothing: the scratch tree of H is left as it is
(its directory unchanged, so the import graph's stamp holds) and the unit-test selections
are read back, not evaluated; the answer is the cold one."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from auditor.replay.gitsource import ScratchTree, tree_of
from tests.auditor.test_audit import CREATOR, commit, edit, repo

__all__ = ["repo"]  # the fixture (the example's base tree as a repo), imported for these tests


@pytest.fixture
def changed(repo: Path) -> Path:
    """The example's base commit, then one that turns block reuse on."""
    edit(repo, CREATOR, "enable_block_reuse = False", "enable_block_reuse = True")
    commit(repo)
    return repo


def _refuse(what: str):  # type: ignore[no-untyped-def]
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError(f"a warm audit {what}")

    return refuse


def test_a_second_audit_of_a_head_reuses_graph_and_selections(
        run_cli, changed: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    args = ("--root", str(changed), "audit", "--base", "HEAD~1", "--head", "HEAD", "--format",
            "json")
    cold = run_cli(*args)
    assert cold.code in (0, 1), cold.err
    assert any(g["test_id"].startswith("unittest/")  # a unit test judged through a selection
               for b in json.loads(cold.out)["behaviours"] for gs in b["guards"].values()
               for g in gs)
    # Stamps do not trust a directory changed within 2 s of them (testdb.stamp.RACY_NS), as
    # the scratch tree's was by the cold run: once that is past, an audit records them.
    time.sleep(2.1)
    assert run_cli(*args).out == cold.out
    import auditor.graph
    import testdb.inventory.select

    monkeypatch.setattr(auditor.graph, "_networkx_graph", _refuse("rebuilt the import graph"))
    monkeypatch.setattr(testdb.inventory.select, "_compile", _refuse("evaluated a selection"))
    warm = run_cli(*args)
    assert (warm.code, warm.out) == (cold.code, cold.out), warm.err


def _slot(tmp_path: Path, repo: Path) -> tuple[str, str]:
    return str(tmp_path / "trees"), tree_of(str(repo), "HEAD")


def test_a_checkout_that_changes_nothing_leaves_the_slot_alone(tmp_path: Path,
                                                                changed: Path) -> None:
    base, tree = _slot(tmp_path, changed)
    first = ScratchTree(str(changed), base)
    assert first.checkout(tree)
    first.close()
    before = os.stat(first.root)
    manifest = os.path.join(first.root, ".testdb-replay-tree.json")
    written = os.stat(manifest).st_mtime_ns
    again = ScratchTree(str(changed), base)  # as the next audit takes it
    assert again.root == first.root
    assert again.checkout(tree) == []
    again.close()
    after = os.stat(first.root)
    assert (after.st_mtime_ns, after.st_ctime_ns) == (before.st_mtime_ns, before.st_ctime_ns)
    assert os.stat(manifest).st_mtime_ns == written


def test_a_file_changed_behind_its_back_is_put_right(tmp_path: Path, changed: Path) -> None:
    base, tree = _slot(tmp_path, changed)
    first = ScratchTree(str(changed), base)
    first.checkout(tree)
    first.close()
    creator = Path(first.root) / CREATOR
    want = creator.read_text()
    creator.write_text("tampered\n")
    (Path(first.root) / "stray.py").write_text("x = 1\n")
    again = ScratchTree(str(changed), base)
    assert again.checkout(tree) == [CREATOR]
    again.close()
    assert creator.read_text() == want
    assert not (Path(first.root) / "stray.py").exists()
    third = ScratchTree(str(changed), base)  # the manifest was rewritten: nothing left to fix
    assert third.checkout(tree) == []
    third.close()
