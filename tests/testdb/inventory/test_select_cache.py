"""The selections kept on disk (testdb.inventory.select_cache): a warm SelectionIndex answers as
a cold one does without evaluating an expression, and never from another version of a file."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from test_inventory_select import LINES, entry

from testdb.grammar import Entry
from testdb.inventory import Inventory, build_static
from testdb.inventory import select as select_mod
from testdb.inventory.select import SelectionIndex, select_unittest


def _answers(index: SelectionIndex, inv: Inventory) -> dict[str, list[str]]:
    return {i.nodeid: [e.test for e in index.lines_for(i)] for i in inv}


def _no_evaluation(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("an expression was compiled: the cache was not used")

    monkeypatch.setattr(select_mod, "_compile", refuse)


@pytest.fixture(scope="module")
def unit_static(unit_dir: Path) -> Inventory:
    return build_static(str(unit_dir.parent), cache=False)


def test_warm_answers_are_the_cold_ones(unit_static: Inventory, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [entry(line) for line in LINES]
    plain = _answers(SelectionIndex(lines), unit_static)  # evaluated, nothing kept
    cold = SelectionIndex(lines, unit_static, str(tmp_path))
    assert _answers(cold, unit_static) == plain
    cold.save()
    _no_evaluation(monkeypatch)
    warm = SelectionIndex(lines, unit_static, str(tmp_path))
    assert _answers(warm, unit_static) == plain
    assert any(plain.values())  # the table selects something


@pytest.mark.parametrize("line", [line for line in LINES if " unittest/" not in line
                                  and entry(line).is_unittest])
def test_index_agrees_with_select_unittest(line: str, unit_static: Inventory,
                                           tmp_path: Path) -> None:
    """Per line, the items whose answer names it are the ones ``select_unittest`` returns
    (left out: lines of several paths, which the index files under their first path, and
    ``unittest -m ...``, which CI does not read as a unit-test line)."""
    e = entry(line)
    for _ in range(2):  # cold, then warm
        index = SelectionIndex([e], unit_static, str(tmp_path))
        got = {i.nodeid for i in unit_static if index.lines_for(i)}
        index.save()
        assert got == {i.nodeid for i in select_unittest(e, unit_static)}


def _checkout(root: Path, marker: str) -> Inventory:
    test = root / "tests" / "unittest" / "a" / "test_x.py"
    test.parent.mkdir(parents=True, exist_ok=True)
    test.write_text(textwrap.dedent(f"""\
        import pytest


        @pytest.mark.{marker}
        def test_one():
            pass


        def test_two():
            pass
        """))
    return build_static(str(root), cache=False)


def _lines(*texts: str) -> list[Entry]:
    return [entry(t) for t in texts]


def test_a_changed_test_file_is_evaluated_afresh(tmp_path: Path) -> None:
    """The trap: a test that lost its marker must not keep the lines its old version had."""
    cache = str(tmp_path / "cache")
    lines = _lines('unittest/a -m "gpu2"', 'unittest/ -m "not gpu2"')
    before = _checkout(tmp_path / "co", "gpu2")
    first = SelectionIndex(lines, before, cache)
    assert _answers(first, before) == {"unittest/a/test_x.py::test_one": ['unittest/a -m "gpu2"'],
                                       "unittest/a/test_x.py::test_two": [
                                           'unittest/ -m "not gpu2"']}
    first.save()
    after = _checkout(tmp_path / "co", "cpu_only")
    again = SelectionIndex(lines, after, cache)
    assert _answers(again, after) == {"unittest/a/test_x.py::test_one": ['unittest/ -m "not gpu2"'],
                                      "unittest/a/test_x.py::test_two": [
                                          'unittest/ -m "not gpu2"']}


def test_changed_lines_are_evaluated_afresh(tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    inv = _checkout(tmp_path / "co", "gpu2")
    one = SelectionIndex(_lines('unittest/a -k "test_one"'), inv, cache)
    assert _answers(one, inv)["unittest/a/test_x.py::test_one"] == ['unittest/a -k "test_one"']
    one.save()
    other = SelectionIndex(_lines('unittest/a -k "test_two"'), inv, cache)
    assert _answers(other, inv) == {"unittest/a/test_x.py::test_one": [],
                                    "unittest/a/test_x.py::test_two": [
                                        'unittest/a -k "test_two"']}


def test_a_damaged_cache_file_is_a_miss(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    lines = _lines('unittest/a -m "gpu2"')
    inv = _checkout(tmp_path / "co", "gpu2")
    first = SelectionIndex(lines, inv, str(cache))
    want = _answers(first, inv)
    first.save()
    (kept,) = cache.glob("selections-*")
    data = bytearray(kept.read_bytes())
    data[-3] ^= 0xFF
    kept.write_bytes(bytes(data))
    assert _answers(SelectionIndex(lines, inv, str(cache)), inv) == want
