"""Does a block's condition hold for a stage's facts? Certain vs assumed matches."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from testdb.model import Condition
from testdb.stages import Fact


@dataclass(frozen=True)
class Match:
    """``assumed`` lists the condition keys that held only by assumption (fact unknown)."""

    ok: bool
    assumed: tuple[str, ...] = ()

    @property
    def certain(self) -> bool:
        return self.ok and not self.assumed


NO_MATCH = Match(False)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def match(cond: Condition, facts: dict[str, Fact]) -> Match:
    """Every condition must hold. A key the stage has no fact for counts as a match, as CI's
    own mirror of the matcher does, but it is recorded as *assumed*; so is a match that rests
    on a fact the stage only stands in for (a K8s stage's GPU taken from its name)."""
    assumed: list[str] = []
    for key, want in cond.terms:
        fact = facts.get(key)
        if fact is None:
            assumed.append(key)
        elif not any(v.lower() == want.lower() for v in fact.values):
            return NO_MATCH
        elif not fact.known:
            assumed.append(key)
    for rng in cond.ranges:
        fact = facts.get(rng.key)
        if fact is None:
            assumed.append(rng.key)
            continue
        nums = [n for n in (_number(v) for v in fact.values) if n is not None]
        if not any(rng.holds(n) for n in nums):
            return NO_MATCH
        if not fact.known:
            assumed.append(rng.key)
    for key, patterns in cond.wildcards:
        fact = facts.get(key)
        if fact is None:
            assumed.append(key)
            continue
        # fnmatch, case-insensitive: `*h100*` matches `H100_PCIe`.
        if not any(fnmatchcase(v.lower(), p.lower()) for v in fact.values for p in patterns):
            return NO_MATCH
        if not fact.known:
            assumed.append(key)
    return Match(True, tuple(assumed))
