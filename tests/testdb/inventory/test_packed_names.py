"""The packed inventory's names record: ``where`` reads only the files whose ids can match.

``PackedInventory.ids_naming`` must never leave out a file with an id the pattern names (a
missed parametrization would show a listed test as the only one, or a function as absent); it
may keep extra files (the caller matches the ids). Each case compares ``match_ids`` over the
names' files with ``match_ids`` over every id.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testdb.inventory import InventoryItem
from testdb.inventory.packed import PackedInventory, file_blob
from testdb.inventory.packed_rows import names_text, pattern_name
from testdb.query import match_ids


def item(nodeid: str, file: str) -> InventoryItem:
    return InventoryItem(nodeid=nodeid, file=file, line=1, function="f", classes=(),
                         params=(), markers=(), keywords=(), indeterminate=False,
                         source="static", path=file)


def packed(files: dict[str, list[str]]) -> PackedInventory:
    return PackedInventory.from_blobs({f: file_blob(item(i, f) for i in ids)
                                       for f, ids in files.items()})


def stored(files: dict[str, list[str]], tmp_path: Path) -> PackedInventory:
    path = str(tmp_path / "whole.records")
    packed(files).write(path)
    got = PackedInventory.open(path)
    assert got is not None
    return got


FILES = {
    "a/test_a.py": ["a/test_a.py::TestA::test_x[tp4-FLASHINFER]", "a/test_a.py::TestA::test_y",
                    "a/test_a.py::test_z[x]"],
    # the trap: parameters holding `/` and `::`, so a pattern can start inside them
    "b/test_b.py": ["b/test_b.py::test_m[model/llama-8b]", "b/test_b.py::test_n[k::v]"],
    "c/test_c.py": ["c/test_c.py::TestC::test_x[tp2]"],
}


@pytest.mark.parametrize(("pattern", "files"), [
    ("TestA::test_x", {"a/test_a.py"}),
    ("test_x", {"a/test_a.py", "c/test_c.py"}),
    ("TestA::test_x[tp4-FLASHINFER]", {"a/test_a.py"}),
    ("llama-8b]", {"b/test_b.py"}),  # ends in `/llama-8b]` inside the params: found
    ("v]", {"b/test_b.py"}),  # ends in `::v]` inside the params: found
    ("a/", {"a/test_a.py", "b/test_b.py"}),  # a folder: `a`, also in b's kept `llama`
    ("nosuch", set()),  # nothing named: no file read
])
def test_ids_naming_reads_the_files_that_can_match(pattern: str, files: set[str],
                                                   tmp_path: Path) -> None:
    inv = stored(FILES, tmp_path)
    every = inv.ids()
    got = inv.ids_naming(pattern)
    assert {i.partition("::")[0] for i in got} <= files
    assert set(got) == {i for f in files for i in FILES[f]}
    assert match_ids(got, pattern) == match_ids(every, pattern)


def test_trap_a_pattern_inside_the_parameters_is_not_left_out(tmp_path: Path) -> None:
    """Were `b`'s names only its heads, `llama-8b]` would read no file and lose a match."""
    inv = stored(FILES, tmp_path)
    assert match_ids(inv.ids_naming("llama-8b]"), "llama-8b]") == [
        "b/test_b.py::test_m[model/llama-8b]"]
    assert "llama" not in names_text(["b/test_b.py::test_m"])  # heads alone would miss it


def test_names_of_a_new_head_and_of_a_materialized_inventory(tmp_path: Path) -> None:
    """Files replaced on top of a stored inventory answer from their own names; the others
    from the stored record; materialized keeps them; each equals names_text of its ids."""
    base = stored(FILES, tmp_path)
    new = base.replace_files({"c/test_c.py"},
                             {"d/test_d.py": file_blob([item("d/test_d.py::test_q[a]",
                                                             "d/test_d.py")])})
    for inv in (new, new.materialized(), base.materialized()):
        for f in inv.files():
            assert inv._names(f) == names_text(inv._file_ids(f))
    assert new.ids_naming("test_q") == ["d/test_d.py::test_q[a]"]
    assert match_ids(new.ids_naming("test_x"), "test_x") == match_ids(new.ids(), "test_x")


_part = st.text(alphabet="ab/:[]-=_", min_size=1, max_size=5)


@settings(max_examples=300, deadline=None)
@given(ids=st.lists(st.builds(lambda f, h, p: f"f{f}.py::{h}" + (f"[{p}]" if p else ""),
                              st.integers(0, 3), _part, st.one_of(st.none(), _part)),
                    min_size=1, max_size=12, unique=True),
       free=st.text(alphabet="ab/:[]-=_f.py0123", min_size=1, max_size=8),
       cut=st.one_of(st.none(), st.tuples(st.integers(0, 11), st.integers(1, 30))))
def test_names_never_lose_a_match(ids: list[str], free: str,
                                  cut: tuple[int, int] | None) -> None:
    """Any wildcard-free pattern (free text, or the tail of an id, as `where` is given):
    the ids of the files whose names hold its name match as every id does."""
    pattern = free if cut is None else ids[cut[0] % len(ids)][-cut[1]:]
    if not pattern.strip() or "*" in pattern or "?" in pattern:
        return
    files: dict[str, list[str]] = {}
    for i in ids:
        files.setdefault(i.partition("::")[0], []).append(i)
    name = pattern_name(pattern)
    kept = [i for f, these in files.items() if name in names_text(these) for i in these]
    assert match_ids(kept, pattern) == match_ids(ids, pattern)
