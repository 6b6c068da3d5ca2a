"""A small TensorRT-LLM-shaped git repository for the change-shape tests: the example's CI
data (stages, triggers) with a test-db list of our own, one pre-merge and one post-merge block,
so each test writes only the modules, tests and list lines its rule needs."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

from tests.conftest import EXAMPLE
from tests.gitrepo import git

LIST = "tests/integration/test_lists/test-db/l0_h100.yml"
DEFS = "tests/integration/defs"
_BLOCK = """\
- condition:
    ranges:
      system_gpu_count:
        gte: 1
        lte: 1
    wildcards:
      gpu:
      - '*h100*'
      linux_distribution_name: ubuntu*
    terms:
      stage: {stage}
      backend: pytorch
  tests:
"""


def l0_list(pre: list[str], post: list[str]) -> str:
    """``l0_h100.yml`` with a pre-merge block listing ``pre`` and a post-merge one ``post``
    (the pre-merge ids from line 16 on, one a line)."""
    text = "version: 0.0.1\nl0_h100:\n" + _BLOCK.format(stage="pre_merge")
    text += "".join(f"  - {t}\n" for t in pre or ["perf/none.py::test_none"])
    text += _BLOCK.format(stage="post_merge")
    return text + "".join(f"  - {t}\n" for t in post or ["perf/none.py::test_none"])


PRE_LINE = 16  # the first pre-merge id's line in l0_list's file


def shapes_repo(root: Path, files: dict[str, str], pre: list[str], post: list[str]) -> Path:
    """The example's tree without its sources and lists' ids, plus ``files`` (dedented),
    committed as ``base``."""
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(
        "*.diff", "README.md", "*.py", ".test_durations", "l0_*.yml", "*.txt"))
    (root / DEFS / "conftest.py").write_text("")
    (root / "tests/integration/test_lists/waives.txt").write_text("")
    write(root, {LIST: l0_list(pre, post), **files})
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


def write(root: Path, files: dict[str, str | None]) -> None:
    """Write (dedented) or, for None, delete each file."""
    for rel, text in files.items():
        p = root / rel
        if text is None:
            p.unlink()
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))


def commit(root: Path, files: dict[str, str | None], message: str = "change") -> None:
    write(root, files)
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)


def audit_json(run_cli: Any, root: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """``testdb audit ARGS --format json`` (default: the last commit), its exit and JSON."""
    args = args or ("--base", "HEAD~1", "--head", "HEAD")
    res = run_cli("--root", str(root), "audit", *args, "--format", "json")
    assert res.code in (0, 1), res.err
    return res.code, json.loads(res.out)


def findings(data: dict[str, Any], rule: str) -> list[dict[str, Any]]:
    return [f for f in data["findings"] if f["rule"] == rule]
