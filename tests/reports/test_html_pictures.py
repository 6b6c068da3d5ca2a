"""The report's pictures in a real headless Chromium: shard minutes per stage group with the
budget line, verdicts per test file, guards per behaviour change; the lint pages; a pasted
test id with [params] finds its row and opens the parametrization. Expected numbers are
computed here from the index and the audit, never copied from the report.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pytest

from auditor.promote import DEFAULT_BUDGET_MINUTES, _unsplit
from reports.html import split_test_id
from reports.html_audit import shown_verdict
from testdb.index import load
from testdb.schedule import VERDICTS, verdict_for

if TYPE_CHECKING:
    from tests.reports.conftest import Page

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "data" / "trtllm"
FIXTURE = Path(__file__).parent / "fixtures" / "flashinfer-audit.json"
CHROMIUM_ID = ("accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_chunked_prefill"
               "[attn_backend=FLASHINFER]")

BOX = "e => { const b = e.getBoundingClientRect(); return [b.x, b.y, b.width, b.height]; }"


def _boxes(pg: Any, selector: str) -> list[list[float]]:
    return pg.eval_on_selector_all(selector, f"es => es.map({BOX})")


@pytest.fixture(scope="module")
def corpus() -> Any:
    return load(str(CORPUS))


def test_shard_bars_per_stage_group_with_the_budget_line(site: tuple[Path, str], page: Page,
                                                         corpus: Any) -> None:
    _, base = site
    pg = page.open(f"{base}/trtllm/index.html")
    groups: dict[str, list[Any]] = defaultdict(list)
    for ss in corpus.schedule.stages.values():
        groups[_unsplit(ss.stage.name, ss.stage.split_id)].append(ss)
    page.shot("report-shards.png", "#shards", doc=True)
    pg.click("#shards-more summary")  # the post-merge groups are folded
    cards = pg.eval_on_selector_all("figure.stage-card", """fs => fs.map(f => ({
        group: f.dataset.group,
        svg: [f.querySelector('svg').getBoundingClientRect().width,
              f.querySelector('svg').getBoundingClientRect().height],
        bars: [...f.querySelectorAll('rect.bar')].map(r => ({
            value: +r.dataset.value, title: r.querySelector('title').textContent,
            top: r.getBoundingClientRect().y, h: r.getBoundingClientRect().height})),
        budget: f.querySelector('line.budget') ? f.querySelector('line.budget')
            .getBoundingClientRect().y : null}))""")
    assert sorted(c["group"] for c in cards) == sorted(groups)
    budget_s = DEFAULT_BUDGET_MINUTES * 60
    seen_over = seen_under = 0
    for c in cards:
        shards = sorted(groups[c["group"]], key=lambda s: s.stage.split_id)
        assert c["svg"][0] > 0 and c["svg"][1] > 0, c["group"]
        assert len(c["bars"]) == len(shards)
        for bar, ss in zip(c["bars"], shards, strict=True):
            assert bar["value"] == round(ss.duration_s / 60, 1)
            assert bar["title"].startswith(f"{ss.stage.name}: shard {ss.stage.split_id}/")
            assert (f"{ss.duration_s / 60:.1f} min estimated, {len(ss.entries)} tests"
                    in bar["title"])
            assert (bar["h"] > 0) == (ss.duration_s > 0)
        tall = max(c["bars"], key=lambda b: b["value"])
        for bar in c["bars"]:  # heights follow the minutes on one scale per card
            if tall["value"] and bar["value"] > 1:
                assert bar["h"] / tall["h"] == pytest.approx(bar["value"] / tall["value"],
                                                             rel=0.05, abs=0.02)
        runs_pre_merge = not shards[0].stage.is_post_merge
        assert (c["budget"] is not None) == runs_pre_merge, c["group"]
        if c["budget"] is not None:  # a bar past the budget reaches above the line, else below
            for bar, ss in zip(c["bars"], shards, strict=True):
                if ss.duration_s > budget_s * 1.02:
                    assert bar["top"] < c["budget"]
                    seen_over += 1
                elif ss.duration_s < budget_s * 0.98:
                    assert bar["top"] > c["budget"]
                    seen_under += 1
    assert seen_over and seen_under, "the corpus has shards on both sides of the budget"
    over = pg.eval_on_selector_all("figure.stage-card.over", "fs => fs.map(f => f.dataset.group)")
    assert sorted(over) == sorted(g for g, ss in groups.items() if not ss[0].stage.is_post_merge
                                  and max(s.duration_s for s in ss) > budget_s)


def test_verdicts_per_test_file_as_stacked_bars(site: tuple[Path, str], page: Page,
                                               corpus: Any) -> None:
    _, base = site
    pg = page.open(f"{base}/trtllm/index.html")
    expected: dict[str, Counter[str]] = defaultdict(Counter)
    for tid, placements in corpus.schedule.placements.items():
        expected[split_test_id(tid)[0]][verdict_for(list(placements))] += 1
    pg.click("#files-more summary")
    rows = pg.eval_on_selector_all("g.file-row", """gs => gs.map(g => ({
        file: g.dataset.file, total: +g.dataset.total,
        title: g.querySelector('title').textContent,
        label: g.querySelector('text.flabel').textContent,
        segs: [...g.querySelectorAll('rect.seg')].map(r => ({
            cls: r.getAttribute('class'), value: +r.dataset.value,
            w: r.getBoundingClientRect().width, h: r.getBoundingClientRect().height}))}))""")
    assert len(rows) == len(expected)
    totals = [r["total"] for r in rows]
    assert totals == sorted(totals, reverse=True), "the largest files first"
    for r in rows:
        counts = expected[r["file"]]
        assert r["total"] == sum(counts.values())
        assert {s["cls"].split()[1][2:]: s["value"] for s in r["segs"]} == dict(counts)
        order = [s["cls"].split()[1][2:] for s in r["segs"]]
        assert order == [v for v in VERDICTS if v in counts], "segments in verdict order"
        width = sum(s["w"] for s in r["segs"])
        for s in r["segs"]:
            assert s["h"] > 0 and s["w"] > 0
            assert s["w"] / width == pytest.approx(s["value"] / r["total"], abs=0.01)
        assert r["title"].startswith(f"{r['file']}: {r['total']} test ids")
        assert r["file"].endswith(r["label"].lstrip("…"))
    top = pg.locator("#files-chart > svg g.file-row").first
    assert top.get_attribute("data-file") == max(expected, key=lambda f: (
        sum(expected[f].values()), [-ord(c) for c in f]))
    pg.click("#files-more summary")
    page.shot("report-files.png", "#files-chart", doc=True)


def test_guards_by_verdict_on_an_audit(site: tuple[Path, str], page: Page) -> None:
    _, base = site
    audit = json.loads(FIXTURE.read_text(encoding="utf-8"))
    pg = page.open(f"{base}/fi/index.html")
    rows = pg.eval_on_selector_all("#guards-chart g.behaviour-row", """gs => gs.map(g => ({
        fn: g.dataset.function, total: +g.dataset.total,
        segs: [...g.querySelectorAll('rect.seg')].map(r => ({
            cls: r.getAttribute('class').split(' ')[1].slice(2), value: +r.dataset.value,
            title: r.querySelector('title').textContent,
            w: r.getBoundingClientRect().width, h: r.getBoundingClientRect().height})),
        text: g.textContent}))""")
    assert [r["fn"] for r in rows] == [b["function"] for b in audit["behaviours"]]
    for r, b in zip(rows, audit["behaviours"], strict=True):
        guards = b["guards"].get(b["tier"] or "", [])
        counts = Counter(shown_verdict(b, g) for g in guards)  # weak links are not green
        assert r["total"] == len(guards) and {s["cls"]: s["value"] for s in r["segs"]} == counts
        for s in r["segs"]:
            assert s["w"] > 0 and s["h"] > 0
            assert s["title"].startswith(f"{b['function']} guards: {s['value']} {s['cls']}")
        assert f"{len(guards)} guard(s)" in r["text"]
        per_guard = [s["w"] / s["value"] for s in r["segs"]]
        assert max(per_guard) == pytest.approx(min(per_guard), rel=0.02), "one scale"
    page.shot("report-guards.png", "#audit", doc=True)


def test_lint_is_paged_filterable_and_its_rules_do_not_wrap(site: tuple[Path, str],
                                                            page: Page) -> None:
    _, base = site
    pg = page.open(f"{base}/trtllm/index.html")
    pg.locator("#lint").scroll_into_view_if_needed()
    total = int(pg.text_content("#lint h2 small").strip("()"))
    assert total > 100
    assert page.count("#lint-count") == total
    shown = pg.locator("#lint-table tbody tr:not([hidden])")
    assert shown.count() == 25
    page.shot("report-lint.png", "#lint", doc=True)
    section = pg.locator("#lint").bounding_box()
    assert section and section["height"] < 3000, "a page of findings, not 23,000 px"
    rules = [r for r in pg.eval_on_selector_all(
        "#lint-rule option", "os => os.map(o => o.value)") if r]
    for code in pg.query_selector_all("#lint-table tbody tr:not([hidden]) td.rule-id code"):
        assert code.evaluate("c => c.getClientRects().length") == 1, "a rule id on one line"
    rule = max(rules, key=lambda r: pg.locator(f"#lint-table tr[data-rule='{r}']").count())
    n = pg.locator(f"#lint-table tbody tr[data-rule='{rule}']").count()
    pg.select_option("#lint-rule", rule)
    assert page.count("#lint-count") == n
    assert set(pg.eval_on_selector_all("#lint-table tbody tr:not([hidden])",
                                       "rs => rs.map(r => r.dataset.rule)")) == {rule}
    pg.select_option("#lint-rule", "")
    first = pg.inner_text("#lint-table tbody tr:not([hidden]) td.loc")
    pg.click("#lint-pager button:has-text('next')")
    assert "rows 26–50" in pg.inner_text("#lint-pager")
    assert pg.inner_text("#lint-table tbody tr:not([hidden]) td.loc") != first
    word = first.split("/")[-1].split(":")[0]
    pg.fill("#lint-filter", word)
    assert 0 < page.count("#lint-count") < total


def test_pictures_and_lint_without_javascript(site: tuple[Path, str], browser: Any) -> None:
    _, base = site
    ctx = browser.new_context(java_script_enabled=False, viewport={"width": 1400, "height": 900})
    try:
        pg = ctx.new_page()
        pg.goto(f"{base}/trtllm/index.html")
        for sel in ("#files-chart > svg", "#shards figure.stage-card svg"):
            box = pg.locator(sel).first.bounding_box()
            assert box and box["width"] > 100 and box["height"] > 50, sel
        assert pg.locator("#files-chart > svg rect.seg").count() > 25
        total = int(pg.text_content("#lint h2 small").strip("()"))
        assert pg.locator("#lint-table tbody tr:visible").count() == total, "all rows, JS off"
        assert not pg.locator("#lint-controls").is_visible()
        pg.goto(f"{base}/fi/index.html")
        assert pg.locator("#guards-chart rect.seg").count() >= 1
    finally:
        ctx.close()


@pytest.mark.parametrize("pasted", [
    CHROMIUM_ID,
    f"  {CHROMIUM_ID}  ",
    "- " + CHROMIUM_ID + " TIMEOUT (90)",  # a list line as it stands in the YAML
    "tests/integration/defs/" + CHROMIUM_ID,
    CHROMIUM_ID.split("/", 1)[1],  # without the directory
])
def test_a_pasted_id_with_params_finds_its_row_and_opens_it(site: tuple[Path, str], page: Page,
                                                           pasted: str) -> None:
    _, base = site
    pg = page.open(f"{base}/trtllm/index.html")
    pg.fill("#filter", pasted)
    assert page.count() == 1
    assert page.rows()[0][1] == "TestLlama3_1_8BInstruct::test_chunked_prefill"
    jump = pg.locator("#tests-jump")
    assert jump.is_visible() and "[attn_backend=FLASHINFER]" in jump.inner_text()
    assert unquote(jump.get_attribute("href")).endswith("&p=[attn_backend=FLASHINFER]")
    pg.select_option("#group", "file")  # grouped by file the id keeps its file
    assert [r[0] for r in page.rows()] == ["accuracy/test_llm_api_pytorch.py"]
    pg.select_option("#group", "function")
    pg.fill("#filter", pasted)
    pg.press("#filter", "Enter")
    pg.wait_for_selector("body[data-page='function'][data-ready='1']")
    assert pg.inner_text("#matrix tr.hl th") == "[attn_backend=FLASHINFER]"
    assert pg.locator("#fn-missing").is_hidden()


def test_id_without_brackets_and_unit_selection_and_unknown_params(site: tuple[Path, str],
                                                                   page: Page,
                                                                   corpus: Any) -> None:
    _, base = site
    pg = page.open(f"{base}/trtllm/index.html")
    pg.fill("#filter", CHROMIUM_ID.split("[")[0])
    assert page.count() == 1 and pg.locator("#tests-jump").is_hidden()

    unit = sorted(t for t in corpus.schedule.placements
                  if t.startswith("unittest/") and " -k " in t)[0]
    pg.fill("#filter", unit)
    assert page.count() == 1
    assert page.rows()[0][0] == split_test_id(unit)[0]
    pg.press("#filter", "Enter")
    pg.wait_for_selector("body[data-page='function'][data-ready='1']")
    assert pg.inner_text("#matrix tr.hl th") == split_test_id(unit)[2]

    pg.goto(f"{base}/trtllm/index.html")
    pg.wait_for_selector("body[data-ready='1']")
    pg.fill("#filter", CHROMIUM_ID.replace("FLASHINFER", "NOPE"))
    assert page.count() == 1  # the function exists; that parametrization is in no list
    pg.press("#filter", "Enter")
    pg.wait_for_selector("body[data-page='function'][data-ready='1']")
    assert pg.locator("#matrix tr.hl").count() == 0
    assert "[attn_backend=NOPE]" in pg.inner_text("#fn-missing")
    page.shot("report-missing-params.png")


def test_invalid_ids_have_their_tile_colour_legend_and_note(page: Page, tmp_path: Path) -> None:
    from reports.html import generate
    from tests.reports.test_html import STALE, stale_checkout

    out = tmp_path / "r"
    generate(load(str(stale_checkout(tmp_path))), str(out))
    pg = page.open((out / "index.html").as_uri())
    tile = pg.locator("#totals .total[data-verdict='invalid']")
    assert tile.inner_text().split()[:2] == ["1", "invalid"]
    assert tile.get_attribute("title") == "names no test in this checkout; CI ignores it"
    colours = pg.eval_on_selector_all(
        "#totals .total[data-verdict]",
        "ts => ts.map(t => [t.dataset.verdict, getComputedStyle(t).backgroundColor])")
    mine = dict(colours)["invalid"]
    assert all(c != mine for v, c in colours if v != "invalid"), "a colour of its own"
    legend = pg.eval_on_selector_all("#files-chart dl.legend dt", "ds => ds.map(d => d.innerText)")
    assert legend == list(VERDICTS)
    seg = pg.locator("#files-chart rect.f-invalid")
    assert seg.count() == 1 and seg.get_attribute("data-value") == "1"
    fill = seg.evaluate("r => getComputedStyle(r).fill")
    assert fill not in {pg.locator(f"#files-chart rect.f-{v}").first.evaluate(
        "r => getComputedStyle(r).fill") for v in ("pre-merge", "qa-only")
        if pg.locator(f"#files-chart rect.f-{v}").count()}
    pg.fill("#filter", STALE)
    pg.press("#filter", "Enter")
    pg.wait_for_selector("body[data-page='function'][data-ready='1']")
    row = pg.locator("#matrix tr.hl")
    assert row.locator(".v-invalid").inner_text() == "invalid"
    assert row.locator("td.c").count() == 0, "no stage runs it"
    note = pg.inner_text("#fn-lines .invalid-note")
    assert "CI ignores it" in note and "nearest:" in note
    page.shot("report-invalid.png", doc=True)
