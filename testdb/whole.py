"""``where`` shows whole functions: listed ids checked against the sources, unlisted ones too.

Given the ``where`` records of the listed ids a pattern names (``testdb.query.test_record``
shape), ``whole_functions`` checks each against the checkout's inventory (``testdb.names``): an
id that names no test becomes ``invalid`` (its lines run nowhere: CI ignores them), and every
parametrization the inventory knows that the pattern names and no list does is added as
``unscheduled`` ("in no test list: never runs in CI"). Without test sources (a checkout of
lists only, like ``data/trtllm``) the records stay as they are and say "not checked against
sources". ``did_you_mean`` answers a pattern that names nothing.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from testdb.inventory.tree import INTEGRATION_DIR, SOURCE_DIRS, has_test_sources
from testdb.query import match_ids

if TYPE_CHECKING:
    from testdb.names import NameCheck, NameChecker

# testdb.schedule.VERDICTS (a test checks they agree): a warm `where` of a checkout without
# sources imports neither the schedule nor testdb.names.
VERDICT_ORDER = ("pre-merge", "gated", "post-merge-only", "qa-only", "waived", "unscheduled",
                 "invalid")
UNLISTED_MEANING = "in no test list: never runs in CI"
NO_SOURCES = "not checked against sources: no test sources in this checkout"
__all__ = ["INTEGRATION_DIR", "NO_SOURCES", "SOURCE_DIRS", "UNLISTED_MEANING", "VERDICT_ORDER",
           "checked", "did_you_mean", "has_test_sources", "not_checked_reason", "unbalanced",
           "unlisted_record", "verdict_counts", "whole_functions"]


def checked(record: dict[str, Any], check: NameCheck | None) -> dict[str, Any]:
    """A listed id's record with its check against the sources. An ``invalid`` id keeps its
    lines (to fix them) but no stage runs them; ``schedule_verdict`` says what they would give
    if the id named a test."""
    if check is None:
        return record
    rec = dict(record, check=check.to_json())
    if check.status == "invalid":
        rec["schedule_verdict"] = record["verdict"]
        rec["verdict"] = "invalid"
        rec["placements"] = [dict(p, stages=[]) for p in record["placements"]]
    return rec


def unlisted_record(item: Any) -> dict[str, Any]:
    """The record of a parametrization no list names (``testdb.inventory.InventoryItem``)."""
    return {"id": item.nodeid, "verdict": "unscheduled", "via": None, "placements": [],
            "listed": False, "defined_at": {"path": item.loc.path, "line": item.loc.line},
            "check": {"status": "valid", "reason": UNLISTED_MEANING, "nearest": [], "more": 0}}


def whole_functions(records: list[dict[str, Any]], pattern: str, inventory: Any,
                    checker: NameChecker | None = None) -> list[dict[str, Any]]:
    """``records`` checked, plus the inventory's unlisted parametrizations ``pattern`` names,
    sorted by id. Unit-test ids are placed through their selections (``testdb.query.where``),
    so they are neither checked nor added here."""
    if checker is None and (inventory is None or not len(inventory)):
        unchecked = {"status": "not-checked", "reason": NO_SOURCES, "nearest": [], "more": 0}
        return [r if r["id"].startswith("unittest/") else dict(r, check=unchecked)
                for r in records]
    if checker is None:
        from testdb.names import NameChecker

        checker = NameChecker(inventory)
    out = [checked(r, None if r["id"].startswith("unittest/") else checker.check(r["id"]))
           for r in records]
    if checker.has_sources:
        seen = {r["id"] for r in out}
        ids = _candidate_ids(inventory, pattern)
        wanted = [t for t in (match_ids(ids, pattern) if ids else ())
                  if t not in seen and not t.startswith("unittest/")]
        by_file: dict[str, list[str]] = {}
        for tid in wanted:
            by_file.setdefault(tid.partition("::")[0], []).append(tid)
        for file, tids in by_file.items():
            # one pass over the file's items (a whole file of 1,800 ids named at once)
            items = {i.nodeid: i for i in inventory.by_file(file)}
            for tid in tids:
                item = items.get(tid) or inventory.get(tid)
                if item is not None and not item.indeterminate and not item.is_placeholder:
                    out.append(unlisted_record(item))
    return sorted(out, key=lambda r: str(r["id"]))


def _candidate_ids(inventory: Any, pattern: str) -> list[str]:
    """The inventory ids a pattern could name: those of the files it names when it starts
    with a file path without wildcards (``file.py``, ``dir/file.py::Class``: a packed
    inventory then reads those files alone), else every id (a packed inventory reads only
    the files whose names can match: `PackedInventory.ids_naming`)."""
    file = pattern.strip().partition("::")[0]
    if file.endswith(".py") and not any(c in file for c in "*?["):
        files = [f for f in inventory.files() if f == file or f.endswith("/" + file)]
        return [i.nodeid for f in files for i in inventory.by_file(f) if not i.is_placeholder]
    naming = getattr(inventory, "ids_naming", None)  # a packed inventory: its names record
    if naming is not None and not any(c in pattern for c in "*?"):
        named: list[str] = naming(pattern)
        return named
    ids: list[str] = inventory.ids()
    return ids


def verdict_counts(records: list[dict[str, Any]]) -> dict[str, int]:
    """How many records have each verdict, in ``VERDICTS`` order."""
    counts = Counter(str(r["verdict"]) for r in records)
    return {v: counts[v] for v in VERDICT_ORDER if counts[v]}


def not_checked_reason(records: list[dict[str, Any]]) -> str | None:
    """The one reason shared by every record that was not checked for lack of sources."""
    reasons = {r.get("check", {}).get("reason") for r in records
               if r.get("check", {}).get("status") == "not-checked"}
    shared = [r for r in reasons if r and "no test sources" in r]
    return shared[0] if shared else None


def unbalanced(pattern: str) -> bool:
    """A ``[`` without its ``]`` (or the reverse): ids close every bracket they open."""
    depth = 0
    for ch in pattern:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                return True
    return depth != 0


def did_you_mean(ids: list[str], pattern: str, limit: int = 3) -> list[str]:
    """Ids (or functions, classes, files) near a pattern that names none of ``ids``: with
    ``[params]`` on a function that exists, its closest parametrizations; else the names
    closest to it as a whole, compared over as many ``::`` parts as it has (``Class::func``
    with ``Class::func``, as CI's corrector compares them), each within
    ``testdb.names.name_budget`` edits of it: nothing rather than noise."""
    from testdb.names import edit_distance, name_budget, rank_params

    text = pattern.strip().replace("*", "").replace("?", "")
    b = text.find("[")
    head, params = (text, None) if b < 0 else (text[:b], text[b + 1:].removesuffix("]"))
    heads: dict[str, list[str]] = {}
    for i in ids:
        k = i.find("[")
        heads.setdefault(i if k < 0 else i[:k], []).append(i)
    if params is not None and head:
        same = [h for h in heads if h == head or h.endswith(("::" + head, "/" + head))]
        if same:
            cands = {i[len(h) + 1:-1]: h for h in same for i in heads[h] if i != h}
            return [f"{cands[p]}[{p}]" for p in rank_params(params, list(cands), limit)]
    want = head.strip(":/")
    if not want:
        return []
    parts = want.count("::") + 1
    bound = name_budget(want)
    scored: dict[str, tuple[int, int]] = {}  # suggestion -> (edits, first seen)
    memo: dict[str, int | None] = {}  # classes, files and names recur across ids
    for h in heads:
        scopes = h.split("::")
        # the function's own name, then each class or file holding it (a scope of tests)
        for end in range(len(scopes), 0, -1):
            start = max(0, end - parts)
            tail = scopes[start:end]
            if start == 0 and "/" not in want:  # the file as named: by its base name
                tail = [tail[0].rsplit("/", 1)[-1], *tail[1:]]
            key = "::".join(tail)
            d = memo[key] if key in memo else memo.setdefault(key, edit_distance(want, key,
                                                                                 bound))
            if d is not None:
                scored.setdefault("::".join(scopes[:end]), (d, len(scored)))
    return sorted(scored, key=lambda n: scored[n])[:limit]
