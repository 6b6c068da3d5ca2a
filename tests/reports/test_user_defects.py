"""What a new user tripped on (issue 16: 2, 11, 14, 15) and the audit's first line (issue 13.4):
every --format json is JSON with a schema, JSON errors give their whole position, audit --help
tells both sides of a --diff, output files follow the umask, warnings keep the headline from
reading green."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE, REPO

PR = os.path.join(EXAMPLE, "pr.diff")
HEADLINE = ("The behaviour change is guarded pre-merge, 1 warning: the FLASHINFER half of the "
            "guard runs only post-merge")
CHUNKED = "accuracy/test_llm_api_pytorch.py::TestLlama3_1_8BInstruct::test_{}"


@pytest.fixture(scope="module")
def audit_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    from reports.cli import main

    path = tmp_path_factory.mktemp("audit") / "audit.json"
    with pytest.raises(SystemExit) as done:
        main(["--root", EXAMPLE, "audit", "--diff", PR, "--format", "json", "-o", str(path)])
    assert done.value.code == 0
    return str(path)


@pytest.fixture(scope="module")
def example_repo(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The example as a git repository: the base commit, then the PR applied."""
    import shutil
    import subprocess

    root = tmp_path_factory.mktemp("repo") / "flashinfer"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("*.diff", "README.md"))
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "base"],
                 ["apply", PR], ["add", "-A"], ["commit", "-qm", "the PR"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env)
    return str(root)


# ---- every --format json prints JSON with a schema (16.2) -----------------------------------

JSON_COMMANDS = {
    "stats": ["stats"],
    "where": ["where", "test_chunked_prefill"],
    "where-no-match": ["where", "test_nothing_like_this"],
    "audit": ["audit", "--diff", PR],
    "comment": ["comment", "--diff", PR],
    "comment-from-file": ["comment", "--audit", "{audit}"],
    "inventory": ["inventory"],
    "lint": ["lint"],
    "report": ["report", "--html", "{tmp}/report"],
    "launch-dry-run": ["launch", "--from", "{audit}", "--dry-run"],
    "launch-bot": ["launch", "--from", "{audit}", "--backend", "bot"],
    "launch-bot-dry-run": ["launch", "--from", "{audit}", "--backend", "bot", "--dry-run"],
    "launch-slurm-dry-run": ["launch", "--from", "{audit}", "--backend", "slurm", "--dry-run"],
    "launch-nothing": ["launch", CHUNKED.format("chunked_prefill[attn_backend=TRTLLM]")],
    "promote-dry-run": ["promote", CHUNKED.format("bfloat16[attn_backend=FLASHINFER-"
                                                  "torch_compile=False]"),
                        "--create-block", "--dry-run"],
    "demote-dry-run": ["demote", CHUNKED.format("chunked_prefill[attn_backend=TRTLLM]"),
                       "--context", "l0_h100", "--create-block", "--dry-run"],
    "audit-git-range": ["--root", "{repo}", "audit", "--base", "HEAD~1", "--head", "HEAD"],
    "replay": ["--root", "{repo}", "replay", "HEAD~1..HEAD"],
}


@pytest.mark.parametrize("name", sorted(JSON_COMMANDS))
def test_every_json_format_prints_json_with_a_schema(run_cli, audit_file: str, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                     example_repo: str, name: str) -> None:
    argv = [a.format(audit=audit_file, tmp=tmp_path, repo=example_repo)
            for a in JSON_COMMANDS[name]]
    if argv[0] != "--root":
        argv = ["--root", EXAMPLE, *argv]
    res = run_cli(*argv, "--format", "json")
    assert res.code in (0, 1), res.err
    doc = json.loads(res.out)
    assert isinstance(doc, dict) and re.fullmatch(r"testdb-audit/[a-z-]+@\d+", doc["schema"]), \
        doc.get("schema")


def test_every_command_offering_json_is_in_the_table() -> None:
    """A new command with --format json joins the table above, or this fails."""
    from reports.cli import COMMANDS, cli

    offering = set()
    for name in COMMANDS:
        cmd = cli.get_command(None, name)  # type: ignore[arg-type]
        fmt = next((p for p in cmd.params if p.name == "fmt"), None)
        if fmt is not None and "json" in getattr(fmt.type, "choices", ()):
            offering.add(name)
    covered = {(argv[2] if argv[0] == "--root" else argv[0]) for argv in JSON_COMMANDS.values()}
    assert offering - covered == set()


# ---- JSON errors give the whole position (16.11) --------------------------------------------

def test_truncated_audit_json_names_line_and_column(run_cli, audit_file: str,  # type: ignore[no-untyped-def]
                                                    tmp_path: Path) -> None:
    text = Path(audit_file).read_text()
    cut = text.index('"provenance"') + 40  # inside a string value
    bad = tmp_path / "truncated.json"
    bad.write_text(text[:cut])
    line = text[:cut].count("\n") + 1
    try:
        json.loads(text[:cut])
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
    res = run_cli("comment", "--audit", str(bad))
    assert res.code == 2
    assert res.err.startswith(f"error: {bad}:{line}: not JSON: ")
    assert where in res.err and "; expected the audit JSON written by testdb" in res.err


@pytest.mark.parametrize("text, message", [
    ('{"schema": "testdb-audit/run-results@1", "results": [{"key": "a', "Unterminated string "
     "starting at line 1, column 62"),
    ('{"schema": "testdb-audit/run-results@1",\n  "results": [1,', "Expecting value (line 2, "
     "column 17)"),
    ('{"schema": "x" "y"}', "Expecting ',' delimiter (line 1, column 16)"),
])
def test_results_json_errors_name_line_and_column(run_cli, tmp_path: Path, text: str,  # type: ignore[no-untyped-def]
                                                  message: str) -> None:
    bad = tmp_path / "results.json"
    bad.write_text(text)
    res = run_cli("comment", "--audit", str(bad))
    assert res.code == 2 and f"not JSON: {message};" in res.err
    from auditor.launch.model import read_results
    from testdb.errors import InputError

    with pytest.raises(InputError, match=re.escape(f"not JSON: {message}")):
        read_results(bad)


# ---- audit --help tells both sides (16.14) --------------------------------------------------

def test_audit_help_says_the_checkout_may_be_either_side(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("audit", "--help")
    text = " ".join(res.out.split())
    assert res.code == 0
    assert "head side" in text and "base side" in text and "docs/audit.md" in text
    assert "--root is its head side" not in text
    doc = (Path(REPO) / "docs" / "audit.md").read_text()
    assert "head side" in doc and "base side" in doc


# ---- output files follow the umask (16.15) --------------------------------------------------

@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    os.umask(old)
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_output_files_follow_the_umask(run_cli, tmp_path: Path, umask: None, mask: int,  # type: ignore[no-untyped-def]
                                       mode: int) -> None:
    os.umask(mask)
    out = tmp_path / "audit.json"
    assert run_cli("--root", EXAMPLE, "audit", "--diff", PR, "-o", str(out)).code == 0
    inv = tmp_path / "inventory.json"
    assert run_cli("--root", EXAMPLE, "inventory", "-o", str(inv)).code == 0
    assert (_mode(out), _mode(inv)) == (mode, mode)


def test_an_existing_output_file_keeps_its_mode(run_cli, tmp_path: Path, umask: None) -> None:  # type: ignore[no-untyped-def]
    os.umask(0o022)
    out = tmp_path / "audit.json"
    out.write_text("{}")
    out.chmod(0o640)
    assert run_cli("--root", EXAMPLE, "audit", "--diff", PR, "-o", str(out)).code == 0
    assert _mode(out) == 0o640 and json.loads(out.read_text())["schema"]


def test_launch_results_follow_the_umask(tmp_path: Path, umask: None) -> None:
    from auditor.launch.model import RunResult, RunResults, write_results

    os.umask(0o022)
    path = write_results(RunResults(str(tmp_path), (RunResult("k", "t", "passed", "local"),)))
    assert _mode(path) == 0o644


def test_caches_stay_private(tmp_path: Path, umask: None) -> None:
    from testdb.files import write_cache

    os.umask(0o022)
    write_cache(str(tmp_path / "index-abc"), b"payload", keep=None)
    assert _mode(tmp_path / "index-abc") == 0o600


# ---- the first line names the warnings (13.4) -----------------------------------------------

def test_the_first_line_names_the_warning_in_text_markdown_and_comment(run_cli) -> None:  # type: ignore[no-untyped-def]
    text = run_cli("--root", EXAMPLE, "audit", "--diff", PR)
    markdown = run_cli("--root", EXAMPLE, "audit", "--diff", PR, "--format", "markdown")
    comment = run_cli("--root", EXAMPLE, "comment", "--diff", PR)
    data = json.loads(run_cli("--root", EXAMPLE, "audit", "--diff", PR, "--format", "json").out)
    assert text.out.splitlines()[0] == HEADLINE
    assert markdown.out.splitlines()[0] == f"⚠️ **testdb-audit: {HEADLINE}.**"
    assert comment.out.splitlines()[0] == f"⚠️ **testdb-audit: {HEADLINE}.**"
    assert data["summary"]["sentence"] == HEADLINE


def test_readme_shows_the_demo_output_first_line() -> None:
    from reports.cli import main

    readme = (Path(REPO) / "README.md").read_text()
    block = readme.split("What the first command prints (abridged):\n\n```\n", 1)[1]
    shown = block.split("\n", 2)[:2]
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), pytest.raises(SystemExit):
        main(["--root", os.path.relpath(EXAMPLE, REPO), "audit", "--diff",
              os.path.relpath(PR, REPO)])
    assert buf.getvalue().splitlines()[:1] == shown[:1]


@pytest.mark.parametrize("phrases, sentence", [
    ([], "The behaviour change is guarded pre-merge"),
    (["a"], "The behaviour change is guarded pre-merge, 1 warning: a"),
    (["a", "b"], "The behaviour change is guarded pre-merge, 2 warnings: a; b"),
    (["a", "b", "c", "d"], "The behaviour change is guarded pre-merge, 4 warnings: a; b; +2 more"),
])
def test_with_warnings(phrases: list[str], sentence: str) -> None:
    from reports.render_audit import with_warnings

    assert with_warnings("The behaviour change is guarded pre-merge", phrases) == sentence


@pytest.mark.parametrize("unguarded, errors, warnings, colour", [
    (0, 0, 0, "green"), (0, 0, 1, "yellow"), (1, 1, 0, "red"), (1, 1, 1, "red"),
    (0, 1, 0, "red"),
])
def test_headline_colour(unguarded: int, errors: int, warnings: int, colour: str) -> None:
    from reports.render_audit import headline_colour

    assert headline_colour({"unguarded": unguarded, "errors": errors,
                            "warnings": warnings}) == colour
