"""A child virtualenv that sees the packages of the interpreter running the tests, offline.

`virtualenv --system-site-packages` would not do: virtualenv resolves a venv's python to its
base interpreter, so the child sees the base's site-packages, not this venv's (the README's
`pip install -e '.[test]' && python -m pytest` in a fresh venv failed "No matching distribution
found for unidiff>=0.7"). These helpers append this interpreter's own site directories to the
child's sys.path instead, after the child's own site-packages: the child's seeded pip and
setuptools come first, this environment's dependencies satisfy pip without an index.
"""

from __future__ import annotations

import os
import site
from pathlib import Path


def site_dirs() -> list[str]:
    """Where this interpreter's installed packages live (its venv's, when it runs in one)."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE and site.getusersitepackages() not in dirs:
        dirs.append(site.getusersitepackages())
    return [d for d in dirs if os.path.isdir(d)]


def see_this_env(venv_python: Path) -> None:
    """Give the virtualenv of ``venv_python`` a .pth naming this interpreter's site dirs (a .pth
    line appends a path; the .pth files in those dirs, e.g. an editable install's, stay inert)."""
    lib = venv_python.parent.parent / "lib"
    targets = sorted(lib.glob("python3*/site-packages"))
    if len(targets) != 1:
        raise AssertionError(f"{lib}: expected one python3*/site-packages, found {targets}")
    (targets[0] / "_testdb_parent_env.pth").write_text(
        "".join(d + "\n" for d in site_dirs()), encoding="utf-8")


def sitecustomize_dir(where: Path) -> Path:
    """A directory for PYTHONPATH whose sitecustomize appends this interpreter's site dirs to
    sys.path of every Python started with it, for venvs made by a tool (pre-commit) before the
    test can write a .pth into them. sitecustomize runs after site-packages are set up, so the
    venv's own packages still come first."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "sitecustomize.py").write_text(
        "import sys\n"
        f"for _d in {site_dirs()!r}:\n"
        "    if _d not in sys.path:\n"
        "        sys.path.append(_d)\n", encoding="utf-8")
    return where
