"""Real git repositories for the tests: one ``git`` with a fixed identity, and a repository
written from a dict of files and committed as its base."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e",
             "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}


def git(repo: Path, *args: str) -> str:
    """``git -C repo ARGS``; its stdout (a failure raises)."""
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env={**os.environ, **_IDENTITY}).stdout


def new_repo(root: Path, files: dict[str, str]) -> Path:
    """``files`` (dedented) written under ``root``, committed as ``base`` on ``main``."""
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root
