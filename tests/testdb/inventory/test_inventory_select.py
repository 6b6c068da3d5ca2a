"""select_unittest against the items real pytest selects with the same -k/-m/paths."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from testdb.errors import InputError, SourceLoc
from testdb.grammar import Entry, parse_line
from testdb.inventory import Inventory, build_static, pytest_rules
from testdb.inventory.collect import collect
from testdb.inventory.select import parse_selection, select_unittest

LOC = SourceLoc("l0_a10.yml", 3)

LINES = [
    "unittest/llmapi",
    "unittest/llmapi/test_llm.py",
    "unittest/llmapi/test_llm.py::test_llm_generate",
    "unittest/llmapi/test_llm.py::test_llm_generate[trt]",
    "unittest/llmapi/test_llm.py::TestLlmApi",
    "unittest/llmapi/test_llm.py::TestLlmApi::test_plain",
    'unittest/_torch/speculative -k "eagle3"',
    'unittest/_torch -k "speculative and not ngram"',
    'unittest/ -m "gpu2 and part3"',
    'unittest -m "part0 or cpu_only"',
    'unittest -m "not gpu2"',
    'unittest -k "LLM"',
    'unittest -k "test_llm.py or NgramCase"',
    'unittest -k "pytestmark"',
    'unittest -k "parametrize and not pytorch"',
    'unittest -k "eagle3" -m "part0"',
    "unittest --ignore=unittest/llmapi",
    "unittest --deselect llmapi/test_llm.py::test_llm_tp2",
    'unittest/llmapi unittest/_torch/speculative/test_ngram.py -k "test"',
    'unittest -k "TestLlmApi and not eagle3"',
    'unittest -k "True"',
]


def entry(line: str) -> Entry:
    res = parse_line(line, LOC)
    assert len(res.entries) == 1, res.diagnostics
    return res.entries[0]


@pytest.fixture(scope="module")
def unit_static(unit_dir: Path) -> Inventory:
    return build_static(str(unit_dir.parent), cache=False)


@pytest.mark.parametrize("line", LINES)
def test_selection_matches_pytest(line: str, unit_dir: Path, unit_static: Inventory) -> None:
    e = entry(line)
    ours = {i.nodeid for i in select_unittest(e, unit_static)}
    # what CI's inner pytest (cwd tests/, rootdir tests/unittest) selects for this line
    theirs = {i.nodeid for i in collect(str(unit_dir), shlex.split(e.test), prefix="unittest/")}
    assert ours == theirs
    # each line selects something (but one; and pytest >= 9.2 no longer matches -k on the
    # function attribute "pytestmark")
    assert ours or line.endswith('"part0"') or (
        line.endswith('"pytestmark"') and pytest_rules.installed().keywords_skip_private_attrs)


def test_ci_markexpr_is_combined(unit_dir: Path, unit_static: Inventory) -> None:
    e = entry('unittest/llmapi -m "part0"')
    ours = {i.nodeid for i in select_unittest(e, unit_static, extra_markexpr="not cpu_only")}
    theirs = {i.nodeid for i in collect(
        str(unit_dir), ["unittest/llmapi", "-m", "(part0) and (not cpu_only)"],
        prefix="unittest/")}
    assert ours == theirs == {
        "unittest/llmapi/test_llm.py::test_llm_prefix_cache_reuse",
        "unittest/llmapi/test_llm.py::TestLlmApi::test_eagle3_spec"}
    only_extra = select_unittest(entry("unittest/_torch/speculative/test_ngram.py"), unit_static,
                                 extra_markexpr="not cpu_only")
    assert [i.function for i in only_extra] == ["test_a"]


def test_bad_expression_is_an_input_error(unit_static: Inventory) -> None:
    with pytest.raises(InputError, match="wrong expression passed to '-k'") as info:
        select_unittest(entry('unittest -k "a and"'), unit_static)
    assert info.value.loc == LOC


def test_placeholders_below_a_path_are_returned() -> None:
    from testdb.inventory import InventoryItem

    inv = Inventory([
        InventoryItem("unittest/a/test_x.py::*", "unittest/a/test_x.py", 1, "*",
                      indeterminate=True),
        InventoryItem("unittest/a/test_y.py::test_y", "unittest/a/test_y.py", 1, "test_y",
                      keywords=("test_y", "test_y.py", "a")),
    ])
    got = select_unittest(entry('unittest/a -k "nothing_matches"'), inv)
    assert [i.nodeid for i in got] == ["unittest/a/test_x.py::*"]


def test_parse_selection() -> None:
    sel = parse_selection(["unittest/a/", "-kfoo", "-m", "gpu2", "-p", "no:x", "-v",
                           "--ignore", "./unittest/a/b", "--ignore-glob=*slow*",
                           "--deselect=a/t.py::x", "unittest/b"])
    assert sel.paths == ("unittest/a", "unittest/b")
    assert (sel.keyword, sel.markexpr) == ("foo", "gpu2")
    assert sel.ignore == ("unittest/a/b",) and sel.ignore_glob == ("*slow*",)
    assert sel.deselect == ("a/t.py::x",)
    assert parse_selection(["x", "-k", "a", "-k", "b"]).keyword == "b"  # the last one wins
