"""Paths as git writes them, and diffs that must be refused as ``git apply --check`` refuses
them: quoted non-ASCII paths (core.quotePath) through --base/--head and --diff, CR-only line
endings, deleted and added files whose text differs from the checkout, and errors that point
at the wrong line (a context mismatch, a hunk cut short)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from auditor.diff import from_diff_file, unquote_path
from auditor.replay.gitsource import list_tree, tree_of
from testdb.errors import InputError
from tests.auditor.change_shapes import DEFS, audit_json, commit, shapes_repo
from tests.gitrepo import git

MOD = "tensorrt_llm/ünï/módulo_é.py"
TEST = "ünï/test_módulo.py"  # its test-list spelling
GUARD = f"{TEST}::test_f"


@pytest.mark.parametrize(("quoted", "plain"), [
    ('"b/tensorrt_llm/\\303\\274n\\303\\257/m\\303\\263dulo_\\303\\251.py"',
     "b/tensorrt_llm/ünï/módulo_é.py"),
    ('"a/tab\\there.py"', "a/tab\there.py"),
    ('"a/quote\\"back\\\\slash.py"', 'a/quote"back\\slash.py'),
    ('"a/new\\nline.py"', "a/new\nline.py"),
    ("a/plain name.py", "a/plain name.py"),  # git quotes no space: as it is
    ('"a/\\377bad.py"', "a/\udcffbad.py"),  # not UTF-8: kept as a surrogate escape
    ("/dev/null", "/dev/null"),
])
def test_unquote_path(quoted: str, plain: str) -> None:
    assert unquote_path(quoted) == plain


def _unicode_repo(tmp_path: Path, pre_merge: bool = True) -> Path:
    return shapes_repo(tmp_path / "repo", {
        "tensorrt_llm/__init__.py": "",
        "tensorrt_llm/ünï/__init__.py": "",
        MOD: "def f():\n    return 1\n",
        f"{DEFS}/{TEST}": """\
            from tensorrt_llm.ünï.módulo_é import f


            def test_f():
                assert f() == 1
            """,
    }, pre=[GUARD] if pre_merge else [], post=[] if pre_merge else [GUARD])


# (how the change is given, where its one guard runs) -> (verdict, pre-merge guards, exit)
QUOTED = {
    ("base-head", "pre-merge"): ("pre-merge", [GUARD], 0),
    ("base-head", "post-merge"): ("post-merge-only", [], 1),
    ("diff", "pre-merge"): ("pre-merge", [GUARD], 0),
    ("diff", "post-merge"): ("post-merge-only", [], 1),
}


@pytest.mark.parametrize(("given", "listed"), list(QUOTED))
def test_a_quoted_path_is_audited(run_cli, tmp_path: Path, given: str, listed: str) -> None:  # type: ignore[no-untyped-def]
    """The trap: git writes the path quoted and escaped; read as it stood it ended in `.py"`:
    with --base/--head the change was "No behaviour change found", exit 0 (a silent miss),
    and with --diff "not in the checkout", exit 2. Unquoted, it is the change of ``f``: green
    when its one guard runs pre-merge, red when only post-merge (no false green either way)."""
    repo = _unicode_repo(tmp_path, pre_merge=listed == "pre-merge")
    commit(repo, {MOD: "def f():\n    return 2\n"})
    text = git(repo, "diff", "HEAD~1", "HEAD")
    assert '"a/tensorrt_llm/\\303\\274n' in text  # git quotes it
    if given == "diff":
        (tmp_path / "pr.diff").write_text(text)
        code, data = audit_json(run_cli, repo, "--diff", str(tmp_path / "pr.diff"))
    else:
        code, data = audit_json(run_cli, repo)
    verdict, guards, exit_code = QUOTED[given, listed]
    [b] = data["behaviours"]
    assert (b["path"], b["function"], b["tier"]) == (MOD, "f", "symbol")
    assert (b["verdict"], b["pre_merge_guards"], code) == (verdict, guards, exit_code)


def test_a_quoted_path_outside_root_is_counted(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """--root below the top: the files outside it are named as git wrote them, unquoted."""
    top = tmp_path / "top"
    top.mkdir()
    repo = _unicode_repo(top)
    shutil.rmtree(repo / ".git")  # one repository: the top
    (top / "ñ.txt").write_text("a\n")
    git(top, "init", "-q", "-b", "main")
    git(top, "add", "-A")
    git(top, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "base")
    (top / "ñ.txt").write_text("b\n")
    (repo / MOD).write_text("def f():\n    return 2\n")
    git(top, "add", "-A")
    git(top, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "change")
    _, data = audit_json(run_cli, repo)
    assert any("(e.g. ñ.txt)" in n for n in data["notes"]), data["notes"]
    assert [b["path"] for b in data["behaviours"]] == [MOD]


def test_replay_reads_non_ascii_tree_paths(tmp_path: Path) -> None:
    """The replay's trees come from ``ls-tree -z``: names as they are, never quoted."""
    repo = _unicode_repo(tmp_path)
    assert MOD in list_tree(str(repo), tree_of(str(repo), "HEAD"))


def _diff(repo: Path) -> str:
    return git(repo, "diff", "HEAD~1", "HEAD")


@pytest.mark.parametrize("ending", ["\r\n", "\r"])
def test_crlf_and_cr_only_diffs_read_as_lf(run_cli, tmp_path: Path, ending: str) -> None:  # type: ignore[no-untyped-def]
    """A diff saved with CR-only line endings (classic Mac OS) was "not a unified diff";
    it is read as CRLF is, to the same audit as its LF form."""
    repo = _unicode_repo(tmp_path)
    commit(repo, {MOD: "def f():\n    return 2\n"})
    lf = tmp_path / "lf.diff"
    lf.write_text(_diff(repo))
    other = tmp_path / "other.diff"
    other.write_bytes(lf.read_bytes().replace(b"\n", ending.encode()))
    _, want = audit_json(run_cli, repo, "--diff", str(lf))
    _, got = audit_json(run_cli, repo, "--diff", str(other))
    assert got["behaviours"] == want["behaviours"] and got["findings"] == want["findings"]
    assert [b["function"] for b in got["behaviours"]] == ["f"]


# ---- diffs refused as `git apply --check` refuses them -------------------------------------

TEXT = "".join(f"x{i} = {i}\n" for i in range(1, 41))


def _plain_repo(tmp_path: Path) -> Path:
    return shapes_repo(tmp_path / "repo", {"tensorrt_llm/__init__.py": "",
                                           "tensorrt_llm/m.py": TEXT}, pre=[], post=[])


def test_a_deletion_whose_text_differs_is_refused(tmp_path: Path) -> None:
    """Trap: a deletion diff whose `-` lines are not the checkout's file was accepted (the
    base side was never compared), though `git apply --check` refuses it. Twin: the true
    deletion diff is accepted. (A head-side checkout lacks the file: nothing to compare, and
    `git apply -R --check` accepts both, as the audit does.)"""
    repo = _plain_repo(tmp_path)
    commit(repo, {"tensorrt_llm/m.py": None})
    good = _diff(repo)
    bad = good.replace("-x27 = 27\n", "-x27 = 270\n")
    (tmp_path / "good.diff").write_text(good)
    (tmp_path / "bad.diff").write_text(bad)
    assert git_apply_check(repo, tmp_path / "bad.diff", reverse=True) == 0
    assert from_diff_file(str(repo), str(tmp_path / "bad.diff")).checkout_side == "head"
    git(repo, "checkout", "-q", "HEAD~1")
    change = from_diff_file(str(repo), str(tmp_path / "good.diff"))
    assert change.checkout_side == "base" and change.files[0].new_path is None
    assert change.files[0].old_text == TEXT
    assert git_apply_check(repo, tmp_path / "bad.diff", reverse=False) != 0
    with pytest.raises(InputError) as err:
        from_diff_file(str(repo), str(tmp_path / "bad.diff"))
    assert err.value.loc is not None and err.value.loc.line == 27
    assert "line 27 holds 'x27 = 27'" in str(err.value)


def test_a_deletion_of_part_of_the_file_is_refused(tmp_path: Path) -> None:
    """A deletion diff that lists fewer lines than the checkout's file holds."""
    repo = _plain_repo(tmp_path)
    commit(repo, {"tensorrt_llm/m.py": None})
    short = _diff(repo).replace("@@ -1,40 +0,0 @@", "@@ -1,39 +0,0 @@").replace(
        "-x40 = 40\n", "")
    git(repo, "checkout", "-q", "HEAD~1")
    (tmp_path / "short.diff").write_text(short)
    assert git_apply_check(repo, tmp_path / "short.diff", reverse=False) != 0
    with pytest.raises(InputError, match=r"1 line\(s\) more than the diff's text"):
        from_diff_file(str(repo), str(tmp_path / "short.diff"))


def test_an_added_file_whose_text_differs_is_refused(tmp_path: Path) -> None:
    """The other direction: the checkout is the head side and the diff adds a file whose
    `+` lines are not the checkout's file."""
    repo = _plain_repo(tmp_path)
    commit(repo, {"tensorrt_llm/n.py": "a = 1\nb = 2\n"})
    good = _diff(repo)
    (tmp_path / "good.diff").write_text(good)
    (tmp_path / "bad.diff").write_text(good.replace("+b = 2\n", "+b = 3\n"))
    assert from_diff_file(str(repo), str(tmp_path / "good.diff")).files[0].old_path is None
    assert git_apply_check(repo, tmp_path / "bad.diff", reverse=True) != 0
    with pytest.raises(InputError, match=r"line 2 holds 'b = 2'"):
        from_diff_file(str(repo), str(tmp_path / "bad.diff"))


def git_apply_check(repo: Path, diff: Path, *, reverse: bool) -> int:
    import subprocess

    return subprocess.run(["git", "-C", str(repo), "apply", "--check",
                           *(["-R"] if reverse else []), str(diff)],
                          capture_output=True, check=False).returncode


@pytest.mark.parametrize("checkout", ["head", "base"])
def test_a_context_mismatch_points_at_its_line(tmp_path: Path, checkout: str) -> None:
    """A wrong context line at 27: the base-side checkout failed the head-side try first at
    the changed line 25 and said so; the side that fits further is the one reported."""
    repo = _plain_repo(tmp_path)
    commit(repo, {"tensorrt_llm/m.py": TEXT.replace("x25 = 25\n", "x25 = 250\n")})
    bad = _diff(repo).replace(" x27 = 27\n", " x27 = 999\n")
    if checkout == "base":
        git(repo, "checkout", "-q", "HEAD~1")
    (tmp_path / "bad.diff").write_text(bad)
    with pytest.raises(InputError) as err:
        from_diff_file(str(repo), str(tmp_path / "bad.diff"))
    assert err.value.loc is not None
    assert (err.value.loc.path, err.value.loc.line) == ("tensorrt_llm/m.py", 27)
    diff_line = bad.splitlines().index(" x27 = 999") + 1
    assert f"bad.diff:{diff_line}) has 'x27 = 999'" in str(err.value)


@pytest.mark.parametrize(("cut", "why"), [
    (1, "1 old and 1 new line(s) are missing where the diff ends"),
    (2, "2 old and 2 new line(s) are missing where the diff ends"),
])
def test_a_truncated_hunk_points_at_the_hunk(tmp_path: Path, cut: int, why: str) -> None:
    """Was `FILE:1: not a unified diff: Hunk is shorter than expected`."""
    repo = _plain_repo(tmp_path)
    commit(repo, {"tensorrt_llm/m.py": TEXT.replace("x25 = 25\n", "x25 = 250\n")})
    lines = _diff(repo).splitlines(keepends=True)
    (tmp_path / "cut.diff").write_text("".join(lines[:-cut]))
    header = next(n for n, ln in enumerate(lines, 1) if ln.startswith("@@"))
    with pytest.raises(InputError) as err:
        from_diff_file(str(repo), str(tmp_path / "cut.diff"))
    assert err.value.loc is not None and err.value.loc.line == header
    assert why in str(err.value) and "@@ -22,7 +22,7 @@" in str(err.value)


def test_a_hunk_cut_short_by_the_next_file_points_at_the_hunk(tmp_path: Path) -> None:
    repo = _plain_repo(tmp_path)
    commit(repo, {"tensorrt_llm/m.py": TEXT.replace("x25 = 25\n", "x25 = 250\n"),
                  "tensorrt_llm/n.py": "a = 1\n"})
    text = _diff(repo)
    cut = text.replace(" x28 = 28\n", "")
    (tmp_path / "cut.diff").write_text(cut)
    with pytest.raises(InputError) as err:
        from_diff_file(str(repo), str(tmp_path / "cut.diff"))
    header = next(n for n, ln in enumerate(cut.splitlines(), 1) if ln.startswith("@@"))
    assert err.value.loc is not None and err.value.loc.line == header
    assert "ends it" in str(err.value)
