"""QA lists, waives.txt and .test_durations."""

from __future__ import annotations

import json

import pytest
from tdb_helpers import DATA, DURATIONS, QA, WAIVES

from testdb.errors import Severity
from testdb.lists import load_durations_text, load_list_text


def test_qa_list_lines_keep_their_line_numbers() -> None:
    text = "# header\n\na.py::t[x]\nb.py::T::u TIMEOUT (90)  # slow\nunittest/_torch -k \"a\"\n"
    res = load_list_text(text, "qa/l.txt")
    assert [(e.test, e.loc.line, e.kind) for e in res.entries] == [
        ("a.py::t[x]", 3, "nodeid"), ("b.py::T::u", 4, "nodeid"),
        ('unittest/_torch -k "a"', 5, "unittest")]
    assert res.entries[1].timeout_minutes == 90 and res.entries[1].comment == "slow"
    assert res.diagnostics == []


def test_waives_default_to_skip_and_keep_prefixes() -> None:
    res = load_list_text("full:A10/a.py::t SKIP (bug 1)\na.py::u\na.py::v XFAIL (bug 2)\n",
                         "waives.txt", waive=True)
    assert [(e.test, e.gpu_prefix, e.marker, e.reason) for e in res.entries] == [
        ("a.py::t", "A10", "SKIP", "bug 1"), ("a.py::u", None, "SKIP", None),
        ("a.py::v", None, "XFAIL", "bug 2")]
    [d] = res.diagnostics
    assert (d.loc.line, d.severity, d.rule) == (2, Severity.WARNING, "waive-no-marker")


def test_crlf_and_bom_free_text() -> None:
    res = load_list_text("a.py::t\r\nb.py::u\r\n", "l.txt")
    assert [e.test for e in res.entries] == ["a.py::t", "b.py::u"]


def test_real_waives_file() -> None:
    text = (DATA / WAIVES).read_text(encoding="utf-8")
    res = load_list_text(text, WAIVES, waive=True)
    assert [d for d in res.diagnostics if d.severity is Severity.ERROR] == []
    raw = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert len(res.entries) >= len(raw)  # one line may waive several unit-test paths
    assert all(e.marker in ("SKIP", "XFAIL", "UNSTABLE") for e in res.entries)
    prefixed = [ln for ln in raw if ln.startswith("full:")]
    assert sum(1 for e in res.entries if e.gpu_prefix) >= len(prefixed)


def test_real_qa_lists_parse_cleanly() -> None:
    for path in sorted((DATA / QA).glob("*.txt")):
        res = load_list_text(path.read_text(encoding="utf-8"), path.name)
        assert [d for d in res.diagnostics if d.severity is Severity.ERROR] == [], path.name


def test_durations() -> None:
    data, diags = load_durations_text('{"a.py::t": 1.5, "b.py::u": 3, "x": -1, "y": "no",'
                                      ' "z": true}', "d.json")
    assert data == {"a.py::t": 1.5, "b.py::u": 3.0}
    assert [d.severity for d in diags] == [Severity.WARNING] * 3
    assert [k in d.message for k, d in zip(("'x'", "'y'", "'z'"), diags, strict=True)] == [
        True] * 3


@pytest.mark.parametrize(("value", "shown"), [
    ('"slow"', '"slow"'), ("null", "null"), ("-1", "-1"), ("-0.5", "-0.5"), ("NaN", "NaN"),
    ("Infinity", "Infinity"), ("1e999", "Infinity"), ("true", "true"), ("[60]", "[60]"),
    ('{"s": 60}', '{"s": 60}')])
def test_a_duration_that_is_not_seconds_is_a_warning_naming_its_line_and_key(
        value: str, shown: str) -> None:
    """The value is ignored (the test counts as of unknown duration, pytest-split's average)
    and the warning says where: .test_durations:LINE and the key."""
    text = ('{\n  "a.py::t[x]": 1.5,\n  "b.py::u[y]": ' + value + ',\n  "c.py::v": 0\n}\n')
    data, diags = load_durations_text(text, DURATIONS)
    assert data == {"a.py::t[x]": 1.5, "c.py::v": 0.0}
    [d] = diags
    assert d.severity is Severity.WARNING and d.rule == "bad-duration"
    assert str(d.loc) == f"{DURATIONS}:3"
    assert "'b.py::u[y]'" in d.message and f" is {shown}, not a number of seconds" in d.message


def test_a_duplicate_key_is_placed_at_its_last_line_as_json_keeps_it() -> None:
    text = '{"k": 1,\n"k": "slow",\n"j": 2}'
    data, [d] = load_durations_text(text, DURATIONS)
    assert data == {"j": 2.0} and d.loc.line == 2


def test_many_bad_durations_are_named_up_to_a_limit_then_counted() -> None:
    from testdb.lists import MAX_BAD_SHOWN

    n = MAX_BAD_SHOWN + 5
    text = "{" + ",\n".join(f'"t{i}": "x"' for i in range(n)) + "}"
    _, diags = load_durations_text(text, DURATIONS)
    assert len(diags) == MAX_BAD_SHOWN + 1
    assert [d.loc.line for d in diags[:MAX_BAD_SHOWN]] == list(range(1, MAX_BAD_SHOWN + 1))
    assert diags[-1].message.startswith("5 more duration(s)")


def test_durations_bad_json_and_shape() -> None:
    data, [d] = load_durations_text('{"a": 1,\n"b": }', "d.json")
    assert data == {} and d.severity is Severity.ERROR and d.loc.line == 2
    data, [d] = load_durations_text("[1, 2]", "d.json")
    assert data == {} and d.rule == "bad-shape"


def test_real_durations_keep_selection_arguments() -> None:
    text = (DATA / DURATIONS).read_text(encoding="utf-8")
    data, diags = load_durations_text(text, DURATIONS)
    assert diags == [] and len(data) == len(json.loads(text))
    assert any(k.startswith("unittest/") and " --ignore=" in k for k in data)
