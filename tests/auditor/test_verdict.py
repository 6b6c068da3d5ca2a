"""Verdict selection (auditor.verdict.decide): the most specific (tier, rank) with links decides;
every (tier, rank) pair is in the table with whether it can guard, weaker links never upgrade a
verdict, and a level that cannot guard never makes one green."""

from __future__ import annotations

import itertools

import pytest

from auditor.evidence import CAN_GUARD, LEVELS, STRENGTH, Evidence, Level
from auditor.verdict import Decision, combine, decide, thin_guard, verdict_for

# Every evidence level, most specific first, with its strength and whether its links can make
# a verdict pre-merge: the rule as a table.
TABLE = [
    ("coverage", 1, "strong", True),    # executed the changed lines (or function: the map)
    ("coverage", 2, "medium", True),    # the map: executed an older version of the function
    ("parameter", 1, "strong", True),   # value and parameter name on the changed lines
    ("parameter", 2, "medium", True),   # value only; the test function calls the changed code
    ("symbol", 1, "strong", True),      # the test function names the changed code
    ("path-rule", 1, "strong", True),   # a path rule names the test for a non-Python file
    ("removed-module", 1, "strong", True),  # imports a removed module: fails at collection
    ("symbol", 2, "weak", False),       # only an unresolved call of a shared name, or the class
    ("parameter", 3, "weak", False),    # value only: shares a token, exercises nothing shown
    ("declared", 1, "medium", True),    # changed in this diff, reaches the changed module
    ("module", 1, "weak", False),       # only imports the changed module
]
PAIRS = [pytest.param(a, b, id=f"{a[0]}/{a[1]} over {b[0]}/{b[1]}")
         for a, b in itertools.combinations(TABLE, 2)]


def link(tier: str, rank: int, test_id: str) -> Evidence:
    return Evidence(test_id, tier, rank, "why")


def verdicts(**by_id: str):  # type: ignore[no-untyped-def]
    return lambda tid: by_id[tid]


def test_the_table_is_the_order() -> None:
    assert tuple(Level(t, r) for t, r, _, _ in TABLE) == LEVELS
    assert {Level(t, r): s for t, r, s, _ in TABLE} == STRENGTH
    assert {Level(t, r): g for t, r, _, g in TABLE} == CAN_GUARD
    assert all(CAN_GUARD[lv] == (STRENGTH[lv] != "weak") for lv in LEVELS)


@pytest.mark.parametrize(("tier", "rank", "strength", "can_guard"), TABLE)
def test_a_level_alone_decides(tier: str, rank: int, strength: str, can_guard: bool) -> None:
    d = decide([link(tier, rank, "a"), link(tier, rank, "b")],
               verdicts(a="post-merge-only", b="gated"))
    # A worse best verdict stands whether or not the level can guard.
    assert (d.level, d.verdict, d.pre_merge, d.not_pre_merge, d.weak) == (
        Level(tier, rank), "gated", (), ("a", "b"), ())
    assert link(tier, rank, "a").strength == strength
    assert link(tier, rank, "a").can_guard is can_guard


@pytest.mark.parametrize(("tier", "rank", "strength", "can_guard"), TABLE)
def test_only_a_level_that_can_guard_makes_the_verdict_pre_merge(
        tier: str, rank: int, strength: str, can_guard: bool) -> None:
    """The trap: tests that only import the module, or only share a value, run pre-merge."""
    d = decide([link(tier, rank, "runs"), link(tier, rank, "late")],
               verdicts(runs="pre-merge", late="post-merge-only"))
    assert d.level == Level(tier, rank) and d.not_pre_merge == ("late",)
    if can_guard:
        assert (d.verdict, d.guarded, d.pre_merge, d.weak) == ("pre-merge", True, ("runs",), ())
    else:  # its pre-merge links are weak links, never pre-merge guards
        assert (d.verdict, d.guarded, d.pre_merge, d.weak) == ("unguarded", False, (),
                                                               ("runs",))
    assert verdict_for(Level(tier, rank), "pre-merge") == d.verdict
    assert verdict_for(Level(tier, rank), "gated") == "gated"


@pytest.mark.parametrize(("strong", "weak"), PAIRS)
def test_a_weaker_pre_merge_link_never_upgrades(strong: tuple[str, int, str, bool],
                                                weak: tuple[str, int, str, bool]) -> None:
    ev = [link(weak[0], weak[1], "shares-a-token"), link(strong[0], strong[1], "exercises")]
    d = decide(ev, verdicts(**{"shares-a-token": "pre-merge", "exercises": "post-merge-only"}))
    assert d.level == Level(strong[0], strong[1])
    assert (d.verdict, d.pre_merge, d.weak, d.guarded) == ("post-merge-only", (), (), False)
    assert [e.test_id for e in d.deciding] == ["exercises"]


@pytest.mark.parametrize(("strong", "weak"), PAIRS)
def test_the_weaker_level_decides_when_nothing_stronger_links(
        strong: tuple[str, int, str, bool], weak: tuple[str, int, str, bool]) -> None:
    # The stronger level's only link names no test (invalid): it is no link at all.
    ev = [link(strong[0], strong[1], "stale"), link(weak[0], weak[1], "real")]
    d = decide(ev, verdicts(stale="invalid", real="pre-merge"))
    assert (d.level, d.invalid) == (Level(weak[0], weak[1]), ("stale",))
    if weak[3]:
        assert (d.verdict, d.pre_merge, d.weak) == ("pre-merge", ("real",), ())
    else:  # the weaker level cannot guard: a stale strong link and a weak one are no guard
        assert (d.verdict, d.pre_merge, d.weak) == ("unguarded", (), ("real",))


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
        tuple(sorted(whole.invalid)), whole.weak)
    assert whole.level == Level("declared") and whole.verdict == "post-merge-only"
    assert combine([]) == Decision(None, "unguarded")


@pytest.mark.parametrize("split", [1, 2, 3])
def test_combine_of_contiguous_parts_equals_deciding_the_union(split: int) -> None:
    """Parts as test files give them, each a run of ids after the last (the concatenated
    fast path), and parts whose ids interleave (sorted): both decide as the union does."""
    found = {f"f{i // 3}::t{i}": ("pre-merge", "gated", "post-merge-only", "invalid")[i % 4]
             for i in range(12)}
    ev = [link("module", 1, t) for t in found]
    whole = decide(ev, verdicts(**found))
    size = -(-len(ev) // split)
    for parts in ([ev[i:i + size] for i in range(0, len(ev), size)][::-1],
                  [ev[i::split] for i in range(split)]):
        got = combine(decide(p, verdicts(**found)) for p in parts)
        assert [e.test_id for e in got.deciding] == sorted(e.test_id for e in whole.deciding)
        assert (got.level, got.verdict, got.weak, got.not_pre_merge, sorted(got.invalid)) == (
            whole.level, whole.verdict, whole.weak, whole.not_pre_merge, sorted(whole.invalid))


@pytest.mark.parametrize("split", [1, 2, 3])
@pytest.mark.parametrize(("found", "verdict", "weak"), [
    ({"a": "pre-merge", "b": "gated", "c": "post-merge-only"}, "unguarded", ("a",)),
    ({"a": "qa-only", "b": "gated", "c": "post-merge-only"}, "gated", ()),
    ({"a": "pre-merge", "b": "pre-merge", "c": "invalid"}, "unguarded", ("a", "b")),
])
def test_combine_keeps_weak_links_weak(split: int, found: dict[str, str], verdict: str,
                                       weak: tuple[str, ...]) -> None:
    """Module-tier parts, each file judged alone: the union is no more green than decide."""
    ev = [link("module", 1, t) for t in found]
    whole = decide(ev, verdicts(**found))
    got = combine(decide(ev[i::split], verdicts(**found)) for i in range(split))
    assert (got.verdict, got.weak, got.pre_merge) == (whole.verdict, whole.weak, ()) == (
        verdict, weak, ())
    assert [e.test_id for e in got.deciding] == [e.test_id for e in whole.deciding]
