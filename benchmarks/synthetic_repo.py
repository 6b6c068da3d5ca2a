"""The synthetic checkout bench_audit.py and bench_replay.py time (corpus lists, tests, pkg)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
N_MODULES = 40


def git(root: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env)


def module_text(i: int, bump: Callable[[int], int] = lambda k: 0) -> str:
    """Module ``i``: ten functions; function ``k`` differs from the base by ``bump(k)``."""
    deps = "\n".join(f"from pkg.mod{j} import func{j}_0" for j in range(max(0, i - 2), i))
    funcs = "\n\n".join(
        f"def func{i}_{k}(backend, x):\n"
        f"    if backend == 'FLASHINFER' and x > {k + bump(k)}:\n"
        f"        return x * {k + 1}\n"
        f"    return x\n" for k in range(10))
    return f'"""Synthetic module {i}."""\n{deps}\n\n\n{funcs}\n'


def base_tree(root: Path, files: int) -> None:
    """data/trtllm's test plan, ``files`` synthetic test files (gen_synthetic_tests.py) and
    the package ``pkg``, which a tenth of the test modules import (as real tests import the
    library). Not yet a git repository."""
    shutil.copytree(REPO / "data" / "trtllm", root, dirs_exist_ok=True)
    subprocess.run([sys.executable, str(HERE / "gen_synthetic_tests.py"), str(root),
                    "--files", str(files)], check=True, capture_output=True)
    pkg = root / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for i in range(N_MODULES):
        (pkg / f"mod{i}.py").write_text(module_text(i))
    tests = sorted((root / "tests").rglob("test_*.py"))
    for n, t in enumerate(tests[::10]):
        t.write_text(f"from pkg.mod{n % N_MODULES} import func{n % N_MODULES}_0\n"
                     + t.read_text())


def tool_env(cache: str) -> dict[str, str]:
    """The environment of a timed ``testdb`` subprocess: its own cache directory, and
    bytecode cached as an installed tool has it (recompiling every module on every start, as
    a shell with PYTHONDONTWRITEBYTECODE makes it, is not what users pay)."""
    env = {**os.environ, "TESTDB_CACHE_DIR": cache}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env
