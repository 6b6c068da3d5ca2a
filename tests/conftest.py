"""Shared fixtures: run the CLI in-process with exit codes, paths to bundled data."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO, "data", "trtllm")
EXAMPLE = os.path.join(REPO, "examples", "flashinfer-reuse")


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
                    ) -> None:
    """Every test session gets its own cache dir, so tests never see a user's cache."""
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run ``testdb ARGS`` through the real entry point (exit codes, error handling)."""
    from reports.cli import main

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        cap = capsys.readouterr()
        return CliResult(code, cap.out, cap.err)

    return run


def unavailable(reason: str, require_env: str) -> None:
    """Skip a test whose real component (Slurm, Chromium) is missing; in CI, where
    ``require_env`` is set, a missing component is a failure rather than a silent skip."""
    if os.environ.get(require_env):
        pytest.fail(f"{reason} (and {require_env} is set: CI must provide it)")
    pytest.skip(reason)
