"""The verdict of a behaviour change: the most specific evidence level with links decides."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain, pairwise
from operator import attrgetter

from auditor.evidence import CAN_GUARD, LEVELS, Evidence, Level
from auditor.guards import best

INVALID = "invalid"  # a listed id that names no test in the checkout: CI ignores it
PRE_MERGE = "pre-merge"
UNGUARDED = "unguarded"
_BY_ID = attrgetter("test_id")


@dataclass(frozen=True)
class Decision:
    """Which level decided, its verdict, and the links it counted; every other link is
    context: shown, never counted, never a pre-merge guard."""

    level: Level | None  # None: nothing links
    verdict: str
    # Each tuple of ids below is in id order (``decide`` sorts; ``combine`` relies on it).
    deciding: tuple[Evidence, ...] = ()  # the deciding level's links (none invalid)
    pre_merge: tuple[str, ...] = ()  # ... those that run in this PR's pipeline and can guard
    not_pre_merge: tuple[str, ...] = ()  # ... those that do not run in it
    invalid: tuple[str, ...] = ()  # links naming no test: never counted at any level
    weak: tuple[str, ...] = ()  # ... those that run in it but cannot guard (weak links)

    @property
    def guarded(self) -> bool:
        return self.verdict == PRE_MERGE


def verdict_for(level: Level, best_verdict: str) -> str:
    """The behaviour's verdict from the deciding level and the best verdict among its links:
    a level that cannot guard (``auditor.evidence.CAN_GUARD``: a test that only imports the
    module, or only shares a value) never makes it pre-merge; then it is ``unguarded``. A
    worse best verdict (gated, post-merge-only, ...) stands as it is."""
    if best_verdict == PRE_MERGE and not CAN_GUARD[level]:
        return UNGUARDED
    return best_verdict


def _decision(level: Level, links: list[tuple[Evidence, str]], invalid: tuple[str, ...]
              ) -> Decision:
    pre: list[str] = []
    other: list[str] = []
    for e, v in links:
        (pre if v == PRE_MERGE else other).append(e.test_id)
    return _decided(level, tuple(e for e, _ in links), pre, other,
                    PRE_MERGE if pre else best([v for _, v in links]), invalid)


def _decided(level: Level, deciding: tuple[Evidence, ...], pre: list[str], other: list[str],
             best_verdict: str, invalid: tuple[str, ...]) -> Decision:
    """The Decision of level ``level`` whose links ``deciding`` run pre-merge (``pre``) or
    not (``other``), the best of their verdicts being ``best_verdict``: pre-merge guards if
    the level can guard, weak links if not (``verdict_for``)."""
    guards = CAN_GUARD[level]
    return Decision(level, verdict_for(level, best_verdict), deciding,
                    tuple(pre) if guards else (), tuple(other), invalid,
                    () if guards else tuple(pre))


def decide(evidence: Iterable[Evidence], effective_verdict_of: Callable[[str], str]
           ) -> Decision:
    """The first level of ``LEVELS`` that has a link decides: its verdict is the best verdict
    for this change among that level's links (``verdict_for``). A link whose test id names
    no test (``invalid``) is no link."""
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
        return Decision(None, UNGUARDED, invalid=tuple(invalid))
    found = by_level[level]
    return _decision(level, [found[t] for t in sorted(found)], tuple(invalid))


def thin_guard(d: Decision) -> int:
    """How many integration guards of the deciding level do not run pre-merge when every
    pre-merge guard is a unit test (0 when an integration guard runs pre-merge)."""
    if not d.pre_merge or not all(t.startswith("unittest/") for t in d.pre_merge):
        return 0
    return sum(1 for t in d.not_pre_merge if not t.startswith("unittest/"))


def combine(parts: Iterable[Decision]) -> Decision:
    """``decide`` over the union of several parts' links, from the parts' own decisions, when
    no test is in two parts (a module tier judged test file by test file): the deciding level
    is the first any part has; its links are those parts' links, by test id; the best verdict
    is pre-merge when any of them runs pre-merge, else the best of those parts' verdicts.
    Computed from the parts' id lists, not link by link (a module tier has thousands)."""
    parts = list(parts)
    invalid = tuple(t for p in parts for t in p.invalid)
    levels = {p.level for p in parts}
    level = next((lv for lv in LEVELS if lv in levels), None)
    if level is None:
        return Decision(None, UNGUARDED, invalid=invalid)
    # Parts in the order of their first ids: for test files' parts, whose ids do not
    # interleave, each list below is then sorted already and sorting only checks it.
    top = sorted((p for p in parts if p.level == level), key=lambda p: p.deciding[0].test_id)
    runs = [p.deciding for p in top]
    if all(a[-1].test_id < b[0].test_id for a, b in pairwise(runs)):
        deciding = tuple(chain.from_iterable(runs))  # each sorted (decide), one after another
    else:
        deciding = tuple(sorted(chain.from_iterable(runs), key=_BY_ID))
    pre = _merged([r for p in top for r in (p.pre_merge, p.weak)])
    other = _merged([p.not_pre_merge for p in top])
    return _decided(level, deciding, pre, other,
                    PRE_MERGE if pre else best([p.verdict for p in top]), invalid)


def _merged(runs: list[tuple[str, ...]]) -> list[str]:
    """The ids of ``runs`` in order, each run in order (a part's ``pre_merge``, ``weak`` or
    ``not_pre_merge``, as ``Decision`` keeps them): when the runs follow one another (test
    files' parts, in the order of their first ids) they are joined, one comparison per run
    instead of one per id (8,000 ids a module here); otherwise sorted."""
    runs = [r for r in runs if r]
    if all(a[-1] < b[0] for a, b in pairwise(runs)):
        return list(chain.from_iterable(runs))
    return sorted(chain.from_iterable(runs))
