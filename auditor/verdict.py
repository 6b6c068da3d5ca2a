"""The verdict of a behaviour change: the most specific evidence level with links decides."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from auditor.evidence import LEVELS, Evidence, Level
from auditor.guards import best

INVALID = "invalid"  # a listed id that names no test in the checkout: CI ignores it
PRE_MERGE = "pre-merge"


@dataclass(frozen=True)
class Decision:
    """Which level decided, its verdict, and the links it counted; every other link is
    context: shown, never counted, never a pre-merge guard."""

    level: Level | None  # None: nothing links
    verdict: str
    deciding: tuple[Evidence, ...] = ()  # the deciding level's links (none invalid)
    pre_merge: tuple[str, ...] = ()  # ... those that run in this PR's pipeline
    not_pre_merge: tuple[str, ...] = ()  # ... and those that do not
    invalid: tuple[str, ...] = ()  # links naming no test: never counted at any level

    @property
    def guarded(self) -> bool:
        return self.verdict == PRE_MERGE


def decide(evidence: Iterable[Evidence], effective_verdict_of: Callable[[str], str]
           ) -> Decision:
    """The first level of ``LEVELS`` that has a link decides: its verdict is the best verdict
    for this change among that level's links. A link whose test id names no test
    (``invalid``) is no link."""
    by_level: dict[Level, dict[str, tuple[Evidence, str]]] = {}
    invalid: dict[str, None] = {}
    for e in evidence:
        v = effective_verdict_of(e.test_id)
        if v == INVALID:
            invalid[e.test_id] = None
        else:
            by_level.setdefault(e.level, {}).setdefault(e.test_id, (e, v))  # one link per test
    level = next((lv for lv in LEVELS if lv in by_level), None)
    if level is None:
        return Decision(None, "unguarded", invalid=tuple(invalid))
    links = sorted(by_level[level].values(), key=lambda ev: ev[0].test_id)
    return Decision(level, best([v for _, v in links]), tuple(e for e, _ in links),
                    tuple(e.test_id for e, v in links if v == PRE_MERGE),
                    tuple(e.test_id for e, v in links if v != PRE_MERGE), tuple(invalid))


def thin_guard(d: Decision) -> int:
    """How many integration guards of the deciding level do not run pre-merge when every
    pre-merge guard is a unit test (0 when an integration guard runs pre-merge)."""
    if not d.pre_merge or not all(t.startswith("unittest/") for t in d.pre_merge):
        return 0
    return sum(1 for t in d.not_pre_merge if not t.startswith("unittest/"))


def combine(parts: Iterable[Decision]) -> Decision:
    """``decide`` over the union of several parts' links, from the parts' own decisions, when
    no test is in two parts (a module tier judged test file by test file)."""
    parts = list(parts)
    invalid = tuple(t for p in parts for t in p.invalid)
    levels = {p.level for p in parts}
    level = next((lv for lv in LEVELS if lv in levels), None)
    if level is None:
        return Decision(None, "unguarded", invalid=invalid)
    top = [p for p in parts if p.level == level]
    deciding = sorted((e for p in top for e in p.deciding), key=lambda e: e.test_id)
    pre = set().union(*(p.pre_merge for p in top))
    return Decision(level, best([p.verdict for p in top]), tuple(deciding),
                    tuple(e.test_id for e in deciding if e.test_id in pre),
                    tuple(e.test_id for e in deciding if e.test_id not in pre), invalid)
