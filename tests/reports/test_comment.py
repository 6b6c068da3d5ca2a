"""Golden-file tests of the PR comment (reports/comment.py) and of `testdb comment`.

The goldens live in tests/reports/golden/*.md. After an intended change of the output, refresh
them and review the diff like any other change:

    UPDATE_GOLDEN=1 python -m pytest tests/reports/test_comment.py

Volatile parts (commit SHAs, content hashes, the tool version, dates) are scrubbed on both sides,
so a new release or a changed data file does not churn the goldens.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_github import FakeGitHub

from reports.comment import MARKER, MAX_CHARS, render_comment
from reports.inputs import check_audit

HERE = Path(__file__).parent
GOLDEN = HERE / "golden"
FIXTURE = HERE / "fixtures" / "flashinfer-audit.json"
EXAMPLE = HERE.parent.parent / "examples" / "flashinfer-reuse"
SHA = "0123456789abcdef0123456789abcdef01234567"
REPO = "NVIDIA/TensorRT-LLM"
TOKEN = "ghs_CommentTestSecret42"
REPORT_URL = "https://ci.example.com/testdb/pr-1234/index.html"

_SCRUB = [
    (re.compile(r"\b[0-9a-f]{40}\b"), "<sha>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<sha256>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{7,39}\b"), "<hash>"),
    (re.compile(r"testdb-audit \d+\.\d+\.\d+\S*"), "testdb-audit <version>"),
    (re.compile(r"\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d)?(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?)?"),
     "<date>"),
]


def scrub(text: str) -> str:
    for pattern, repl in _SCRUB:
        text = pattern.sub(repl, text)
    return text


# Each golden's first line says why its answer is right (what input it renders and why that
# verdict follows), so a refresh is reviewed against a reason, not only against the old text.
WHY = re.compile(r"<!-- why: (.+?) -->\n", re.S)
NO_WHY = "SAY WHY THIS ANSWER IS RIGHT"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    text = scrub(text)
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    why = WHY.match(old)
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((why.group(0) if why else f"<!-- why: {NO_WHY} -->\n") + text,
                        encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"no golden file {path}; create it with "
                    "UPDATE_GOLDEN=1 python -m pytest tests/reports/test_comment.py")
    assert why and NO_WHY not in why.group(1), (
        f"{name}: its first line must say why its answer is right: <!-- why: ... -->")
    assert text == old[why.end():], (
        f"{name} differs from its golden; if the change is intended, refresh with "
        "UPDATE_GOLDEN=1 python -m pytest tests/reports/test_comment.py and review the diff")


def test_every_golden_says_why_its_answer_is_right() -> None:
    names = sorted(p.name for p in GOLDEN.glob("*.md"))
    assert names
    for name in names:
        why = WHY.match((GOLDEN / name).read_text(encoding="utf-8"))
        assert why and NO_WHY not in why.group(1) and len(why.group(1)) > 40, name


def flashinfer() -> dict[str, Any]:
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return check_audit(data, str(FIXTURE))


def all_guarded() -> dict[str, Any]:
    """The flashinfer audit as if the PR had kept a pre-merge guard for every behaviour."""
    data = flashinfer()
    data["findings"] = []
    data["missing_stages"] = []
    data["suggestion"] = {}
    for b in data["behaviours"]:
        b["verdict"] = "pre-merge"
    data["summary"].update(unguarded=0, errors=0, warnings=0,
                           sentence="The behaviour change is guarded pre-merge")
    data["provenance"]["head"] = SHA
    return data


def results(*outcomes: str) -> list[dict[str, Any]]:
    guards = flashinfer()["findings"][0]["guards"]
    return [{"key": f"k{i}", "test_id": tid, "outcome": outcome, "backend": "local",
             "where": "node-a GPU 0", "started_at": "2024-05-01T12:00:00+00:00",
             "finished_at": "2024-05-01T12:07:30+00:00", "duration_s": 450.0 + i}
            for i, (tid, outcome) in enumerate(zip(guards, outcomes, strict=False))]


def huge(n: int = 900) -> dict[str, Any]:
    data = flashinfer()
    base = data["findings"][0]
    data["findings"] = [
        {**copy.deepcopy(base), "severity": "error" if i % 3 else "warning",
         "path": f"tensorrt_llm/module_{i:04d}.py", "line": i + 1, "function": f"fn_{i}",
         "message": f"fn_{i} changed and its guards run post-merge only; " + "evidence " * 12}
        for i in range(n)]
    data["summary"].update(errors=n * 2 // 3, warnings=n - n * 2 // 3, behaviours=n,
                           unguarded=n, sentence=f"{n} of {n} behaviour changes have no "
                                                 "pre-merge guard")
    return data


# ---- the renderer --------------------------------------------------------------------------

def test_flashinfer_errors_and_warnings_golden() -> None:
    data = flashinfer()
    data["provenance"]["head"] = SHA
    text = render_comment(data, repo=REPO, report_url=REPORT_URL)
    first = text.splitlines()[0]
    assert first.startswith("❌ **testdb-audit: 1 of 1 behaviour change has no pre-merge guard")
    assert text.index("❌ error") < text.index("⚠️ warning"), "errors come first"
    # the cheapest line that starts a guard of every finding, with what it costs
    assert '/bot run --extra-stage "DGX_H100-PyTorch-Post-Merge-1"\n```\n' \
           "<sub>1 extra shard, ~23.4 GPU-min, ~23.4 min wall: DGX_H100-PyTorch-Post-Merge-1 " \
           "(1 GPU x ~23.4 min)</sub>" in text
    assert f"https://github.com/{REPO}/blob/{SHA}/tests/integration/test_lists/test-db/" \
           "l0_h100.yml#L19" in text
    assert "<details>" in text and text.count("<details>") == text.count("</details>")
    assert text.rstrip().endswith(MARKER)
    check_golden("flashinfer.md", text)


def test_findings_sorted_errors_first_even_when_input_is_not() -> None:
    data = flashinfer()
    data["findings"].reverse()
    text = render_comment(data)
    assert text.index("❌ error") < text.index("⚠️ warning")


def test_no_links_without_repo_or_head() -> None:
    text = render_comment(flashinfer(), repo=REPO)  # the diff audit has no head SHA
    assert "https://github.com" not in text
    linked = render_comment(flashinfer(), repo=REPO, head_sha=SHA)
    assert f"/blob/{SHA}/" in linked


def test_all_guarded_is_a_quiet_one_liner() -> None:
    text = render_comment(all_guarded(), repo=REPO, report_url=REPORT_URL)
    assert text.count("\n") == 1 and MARKER in text
    assert text.startswith("✅ **testdb-audit:** The behaviour change is guarded pre-merge")
    check_golden("all-guarded.md", text)


def test_all_guarded_with_passing_results_stays_quiet() -> None:
    text = render_comment(all_guarded(), results=results("passed", "passed"))
    assert text.count("\n") == 1 and "2 launched guards passed" in text


def test_all_guarded_with_a_failed_result_is_not_quiet() -> None:
    text = render_comment(all_guarded(), results=results("passed", "failed"))
    assert text.count("\n") > 3
    assert "**Launched guards:** 1 passed, 1 failed" in text


def test_launch_results_folded_in_golden() -> None:
    data = flashinfer()
    data["provenance"]["head"] = SHA
    text = render_comment(data, repo=REPO, results=results("passed", "failed", "timeout"))
    assert "**Launched guards:** 1 passed, 1 failed, 1 timeout" in text
    table = text[text.index("**Launched guards:**"):]
    assert table.index("❌ failed") < table.index("✅ passed"), "failures first"
    assert "· ✅ passed" in text, "the guard cell of the finding shows the outcome"
    check_golden("with-results.md", text)


def test_huge_audit_is_cut_with_a_visible_note() -> None:
    data = huge()
    full = render_comment(data, max_chars=10_000_000)
    assert len(full) > MAX_CHARS
    text = render_comment(data, report_url=REPORT_URL)
    assert len(text) <= MAX_CHARS
    lines = text.splitlines()
    note = next(line for line in lines if "cut to fit" in line)
    assert REPORT_URL in note and "of 900 findings shown" in note
    assert lines.index(note) < 8, "the note is near the top, where people read"
    assert "/bot run --extra-stage" in text, "the command survives the cut"
    assert text.count("<details>") == text.count("</details>")
    assert text.count("```") % 2 == 0
    assert text.rstrip().endswith(MARKER)
    assert "| ✂️ |" in text and "more findings" in text
    check_golden("huge-head-tail.md", "\n".join([*lines[:12], "…", *lines[-12:]]) + "\n")


def test_huge_audit_without_report_url_names_the_command() -> None:
    text = render_comment(huge(), max_chars=20_000)
    assert len(text) <= 20_000
    assert "testdb report --html DIR --audit audit.json" in text


def test_cell_text_cannot_break_the_table() -> None:
    data = flashinfer()
    data["findings"][0]["message"] = "a | b\nc"
    text = render_comment(data)
    row = next(line for line in text.splitlines() if line.startswith("| ❌ error"))
    assert "a \\| b c" in row


# ---- the command ---------------------------------------------------------------------------

RunCli = Callable[..., Any]


def test_cli_prints_markdown_from_audit_file(run_cli: RunCli) -> None:
    res = run_cli("comment", "--audit", str(FIXTURE), "--repo", REPO, "--head-sha", SHA)
    assert res.code == 0, res.err
    assert res.out == render_comment(flashinfer(), repo=REPO, head_sha=SHA)


def test_cli_fresh_audit_of_the_example(run_cli: RunCli) -> None:
    res = run_cli("--root", str(EXAMPLE), "comment", "--diff", str(EXAMPLE / "pr.diff"))
    assert res.code == 0, res.err
    first = res.out.splitlines()[0]
    # pr.diff keeps the thin unit guard (examples/flashinfer-reuse/README.md): guarded, with
    # the warning that the FLASHINFER half of the integration guard runs post-merge only
    assert first == ("⚠️ **testdb-audit: The behaviour change is guarded pre-merge, 1 warning: "
                     "the FLASHINFER half of the guard runs only post-merge.**"), first
    assert MARKER in res.out
    without = run_cli("--root", str(EXAMPLE), "comment", "--diff",
                      str(EXAMPLE / "pr-no-thin-guard.diff"))
    assert without.out.splitlines()[0].startswith(
        "❌ **testdb-audit: 1 of 1 behaviour change has no pre-merge guard"), without.out


def test_cli_results_file(run_cli: RunCli, tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"schema": "testdb-audit/run-results@1",
                                "results": results("passed", "failed")}), encoding="utf-8")
    res = run_cli("comment", "--audit", str(FIXTURE), "--results", str(path))
    assert res.code == 0, res.err
    assert "**Launched guards:** 1 passed, 1 failed" in res.out


@pytest.mark.parametrize(("content", "expect"), [
    ("{not json", "not JSON"),
    ('{"schema": "testdb-audit/where@1"}', "not an audit file (schema 'testdb-audit/where@1')"),
    ('{"schema": "testdb-audit/audit@2", "provenance": {}}', "missing keys 'summary'"),
    ("[1, 2]", "expected an object, got a list"),
])
def test_cli_bad_audit_json(run_cli: RunCli, tmp_path: Path, content: str, expect: str) -> None:
    bad = tmp_path / "audit.json"
    bad.write_text(content, encoding="utf-8")
    res = run_cli("comment", "--audit", str(bad))
    assert res.code == 2
    assert res.err.startswith(f"error: {bad}") and expect in res.err, res.err
    assert "Traceback" not in res.err


def test_cli_bad_finding_shape(run_cli: RunCli, tmp_path: Path) -> None:
    data = flashinfer()
    data["findings"][1]["line"] = "nineteen"
    bad = tmp_path / "audit.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    res = run_cli("comment", "--audit", str(bad))
    assert res.code == 2
    assert "findings[1].line: expected an integer, got a string" in res.err


def test_cli_post_needs_token(run_cli: RunCli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    res = run_cli("comment", "--audit", str(FIXTURE), "--post", "--pr", "7", "--repo", REPO)
    assert res.code == 2 and "GITHUB_TOKEN" in res.err


def test_cli_post_creates_then_updates_one_comment(run_cli: RunCli,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    with FakeGitHub(token=TOKEN, prs={"octo/hello": (7,)}) as gh:
        args = ["comment", "--audit", str(FIXTURE), "--repo", "octo/hello", "--pr", "7",
                "--post", "--api-url", gh.url]
        first = run_cli(*args)
        assert first.code == 0, first.err
        assert first.out.startswith("created comment ")
        fixed = tmp_path / "fixed.json"
        fixed.write_text(json.dumps(all_guarded()), encoding="utf-8")
        second = run_cli("comment", "--audit", str(fixed), *args[3:])
        assert second.code == 0, second.err
        assert second.out.startswith("updated comment ")
        comments = gh.comments("octo/hello", 7)
        assert len(comments) == 1
        assert comments[0]["body"].startswith("✅ **testdb-audit:**")
        again = run_cli("comment", "--audit", str(fixed), *args[3:], "--format", "json")
        assert json.loads(again.out)["action"] == "unchanged"
        assert len(gh.comments("octo/hello", 7)) == 1
        for res in (first, second, again):
            assert TOKEN not in res.out + res.err


@pytest.mark.parametrize(("gates", "started", "words"), [
    ({"multi_gpu": True}, {"DGX_H100-4_GPUs-PyTorch-Others-1": "path list"},
     "multi-GPU stages start"),
    ({"multi_gpu": False}, {"DGX_H100-4_GPUs-PyTorch-Others-1": "--extra-stage"},
     "1 multi-GPU stage started"),  # a bot command started one: not "not started"
    ({"multi_gpu": False}, {"DGX_H100-PyTorch-1": "base"}, "multi-GPU stages not started"),
])
def test_the_header_tells_whether_multi_gpu_stages_start(gates: dict[str, Any],
                                                         started: dict[str, Any],
                                                         words: str) -> None:
    from reports.comment import _multi_gpu_words

    assert _multi_gpu_words(gates, started) == words
