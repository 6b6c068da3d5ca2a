"""Answer "where does this test run?" for a pattern: exact id, id without params, name, glob."""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from testdb.errors import Diagnostic, Severity, SourceLoc, UsageError

if TYPE_CHECKING:
    from testdb.index import Index
    from testdb.schedule import Placement, Schedule


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
    from testdb.schedule import verdict_for

    sched: Schedule = index.schedule
    ids = match_ids(list(sched.placements), pattern)
    out = [TestWhere(i, verdict_for(sched.placements[i]), tuple(sched.placements[i]))
           for i in ids]
    if inventory is not None:
        out += _unit_tests(index, inventory, pattern, set(ids))
    return out


def _unit_tests(index: Index, inventory: Any, pattern: str, seen: set[str]) -> list[TestWhere]:
    from testdb.inventory.select import SelectionIndex
    from testdb.schedule import verdict_for

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


def placement_record(p: Placement) -> dict[str, Any]:
    """One placement as plain data (the shape of ``where --format json``)."""
    return {
        "kind": p.kind,
        "path": p.entry.loc.path,
        "line": p.entry.loc.line,
        "block_line": p.block.loc.line if p.block else None,
        "context": p.context,
        "stage_term": p.block.stage_term if p.block else None,
        "condition": p.block.condition.describe() if p.block else None,
        "marker": p.entry.marker,
        "timeout_minutes": p.entry.timeout,
        "isolation": p.entry.isolation,
        "stages": [{"name": r.stage, "class": r.pr_class, "shard": r.shard, "splits": r.splits,
                    "verdict": r.verdict, "assumed": list(r.assumed),
                    "waived_by": [{"path": w.loc.path, "line": w.loc.line} for w in r.waived_by]}
                   for r in p.runs],
        "waived_by": [{"path": w.loc.path, "line": w.loc.line}
                      for w in dict.fromkeys([*p.waived_by,
                                              *(w for r in p.runs for w in r.waived_by)])],
        "assumed": p.assumed,
        "assumed_keys": sorted({k for r in p.runs for k in r.assumed}),
    }


def test_record(t: TestWhere) -> dict[str, Any]:
    return {"id": t.id, "verdict": t.verdict, "via": t.via or None,
            "placements": [placement_record(p) for p in t.placements]}


test_record.__test__ = False  # type: ignore[attr-defined]  # not a pytest test function

WHERE_TABLE_VERSION = 1


def where_table(src: Any, *, use_cache: bool = True) -> tuple[dict[str, str], list[Diagnostic]]:
    """Every listed test id's ``where`` record as JSON text, and the plan's diagnostics.

    Kept in a cache file beside the index's (same content key), so a warm ``where`` parses the
    records it prints instead of unpickling the whole index."""
    from testdb.index import load_sources, read_all, side_cache_get, side_cache_put
    from testdb.schedule import verdict_for

    read = read_all(src)
    key = read[3]
    name = f"where{WHERE_TABLE_VERSION}"
    if use_cache:
        hit = side_cache_get(key, name)
        if isinstance(hit, tuple) and len(hit) == 2:
            table, diags = hit
            return table, [Diagnostic(SourceLoc(p, ln), Severity(sev), msg, rule)
                           for p, ln, sev, msg, rule in diags]
    index = load_sources(src, use_cache=use_cache, read=read)
    sched: Schedule = index.schedule
    table = {tid: json.dumps(test_record(TestWhere(tid, verdict_for(list(pl)), tuple(pl))),
                             ensure_ascii=False)
             for tid, pl in sched.placements.items()}
    if use_cache:
        side_cache_put(key, name, (table, [(d.loc.path, d.loc.line, d.severity.value, d.message,
                                            d.rule) for d in index.diagnostics]))
    return table, list(index.diagnostics)
