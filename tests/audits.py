"""Helpers of the tests that audit a git repository through the CLI and compare answers."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@contextlib.contextmanager
def empty_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """A fresh cache directory (nothing memoized) for the block, the test's own after: the
    answer a cache must not change."""
    with monkeypatch.context() as m:
        m.setenv("TESTDB_CACHE_DIR", str(tmp_path / f"cold-{len(os.listdir(tmp_path))}"))
        yield


def behaviour(data: dict[str, Any], function: str) -> dict[str, Any]:
    """The audit JSON's one behaviour of ``function``."""
    [b] = [b for b in data["behaviours"] if b["function"] == function]
    return b
