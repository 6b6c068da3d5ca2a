"""Replay records: one compact, JSON-able record per audited commit (ids and stages only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from testdb.errors import InputError

REPLAY_SCHEMA = "testdb-audit/replay@1"
RECORD_VERSION = 1
# The five buckets a behaviour change's verdict falls into (the totals' shares).
SHARES = ("pre-merge", "gated", "post-merge", "qa-only", "unguarded")
SHARE_TITLES = {"pre-merge": "guarded pre-merge", "gated": "only gated (gate closed)",
                "post-merge": "only post-merge", "qa-only": "QA-only",
                "unguarded": "unguarded (no guard runs)"}
# The module tier (a test module imports the changed module) is the one unspecific tier.
WEAK_TIERS = frozenset({"module"})


def share_of(verdict: str) -> str:
    """The bucket of a verdict; every word that is not a run (waived, unscheduled, invalid,
    unguarded, or one this version does not know) counts as unguarded: never a false green."""
    return {"pre-merge": "pre-merge", "gated": "gated", "post-merge-only": "post-merge",
            "qa-only": "qa-only"}.get(verdict, "unguarded")


def is_specific(tier: str | None) -> bool:
    return bool(tier) and tier not in WEAK_TIERS


@dataclass(frozen=True)
class GuardRef:
    """A guard as the audit judged it at that commit: id, verdict for that change, via line."""

    test_id: str
    effective: str
    via: str = ""  # the unittest/... selection line that runs a unit test
    strength: str = ""
    decides: bool = False  # of the level whose links decide the verdict (not context)

    def names(self, test: str) -> bool:
        """Whether this guard is the test ``test`` (a node id or a unit-test selection)."""
        return test in (self.test_id, self.via) if self.via else test == self.test_id


@dataclass(frozen=True)
class BehaviourRecord:
    path: str
    function: str
    status: str
    line: int
    verdict: str
    tier: str | None
    guards: dict[str, tuple[GuardRef, ...]] = field(default_factory=dict)  # tier -> guards
    counts: dict[str, int] = field(default_factory=dict)  # tier -> how many the audit found
    deciding_count: int = 0  # how many links the deciding level has (the record may hold fewer)

    @property
    def key(self) -> str:
        return f"{self.path}::{self.function}"

    @property
    def share(self) -> str:
        return share_of(self.verdict)

    @property
    def deciding(self) -> tuple[GuardRef, ...]:
        """The guards whose verdicts decide the behaviour's (the deciding level)."""
        return tuple(g for g in self.guards.get(self.tier or "", ()) if g.decides)

    @property
    def complete(self) -> bool:
        """Whether the record holds every guard of the deciding level (the audit keeps only
        the first few of a large module tier)."""
        return len(self.deciding) >= self.deciding_count

    def link(self, test: str) -> str | None:
        """The most specific tier whose guards name ``test``, if any."""
        return next((t for t, gs in self.guards.items() if any(g.names(test) for g in gs)), None)


@dataclass(frozen=True)
class FindingRecord:
    severity: str
    rule: str
    function: str
    path: str
    line: int
    guards: tuple[str, ...] = ()
    stages: tuple[str, ...] = ()
    message: str = ""


@dataclass(frozen=True)
class WaiveChange:
    """A waives.txt line for a test added, removed or changed by the commit."""

    test: str
    change: str  # "added" | "removed" | "changed"
    marker: str
    reason: str
    gpu: str | None
    line: int


@dataclass(frozen=True)
class CommitRecord:
    sha: str
    parent: str | None
    subject: str
    date: str
    status: str  # "audited" | "failed" (the audit could not run: error says why) | "root"
    parents: int = 1
    error: str = ""
    behaviours: tuple[BehaviourRecord, ...] = ()
    findings: tuple[FindingRecord, ...] = ()
    gates: dict[str, Any] = field(default_factory=dict)
    opened: tuple[str, ...] = ()  # PR classes of gated runs the change opened
    list_changes: tuple[dict[str, Any], ...] = ()
    changed_tests: tuple[str, ...] = ()
    waive_changes: tuple[WaiveChange, ...] = ()
    plan_errors: tuple[str, ...] = ()  # the test plan's own errors at this commit
    seconds: float = 0.0

    @property
    def audited(self) -> bool:
        return self.status == "audited"

    @property
    def short(self) -> str:
        return self.sha[:10]


# ---- JSON -----------------------------------------------------------------------------------

def record_json(r: CommitRecord) -> dict[str, Any]:
    return {
        "sha": r.sha, "parent": r.parent, "parents": r.parents, "subject": r.subject,
        "date": r.date, "status": r.status, "error": r.error, "seconds": round(r.seconds, 3),
        "behaviours": [{
            "path": b.path, "function": b.function, "status": b.status, "line": b.line,
            "verdict": b.verdict, "share": b.share, "tier": b.tier,
            "guards": {t: [[g.test_id, g.effective, g.via, g.strength, int(g.decides)]
                           for g in gs] for t, gs in b.guards.items()},
            "counts": b.counts, "deciding_count": b.deciding_count} for b in r.behaviours],
        "findings": [{"severity": f.severity, "rule": f.rule, "function": f.function,
                      "path": f.path, "line": f.line, "guards": list(f.guards),
                      "stages": list(f.stages), "message": f.message} for f in r.findings],
        "gates": r.gates, "opened": list(r.opened), "list_changes": list(r.list_changes),
        "changed_tests": list(r.changed_tests),
        "waive_changes": [{"test": w.test, "change": w.change, "marker": w.marker,
                           "reason": w.reason, "gpu": w.gpu, "line": w.line}
                          for w in r.waive_changes],
        "plan_errors": list(r.plan_errors),
    }


class _Reader:
    def __init__(self, shown: str) -> None:
        self.shown = shown

    def fail(self, where: str, what: str) -> InputError:
        return InputError(f"{self.shown}: {where}: {what}",
                          hint="write the file with `testdb replay RANGE --format json -o FILE`")

    def get(self, d: Any, key: str, kind: type | tuple[type, ...], where: str,
            default: Any = ...) -> Any:
        if not isinstance(d, dict):
            raise self.fail(where, "expected an object")
        if key not in d:
            if default is ...:
                raise self.fail(where, f"missing key {key!r}")
            return default
        v = d[key]
        if not isinstance(v, kind) or (isinstance(v, bool) and kind in (int, float)):
            raise self.fail(f"{where}.{key}", f"unexpected {type(v).__name__}")
        return v


def record_from_json(d: Any, shown: str, where: str = "commit") -> CommitRecord:
    """A record from its JSON form; InputError naming the place on any shape mismatch."""
    rd = _Reader(shown)
    behaviours = []
    for i, b in enumerate(rd.get(d, "behaviours", list, where, [])):
        w = f"{where}.behaviours[{i}]"
        guards: dict[str, tuple[GuardRef, ...]] = {}
        for tier, gs in rd.get(b, "guards", dict, w, {}).items():
            refs = []
            for g in gs if isinstance(gs, list) else []:
                if not (isinstance(g, list) and len(g) == 5
                        and all(isinstance(x, str) for x in g[:4]) and g[4] in (0, 1)):
                    raise rd.fail(f"{w}.guards.{tier}",
                                  "expected [id, verdict, via, strength, decides]")
                refs.append(GuardRef(g[0], g[1], g[2], g[3], bool(g[4])))
            guards[str(tier)] = tuple(refs)
        counts = {str(k): int(v) for k, v in rd.get(b, "counts", dict, w, {}).items()
                  if isinstance(v, int)}
        behaviours.append(BehaviourRecord(
            rd.get(b, "path", str, w), rd.get(b, "function", str, w),
            rd.get(b, "status", str, w, ""), rd.get(b, "line", int, w, 0),
            rd.get(b, "verdict", str, w), rd.get(b, "tier", (str, type(None)), w, None),
            guards, counts, rd.get(b, "deciding_count", int, w, 0)))
    findings = []
    for i, f in enumerate(rd.get(d, "findings", list, where, [])):
        w = f"{where}.findings[{i}]"
        findings.append(FindingRecord(
            rd.get(f, "severity", str, w), rd.get(f, "rule", str, w, ""),
            rd.get(f, "function", str, w, ""), rd.get(f, "path", str, w, ""),
            rd.get(f, "line", int, w, 0), tuple(str(x) for x in rd.get(f, "guards", list, w, [])),
            tuple(str(x) for x in rd.get(f, "stages", list, w, [])),
            rd.get(f, "message", str, w, "")))
    waives = []
    for i, x in enumerate(rd.get(d, "waive_changes", list, where, [])):
        w = f"{where}.waive_changes[{i}]"
        waives.append(WaiveChange(rd.get(x, "test", str, w), rd.get(x, "change", str, w),
                                  rd.get(x, "marker", str, w, ""), rd.get(x, "reason", str, w, ""),
                                  rd.get(x, "gpu", (str, type(None)), w, None),
                                  rd.get(x, "line", int, w, 0)))
    return CommitRecord(
        sha=rd.get(d, "sha", str, where), parent=rd.get(d, "parent", (str, type(None)), where),
        subject=rd.get(d, "subject", str, where, ""), date=rd.get(d, "date", str, where, ""),
        status=rd.get(d, "status", str, where), parents=rd.get(d, "parents", int, where, 1),
        error=rd.get(d, "error", str, where, ""), behaviours=tuple(behaviours),
        findings=tuple(findings), gates=rd.get(d, "gates", dict, where, {}),
        opened=tuple(str(x) for x in rd.get(d, "opened", list, where, [])),
        list_changes=tuple(x for x in rd.get(d, "list_changes", list, where, [])
                           if isinstance(x, dict)),
        changed_tests=tuple(str(x) for x in rd.get(d, "changed_tests", list, where, [])),
        waive_changes=tuple(waives),
        plan_errors=tuple(str(x) for x in rd.get(d, "plan_errors", list, where, [])),
        seconds=float(rd.get(d, "seconds", (int, float), where, 0.0)))
