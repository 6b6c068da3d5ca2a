"""Counts over a loaded test plan (``testdb stats``), cached under the plan's content key."""

from __future__ import annotations

import marshal
import os
from collections import Counter
from typing import TYPE_CHECKING, Any

from testdb.files import read_cache, write_cache
from testdb.stamp import cache_dir

if TYPE_CHECKING:
    from testdb.index import Index

# Only what a warm `testdb stats` needs is imported here (testdb.index and the records are
# not): its answer is the cached one, and computing every verdict again cost more than the
# rest of the command.

STATS_SCHEMA = "testdb-audit/stats@1"
_CACHE_VERSION = 1

# (path, line, severity, message, rule): a diagnostic as the stats cache keeps it
DiagRow = tuple[str, int, str, str, str]


def compute_stats(index: Index) -> dict[str, Any]:
    from testdb.errors import Severity

    l0 = [c for c in index.contexts.values() if c.kind == "l0"]
    qa_ctx = [c for c in index.contexts.values() if c.kind == "qa"]
    entries = [e for c in l0 for e in c.entries]
    kinds = Counter(e.kind for e in entries)
    sev = Counter(d.severity.value for d in index.diagnostics)
    sched = index.schedule
    verdicts = Counter(sched.verdict(t) for t in sched.placements) if sched else Counter()
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
        "skipped_files": [{"path": s.path, "reason": s.reason} for s in index.skipped],
        "errors": sev[Severity.ERROR.value],
        "warnings": sev[Severity.WARNING.value],
    }


def diagnostic_rows(index: Index) -> list[DiagRow]:
    return [(d.loc.path, d.loc.line, d.severity.value, d.message, d.rule)
            for d in index.diagnostics]


def stats_of(index: Index, *, use_cache: bool = True) -> tuple[dict[str, Any], list[DiagRow]]:
    """The stats and the diagnostics of a loaded plan: from the cache under its key, else
    computed (and cached). Everything in them depends on the key alone but the root, which
    is the reader's."""
    if use_cache and index.key:
        hit = cached_stats(index.key, index.root)
        if hit is not None:
            return hit
    data, diags = compute_stats(index), diagnostic_rows(index)
    if use_cache and index.key:
        write_cache(_path(index.key), marshal.dumps(
            (_CACHE_VERSION, {k: v for k, v in data.items() if k != "root"}, diags)))
    return data, diags


def cached_stats(key: str, root: str) -> tuple[dict[str, Any], list[DiagRow]] | None:
    """The cached stats of the plan with content key ``key``, as the checkout ``root``'s;
    None when missing, damaged or of another layout."""
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
