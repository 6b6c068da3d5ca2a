"""Choose tests to move pre-merge within a budget: greedy by value per added minute, checked
against the best single move (pure; the feasibility test is passed in).

The problem is budgeted maximum coverage (each candidate covers the historical changes it
would have guarded; a set of moves must fit every pre-merge shard's budget), which is NP-hard.
The greedy rule: repeatedly add the candidate with the most newly covered value per added
minute that still fits (ties: more value, fewer minutes, then the name); a candidate that does
not fit is dropped. It runs from an empty start and from each single candidate that fits (the
``SEEDS`` most valuable ones), and the best set wins (most value, then fewest minutes, then the
earlier run). The empty start and the single candidates alone already make it the modified
greedy of Khuller, Moss and Naor (1999), within (1 - 1/e) / 2 of the optimum; the seeded runs
find the cheap-plus-costly pairs plain greedy misses. The tests compare it with
``brute_force`` on small cases, in the manner of pytest-split's algorithms.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

Fits = Callable[[frozenset[str]], bool]


@dataclass(frozen=True)
class Candidate:
    key: str
    minutes: float  # what moving it adds to the pre-merge stages, as `testdb promote` prices it
    covers: frozenset[str]  # the items (historical changes, faulty changes) it would guard


@dataclass(frozen=True)
class Selection:
    keys: tuple[str, ...]  # in the order chosen
    value: int
    minutes: float
    rule: str  # "greedy", "best single" or "brute force"


def value(cands: Iterable[Candidate]) -> int:
    return len(frozenset().union(*(c.covers for c in cands)))


def _ratio(gain: int, minutes: float) -> float:
    if gain <= 0:
        return 0.0
    return math.inf if minutes <= 0 else gain / minutes


SEEDS = 40


def greedy(cands: Sequence[Candidate], fits: Fits) -> Selection:
    """The best of the greedy runs (see the module docstring)."""
    useful = [c for c in cands if c.covers]
    singles = sorted((c for c in useful if fits(frozenset([c.key]))),
                     key=lambda c: (-len(c.covers), c.minutes, c.key))
    runs = [_greedy_from((), useful, fits)]
    runs += [_greedy_from((c,), useful, fits) for c in singles[:SEEDS]]
    best = max(runs, key=lambda s: (s.value, -s.minutes))  # max keeps the first of equals
    return best


def _greedy_from(seed: tuple[Candidate, ...], cands: Sequence[Candidate], fits: Fits
                 ) -> Selection:
    chosen: list[Candidate] = list(seed)
    covered: frozenset[str] = frozenset().union(*(c.covers for c in seed))
    left = [c for c in cands if c not in seed]
    while left:
        left.sort(key=lambda c: (-_ratio(len(c.covers - covered), c.minutes),
                                 -len(c.covers - covered), c.minutes, c.key))
        best = left.pop(0)
        if not best.covers - covered:
            break  # nothing left adds value
        if fits(frozenset(c.key for c in [*chosen, best])):
            chosen.append(best)
            covered |= best.covers
    rule = f"greedy from {seed[0].key}" if seed else "greedy"
    return Selection(tuple(c.key for c in chosen), len(covered),
                     sum(c.minutes for c in chosen), rule)


def brute_force(cands: Sequence[Candidate], fits: Fits) -> Selection:
    """Every subset (for tests: 2^n calls of ``fits``); the most value, then fewest minutes."""
    best = Selection((), 0, 0.0, "brute force")
    for n in range(1, len(cands) + 1):
        for combo in itertools.combinations(cands, n):
            keys = frozenset(c.key for c in combo)
            v, m = value(combo), sum(c.minutes for c in combo)
            if (v, -m) > (best.value, -best.minutes) and fits(keys):
                best = Selection(tuple(c.key for c in combo), v, m, "brute force")
    return best
