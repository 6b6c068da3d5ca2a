"""least_duration shards, checked against pytest-split itself (library and real pytest runs)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tdb_helpers import corpus, write_checkout

from testdb.grammar import Entry
from testdb.matching import match
from testdb.schedule import duration_key, item_name
from testdb.shards import average_duration, item_sort_name, least_duration, shard_durations
from testdb.stages import Stage, stage_facts

pytest_split = pytest.importorskip("pytest_split.algorithms")


class FakeItem:
    """What pytest-split reads from a pytest item: ``nodeid`` and ``str(item)``."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid
        # pytest's Function repr: `<Function NAME>`, NAME being the last `::` part of the node
        # id (the part after the final `::` that is not inside the parameter brackets)
        m = re.match(r"^(?:.*?::)*?([^:\[]*(?:\[.*\])?)$", nodeid)
        self.name = m.group(1) if m else nodeid

    def __str__(self) -> str:
        return f"<Function {self.name}>"


def pytest_split_groups(ids: list[str], durations: dict[str, float], splits: int
                        ) -> list[list[int]]:
    items = [FakeItem(i) for i in ids]
    position = {id(it): n for n, it in enumerate(items)}
    algo = pytest_split.Algorithms.least_duration.value
    return [[position[id(it)] for it in g.selected] for g in algo(splits, items, durations)]


def test_fake_item_name_matches_item_sort_name() -> None:
    for nodeid in ("a.py::f", "a/b.py::C::f[x::y-z]", "a.py::C::D::f[[1]]",
                   'unittest/_torch -k "a"'):
        assert str(FakeItem(nodeid)) == item_sort_name(nodeid)


def test_least_duration_basics() -> None:
    ids = ["a.py::t1", "a.py::t2", "a.py::t3", "a.py::t4"]
    d = {"a.py::t1": 10.0, "a.py::t2": 1.0, "a.py::t3": 5.0}
    groups = least_duration(ids, d, 2)
    # t4 gets the average (16/3) of the known items; longest first onto the lightest group:
    # t1 -> g1, t4 -> g2, t3 -> g2, t2 -> g1
    assert groups == [[0, 1], [2, 3]]
    assert shard_durations(ids, d, groups) == [11.0, 5.0 + 16 / 3]
    assert sorted(i for g in least_duration(ids, d, 3) for i in g) == [0, 1, 2, 3]
    assert least_duration(ids, {}, 1) == [[0, 1, 2, 3]]
    assert average_duration(ids, {"other": 100.0}) == 1.0  # irrelevant durations are dropped
    assert least_duration([], d, 3) == [[], [], []]
    with pytest.raises(ValueError):
        least_duration(ids, d, 0)


@pytest.mark.parametrize("splits", [1, 2, 3, 5, 9])
def test_ties_agree_with_pytest_split(splits: int) -> None:
    ids = [f"t.py::test_{c}[{n}]" for c in "zyxab" for n in range(4)] + ["t.py::T::test_q"]
    d = {i: float(len(i) % 3) for i in ids[::2]}
    assert least_duration(ids, d, splits) == pytest_split_groups(ids, d, splits)


# ---- the corpus: every multi-shard stage group against pytest-split itself ---------------------

# CI turns each `unittest/...` line into an item of `test_unittests.py::test_unittests_v2`,
# parametrized by the line (`pytest_generate_tests` in tests/integration/defs/conftest.py of
# TensorRT-LLM: `metafunc.parametrize("case", lines, ids=lambda x: x)`). This harness is our own
# imitation of that shape; real pytest collects it, so `str(item)` below is pytest's, not ours.
UNITTEST_HARNESS = {
    "test_unittests.py": "def test_unittests_v2(case):\n    pass\n",
    "conftest.py": textwrap.dedent("""\
        import json
        import os


        def pytest_generate_tests(metafunc):
            if metafunc.definition.function.__name__ != "test_unittests_v2":
                return
            with open(os.environ["UT_LINES"], encoding="utf-8") as f:
                lines = [ln.strip() for ln in f if ln.startswith("unittest/")]
            metafunc.parametrize("case", lines, ids=lambda x: x)


        def pytest_collection_finish(session):
            with open(os.environ["UT_ITEMS"], "w", encoding="utf-8") as f:
                json.dump([[it.nodeid, str(it)] for it in session.items], f)
        """),
}


def stage_groups() -> dict[tuple[str, tuple[int, ...], int], list[Stage]]:
    """Stages that render the same list into the same number of shards, by (context, blocks,
    splits): pytest-split splits that list once and each stage runs its own group."""
    idx = corpus()
    groups: dict[tuple[str, tuple[int, ...], int], list[Stage]] = {}
    for st in idx.stages:
        ctx = idx.contexts.get(st.context)
        if st.disabled or ctx is None or ctx.kind != "l0" or not 1 <= st.split_id <= st.splits:
            continue
        facts = stage_facts(st, idx.platform_facts)
        blocks = tuple(b.index for b in ctx.blocks if match(b.condition, facts).ok)
        groups.setdefault((ctx.name, blocks, st.splits), []).append(st)
    return groups


def rendered(context: str, blocks: tuple[int, ...]) -> list[Entry]:
    """The list rendered for a group, in list order; pytest runs a repeated id once."""
    seen: dict[str, Entry] = {}
    for b in corpus().contexts[context].blocks:
        if b.index in blocks:
            for e in b.entries:
                seen.setdefault(e.test, e)
    return list(seen.values())


@pytest.fixture(scope="module")
def unittest_items(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    """Unit-test line -> (node id, str(item)) of the item real pytest collects for it."""
    lines = sorted({e.test for (ctx, blocks, _) in stage_groups() for e in rendered(ctx, blocks)
                    if e.is_unittest})
    root = write_checkout(tmp_path_factory.mktemp("ut_harness"), UNITTEST_HARNESS)
    (root / "list.txt").write_text("".join(f"{ln}\n" for ln in lines), encoding="utf-8")
    env = {**os.environ, "UT_LINES": str(root / "list.txt"), "UT_ITEMS": str(root / "items.json")}
    subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
                    "no:cacheprovider", "test_unittests.py"], cwd=root, env=env,
                   capture_output=True, text=True, check=True)
    items = json.loads((root / "items.json").read_text(encoding="utf-8"))
    assert len(items) == len(lines) > 100
    return {line: (nodeid, name) for line, (nodeid, name) in zip(lines, items, strict=True)}


class Item:
    """What pytest-split reads from an item: ``nodeid`` and ``str(item)``."""

    def __init__(self, nodeid: str, name: str) -> None:
        self.nodeid, self.name = nodeid, name

    def __str__(self) -> str:
        return self.name


def test_unittest_lines_are_items_of_test_unittests_v2(
        unittest_items: dict[str, tuple[str, str]]) -> None:
    """Real pytest names each line's item as CI does; the tool sorts ties by that name."""
    entries = {e.test: e for (c, b, _) in stage_groups() for e in rendered(c, b) if e.is_unittest}
    for line, (nodeid, name) in unittest_items.items():
        assert nodeid == entries[line].ci_node_id == f"test_unittests.py::test_unittests_v2[{line}]"
        assert name == item_name(entries[line]) == f"<Function test_unittests_v2[{line}]>"
    # the trap: a line naming a test function is not sorted by that function's name
    line = next(ln for ln in unittest_items if "::" in ln)
    assert item_name(entries[line]) != item_sort_name(line)


def test_every_multi_shard_group_agrees_with_pytest_split(
        unittest_items: dict[str, tuple[str, str]]) -> None:
    """pytest-split's own least_duration on each group's items puts every item in the shard
    the tool's schedule runs it in. Durations are looked up by the key `.test_durations`
    records the line under (the tool's reading; see docs/semantics.md)."""
    idx = corpus()
    algo = pytest_split.Algorithms.least_duration.value
    checked, groups, moved_by_old_rule = 0, 0, 0
    for (ctx, blocks, splits), stages in stage_groups().items():
        if splits < 2:
            continue
        groups += 1
        entries = rendered(ctx, blocks)
        items, durations = [], {}
        for e in entries:
            nodeid, name = unittest_items[e.test] if e.is_unittest else (e.test, str(FakeItem(
                e.test)))
            key = duration_key(e, idx.durations)
            if key in idx.durations:
                durations[nodeid] = idx.durations[key]
            items.append(Item(nodeid, name))
        theirs = {id(it): g + 1 for g, grp in enumerate(algo(splits, items, durations))
                  for it in grp.selected}
        ours: dict[str, int] = {}
        for st in stages:
            for e in idx.schedule.stages[st.name].entries:
                assert ours.setdefault(e.test, st.split_id) == st.split_id, (st.name, e.test)
        for e, it in zip(entries, items, strict=True):
            assert ours.get(e.test) == theirs[id(it)], (stages[0].name, e.test)
            checked += 1
        ids = [duration_key(e, idx.durations) for e in entries]
        old = least_duration(ids, idx.durations, splits)  # sorted by the text after `::`
        moved_by_old_rule += sum(ours[e.test] != g + 1 for g, grp in enumerate(old)
                                 for e in (entries[i] for i in grp))
    assert (groups, checked) == (43, 780)
    assert moved_by_old_rule == 63  # the items issue 14 found in another shard


def test_every_corpus_stage_runs_its_pytest_split_group() -> None:
    """Single-shard stages too: the schedule runs exactly its group of the rendered list."""
    idx = corpus()
    checked = 0
    for (ctx, blocks, splits), stages in stage_groups().items():
        entries = rendered(ctx, blocks)
        ids = [duration_key(e, idx.durations) for e in entries]
        groups = least_duration(ids, idx.durations, splits, [item_name(e) for e in entries])
        for st in stages:
            want = [entries[i].test for i in groups[st.split_id - 1]]
            assert [e.test for e in idx.schedule.stages[st.name].entries] == want, st.name
            checked += 1
    assert checked > 150


SUITE = """\
    import pytest

    @pytest.mark.parametrize("n", range(7))
    def test_param(n):
        pass

    @pytest.mark.parametrize("name", ["b", "a", "c"])
    def test_tie(name):
        pass

    class TestGroup:
        def test_one(self):
            pass

        @pytest.mark.parametrize("x", ["p::q", "r s"])
        def test_two(self, x):
            pass

    def test_unknown_duration():
        pass
"""


def test_real_pytest_split_run_agrees(tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(textwrap.dedent(SUITE), encoding="utf-8")
    collect = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "test_suite.py"], cwd=tmp_path, capture_output=True, text=True, check=True)
    ids = [ln for ln in collect.stdout.splitlines() if "::" in ln]
    assert len(ids) == 14
    durations = {i: float(n % 4) for n, i in enumerate(ids) if "unknown" not in i}
    durations["test_suite.py::test_tie[a]"] = durations["test_suite.py::test_tie[b]"]
    (tmp_path / "durations.json").write_text(json.dumps(durations), encoding="utf-8")
    for group in (1, 2, 3):
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
             "--splits", "3", "--group", str(group), "--durations-path", "durations.json",
             "--splitting-algorithm", "least_duration",
             "test_suite.py"], cwd=tmp_path, capture_output=True, text=True, check=True)
        selected = [ln for ln in run.stdout.splitlines() if "::" in ln]
        ours = [ids[i] for i in least_duration(ids, durations, 3)[group - 1]]
        assert selected == ours, (group, run.stdout)
