"""Linear in the size of the change: the innermost unit of each changed line comes from one
index per file (``UnitIndex``), which must answer exactly as the scan it replaces
(``unit_at``); progress of a large change goes through a callback, drawn on a terminal only.
Speed itself is measured in benchmarks/bench_change_size.py, not here."""

from __future__ import annotations

import ast
import io
import textwrap
from pathlib import Path

import pytest

from auditor.audit import run_audit
from auditor.behaviour import UnitIndex, behaviours, code_units, unit_at
from auditor.diff import FileChange, from_diff_file
from reports.cmd_audit import AuditProgress
from testdb.index import load
from tests.auditor.change_shapes import shapes_repo

SHAPES = {
    "flat": "def a():\n    return 1\n\n\ndef b():\n    return 2\n",
    "nested": textwrap.dedent("""\
        import os


        class A:
            x = 1

            @staticmethod
            @other
            def m(self):
                def inner():
                    return 1
                return inner

            class B:
                def n(self):
                    pass
        y = 2
        async def c():
            pass
        """),
    "same names": "def a():\n    pass\n\n\ndef a():\n    return 2\n\n\nclass a:\n    pass\n",
    "empty": "x = 1\n",
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_unit_index_answers_as_unit_at(shape: str) -> None:
    units = code_units(ast.parse(SHAPES[shape]))
    index = UnitIndex(units)
    for line in range(0, SHAPES[shape].count("\n") + 3):
        assert index.at(line) == unit_at(units, line), line


def test_a_large_new_file_is_one_behaviour_per_function() -> None:
    """20k functions (the size that ran past 300 s): every one found, each with its line."""
    n = 20_000
    text = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(n))
    fc = FileChange(None, "pkg/big.py", frozenset(range(1, text.count("\n") + 1)),
                    frozenset(), None, text)
    found, notes = behaviours(fc)
    assert [b.qualname for b in found] == [f"f{i}" for i in range(n)]
    assert found[-1].line == 4 * (n - 1) + 1 and not notes
    assert {b.status for b in found} == {"added"}


def test_progress_is_told_of_each_behaviour(tmp_path: Path) -> None:
    """The library tells a callback (done, total) after each behaviour change; it prints
    nothing itself."""
    text = "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(30))
    repo = shapes_repo(tmp_path / "repo", {"tensorrt_llm/__init__.py": ""}, [], [])
    (repo / "tensorrt_llm/big.py").write_text(text)
    lines = text.splitlines(keepends=True)
    diff = tmp_path / "big.diff"
    diff.write_text(f"--- /dev/null\n+++ b/tensorrt_llm/big.py\n@@ -0,0 +1,{len(lines)} @@\n"
                    + "".join("+" + ln for ln in lines))
    told: list[tuple[int, int]] = []
    audit = run_audit(load(str(repo)), from_diff_file(str(repo), str(diff)),
                      progress=lambda done, total: told.append((done, total)))
    assert len(audit.behaviours) == 30
    assert told == [(n, 30) for n in range(1, 31)]


class _Tty(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(("tty", "total", "drawn"), [
    (True, AuditProgress.LARGE, True),  # a large change on a terminal: a bar
    (True, AuditProgress.LARGE - 1, False),  # small: judged before a bar is read
    (False, 10 * AuditProgress.LARGE, False),  # not a terminal (CI logs, a pipe): nothing
])
def test_the_cli_draws_a_bar_for_a_large_change_on_a_terminal(tty: bool, total: int,
                                                               drawn: bool) -> None:
    stream = _Tty(tty)
    with AuditProgress(stream) as shown:
        for done in range(1, total + 1):
            shown(done, total)
    out = stream.getvalue()
    assert bool(out) == drawn
    if drawn:
        assert out.endswith(f"] {total:,}/{total:,} behaviour changes judged\n")
        assert out.count("\r") < 20  # throttled, the last always drawn
