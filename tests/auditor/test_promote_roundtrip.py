"""promote then demote restores a line's place (the journal of where it came from), and the exit
code tells what happened to the file even when the reader of the output goes away."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditor import promote_journal
from auditor.promote import apply_plan, plan_moves
from testdb.index import load

# FLASHINFER sits in the middle of its post_merge block (line 218): the case the end-of-block
# rule got wrong. The fixtures: a per-test cache (so a per-test journal) and a corpus copy.
from tests.auditor.test_promote import FLASHINFER, H100, _cache, root

__all__ = ["_cache", "root"]  # the fixtures, imported for these tests


def _move(root: Path, direction: str, test: str = FLASHINFER) -> None:
    index = load(str(root), use_cache=False)
    apply_plan(index, plan_moves(index, [test], direction, contexts=["l0_h100"]))


def _around(path: Path, text: str) -> tuple[str, str]:
    lines = path.read_text().splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.endswith(text))
    return lines[i - 1], lines[i + 1]


def test_round_trip_of_a_line_from_the_middle_of_its_block_is_byte_identical(root: Path
                                                                             ) -> None:
    path = root / H100
    original = path.read_bytes()
    before = _around(path, FLASHINFER)
    _move(root, "promote")
    assert path.read_bytes() != original
    _move(root, "demote")
    assert path.read_bytes() == original
    assert _around(path, FLASHINFER) == before


@pytest.mark.parametrize(("drop", "expect"), [
    ("before", "after"),  # the line before it was deleted: it goes back before the one after
    ("both", "end"),      # both neighbours gone: the end of the block, as without a journal
])
def test_edited_block_falls_back_to_the_remaining_neighbour(root: Path, drop: str,
                                                            expect: str) -> None:
    path = root / H100
    prev_line, next_line = _around(path, FLASHINFER)
    _move(root, "promote")
    text = path.read_text()
    text = text.replace(prev_line + "\n", "", 1)
    if drop == "both":
        text = text.replace(next_line + "\n", "", 1)
    path.write_text(text)
    _move(root, "demote")
    lines = path.read_text().splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.endswith(FLASHINFER))
    if expect == "after":
        assert lines[i + 1] == next_line
    else:
        assert not lines[i + 1].startswith("  - ")  # the last entry of its block


def test_a_damaged_journal_is_only_a_lost_hint(root: Path) -> None:
    path = root / H100
    _move(root, "promote")
    with open(promote_journal.journal_path(), "r+b") as fh:
        fh.seek(20)
        fh.write(b"garbage")
    assert promote_journal.load() == []
    _move(root, "demote")  # no crash; the line goes to the end of its block
    lines = path.read_text().splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.endswith(FLASHINFER))
    assert not lines[i + 1].startswith("  - ")


def _piped(root: Path, *args: str) -> tuple[int, str]:
    """Run the real console entry point with its output read by `head -1`."""
    cmd = [sys.executable, "-m", "reports", "--root", str(root), *args]
    prog = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "NO_COLOR": "1"})
    assert prog.stdout is not None
    first = prog.stdout.readline().decode()
    prog.stdout.close()  # the reader goes away, as `head -1` does
    _, err = prog.communicate(timeout=120)
    return prog.returncode, first + err.decode()


def test_yes_with_a_closed_pipe_writes_the_file_and_exits_0(root: Path) -> None:
    path = root / H100
    original = path.read_bytes()
    code, out = _piped(root, "promote", "--context", "l0_h100", "--yes", FLASHINFER)
    assert out.startswith("promote: 1 line(s)")
    assert code == 0  # written: 1 would mean "declined"
    assert path.read_bytes() != original
    code, _ = _piped(root, "demote", "--context", "l0_h100", "--yes", FLASHINFER)
    assert code == 0
    assert path.read_bytes() == original
