"""collect(): pytest --collect-only with our plugin, in a subprocess; errors; merge."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from inventory_suites import write_tree

from testdb.errors import ExternalError
from testdb.inventory import Inventory, build_static, merge
from testdb.inventory.collect import collect

# A suite that imports compiled bindings, collectable only with a stub plugin (as TensorRT-LLM
# does with ``-p stubify_bindings``).
STUBBED = {
    "stubify_bindings.py": '''
        import sys
        import types

        sys.modules["fakebindings"] = types.ModuleType("fakebindings")
        ''',
    "test_needs_bindings.py": '''
        import pytest

        import fakebindings


        @pytest.mark.parametrize("dtype", ["fp16", "bf16"])
        def test_kernel(dtype):
            pass
        ''',
    "test_plain.py": "def test_plain():\n    pass\n",
}


@pytest.fixture
def stubbed(tmp_path: Path) -> Path:
    return write_tree(tmp_path, STUBBED)


def test_pass_through_args_reach_pytest(stubbed: Path) -> None:
    inv = collect(str(stubbed), ["-p", "stubify_bindings"])
    assert {i.nodeid for i in inv} == {
        "test_needs_bindings.py::test_kernel[fp16]", "test_needs_bindings.py::test_kernel[bf16]",
        "test_plain.py::test_plain"}
    item = inv.get("test_needs_bindings.py::test_kernel[fp16]")
    assert item is not None
    assert (item.file, item.line, item.function, item.params) == (
        "test_needs_bindings.py", 6, "test_kernel", "fp16")
    assert item.markers == ("parametrize",) and item.source == "collected"
    assert "test_kernel[fp16]" in item.keywords and "parametrize" in item.keywords


def test_collection_error_raises_with_pytest_output(stubbed: Path) -> None:
    with pytest.raises(ExternalError) as info:
        collect(str(stubbed), [])
    text = str(info.value)
    assert "exit 2" in text and "fakebindings" in text and "stubify_bindings" in text


def test_prefix_and_selection_args(stubbed: Path) -> None:
    inv = collect(str(stubbed), ["-p", "stubify_bindings", "-k", "plain"], prefix="unittest/")
    assert [i.nodeid for i in inv] == ["unittest/test_plain.py::test_plain"]
    assert inv.items[0].file == "unittest/test_plain.py"


def test_nothing_collected_is_empty(tmp_path: Path) -> None:
    write_tree(tmp_path, {"test_none.py": "x = 1\n"})
    assert len(collect(str(tmp_path), [])) == 0


def test_plugin_writes_json_directly(stubbed: Path, tmp_path: Path) -> None:
    out = tmp_path / "inv.json"
    subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
                    "testdb.inventory.plugin", f"--testdb-inventory={out}", "test_plain.py"],
                   cwd=stubbed, check=True, capture_output=True)
    data = json.loads(out.read_text())
    assert data["schema"] == 1 and data["errors"] == []
    assert data["items"][0]["nodeid"] == "test_plain.py::test_plain"
    assert data["items"][0]["line"] == 1


def test_merge_static_with_collected(stubbed: Path) -> None:
    static = build_static(str(stubbed), [(".", "")], cache=False)
    collected = collect(str(stubbed), ["-p", "stubify_bindings", "test_needs_bindings.py"])
    merged = merge(static, collected)
    assert isinstance(merged, Inventory)
    assert {i.source for i in merged.by_file("test_needs_bindings.py")} == {"collected"}
    assert {i.source for i in merged.by_file("test_plain.py")} == {"static"}
    assert len(merged) == 3
