"""The measured tier's rules as tables: rank by fingerprint, silence only for functions, the
map's precedence over static links (each rule with its trap and its guarded case)."""

from __future__ import annotations

import pytest

from auditor.covmap.store import Link, age
from auditor.evidence import Evidence
from auditor.measured import (
    decide_measured,
    measured_links,
    not_executing,
    summary_counts,
    summary_phrase,
    without_refuted,
)

NOW = 1_000_000
FP, OLD = b"\x01" * 8, b"\x02" * 8


@pytest.mark.parametrize(("links", "base_fp", "ranks"), [
    ([Link("t", FP, "1a2b3c4d", NOW - 3 * 86400)], FP, {"t": 1}),
    # the function changed since it was measured: one rank below
    ([Link("t", OLD, "1a2b3c4d", NOW)], FP, {"t": 2}),
    # measured at both versions: the current one counts
    ([Link("t", OLD, "c1", NOW), Link("t", FP, "c2", NOW)], FP, {"t": 1}),
    # TRAP: a function new in the base side (no fingerprint): no link is current
    ([Link("t", OLD, "c1", NOW)], None, {"t": 2}),
])
def test_rank_by_fingerprint(links: list[Link], base_fp: bytes | None,
                             ranks: dict[str, int]) -> None:
    got = measured_links(links, base_fp, now=NOW)
    assert {e.test_id: e.rank for e in got} == ranks
    assert all(e.tier == "coverage" for e in got)


def test_head_side_measurement_is_current() -> None:
    """A map measured on the change itself (``launch --coverage`` of the PR's head)."""
    (e,) = measured_links([Link("t", OLD, "c1", NOW)], FP, now=NOW, head_fp=OLD)
    assert e.rank == 1 and "as this change leaves it" in e.reason


def test_reason_says_commit_and_age() -> None:
    (e,) = measured_links([Link("t", FP, "1a2b3c4d5e", NOW - 3 * 86400)], FP, now=NOW)
    assert e.reason == "executed the changed function at 1a2b3c4, 3 days ago (measured map)"
    (e,) = measured_links([Link("t", OLD, "1a2b3c4d5e", NOW - 7200)], FP, now=NOW)
    assert e.reason.startswith("executed an older version of the changed function at 1a2b3c4, "
                               "2 hours ago")


@pytest.mark.parametrize(("seconds", "text"), [(0, "just now"), (59, "just now"),
                                                (60, "1 minute ago"), (7200, "2 hours ago"),
                                                (86400 * 3 + 5, "3 days ago")])
def test_age(seconds: int, text: str) -> None:
    assert age(NOW - seconds, now=NOW) == text


@pytest.mark.parametrize(("kind", "refutes"), [
    ("function", True),
    # TRAP: class and module bodies run at import (the empty context): silence says nothing
    ("class", False), ("module", False),
])
def test_silence_refutes_only_functions(kind: str, refutes: bool) -> None:
    assert bool(not_executing(kind, {"t"})) is refutes


def ev(tid: str, tier: str, rank: int = 1) -> Evidence:
    return Evidence(tid, tier, rank, "why")


def test_refuted_static_links_are_dropped_measured_kept() -> None:
    links = [ev("a", "symbol"), ev("b", "symbol"), ev("a", "coverage")]
    assert without_refuted(links, frozenset({"a"})) == [ev("b", "symbol"), ev("a", "coverage")]


VERDICT = {"pre": "pre-merge", "post": "post-merge-only", "pre2": "pre-merge"}


@pytest.mark.parametrize(("evidence", "in_map", "verdict", "tier"), [
    # a measured pre-merge guard decides
    ([ev("pre", "coverage"), ev("post", "symbol")], {"pre"}, "pre-merge", "coverage"),
    # measured only post-merge; a static pre-merge link of a test NOT in the map still guards
    ([ev("post", "coverage"), ev("pre", "symbol")], {"post"}, "pre-merge", "symbol"),
    # TRAP: the static pre-merge link is of a test the map knows (it would have been refuted
    # had it not executed the function; here it is kept out): the measured verdict stands
    ([ev("post", "coverage"), ev("pre", "symbol")], {"post", "pre"}, "post-merge-only",
     "coverage"),
    # TRAP: a weak static link (module) of an unmapped test never guards
    ([ev("post", "coverage"), ev("pre", "module")], {"post"}, "post-merge-only", "coverage"),
    # an older-version measured link guards, one rank below
    ([ev("pre2", "coverage", 2), ev("post", "coverage")], {"pre2", "post"},
     "post-merge-only", "coverage"),
])
def test_decide_measured(evidence: list[Evidence], in_map: set[str], verdict: str,
                         tier: str) -> None:
    d = decide_measured(evidence, VERDICT.__getitem__, in_map.__contains__)
    assert (d.verdict, d.level.tier if d.level else None) == (verdict, tier)


def test_summary() -> None:
    assert summary_counts(["coverage", "symbol", None, "coverage"]) == (2, 1)
    assert summary_phrase(2, 1) == " (2 decided by measured links, 1 by static links only)"
    assert summary_phrase(0, 1) == " (1 decided by static links only)"
    assert summary_phrase(0, 0) == ""
