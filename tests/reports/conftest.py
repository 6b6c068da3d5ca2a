"""Browser fixtures of the HTML report tests: a real headless Chromium (Debian's, never
Playwright's own download), the reports served on 127.0.0.1, and a page that records errors.

Screenshots land in artifacts/ (gitignored) for a person to look at; with
TESTDB_DOC_SCREENSHOTS=1 the ones docs/reports.md shows are refreshed in docs/img/.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from reports.html import generate
from testdb.index import load
from tests.conftest import unavailable

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "data" / "trtllm"
EXAMPLE = REPO / "examples" / "flashinfer-reuse"
FIXTURE = Path(__file__).parent / "fixtures" / "flashinfer-audit.json"
ARTIFACTS = REPO / "artifacts"
DOC_IMG = REPO / "docs" / "img"
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


@pytest.fixture(scope="session")
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


@pytest.fixture(scope="session")
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

    def shot(self, name: str, selector: str | None = None, doc: bool = False) -> None:
        """A screenshot (of the element at ``selector``, or the viewport) into artifacts/; one
        that docs/reports.md shows (``doc``) also into docs/img/ when TESTDB_DOC_SCREENSHOTS
        is set."""
        wanted = doc and os.environ.get("TESTDB_DOC_SCREENSHOTS")
        dirs = [ARTIFACTS] + ([DOC_IMG] if wanted else [])
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
            if selector:  # a viewport as tall as the element: sticky headers stay on top
                size = self.page.viewport_size
                el = self.page.locator(selector)
                box = el.bounding_box() or {"height": 0}
                self.page.set_viewport_size({"width": size["width"],
                                             "height": max(size["height"],
                                                           int(box["height"]) + 40)})
                el.screenshot(path=str(d / name))
                self.page.set_viewport_size(size)
            else:
                self.page.screenshot(path=str(d / name), full_page=False)


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    p = Page(browser)
    yield p
    p.page.close()
    assert p.errors == [], "the page reported errors"
