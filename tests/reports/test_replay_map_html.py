"""The history page (`report --html DIR --replay replay.json`) says what the measured map
decided: per commit and in total, how many behaviour changes measured links decided and how
many static links only (docs/map.md "In every face").

On the bundled example history, c03..c05 replays c04 (``tinyllm/cache.py::evict``, statically
guarded post-merge only) and c05 (the module renamed): a map measured at c03 says the pre-merge
test_top_k executed ``evict``, so c04's change is decided by measured links and c05's, whose
functions the map has not measured under their new names, by static links only."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.auditor.test_replay_map import TOP_K, _build, add_to_map


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("history-map-html")
    names = _build(out)
    return {"repo": str(out / "repo"), "names": names, "out": out,
            "range": f"{names['c03']}..{names['c05']}"}


def _replay(run_cli: Any, h: dict[str, Any], dest: Path, *extra: str) -> dict[str, Any]:
    r = run_cli("--root", h["repo"], "replay", h["range"], "-o", str(dest), "--format",
                "json", *extra)
    assert r.code == 0, r.err
    doc: dict[str, Any] = json.loads(dest.read_text())
    return doc


def _page(run_cli: Any, h: dict[str, Any], replay: Path, site: Path) -> str:
    r = run_cli("--root", h["repo"], "report", "--html", str(site), "--replay", str(replay))
    assert r.code == 0, r.err
    return (site / "history.html").read_text()


@pytest.fixture
def with_map(history: dict[str, Any], tmp_path: Path, run_cli: Any,
             monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path / "cache"))
    m = tmp_path / "map.sqlite"
    add_to_map(m, history, {TOP_K: ["evict"]})
    doc = _replay(run_cli, history, tmp_path / "replay.json", "--map", str(m))
    return {"doc": doc, "map": m, "json": tmp_path / "replay.json",
            "html": _page(run_cli, history, tmp_path / "replay.json", tmp_path / "site"),
            "site": tmp_path / "site"}


def _rows(html: str) -> dict[str, tuple[int, int, int]]:
    body = html.split('id="map-commits"', 1)[1].split("</tbody>", 1)[0]
    return {sha: (int(n), int(m), int(s)) for sha, n, m, s in re.findall(
        r'<tr data-sha="(\w+)"[^>]*><td>.*?</td><td class="num">(\d+)</td>'
        r'<td class="num">(\d+)</td><td class="num">(\d+)</td></tr>', body)}


def test_history_page_counts_measured_and_static_per_commit_and_in_total(
        history: dict[str, Any], with_map: dict[str, Any]) -> None:
    doc, html = with_map["doc"], with_map["html"]
    c04, c05 = history["names"]["c04"][:10], history["names"]["c05"][:10]
    rows = _rows(html)
    assert set(rows) == {c04, c05}
    # c04: evict, decided by the map (test_top_k executed it); c05's changes: static only
    by_sha = {c["sha"][:10]: c for c in doc["commits"]}
    assert [b["tier"] for b in by_sha[c04]["behaviours"] if b["function"] == "evict"] == [
        "coverage"]
    n04, m04, s04 = rows[c04]
    assert m04 >= 1 and n04 == len(by_sha[c04]["behaviours"])
    n05, m05, s05 = rows[c05]
    assert m05 == 0 and s05 >= 1 and n05 == len(by_sha[c05]["behaviours"])
    # the totals are the replay's own map part, and the rows add up to them
    assert (m04 + m05, s04 + s05) == (doc["map"]["measured"], doc["map"]["static_only"])
    assert (f'<b id="map-measured">{doc["map"]["measured"]} decided by measured links</b>'
            in html)
    assert f'<b id="map-static">{doc["map"]["static_only"]} by static links only</b>' in html
    assert "in 1 of 2 commits with behaviour changes" in html
    assert str(with_map["map"]) in html


def test_without_a_map_the_page_shows_no_map_counts(history: dict[str, Any], tmp_path: Path,
                                                   run_cli: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """TRAP: a replay that read no map must not show "0 decided by measured links" (which
    would say the map knew nothing) nor any count: every verdict there is static."""
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path / "cache"))
    doc = _replay(run_cli, history, tmp_path / "replay.json")
    assert "map" not in doc
    html = _page(run_cli, history, tmp_path / "replay.json", tmp_path / "site")
    assert 'id="measured"' not in html and "measured links" not in html
    assert 'id="share"' in html  # the page itself is there


@pytest.mark.parametrize("bad", [{"path": "m.sqlite", "measured": "1", "static_only": 0},
                                 {"measured": 1, "static_only": 0}, ["m.sqlite"]])
def test_a_bad_map_part_is_exit_2(history: dict[str, Any], with_map: dict[str, Any],
                                  tmp_path: Path, run_cli: Any, bad: Any) -> None:
    doc = dict(with_map["doc"], map=bad)
    p = tmp_path / "bad-replay.json"
    p.write_text(json.dumps(doc))
    r = run_cli("--root", history["repo"], "report", "--html", str(tmp_path / "s2"),
                "--replay", str(p))
    assert r.code == 2 and f"{p}: map: expected path, measured and static_only" in r.err


@pytest.mark.browser
def test_map_counts_in_chromium(browser: Any, history: dict[str, Any],
                                with_map: dict[str, Any]) -> None:
    page = browser.new_page(viewport={"width": 1000, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: errors.append(r.url))
    page.goto((with_map["site"] / "history.html").as_uri())
    section = page.locator("#measured")
    assert section.is_visible()
    box = section.bounding_box()
    assert box and box["width"] > 400 and box["height"] > 80
    assert page.locator("#map-commits tbody tr").count() == 2
    c04 = history["names"]["c04"][:10]
    cells = page.locator(f"#map-commits tr[data-sha='{c04}'] td.num").all_inner_texts()
    assert int(cells[1]) >= 1  # decided by measured links
    foot = page.locator("#map-commits tfoot th.num").all_inner_texts()
    m = with_map["doc"]["map"]
    assert foot[1:] == [str(m["measured"]), str(m["static_only"])]
    assert page.locator("#map-measured").inner_text().startswith(str(m["measured"]))
    assert errors == []
    page.close()
