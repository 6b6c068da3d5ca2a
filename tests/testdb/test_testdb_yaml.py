"""test-db YAML -> contexts of blocks with file:line, and what it says about bad files."""

from __future__ import annotations

import textwrap

import pytest
from tdb_helpers import A10_YML, DATA, TESTDB

from testdb.errors import Severity, SourceLoc
from testdb.model import Range
from testdb.testdb_yaml import load_testdb_text

P = "l0_x.yml"


def load(text: str, kind: str = "l0"):  # type: ignore[no-untyped-def]
    return load_testdb_text(textwrap.dedent(text), P, kind)


def errors(res) -> list[tuple[int, str]]:  # type: ignore[no-untyped-def]
    return [(d.loc.line, d.rule) for d in res.diagnostics if d.severity is Severity.ERROR]


def test_contexts_blocks_entries_and_lines() -> None:
    res = load_testdb_text(A10_YML, P)
    assert res.diagnostics == [] and res.skipped is None
    [ctx] = res.contexts
    assert (ctx.name, ctx.kind, ctx.loc) == ("l0_a10", "l0", SourceLoc(P, 2))
    pre, post = ctx.blocks
    assert (pre.index, pre.loc.line, pre.stage_term) == (0, 3, "pre_merge")
    assert (post.index, post.loc.line, post.stage_term) == (1, 18, "post_merge")
    c = pre.condition
    assert c.term("backend") == "pytorch"
    assert c.range("system_gpu_count") == Range("system_gpu_count", gte=1, lte=1)
    assert c.wildcard("gpu") == ("*a10*",)
    assert [(e.test, e.loc.line, e.timeout_minutes) for e in pre.entries] == [
        ("a.py::test_a[x=1]", 15, None), ("a.py::test_a[x=2]", 16, 90),
        ("a.py::TestB::test_b", 17, None)]
    assert [e.test for e in ctx.entries] == [*(e.test for e in pre.entries), "a.py::test_post"]


def test_real_file_holds_two_contexts() -> None:
    path = DATA / TESTDB / "l0_a10.yml"
    res = load_testdb_text(path.read_text(encoding="utf-8"), "l0_a10.yml")
    assert errors(res) == []
    names = [c.name for c in res.contexts]
    assert names[0] == "l0_a10" and len(names) == 2
    first = res.contexts[0].blocks[0]
    assert first.condition.wildcard("linux_distribution_name") == ("ubuntu*",)
    # the comment line inside `tests:` is not an entry; the first entry is on line 17
    assert first.entries[0].loc.line == 17


def test_condition_kinds_and_value_shapes() -> None:
    res = load("""\
        l0_x:
        - condition:
            ranges:
              compute_capability: {gte: 9.0, lt: 10}
              gpu_memory: {gt: 80000}
            wildcards:
              gpu: b200
              cpu: ['x86*', 'aarch64']
            terms:
              supports_fp8: true
              placement: single_node
          tests:
          - a.py::t
        """)
    assert res.diagnostics == []
    c = res.contexts[0].blocks[0].condition
    assert c.range("compute_capability") == Range("compute_capability", gte=9.0, lt=10)
    assert c.range("gpu_memory") == Range("gpu_memory", gt=80000)
    assert c.wildcard("gpu") == ("b200",)
    assert c.wildcard("cpu") == ("x86*", "aarch64")
    assert c.term("supports_fp8") == "true"
    assert "compute_capability >= 9 and < 10" in c.describe()


def test_empty_tests_and_missing_condition() -> None:
    res = load("""\
        l0_x:
        - condition:
            terms: {stage: pre_merge}
          tests:
        - tests:
          - a.py::t
        """)
    assert errors(res) == []
    b0, b1 = res.contexts[0].blocks
    assert b0.entries == ()
    assert [d.rule for d in res.diagnostics] == ["no-condition"]
    assert b1.condition.terms == () and b1.entries[0].test == "a.py::t"


@pytest.mark.parametrize("text, line, rule", [
    ("l0_x:\n- condition:\n    terms: {stage: pre_merge\n  tests:\n  - a.py::t\n", 4, "yaml"),
    ("l0_x:\n- condition:\n    terms:\n      stage: pre_merge\n  tests: a.py::t\n", 5,
     "bad-shape"),
    ("l0_x:\n- condition:\n    bogus:\n      stage: pre_merge\n  tests:\n  - a.py::t\n", 3,
     "unknown-condition"),
    ("l0_x:\n- condition:\n    ranges:\n      system_gpu_count:\n        gte: one\n"
     "  tests:\n  - a.py::t\n", 5, "bad-range"),
    ("l0_x:\n- condition:\n    ranges:\n      system_gpu_count:\n        gte: '1'\n"
     "  tests:\n  - a.py::t\n", 5, "bad-range"),
    ("l0_x:\n- condition:\n    ranges:\n      system_gpu_count:\n        about: 1\n"
     "  tests:\n  - a.py::t\n", 5, "bad-range"),
    ("version: 0.0.1\n", 1, "missing-context"),
    ("", 1, "not-test-db"),
    ("- a.py::t\n", 1, "not-test-db"),
    ("l0_x:\n  condition: {}\n", 2, "bad-shape"),
    ("l0_x:\n- a.py::t\n", 2, "bad-shape"),
    ("l0_x:\n- condition: {}\n  tests:\n  - {a: b}\n", 4, "bad-shape"),
    ("l0_x:\n- condition: {}\n  tests:\n  - a.py::t TIMEOUT (ninety)\n", 4, "bad-timeout"),
    ("l0_x:\n- condition: {}\n  tests:\n  - a.py::t\n% if x:\n  - a.py::u\n% endif\n", 5,
     "mako-line"),
    ("l0_x:\n- condition: {}\n  tests:\n  - a.py::t[${p}]\n", 4, "mako-line"),
    ("l0_x:\n- condition: {}\n  tests: []\nl0_x:\n- condition: {}\n  tests: []\n", 4,
     "duplicate-context"),
])
def test_bad_input_is_reported_at_its_line(text: str, line: int, rule: str) -> None:
    res = load_testdb_text(text, P)
    assert (line, rule) in errors(res), res.diagnostics
    assert all(d.loc.path == P for d in res.diagnostics)


def test_mako_lines_are_blanked_so_the_rest_still_parses() -> None:
    res = load_testdb_text("l0_x:\n- condition: {}\n  tests:\n  - a.py::t\n% if x:\n"
                           "  - a.py::u\n% endif\n", P)
    assert errors(res) == [(5, "mako-line"), (7, "mako-line")]
    assert [e.test for e in res.contexts[0].entries] == ["a.py::t", "a.py::u"]
    assert res.contexts[0].entries[1].loc.line == 6


def test_yaml_directive_is_not_a_mako_line() -> None:
    res = load_testdb_text("%YAML 1.1\n---\nl0_x:\n- condition: {}\n  tests: [a.py::t]\n", P)
    assert res.diagnostics == []


def test_unknown_block_key_is_a_warning() -> None:
    res = load_testdb_text("l0_x:\n- condition: {}\n  tests: []\n  owner: me\n", P)
    assert [(d.severity, d.rule, d.loc.line) for d in res.diagnostics] == [
        (Severity.WARNING, "unknown-key", 4)]


def test_qa_kind_tolerates_other_shapes() -> None:
    for text in ("- perf/test_perf.py::test_perf[x]\n", "llm_perf:\n  config: {a: 1}\n", "",
                 "name:\n- {model: x}\n"):
        res = load_testdb_text(text, "qa.yml", "qa")
        assert res.skipped and res.contexts == [] and errors(res) == []


def test_qa_kind_without_version_line() -> None:
    res = load_testdb_text("llm_function_core:\n- condition: {}\n  tests:\n  - a.py::t\n",
                           "qa.yml", "qa")
    assert res.skipped is None and res.contexts[0].kind == "qa"


def test_alias_bomb_is_refused() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 7):
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [{', '.join(['*' + chr(96 + i)] * 10)}]")
    res = load_testdb_text("\n".join(lines) + "\n", P)
    assert any("expands to" in d.message for d in res.diagnostics)


def test_every_bundled_test_db_file_loads_without_errors() -> None:
    for path in sorted((DATA / TESTDB).glob("*.yml")):
        res = load_testdb_text(path.read_text(encoding="utf-8"), path.name)
        assert errors(res) == [], path.name
        assert res.contexts, path.name
