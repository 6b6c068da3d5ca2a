"""The replay's rules as table tests over hand-made records: buckets, breaks from results and
from waive lines, culprits, what counts as flagged, precision, the leaned-on guards."""

from __future__ import annotations

import pytest

from auditor.replay.model import (
    BehaviourRecord,
    CommitRecord,
    FindingRecord,
    GuardRef,
    WaiveChange,
    record_from_json,
    record_json,
    share_of,
)
from auditor.replay.outcomes import Outcome, normalize_test
from auditor.replay.promotion import items_of
from auditor.replay.record import waive_changes
from auditor.replay.scoring import (
    OUTCOMES,
    WAIVES,
    Break,
    breaks_from_outcomes,
    breaks_from_waives,
    find_culprit,
    flagged_by,
    judge,
    score,
)
from auditor.replay.totals import leaned_on, totals
from testdb.errors import InputError, SourceLoc

T = "test_a.py::test_one"
U = "test_b.py::test_two"


def G(test: str, effective: str, decides: bool = True, via: str = "") -> GuardRef:
    return GuardRef(test, effective, via, "strong", decides)


def B(function: str, verdict: str, tier: str | None, **guards: list[GuardRef]) -> BehaviourRecord:
    gs = {t: tuple(v) for t, v in guards.items()}
    return BehaviourRecord("pkg/m.py", function, "modified", 1, verdict, tier, gs,
                           {t: len(v) for t, v in gs.items()},
                           sum(1 for v in gs.values() for g in v if g.decides))


def R(sha: str, *behaviours: BehaviourRecord, findings: tuple[FindingRecord, ...] = (),
      waives: tuple[WaiveChange, ...] = (), status: str = "audited") -> CommitRecord:
    return CommitRecord(sha, "p" + sha, f"commit {sha}", "", status, behaviours=behaviours,
                        findings=findings, waive_changes=waives)


def E(function: str, *guards: str, severity: str = "error",
      rule: str = "no-pre-merge-guard") -> FindingRecord:
    return FindingRecord(severity, rule, function, "pkg/m.py", 1, guards)


def Res(commit: str, test: str, outcome: str) -> Outcome:
    return Outcome(commit, test, outcome, SourceLoc("results.jsonl"))


@pytest.mark.parametrize(("verdict", "share"), [
    ("pre-merge", "pre-merge"), ("gated", "gated"), ("post-merge-only", "post-merge"),
    ("qa-only", "qa-only"), ("waived", "unguarded"), ("unscheduled", "unguarded"),
    ("invalid", "unguarded"), ("unguarded", "unguarded"), ("a newer word", "unguarded"),
])
def test_buckets_never_a_false_green(verdict: str, share: str) -> None:
    assert share_of(verdict) == share


def test_totals_count_failed_commits_apart() -> None:
    recs = [R("c1", B("f", "pre-merge", "symbol"), B("g", "waived", "symbol")),
            R("c2", B("h", "pre-merge", "symbol"), status="failed")]
    t = totals(recs)
    assert (t.behaviours, t.count("pre-merge"), t.count("unguarded"), t.failed) == (2, 1, 1, 1)


@pytest.mark.parametrize(("results", "want"), [
    # pass then fail: the window is every commit after the pass up to the failure
    ([("c1", T, "passed"), ("c3", T, "failed")], [(T, "c3", "c1", ("c2", "c3"))]),
    # fail, fail: no new break; fail then pass then fail: a second one
    ([("c1", T, "passed"), ("c2", T, "failed"), ("c3", T, "failed")],
     [(T, "c2", "c1", ("c2",))]),
    ([("c1", T, "passed"), ("c2", T, "failed"), ("c3", T, "passed"), ("c4", T, "failed")],
     [(T, "c2", "c1", ("c2",)), (T, "c4", "c3", ("c4",))]),
    # a first result that fails has no pass before it: not a faulty change
    ([("c2", T, "failed")], []),
    # two results at one commit (two shards): a failure when either failed
    ([("c1", T, "passed"), ("c2", T, "passed"), ("c2", T, "failed")],
     [(T, "c2", "c1", ("c2",))]),
    # each test's own previous result counts, not the previous commit with any result
    ([("c1", T, "passed"), ("c2", U, "passed"), ("c4", T, "failed")],
     [(T, "c4", "c1", ("c2", "c3", "c4"))]),
    # results of commits outside the range are ignored
    ([("zz", T, "passed"), ("c2", T, "failed")], []),
])
def test_breaks_from_outcomes(results: list[tuple[str, str, str]],
                              want: list[tuple[str, str, str, tuple[str, ...]]]) -> None:
    order = ["c1", "c2", "c3", "c4"]
    got = breaks_from_outcomes(order, [Res(*r) for r in results])
    assert [(b.test, b.seen_at, b.since, b.window) for b in got] == want
    assert all(b.signal == OUTCOMES for b in got)


def W(test: str, change: str, marker: str = "SKIP", reason: str = "https://nvbugs/1"
      ) -> WaiveChange:
    return WaiveChange(test, change, marker, reason, None, 1)


@pytest.mark.parametrize(("waives", "want"), [
    # no earlier change of the test's waive line: back to the start of the range
    ({"c3": [W(T, "added")]}, [(T, "c3", None, ("c1", "c2", "c3"))]),
    # back to the commit after the last change of that test's line (a removal here)
    ({"c1": [W(T, "removed")], "c4": [W(T, "added")]}, [(T, "c4", "c1", ("c2", "c3", "c4"))]),
    # another test's waive lines do not bound the window
    ({"c2": [W(U, "added")], "c3": [W(T, "added")]},
     [(U, "c2", None, ("c1", "c2")), (T, "c3", None, ("c1", "c2", "c3"))]),
    # UNSTABLE, a waive without a reason, a removal and a changed reason are no break
    ({"c2": [W(T, "added", "UNSTABLE")], "c3": [W(U, "added", reason=" ")],
      "c4": [W(T, "changed")]}, []),
    # XFAIL counts like SKIP
    ({"c2": [W(T, "added", "XFAIL")]}, [(T, "c2", None, ("c1", "c2"))]),
])
def test_breaks_from_waives(waives: dict[str, list[WaiveChange]],
                            want: list[tuple[str, str, str | None, tuple[str, ...]]]) -> None:
    recs = [R(s, waives=tuple(waives.get(s, ()))) for s in ("c1", "c2", "c3", "c4")]
    got = breaks_from_waives(recs)
    assert [(b.test, b.seen_at, b.since, b.window) for b in got] == want
    assert all(b.signal == WAIVES for b in got)


@pytest.mark.parametrize(("old", "new", "want"), [
    ("", "a.py::t SKIP (https://nvbugs/1)\n", [("a.py::t", "added", "SKIP", None)]),
    ("a.py::t SKIP (x)\n", "", [("a.py::t", "removed", "SKIP", None)]),
    ("a.py::t SKIP (x)\n", "a.py::t XFAIL (x)\n", [("a.py::t", "changed", "XFAIL", None)]),
    ("a.py::t SKIP (x)\n", "# a comment\na.py::t SKIP (x)\n", []),  # only moved
    ("a.py::t SKIP (x)\n", "a.py::t SKIP (x)\nfull:A100/a.py::t SKIP (y)\n",
     [("a.py::t", "added", "SKIP", "A100")]),
])
def test_waive_changes_per_test_and_gpu_prefix(old: str, new: str,
                                               want: list[tuple[str, str, str, str | None]]
                                               ) -> None:
    got = waive_changes(old, new, "waives.txt")
    assert [(w.test, w.change, w.marker, w.gpu) for w in got] == want


def _brk(window: tuple[str, ...], test: str = T) -> Break:
    return Break(test, OUTCOMES, window[-1], "c0", window)


def test_culprit_is_the_most_specific_link_then_the_latest_commit() -> None:
    recs = [R("c1", B("f", "pre-merge", "module", module=[G(T, "post-merge-only")])),
            R("c2", B("g", "post-merge-only", "symbol", symbol=[G(T, "post-merge-only")])),
            R("c3", B("h", "post-merge-only", "symbol", symbol=[G(T, "post-merge-only")])),
            R("c4", B("k", "pre-merge", "module", module=[G(T, "pre-merge")]))]
    hit = find_culprit(recs, _brk(("c1", "c2", "c3", "c4")))
    assert hit is not None
    r, b, tier, suspects = hit
    assert (r.sha, b.function, tier, suspects) == ("c3", "h", "symbol", ("c2", "c3"))
    # outside the window or not audited: never a culprit
    assert find_culprit(recs, _brk(("c4",))) is not None
    failed = [R("c2", B("g", "x", "symbol", symbol=[G(T, "x")]), status="failed")]
    assert find_culprit(failed, _brk(("c2",))) is None


def test_a_unit_test_links_through_its_selection_line() -> None:
    sel = "unittest/_torch/test_x.py"
    recs = [R("c1", B("f", "post-merge-only", "symbol",
                      symbol=[G("unittest/_torch/test_x.py::test_y", "post-merge-only",
                                via=sel)]))]
    ci_id = normalize_test(f"test_unittests.py::test_unittests_v2[{sel}]")
    assert ci_id == sel
    assert find_culprit(recs, _brk(("c1",), ci_id)) is not None


@pytest.mark.parametrize(("behaviour", "findings", "flagged"), [
    # an error naming the failing test
    (B("f", "post-merge-only", "symbol", symbol=[G(T, "post-merge-only")]), (E("f", T),), True),
    # a warning naming a post-merge-only specific guard of the change (not the failing test)
    (B("f", "pre-merge", "parameter", parameter=[G(U, "post-merge-only", decides=False)],
       module=[G(T, "pre-merge")]), (E("f", U, severity="warning", rule="post-merge-guard"),),
     True),
    # an info finding never flags
    (B("f", "pre-merge", "symbol", symbol=[G(T, "pre-merge")]),
     (E("f", T, severity="info", rule="thin-pre-merge-guard"),), False),
    # judged pre-merge, the failing test only context: missed
    (B("f", "pre-merge", "symbol", symbol=[G(U, "pre-merge")], module=[G(T, "post-merge-only")]),
     (), False),
    # an error naming neither the test nor a post-merge-only specific guard: missed
    (B("f", "gated", "symbol", symbol=[G(U, "gated")], module=[G(T, "post-merge-only")]),
     (E("f", U),), False),
])
def test_what_flags_a_faulty_change(behaviour: BehaviourRecord,
                                    findings: tuple[FindingRecord, ...], flagged: bool) -> None:
    r = R("c1", behaviour, findings=findings)
    assert (flagged_by(r, behaviour, T) is not None) is flagged
    fc = judge([r], _brk(("c1",)))
    assert fc.culprit == "c1" and fc.flagged is flagged
    if not flagged:
        assert f"judged f {behaviour.verdict}" in fc.reason


def test_unattributed_faulty_change_says_why() -> None:
    recs = [R("c1", B("f", "pre-merge", "symbol", symbol=[G(U, "pre-merge")])),
            R("c2", status="failed")]
    fc = judge(recs, _brk(("c1", "c2")))
    assert fc.culprit is None and not fc.flagged
    assert "no commit of the window (2) links" in fc.reason and "1 of them could not" in fc.reason


def test_precision_counts_errors_of_scored_commits_confirmed_at_culprits() -> None:
    recs = [R("c0", B("z", "unguarded", None), findings=(E("z"),)),  # before the first result
            R("c1", B("f", "post-merge-only", "symbol", symbol=[G(T, "post-merge-only")]),
              B("g", "unguarded", None), findings=(E("f", T), E("g"))),
            R("c2", B("h", "gated", "symbol", symbol=[G(U, "gated")]), findings=(E("h", U),))]
    order = [r.sha for r in recs]
    results = [Res("c0", T, "passed"), Res("c2", T, "failed")]
    sc = score(recs, breaks_from_outcomes(order, results), OUTCOMES, [o.commit for o in results])
    assert (sc.scored_commits, sc.errors, sc.confirmed) == (2, 3, 1)
    assert sc.recall == 1.0 and sc.precision == pytest.approx(1 / 3)
    assert score(recs, [], OUTCOMES, []).recall is None


def test_leaned_on_counts_only_and_shared_post_merge_guards() -> None:
    recs = [R("c1", B("f", "post-merge-only", "symbol", symbol=[G(T, "post-merge-only")])),
            R("c2", B("g", "post-merge-only", "symbol",
                      symbol=[G(T, "post-merge-only"), G(U, "post-merge-only")])),
            R("c3", B("h", "pre-merge", "symbol", symbol=[G(U, "pre-merge")])),
            # the module tier is no specific guard; a waived guard did not run post-merge
            R("c4", B("k", "post-merge-only", "module", module=[G(U, "post-merge-only")]),
              B("m", "waived", "symbol", symbol=[G(U, "waived")]))]
    got = [(x.test, x.only, x.changes, x.commits) for x in leaned_on(recs)]
    assert got == [(T, 1, 2, ("c1",)), (U, 0, 1, ())]


def test_plan_items_leave_out_what_a_move_cannot_help() -> None:
    recs = [R("c1",
              B("ran", "post-merge-only", "symbol", symbol=[G(T, "post-merge-only")]),
              B("waived", "waived", "symbol", symbol=[G(T, "waived")]),
              B("weak", "post-merge-only", "module", module=[G(T, "post-merge-only")]),
              B("guarded", "pre-merge", "symbol", symbol=[G(T, "pre-merge")]),
              B("context", "qa-only", "symbol", symbol=[G(U, "qa-only")],
                module=[G(T, "post-merge-only", decides=False)]),
              B("unit", "gated", "symbol", symbol=[G("unittest/x.py::t", "gated",
                                                    via="unittest/x.py")]))]
    # a record holding fewer deciding guards than the audit counted is left out too
    cut = BehaviourRecord("pkg/m.py", "cut", "modified", 1, "post-merge-only", "symbol",
                          {"symbol": (G(T, "post-merge-only"),)}, {"symbol": 9}, 9)
    recs.append(R("c2", cut))
    got = {it.key.split("::")[-1]: it.tests for it in items_of(recs)}
    assert got == {"ran": (T,), "context": (U,), "unit": ("unittest/x.py::t", "unittest/x.py")}


def test_record_json_round_trip_and_bad_shapes() -> None:
    r = R("c1", B("f", "gated", "symbol", symbol=[G(T, "gated", via="v")]),
          findings=(E("f", T),), waives=(W(T, "added"),))
    assert record_from_json(record_json(r), "x") == r
    bad = record_json(r)
    bad["behaviours"][0]["guards"]["symbol"][0] = [T, "gated"]
    with pytest.raises(InputError, match=r"x: commit.behaviours\[0\].guards.symbol"):
        record_from_json(bad, "x")
    with pytest.raises(InputError, match="missing key 'sha'"):
        record_from_json({"status": "audited"}, "x")


def test_junit_cases_resolve_to_node_ids(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from auditor.replay.outcomes import read_outcomes

    sha = "ab" * 20
    (tmp_path / f"{sha[:9]}.xml").write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="A10-PyTorch-1.accuracy.test_llm.TestA" name="test_f[x=1::y]">'
        '<failure message="m"/></testcase>'
        '<testcase classname="test_b" name="test_two"><error message="e"/></testcase>'
        '<testcase classname="test_b" name="test_skipped"><skipped/></testcase>'
        '<testcase classname="H100-PyTorch-2.perf.test_new.TestZ" name="test_z[a]"/>'
        '<testcase classname="test_unittests" name="test_unittests_v2[unittest/_torch/x]"/>'
        "</testsuite></testsuites>")
    known = {"accuracy/test_llm.py::TestA::test_f[x=1::y]", U}
    got = read_outcomes(str(tmp_path), [sha, "cd" * 20], known)
    assert [(o.commit, o.test, o.outcome) for o in got.results] == [
        (sha, "accuracy/test_llm.py::TestA::test_f[x=1::y]", "failed"),
        (sha, U, "failed"),
        (sha, "perf/test_new.py::TestZ::test_z[a]", "passed"),
        (sha, "unittest/_torch/x", "passed")]
    assert got.unknown_tests == ("perf/test_new.py::TestZ::test_z[a]", "unittest/_torch/x")
    assert got.outside == 0
