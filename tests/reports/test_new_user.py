"""What a new user tripped on (issue 25), each: the command, then what it must do now.

4 `--root` after the command; 5 `comment --repo` checked; 6 `replay --outcomes` read first;
7 `inventory` per file, and a root without test sources said; 9 the work tree named as the
head; 10 `comment --fail-on`; 11 `lint` notes the files `stats` lists as skipped; 13 plurals.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from reports.cli import hoist_globals
from reports.common import repo_problem
from reports.words import plural
from tests.gitrepo import git

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "flashinfer-reuse"
LISTS = "tests/integration/test_lists"


@pytest.fixture
def example(tmp_path: Path) -> Path:
    root = tmp_path / "example"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("*.diff", "README.md"))
    return root


@pytest.fixture
def repo(example: Path) -> Path:
    """The example committed as `base`, then the PR committed on top of it."""
    git(example, "init", "-q", "-b", "main")
    git(example, "add", "-A")
    git(example, "commit", "-qm", "base")
    git(example, "apply", str(EXAMPLE / "pr.diff"))
    git(example, "add", "-A")
    git(example, "commit", "-qm", "the PR")
    return example


# ---- 4: the group's options after the command ------------------------------------------------

@pytest.mark.parametrize(("args", "opts", "expected"), [
    (["audit", "--root", "X", "--diff", "d"], (), ["--root", "X", "audit", "--diff", "d"]),
    (["audit", "--root=X"], (), ["--root=X", "audit"]),
    (["--root", "X", "audit", "--stages", "s.yml", "--no-cache"], (),
     ["--root", "X", "--stages", "s.yml", "--no-cache", "audit"]),
    (["where", "--triggers", "t.yml", "pattern"], (),
     ["--triggers", "t.yml", "where", "pattern"]),
    # after `--` the words are the command's (pytest's arguments of `inventory --collect`)
    (["inventory", "--collect", "--", "--root", "X"], (),
     ["inventory", "--collect", "--", "--root", "X"]),
    # a command's own option of the same name stays the command's
    (["launch", "--root", "X"], ("--root",), ["launch", "--root", "X"]),
    (["--root", "X", "stats"], (), ["--root", "X", "stats"]),
    (["--help"], (), ["--help"]),
])
def test_hoist_table(args: list[str], opts: tuple[str, ...], expected: list[str]) -> None:
    assert hoist_globals(args, frozenset(opts)) == expected


def test_root_after_the_command_is_the_same_audit(run_cli: Any) -> None:
    diff = str(EXAMPLE / "pr.diff")
    before = run_cli("--root", str(EXAMPLE), "audit", "--diff", diff, "--format", "json")
    after = run_cli("audit", "--diff", diff, "--root", str(EXAMPLE), "--format", "json")
    assert before.code == after.code == 0, after.err
    assert "No such option" not in after.err and after.out == before.out


# ---- 5: comment --repo OWNER/NAME ------------------------------------------------------------

@pytest.mark.parametrize(("repo", "ok"), [
    ("NVIDIA/TensorRT-LLM", True), ("octo/hello.world_2", True), ("a-b/c", True),
    ("not-a-repo", False), ("-lead/x", False), ("trail-/x", False), ("a--b/x", False),
    ("owner/", False), ("owner/..", False), ("own er/x", False), ("a/b/c", False),
    ("https://github.com/o/n", False),
])
def test_repo_table(repo: str, ok: bool) -> None:
    assert (repo_problem(repo) == "") is ok, repo_problem(repo)


def test_comment_refuses_a_repo_that_is_not_owner_name(run_cli: Any) -> None:
    res = run_cli("--root", str(EXAMPLE), "comment", "--diff", str(EXAMPLE / "pr.diff"),
                  "--repo", "not-a-repo")
    assert res.code == 2 and "expected OWNER/NAME" in res.err, res.err
    assert "github.com/not-a-repo" not in res.out


# ---- 10: comment --fail-on -------------------------------------------------------------------

@pytest.mark.parametrize(("diff", "fail_on", "code"), [
    ("pr-no-thin-guard.diff", None, 0),       # a report: 0 by default, whatever it says
    ("pr-no-thin-guard.diff", "never", 0),
    ("pr-no-thin-guard.diff", "error", 1),    # 1 of 1 behaviour change has no pre-merge guard
    ("pr.diff", "error", 0),                  # guarded pre-merge, 1 warning
    ("pr.diff", "warning", 1),
])
def test_comment_fail_on(run_cli: Any, diff: str, fail_on: str | None, code: int) -> None:
    args = ["--root", str(EXAMPLE), "comment", "--diff", str(EXAMPLE / diff)]
    res = run_cli(*args, *(["--fail-on", fail_on] if fail_on else []))
    assert res.code == code, res.err
    assert "<!-- testdb-audit -->" in res.out, "the comment is printed first"


# ---- 6: replay reads --outcomes before auditing ----------------------------------------------

def test_replay_rejects_unreadable_outcomes_before_auditing(
        run_cli: Any, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import auditor.replay.runner as runner

    def audited(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the commits were audited before --outcomes was read")

    monkeypatch.setattr(runner, "replay", audited)
    binary = tmp_path / "binary.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    res = run_cli("--root", str(repo), "replay", "HEAD~1..HEAD", "--outcomes", str(binary))
    assert res.code == 2 and str(binary) in res.err, res.err
    bad = tmp_path / "results.jsonl"
    bad.write_text('{"commit": "abcdef1", "test": "t", "outcome": "broken"}\n')
    res = run_cli("--root", str(repo), "replay", "HEAD~1..HEAD", "--outcomes", str(bad))
    assert res.code == 2 and f"{bad}:1: outcome 'broken'" in res.err, res.err


# ---- 7: inventory ----------------------------------------------------------------------------

def test_inventory_without_test_sources_says_so(run_cli: Any, example: Path) -> None:
    shutil.rmtree(example / "tests" / "integration" / "defs")
    shutil.rmtree(example / "tests" / "unittest", ignore_errors=True)
    res = run_cli("--root", str(example), "inventory")
    assert res.code == 0, res.err
    assert f"no test sources under {example}" in res.out
    assert "0 test files" not in res.out


def test_inventory_counts_per_file(run_cli: Any) -> None:
    res = run_cli("--root", str(EXAMPLE), "inventory")
    assert res.code == 0, res.err
    lines = res.out.strip().splitlines()
    rows = {ln.split()[0]: ln for ln in lines[:-1]}
    assert "accuracy/test_llm_api_pytorch.py" in rows
    assert all(" item" in ln for ln in rows.values())
    n_items = sum(int(ln.split()[1]) for ln in rows.values())
    assert lines[-1].startswith(f"{plural(len(rows), 'test file')}, {plural(n_items, 'item')} ")


# ---- 9: the work tree as the head ------------------------------------------------------------

def test_header_names_the_work_tree_without_head(run_cli: Any, repo: Path) -> None:
    git(repo, "reset", "-q", "--soft", "HEAD~1")  # the PR's change: uncommitted now
    res = run_cli("--root", str(repo), "audit", "--base", "HEAD")
    head = git(repo, "rev-parse", "HEAD").strip()
    assert res.code == 0, res.err
    assert f"head work tree (uncommitted changes; HEAD {head[:12]})" in res.out
    git(repo, "commit", "-qm", "the PR")
    pr = git(repo, "rev-parse", "HEAD").strip()
    res = run_cli("--root", str(repo), "audit", "--base", "HEAD~1", "--head", "HEAD")
    assert f"head {pr[:12]}" in res.out and "work tree" not in res.out.splitlines()[1]


# ---- 11 and 13: lint says what stats says; plural forms --------------------------------------

def test_lint_notes_the_file_stats_lists_as_skipped(run_cli: Any, example: Path) -> None:
    recipe = example / LISTS / "qa" / "llm_perf_recipe_db.yml"
    recipe.write_text("- model: llama\n  gpus: 8\n", encoding="utf-8")
    note = f"skipped {LISTS}/qa/llm_perf_recipe_db.yml: top level is a list"
    stats = run_cli("--root", str(example), "stats")
    lint = run_cli("--root", str(example), "lint")
    assert note in stats.out, stats.out
    assert f"note: {note}" in lint.err, lint.err
    js = run_cli("--root", str(example), "lint", "--format", "json")
    import json

    assert [s["path"] for s in json.loads(js.out)["skipped_files"]] == [
        f"{LISTS}/qa/llm_perf_recipe_db.yml"]


@pytest.mark.parametrize(("n", "word", "expected"), [
    (0, "error", "0 errors"), (1, "error", "1 error"), (2, "warning", "2 warnings"),
    (1, "finding", "1 finding"), (3, "scope", "3 scopes"),
])
def test_plural_table(n: int, word: str, expected: str) -> None:
    assert plural(n, word) == expected


def test_lint_counts_in_plural_forms(run_cli: Any, example: Path) -> None:
    path = example / LISTS / "test-db" / "l0_h100.yml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("test_chunked_prefill[attn_backend=FLASHINFER]",
                                 "test_chunkd_prefill[attn_backend=FLASHINFER]", 1),
                    encoding="utf-8")
    res = run_cli("--root", str(example), "lint")
    last = res.err.strip().splitlines()[-1]
    assert " 1 error," in last and "1 errors" not in last, last


# ---- 15: a faulty change counted once --------------------------------------------------------

@pytest.mark.parametrize(("covers", "culprits", "counts", "words"), [
    # 3 behaviour changes of c1, c2, c3 and the fault whose culprit is c2: 3, not 4
    ({"change c1 a", "change c2 b", "change c3 c", "fault t x"}, {"fault t x": "c2"},
     (3, 3, 1, 1), "3 behaviour changes (1 of them faulty)"),
    # a fault whose culprit's change the move does not guard: counted beside them
    ({"change c1 a", "fault t x"}, {"fault t x": "c9"}, (2, 1, 1, 0),
     "1 behaviour change and 1 faulty change"),
    # only the fault (the "0 change(s), 1 faulty change(s)")
    ({"fault t x"}, {"fault t x": None}, (1, 0, 1, 0), "1 faulty change"),
    # two behaviour changes of one faulty commit: both changes, the fault once among them
    ({"change c1 a", "change c1 b", "fault t x"}, {"fault t x": "c1"}, (2, 2, 1, 1),
     "2 behaviour changes (1 of them faulty)"),
])
def test_guarded_counts_table(covers: set[str], culprits: dict[str, str | None],
                              counts: tuple[int, int, int, int], words: str) -> None:
    from reports.render_replay import guarded_counts, guarded_words

    got = guarded_counts(frozenset(covers), culprits)
    assert (got["guards"], got["changes"], got["faulty"], got["faulty_among_changes"]) == counts
    assert guarded_words(got) == words


# ---- 17: a test once, at its strongest level -------------------------------------------------

@pytest.mark.parametrize(("levels", "home", "weaker"), [
    ([["a", "b"], ["a", "c"], ["a", "b"]], {"a": 0, "b": 0, "c": 1}, {"a": 2, "b": 1, "c": 0}),
    ([["a"], [], ["a", "a"]], {"a": 0}, {"a": 1}),  # a level lists a test once
    ([], {}, {}),
])
def test_strongest_levels_table(levels: list[list[str]], home: dict[str, int],
                                weaker: dict[str, int]) -> None:
    from reports.render_audit import strongest_levels

    assert strongest_levels(levels) == (home, weaker)


def test_text_audit_shows_each_test_once(run_cli: Any) -> None:
    res = run_cli("--root", str(EXAMPLE), "audit", "--diff", str(EXAMPLE / "pr.diff"))
    assert res.code == 0, res.err
    # a guard's line: five spaces, then its id (its detail lines are indented further)
    shown = [ln.split()[0] for ln in res.out.splitlines()
             if ln.startswith("     ") and not ln.startswith("      ")
             and not ln.strip().startswith("...")]
    assert shown and len(shown) == len(set(shown)), shown
    assert "test_block_reuse_guard[FLASHINFER]" in shown
    assert "also linked by 3 weaker levels" in res.out
    assert "shown above, at a stronger level" in " ".join(res.out.split())  # wrapped anywhere
