"""The warm ``testdb stats``: answered from its cache without click, exactly as click answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reports.entry import answer, plain_stats
from reports.unread import diagnostic_lines
from testdb.errors import Diagnostic, Severity, SourceLoc
from tests.conftest import CORPUS
from tests.reports.helpers import warm_stats_imports
from tests.testdb.tdb_helpers import TESTDB, WAIVES, small_checkout


@pytest.fixture(autouse=True)
def private_cache(_isolated_cache: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                  ) -> Path:
    """A cache of this test's own; and no file counts as racily clean (the checkouts here are
    written a moment before they are stamped: see tests/testdb/test_stamp.py)."""
    import testdb.stamp

    cache = tmp_path / "cache"
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(cache))
    monkeypatch.setattr(testdb.stamp, "RACY_NS", -10**12)
    return cache


@pytest.mark.parametrize("argv, want", [
    (["stats"], (".", "text")),
    (["--root", "R", "stats"], ("R", "text")),
    (["--root=R", "stats", "--format", "json"], ("R", "json")),
    (["--root", "R", "stats", "--format=text"], ("R", "text")),
    (["stats", "--root", "R"], ("R", "text")),  # --root after the command, as click takes it
    (["stats", "--format", "json", "--root=R"], ("R", "json")),
    (["stats", "--no-cache"], None),
    (["stats", "--format", "xml"], None),  # click says what is wrong
    (["stats", "--format"], None),
    (["--root", "R", "--no-cache", "stats"], None),
    (["--root", "R", "--stages", "s.yml", "stats"], None),
    (["--root"], None),
    (["--root", "--help", "stats"], None),
    (["--root=", "stats"], None),
    (["stats", "--help"], None),
    (["--help"], None),
    (["stats", "extra"], None),
    (["where", "x"], None),
    ([], None),
])
def test_only_the_plain_shape_is_answered_without_click(argv: list[str], want: object) -> None:
    assert plain_stats(argv) == want


def both(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[tuple, tuple]:  # type: ignore[type-arg]
    """(warm answer, click answer) to ``argv``: each (exit code, stdout, stderr)."""
    from reports.cli import run

    capsys.readouterr()
    code = answer(argv)
    assert code is not None, "no warm answer"
    warm = (code, *capsys.readouterr())
    with pytest.raises(SystemExit) as exc:
        run(argv)
    return warm, (exc.value.code or 0, *capsys.readouterr())


def warm_up(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    from reports.cli import run

    assert answer(argv) is None  # cold: nothing cached yet, nothing printed
    assert capsys.readouterr() == ("", "")
    with pytest.raises(SystemExit):
        run(argv)
    capsys.readouterr()


def error_checkout(root: Path, n_bad: int) -> Path:
    """A checkout whose plan has errors: ``n_bad`` malformed test-db files."""
    bad = "ctx{}:\n- tests: [a.py::b]\n  condition: 3\n"
    return small_checkout(root, {f"{TESTDB}/l0_bad{i}.yml": bad.format(i)
                                 for i in range(n_bad)})


DURATIONS = "tests/integration/defs/.test_durations"


@pytest.mark.parametrize("case", ["corpus", "small", "errors", "many-errors", "durations"])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_warm_answer_is_clicks_answer(case: str, fmt: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    root = {"corpus": lambda: Path(CORPUS), "small": lambda: small_checkout(tmp_path / "c"),
            "errors": lambda: error_checkout(tmp_path / "c", 1),
            "many-errors": lambda: error_checkout(tmp_path / "c", 60),
            "durations": lambda: small_checkout(tmp_path / "c", {DURATIONS: '{"a": '})}[case]()
    argv = ["--root", str(root), "stats", *(["--format", fmt] if fmt == "json" else [])]
    warm_up(capsys, argv)
    warm, full = both(capsys, argv)
    assert warm == full
    code, out, err = warm
    if case in ("errors", "many-errors"):
        assert code == 2 and ": error: " in err
    if case == "many-errors":
        assert "more (see `testdb lint`)" in err
    if case == "durations":  # a warning with a result is exit 0, as `where` says (16.12)
        assert code == 0 and f"{DURATIONS}:1: warning: malformed JSON" in err
        assert ("diagnostics     0 errors, 1 warning" in out if fmt == "text" else
                (json.loads(out)["errors"], json.loads(out)["warnings"]) == (0, 1))
    if fmt == "json":
        assert json.loads(out)["root"] == str(root)


def test_a_changed_plan_is_not_answered_from_the_old_cache(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = small_checkout(tmp_path / "c")
    argv = ["--root", str(root), "stats", "--format", "json"]
    warm_up(capsys, argv)
    before = json.loads(both(capsys, argv)[0][1])
    with open(root / WAIVES, "a", encoding="utf-8") as fh:
        fh.write("a.py::test_post SKIP (https://nvbugs/1)\n")
    warm_up(capsys, argv)  # the stamp no longer holds: click answers, and caches the new plan
    after = json.loads(both(capsys, argv)[0][1])
    assert after["waives"] == before["waives"] + 1


def test_a_damaged_stats_cache_is_not_answered(tmp_path: Path, private_cache: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    root = small_checkout(tmp_path / "c")
    argv = ["--root", str(root), "stats"]
    warm_up(capsys, argv)
    (path,) = private_cache.glob("stats-*.marshal")
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    capsys.readouterr()
    assert answer(argv) is None and capsys.readouterr() == ("", "")


def test_no_test_lists_is_left_to_click(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    from reports.cli import main

    (tmp_path / "empty").mkdir()
    for _ in range(2):
        with pytest.raises(SystemExit) as exc:
            main(["--root", str(tmp_path / "empty"), "stats"])
        assert exc.value.code == 2 and "no test lists" in capsys.readouterr().err


ROWS = [("b.yml", 3, "warning", "w", "r"), ("a.yml", 0, "error", "e", "r"),
        ("a.yml", 9, "info", "i", "r"), (DURATIONS, 1, "error", "malformed JSON", "json"),
        (DURATIONS, 4, "warning", "not seconds", "bad-duration")]


@pytest.mark.parametrize("rows, quiet, limit, lines, code", [
    (ROWS[:3], False, 50, ["a.yml: error: e", "b.yml:3: warning: w", "a.yml:9: info: i"], 2),
    (ROWS[:3], True, 50, ["a.yml: error: e"], 2),
    (ROWS[:3], False, 2, ["a.yml: error: e", "b.yml:3: warning: w",
                          "... and 1 more (see `testdb lint`)"], 2),
    # only shard estimates read .test_durations: its error is a warning (exit 0), shown even
    # with quiet warnings; the suffix says what an unreadable file changes
    (ROWS[3:], True, 50, [f"{DURATIONS}:1: warning: malformed JSON; shard numbers assume "
                          "unknown durations", f"{DURATIONS}:4: warning: not seconds"], 0),
    ([], False, 50, [], 0),
])
def test_diagnostic_lines(rows: list[tuple[str, int, str, str, str]], quiet: bool, limit: int,
                          lines: list[str], code: int,
                          capsys: pytest.CaptureFixture[str]) -> None:
    assert diagnostic_lines(rows, quiet_warnings=quiet, limit=limit) == (lines, code)
    # the click commands print the same lines (reports.common.report_diagnostics)
    from reports.common import report_diagnostics

    diags = [Diagnostic(SourceLoc(p, ln), Severity(sev), msg, rule)
             for p, ln, sev, msg, rule in rows]
    capsys.readouterr()
    assert report_diagnostics(diags, quiet_warnings=quiet, limit=limit) == code
    assert capsys.readouterr().err.splitlines() == lines


def test_the_warm_path_imports_neither_click_nor_the_records(tmp_path: Path) -> None:
    heavy = {"click", "yaml", "networkx", "pickle", "testdb.index", "testdb.model",
             "testdb.schedule", "dataclasses"}
    assert warm_stats_imports(CORPUS, tmp_path / "cache", heavy) == ("0", [])
