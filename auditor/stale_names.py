"""List lines that run nothing: a listed name that names no test where the change's guard is
meant (``stale-guard-name``), and listed ids that the change itself removes
(``listed-test-removed``).

CI keeps only collected items whose node id is exactly a listed name and ignores any other name
(``testdb.names``): a pre-merge line whose name is one parameter off the real id runs nothing,
however close it looks. The audit names such a line when the id it nearly names is a guard of
this change, so the reviewer learns that the line meant to guard it does not; and, for a change
that deletes a test function or empties, deletes or renames a test file, each list line that
named one of its ids and now names nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from auditor.model import Finding
from testdb.inventory.model import InventoryItem
from testdb.pipeline import PrPipeline, effective
from testdb.schedule import Placement


@dataclass(frozen=True)
class ListLine:
    """One test-db line naming an id, and where this PR's pipeline would run it."""

    test_id: str
    path: str
    line: int
    pre_merge: tuple[str, ...]  # the started, unwaived stages that run it before merge
    other: tuple[str, ...]  # the other unwaived stages that run it


def list_lines(test_id: str, placements: Iterable[Placement], pipeline: PrPipeline
               ) -> list[ListLine]:
    out = []
    for p in placements:
        if p.kind != "test-db":
            continue
        kept = pipeline.keeps(p.context, p.block, p.entry)
        pre = tuple(r.stage for r in p.runs if not r.waived_by
                    and effective(r.placement, pipeline.starts(r.stage) and kept)
                    == "pre-merge")
        other = tuple(r.stage for r in p.runs if not r.waived_by and r.stage not in pre)
        out.append(ListLine(test_id, p.entry.loc.path, p.entry.loc.line, pre, other))
    return out


def stale_guard_name(line: ListLine, nearest: str, nearest_verdict: str, function: str
                     ) -> Finding | None:
    """A pre-merge line whose name names no test while its nearest real id guards this change:
    the line meant to guard it runs nothing. None for a line this PR's pipeline does not run
    before merge (it would guard nothing pre-merge either way)."""
    if not line.pre_merge:
        return None
    name = line.path.rsplit("/", 1)[-1]
    return Finding(
        "warning", "stale-guard-name", line.path, line.line,
        f"{name}:{line.line} lists {line.test_id} in a pre-merge block; it names no test (CI "
        f"ignores it): did you mean {nearest} ({nearest_verdict})? It is linked to "
        f"{function}; the line runs nothing in {', '.join(line.pre_merge)}",
        function=function, guards=(nearest,),
        headline=f"{name}:{line.line} names no test (did you mean {nearest}?)")


def listed_test_removed(line: ListLine, why: str) -> Finding:
    """A list line whose id the change removes: an error when it ran pre-merge (the PR drops
    a pre-merge test and the line silently runs nothing), a warning otherwise."""
    name = line.path.rsplit("/", 1)[-1]
    ran = (f"it ran pre-merge in {', '.join(line.pre_merge)}" if line.pre_merge else
           f"it ran in {', '.join(line.other)}" if line.other else "no stage ran it")
    return Finding(
        "error" if line.pre_merge else "warning", "listed-test-removed", line.path, line.line,
        f"{name}:{line.line} lists {line.test_id}, which this change removes ({why}): the line "
        f"now names no test and CI ignores it; {ran}. Remove the line, or list the test that "
        "replaces it", guards=(line.test_id,), stages=(),
        headline=f"{name}:{line.line} lists a test this change removes")


@dataclass(frozen=True)
class FileIds:
    """One side of a test file, as the static inventory expands it."""

    ids: frozenset[str]  # the determinate ids
    functions: frozenset[str]  # every function's base id (``file::Class::test``)
    unsure: frozenset[str]  # functions whose ids are computed at run time
    broken: bool = False  # the file does not parse: its ids are unknown, not gone


def file_ids(items: Iterable[InventoryItem]) -> FileIds:
    ids: set[str] = set()
    functions: set[str] = set()
    unsure: set[str] = set()
    broken = False
    for it in items:
        broken = broken or bool(it.error)
        if it.is_placeholder or it.error:
            continue
        functions.add(it.base)
        if it.indeterminate:
            unsure.add(it.base)
        else:
            ids.add(it.nodeid)
    return FileIds(frozenset(ids), frozenset(functions), frozenset(unsure), broken)


def removed_by_change(test_id: str, base: FileIds, head: FileIds | None) -> bool:
    """Whether the change makes a listed id, which named a test on the base side, name none
    (``head`` None: the file is gone). An id not real before was stale already (not this
    change's doing); a head side that does not parse is another finding's."""
    fn = test_id.split("[", 1)[0]
    was = test_id in base.ids or fn in base.unsure
    if not was:
        return False
    if head is None:
        return True
    if head.broken:
        return False
    return fn not in head.functions or (test_id not in head.ids and fn not in head.unsure)
