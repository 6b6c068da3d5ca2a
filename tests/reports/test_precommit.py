"""The pre-commit hooks of `.pre-commit-hooks.yaml`, run by pre-commit itself on a temp git repo
whose `.pre-commit-config.yaml` names this checkout as the hook repository.

Offline: pre-commit clones the hook repository from its local path. `testdb-lint-system` installs
nothing. For `testdb-lint` (language: python) pre-commit makes a virtualenv and pip-installs the
hook repository into it; here that venv sees this environment's site-packages (a sitecustomize
on PYTHONPATH appends them: thisenv.py says why not VIRTUALENV_SYSTEM_SITE_PACKAGES) and pip may
not use an index (PIP_NO_INDEX, PIP_NO_BUILD_ISOLATION=0), so the dependencies come from the
test environment and nothing is downloaded. A user's first run
downloads them from PyPI once; pre-commit keeps the environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.reports.thisenv import sitecustomize_dir

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "flashinfer-reuse"
LIST = "tests/integration/test_lists/test-db/l0_h100.yml"
GOOD_ID = "accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_chunked_prefill"
TYPO_ID = "accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_chunkd_prefill"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _pre_commit() -> list[str]:
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        pytest.fail("the pre-commit package is missing: pip install -e '.[test]'")
    return [sys.executable, "-m", "pre_commit"]


def git(cwd: Path, *args: str, env: dict[str, str] | None = None,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, env=env, text=True, capture_output=True,
                          check=check, timeout=120)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env.update({
        "PRE_COMMIT_HOME": str(home / "pre-commit"), "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        # offline: no package index; the hook venv takes its dependencies from this environment
        "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0",
        "PYTHONPATH": os.pathsep.join(filter(None, [
            str(sitecustomize_dir(home / "thisenv")), os.environ.get("PYTHONPATH")])),
        # pre-commit runs entries found on PATH: the testdb of this environment first
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    })
    return env


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """This checkout as it stands (tracked and untracked, not ignored files), committed into a
    temp repository: pre-commit installs hooks from a commit, and the work tree may be ahead."""
    dest = tmp_path_factory.mktemp("hook-repo")
    files = git(REPO, "ls-files", "-co", "--exclude-standard", "-z").stdout.split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    env = _env(dest)
    git(dest, "init", "-q", env=env)
    git(dest, "add", "-A", env=env)
    git(dest, "commit", "-qm", "testdb-audit as checked out", env=env)
    return dest, git(dest, "rev-parse", "HEAD", env=env).stdout.strip()


@pytest.fixture
def project(tmp_path: Path, hook_repo: tuple[Path, str]) -> Iterator[tuple[Path, dict[str, str]]]:
    """A project with test lists (the bundled example) whose config names the hook repo."""
    root = tmp_path / "project"
    shutil.copytree(EXAMPLE, root)
    env = _env(tmp_path)
    git(root, "init", "-q", "-b", "main", env=env)
    git(root, "add", "-A", env=env)
    git(root, "commit", "-qm", "lists", env=env)
    yield root, env


def _config(root: Path, repo: Path, rev: str, hook: str) -> None:
    cfg = {"repos": [{"repo": str(repo), "rev": rev, "hooks": [{"id": hook}]}]}
    (root / ".pre-commit-config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")


def _add_line(root: Path, test_id: str) -> int:
    """Append a test to the first block's tests of LIST; returns its 1-based line."""
    path = root / LIST
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, s in enumerate(lines) if s.lstrip().startswith("- accuracy/")) + 1
    lines.insert(at, f"  - {test_id}[attn_backend=TRTLLM]\n")
    path.write_text("".join(lines), encoding="utf-8")
    return at + 1


def test_manifest_is_valid_for_pre_commit() -> None:
    manifest = str(REPO / ".pre-commit-hooks.yaml")
    res = subprocess.run([*_pre_commit(), "validate-manifest", manifest], text=True,
                         capture_output=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    hooks = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"testdb-lint", "testdb-lint-system"}
    for h in hooks.values():
        assert h["entry"] == "testdb lint" and h["pass_filenames"] is False


@pytest.mark.parametrize("hook", ["testdb-lint-system", "testdb-lint"])
def test_hook_blocks_a_commit_that_breaks_a_list(project: tuple[Path, dict[str, str]],
                                                 hook_repo: tuple[Path, str], hook: str) -> None:
    root, env = project
    repo, rev = hook_repo
    pre_commit = _pre_commit()
    _config(root, repo, rev, hook)
    git(root, "add", ".pre-commit-config.yaml", env=env)
    res = subprocess.run([*pre_commit, "install"], cwd=root, env=env, text=True,
                         capture_output=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr

    # A commit that touches no list: the hook is skipped, the commit goes through.
    (root / "NOTES.md").write_text("notes\n", encoding="utf-8")
    git(root, "add", "NOTES.md", ".pre-commit-config.yaml", env=env)
    ok = git(root, "commit", "-m", "notes", env=env, check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "no files to check" in ok.stdout + ok.stderr

    # A list line naming a test that does not exist: the hook runs testdb lint, which refuses.
    line = _add_line(root, TYPO_ID)
    git(root, "add", LIST, env=env)
    bad = git(root, "commit", "-m", "typo", env=env, check=False)
    out = bad.stdout + bad.stderr
    assert bad.returncode != 0, out
    assert "Failed" in out and f"{LIST}:{line}:" in out and "error" in out
    assert git(root, "log", "--format=%s", env=env).stdout.split() == ["notes", "lists"]

    # The fix commits; a good new line passes the hook.
    path = root / LIST
    path.write_text(path.read_text(encoding="utf-8").replace(TYPO_ID, GOOD_ID), encoding="utf-8")
    git(root, "add", LIST, env=env)
    fixed = git(root, "commit", "-m", "fixed", env=env, check=False)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "Passed" in fixed.stdout + fixed.stderr

    if hook == "testdb-lint":  # pre-commit's own venv holds an installed copy of the tool
        envs = list((Path(env["PRE_COMMIT_HOME"])).glob("repo*/py_env-*/bin/testdb"))
        assert len(envs) == 1, "pre-commit installed the hook repository into its venv"
