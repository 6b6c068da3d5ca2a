"""testdb.parallel: results in order, serially below the threshold, and work that starts in
the workers when the map is called (the audit builds the inventory meanwhile)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from testdb.parallel import in_child, in_child_parts, in_fork, parallel_map


def _touch(path: str) -> str:
    Path(path).write_text("scanned")
    return os.path.basename(path)


def _square(n: int) -> int:
    return n * n


def test_results_in_order_in_workers_and_serially() -> None:
    items = list(range(50))
    assert list(parallel_map(_square, items, workers=2, min_items=1)) == [n * n for n in items]
    assert list(parallel_map(_square, items, workers=2, min_items=100)) == [n * n for n in items]
    assert list(parallel_map(_square, [], workers=2, min_items=0)) == []


def test_the_workers_start_before_the_results_are_asked_for(tmp_path: Path) -> None:
    paths = [str(tmp_path / f"m{i}") for i in range(4)]
    results = parallel_map(_touch, paths, workers=2, min_items=1)
    deadline = time.monotonic() + 30
    while not all(os.path.exists(p) for p in paths) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert all(os.path.exists(p) for p in paths), "nothing ran before the first result"
    assert list(results) == [os.path.basename(p) for p in paths]


def _fail() -> None:
    raise ValueError("the work failed")


def test_in_child_answers_from_another_process_or_none() -> None:
    assert in_child(os.getpid)() not in (None, os.getpid())
    assert in_child(_square, 7)() == 49
    assert in_child(_fail)() is None  # the caller does the work itself and meets the error
    assert in_child(os._exit, 3)() is None  # died before answering


def _answers(tell: Any, n: int) -> None:
    """Two answers: one from a fork of the child (as the graph's last steps), one from it."""
    in_fork(lambda: tell("forked", os.getpid()))
    tell("square", n * n)
    if n < 0:
        raise ValueError("after one answer")


def test_in_child_parts_answers_each_name_from_child_or_fork_or_none() -> None:
    answer = in_child_parts(_answers, 7)
    assert answer("square") == 49
    assert answer("forked") not in (None, os.getpid())
    assert answer("absent") is None  # the child ended without it
    failed = in_child_parts(_answers, -2)
    assert failed("square") == 4 and failed("absent") is None


def test_in_fork_runs_here_where_no_fork_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise OSError("no more processes")

    ran: list[int] = []
    monkeypatch.setattr(os, "fork", no_fork)
    in_fork(lambda: ran.append(os.getpid()))
    in_fork(lambda: _fail())  # an error stays in: the answer is simply not told
    assert ran == [os.getpid()]
