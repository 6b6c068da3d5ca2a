"""The audit's output model: behaviours, guard links, findings, provenance."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

AUDIT_SCHEMA = "testdb-audit/audit@2"
TIERS = ("coverage", "parameter", "symbol", "path-rule", "removed-module", "declared", "module")
TIER_TITLES = {
    "coverage": "executed the changed lines (coverage contexts)",
    "parameter": "parametrization names a changed token",
    "symbol": "imports or calls the changed code",
    "path-rule": "a path rule links the changed file to it",
    "removed-module": "imports the removed module's old path (fails at collection)",
    "declared": "test changed in this diff that reaches the changed code",
    "module": "test module imports the changed module",
}


@dataclass(frozen=True)
class Run:
    """Where a guard runs: one stage shard or a QA list, whether this PR's pipeline starts it
    and why (testdb.pipeline.pr_stages), with the list line that schedules it."""

    stage: str
    kind: str  # "stage" | "qa"
    shard: int
    splits: int
    path: str  # the list line that schedules it
    line: int
    block_line: int | None
    waived: bool
    placement: str = ""  # the stage for a PR that opens nothing: pre-merge|gated|post-merge-only
    started: bool = False  # this PR's pipeline starts the stage
    why: str = ""  # why it does (or does not)


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
    rank: int = 1  # the strength inside its tier (auditor.evidence.LEVELS), 1 = strongest


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
    tier: str | None = None  # the tier of the deciding level (the most specific with links)
    rank: int | None = None  # ... and its rank inside the tier
    verdict: str = "unguarded"
    pre_merge_guards: list[str] = field(default_factory=list)  # of the deciding level only
    deciding_count: int = 0  # links of the deciding level (all counted; context never is)
    # Pre-merge links of a deciding level that cannot guard (auditor.evidence.CAN_GUARD): the
    # verdict is then "unguarded", and these are weak links, never pre-merge guards.
    weak_links: list[str] = field(default_factory=list)

    def decides(self, g: Guard) -> bool:
        """Whether a guard is one the verdict counts: of the deciding level, naming a test."""
        return (g.tier, g.rank) == (self.tier, self.rank) and g.effective != "invalid"

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
    pipeline: dict[str, Any] = field(default_factory=dict)  # PrPipeline.to_json()
    suggestion: dict[str, Any] = field(default_factory=dict)  # auditor.suggest: /bot run + cost

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    def missing_stages(self) -> list[str]:
        """Exact shard stages that would run every not-pre-merge guard of the findings."""
        return sorted({s for f in self.findings for s in f.stages})
