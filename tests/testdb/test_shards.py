"""least_duration shards, checked against pytest-split itself (library and real pytest runs)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tdb_helpers import corpus

from testdb.matching import match
from testdb.schedule import duration_key
from testdb.shards import average_duration, item_sort_name, least_duration, shard_durations
from testdb.stages import stage_facts

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


def rendered_ids(stage_name: str) -> list[str]:
    """The stage's context rendered for the stage, in list order, first occurrence wins."""
    idx = corpus()
    stage = next(s for s in idx.stages if s.name == stage_name)
    facts = stage_facts(stage, idx.platform_facts)
    seen: dict[str, None] = {}
    for block in idx.contexts[stage.context].blocks:
        if match(block.condition, facts).ok:
            for e in block.entries:
                seen.setdefault(e.test, None)
    tests = list(seen)
    by_test = {e.test: e for b in idx.contexts[stage.context].blocks for e in b.entries}
    return [duration_key(by_test[t], idx.durations) for t in tests]


def corpus_stages() -> list[str]:
    idx = corpus()
    return [s.name for s in idx.stages if not s.disabled and s.context in idx.contexts
            and idx.contexts[s.context].kind == "l0"]


def test_every_corpus_stage_agrees_with_pytest_split() -> None:
    idx = corpus()
    checked = 0
    for name in corpus_stages():
        stage = next(s for s in idx.stages if s.name == name)
        ids = rendered_ids(name)
        ours = least_duration(ids, idx.durations, stage.splits)
        theirs = pytest_split_groups(ids, idx.durations, stage.splits)
        assert ours == theirs, name
        # and the schedule runs exactly pytest-split's group for this stage's split id
        ss = idx.schedule.stages[name]
        want = [ids[i] for i in theirs[stage.split_id - 1]]
        assert [duration_key(e, idx.durations) for e in ss.entries] == want, name
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
