"""The judged warm audit (`audit --head`, kept answer removed, caches warm) answers byte for byte
as a cold one does, when its scratch tree is taken from the slot's stamp; and a slot edited
behind the stamp's back (a test file slipped into it) still gets the cold answer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from auditor.replay import gitsource
from auditor.replay.gitsource import ScratchTree
from tests.auditor.test_audit import CREATOR, commit, edit, repo

__all__ = ["repo"]  # the fixture (the example's base tree as a repo)

ARGS = ("audit", "--base", "HEAD~1", "--head", "HEAD")


@pytest.fixture
def changed(repo: Path) -> Path:
    edit(repo, CREATOR, "enable_block_reuse = False", "enable_block_reuse = True")
    commit(repo)
    return repo


def _forget_answers() -> None:
    cache = Path(os.environ["TESTDB_CACHE_DIR"])
    for kept in cache.glob("audit-*.marshal"):
        kept.unlink()


def _outputs(run_cli, root: Path) -> list[tuple[int, str]]:  # type: ignore[no-untyped-def]
    out = []
    for fmt in ("json", "text", "markdown"):
        _forget_answers()
        got = run_cli("--root", str(root), *ARGS, "--format", fmt)
        assert got.code in (0, 1), got.err
        out.append((got.code, got.out))
    return out


def _slot_root(repo: Path) -> Path:
    from auditor.replay.options import trees_dir

    return Path(trees_dir(str(repo))) / "slot0"


def test_a_judged_audit_from_the_slot_stamp_is_the_cold_answer(
        run_cli, changed: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(gitsource, "RACY_NS", 0)  # stamped at once (the window has its test)
    cold = _outputs(run_cli, changed)  # the first writes the slot; the next ones stamp it
    assert Path(str(_slot_root(changed)) + ".stamp").exists()

    def walk(_self: ScratchTree) -> None:
        raise AssertionError("the slot was walked although its stamp holds")

    with monkeypatch.context() as m:
        m.setattr(ScratchTree, "_verify", walk)
        assert _outputs(run_cli, changed) == cold


def test_a_test_file_slipped_into_a_stamped_slot_changes_no_answer(
        run_cli, changed: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """TRAP: a stray test that imports the changed module would be a guard if the slot were
    trusted as it is; the stamp sends the slot to the walk, which removes it."""
    monkeypatch.setattr(gitsource, "RACY_NS", 0)
    cold = _outputs(run_cli, changed)
    stray = (_slot_root(changed) / "tests" / "integration" / "defs" / "test_stray_guard.py")
    stray.write_text("from tensorrt_llm._torch.pyexecutor.py_executor_creator import *\n\n\n"
                     "def test_stray():\n    assert True\n")
    assert _outputs(run_cli, changed) == cold
    assert not stray.exists()
