"""lint: each rule fires on a case made for it, and the real corpus' findings are the known ones."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from testdb.errors import Severity
from testdb.index import load
from testdb.inventory import build_static
from testdb.lint import RULES, lint, sarif
from tests.conftest import CORPUS

LISTS = "tests/integration/test_lists"


def checkout(tmp_path: Path, testdb: str, waives: str = "", qa: str = "",
             stages: str = "", tests: dict[str, str] | None = None) -> Path:
    root = tmp_path / "co"
    (root / LISTS / "test-db").mkdir(parents=True)
    (root / LISTS / "qa").mkdir()
    (root / LISTS / "test-db" / "l0_a.yml").write_text(textwrap.dedent(testdb))
    (root / LISTS / "waives.txt").write_text(textwrap.dedent(waives))
    (root / LISTS / "qa" / "qa_list.txt").write_text(textwrap.dedent(qa))
    (root / "ci").mkdir()
    (root / "ci" / "stages.yml").write_text(textwrap.dedent(stages or """\
        stages:
        - {name: A10-PyTorch-1, platform: a10, context: l0_a, split_id: 1, splits: 1}
        - {name: A10-PyTorch-Post-Merge-1, platform: a10, context: l0_a, split_id: 1, splits: 1}
        - {name: H100_PCIe-PyTorch-1, platform: h100, context: l0_missing}
        """))
    for rel, text in (tests or {}).items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return root


TESTDB = """\
    version: 0.0.1
    l0_a:
    - condition:
        terms: {stage: pre_merge, backend: pytorch}
      tests:
      - test_t.py::test_f[1]
      - test_t.py::test_f[1]
      - test_t.py::test_typo[2]
    - condition:
        terms: {stage: post_merge, backend: pytorch}
      tests:
      - test_t.py::test_f[2]
    - condition:
        terms: {stage: pre_merge, backend: cpp}
      tests:
      - test_t.py::test_g
    """


def rules(findings) -> dict[str, list]:  # type: ignore[no-untyped-def]
    out: dict[str, list] = {}
    for f in findings:
        out.setdefault(f.rule, []).append(f)
    return out


def test_each_rule_fires_where_it_should(tmp_path: Path) -> None:
    root = checkout(tmp_path, TESTDB, waives="""\
        test_t.py::test_gone SKIP (bug 1)
        test_t.py::test_g SKIP (bug 2)
        test_t.py::test_g SKIP (bug 2 again)
        full:B200/test_t.py::test_f[1] SKIP (no such stage)
        """, qa="test_t.py::test_q\ntest_t.py::test_q\n", tests={
        "tests/integration/defs/test_t.py": """\
            import pytest
            @pytest.mark.parametrize("a", [1, 2])
            def test_f(a): pass
            @pytest.mark.parametrize("a", [1, 2])
            def test_typ(a): pass
            def test_g(): pass
            def test_dark(): pass
            def test_q(): pass
            """})
    index = load(str(root), use_cache=False)
    found = rules(lint(index, build_static(str(root), cache=False)))
    dup = found["duplicate-entry"]
    assert {f.loc.line for f in dup if f.loc.path.endswith("l0_a.yml")} == {7}
    assert any(f.loc.path.endswith("qa_list.txt") and f.loc.line == 2 for f in dup)
    assert [f.loc.line for f in found["unmatched-waive"]] == [1]
    assert [f.loc.line for f in found["duplicate-waive"]] == [3]
    assert [f.loc.line for f in found["unknown-gpu-prefix"]] == [4]
    unknown = found["unknown-test"]
    assert len(unknown) == 1 and unknown[0].severity is Severity.ERROR
    assert "did you mean test_t.py::test_typ[2]" in unknown[0].message
    assert [f.loc.line for f in found["unreached-block"]] == [13]  # no -CPP- stage
    assert "H100_PCIe-PyTorch-1" in found["missing-context"][0].message
    dark = sorted(f.message for f in found["dark-parametrization"])
    assert dark == [  # one finding per place: a function's unlisted parametrizations together
        "test_t.py::test_dark is in no test list: it never runs in CI",
        "test_t.py::test_typ: 2 parametrizations are in no test list ([1], [2]): they never "
        "run in CI"]
    half = found["half-guarded-function"]
    assert len(half) == 1 and "test_t.py::test_f" in half[0].message


def test_sarif_is_2_1_0_with_locations(tmp_path: Path) -> None:
    root = checkout(tmp_path, TESTDB)
    findings = lint(load(str(root), use_cache=False))
    doc = sarif(findings, "0.1.0")
    assert doc["version"] == "2.1.0"
    run = doc["runs"][0]
    assert {r["id"] for r in run["tool"]["driver"]["rules"]} == set(RULES)
    assert len(run["results"]) == len(findings)
    loc = run["results"][0]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "ci/stages.yml"  # the missing-context error
    assert loc["region"]["startLine"] == 4


def test_cli_exit_codes_and_formats(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = checkout(tmp_path, TESTDB)
    res = run_cli("--root", str(root), "lint")
    assert res.code == 1  # missing-context is an error
    assert "[missing-context]" in res.out
    res = run_cli("--root", str(root), "lint", "--fail-on", "never", "--format", "json")
    assert res.code == 0
    data = json.loads(res.out)
    assert data["schema"] == "testdb-audit/lint@1" and data["findings"]
    res = run_cli("--root", str(root), "lint", "--rule", "duplicate-entry", "--fail-on",
                  "warning")
    assert res.code == 1 and all("[duplicate-entry]" in ln for ln in res.out.splitlines())


def test_real_corpus_findings(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("--root", CORPUS, "lint", "--format", "json", "--fail-on", "never")
    assert res.code == 0
    found = rules_json(json.loads(res.out)["findings"])
    # The stage table names a context no test-db file defines (Verl post-merge stage).
    assert any("DGX_B200-4_GPUs-Verl-Post-Merge-1" in f["message"]
               for f in found["missing-context"])
    # TensorRT-backend blocks of l0_a10 have no -TensorRT- stage left to run them.
    assert any(f["path"].endswith("l0_a10.yml") and "backend=tensorrt" in f["message"]
               for f in found["unreached-block"])
    assert "duplicate-entry" in found and "unmatched-waive" in found


def rules_json(findings: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in findings:
        out.setdefault(f["rule"], []).append(f)
    return out


def test_waive_rules_follow_ci_apply_waives(tmp_path: Path) -> None:
    """A function waive names no listed test (CI waives exact ids): a warning, not silence; a
    full:GPU/ waive that CI's rewrite never applies in any stage: unknown-gpu-prefix."""
    root = checkout(tmp_path, TESTDB, waives="""\
        test_t.py::test_f SKIP (reads like it waives test_f[1] and test_f[2])
        test_t.py::test_f[1] SKIP (exact: fine)
        full:A100X/test_t.py::test_g SKIP (A10 occurs in A100X, but CI never applies it)
        full:A10/test_t.py::test_g SKIP (applies in A10-PyTorch-1)
        """)
    found = rules(lint(load(str(root), use_cache=False)))
    [func] = found["unmatched-waive"]
    assert (func.loc.line, func.severity) == (1, Severity.WARNING)
    assert "none of its 2 listed parametrization(s) is waived" in func.message
    assert [f.loc.line for f in found["unknown-gpu-prefix"]] == [3]


def test_an_unknown_rule_is_exit_2_naming_the_valid_ones(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = checkout(tmp_path, TESTDB)
    res = run_cli("--root", str(root), "lint", "--rule", "missing-contxt")
    assert res.code == 2 and "0 finding" not in res.out + res.err
    assert "unknown lint rule 'missing-contxt' (did you mean missing-context?)" in res.err
    assert all(r in res.err for r in RULES)


def test_one_finding_per_rule_and_place(tmp_path: Path) -> None:
    # One waives.txt line that holds several entries (the real waives.txt has one): one
    # finding per rule for that line, naming every entry once.
    root = checkout(tmp_path, TESTDB, waives="""\
        full:sm100/unittest/a/test_a.py unittest/b/test_b.py unittest/c SKIP (Blackwell)
        """)
    found = lint(load(str(root), use_cache=False))
    places = [(f.rule, f.loc) for f in found]
    assert len(places) == len(set(places))
    [gpu] = [f for f in found if f.rule == "unknown-gpu-prefix"]
    [stale] = [f for f in found if f.rule == "unmatched-waive"]
    assert gpu.loc.line == stale.loc.line == 1
    assert "unittest/a/test_a.py, unittest/b/test_b.py, unittest/c (3 on this line)" in (
        stale.message)


def test_cli_and_html_count_and_name_the_same_findings(run_cli) -> None:  # type: ignore[no-untyped-def]
    from reports.html import _lint_rows

    res = run_cli("--root", CORPUS, "lint", "--format", "json", "--fail-on", "never")
    cli = json.loads(res.out)["findings"]
    text = run_cli("--root", CORPUS, "lint", "--fail-on", "never")
    assert text.err.strip().splitlines()[-1].startswith(f"{len(cli)} findings:")
    places = [(f["rule"], f["path"], f["line"]) for f in cli]
    assert len(places) == len(set(places))  # waives.txt:297 once per rule, not ten times
    html = _lint_rows(load(CORPUS))
    assert len(html) == len(cli)
    assert sorted((r["rule"], r["line"], r["message"]) for r in html) == sorted(
        (f["rule"], f["line"], f["message"]) for f in cli)  # `input`, not `duplicate-context`
