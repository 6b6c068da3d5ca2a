"""The HTML report in a real headless Chromium: no console errors, filter, toggle, sort, paging,
the function matrix; served over http://127.0.0.1 and opened from file://.

Needs Debian's chromium (/usr/bin/chromium, or TESTDB_CHROMIUM) and the playwright package;
`.ci/install-browser.sh` installs both. Playwright's own browser downloads are never used.
Screenshots land in artifacts/ (gitignored) for a person to look at.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from reports.html import generate
from testdb.index import load
from tests.conftest import unavailable

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "data" / "trtllm"
EXAMPLE = REPO / "examples" / "flashinfer-reuse"
FIXTURE = Path(__file__).parent / "fixtures" / "flashinfer-audit.json"
ARTIFACTS = REPO / "artifacts"
CHROMIUM = os.environ.get("TESTDB_CHROMIUM", "/usr/bin/chromium")


def _playwright() -> Any:
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        unavailable(f"no Chromium at {CHROMIUM}: run .ci/install-browser.sh "
                    "(apt-get install chromium)", "TESTDB_REQUIRE_BROWSER")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("the playwright package is missing: run .ci/install-browser.sh "
                    "(pip install playwright)", "TESTDB_REQUIRE_BROWSER")
    return sync_playwright


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def site(browser: Any, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[Path, str]]:
    """Both reports under one root, served on 127.0.0.1 (root path, base URL); asks for the
    browser first so that a missing Chromium skips before any report is built."""
    root = tmp_path_factory.mktemp("site")
    generate(load(str(CORPUS)), str(root / "trtllm"))
    audit = json.loads(FIXTURE.read_text(encoding="utf-8"))
    guard = audit["findings"][0]["guards"][0]
    results = [{"key": "k1", "test_id": guard, "outcome": "passed", "backend": "local"}]
    generate(load(str(EXAMPLE)), str(root / "fi"), audit, results)
    handler = functools.partial(_Quiet, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_playwright = _playwright()
    with sync_playwright() as pw:
        # --no-sandbox: CI containers run as root, where Chromium's sandbox cannot start.
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


class Page:
    """A page that records console errors, page errors and failed requests."""

    def __init__(self, browser: Any) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console: {m.text}")
                     if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("requestfailed", lambda r: self.errors.append(f"request failed: {r.url}"))

    def open(self, url: str) -> Any:
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready='1']", timeout=15_000)
        return self.page

    def count(self, selector: str = "#tests-count") -> int:
        return int(self.page.get_attribute(selector, "data-count"))

    def rows(self, table: str = "#tests-table") -> list[list[str]]:
        return self.page.eval_on_selector_all(
            f"{table} tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.innerText))")

    def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / name), full_page=False)


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    p = Page(browser)
    yield p
    p.page.close()
    assert p.errors == [], "the page reported errors"


def test_corpus_index_filter_toggle_sort_and_paging(site: tuple[Path, str], page: Page) -> None:
    root, base = site
    pg = page.open(f"{base}/trtllm/index.html")
    total = page.count()
    assert total > 1000
    assert len(page.rows()) == 100, "rows are drawn one page at a time"
    assert page.count("#stages-count") == 183
    page.shot("report-index.png")

    pg.fill("#filter", "test_chunked_prefill")
    filtered = page.count()
    assert 0 < filtered < total
    assert all("test_chunked_prefill" in r[1] for r in page.rows())

    pg.fill("#filter", "")
    assert page.count() == total
    pg.check("#not-premerge")
    not_pre = page.count()
    assert 0 < not_pre < total
    for r in page.rows():  # a row is shown only when some parametrization is not pre-merge
        total_cell, pre = int(r[-1]), int(r[2] or 0)
        assert total_cell > pre
    pg.uncheck("#not-premerge")
    assert page.count() == total

    pg.click("#tests-table th[data-key='total']")
    totals = [int(r[-1]) for r in page.rows()]
    assert totals == sorted(totals, reverse=True) and totals[0] > totals[-1]
    assert pg.get_attribute("#tests-table th[data-key='total']", "aria-sort") == "descending"
    pg.click("#tests-table th[data-key='total']")
    totals = [int(r[-1]) for r in page.rows()]
    assert totals == sorted(totals)
    pg.click("#tests-table th[data-key='function']")
    names = [r[1] for r in page.rows()]
    assert names == sorted(names)

    first = page.rows()[0]
    pg.click("#tests-pager button:has-text('next')")
    assert page.rows()[0] != first
    assert "rows 101–200" in pg.inner_text("#tests-pager")

    pg.select_option("#group", "file")
    data = (root / "trtllm" / "data.js").read_text(encoding="utf-8")
    assert page.count() == len(json.loads(data[len("TESTDB_DATA("):-3])["files"])
    assert pg.inner_text("#tests-table thead").split()[:2] == ["file", "functions"]

    pg.click("#stages-table th[data-key='duration']")
    durations = pg.eval_on_selector_all("#stages-table tbody tr td:nth-child(6)",
                                        "cs => cs.map(c => c.innerText)")
    assert durations and all(d for d in durations)


def test_corpus_function_matrix(site: tuple[Path, str], page: Page) -> None:
    _, base = site
    pg = page.open(f"{base}/trtllm/index.html")
    pg.fill("#filter", "TestLlama3_1_8BInstruct test_chunked_prefill")
    pg.click("#tests-table tbody tr:first-child td:nth-child(2) a")
    pg.wait_for_selector("body[data-page='function'][data-ready='1']")
    assert pg.inner_text("#fn-title") == "TestLlama3_1_8BInstruct::test_chunked_prefill"
    params = pg.eval_on_selector_all("#matrix tbody th", "hs => hs.map(h => h.innerText)")
    assert "[attn_backend=FLASHINFER]" in params and "[attn_backend=TRTLLM]" in params
    stages = pg.eval_on_selector_all("#matrix thead th.st", "hs => hs.map(h => h.innerText)")
    assert "DGX_H100-PyTorch-Post-Merge-1" in stages
    post = pg.eval_on_selector_all("#matrix td.v-post-merge-only", "cs => cs.map(c => c.innerText)")
    assert any("l0_h100.yml:" in c for c in post), "cells carry file:line"
    assert pg.locator("#fn-lines li").count() > 0
    page.shot("report-function.png")


def test_audit_report_links_guards_to_their_rows(site: tuple[Path, str], page: Page) -> None:
    _, base = site
    pg = page.open(f"{base}/fi/index.html")
    assert pg.locator("#audit .finding").count() == 2
    assert "no pre-merge guard" in pg.inner_text("#audit h2")
    page.shot("report-audit.png")
    link = pg.locator("#audit a.guard", has_text="test_chunked_prefill[attn_backend=FLASHINFER]")
    link.first.click()
    pg.wait_for_selector("body[data-page='function'][data-ready='1']")
    assert pg.inner_text("#matrix tr.hl th") == "[attn_backend=FLASHINFER]"
    assert pg.locator("#matrix td.v-gated").count() >= 1


def test_launch_outcome_shows_in_the_matrix(site: tuple[Path, str], page: Page) -> None:
    _, base = site
    pg = page.open(f"{base}/fi/index.html")
    assert "1 passed" in pg.inner_text("#results h2")
    pg.locator("#results a").first.click()
    pg.wait_for_selector("body[data-page='function'][data-ready='1']")
    assert pg.locator("#matrix .o-passed").count() == 1


def test_works_from_file_urls(site: tuple[Path, str], page: Page) -> None:
    root, _ = site
    pg = page.open((root / "trtllm" / "index.html").as_uri())
    assert page.count() > 1000
    pg.click("#tests-table tbody tr:first-child td:nth-child(2) a")
    pg.wait_for_selector("body[data-page='function'][data-ready='1']")
    assert pg.locator("#matrix tbody tr").count() >= 1


def test_report_dir_can_move(site: tuple[Path, str], page: Page,
                             tmp_path: Path) -> None:
    root, _ = site
    moved = tmp_path / "elsewhere"
    shutil.copytree(root / "fi", moved)
    pg = page.open((moved / "index.html").as_uri())
    assert pg.locator("#audit .finding").count() == 2
