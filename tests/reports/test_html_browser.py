"""The HTML report in a real headless Chromium: no console errors, filter, toggle, sort, paging,
the function matrix; served over http://127.0.0.1 and opened from file://.

Needs Debian's chromium (/usr/bin/chromium, or TESTDB_CHROMIUM) and the playwright package;
`.ci/install-browser.sh` installs both. Playwright's own browser downloads are never used.
The fixtures (browser, site, page) are in conftest.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.reports.conftest import Page

pytestmark = pytest.mark.browser


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


def test_counts_agree_with_their_nouns(site: tuple[Path, str], page: Page) -> None:
    """A function of one parametrization says "1 parametrization", not "1 parametrizations"
    (QA 12e); one of several keeps the plural."""
    root, base = site
    data = json.loads((root / "trtllm" / "data.js").read_text(encoding="utf-8")
                      [len("TESTDB_DATA("):-3])
    totals = {(f[0], f[2]): sum(f[3:]) for f in data["functions"]}
    one = next(k for k, n in totals.items() if n == 1)
    many = next(k for k, n in totals.items() if n > 1)
    pg = page.open(f"{base}/trtllm/function.html#f={one[0]}&n={one[1]}")
    pg.wait_for_selector("body[data-page='function'][data-ready='1']")
    head = pg.inner_text("#fn-file")
    assert "· 1 parametrization ·" in head, head
    assert pg.inner_text("#fn-status") == "1 row"
    stages = len(pg.eval_on_selector_all("#matrix thead th.st", "hs => hs")) - 1  # less QA lists
    assert head.endswith(f"{stages} stage" + ("s" if stages != 1 else ""))
    pg = page.open(f"{base}/trtllm/function.html#f={many[0]}&n={many[1]}")
    pg.wait_for_selector("body[data-page='function'][data-ready='1']")
    assert f"· {totals[many]} parametrizations ·" in pg.inner_text("#fn-file")
    assert pg.inner_text("#fn-status") == f"{totals[many]} rows"
