"""The HTML report's picture of the map's reach per test file: shares of the project's
functions executed by a file's pre-merge tests, and only by its other tests."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from auditor.covmap.fingerprint import units
from auditor.covmap.store import FuncRef, MapStore
from auditor.measured import reach
from reports.charts import reach_chart
from tests.covmap.test_map_real import FI, checkout, run_pytest

SRC = "def a():\n    return 1\n\n\ndef b():\n    return 2\n\n\ndef c():\n    return 3\n"


def test_reach_splits_pre_merge_from_post_merge_only(tmp_path: Path) -> None:
    r = {u.qualname: FuncRef("pkg/m.py", u.qualname, u.kind, u.fp) for u in units(SRC)}
    p = str(tmp_path / "m.sqlite")
    with MapStore.create(p) as s:
        s.add("c1", 100, {"x.py::pre": {r["a"]}, "x.py::post": {r["a"], r["b"]},
                          "y.py::post": {r["c"]}, "z.py::pre": set()}, r.values())
    verdict = {"x.py::pre": "pre-merge", "z.py::pre": "pre-merge"}
    rows = {x.test_file: x for x in reach(p, lambda t: verdict.get(t, "post-merge-only"))}
    # a executed pre-merge; b only post-merge (a is not counted twice); c only post-merge
    assert (rows["x.py"].pre_merge, rows["x.py"].post_merge_only, rows["x.py"].total) == (1, 1, 3)
    assert (rows["y.py"].pre_merge, rows["y.py"].post_merge_only) == (0, 1)
    # TRAP: a pre-merge test that executed nothing reaches nothing
    assert (rows["z.py"].pre_merge, rows["z.py"].post_merge_only, rows["z.py"].tests) == (0, 0, 1)
    chart = reach_chart(rows.values())
    assert [row["file"] for row in chart["rows"]] == ["x.py", "y.py", "z.py"]
    x = chart["rows"][0]
    assert [s.cls for s in x["segments"]] == ["f-pre-merge", "f-post-merge-only"]
    assert x["segments"][0].w == round(chart["bar_w"] / 3, 1)
    assert x["text"] == "33 % pre-merge, 33 % post-merge only"


def test_report_draws_the_reach(tmp_path: Path, run_cli: Any) -> None:
    root, _ = checkout(tmp_path, FI)
    data = tmp_path / "int.coverage"
    assert run_pytest(root, "tests/integration/defs", ["accuracy"], data).returncode == 0
    m = tmp_path / "map.sqlite"
    assert run_cli("--root", str(root), "map", "add", str(data), "--map", str(m)).code == 0
    out = tmp_path / "report"
    r = run_cli("--root", str(root), "report", "--html", str(out), "--map", str(m))
    assert r.code == 0, r.err
    html = (out / "index.html").read_text()
    assert 'id="map-reach"' in html
    row = re.search(r'<g class="reach-row" data-file="accuracy/test_llm_api_pytorch.py" '
                    r'data-pre="(\d+)" data-post="(\d+)"', html)
    assert row is not None
    # the TRTLLM halves run pre-merge and executed LLM.__init__, LLM.generate and
    # create_py_executor; the FLASHINFER halves executed nothing more
    assert (int(row.group(1)), int(row.group(2))) == (3, 0)
    assert "75 % pre-merge, 0 % post-merge only" in html
    # no map: no picture
    r = run_cli("--root", str(root), "report", "--html", str(tmp_path / "r2"))
    assert r.code == 0, r.err
    assert 'id="map-reach"' not in (tmp_path / "r2" / "index.html").read_text()
