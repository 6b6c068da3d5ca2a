"""`testdb report --html DIR --replay replay.json`: the history page from the bundled example
history (chart points, faulty changes, the plan), its input checks, and the page in Chromium."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

BUILD = Path(REPO) / "examples" / "replay-history" / "build.py"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The example history, replayed with its results and a plan into replay.json."""
    spec = importlib.util.spec_from_file_location("replay_history_build", BUILD)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path_factory.mktemp("history")
    names = mod.build(out)
    from reports.cli import run

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TESTDB_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        with pytest.raises(SystemExit) as done:
            run(["--root", str(out / "repo"), "replay", "v0..main", "--outcomes",
                 str(out / "outcomes.jsonl"), "--plan-promotions", "--budget-minutes", "16",
                 "-o", str(out / "replay.json"), "--format", "json"])
        assert done.value.code == 0
    return {"out": out, "names": names, "json": out / "replay.json"}


def _report(run_cli: Any, replayed: dict[str, Any], dest: Path, replay: Path) -> Any:
    return run_cli("--root", str(replayed["out"] / "repo"), "report", "--html", str(dest),
                   "--replay", str(replay))


def test_history_page(run_cli: Any, replayed: dict[str, Any], tmp_path: Path) -> None:
    res = _report(run_cli, replayed, tmp_path / "site", replayed["json"])
    assert res.code == 0, res.err
    assert f"wrote {tmp_path / 'site' / 'history.html'}" in res.out
    html = (tmp_path / "site" / "history.html").read_text()
    # one dot per commit with behaviour changes (31 commits, 6 without), one line point each
    assert len(re.findall(r"<circle class=\"(all|some|none)\"", html)) == 25
    points = re.search(r'<polyline class="running" points="([^"]+)"', html)
    assert points and len(points.group(1).split()) == 31
    # 8 guarded changes: seven commits guarded all theirs, c25 one of its two (c19's one
    # link shares only a value: weak evidence, unguarded)
    assert len(re.findall(r'<circle class="all"', html)) == 7
    assert len(re.findall(r'<circle class="some"', html)) == 1
    assert len(re.findall(r'<circle class="none"', html)) == 17
    # the faulty changes, flagged and missed, with their culprits
    rows = re.findall(r'<tr class="(flagged|missed)">', html)
    assert rows == ["flagged", "missed", "flagged", "missed"]
    c12 = replayed["names"]["c12"][:10]
    assert f"<code>{c12}</code> sampling: top_p keeps ties" in html
    assert "unattributed" in html
    assert "Recall per faulty change: <b>2 of 4</b> flagged (50.0%)" in html
    # the plan and the command that applies it
    assert "<b>8 of 27</b> (29.6%)" in html and "<b>11 of 27</b> (40.7%)" in html
    assert ("testdb promote --context l0_a10 --budget-minutes 16 "
            "&#39;test_attention.py::test_attention[attn_backend=FLASHINFER]&#39; "
            "test_sampling.py::test_top_p") in html
    assert 'href="index.html"' in html and (tmp_path / "site" / "index.html").exists()


def test_report_without_replay_writes_no_history(run_cli: Any, replayed: dict[str, Any],
                                                 tmp_path: Path) -> None:
    res = run_cli("--root", str(replayed["out"] / "repo"), "report", "--html",
                  str(tmp_path / "site"))
    assert res.code == 0 and not (tmp_path / "site" / "history.html").exists()
    index = (tmp_path / "site" / "index.html").read_text()
    assert "history.html" not in index  # no link to a page that is not there
    assert _budget_labels(index) == {"120 min"}  # promote's default, with no replay


def _budget_labels(index_html: str) -> set[str]:
    return set(re.findall(r'<text class="budget-label"[^>]*>([^<]+)</text>', index_html))


def test_index_links_its_history_and_draws_the_replays_budget(run_cli: Any,
                                                              replayed: dict[str, Any],
                                                              tmp_path: Path) -> None:
    """The replay planned with --budget-minutes 16: the index's shard charts draw that budget
    (they drew the default 120 min), and the index links history.html (it did not)."""
    assert json.loads(replayed["json"].read_text())["plan"]["budget_minutes"] == 16
    assert _report(run_cli, replayed, tmp_path / "site", replayed["json"]).code == 0
    index = (tmp_path / "site" / "index.html").read_text()
    assert re.search(r'<a id="history-link" href="history.html">history: v0..main</a>', index)
    labels = _budget_labels(index)
    assert labels == {"16 min"}, labels
    assert "the 16 min pre-merge budget" in index
    # a budget given on the command line still wins
    res = run_cli("--root", str(replayed["out"] / "repo"), "report", "--html",
                  str(tmp_path / "other"), "--replay", str(replayed["json"]),
                  "--budget-minutes", "30")
    assert res.code == 0
    assert _budget_labels((tmp_path / "other" / "index.html").read_text()) == {"30 min"}


@pytest.mark.parametrize(("content", "message"), [
    ("{", ":1: not JSON"),
    ('{"schema": "testdb-audit/audit@1"}', "not a replay file (schema 'testdb-audit/audit@1')"),
    (json.dumps({"schema": "testdb-audit/replay@1", "range": "a..b", "totals": {},
                 "scoring": {}, "series": [], "commits": [{"sha": 1}]}),
     "commits[0].sha: unexpected int"),
    (json.dumps({"schema": "testdb-audit/replay@1", "range": "a..b", "totals": {},
                 "scoring": {}, "series": "x", "commits": []}), "series: missing or not a list"),
])
def test_bad_replay_file_exits_2(run_cli: Any, replayed: dict[str, Any], tmp_path: Path,
                                 content: str, message: str) -> None:
    bad = tmp_path / "replay.json"
    bad.write_text(content)
    res = _report(run_cli, replayed, tmp_path / "site", bad)
    assert res.code == 2 and str(bad) in res.err and message in res.err, res.err
    assert not (tmp_path / "site").exists()


@pytest.mark.browser
def test_history_page_in_chromium(browser: Any, run_cli: Any, replayed: dict[str, Any],
                                  tmp_path: Path) -> None:
    assert _report(run_cli, replayed, tmp_path / "site", replayed["json"]).code == 0
    page = browser.new_page(viewport={"width": 1000, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: errors.append(r.url))
    page.goto((tmp_path / "site" / "history.html").as_uri())
    box = page.locator("svg.history").bounding_box()
    assert box and box["width"] > 600 and box["height"] > 200
    assert page.locator("svg.history circle").count() == 25
    # the stylesheet of the report applies (the verdict pills are styled)
    colour = page.eval_on_selector("#faulty .v-pre-merge", "e => getComputedStyle(e).color")
    assert colour != "rgb(0, 0, 0)"
    # the index links the history page, and the history page the index
    page.goto((tmp_path / "site" / "index.html").as_uri())
    page.click("#history-link")
    page.wait_for_selector("body[data-page='history']")
    assert page.url.endswith("/history.html")
    assert errors == []
    page.close()


class _Tty:
    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> None:
        self.text += s

    def flush(self) -> None:
        pass


def test_progress_is_a_bar_on_a_terminal() -> None:
    from auditor.replay.model import CommitRecord
    from reports.cmd_replay import _Progress

    tty = _Tty()
    bar = _Progress(tty)
    for i in (1, 2):
        bar(i, 2, CommitRecord(f"{i:040d}", None, f"commit {i}", "", "audited"), False)
    assert tty.text.count("\r[") == 2 and "\n" not in tty.text.split("\r")[1]
    assert "[###############...............] 1/2" in tty.text
    assert tty.text.rstrip().splitlines()[-1].startswith("2 commits in ")
