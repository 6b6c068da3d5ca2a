"""Score a replay against what broke: faulty changes, their culprits, recall per faulty change
(Machalica et al., ICSE-SEIP 2019) and the precision of error findings. Pure functions over
replay records; the outcomes and waive lines are the only inputs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from auditor.model import TIERS
from auditor.replay.model import BehaviourRecord, CommitRecord, is_specific
from auditor.replay.outcomes import Outcome
from auditor.replay.record import WAIVE_MARKERS

OUTCOMES = "outcomes"
WAIVES = "waives"
FLAGGING = ("error", "warning")


@dataclass(frozen=True)
class Break:
    """A test seen to break: the commits that may have broken it, oldest first."""

    test: str
    signal: str  # OUTCOMES | WAIVES
    seen_at: str  # the commit of the failing result, or of the waive line
    since: str | None  # the last passing result / the last change of the test's waive line
    window: tuple[str, ...]


@dataclass(frozen=True)
class FaultyChange:
    brk: Break
    culprit: str | None  # None: unattributed
    function: str = ""  # the culprit behaviour's path::function
    tier: str | None = None  # the tier by which it links the test
    suspects: tuple[str, ...] = ()  # every commit linking the test at that tier
    flagged: bool = False
    reason: str = ""


@dataclass(frozen=True)
class Score:
    signal: str
    faulty: tuple[FaultyChange, ...]
    errors: int  # error findings at the scored commits
    confirmed: int  # ... of them at a culprit, about its behaviour or naming the failing test
    scored_commits: int

    @property
    def flagged(self) -> int:
        return sum(1 for f in self.faulty if f.flagged)

    @property
    def recall(self) -> float | None:
        return self.flagged / len(self.faulty) if self.faulty else None

    @property
    def precision(self) -> float | None:
        return self.confirmed / self.errors if self.errors else None

    @property
    def missed(self) -> tuple[FaultyChange, ...]:
        return tuple(f for f in self.faulty if not f.flagged)


# ---- where tests broke ------------------------------------------------------------------------

def breaks_from_outcomes(order: Sequence[str], outcomes: Sequence[Outcome]) -> list[Break]:
    """A failure at C of a test whose previous result (at an earlier commit) was a pass: the
    commits after that pass up to C. Several results of one test at one commit (shards,
    stages) are a failure when any failed."""
    pos = {sha: i for i, sha in enumerate(order)}
    per: dict[str, dict[int, str]] = defaultdict(dict)
    for o in outcomes:
        if o.commit in pos:
            seen = per[o.test].get(pos[o.commit])
            per[o.test][pos[o.commit]] = "failed" if "failed" in (seen, o.outcome) else o.outcome
    out = []
    for test in sorted(per):
        results = sorted(per[test].items())
        for (p0, o0), (p1, o1) in pairwise(results):
            if o0 == "passed" and o1 == "failed":
                out.append(Break(test, OUTCOMES, order[p1], order[p0],
                                 tuple(order[p0 + 1:p1 + 1])))
    return sorted(out, key=lambda b: (pos[b.seen_at], b.test))


def breaks_from_waives(records: Sequence[CommitRecord]) -> list[Break]:
    """A waive line added for a test (SKIP or XFAIL, with a reason) says it broke: from after
    the last commit that changed that test's waive line (or the start of the range) up to the
    commit that waived it. A weaker signal than results: it is late and coarse."""
    out = []
    last: dict[str, int] = {}
    for i, r in enumerate(records):
        for w in r.waive_changes:
            if w.change == "added" and w.marker in WAIVE_MARKERS and w.reason.strip():
                start = last.get(w.test, -1) + 1
                out.append(Break(w.test, WAIVES, r.sha,
                                 records[start - 1].sha if start > 0 else None,
                                 tuple(x.sha for x in records[start:i + 1])))
        for w in r.waive_changes:
            last[w.test] = i
    return out


# ---- who broke it ---------------------------------------------------------------------------

def _rank(tier: str) -> int:
    return TIERS.index(tier) if tier in TIERS else len(TIERS)


def find_culprit(records: Sequence[CommitRecord], brk: Break
                 ) -> tuple[CommitRecord, BehaviourRecord, str, tuple[str, ...]] | None:
    """The commit of the window whose behaviour change links the failing test by the audit's
    own evidence: the most specific tier wins, then the latest commit (nearest the break)."""
    window = set(brk.window)
    found = [(r, b, t) for r in records if r.sha in window and r.audited
             for b in r.behaviours if (t := b.link(brk.test)) is not None]
    if not found:
        return None
    best = min(_rank(t) for _, _, t in found)
    top = [(r, b, t) for r, b, t in found if _rank(t) == best]
    suspects = tuple(dict.fromkeys(r.sha for r, _, _ in top))
    r, b, t = top[-1]
    return r, b, t, suspects


def post_merge_only_guards(b: BehaviourRecord) -> set[str]:
    """The change's specific guards (any specific tier) that ran post-merge only."""
    return {g.test_id for tier, gs in b.guards.items() if is_specific(tier) for g in gs
            if g.effective == "post-merge-only"}


def flagged_by(r: CommitRecord, b: BehaviourRecord, test: str) -> str | None:
    """The finding that flagged the faulty change at its culprit: an error or warning naming
    the failing test or a post-merge-only specific guard of the changed behaviour."""
    names = {test} | {g.test_id for gs in b.guards.values() for g in gs if g.names(test)}
    pmo = post_merge_only_guards(b)
    for f in r.findings:
        if f.severity in FLAGGING and (names & set(f.guards) or pmo & set(f.guards)):
            return f"{f.severity} {f.rule}"
    return None


def judge(records: Sequence[CommitRecord], brk: Break) -> FaultyChange:
    hit = find_culprit(records, brk)
    if hit is None:
        failed = sum(1 for r in records if r.sha in set(brk.window) and not r.audited)
        why = (f"no commit of the window ({len(brk.window)}) links {brk.test} by the audit's "
               "evidence")
        if failed:
            why += f"; {failed} of them could not be audited"
        return FaultyChange(brk, None, reason=why)
    r, b, tier, suspects = hit
    by = flagged_by(r, b, brk.test)
    if by is not None:
        return FaultyChange(brk, r.sha, b.key, tier, suspects, True, f"{by} at {r.short}")
    deciding = ", ".join(g.test_id for g in b.deciding[:2]) or "no guard"
    why = (f"{r.short} judged {b.function} {b.verdict} by the {b.tier or 'no'} tier ({deciding})"
           f"; {brk.test} links it by the {tier} tier")
    if tier != b.tier:
        why += " (context only)"
    return FaultyChange(brk, r.sha, b.key, tier, suspects, False,
                        why + "; no error or warning named it")


def _scored(order: Sequence[str], breaks: Sequence[Break], signal: str,
            outcome_commits: Sequence[str]) -> set[str]:
    """The commits the signal can speak for: with results, those after the first scored
    commit up to the last; with waives, the whole range."""
    if signal == WAIVES:
        return set(order)
    pos = sorted(order.index(c) for c in set(outcome_commits) if c in order)
    return set(order[pos[0] + 1:pos[-1] + 1]) if pos else set()


def score(records: Sequence[CommitRecord], breaks: Sequence[Break], signal: str,
          outcome_commits: Sequence[str] = ()) -> Score:
    order = [r.sha for r in records]
    faulty = tuple(judge(records, b) for b in breaks)
    scored = _scored(order, breaks, signal, outcome_commits)
    culprits: dict[str, list[FaultyChange]] = defaultdict(list)
    for f in faulty:
        if f.culprit:
            culprits[f.culprit].append(f)
    errors = confirmed = 0
    for r in records:
        if r.sha not in scored or not r.audited:
            continue
        for e in (f for f in r.findings if f.severity == "error"):
            errors += 1
            if any(fc.function == f"{e.path}::{e.function}" or fc.brk.test in e.guards
                   for fc in culprits.get(r.sha, ())):
                confirmed += 1
    return Score(signal, faulty, errors, confirmed, len(scored))
