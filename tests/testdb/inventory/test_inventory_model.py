"""Inventory look-ups, status of a node id, merge, JSON round trip."""

from __future__ import annotations

from testdb.inventory import Inventory, InventoryItem, merge


def item(nodeid: str, *, source: str = "static", indeterminate: bool = False,
         line: int = 1) -> InventoryItem:
    head, _, params = nodeid.partition("[")
    parts = head.split("::")
    return InventoryItem(nodeid=nodeid, file=parts[0], line=line, function=parts[-1],
                         classes=tuple(parts[1:-1]), params=params[:-1] if params else None,
                         indeterminate=indeterminate, source=source,  # type: ignore[arg-type]
                         path=f"tests/integration/defs/{parts[0]}")


INV = Inventory([
    item("accuracy/test_a.py::TestX::test_f[attn_backend=TRTLLM]"),
    item("accuracy/test_a.py::TestX::test_f[attn_backend=FLASHINFER]"),
    item("accuracy/test_a.py::test_g"),
    item("accuracy/test_a.py::test_h", indeterminate=True),
    item("test_b.py::TestY::*", indeterminate=True),
    item("test_c.py::test_f"),
])


def test_lookups() -> None:
    assert len(INV) == 6
    assert "accuracy/test_a.py::test_g" in INV
    assert INV.get("nope") is None
    assert [i.params for i in INV.by_base("accuracy/test_a.py::TestX::test_f")] == [
        "attn_backend=TRTLLM", "attn_backend=FLASHINFER"]
    assert {i.file for i in INV.by_function("test_f")} == {"accuracy/test_a.py", "test_c.py"}
    assert len(INV.by_file("accuracy/test_a.py")) == 4
    assert INV.files() == ("accuracy/test_a.py", "test_b.py", "test_c.py")
    assert [p.nodeid for p in INV.placeholders()] == ["test_b.py::TestY::*"]


def test_item_properties() -> None:
    it = INV.items[0]
    assert it.base == "accuracy/test_a.py::TestX::test_f"
    assert it.name == "test_f[attn_backend=TRTLLM]"
    assert str(it.loc) == "tests/integration/defs/accuracy/test_a.py:1"
    assert not it.is_placeholder and INV.items[4].is_placeholder


def test_status() -> None:
    assert INV.status("accuracy/test_a.py::TestX::test_f[attn_backend=TRTLLM]") == "present"
    assert INV.status("accuracy/test_a.py::TestX::test_f[attn_backend=OTHER]") == "absent"
    assert INV.status("accuracy/test_a.py::TestX::test_f") == "absent"
    assert INV.status("accuracy/test_a.py::test_h[x]") == "indeterminate"
    assert INV.status("accuracy/test_a.py::test_h") == "indeterminate"
    assert INV.status("test_b.py::TestY::test_any[1]") == "indeterminate"
    assert INV.status("test_b.py::TestZ::test_any") == "absent"
    assert INV.status("not a node id") == "absent"


def test_merge_collected_wins_per_file() -> None:
    collected = Inventory([
        item("accuracy/test_a.py::TestX::test_f[attn_backend=TRTLLM]", source="collected"),
        item("accuracy/test_a.py::test_h[1]", source="collected"),
    ])
    merged = merge(INV, collected)
    assert {i.nodeid for i in merged.by_file("accuracy/test_a.py")} == {
        "accuracy/test_a.py::TestX::test_f[attn_backend=TRTLLM]", "accuracy/test_a.py::test_h[1]"}
    assert all(i.source == "collected" for i in merged.by_file("accuracy/test_a.py"))
    assert "test_c.py::test_f" in merged and "test_b.py::TestY::*" in merged
    assert merged.status("accuracy/test_a.py::test_h[2]") == "absent"


def test_json_round_trip() -> None:
    again = Inventory.from_json(INV.to_json())
    assert again.items == INV.items
    assert INV.to_json()["schema"] == 1


def test_later_item_with_same_id_wins() -> None:
    inv = Inventory([item("t.py::test_a", line=1), item("t.py::test_a", line=9)])
    assert len(inv) == 1 and inv.items[0].line == 9
