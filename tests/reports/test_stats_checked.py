"""`stats` counts verdicts as `where` and the HTML report give them (QA 5): checked against the
test sources when the checkout has them (invalid included), "not checked against sources" when
it has none; the warm answer (reports/entry.py) is cached under the plan's and the inventory's
keys, so a changed test file is never answered from the old counts."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from reports.entry import answer
from tests.conftest import CORPUS
from tests.reports.helpers import warm_stats_imports
from tests.testdb.tdb_helpers import A10_YML, TESTDB, small_checkout

MULTI = "test_multi.py::test_multi_names"
SOURCE = ("import pytest\n\n@pytest.mark.parametrize('n', [1, 2, 3, 4])\n"
          "def test_multi_names(n):\n    pass\n")


@pytest.fixture(autouse=True)
def private_cache(_isolated_cache: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                  ) -> Path:
    """A cache of this test's own; no file counts as racily clean (written just now)."""
    import testdb.stamp

    cache = tmp_path / "cache"
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(cache))
    monkeypatch.setattr(testdb.stamp, "RACY_NS", -10**12)
    return cache


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """[1] listed pre-merge, [2] post-merge, [5] names no test (a stale id, pre-merge)."""
    a10 = (A10_YML.replace("  - a.py::TestB::test_b\n",
                           f"  - a.py::TestB::test_b\n  - {MULTI}[1]\n  - {MULTI}[5]\n")
           .replace("  - a.py::test_post\n", f"  - a.py::test_post\n  - {MULTI}[2]\n"))
    return small_checkout(tmp_path / "co", {f"{TESTDB}/l0_a10.yml": a10,
                                            f"tests/integration/defs/{MULTI.split('::')[0]}":
                                                SOURCE})


def _stats(run_cli, root: Path) -> dict[str, object]:  # type: ignore[no-untyped-def]
    r = run_cli("--root", str(root), "stats", "--format", "json")
    assert r.code == 0, r.err
    data: dict[str, object] = json.loads(r.out)
    return data


def _where_counts(run_cli, root: Path) -> Counter[str]:  # type: ignore[no-untyped-def]
    """Each listed id's verdict as `where` gives it."""
    from testdb.index import load

    got: Counter[str] = Counter()
    for tid in load(str(root)).schedule.placements:
        r = run_cli("--root", str(root), "where", tid, "--format", "json")
        got.update(t["verdict"] for t in json.loads(r.out)["tests"] if t["id"] == tid)
    return got


def test_with_sources_stats_counts_where_and_the_reports_verdicts(run_cli, root: Path  # type: ignore[no-untyped-def]
                                                                  ) -> None:
    from reports.html import build_view
    from testdb.index import load
    from testdb.inventory import build_static

    data = _stats(run_cli, root)
    verdicts = data["verdicts"]
    # [1] and [2] run; [5] and the six a.py ids (no a.py in this checkout) name no test
    assert verdicts == {"pre-merge": 1, "post-merge-only": 1, "invalid": 7}
    assert data["names"] == {"checked": True, "not_checked": 0, "reason": ""}
    assert Counter(verdicts) == _where_counts(run_cli, root)
    view = build_view(load(str(root)), inventory=build_static(str(root)))
    names = view.data["verdicts"]
    html: Counter[str] = Counter()
    for row in view.data["functions"]:
        html.update({names[i]: n for i, n in enumerate(row[3:]) if n})
    assert Counter(verdicts) == html
    text = run_cli("--root", str(root), "stats").out
    [line] = [ln for ln in text.splitlines() if ln.startswith("test ids")]
    assert "invalid 7" in line and "not checked" not in line


def test_without_sources_it_says_not_checked(run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("--root", CORPUS, "stats", "--format", "json")
    data = json.loads(r.out)
    assert data["names"]["checked"] is False and "invalid" not in data["verdicts"]
    assert data["names"]["reason"] == ("not checked against sources: no test sources in this "
                                       "checkout")
    text = run_cli("--root", CORPUS, "stats").out
    [line] = [ln for ln in text.splitlines() if ln.startswith("test ids")]
    assert line.endswith(" (not checked against sources)")


def _warm(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int | None, str]:
    capsys.readouterr()
    code = answer(argv)
    return code, capsys.readouterr().out


def test_the_warm_answer_follows_the_test_files(run_cli, root: Path,  # type: ignore[no-untyped-def]
                                                capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--root", str(root), "stats", "--format", "json"]
    assert _warm(capsys, argv)[0] is None  # cold
    full = _stats(run_cli, root)
    code, out = _warm(capsys, argv)
    assert code == 0 and json.loads(out) == full  # warm: the same answer, without click
    # [5] comes to exist: the plan is the same, the test tree is not
    (root / "tests/integration/defs/test_multi.py").write_text(SOURCE.replace("3, 4", "3, 4, 5"))
    assert _warm(capsys, argv)[0] is None  # the inventory's stamp no longer holds
    after = _stats(run_cli, root)
    assert after["verdicts"]["invalid"] == 6  # type: ignore[index]
    code, out = _warm(capsys, argv)
    assert code == 0 and json.loads(out) == after


def test_the_warm_path_with_sources_imports_neither_click_nor_the_scanner(
        root: Path, private_cache: Path) -> None:
    heavy = {"click", "yaml", "networkx", "testdb.index", "testdb.names",
             "testdb.inventory.build", "testdb.inventory.model", "testdb.schedule"}
    assert warm_stats_imports(str(root), private_cache, heavy) == ("0", [])
