"""Tests of the HTML report's view model and generated files (no browser needed)."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import Counter
from collections.abc import Callable
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from auditor.promote import _unsplit
from reports import charts, html, html_audit
from reports.html import REPORT_SCHEMA, build_view, generate, split_test_id
from testdb.errors import UsageError
from testdb.index import load
from testdb.schedule import VERDICTS, verdict_for
from testdb.stats import compute_stats

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "data" / "trtllm"
EXAMPLE = REPO / "examples" / "flashinfer-reuse"
FIXTURE = Path(__file__).parent / "fixtures" / "flashinfer-audit.json"
ASSET_URL = re.compile(r"""(?:\b(?:src|href)\s*=\s*["']?|url\(\s*["']?|@import\s+["'])"""
                       r"""(?:https?:)?//""", re.I)


def read_js(path: Path, prefix: str) -> Any:
    text = path.read_text(encoding="utf-8")
    assert text.startswith(prefix + "(") and text.endswith(");\n"), path
    return json.loads(text[len(prefix) + 1:-3])


@pytest.fixture(scope="module")
def corpus_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "trtllm"
    generate(load(str(CORPUS), use_cache=False), str(out))
    return out


@pytest.mark.parametrize(("test_id", "parts"), [
    ("accuracy/t.py::TestA::test_b[x=1-y=[2]]", ("accuracy/t.py", "TestA::test_b", "[x=1-y=[2]]")),
    ("test_e2e.py::test_x", ("test_e2e.py", "test_x", "")),
    ('unittest/_torch/speculative -k "eagle3"',
     ("unittest/_torch/speculative", html.UNIT_FUNCTION, '-k "eagle3"')),
    ("unittest/api_stability", ("unittest/api_stability", html.UNIT_FUNCTION, "")),
])
def test_split_test_id(test_id: str, parts: tuple[str, str, str]) -> None:
    assert split_test_id(test_id) == parts


def test_corpus_data_is_json_and_counts_add_up(corpus_report: Path) -> None:
    data = read_js(corpus_report / "data.js", "TESTDB_DATA")
    assert data["schema"] == REPORT_SCHEMA
    stats = compute_stats(load(str(CORPUS)))
    n = len(data["verdicts"])
    by_verdict = Counter({v: sum(r[3 + i] for r in data["functions"])
                          for i, v in enumerate(data["verdicts"])})
    assert sum(by_verdict.values()) == stats["test_ids"]
    assert {v: c for v, c in by_verdict.items() if c} == stats["verdicts"]
    assert len(data["stages"]) == stats["stages"]
    assert all(len(r) == 3 + n for r in data["functions"])
    assert len(data["file_rows"]) == len(data["files"])


def test_corpus_detail_files_match_the_index(corpus_report: Path) -> None:
    data = read_js(corpus_report / "data.js", "TESTDB_DATA")
    details = sorted((corpus_report / "detail").iterdir())
    assert len(details) == len(data["files"])
    params = 0
    for path in details:
        d = read_js(path, "TESTDB_DETAIL")
        assert data["files"][d["file"]] == d["name"]
        for fn in d["functions"]:
            params += len(fn["params"])
            for p in fn["params"]:
                assert {int(k) for k in p["cells"]} <= set(fn["stages"])
                for cells in p["cells"].values():
                    for c in cells:
                        assert 0 <= c[0] < len(d["paths"]) and c[1] > 0
    assert params == sum(sum(r[3:]) for r in data["functions"])


def test_no_remote_assets_and_local_links_resolve(corpus_report: Path) -> None:
    files = [p for p in corpus_report.rglob("*") if p.is_file()]
    assert {p.name for p in (corpus_report / "static").iterdir()} >= {"report.css", "report.js"}
    for p in files:
        if p.suffix in (".html", ".css", ".js"):
            text = p.read_text(encoding="utf-8")
            assert not ASSET_URL.search(text), f"{p} loads a remote asset"
            assert "http://" not in text and "https://" not in text, p
    for page in ("index.html", "function.html"):
        text = (corpus_report / page).read_text(encoding="utf-8")
        for ref in re.findall(r"""(?:src|href)="([^"#]+)""", text):
            if not ref.startswith("data:"):
                assert (corpus_report / unquote(ref)).is_file(), f"{page}: {ref} is missing"


def test_corpus_index_page_stays_small(corpus_report: Path) -> None:
    # The test rows live in data.js and are drawn page by page; the HTML holds no table rows of
    # them. It does hold the pictures (369 file bars, 100 stage cards) and the lint rows, so
    # that they read with JS off: about 0.5 MB on the corpus.
    index = (corpus_report / "index.html").read_text(encoding="utf-8")
    assert len(index) < 700_000
    assert 'id="tests-table"' in index and index.count("<tr") < 600


def test_audit_findings_first_and_guards_link_to_their_rows(tmp_path: Path) -> None:
    out = tmp_path / "fi"
    audit = json.loads(FIXTURE.read_text(encoding="utf-8"))
    generate(load(str(EXAMPLE)), str(out), audit)
    index = (out / "index.html").read_text(encoding="utf-8")
    assert index.index('id="audit"') < index.index('id="tests"')
    assert index.index('class="finding sev-error"') < index.index('class="finding sev-warning"')
    links = re.findall(r'class="guard" href="function\.html#f=(\d+)&amp;n=(\d+)&amp;p=([^"]*)"',
                       index)
    assert links, "every finding links its guards"
    for f, n, p in links:
        d = read_js(out / "detail" / f"f{f}.js", "TESTDB_DETAIL")
        assert unquote(p) in {x["params"] for x in d["functions"][int(n)]["params"]}
    assert '/bot run --extra-stage "DGX_H100-PyTorch-Post-Merge-1"' in unescape(index)


def test_results_reach_the_data(tmp_path: Path) -> None:
    audit = json.loads(FIXTURE.read_text(encoding="utf-8"))
    guard = audit["findings"][0]["guards"][2]
    results = [{"key": "k", "test_id": guard, "outcome": "failed", "backend": "local"}]
    view = build_view(load(str(EXAMPLE)), audit, results)
    assert view.data["results"] == {guard: "failed"}
    assert view.page["results"]["rows"][0]["href"].startswith("function.html#f=")


def test_write_is_atomic_and_refuses_foreign_directories(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    index = load(str(EXAMPLE))
    out = tmp_path / "report"
    generate(index, str(out))
    first = (out / "data.js").read_text(encoding="utf-8")
    generate(index, str(out))  # replacing an earlier report is fine
    assert (out / "data.js").read_text(encoding="utf-8") == first

    def boom(view: Any) -> dict[str, str]:
        raise RuntimeError("disk full")

    monkeypatch.setattr(html, "render_files", boom)
    with pytest.raises(RuntimeError):
        generate(index, str(out))
    assert (out / "data.js").read_text(encoding="utf-8") == first, "old report intact"
    assert sorted(os.listdir(tmp_path)) == ["report"], "no temp directories left behind"
    monkeypatch.undo()

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(UsageError, match="not a testdb report"):
        generate(index, str(foreign))
    assert (foreign / "notes.txt").read_text(encoding="utf-8") == "keep me"


RunCli = Callable[..., Any]


def test_cli_report(run_cli: RunCli, tmp_path: Path) -> None:
    out = tmp_path / "r"
    res = run_cli("--root", str(EXAMPLE), "report", "--html", str(out), "--audit", str(FIXTURE),
                  "--format", "json")
    assert res.code == 0, res.err
    info = json.loads(res.out)
    assert info["schema"] == REPORT_SCHEMA and info["test_ids"] > 0
    assert (out / "index.html").is_file()


def test_cli_report_errors(run_cli: RunCli, tmp_path: Path) -> None:
    res = run_cli("--root", str(EXAMPLE), "report")
    assert res.code == 2 and "--html" in res.err
    bad = tmp_path / "a.json"
    bad.write_text('{"schema": "nope"}', encoding="utf-8")
    res = run_cli("--root", str(EXAMPLE), "report", "--html", str(tmp_path / "r"),
                  "--audit", str(bad))
    assert res.code == 2 and res.err.startswith(f"error: {bad}: not an audit file")
    assert not (tmp_path / "r").exists()


def test_stage_cards_are_the_schedules_shards_against_the_budget() -> None:
    index = load(str(CORPUS))
    groups: dict[str, list[Any]] = {}
    for ss in index.schedule.stages.values():
        groups.setdefault(_unsplit(ss.stage.name, ss.stage.split_id), []).append(ss)
    for budget in (120.0, 30.0):
        cards = {c["name"]: c for c in build_view(index, budget_minutes=budget).page[
            "stage_charts"]}
        assert set(cards) == set(groups)
        for name, shards in groups.items():
            c = cards[name]
            shards.sort(key=lambda s: s.stage.split_id)
            assert [b.value for b in c["bars"]] == [round(s.duration_s / 60, 1) for s in shards]
            assert c["budgeted"] == (not shards[0].stage.is_post_merge)
            assert c["over"] == (c["budgeted"] and max(s.duration_s for s in shards) > budget * 60)
            if c["budgeted"]:  # the line sits at the budget on the bars' own scale
                # one scale per card: its top is 12 % above the larger of budget and shards
                plot = c["base_y"] - 14.0
                top_s = 1.12 * max(budget * 60, *(s.duration_s for s in shards))
                assert c["base_y"] - c["budget_y"] == pytest.approx(plot * budget * 60 / top_s,
                                                                    abs=0.01)
                for b, s in zip(c["bars"], shards, strict=True):
                    if b.h > 1:  # (coordinates are rounded to 0.01 px)
                        assert b.h == pytest.approx(plot * s.duration_s / top_s, abs=0.01)
        over = sum(c["over"] for c in cards.values())
        assert over > 0
    assert over > sum(c["over"] for c in build_view(index).page["stage_charts"]), \
        "a smaller budget puts more groups over it"


def test_file_chart_counts_every_listed_id_once() -> None:
    index = load(str(CORPUS))
    chart = build_view(index).page["file_chart"]
    rows = chart["open"]["rows"] + chart["folded"]["rows"]
    expected: dict[str, Counter[str]] = {}
    for tid, pl in index.schedule.placements.items():
        expected.setdefault(split_test_id(tid)[0], Counter())[verdict_for(list(pl))] += 1
    assert len(chart["open"]["rows"]) == charts.FILES_SHOWN
    assert {r["file"]: {s.cls[2:]: s.value for s in r["segments"]} for r in rows} == \
        {f: dict(c) for f, c in expected.items()}
    for r in rows:
        assert sum(s.w for s in r["segments"]) == pytest.approx(chart["bar_w"], abs=0.5)


def test_guards_chart_keeps_a_verdict_word_it_does_not_know() -> None:
    rows: list[dict[str, Any]] = [{"function": "f", "verdict": "gated", "guards": [
        {"verdict": "gated"}, {"verdict": "gated"}, {"verdict": "from-the-future"}]},
        {"function": "g", "verdict": "unguarded", "guards": []}]
    chart = charts.guards_chart(rows, VERDICTS)
    f, g = chart["rows"]
    assert [(s.cls, s.value) for s in f["segments"]] == [("f-gated", 2),
                                                         ("f-from-the-future", 1)]
    assert f["segments"][0].w == pytest.approx(2 * f["segments"][1].w)
    assert g["total"] == 0 and g["segments"] == []


def test_cli_report_budget(run_cli: RunCli, tmp_path: Path) -> None:
    res = run_cli("--root", str(CORPUS), "report", "--html", str(tmp_path / "r"),
                  "--budget-minutes", "30")
    assert res.code == 0, res.err
    index = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    assert "the 30 min pre-merge budget" in index
    res = run_cli("--root", str(CORPUS), "report", "--html", str(tmp_path / "r"),
                  "--budget-minutes", "0")
    assert res.code == 2


BF16 = "accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_bfloat16"
STALE = f"{BF16}[attn_backend=TRTLLM-torch_compile=Maybe]"  # a pre-merge line, no such test


def stale_checkout(tmp_path: Path) -> Path:
    """The example with one more pre-merge line whose id names no test of its sources."""
    root = tmp_path / "checkout"
    shutil.copytree(EXAMPLE, root)
    lst = root / "tests/integration/test_lists/test-db/l0_h100.yml"
    text = lst.read_text(encoding="utf-8")
    anchor = f"  - {BF16}[attn_backend=TRTLLM-torch_compile=True]\n"
    assert anchor in text
    lst.write_text(text.replace(anchor, anchor + f"  - {STALE}\n"), encoding="utf-8")
    return root


def test_a_listed_id_that_names_no_test_is_invalid_not_pre_merge(tmp_path: Path) -> None:
    root = stale_checkout(tmp_path)
    index = load(str(root), use_cache=False)
    assert index.schedule.verdict(STALE) == "pre-merge", "the trap: its line runs pre-merge"
    out = tmp_path / "r"
    generate(index, str(out))
    data = read_js(out / "data.js", "TESTDB_DATA")
    assert "invalid" in data["verdicts"]
    col = 3 + data["verdicts"].index("invalid")
    fn = next(r for r in data["functions"] if r[1] == "TestLlama3_1_8BInstruct::test_bfloat16")
    assert fn[col] == 1 and sum(r[col] for r in data["functions"]) == 1
    d = read_js(out / "detail" / f"f{fn[0]}.js", "TESTDB_DETAIL")
    p = next(p for f in d["functions"] for p in f["params"] if p["id"] == STALE)
    assert p["verdict"] == "invalid" and p["cells"] == {}, "no stage runs it"
    assert p["lines"], "the line that names it stays, to be fixed"
    assert p["nearest"] and all(n.startswith(BF16 + "[") for n in p["nearest"])
    index_html = (out / "index.html").read_text(encoding="utf-8")
    assert 'data-verdict="invalid"><b>1</b> invalid' in index_html.replace(
        ' title="names no test in this checkout; CI ignores it"', "")
    assert "listed ids checked against the checkout" in index_html
    # without sources (the bundled corpus) ids are not checked: no "invalid 0" tile or legend
    # entry (it would read as a check that found nothing), and the page says why
    view = build_view(load(str(CORPUS)))
    assert "invalid" not in {t["verdict"] for t in view.page["totals"]}
    assert "invalid" not in {t["verdict"] for t in view.page["legend"]}
    assert sum(t["count"] for t in view.page["totals"]) == view.page["total"]
    assert "not checked against sources" in view.page["names"]


def test_a_weak_link_is_never_drawn_as_a_pre_merge_guard(tmp_path: Path) -> None:
    """A behaviour decided by a level that cannot guard (only imports, only a shared value)
    is unguarded even where its links run pre-merge: the chart and the table show those links
    as weak links, not in the pre-merge green."""
    audit = json.loads(FIXTURE.read_text(encoding="utf-8"))
    [b] = audit["behaviours"]
    b["tier"], b["verdict"] = "declared", "unguarded"
    b["decided_by"] = {"tier": "declared", "rank": 1, "title": "x", "guards": 2,
                       "can_guard": False}
    for tier, gs in b["guards"].items():  # the declared level decides now
        for g in gs:
            g["decides"] = tier == "declared"
    view = html_audit.audit_view(audit, {})
    [row] = view["chart"]["rows"]
    assert {s.cls: s.value for s in row["segments"]} == {"f-weak-link": 1, "f-gated": 1}
    assert [g["verdict"] for g in view["behaviours"][0]["guards"]] == ["gated", "weak-link"]
    assert view["weak_links"]
    generate(load(str(EXAMPLE)), str(tmp_path / "r"), audit)
    index = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    at = index.index('id="guards-chart"')
    guards = index[at:index.index("</svg>", at)]
    assert "f-weak-link" in guards and "f-pre-merge" not in guards
    assert "its evidence cannot guard" in index
    # the same audit where the level can guard draws its pre-merge guard as one
    b["decided_by"]["can_guard"] = True
    [row] = html_audit.audit_view(audit, {})["chart"]["rows"]
    assert {s.cls: s.value for s in row["segments"]} == {"f-pre-merge": 1, "f-gated": 1}
