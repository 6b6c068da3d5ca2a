"""Static expansion against real ``pytest --collect-only`` on the fixture suites, per construct."""

from __future__ import annotations

from pathlib import Path

import pytest
from inventory_suites import EXPAND, write_tree

from testdb.inventory import Inventory, InventoryItem, build_static, pytest_rules
from testdb.inventory.collect import collect

# What static analysis must leave open (never guess), by base id: everything else must match.
EXPECTED_INDETERMINATE = {
    "test_classes.py::test_mutated_constant",  # the list is appended to after binding
    "test_generate_hook.py::test_hooked",  # pytest_generate_tests in the module
    "test_indeterminate.py::test_call",
    "test_indeterminate.py::test_comprehension",
    "test_indeterminate.py::test_imported_value",
    "test_indeterminate.py::test_helper_opaque",
    "test_indeterminate.py::*",  # test_conditional is defined under an if
}

FIELDS = ("file", "line", "function", "classes", "params", "markers", "keywords")


def _compare(static: Inventory, collected: Inventory, files: set[str]) -> list[str]:
    problems = []
    for item in collected:
        if item.file not in files:
            continue
        mine = static.get(item.nodeid)
        if mine is None or mine.indeterminate:
            if static.status(item.nodeid) != "indeterminate":
                problems.append(f"missing statically: {item.nodeid}")
            continue
        for f in FIELDS:
            ours, theirs = getattr(mine, f), getattr(item, f)
            if f == "keywords":  # a set of names; its order means nothing
                ours, theirs = sorted(ours), sorted(theirs)
            if ours != theirs:
                problems.append(f"{item.nodeid}: {f}: static {ours!r} != collected {theirs!r}")
    for mine in static:
        if mine.file in files and not mine.indeterminate and mine.nodeid not in collected:
            problems.append(f"not collected by pytest: {mine.nodeid}")
    return problems


DEFS_FILES = [
    "test_parametrize.py", "accuracy/test_stacked.py", "test_helpers.py", "test_classes.py",
    "test_indeterminate.py", "test_module_marks.py", "test_module_off.py",
    "test_generate_hook.py", "test_decorated.py",
    *(["test_hidden.py"] if pytest_rules.installed().hidden_param else []),
]


@pytest.mark.parametrize("file", DEFS_FILES)
def test_static_matches_pytest(file: str, defs_static: Inventory,
                               defs_collected: Inventory) -> None:
    assert _compare(defs_static, defs_collected, {file}) == []


def test_indeterminate_exactly_where_expected(defs_static: Inventory) -> None:
    found = {i.base for i in defs_static if i.indeterminate}
    assert found == EXPECTED_INDETERMINATE
    assert all(i.params is None for i in defs_static if i.indeterminate)


def test_opaque_values_with_explicit_ids_are_known(defs_static: Inventory) -> None:
    ids = {i.nodeid for i in defs_static.by_function("test_opaque_values_with_ids")}
    assert ids == {"test_indeterminate.py::test_opaque_values_with_ids[sep]",
                   "test_indeterminate.py::test_opaque_values_with_ids[o]"}


def test_trtllm_examples_from_the_docs(defs_static: Inventory) -> None:
    # trtllm-ci.md section 10, with the module-level parametrize ("mod") last.
    assert ("accuracy/test_stacked.py::TestLlama::test_fp8"
            "[fp8kv=False-attn_backend=TRTLLM-torch_compile=False-m1]") in defs_static
    assert ("accuracy/test_stacked.py::TestLlama::test_bfloat16_4gpus"
            "[tp4-attn_backend=TRTLLM-torch_compile=False-m2]") in defs_static


def test_every_construct_was_collected(defs_collected: Inventory) -> None:
    # Guards the cross-check itself: a suite file that fails to import would compare nothing.
    files = set(defs_collected.files())
    assert files >= set(DEFS_FILES) - {"test_module_off.py"}
    assert len(defs_collected) > 130


def test_unit_suite_matches_pytest(unit_dir: Path) -> None:
    static = build_static(str(unit_dir.parent), cache=False)
    collected = collect(str(unit_dir), ["unittest"], prefix="unittest/")
    assert len(collected) == 11
    assert _compare(static, collected, set(collected.files())) == []
    assert "unittest/llmapi/test_llm.py::test_llm_prefix_cache_reuse" in static
    assert "unittest/_torch/speculative/test_ngram.py::NgramCase::test_a" in static


def test_parameterized_expand_matches_pytest(tmp_path: Path) -> None:
    pytest.importorskip("parameterized")
    root = write_tree(tmp_path, EXPAND)
    static = build_static(str(root), [(".", "")], cache=False)
    collected = collect(str(root), [])
    assert _compare(static, collected, {"test_expand.py"}) == []
    assert {i.base for i in static if i.indeterminate} == {
        "test_expand.py::TestExpand::test_opaque_*"}
    names = {i.function for i in static}
    assert {"test_default_0_foo_bar", "test_default_2", "test_padded_00_a", "test_padded_11_l",
            "test_join_all_1_2_x", "test_join_all_p_2_5", "test_first_first_one",
            "test_in_pytest_class_0_x"} <= names


def test_collected_items_carry_source(defs_collected: Inventory) -> None:
    item = defs_collected.get("test_module_marks.py::test_marked")
    assert isinstance(item, InventoryItem)
    assert item.source == "collected" and item.markers == ("gpu4", "part3")
    assert item.loc.line == item.line == 6
