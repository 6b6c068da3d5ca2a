"""`stats` counts checked against counts taken differently: simple regexes over raw lines."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import yaml
from tdb_helpers import DATA, DURATIONS, QA, STAGES, TESTDB, WAIVES, corpus

from testdb.stats import STATS_SCHEMA, compute_stats

TESTS_KEY = re.compile(r"^(\s*)(- )?tests:\s*(#.*)?$")
BLOCK = re.compile(r"^\s*- condition:")  # every bundled block starts with its condition
CONTEXT = re.compile(r"^([A-Za-z0-9_]+):\s*$")


def raw_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def entry_lines(lines: list[str]) -> list[str]:
    """`- ` lines under a `tests:` key (at its indentation or deeper), comments dropped."""
    items: list[str] = []
    indent: int | None = None
    for ln in lines:
        text = ln.lstrip()
        if not text or text.startswith("#"):
            continue
        m = TESTS_KEY.match(ln)
        if m:
            indent = len(m.group(1)) + (2 if m.group(2) else 0)
        elif indent is not None and text.startswith("- ") and len(ln) - len(text) >= indent:
            item = text[2:].split("#", 1)[0].strip()
            if item:
                items.append(item)
        else:
            indent = None
    return items


def test_counts_against_raw_lines() -> None:
    s = compute_stats(corpus())
    files = sorted((DATA / TESTDB).glob("*.yml"))
    items = [i for f in files for i in entry_lines(raw_lines(f))]
    assert s["entries"] == len(items)
    assert s["entries_by_kind"]["unittest"] == sum(i.startswith("unittest/") for i in items)
    assert s["entries_with_timeout"] == sum(bool(re.search(r" TIMEOUT ?\(\d+\)", i))
                                            for i in items)
    assert s["entries_with_isolation"] == sum(i.endswith(" ISOLATION") for i in items)
    assert s["blocks"] == sum(bool(BLOCK.match(ln)) for f in files for ln in raw_lines(f))
    contexts = [m.group(1) for f in files for ln in raw_lines(f) if (m := CONTEXT.match(ln))]
    assert s["contexts"] == len([c for c in contexts if c != "version"])


def test_qa_and_waive_counts_against_raw_lines() -> None:
    s = compute_stats(corpus())

    def list_lines(path: Path) -> list[str]:
        return [ln.split("#", 1)[0].strip() for ln in raw_lines(path)
                if ln.split("#", 1)[0].strip()]

    txt = sorted((DATA / QA).glob("**/*.txt"))
    assert s["qa_lists"] == len(txt)
    assert s["qa_list_entries"] == sum(len(list_lines(p)) for p in txt)
    assert s["qa_lists_detail"] == {p.stem: len(list_lines(p)) for p in txt}
    waives = list_lines(DATA / WAIVES)
    # one waive line names several unit-test paths: count the paths, not the lines
    paths = sum(len([w for w in re.split(r" (?:SKIP|XFAIL|UNSTABLE)\b", ln)[0].split()
                     if "/" in w or ".py" in w]) for ln in waives)
    assert s["waives"] == paths
    by_prefix = Counter(m.group(1) for ln in waives if (m := re.match(r"full:([^/]+)/", ln)))
    for gpu, n in by_prefix.items():
        assert s["waives_by_prefix"][gpu] >= n
    assert s["durations"] == len(json.loads((DATA / DURATIONS).read_text(encoding="utf-8")))


def test_qa_yaml_and_stage_counts() -> None:
    s = compute_stats(corpus())
    entries = 0
    contexts = set()
    for path in sorted((DATA / QA).glob("**/*.yml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            continue
        for name, blocks in data.items():
            if name == "version" or name in contexts or not isinstance(blocks, list):
                continue
            if not all(isinstance(b, dict) and "tests" in b for b in blocks):
                continue
            contexts.add(name)
            entries += sum(len(b["tests"] or []) for b in blocks)
    assert s["qa_contexts"] == len(contexts)
    assert s["qa_context_entries"] == entries
    table = yaml.safe_load((DATA / STAGES).read_text(encoding="utf-8"))
    assert s["stages"] == len(table["stages"]) == table["counts_total"]
    assert s["stages_disabled"] == len(table["disabled"])


def test_shape_of_the_stats() -> None:
    s = compute_stats(corpus())
    assert s["schema"] == STATS_SCHEMA
    assert s["errors"] == 0 and s["test_ids"] == sum(s["verdicts"].values())
    assert s["files"] == len(corpus().files)
    json.dumps(s)  # JSON-ready
