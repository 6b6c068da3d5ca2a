"""Verdict selection (auditor.verdict.decide): the most specific (tier, rank) with links decides;
every (tier, rank) pair is in the table, and weaker links never upgrade a verdict."""

from __future__ import annotations

import itertools

import pytest

from auditor.evidence import LEVELS, STRENGTH, Evidence, Level
from auditor.verdict import Decision, combine, decide, thin_guard

# Every evidence level, most specific first, with its strength: the rule as a table.
TABLE = [
    ("coverage", 1, "strong"),    # executed the changed lines
    ("parameter", 1, "strong"),   # value and parameter name on the changed lines
    ("parameter", 2, "medium"),   # value only; the test function calls the changed code
    ("symbol", 1, "strong"),      # the test function names the changed code
    ("path-rule", 1, "strong"),   # a path rule names the test for a non-Python file
    ("parameter", 3, "medium"),   # value only
    ("declared", 1, "medium"),    # changed in this diff, reaches the changed module
    ("module", 1, "weak"),        # imports the changed module
]
PAIRS = [pytest.param(a, b, id=f"{a[0]}/{a[1]} over {b[0]}/{b[1]}")
         for a, b in itertools.combinations(TABLE, 2)]


def link(tier: str, rank: int, test_id: str) -> Evidence:
    return Evidence(test_id, tier, rank, "why")


def verdicts(**by_id: str):  # type: ignore[no-untyped-def]
    return lambda tid: by_id[tid]


def test_the_table_is_the_order() -> None:
    assert tuple(Level(t, r) for t, r, _ in TABLE) == LEVELS
    assert {Level(t, r): s for t, r, s in TABLE} == STRENGTH


@pytest.mark.parametrize(("tier", "rank", "strength"), TABLE)
def test_a_level_alone_decides(tier: str, rank: int, strength: str) -> None:
    d = decide([link(tier, rank, "a"), link(tier, rank, "b")],
               verdicts(a="post-merge-only", b="gated"))
    assert (d.level, d.verdict, d.pre_merge, d.not_pre_merge) == (
        Level(tier, rank), "gated", (), ("a", "b"))
    assert link(tier, rank, "a").strength == strength


@pytest.mark.parametrize(("strong", "weak"), PAIRS)
def test_a_weaker_pre_merge_link_never_upgrades(strong: tuple[str, int, str],
                                                weak: tuple[str, int, str]) -> None:
    ev = [link(weak[0], weak[1], "shares-a-token"), link(strong[0], strong[1], "exercises")]
    d = decide(ev, verdicts(**{"shares-a-token": "pre-merge", "exercises": "post-merge-only"}))
    assert d.level == Level(strong[0], strong[1])
    assert (d.verdict, d.pre_merge, d.guarded) == ("post-merge-only", (), False)
    assert [e.test_id for e in d.deciding] == ["exercises"]


@pytest.mark.parametrize(("strong", "weak"), PAIRS)
def test_the_weaker_level_decides_when_nothing_stronger_links(
        strong: tuple[str, int, str], weak: tuple[str, int, str]) -> None:
    # The stronger level's only link names no test (invalid): it is no link at all.
    ev = [link(strong[0], strong[1], "stale"), link(weak[0], weak[1], "real")]
    d = decide(ev, verdicts(stale="invalid", real="pre-merge"))
    assert (d.level, d.verdict, d.pre_merge, d.invalid) == (
        Level(weak[0], weak[1]), "pre-merge", ("real",), ("stale",))


@pytest.mark.parametrize(("found", "expected"), [
    ({}, Decision(None, "unguarded")),
    ({"x": "invalid"}, Decision(None, "unguarded", invalid=("x",))),
    ({"x": "pre-merge", "y": "post-merge-only"}, "pre-merge"),
    ({"x": "gated", "y": "qa-only"}, "gated"),
    ({"x": "waived", "y": "unscheduled"}, "waived"),
    ({"x": "invalid", "y": "qa-only"}, "qa-only"),
])
def test_best_verdict_inside_the_deciding_level(found: dict[str, str],
                                                expected: Decision | str) -> None:
    d = decide([link("symbol", 1, t) for t in found], verdicts(**found))
    if isinstance(expected, Decision):
        assert d == expected
    else:
        assert d.verdict == expected and "invalid" not in (found.get(t) for t in d.not_pre_merge)


def test_one_link_per_test_and_level() -> None:
    # A test carrying the token twice ([a=X-b=X]) is one guard, not two.
    d = decide([link("parameter", 1, "t"), link("parameter", 1, "t")], verdicts(t="pre-merge"))
    assert len(d.deciding) == 1 and d.pre_merge == ("t",)


@pytest.mark.parametrize(("found", "thin"), [
    ({"unittest/a": "pre-merge", "big": "post-merge-only", "big2": "gated"}, 2),
    ({"unittest/a": "pre-merge", "unittest/b": "post-merge-only"}, 0),
    ({"unittest/a": "pre-merge", "big": "pre-merge", "big2": "gated"}, 0),
    ({"big": "post-merge-only"}, 0),
])
def test_thin_guard(found: dict[str, str], thin: int) -> None:
    assert thin_guard(decide([link("parameter", 1, t) for t in found], verdicts(**found))) == thin


@pytest.mark.parametrize("split", [1, 2, 3])
def test_combine_equals_deciding_the_union(split: int) -> None:
    """The module tier is judged file by file and combined: the same answer as one decide."""
    found = {"unittest/a": "pre-merge", "b": "gated", "c": "invalid", "d": "post-merge-only",
             "e": "pre-merge", "f": "qa-only"}
    levels = {"unittest/a": ("module", 1), "b": ("module", 1), "c": ("symbol", 1),
              "d": ("declared", 1), "e": ("module", 1), "f": ("declared", 1)}
    ev = [link(*levels[t], t) for t in found]
    parts = [ev[i::split] for i in range(split)]
    whole = decide(ev, verdicts(**found))
    assert combine(decide(p, verdicts(**found)) for p in parts) == Decision(
        whole.level, whole.verdict, whole.deciding, whole.pre_merge, whole.not_pre_merge,
        tuple(sorted(whole.invalid)))
    assert whole.level == Level("declared") and whole.verdict == "post-merge-only"
    assert combine([]) == Decision(None, "unguarded")
