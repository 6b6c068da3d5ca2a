"""The index cache's lean records (testdb.index ``_lean_state``): list entries and their places
are pickled without the fields that hold their default, and read back equal, field by field,
to the records the plan was parsed into (a cached index must answer as a fresh one does)."""

from __future__ import annotations

import dataclasses
import io
import pickle
from pathlib import Path

import pytest
from tdb_helpers import DATA

from testdb import index as index_mod
from testdb.errors import SourceLoc
from testdb.grammar import Entry


def _round_trip(obj: object) -> object:
    buf = io.BytesIO()
    index_mod._lean_pickler()(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return pickle.loads(buf.getvalue())


def _fields(obj: object) -> list[tuple[str, object, type]]:
    return [(f.name, getattr(obj, f.name), type(getattr(obj, f.name)))
            for f in dataclasses.fields(obj)]  # type: ignore[arg-type]


LOC = SourceLoc("tests/integration/test_lists/test-db/l0_a.yml", 12)
CASES = {
    "all defaults": Entry("a.py::test_x", LOC, "nodeid"),
    "every field set": Entry("a.py::test_x[1]", LOC, "nodeid", "H100", "skip_pre_hopper",
                             "bug 1", 30, True, "why"),
    # TRAP: a value equal to its default but of another type must come back as it was
    "isolation 0, not False": Entry("a.py::test_y", LOC, "nodeid", isolation=0),  # type: ignore[arg-type]
    "timeout 0.0, not None": Entry("a.py::test_z", LOC, "nodeid", timeout_minutes=0),
    "empty strings, not None": Entry("", SourceLoc("", 0), "", "", "", "", None, False, ""),
    "a place of line 0": Entry("b.py", SourceLoc("b.yml"), "path"),
}


@pytest.mark.parametrize("entry", CASES.values(), ids=list(CASES))
def test_a_record_reads_back_as_it_was_written(entry: Entry) -> None:
    back = _round_trip(entry)
    assert isinstance(back, Entry)
    assert _fields(back) == _fields(entry)  # each value, and its type
    assert _fields(back.loc) == _fields(entry.loc)
    assert back == entry and hash(back) == hash(entry) and repr(back) == repr(entry)
    assert dataclasses.replace(back, marker="m") == dataclasses.replace(entry, marker="m")


def test_the_lean_form_is_smaller() -> None:
    entry = CASES["all defaults"]
    assert len(pickle.dumps(entry)) > len(
        (buf := io.BytesIO(), index_mod._lean_pickler()(buf).dump(entry), buf.getvalue())[2])


def test_the_corpus_index_reads_back_equal(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole plan through the cache: every record equal to the freshly parsed one."""
    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path / "cache"))
    fresh = index_mod.load(str(DATA))
    cached = index_mod.load(str(DATA))
    assert cached is not fresh
    for name in ("contexts", "qa_lists", "waives", "stages", "diagnostics", "triggers"):
        assert getattr(cached, name) == getattr(fresh, name), name
    entries = [e for c in fresh.contexts.values() for e in c.entries]
    back = [e for c in cached.contexts.values() for e in c.entries]
    assert len(entries) > 1000
    assert [_fields(e) for e in back] == [_fields(e) for e in entries]
    assert [_fields(e.loc) for e in back] == [_fields(e.loc) for e in entries]
    assert ({t: cached.schedule.verdict(t) for t in cached.schedule.placements}
            == {t: fresh.schedule.verdict(t) for t in fresh.schedule.placements})
