"""``combine`` joins its parts' id lists when they follow one another and sorts them when they
interleave (auditor.verdict ``_merged``): either way, exactly what one ``decide`` over the union
of the links says, field by field."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.evidence import Evidence
from auditor.verdict import Decision, _merged, combine, decide

VERDICTS = ("pre-merge", "gated", "post-merge-only", "qa-only", "waived", "invalid")


def _decide(links: list[Evidence], verdict: dict[str, str]) -> Decision:
    return decide(links, lambda t: verdict[t])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 30), st.sampled_from(VERDICTS)),
                min_size=1, max_size=40, unique_by=lambda x: (x[0], x[1])),
       st.sampled_from(["files", "files reversed", "interleaved", "one"]),
       st.booleans())
def test_combined_parts_decide_as_the_union(rows: list[tuple[int, int, str]], how: str,
                                            symbol: bool) -> None:
    """Links of test files f0..f5 (a few at the symbol tier when ``symbol``: that level
    decides where it has links), split into parts by file (as the module tier is), in
    reverse, or across files."""
    verdict = {f"f{f}.py::t{t:02d}": v for f, t, v in rows}
    links = [Evidence(tid, "symbol" if symbol and i % 5 == 0 else "module", 1, "r")
             for i, tid in enumerate(verdict)]
    if how.startswith("files"):
        by_file: dict[str, list[Evidence]] = {}
        for e in links:
            by_file.setdefault(e.test_id.split("::")[0], []).append(e)
        parts = list(by_file.values())[::-1 if how == "files reversed" else 1]
    elif how == "interleaved":
        parts = [links[i::3] for i in range(3)]
    else:
        parts = [links]
    whole = _decide(links, verdict)
    got = combine(_decide(p, verdict) for p in parts if p)
    assert got.level == whole.level and got.verdict == whole.verdict
    if got.level is None:
        return
    assert [e.test_id for e in got.deciding] == [e.test_id for e in whole.deciding]
    assert (got.pre_merge, got.not_pre_merge, got.weak) == (
        whole.pre_merge, whole.not_pre_merge, whole.weak)
    assert sorted(got.invalid) == sorted(whole.invalid)


def test_merged_joins_runs_that_follow_and_sorts_the_rest() -> None:
    assert _merged([("a", "b"), (), ("c",), ("d", "e")]) == ["a", "b", "c", "d", "e"]
    assert _merged([("c", "d"), ("a", "b")]) == ["a", "b", "c", "d"]  # out of order: sorted
    assert _merged([("a", "c"), ("b", "d")]) == ["a", "b", "c", "d"]  # interleaved: sorted
    assert _merged([("a", "b"), ("b", "c")]) == ["a", "b", "b", "c"]  # touching: sorted
    assert _merged([]) == []
