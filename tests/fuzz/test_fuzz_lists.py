"""QA .txt lists, waives.txt and .test_durations under mutation, and the line grammar itself."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from testdb.errors import SourceLoc
from testdb.grammar import parse_line
from testdb.lists import load_durations_text, load_list_text
from tests.fuzz import fuzzkit
from tests.fuzz.conftest import cases, fuzz_settings, run_bounded
from tests.hangguard import no_hang


@fuzz_settings(30)
@given(case=cases("qa_list"))
def test_qa_list_mutations(case, ws):
    run_bounded("qa_list", case, ws)


@fuzz_settings(25)
@given(case=cases("waives"))
def test_waive_mutations(case, ws):
    run_bounded("waives", case, ws)


@fuzz_settings(25)
@given(case=cases("durations"))
def test_durations_mutations(case, ws):
    run_bounded("durations", case, ws)


@fuzz_settings(15)
@given(case=cases("qa_list"))
def test_qa_list_mutations_through_the_cli(case, ws):
    run_bounded("qa_list", case, ws, mode="cli")


_LINE_ALPHABET = st.sampled_from(["a", "/", ".py", "::", " ", "\t", "[", "]", "(", ")", "-",
                                  "SKIP", "XFAIL", "UNSTABLE", "TIMEOUT", "ISOLATION", "(90)",
                                  "#", "full:", "unittest/", "-k", "'", '"', "%", "${", "模",
                                  "\u2028", "\x85", "\x00", "9" * 12, "\u00b2", "="])


@fuzz_settings(60)
@given(parts=st.lists(_LINE_ALPHABET, max_size=40), waive=st.booleans())
def test_any_line_parses_to_entries_or_diagnostics(parts, waive):
    line = "".join(parts)
    res = parse_line(line, SourceLoc("l.txt", 7), waive=waive)
    for e in res.entries:
        assert e.loc == SourceLoc("l.txt", 7)
        assert e.timeout_minutes is None or 0 < e.timeout_minutes < 10**9
        e.node, e.base, e.ci_node_id, e.unittest_args  # noqa: B018 - properties must not raise
    assert all(d.loc == SourceLoc("l.txt", 7) and d.message for d in res.diagnostics)


@pytest.mark.parametrize("unit", ["a.py::b ", "a/b.py ", "[ ", "( ", "t.py::f[ SKIP ",
                                  " SKIP", "a.py::b SKIP (", "x TIMEOUT (1) "])
def test_one_megabyte_line_is_linear(unit):
    """Splitting on spaces and finding markers used to re-count brackets from the line start
    at every space: a 1 MB line took hours."""
    line = (unit * (fuzzkit.LONG // len(unit) + 1))[: fuzzkit.LONG]
    with no_hang("a 1 MB list line"):
        load_list_text(line, "long.txt")
        load_list_text(line, "waives.txt", waive=True)


@pytest.mark.parametrize("text", ["[" * 100_000, '{"a":' * 100_000, '{"a": ' + "9" * 5000 + "}",
                                  '{"a": NaN, "b": Infinity, "c": -1, "d": true, "e": "1"}',
                                  '{"a": 1e999}', "[1, 2]", "", "\ufeff{}"],
                         ids=["deep-list", "deep-object", "5000-digits", "odd-values", "1e999",
                              "a-list", "empty", "bom"])
def test_durations_never_raise(text):
    out, diags = load_durations_text(text, "d.json")
    assert all(isinstance(v, float) and v >= 0 for v in out.values())
    assert not fuzzkit.check_diagnostics(diags, "d.json", text)
