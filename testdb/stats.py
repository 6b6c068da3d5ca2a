"""Counts over a loaded test plan (``testdb stats``), cached under the plan's content key."""

from __future__ import annotations

import marshal
import os
from collections import Counter
from typing import TYPE_CHECKING, Any

from testdb.caveats import verdict_caveats
from testdb.files import read_cache, write_cache
from testdb.stamp import cache_dir

if TYPE_CHECKING:
    from testdb.index import Index

# Only what a warm `testdb stats` needs is imported here (testdb.index and the records are
# not): its answer is the cached one, and computing every verdict again cost more than the
# rest of the command.

STATS_SCHEMA = "testdb-audit/stats@1"
_CACHE_VERSION = 3  # 2: verdicts checked against the sources, and how ("names"); 3: caveats

# (path, line, severity, message, rule): a diagnostic as the stats cache keeps it
DiagRow = tuple[str, int, str, str, str]


NOT_CHECKED = "not checked against sources"


def checked_verdicts(index: Index, checker: Any = None) -> tuple[Counter[str], dict[str, Any]]:
    """Each listed id's verdict, as ``where`` and the HTML report give it: ``invalid`` when
    the sources say it names no test (``testdb.names.NameChecker``; unit-test lines are
    selections, not checked), else the schedule's. And how the ids were checked: against
    sources or not, and how many could not be (ids computed at run time)."""
    sched = index.schedule
    if not sched:
        return Counter(), {"checked": False, "not_checked": 0, "reason": NOT_CHECKED}
    if checker is None or not checker.has_sources:
        return (Counter(sched.verdict(t) for t in sched.placements),
                {"checked": False, "not_checked": len(sched.placements),
                 "reason": f"{NOT_CHECKED}: no test sources in this checkout"})
    verdicts: Counter[str] = Counter()
    unknown = 0
    for t in sched.placements:
        status = "unit" if t.startswith("unittest/") else checker.check(t).status
        unknown += status == "not-checked"
        verdicts["invalid" if status == "invalid" else sched.verdict(t)] += 1
    return verdicts, {"checked": True, "not_checked": unknown,
                      "reason": f"{NOT_CHECKED}: ids computed at run time" if unknown else ""}


def compute_stats(index: Index, checker: Any = None) -> dict[str, Any]:
    """The counts of ``testdb stats``; ``checker``: a ``testdb.names.NameChecker`` over the
    checkout's inventory, when it has test sources (verdicts then count ``invalid``)."""
    from testdb.errors import Severity

    l0 = [c for c in index.contexts.values() if c.kind == "l0"]
    qa_ctx = [c for c in index.contexts.values() if c.kind == "qa"]
    entries = [e for c in l0 for e in c.entries]
    kinds = Counter(e.kind for e in entries)
    sev = Counter(d.severity.value for d in index.diagnostics)
    sched = index.schedule
    verdicts, names = checked_verdicts(index, checker)
    return {
        "schema": STATS_SCHEMA,
        "root": index.root,
        "files": len(index.files),
        "contexts": len(l0),
        "blocks": sum(len(c.blocks) for c in l0),
        "entries": len(entries),
        "entries_by_kind": {"nodeid": kinds["nodeid"], "unittest": kinds["unittest"],
                            "other": kinds["path"]},
        "entries_with_timeout": sum(1 for e in entries if e.timeout_minutes),
        "entries_with_isolation": sum(1 for e in entries if e.isolation),
        "qa_contexts": len(qa_ctx),
        "qa_context_entries": sum(len(c.entries) for c in qa_ctx),
        "qa_lists": len(index.qa_lists),
        "qa_list_entries": sum(len(q.entries) for q in index.qa_lists),
        "qa_lists_detail": {q.name: len(q.entries) for q in index.qa_lists},
        "waives": len(index.waives),
        "waives_by_marker": dict(sorted(Counter(w.marker or "SKIP" for w in index.waives)
                                        .items())),
        "waives_by_prefix": dict(sorted(Counter(w.gpu_prefix or "(all stages)"
                                                for w in index.waives).items())),
        "durations": len(index.durations),
        "stages": sum(1 for s in index.stages if not s.disabled),
        "stages_disabled": sum(1 for s in index.stages if s.disabled),
        "test_ids": len(sched.placements) if sched else 0,
        "verdicts": dict(verdicts),
        "caveats": list(verdict_caveats(index.triggers.source, verdicts)),  # rests on the gates
        "names": names,
        "skipped_files": [{"path": s.path, "reason": s.reason} for s in index.skipped],
        "errors": sev[Severity.ERROR.value],
        "warnings": sev[Severity.WARNING.value],
    }


def diagnostic_rows(index: Index) -> list[DiagRow]:
    return [(d.loc.path, d.loc.line, d.severity.value, d.message, d.rule)
            for d in index.diagnostics]


def stats_of(index: Index, *, use_cache: bool = True, checker: Any = None,
             inventory_key: str | None = None) -> tuple[dict[str, Any], list[DiagRow]]:
    """The stats and the diagnostics of a loaded plan: from the cache under its key (and the
    inventory's, when ``checker`` checks the ids against test sources), else computed (and
    cached). Everything in them depends on the keys alone but the root, which is the
    reader's. Checked counts without an ``inventory_key`` are not cached."""
    key = (index.key if checker is None
           else cache_key(index.key, inventory_key) if inventory_key else "")
    if use_cache and key:
        hit = cached_stats(key, index.root)
        if hit is not None:
            return hit
    data, diags = compute_stats(index, checker), diagnostic_rows(index)
    if use_cache and key:
        write_cache(_path(key), marshal.dumps(
            (_CACHE_VERSION, {k: v for k, v in data.items() if k != "root"}, diags)))
    return data, diags


def cache_key(plan_key: str, inventory_key: str | None) -> str:
    """The stats cache's key: the plan's, and the inventory's when ids were checked."""
    return f"{plan_key}-{inventory_key}" if inventory_key else plan_key


def cached_stats(key: str, root: str) -> tuple[dict[str, Any], list[DiagRow]] | None:
    """The cached stats under ``key`` (``cache_key``), as the checkout ``root``'s; None when
    missing, damaged or of another layout."""
    payload = read_cache(_path(key))
    try:
        version, data, diags = marshal.loads(payload) if payload is not None else (0, 0, 0)
    except (ValueError, EOFError, TypeError):
        return None
    if version != _CACHE_VERSION or not isinstance(data, dict) or not isinstance(diags, list):
        return None
    return {"schema": data.get("schema"), "root": root, **data}, diags


def _path(key: str) -> str:
    return os.path.join(cache_dir(), f"stats-{key}.marshal")
