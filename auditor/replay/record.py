"""One commit's audit turned into its compact replay record, and the waive lines it changed."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from auditor.model import TIERS
from auditor.replay.gitsource import CommitInfo
from auditor.replay.model import (
    BehaviourRecord,
    CommitRecord,
    FindingRecord,
    GuardRef,
    WaiveChange,
)
from testdb.grammar import Entry
from testdb.lists import load_list_text

MAX_CHANGED_TESTS = 200
MAX_MESSAGE = 600
WAIVE_MARKERS = ("SKIP", "XFAIL")  # the markers that say a test broke (UNSTABLE does not)


def _tier_order(tiers: Iterable[str]) -> list[str]:
    rank = {t: i for i, t in enumerate(TIERS)}
    return sorted(tiers, key=lambda t: (rank.get(t, len(rank)), t))


def behaviour_record(b: Any) -> BehaviourRecord:
    """The parts of an audit behaviour the replay keeps. Read by attribute name with defaults,
    so that fields the audit adds later do not break it."""
    guards_in: dict[str, list[Any]] = dict(getattr(b, "guards", {}) or {})
    tier = getattr(b, "tier", None)
    decides = getattr(b, "decides", None)  # the audit's own rule, where it has one

    def ref(t: str, g: Any) -> GuardRef:
        return GuardRef(str(g.test_id), str(getattr(g, "effective", "") or ""),
                        str(getattr(g, "via", "") or ""), str(getattr(g, "strength", "") or ""),
                        bool(decides(g)) if callable(decides) else t == tier)

    guards = {t: tuple(ref(t, g) for g in guards_in[t]) for t in _tier_order(guards_in)}
    counts = {t: int(n) for t, n in (getattr(b, "guard_counts", {}) or {}).items()}
    for t, gs in guards.items():
        counts[t] = max(counts.get(t, 0), len(gs))
    deciding = sum(1 for gs in guards.values() for g in gs if g.decides)
    return BehaviourRecord(str(b.path), str(getattr(b, "qualname", "") or ""),
                           str(getattr(b, "status", "")), int(getattr(b, "line", 0) or 0),
                           str(b.verdict), tier, guards, counts,
                           max(int(getattr(b, "deciding_count", 0) or 0), deciding))


def finding_record(f: Any) -> FindingRecord:
    msg = str(getattr(f, "message", ""))
    return FindingRecord(str(f.severity), str(getattr(f, "rule", "") or ""),
                         str(getattr(f, "function", "") or ""), str(getattr(f, "path", "")),
                         int(getattr(f, "line", 0) or 0),
                         tuple(str(x) for x in getattr(f, "guards", ()) or ()),
                         tuple(str(x) for x in getattr(f, "stages", ()) or ()),
                         msg if len(msg) <= MAX_MESSAGE else msg[:MAX_MESSAGE - 1] + "…")


def _list_change(lc: Any) -> dict[str, Any]:
    keep = ("kind", "test", "context", "path", "line")
    d = lc if isinstance(lc, dict) else getattr(lc, "__dict__", {})
    return {k: d[k] for k in keep if k in d}


def opened_classes(audit: Any) -> tuple[str, ...]:
    """What this change's pipeline opened, as the audit's own runs say: the stages of runs it
    opened or started (and their PR classes, where the audit names them), and the gates."""
    found: set[str] = set()
    for b in audit.behaviours:
        for gs in (b.guards or {}).values():
            for g in gs:
                for r in getattr(g, "runs", ()):
                    if getattr(r, "opened", False) or getattr(r, "started", False) is True:
                        found.add(str(r.stage))
                        found.add(str(getattr(r, "pr_class", "") or ""))
    found.discard("")
    gates = audit.gates or {}
    if gates.get("multi_gpu"):
        found.add("gated-multi-gpu")
    found.update(f"gated-auto-trigger:{t}" for t in gates.get("auto_trigger_tags") or ())
    return tuple(sorted(found))


def commit_record(info: CommitInfo, audit: Any, *, waives: tuple[WaiveChange, ...] = (),
                  plan_errors: tuple[str, ...] = (), seconds: float = 0.0) -> CommitRecord:
    changed: list[str] = []
    for ct in getattr(audit, "changed_tests", []) or []:
        ids = ct.get("ids", []) if isinstance(ct, dict) else getattr(ct, "ids", [])
        changed += [str(t) for t in ids]
    return CommitRecord(
        info.sha, info.parent, info.subject, info.date, "audited", parents=info.parents,
        behaviours=tuple(behaviour_record(b) for b in audit.behaviours),
        findings=tuple(finding_record(f) for f in audit.findings),
        gates=dict(audit.gates or {}), opened=opened_classes(audit),
        list_changes=tuple(_list_change(lc) for lc in getattr(audit, "list_changes", []) or []),
        changed_tests=tuple(dict.fromkeys(changed))[:MAX_CHANGED_TESTS],
        waive_changes=waives, plan_errors=plan_errors, seconds=seconds)


def failed_record(info: CommitInfo, error: str, seconds: float = 0.0) -> CommitRecord:
    return CommitRecord(info.sha, info.parent, info.subject, info.date, "failed",
                        parents=info.parents, error=error, seconds=seconds)


def root_record(info: CommitInfo) -> CommitRecord:
    return CommitRecord(info.sha, None, info.subject, info.date, "root", parents=0,
                        error="a root commit has no parent to audit against")


# ---- waives ---------------------------------------------------------------------------------

def _waive_lines(text: str | None, path: str) -> dict[tuple[str, str | None], Entry]:
    if not text:
        return {}
    return {(e.test, e.gpu_prefix): e for e in load_list_text(text, path, waive=True).entries}


def waive_changes(old: str | None, new: str | None, path: str) -> tuple[WaiveChange, ...]:
    """The waive lines (per test and GPU prefix) the commit added, removed or changed."""
    a, b = _waive_lines(old, path), _waive_lines(new, path)
    out = []
    for key in sorted(set(a) | set(b), key=lambda k: (k[0], k[1] or "")):
        before, after = a.get(key), b.get(key)
        if after is not None and before is None:
            kind = "added"
        elif after is None and before is not None:
            kind = "removed"
        elif (before is not None and after is not None
              and (before.marker, before.reason) != (after.marker, after.reason)):
            kind = "changed"
        else:
            continue
        e = after or before
        assert e is not None
        out.append(WaiveChange(key[0], kind, e.marker or "", e.reason or "", key[1],
                               e.loc.line))
    return tuple(out)
