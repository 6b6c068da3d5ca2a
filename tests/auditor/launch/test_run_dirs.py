"""Each launch gets its own run directory (issue 25, item 3: three launches in one second wrote
into one `testdb-runs/<time>` and overwrote each other's results.json), and the warning about
tests that could not run names every one of them (item 14: it named the first)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditor.launch import rundir
from auditor.launch.model import RunResult, RunResults
from testdb.errors import UsageError
from tests.auditor.launch.test_launch_cli import tiny  # noqa: F401 (a fixture)

NOW = 1_800_000_000.0


def test_claims_in_one_second_get_their_own_directories(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    dirs = [rundir.claim(None, NOW) for _ in range(3)]
    name = rundir.stamp(NOW)
    assert [str(d) for d in dirs] == [f"testdb-runs/{name}", f"testdb-runs/{name}-2",
                                      f"testdb-runs/{name}-3"]
    assert all(d.is_dir() for d in dirs)
    assert rundir.preview(None, NOW) == Path(f"testdb-runs/{name}-4"), "the next free name"


@pytest.mark.parametrize(("held", "refused"), [
    (None, False),                    # a new directory
    ("notes.txt", False),             # a directory of the user's, holding no run
    ("results.json", True),           # a finished run
    ("slurm-state.json", True),       # a Slurm run (maybe still running)
])
def test_given_run_dir_holding_a_run_is_refused(tmp_path: Path, held: str | None,
                                                refused: bool) -> None:
    target = tmp_path / "run"
    if held:
        target.mkdir()
        (target / held).write_text("{}", encoding="utf-8")
    if refused:
        with pytest.raises(UsageError, match=f"already holds a run \\({held}\\)"):
            rundir.claim(str(target))
    else:
        assert rundir.claim(str(target)) == target and target.is_dir()


def test_launches_in_one_second_keep_their_own_results(
        run_cli, tiny: Path, tmp_path: Path,  # type: ignore[no-untyped-def]  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(rundir, "stamp", lambda now=None: "20270101-000000")
    for _ in range(2):  # the second in the same second: the first collision (the rule's table
        # above takes a third)
        res = run_cli("--root", str(tiny), "launch", "test_tiny.py::test_pre",
                      "--include-pre-merge", "--format", "json")
        assert res.code == 0, res.err
    runs = sorted((tmp_path / "testdb-runs").iterdir())
    assert [p.name for p in runs] == ["20270101-000000", "20270101-000000-2"]
    for run in runs:
        doc = json.loads((run / "results.json").read_text(encoding="utf-8"))
        assert Path(doc["run_dir"]).resolve() == run.resolve()


def test_nothing_to_launch_leaves_no_directory(
        run_cli, tiny: Path, tmp_path: Path,  # type: ignore[no-untyped-def]  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = run_cli("--root", str(tiny), "launch", "test_tiny.py::test_pre")
    assert res.code == 0 and "nothing to launch" in res.out, res.err
    assert not any((tmp_path / "testdb-runs").glob("*"))


def test_warning_names_every_test_that_did_not_run(capsys: pytest.CaptureFixture[str]) -> None:
    from reports.cmd_launch import _show

    def r(n: int, outcome: str, detail: str = "") -> RunResult:
        return RunResult(f"k{n}", f"t.py::test_{n}", outcome, "local",  # type: ignore[arg-type]
                         detail=detail)

    results = RunResults("run", (r(1, "passed"), r(2, "not-runnable", "needs 8 GPU(s)"),
                                 r(3, "passed"), r(4, "not-runnable", "needs 16 GPU(s)"),
                                 r(5, "passed"), r(6, "passed")))
    assert _show(results, "text") == 0
    err = capsys.readouterr().err
    assert "warning: 2 of the 6 planned tests did not run" in err
    assert "t.py::test_2: needs 8 GPU(s)" in err and "t.py::test_4: needs 16 GPU(s)" in err
