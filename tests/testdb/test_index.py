"""Loading a checkout into one Index: discovery, explicit --stages, the cache, bad files."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import pytest
from tdb_helpers import (
    DATA,
    QA,
    STAGE_TABLE,
    STAGES,
    TESTDB,
    WAIVES,
    corpus,
    small_checkout,
    write_checkout,
)

from testdb import index as index_mod
from testdb.errors import InputError, Severity
from testdb.index import Sources, load


@pytest.fixture
def fresh_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> str:
    """An empty cache directory of this test's own."""
    d = str(tmp_path_factory.mktemp("cache"))
    monkeypatch.setenv("TESTDB_CACHE_DIR", d)
    return d


def indexes(cache: str) -> list[str]:
    return [n for n in os.listdir(cache) if n.startswith("index-")]


def summary(idx: index_mod.Index) -> dict[str, object]:
    """What a load produced, without paths that depend on where the checkout lies."""
    sched = idx.schedule
    return {
        "contexts": {n: [(b.loc.line, [e.test for e in b.entries]) for b in c.blocks]
                     for n, c in idx.contexts.items()},
        "qa": [(q.name, [e.test for e in q.entries]) for q in idx.qa_lists],
        "waives": [(w.test, w.gpu_prefix) for w in idx.waives],
        "stages": [(s.name, s.context, s.split_id, s.splits) for s in idx.stages],
        "verdicts": {t: sched.verdict(t) for t in sched.placements},
        "shards": {n: [e.test for e in ss.entries] for n, ss in sched.stages.items()},
        "diagnostics": sorted((d.loc.path, d.loc.line, d.rule) for d in idx.diagnostics),
    }


def test_discover_finds_the_layout(tmp_path: Path) -> None:
    small_checkout(tmp_path)
    src = Sources.discover(str(tmp_path))
    assert src.testdb == (f"{TESTDB}/l0_a10.yml", f"{TESTDB}/l0_dgx_h100.yml")
    assert src.qa_txt == (f"{QA}/llm_function_core.txt",)
    assert src.waives == WAIVES and src.stages == STAGES
    assert src.durations is None and src.triggers is None


def test_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a directory"):
        load(str(tmp_path / "nope"))


def test_small_checkout_loads(tmp_path: Path) -> None:
    idx = load(str(small_checkout(tmp_path)))
    assert idx.diagnostics == ()
    assert sorted(idx.contexts) == ["l0_a10", "l0_dgx_h100"]
    assert [s.name for s in idx.stages][:2] == ["A10-PyTorch-1", "A10-PyTorch-2"]
    assert idx.schedule.verdict("a.py::test_a[x=1]") == "pre-merge"
    assert idx.schedule.verdict("a.py::test_multi") == "gated"
    assert idx.schedule.verdict("a.py::test_post") == "post-merge-only"
    assert idx.schedule.verdict("a.py::TestB::test_b") == "waived"
    assert idx.schedule.verdict("a.py::test_qa") == "qa-only"


def test_explicit_stages_yaml_agrees_with_the_discovered_one(tmp_path: Path) -> None:
    found = small_checkout(tmp_path / "found")
    explicit = small_checkout(tmp_path / "explicit")
    (explicit / STAGES).unlink()
    table = write_checkout(tmp_path / "elsewhere", {"my-stages.yml": STAGE_TABLE})
    a = load(str(found), use_cache=False)
    b = load(str(explicit), stages=str(table / "my-stages.yml"), use_cache=False)
    assert b.sources is not None and b.sources.stages == str(table / "my-stages.yml")
    assert summary(a) == summary(b)
    # without a stage table nothing runs anywhere, and loading still works
    none = load(str(explicit), use_cache=False)
    assert none.stages == () and none.schedule.verdict("a.py::test_a[x=1]") == "unscheduled"


def test_copied_corpus_with_explicit_stages_agrees_with_the_bundled_one(tmp_path: Path) -> None:
    root = tmp_path / "trtllm"
    shutil.copytree(DATA / "tests", root / "tests")
    stages = tmp_path / "stages-table.yml"
    shutil.copy(DATA / STAGES, stages)
    shutil.copy(DATA / "ci/pr-triggers.yml", tmp_path / "triggers.yml")
    copy = load(str(root), stages=str(stages), triggers=str(tmp_path / "triggers.yml"))
    assert summary(copy) == summary(corpus())


def test_cache_round_trip_and_invalidation(tmp_path: Path, fresh_cache: str) -> None:
    root = small_checkout(tmp_path)
    first = load(str(root))
    assert len(indexes(fresh_cache)) == 1
    again = load(str(root))
    assert again is not first and summary(again) == summary(first)
    runs = again.schedule.placements["a.py::test_a[x=1]"][0].runs
    assert [r.stage for r in runs] == [
        r.stage for r in first.schedule.placements["a.py::test_a[x=1]"][0].runs]
    # a changed file is a different key
    (root / WAIVES).write_text("a.py::test_post SKIP (bug)\n", encoding="utf-8")
    changed = load(str(root))
    assert changed.schedule.verdict("a.py::TestB::test_b") == "pre-merge"
    assert changed.schedule.verdict("a.py::test_post") != "post-merge-only"
    assert len(indexes(fresh_cache)) == 2


def test_corrupt_cache_is_ignored(tmp_path: Path, fresh_cache: str) -> None:
    root = small_checkout(tmp_path)
    good = summary(load(str(root)))
    [name] = indexes(fresh_cache)
    for junk in (b"", b"not a pickle", pickle.dumps({"an": "other object"})):
        Path(fresh_cache, name).write_bytes(junk)
        assert summary(load(str(root))) == good


def test_unwritable_cache_dir_only_costs_speed(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(blocker / "sub"))
    root = small_checkout(tmp_path / "co")
    assert load(str(root)).schedule.verdict("a.py::test_multi") == "gated"


def test_one_bad_file_does_not_hide_the_others(tmp_path: Path) -> None:
    root = small_checkout(tmp_path, {
        f"{TESTDB}/l0_bytes.yml": b"l0_bytes:\n- condition: {}\n  tests:\n  - a.py::t\xff\n",
        f"{TESTDB}/l0_broken.yml": "l0_broken:\n- condition: {\n",
        f"{QA}/llm_bad.txt": "a.py::t TIMEOUT (x)\na.py::test_qa2\n",
    })
    idx = load(str(root))
    rules = {(d.loc.path.rsplit("/", 1)[-1], d.loc.line, d.rule) for d in idx.errors}
    assert rules == {("l0_bytes.yml", 4, "unreadable"), ("l0_broken.yml", 3, "yaml"),
                     ("llm_bad.txt", 1, "bad-timeout")}
    assert sorted(idx.contexts) == ["l0_a10", "l0_dgx_h100"]
    assert idx.schedule.verdict("a.py::test_qa2") == "qa-only"
    assert idx.schedule.verdict("a.py::test_a[x=1]") == "pre-merge"


def test_unreadable_file(tmp_path: Path) -> None:
    root = small_checkout(tmp_path)
    path = root / f"{TESTDB}/l0_dgx_h100.yml"
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("this user (root) reads files whatever their mode")
        idx = load(str(root))
    finally:
        path.chmod(0o644)
    [d] = idx.errors
    assert d.loc.path.endswith("l0_dgx_h100.yml") and "cannot read" in d.message
    assert "l0_a10" in idx.contexts


def test_dangling_symlink_is_reported_not_dropped(tmp_path: Path) -> None:
    root = small_checkout(tmp_path)
    (root / TESTDB / "l0_gone.yml").symlink_to(tmp_path / "nowhere.yml")
    idx = load(str(root))
    [d] = idx.errors
    assert (d.loc.path, d.rule) == (f"{TESTDB}/l0_gone.yml", "unreadable")
    assert "no such file" in d.message
    assert sorted(idx.contexts) == ["l0_a10", "l0_dgx_h100"]


def test_duplicate_contexts_across_files(tmp_path: Path) -> None:
    root = small_checkout(tmp_path, {
        f"{TESTDB}/l0_zz.yml": "l0_a10:\n- condition: {}\n  tests: [z.py::t]\n",
        f"{QA}/a.yml": "qa_ctx:\n- condition: {}\n  tests: [q.py::t]\n",
        f"{QA}/b.yml": "qa_ctx:\n- condition: {}\n  tests: [q.py::u]\n",
    })
    idx = load(str(root))
    dups = sorted((d.loc.path.rsplit("/", 1)[-1], d.severity) for d in idx.diagnostics
                  if d.rule == "duplicate-context")
    assert dups == [("b.yml", Severity.WARNING), ("l0_zz.yml", Severity.ERROR)]
    assert idx.contexts["l0_a10"].entries[0].test == "a.py::test_a[x=1]"


@pytest.mark.parametrize("table, rule", [
    ("rows: []\n", "bad-stages"),
    ("stages: {a: b}\n", "bad-stages"),
    ("stages:\n- {name: A10-PyTorch-1, platform: a10}\n", "bad-stage"),
    ("stages:\n- {name: A10-PyTorch-1, context: l0_a10, splits: two}\n", "bad-stage"),
    ("stages:\n- just a string\n", "bad-stage"),
    ("stages: [\n", "bad-stages"),
])
def test_bad_stage_tables(tmp_path: Path, table: str, rule: str) -> None:
    root = small_checkout(tmp_path, {STAGES: table})
    idx = load(str(root))
    assert [d.rule for d in idx.errors] == [rule]
    assert all(d.loc.path == STAGES for d in idx.errors)


def test_duplicate_stage_is_a_warning(tmp_path: Path) -> None:
    root = small_checkout(tmp_path, {STAGES: STAGE_TABLE + STAGE_TABLE.split("\n", 1)[1]})
    idx = load(str(root))
    assert {d.rule for d in idx.diagnostics} == {"duplicate-stage"}
    assert all(d.severity is Severity.WARNING for d in idx.diagnostics)


def test_triggers_and_platform_facts(tmp_path: Path) -> None:
    root = small_checkout(tmp_path, {
        "ci/pr-triggers.yml": "multi_gpu_file_changed:\n  related_paths: [cpp/]\n"
                              "auto_trigger_tags:\n  map:\n"
                              "  - {path_prefix: x/, tags: [-PyTorch-]}\n",
        "ci/platform-facts.yml": "platforms:\n  a10: {linux_distribution_name: ubuntu22}\n",
    })
    idx = load(str(root))
    assert idx.triggers.multi_gpu_paths == ("cpp/",)
    assert idx.triggers.tags == ("-PyTorch-",)
    assert idx.platform_facts == {"a10": {"linux_distribution_name": "ubuntu22"}}
    # a single-GPU, not post-merge stage with a tag in its name is in every PR's base set: the
    # tag adds nothing there (launchTestJobs starts from all stages minus multi-GPU and
    # Post-Merge ones); it does pull the A10 Post-Merge stage into a PR that opens it
    assert idx.schedule.verdict("a.py::test_a[x=2]") == "pre-merge"
    assert idx.schedule.stages["A10-PyTorch-Post-Merge-1"].placement == "gated"


def test_bad_triggers_file_is_an_error(tmp_path: Path) -> None:
    # Not a diagnostic beside a result: gates read from a broken file would be closed silently.
    root = small_checkout(tmp_path, {"ci/pr-triggers.yml": "- just\n- a list\n"})
    with pytest.raises(InputError, match=r"^ci/pr-triggers.yml:1: PR trigger file must be a"):
        load(str(root))


def test_corpus_loads_without_errors() -> None:
    idx = corpus()
    assert idx.errors == []
    assert len(idx.contexts) > 100 and len(idx.stages) > 180
    assert {s.path for s in idx.skipped} == {f"{QA}/llm_perf_recipe_db.yml"}
