"""``auditor.evidence.same_links`` builds the records the constructor builds: every field of
each equal (a field added to ``Evidence`` and not set there fails here), and equal, hashed
and printed alike."""

from __future__ import annotations

import dataclasses

from auditor.evidence import Evidence, same_links
from auditor.part_memo import REASON, module_links


def test_every_field_as_the_constructor_sets_it() -> None:
    ids = ["a.py::test_x[1]", "a.py::test_x[2]", "b.py::T::test_y"]
    fast = same_links(ids, "module", 1, REASON)
    made = [Evidence(t, "module", 1, REASON) for t in ids]
    assert fast == made == module_links(ids)
    for f, m in zip(fast, made, strict=True):
        assert dataclasses.astuple(f) == dataclasses.astuple(m)
        assert {x.name: getattr(f, x.name) for x in dataclasses.fields(Evidence)} == {
            x.name: getattr(m, x.name) for x in dataclasses.fields(Evidence)}
        assert hash(f) == hash(m) and repr(f) == repr(m) and f.level == m.level


def test_the_records_stay_frozen() -> None:
    (e,) = same_links(["a.py::t"], "symbol", 2, "calls f")
    try:
        e.rank = 1  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        return
    raise AssertionError("a record built by same_links could be changed")
