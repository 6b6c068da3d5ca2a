"""Real git repositories for the tests: one ``git`` with a fixed identity, and a repository
written from a dict of files and committed as its base."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

# A fixed identity, and no user or system config (a developer's hooks, signing or aliases)
_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e",
             "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e",
             "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


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


def pr_clone(tmp: Path, example: Path, diff: str, clone: Path) -> Path:
    """A pull request as CI checks it out: a bare origin (``tmp/origin.git``) whose ``main`` is
    ``example``'s base tree, cloned at ``clone`` on branch ``feature`` with ``example/diff``
    applied and committed. The Action's and the Jenkins stage's tests both start here."""
    import shutil

    origin, seed = tmp / "origin.git", tmp / "seed"
    shutil.copytree(example, seed, ignore=shutil.ignore_patterns("*.diff", "README.md"))
    git(seed, "init", "-q", "-b", "main")
    git(seed, "add", "-A")
    git(seed, "commit", "-qm", "base")
    git(tmp, "init", "-q", "--bare", "-b", "main", str(origin))
    git(seed, "push", "-q", str(origin), "main")
    git(clone.parent, "clone", "-q", str(origin), str(clone))
    git(clone, "checkout", "-q", "-b", "feature")
    git(clone, "apply", str(example / diff))
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "the change")
    return clone
