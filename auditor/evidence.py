"""Evidence linking a test to a behaviour change: one typed record per link, and its level."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple


class Level(NamedTuple):
    """How specific a link is: its tier and, inside the tier, its rank (1 = strongest)."""

    tier: str
    rank: int = 1

    def label(self) -> str:
        if self.tier == "parameter" or self.rank != 1:
            return f"{self.tier}/{self.rank}"
        return self.tier


# Every level, most specific first: the verdict comes from the first one that has links.
# A parameter value alone (rank 3) says less than a test that calls the changed code by name
# (symbol): a pre-merge test that merely carries the same value must not outrank the tests
# that exercise the change, so it ranks below symbol and path rules, above declared and module.
# ``symbol/2``: the test calls a method of the changed unit's name on a receiver that resolves
# to nothing, a name several units define (``llm.generate()`` of an unannotated fixture), or
# names the changed method's class without a call that reaches the method: the name is
# there, the path to the changed code is not shown. Weak, as a shared value is (it never
# guards); ranked above ``parameter/3`` (a name the test calls says more than a value it
# carries) and below every level that can show the test exercising the change.
LEVELS: tuple[Level, ...] = (
    Level("coverage"),
    Level("coverage", 2),  # a measured map's link to an older version of the function
    Level("parameter", 1),
    Level("parameter", 2),
    Level("symbol"),
    Level("path-rule"),
    Level("removed-module"),
    Level("symbol", 2),
    Level("parameter", 3),
    Level("declared"),
    Level("module"),
)
LEVEL_TITLES: dict[Level, str] = {
    Level("coverage"): "executed the changed lines (coverage contexts) or the changed "
                       "function (measured map)",
    Level("coverage", 2): "executed an older version of the changed function (measured map)",
    Level("parameter", 1): "a parameter value and its name are on the changed lines",
    Level("parameter", 2): "a parameter value is on the changed lines and the test function "
                           "calls the changed code",
    Level("symbol"): "the test function (or a helper or fixture it uses) calls the changed "
                     "code, by names resolved through its imports and receivers",
    Level("path-rule"): "a path rule links the changed file to it",
    Level("removed-module"): "its module imports the removed module's old path unconditionally "
                             "(directly, or through modules that do): it fails at collection",
    Level("symbol", 2): "only an unresolved call of a name that several units define, or "
                        "the changed method's class named without a call that reaches it",
    Level("parameter", 3): "only a parameter value is on the changed lines",
    Level("declared"): "test changed in this diff that reaches the changed code",
    Level("module"): "test module imports the changed module",
}
STRENGTH: dict[Level, str] = {
    Level("coverage"): "strong", Level("coverage", 2): "medium",
    Level("parameter", 1): "strong",
    Level("parameter", 2): "medium", Level("symbol"): "strong", Level("path-rule"): "strong",
    Level("removed-module"): "strong", Level("symbol", 2): "weak",
    Level("parameter", 3): "weak", Level("declared"): "medium", Level("module"): "weak",
}
# Whether a level's links can guard: make a verdict pre-merge. A test that only imports the
# changed module, or only carries a value that is on the changed lines (its parameter's name
# not on them, its test function not naming the changed code), is not shown to exercise the
# change: both are the "weak" strength. When such a level decides and its best link runs
# pre-merge, the behaviour is unguarded and those links are weak links
# (auditor.verdict.verdict_for). ``declared`` can guard: the PR's author changed that test in
# the same diff and its module reaches the changed code, a statement of intent the import
# graph checks.
CAN_GUARD: dict[Level, bool] = {
    Level("coverage"): True, Level("coverage", 2): True, Level("parameter", 1): True,
    Level("parameter", 2): True,
    Level("symbol"): True, Level("path-rule"): True, Level("removed-module"): True,
    Level("symbol", 2): False,
    Level("parameter", 3): False,
    Level("declared"): True, Level("module"): False,
}
_PARAMETER_RANKS = {1: "value and parameter name on the changed lines",
                    2: "value only, from a test that calls the changed code",
                    3: "value only"}
RANKS: dict[str, tuple[int, ...]] = {}
for _lv in LEVELS:
    RANKS[_lv.tier] = (*RANKS.get(_lv.tier, ()), _lv.rank)


@dataclass(frozen=True, slots=True)
class Evidence:
    """One test parametrization linked to a behaviour change: at which level, and why."""

    test_id: str
    tier: str
    rank: int
    reason: str
    distance: int | None = None  # import distance (declared, module, symbol, parameter tiers)
    value: str = ""  # the changed token a parameter-tier link shares

    @property
    def level(self) -> Level:
        return Level(self.tier, self.rank)

    @property
    def strength(self) -> str:
        return STRENGTH[self.level]

    @property
    def can_guard(self) -> bool:
        return CAN_GUARD[self.level]


def same_links(ids: Iterable[str], tier: str, rank: int, reason: str) -> list[Evidence]:
    """``[Evidence(t, tier, rank, reason) for t in ids]``, each record's slots set directly:
    the module tier rebuilds ~12,000 of them from its memo on every judged audit, and a frozen
    dataclass's ``__init__`` (one ``object.__setattr__`` per field) costs three times this
    (13 ms against 4.5 ms on this project's machine). Equal to the constructor's records
    (``tests/auditor/test_evidence_records.py`` checks every field, so a new field unset here
    fails it)."""
    new = object.__new__
    set_id, set_tier, set_rank = _SET["test_id"], _SET["tier"], _SET["rank"]
    set_reason, set_distance, set_value = _SET["reason"], _SET["distance"], _SET["value"]
    out: list[Evidence] = []
    for t in ids:
        e = new(Evidence)
        set_id(e, t)
        set_tier(e, tier)
        set_rank(e, rank)
        set_reason(e, reason)
        set_distance(e, None)
        set_value(e, "")
        out.append(e)
    return out


_SET = {name: getattr(Evidence, name).__set__
        for name in ("test_id", "tier", "rank", "reason", "distance", "value")}


def parameter_rank(name_on_lines: bool, reaches_unit: bool) -> int:
    """The parameter tier's rank of one link: the value and the parameter's name on the changed
    lines (1) > the value only, from a test function that reaches the changed unit by name (the
    symbol tier's own evidence) (2) > the value only (3)."""
    if name_on_lines:
        return 1
    return 2 if reaches_unit else 3


_GUARDS_BY = {"coverage": "that executed the changed code (coverage contexts, measured map)",
              "symbol": "that call the changed code",
              "path-rule": "that a path rule names", "declared": "changed in this diff",
              "removed-module": "that import the removed module's old path",
              "module": "whose modules import the changed module"}


def level_phrase(level: Level, n: int) -> str:
    """``3 guard(s) by a parameter value (value only)``: a level's guards in a finding's
    words (the tier and rank codes are for the JSON)."""
    if level == Level("symbol", 2):
        return f"{n} guard(s) that only call its name on an unresolved receiver or name its class"
    if level.tier != "parameter":
        return f"{n} guard(s) {_GUARDS_BY.get(level.tier, level.tier)}"
    return f"{n} guard(s) by a parameter value ({_PARAMETER_RANKS[level.rank]})"


def weak_why(level: Level, deciding: Iterable[Evidence], weak: Iterable[str]) -> str:
    """Why the links of a level that cannot guard do not: ``they import its module (27 of
    1,801 linked parametrizations run pre-merge)``, ``they share the value TRTLLM (11 of
    220 ...)``."""
    pre = set(weak)
    links = list(deciding)
    if level.tier == "symbol":
        reasons = sorted({e.reason for e in links if e.test_id in pre})
        return ("what they name does not resolve to it: " + "; ".join(reasons[:2])
                + (f" (and {len(reasons) - 2} more)" if len(reasons) > 2 else "")
                + f" ({len(pre):,} of {len(links):,} linked parametrizations run pre-merge)")
    if level.tier != "parameter":
        return (f"they import its module ({len(pre):,} of {len(links):,} linked "
                "parametrizations run pre-merge)")
    total = Counter(e.value for e in links)
    ran = Counter(e.value for e in links if e.test_id in pre)
    vals = [f"{v or '?'} ({ran[v]:,} of {total[v]:,} linked parametrizations run pre-merge)"
            for v in sorted(ran, key=lambda v: (-ran[v], v))]
    return ("they share the value " + " or ".join(vals) + "; their parameter's name is not "
            "on the changed lines and their test functions do not call it")


def cannot_guard_why(level: Level) -> str:
    """Why a weak level's links could not guard even where they run, in a few words."""
    if level.tier == "module":
        return "they only import its module"
    if level.tier == "symbol":
        return "they only call its name on an unresolved receiver, or name its class"
    return "they only share a value"


def parameter_reason(pname: str | None, value: str, rank: int) -> str:
    why = f"parameter {pname}={value}" if pname else f"parameter value {value}"
    return why + {1: " (parameter name on the changed lines)",
                  2: " (value only; the test function calls the changed code)",
                  3: " (value only)"}[rank]


def strongest(evidence: list[Evidence]) -> list[Evidence]:
    """One link per test of a tier, its strongest (lowest rank, then the first found), by id."""
    seen: dict[str, Evidence] = {}
    for e in evidence:
        old = seen.get(e.test_id)
        if old is None or e.rank < old.rank:
            seen[e.test_id] = e
    return sorted(seen.values(), key=lambda e: e.test_id)
