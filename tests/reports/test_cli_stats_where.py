"""`testdb stats` and `testdb where` through the command line: output, exit codes, bad input."""

from __future__ import annotations

import json
import os
import random
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from reports.cli import cli, main

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "testdb"))  # the shared helpers and the where oracle live there

from tdb_helpers import (  # noqa: E402
    DATA,
    QA,
    STAGES,
    TESTDB,
    WAIVES,
    small_checkout,
    write_checkout,
)
from where_oracle import Oracle, family  # noqa: E402

ROOT = ["--root", str(DATA)]
CHUNKED = "accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_chunked_prefill"


def invoke(*args: str):  # type: ignore[no-untyped-def]
    """Run the click group; ``return_value`` is the exit code ``main()`` would use."""
    return CliRunner().invoke(cli, list(args), standalone_mode=False, catch_exceptions=False)


def exit_code(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the real entry point ``main()``: exit code, stdout, stderr."""
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return int(exc.value.code or 0), out, err


# ---- stats ----------------------------------------------------------------------------------

def test_stats_text_on_the_corpus() -> None:
    r = invoke(*ROOT, "stats")
    assert r.return_value == 0
    assert re.search(r"^contexts\s+\d+ test-db contexts, \d+ blocks$", r.output, re.M)
    assert re.search(r"^test ids\s+\d+: .*pre-merge \d+", r.output, re.M)
    assert "diagnostics     0 errors" in r.output


def test_stats_json_on_the_corpus() -> None:
    r = invoke(*ROOT, "stats", "--format", "json")
    data = json.loads(r.output)
    assert data["schema"] == "testdb-audit/stats@1"
    assert data["errors"] == 0 and data["entries"] > 2000
    assert all(d["severity"] == "warning" for d in data["diagnostics"])


# ---- where ----------------------------------------------------------------------------------

def test_where_text_shows_the_canonical_answer() -> None:
    r = invoke(*ROOT, "where", "TestLlama3_1_8BInstruct::test_chunked_prefill")
    assert r.return_value == 0
    text = r.output
    summary, rest = text.split("\n", 1)
    # The summary first (counts per verdict), saying the ids were not checked: no sources.
    assert summary == ("6 parametrizations of 1 function: pre-merge 1, gated 1, qa-only 3, "
                       "waived 1 (not checked against sources: no test sources in this checkout)")
    assert rest.startswith(CHUNKED + "\n")
    fi = text.split("[attn_backend=FLASHINFER]")[1].split("\n  [")[0]
    trt = text.split("[attn_backend=TRTLLM]")[1].split("\n  [")[0]
    assert fi.startswith("  GATED") and trt.startswith("  PRE-MERGE")
    # Paths as audit and lint print them: relative to the checkout root, openable as path:line.
    assert re.search(r"^    tests/integration/test_lists/test-db/l0_h100\.yml:\d+ +in the "
                     r"post_merge block at line \d+$", fi, re.M)
    assert re.search(r"test-db/l0_dgx_h100\.yml:\d+ +in the pre_merge block at line \d+", fi)
    assert re.search(r"DGX_H100-4_GPUs-PyTorch-\S+ +shard \d+/\d+ +gated "
                     r"\(multi-GPU path list, --add-multi-gpu-test\)", fi)
    assert "QA: tests/integration/test_lists/qa/" in fi
    assert re.search(r"test-db/l0_h100\.yml:\d+ +in the pre_merge block at line \d+", trt)
    assert re.search(r"DGX_H100-PyTorch-\d +shard \d+/\d+ +pre-merge", trt)


def test_where_json_and_markdown() -> None:
    data = json.loads(invoke(*ROOT, "where", CHUNKED + "[attn_backend=FLASHINFER]",
                             "--format", "json").output)
    assert data["schema"] == "testdb-audit/where@2"
    assert data["summary"] == {"gated": 1} and data["not_checked"]
    [t] = data["tests"]
    assert t["verdict"] == "gated"
    stages = {s["name"]: s["class"] for p in t["placements"] for s in p["stages"]}
    assert "pre-merge" not in stages.values()
    assert any(p["kind"] == "qa" for p in t["placements"])
    lines = {(p["path"].rsplit("/", 1)[-1], p["stage_term"]) for p in t["placements"]
             if p["kind"] == "test-db"}
    assert ("l0_h100.yml", "post_merge") in lines and ("l0_dgx_h100.yml", "pre_merge") in lines
    md = invoke(*ROOT, "where", CHUNKED, "--format", "markdown").output
    assert md.startswith(f"### `testdb where {CHUNKED}`\n\n6 parametrizations of 1 function: ")
    assert "| **gated** |" in md and "| **pre-merge** |" in md


def test_where_no_match_is_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = exit_code([*ROOT, "where", "no_such_test_anywhere"], capsys)
    assert code == 1 and out.strip() == "no test matches"
    # a near miss: the nearest ids ("did you mean")
    code, out, _ = exit_code([*ROOT, "where", "TestLlama3_1_8BInstruct::test_chunked_prefil"],
                             capsys)
    # (other classes' test_chunked_prefill are past the edit budget on Class::function)
    assert code == 1 and out.strip() == f"no test matches; did you mean {CHUNKED}?"
    code, out, _ = exit_code([*ROOT, "where", CHUNKED + "[attn_backend=TRTLL]"], capsys)
    assert code == 1 and out.startswith(
        f"no test matches; did you mean {CHUNKED}[attn_backend=TRTLLM], ")
    data = json.loads(invoke(*ROOT, "where", CHUNKED + "[attn_backend=TRTLL]", "--format",
                             "json").output)
    assert data["tests"] == [] and data["did_you_mean"][0] == CHUNKED + "[attn_backend=TRTLLM]"


def test_where_unbalanced_bracket_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = exit_code([*ROOT, "where", CHUNKED + "[attn_backend=TRTLLM"], capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: the pattern ") and "has an unbalanced '['" in err
    # a glob's `[` is a literal, as in the ids: one that matches is answered
    code, out, _ = exit_code([*ROOT, "where", "*::test_chunked_prefill[attn_backend=TRT*"],
                             capsys)
    assert code == 0 and "[attn_backend=TRTLLM]  PRE-MERGE" in out


def test_where_with_broken_durations_warns_and_answers(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    root = small_checkout(tmp_path, {"tests/integration/defs/.test_durations": '{"a": '})
    code, out, err = exit_code(["--root", str(root), "where", "a.py::test_multi"], capsys)
    assert code == 0 and "GATED" in out  # a warning with a result is exit 0
    assert re.search(r"\.test_durations:\d+: warning: malformed JSON", err)


def test_where_empty_pattern_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = exit_code([*ROOT, "where", "  "], capsys)
    assert code == 2 and err.startswith("error: empty pattern")


def test_where_agrees_with_the_oracle_through_the_cli() -> None:
    oracle = Oracle.read(DATA)
    data = json.loads(invoke(*ROOT, "where", "*", "--format", "json").output)
    tests = {t["id"]: t for t in data["tests"]}
    rng = random.Random(7)
    sample = rng.sample(oracle.l0_ids, 160) + rng.sample(sorted(oracle.qa), 40)
    for test_id in sample:
        t = tests[test_id]
        assert t["verdict"] == oracle.verdict(test_id), test_id
        fams = {family(s["name"]) for p in t["placements"] for s in p["stages"]}
        assert fams == oracle.families.get(test_id, set()), test_id
    for test_id in sample[:5]:  # and the exact-id path, one process-like call each
        [one] = json.loads(invoke(*ROOT, "where", test_id, "--format", "json").output)["tests"]
        assert one == tests[test_id]


# ---- bad input: each file under a tmp checkout ------------------------------------------------

BAD = {
    "malformed-yaml": (f"{TESTDB}/l0_bad.yml",
                       "l0_bad:\n- condition:\n    terms: {stage: pre_merge\n"
                       "  tests:\n  - a.py::t\n",
                       "error", r"l0_bad\.yml:4: error: malformed YAML"),
    "tests-not-a-list": (f"{TESTDB}/l0_bad.yml",
                         "l0_bad:\n- condition:\n    terms: {stage: pre_merge}\n  tests: a.py::t\n",
                         "error", r"l0_bad\.yml:4: error: `tests` of block 1 .* must be a list"),
    "unknown-condition-kind": (f"{TESTDB}/l0_bad.yml",
                               "l0_bad:\n- condition:\n    bogus: {stage: pre_merge}\n"
                               "  tests:\n  - a.py::t\n",
                               "error", r"l0_bad\.yml:3: error: unknown condition kind 'bogus'"),
    "non-integer-range-bound": (f"{TESTDB}/l0_bad.yml",
                                "l0_bad:\n- condition:\n    ranges:\n      system_gpu_count:\n"
                                "        gte: one\n  tests:\n  - a.py::t\n",
                                "error", r"l0_bad\.yml:5: error: range bound "
                                         r"system_gpu_count\.gte must be a number"),
    "missing-context": (f"{TESTDB}/l0_bad.yml", "version: 0.0.1\n",
                        "error", r"l0_bad\.yml:1: error: no context in this file"),
    "bad-timeout": (f"{TESTDB}/l0_bad.yml",
                    "l0_bad:\n- condition: {}\n  tests:\n  - a.py::t TIMEOUT (ninety)\n",
                    "error", r"l0_bad\.yml:4: error: TIMEOUT needs a positive whole number"),
    "bad-timeout-in-qa-list": (f"{QA}/llm_bad.txt", "a.py::ok\na.py::t TIMEOUT (0)\n",
                               "error", r"llm_bad\.txt:2: error: TIMEOUT needs"),
    "skip-reason-without-parens": (WAIVES, "a.py::test_post SKIP flaky on A10\n",
                                   "warning", r"waives\.txt:1: warning: SKIP reason must be in "
                                              r"parentheses: write `SKIP \(flaky on A10\)`"),
    "non-utf8": (f"{TESTDB}/l0_bad.yml", b"l0_bad:\n- condition: {}\n  tests:\n  - a.py::\xe9\n",
                 "error", r"l0_bad\.yml:4: error: not valid UTF-8 \(byte 0xe9\)"),
    "mako-control-line": (f"{TESTDB}/l0_bad.yml",
                          "l0_bad:\n- condition: {}\n  tests:\n  - a.py::t\n% if gpu:\n"
                          "  - a.py::u\n% endif\n",
                          "error", r"l0_bad\.yml:5: error: Mako template line"),
    "mako-expression": (f"{QA}/llm_bad.txt", "a.py::t[${backend}]\n",
                        "error", r"llm_bad\.txt:1: error: Mako template line"),
    "bad-stage-table": (STAGES, "stages:\n- {name: A10-PyTorch-1, platform: a10}\n",
                        "error", r"ci/stages\.yml:2: error: stage row lacks context"),
}


@pytest.mark.parametrize("case", sorted(BAD), ids=str)
def test_bad_input_through_the_cli(case: str, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    rel, content, severity, message = BAD[case]
    root = small_checkout(tmp_path, {rel: content})
    code, out, err = exit_code(["--root", str(root), "stats"], capsys)
    assert re.search(message, err), err
    assert code == (2 if severity == "error" else 0)
    # every diagnostic names path:line
    for line in err.splitlines():
        assert re.match(r"^[^:\s]+:\d+: (error|warning): ", line), line
    # the good files are still counted
    assert re.search(r"^contexts\s+[2-9] test-db contexts", out, re.M), out
    # and `where` still answers for tests of the good files, exiting 2 for the errors
    code, out, err = exit_code(["--root", str(root), "where", "a.py::test_multi"], capsys)
    assert code == (2 if severity == "error" else 0)
    assert ("UNSCHEDULED" if rel == STAGES else "GATED") in out


def test_several_broken_files_each_say_their_piece(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    extra: dict[str, str | bytes] = {}
    for n, case in enumerate(sorted(BAD)):
        rel, content, _, _ = BAD[case]
        if rel.startswith(TESTDB):
            rel = rel.replace("l0_bad", f"l0_bad{n}")
            if isinstance(content, str):
                content = content.replace("l0_bad", f"l0_bad{n}")
            else:
                content = content.replace(b"l0_bad", f"l0_bad{n}".encode())
        extra[rel] = content
    root = small_checkout(tmp_path, extra)
    code, out, err = exit_code(["--root", str(root), "stats", "--format", "json"], capsys)
    assert code == 2
    data = json.loads(out)
    files = {d["path"].rsplit("/", 1)[-1] for d in data["diagnostics"]}
    assert len([f for f in files if f.startswith("l0_bad")]) == 8
    assert {"waives.txt", "llm_bad.txt", "stages.yml"} <= files
    assert "l0_a10" in err or data["contexts"] >= 2
    assert data["qa_list_entries"] >= 1


def test_unreadable_file_through_the_cli(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    root = small_checkout(tmp_path)
    path = root / TESTDB / "l0_dgx_h100.yml"
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("this user (root) reads files whatever their mode")
        code, out, err = exit_code(["--root", str(root), "stats"], capsys)
    finally:
        path.chmod(0o644)
    assert code == 2
    assert re.search(r"l0_dgx_h100\.yml: error: cannot read file", err)
    assert re.search(r"^contexts\s+1 test-db contexts", out, re.M)


def test_dangling_symlink_through_the_cli(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    root = small_checkout(tmp_path)
    (root / TESTDB / "l0_gone.yml").symlink_to(tmp_path / "nowhere.yml")
    code, out, err = exit_code(["--root", str(root), "stats"], capsys)
    assert code == 2
    assert re.search(r"test-db/l0_gone\.yml: error: no such file", err)
    assert re.search(r"^contexts\s+2 test-db contexts", out, re.M)


def test_root_that_is_not_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = exit_code(["--root", str(tmp_path / "missing"), "stats"], capsys)
    assert code == 2 and err.startswith("error: ") and "not a directory" in err


def test_missing_stage_table_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = small_checkout(tmp_path)
    code, _, err = exit_code(["--root", str(root), "--stages", str(tmp_path / "no.yml"), "stats"],
                             capsys)
    assert code == 2 and re.search(r"no\.yml: error: no such file", err)


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code([*ROOT, "frobnicate"], capsys)[0] == 2
    assert exit_code([*ROOT, "stats", "--format", "xml"], capsys)[0] == 2
    assert exit_code([*ROOT, "where"], capsys)[0] == 2
    code, out, _ = exit_code(["--help"], capsys)
    assert code == 0 and "stats" in out and "where" in out


def test_internal_error_is_exit_3_without_traceback(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import testdb.stats

    def boom(*_: object) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(testdb.stats, "compute_stats", boom)
    code, _, err = exit_code([*ROOT, "--no-cache", "stats"], capsys)  # no cached stats
    assert code == 3 and "internal error: RuntimeError: kaboom" in err


def test_no_cache_flag_gives_the_same_answer(tmp_path: Path) -> None:
    root = str(small_checkout(tmp_path))
    a = invoke("--root", root, "where", "*", "--format", "json").output
    b = invoke("--root", root, "--no-cache", "where", "*", "--format", "json").output
    c = invoke("--root", root, "where", "*", "--format", "json").output
    assert a == b == c


def test_write_checkout_helper_roundtrip(tmp_path: Path) -> None:
    root = write_checkout(tmp_path, {"x/y.txt": "hi", "z.bin": b"\x00"})
    assert (root / "x/y.txt").read_text() == "hi" and (root / "z.bin").read_bytes() == b"\x00"


# ---- a checkout with test sources: whole functions, invalid ids ------------------------------

MULTI = "test_multi.py::test_multi_names"


def sources_checkout(tmp_path: Path) -> Path:
    """Four parametrizations of test_multi_names, half of them listed (one pre-merge, one
    post-merge), and a stale listed id [5] in the pre-merge block."""
    from tdb_helpers import A10_YML

    a10 = (A10_YML.replace("  - a.py::TestB::test_b\n",
                           f"  - a.py::TestB::test_b\n  - {MULTI}[1]\n  - {MULTI}[5]\n")
           .replace("  - a.py::test_post\n", f"  - a.py::test_post\n  - {MULTI}[2]\n"))
    return small_checkout(tmp_path, {
        f"{TESTDB}/l0_a10.yml": a10,
        "tests/integration/defs/test_multi.py":
            "import pytest\n\n@pytest.mark.parametrize('n', [1, 2, 3, 4])\n"
            "def test_multi_names(n):\n    pass\n"})


def test_where_shows_the_whole_function(tmp_path: Path) -> None:
    root = str(sources_checkout(tmp_path))
    data = json.loads(invoke("--root", root, "where", "test_multi_names", "--format",
                             "json").output)
    got = {t["id"].removeprefix(MULTI): t for t in data["tests"]}
    assert {k: t["verdict"] for k, t in got.items()} == {
        "[1]": "pre-merge", "[2]": "post-merge-only", "[3]": "unscheduled",
        "[4]": "unscheduled", "[5]": "invalid"}
    assert data["summary"] == {"pre-merge": 1, "post-merge-only": 1, "unscheduled": 2,
                               "invalid": 1}
    assert data["not_checked"] is None
    # unlisted: where it is defined; invalid: its line, no stage, the nearest real ids
    from testdb.inventory import build_static

    item = build_static(root).get(MULTI + "[3]")
    assert item is not None
    assert got["[3]"]["defined_at"] == {"path": "tests/integration/defs/test_multi.py",
                                        "line": item.line}
    bad = got["[5]"]
    assert bad["schedule_verdict"] == "pre-merge"  # what the line would give: CI ignores it
    assert [p["stages"] for p in bad["placements"]] == [[]]
    assert bad["check"]["nearest"] and bad["check"]["nearest"][0].startswith(MULTI + "[")
    text = invoke("--root", root, "where", "test_multi_names").output
    assert text.splitlines()[0].startswith(  # + the gate caveat: no gate rules here
        "5 parametrizations of 1 function: pre-merge 1, post-merge-only 1, unscheduled 2, "
        "invalid 1 (gate rules unknown")
    assert "[3]  UNSCHEDULED  in no test list: never runs in CI" in text
    five = text.split("  [5]  ")[1]
    assert five.startswith("INVALID  names no test in this checkout; CI ignores it")
    assert "A10-PyTorch" not in five  # no stage lines for a line CI ignores
    md = invoke("--root", root, "where", "test_multi_names", "--format", "markdown").output
    assert "| **invalid** (CI ignores it; did you mean" in md


def test_where_exact_invalid_id_and_an_unlisted_function(tmp_path: Path) -> None:
    root = str(sources_checkout(tmp_path))
    r = invoke("--root", root, "where", f"{MULTI}[5]", "--format", "json")
    assert r.return_value == 0
    [t] = json.loads(r.output)["tests"]
    assert t["verdict"] == "invalid" and "no parametrization [5]" in t["check"]["reason"]
    # a function no list names is answered (unscheduled), not "no test matches"
    r = invoke("--root", root, "where", f"{MULTI}[4]")
    assert r.return_value == 0 and "UNSCHEDULED" in r.output
