"""Answer "where does this test run?" for a pattern: exact id, id without params, name, glob."""

from __future__ import annotations

import fnmatch
import json
import marshal
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from testdb.errors import Diagnostic, Severity, SourceLoc, UsageError

if TYPE_CHECKING:
    from testdb.index import Index, Plan
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
    """Test ids the pattern names, in a stable order: an exact id; a function (``func``,
    ``Class::func``, ``file.py::Class::func``: every parametrization) or one parametrization
    (``func[params]``); a scope holding tests (``Class``, ``file.py``, ``file.py::Class``,
    ``dir/``: every test in it); a glob. Names match whole parts (between ``::`` and ``/``)."""
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
    scope = pattern + "::"
    inner = ("::" + scope, "/" + scope)
    folder = pattern.rstrip("/")
    folder_ok = bool(folder) and "::" not in pattern and not folder.endswith(".py")
    below = (folder + "/", "/" + folder + "/")
    for i in ids:
        if pattern not in i:  # every kind of match below contains it: a cheap first test
            continue
        head = _head(i)
        if (head == pattern or head.endswith(tails) or i.endswith(tails)
                # `Class::func` or `func` names every parametrization; `func[params]` one
                or head.startswith(scope) or any(s in head for s in inner)
                # `Class`, `file.py`, `file.py::Class`: every test of that class or file
                or (folder_ok and _in_folder(head.partition("::")[0].split(" ", 1)[0], below))):
            # `dir/` (or `dir`): every test of the files below it
            out.append(i)
    return sorted(out)


def _in_folder(file: str, below: tuple[str, str]) -> bool:
    return file.startswith(below[0]) or below[1] in file


def _head(test_id: str) -> str:
    b = test_id.find("[")
    return test_id if b < 0 else test_id[:b]


def where(index: Index, pattern: str, inventory: Any = None,
          unit_ids: list[str] | None = None) -> list[TestWhere]:
    """Listed ids the pattern names, and (given an inventory) unit-test ids it names, each
    placed through the ``unittest/...`` selections that select it. ``unit_ids``: the unit-test
    ids the pattern names, when the caller has already matched them."""
    from testdb.schedule import verdict_for

    sched: Schedule = index.schedule
    ids = match_ids(list(sched.placements), pattern)
    out = [TestWhere(i, verdict_for(sched.placements[i]), tuple(sched.placements[i]))
           for i in ids]
    if inventory is not None:
        out += _unit_tests(index, inventory, pattern, set(ids), unit_ids)
    return out


def _unit_tests(index: Index, inventory: Any, pattern: str, seen: set[str],
                unit_ids: list[str] | None) -> list[TestWhere]:
    from testdb.inventory.select import SelectionIndex
    from testdb.schedule import verdict_for

    if unit_ids is None:
        units = [i for i in inventory.ids() if i.startswith("unittest/")]
        unit_ids = match_ids(units, pattern) if units else []
    matched = [u for u in unit_ids if u not in seen]
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
        "stages": [{"name": r.stage, "class": r.placement, "why": r.why, "shard": r.shard,
                    "splits": r.splits, "verdict": r.verdict, "assumed": list(r.assumed),
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

WHERE_TABLE_VERSION = 3


@dataclass(frozen=True)
class WhereLookup:
    """The ``where`` records (``test_record`` shape) of the listed ids a pattern names, the
    plan's diagnostics, and every listed id (for "did you mean" when the pattern names none)."""

    records: list[dict[str, Any]]
    diagnostics: list[Diagnostic]
    listed: list[str]


def where_records(plan: Plan, pattern: str, *, use_cache: bool = True
                  ) -> tuple[list[dict[str, Any]], list[Diagnostic]]:
    """The ``where`` records of the listed ids ``pattern`` names, and the plan's diagnostics
    (``where_lookup`` without the listed ids)."""
    got = where_lookup(plan, pattern, use_cache=use_cache)
    return got.records, got.diagnostics


def where_lookup(plan: Plan, pattern: str, *, use_cache: bool = True) -> WhereLookup:
    """See ``WhereLookup``. Every id's record is kept in a cache file beside the index's (same
    content key); a warm ``where`` reads the id list and then only the records it prints,
    instead of unpickling the whole index."""
    from testdb.files import Records
    from testdb.index import cache_dir

    path = os.path.join(cache_dir(), f"where{WHERE_TABLE_VERSION}-{plan.key}.records")
    table = Records.open(path) if use_cache else None
    if table is not None:
        try:
            ids, diags = marshal.loads(table.meta)
            position = {tid: i for i, tid in enumerate(ids)}
            raw = [table.get(position[tid]) for tid in match_ids(ids, pattern)]
            if len(ids) == len(table) and all(r is not None for r in raw):
                return WhereLookup([json.loads(r) for r in raw if r is not None],
                                   [Diagnostic(SourceLoc(p, ln), Severity(sev), msg, rule)
                                    for p, ln, sev, msg, rule in diags], ids)
        except (ValueError, EOFError, TypeError, KeyError):
            pass  # damaged: rebuilt below
        finally:
            table.close()
    return _where_records_afresh(plan, pattern, path, use_cache)


def _where_records_afresh(plan: Plan, pattern: str, path: str, use_cache: bool
                          ) -> WhereLookup:
    from testdb.files import write_records
    from testdb.index import load_sources
    from testdb.schedule import verdict_for

    index = load_sources(plan.src, use_cache=use_cache, read=plan.read, key=plan.key)
    sched: Schedule = index.schedule
    records = {tid: test_record(TestWhere(tid, verdict_for(list(pl)), tuple(pl)))
               for tid, pl in sched.placements.items()}
    if use_cache:
        diags = [(d.loc.path, d.loc.line, d.severity.value, d.message, d.rule)
                 for d in index.diagnostics]
        write_records(path, marshal.dumps((list(records), diags)),
                      [json.dumps(r, ensure_ascii=False).encode() for r in records.values()])
    ids = list(records)
    return WhereLookup([records[i] for i in match_ids(ids, pattern)], list(index.diagnostics),
                       ids)
