"""Counts over a loaded test plan (``testdb stats``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from testdb.errors import Severity
from testdb.index import Index

STATS_SCHEMA = "testdb-audit/stats@1"


def compute_stats(index: Index) -> dict[str, Any]:
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
