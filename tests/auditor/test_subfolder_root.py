"""`audit --base` with --root a folder inside a git repository (a monorepo, a vendored copy):
paths are relative to --root, files come from the right revision, and files changed outside
--root are counted in the notes, not silently mixed in."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.auditor.test_audit import CREATOR, behaviour, git
from tests.conftest import EXAMPLE


def test_root_below_the_top_of_the_repository(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    top = tmp_path / "mono"
    root = top / "third_party" / "trtllm"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("*.diff", "README.md"))
    (top / "README").write_text("a monorepo\n")
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "base")
    src = root / CREATOR
    src.write_text(src.read_text().replace("enable_block_reuse = False",
                                           "enable_block_reuse = True", 1))
    (top / "README").write_text("a monorepo, changed\n")
    git(top, "add", "-A")
    git(top, "commit", "-qm", "change")
    res = run_cli("--root", str(root), "audit", "--base", "HEAD~1", "--head", "HEAD",
                  "--format", "json")
    assert res.code in (0, 1), res.err
    data = json.loads(res.out)
    b = behaviour(data, "create_py_executor")
    assert b["path"] == CREATOR and b["status"] == "modified"
    assert {"enable_block_reuse"} <= set(b["tokens"])
    assert not data["unlinked"]  # README outside --root is not one of this checkout's files
    assert any("1 changed file(s) outside --root" in n and "README" in n
               for n in data["notes"])
