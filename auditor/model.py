"""The audit's output model: behaviours, guard links, findings, provenance."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

AUDIT_SCHEMA = "testdb-audit/audit@1"
TIERS = ("coverage", "parameter", "symbol", "path-rule", "declared", "module")
TIER_TITLES = {
    "coverage": "executed the changed lines (coverage contexts)",
    "parameter": "parametrization names a changed token",
    "symbol": "imports or calls the changed code",
    "path-rule": "a path rule links the changed file to it",
    "declared": "test changed in this diff that reaches the changed code",
    "module": "test module imports the changed module",
}


@dataclass(frozen=True)
class Run:
    """Where a guard runs: one stage (with shard and class) or a QA list, with its evidence."""

    stage: str
    pr_class: str
    shard: int
    splits: int
    path: str  # the list line that schedules it
    line: int
    block_line: int | None
    waived: bool
    opened: bool = False  # a gated stage this change's files open


@dataclass(frozen=True)
class Guard:
    """A test parametrization linked to a behaviour, with why and how strongly."""

    test_id: str
    tier: str
    reason: str
    strength: str  # "strong" | "medium" | "weak"
    verdict: str  # schedule verdict (testdb where)
    effective: str  # verdict for this change: gated stages count only when the change opens them
    runs: tuple[Run, ...] = ()
    via: str = ""  # the unittest selection line that runs it, for unit tests
    distance: int | None = None
    path: str = ""  # test source file:line, when known
    line: int = 0


@dataclass
class BehaviourResult:
    path: str
    module: str
    qualname: str
    kind: str
    status: str
    line: int
    added: tuple[int, ...]
    removed: tuple[int, ...]
    tokens: tuple[str, ...]
    guards: dict[str, list[Guard]] = field(default_factory=dict)  # tier -> guards
    guard_counts: dict[str, int] = field(default_factory=dict)  # tier -> all its guards
    tier: str | None = None  # the most specific tier with links
    verdict: str = "unguarded"
    pre_merge_guards: list[str] = field(default_factory=list)

    @property
    def guarded(self) -> bool:
        return self.verdict == "pre-merge"


@dataclass(frozen=True)
class Finding:
    severity: str  # "error" | "warning" | "info"
    rule: str
    path: str
    line: int
    message: str
    function: str = ""
    guards: tuple[str, ...] = ()
    stages: tuple[str, ...] = ()  # shard stages that would run the missing guards
    headline: str = ""  # a few words for the audit's first line ("the X half of ... post-merge")


@dataclass
class Audit:
    provenance: dict[str, Any]
    behaviours: list[BehaviourResult] = field(default_factory=list)
    changed_tests: list[dict[str, Any]] = field(default_factory=list)
    list_changes: list[dict[str, Any]] = field(default_factory=list)
    unlinked: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    gates: dict[str, Any] = field(default_factory=dict)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    def missing_stages(self) -> list[str]:
        """Exact shard stages that would run every not-pre-merge guard of the findings."""
        return sorted({s for f in self.findings for s in f.stages})
