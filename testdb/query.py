"""Answer "where does this test run?" for a pattern: exact id, id without params, name, glob."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any

from testdb.errors import UsageError
from testdb.index import Index
from testdb.schedule import Placement, Schedule, verdict_for


@dataclass(frozen=True)
class TestWhere:
    """One test id (a parametrization or a unit-test selection) and every line that names it."""

    __test__ = False
    id: str
    verdict: str
    placements: tuple[Placement, ...]
    via: str = ""  # how the pattern reached it ("selection" for unittest resolution)


def _glob(pattern: str) -> str:
    # `[` is literal in test ids; only `*` and `?` are wildcards here.
    return pattern.replace("[", "[[]")


def match_ids(ids: list[str], pattern: str) -> list[str]:
    """Test ids the pattern names, in a stable order."""
    pattern = pattern.strip()
    if not pattern:
        raise UsageError("empty pattern",
                         hint="give a node id, a Class::function, a name or a glob")
    if pattern in ids:
        return [pattern]
    if "*" in pattern or "?" in pattern:
        # Like a name, a glob may start at a `::` or `/` boundary: `TestA::test_f*` works.
        rx = re.compile(r"(?s:(?:.*(?:::|/))?)" + fnmatch.translate(_glob(pattern)))
        return sorted(i for i in ids if rx.match(i) or rx.match(_head(i)))
    out = []
    tails = ("::" + pattern, "/" + pattern)
    for i in ids:
        head = _head(i)
        # `Class::func` or `func` names every parametrization; `func[params]` names one.
        if head == pattern or head.endswith(tails) or i.endswith(tails):
            out.append(i)
    return sorted(out)


def _head(test_id: str) -> str:
    b = test_id.find("[")
    return test_id if b < 0 else test_id[:b]


def where(index: Index, pattern: str, inventory: Any = None) -> list[TestWhere]:
    """Listed ids the pattern names, and (given an inventory) unit-test ids it names, each
    placed through the ``unittest/...`` selections that select it."""
    sched: Schedule = index.schedule
    ids = match_ids(list(sched.placements), pattern)
    out = [TestWhere(i, verdict_for(sched.placements[i]), tuple(sched.placements[i]))
           for i in ids]
    if inventory is not None:
        out += _unit_tests(index, inventory, pattern, set(ids))
    return out


def _unit_tests(index: Index, inventory: Any, pattern: str, seen: set[str]) -> list[TestWhere]:
    from testdb.inventory.select import SelectionIndex

    units = [i.nodeid for i in inventory
             if i.nodeid.startswith("unittest/") and not i.is_placeholder]
    matched = [u for u in match_ids(units, pattern) if u not in seen] if units else []
    if not matched:
        return []
    lines = SelectionIndex(e for c in index.contexts.values() for e in c.entries)
    out = []
    for uid in matched:
        sels = lines.lines_for(inventory.get(uid))
        placements = tuple(p for s in sels for p in index.schedule.placements.get(s.test, ()))
        out.append(TestWhere(uid, verdict_for(list(placements)), placements,
                             via=", ".join(s.test for s in sels) or "no selection"))
    return out
